/*
 * Unit tests of shim/report: the dump's file (exclusive temporary name,
 * never a planted link or FIFO, renamed into place), the load-time check
 * of the stats directory, the once-only exit report, the periodic dump and
 * telemetry of the reporter thread, and the signals: a job ended by
 * SIGTERM or SIGINT leaves its final dump and dies of the signal; a
 * program's own handler and SIG_IGN are kept; SIG_DFL set later (as Python
 * does) is kept as the shim's handler and reported as SIG_DFL.
 *
 * Whatever starts the reporter or installs handlers runs in a forked child
 * (in_child), so this process keeps its own signal dispositions; a child
 * reports failures on its stderr, which the test prints, and its exit
 * status.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <jansson.h>

#include "cunit_main.h"
#include "core/config.h"
#include "report/file.h"
#include "report/report.h"
#include "core/stats.h"

static char tmpdir[64];
static struct config cfg;

/*
 * The signal tests need the default dispositions the shim takes over: a
 * shell that starts this suite in the background (no job control) leaves
 * SIGINT and SIGQUIT ignored, and a child would then wait for ever.
 */
static int suite_init(void)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	strcpy(tmpdir, "/tmp/vrampool-test-report-XXXXXX");
	return mkdtemp(tmpdir) == NULL;
}

static int suite_clean(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd);
}

static const char *no_env(const char *name)
{
	(void)name;
	return NULL;
}

/* A path in the test directory. */
static const char *in_tmp(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
	return buf;
}

/* Reads a whole small file into buf (NUL-terminated); returns its length or -1. */
static long slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	ssize_t n;

	buf[0] = '\0';
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/*
 * The configuration the reporter gets: defaults, then the given stats and
 * telemetry paths and interval. Resets the counters and re-arms the
 * reporter as a fresh process would have them.
 */
static void setup(const char *stats, const char *tele, uint64_t interval, int quiet)
{
	config_load(&cfg, no_env);
	snprintf(cfg.stats_path, sizeof(cfg.stats_path), "%s", stats ? stats : "");
	snprintf(cfg.telemetry_path, sizeof(cfg.telemetry_path), "%s", tele ? tele : "");
	cfg.telemetry_s = interval;
	cfg.quiet = quiet;
	stats_reset(1, "3072");
	report_atfork_child();
	report_setup(&cfg);
}

/* Runs fn in a child process with stderr into errpath; returns the wait status. */
static int in_child(int (*fn)(void), const char *errpath)
{
	int status = -1, fd;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		_exit(fn());
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

/* Prints a child's stderr when a check on it failed. */
static void show(const char *errpath)
{
	char buf[4096];

	if (slurp(errpath, buf, sizeof(buf)) > 0)
		fprintf(stdout, "\n  child stderr:\n%s", buf);
}

/* Loads a JSON file; NULL when it does not parse. */
static json_t *load(const char *path)
{
	json_error_t jerr;

	return json_load_file(path, 0, &jerr);
}

/* Runs fn with fd 2 captured into out. */
static void captured(void (*fn)(void), char *out, size_t len)
{
	FILE *tmp = tmpfile();
	int saved;
	size_t n;

	out[0] = '\0';
	CU_ASSERT_PTR_NOT_NULL_FATAL(tmp);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fileno(tmp), STDERR_FILENO);
	fn();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, len - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
}

/* ---- files ------------------------------------------------------------------ */

static ino_t inode_of(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 ? st.st_ino : 0;
}

static void test_file_renamed_into_place(void)
{
	char path[128], tmp[160], buf[64];
	struct stat st;
	ino_t before;
	mode_t mask = umask(022);

	in_tmp(path, sizeof(path), "w.json");
	CU_ASSERT_EQUAL(report_write_file(path, "old\n", 4), 0);
	before = inode_of(path);
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), 0);
	CU_ASSERT(inode_of(path) != before);	/* replaced by rename, not rewritten */
	CU_ASSERT_EQUAL(slurp(path, buf, sizeof(buf)), 3);
	CU_ASSERT_STRING_EQUAL(buf, "{}\n");
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
	/* the usual mode once in place (the temporary one was owner-only) */
	CU_ASSERT_EQUAL(stat(path, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 0777, 0644);
	umask(mask);
	unlink(path);
}

static void test_file_never_follows_a_planted_link(void)
{
	char path[128], tmp[160], target[128], buf[64];

	in_tmp(path, sizeof(path), "l.json");
	in_tmp(target, sizeof(target), "victim");
	CU_ASSERT_EQUAL(report_write_file(target, "precious\n", 9), 0);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	CU_ASSERT_EQUAL_FATAL(symlink(target, tmp), 0);
	CU_ASSERT_EQUAL(report_write_file(path, "{\"a\": 1}\n", 9), 0);
	CU_ASSERT_EQUAL(slurp(target, buf, sizeof(buf)), 9);
	CU_ASSERT_STRING_EQUAL(buf, "precious\n");	/* the link's target is untouched */
	CU_ASSERT_EQUAL(slurp(path, buf, sizeof(buf)), 9);
	CU_ASSERT_STRING_EQUAL(buf, "{\"a\": 1}\n");
	CU_ASSERT(inode_of(tmp) != 0);			/* the planted link is left as it was */
	unlink(tmp);
	/* a dangling link too */
	CU_ASSERT_EQUAL_FATAL(symlink("/nonexistent/x", tmp), 0);
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), 0);
	CU_ASSERT_EQUAL(access("/nonexistent/x", F_OK), -1);
	unlink(tmp);
	unlink(path);
	unlink(target);
}

static void test_file_never_waits_on_a_fifo(void)
{
	char path[128], tmp[160], buf[64];
	struct stat st;

	in_tmp(path, sizeof(path), "f.json");
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	CU_ASSERT_EQUAL_FATAL(mkfifo(tmp, 0600), 0);
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), 0);	/* returns: nobody reads the FIFO */
	CU_ASSERT_EQUAL(slurp(path, buf, sizeof(buf)), 3);
	CU_ASSERT_EQUAL(lstat(tmp, &st), 0);
	CU_ASSERT(S_ISFIFO(st.st_mode));
	unlink(tmp);
	unlink(path);
}

static void test_file_special_path_written_in_place(void)
{
	char path[128], link[128], buf[64];
	struct stat st;
	int rfd;

	/* a FIFO read by a collector gets the bytes and stays a FIFO */
	in_tmp(path, sizeof(path), "collector.fifo");
	CU_ASSERT_EQUAL_FATAL(mkfifo(path, 0600), 0);
	rfd = open(path, O_RDONLY | O_NONBLOCK);
	CU_ASSERT_FATAL(rfd >= 0);
	CU_ASSERT_EQUAL(report_write_file(path, "{\"a\":1}\n", 8), 0);
	CU_ASSERT_EQUAL(read(rfd, buf, sizeof(buf)), 8);
	CU_ASSERT_EQUAL(memcmp(buf, "{\"a\":1}\n", 8), 0);
	close(rfd);
	CU_ASSERT(lstat(path, &st) == 0 && S_ISFIFO(st.st_mode));
	/* nobody reading: the write fails at once and the FIFO is left */
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), -ENXIO);
	CU_ASSERT(lstat(path, &st) == 0 && S_ISFIFO(st.st_mode));
	/* reached through a link, as /dev/stderr is */
	in_tmp(link, sizeof(link), "collector.link");
	CU_ASSERT_EQUAL_FATAL(symlink(path, link), 0);
	rfd = open(path, O_RDONLY | O_NONBLOCK);
	CU_ASSERT_FATAL(rfd >= 0);
	CU_ASSERT_EQUAL(report_write_file(link, "{}\n", 3), 0);
	CU_ASSERT_EQUAL(read(rfd, buf, sizeof(buf)), 3);
	close(rfd);
	CU_ASSERT(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
	unlink(link);
	unlink(path);
	/* a character device (/dev/null) is written, never replaced */
	CU_ASSERT_EQUAL(report_write_file("/dev/null", "{}\n", 3), 0);
	CU_ASSERT(lstat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
	/* a directory is refused, not renamed over */
	in_tmp(path, sizeof(path), "adir");
	CU_ASSERT_EQUAL_FATAL(mkdir(path, 0700), 0);
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), -EISDIR);
	CU_ASSERT(lstat(path, &st) == 0 && S_ISDIR(st.st_mode));
	rmdir(path);
}

/*
 * Issue 19: a regular file that is not a dump is not the dump's to
 * replace; an empty one, a dump, a link (the regular way replaces the
 * link, not its target) and a FIFO or device are.
 */
static void test_file_foreign_regular_file_is_left_alone(void)
{
	char path[128], link[128];

	in_tmp(path, sizeof(path), "notes.txt");
	CU_ASSERT_EQUAL(report_path_foreign(path), 0);		/* nothing there */
	CU_ASSERT_EQUAL(report_write_file(path, "", 0), 0);
	CU_ASSERT_EQUAL(report_path_foreign(path), 0);		/* empty */
	CU_ASSERT_EQUAL(report_write_file(path, "{\"vrampool\": 1, \"pid\": 3}\n", 25), 0);
	CU_ASSERT_EQUAL(report_path_foreign(path), 0);		/* a dump */
	CU_ASSERT_EQUAL(report_write_file(path, "{\"vrampool\"", 11), 0);
	CU_ASSERT_EQUAL(report_path_foreign(path), 1);		/* shorter than a dump's first bytes */
	CU_ASSERT_EQUAL(report_write_file(path, "precious\n", 9), 0);
	CU_ASSERT_EQUAL(report_path_foreign(path), 1);
	CU_ASSERT_EQUAL(report_write_file(path, "{\"vram\": 1, \"pool\": 2}\n", 24), 0);
	CU_ASSERT_EQUAL(report_path_foreign(path), 1);		/* JSON, but no dump */
	in_tmp(link, sizeof(link), "notes.link");
	CU_ASSERT_EQUAL_FATAL(symlink(path, link), 0);
	CU_ASSERT_EQUAL(report_path_foreign(link), 0);
	CU_ASSERT_EQUAL(report_path_foreign("/dev/null"), 0);
	unlink(link);
	unlink(path);
}

/* What the race hook puts in place of the path: a link to race_target. */
static char race_target[128];

static void race_swap_for_link(const char *path)
{
	unlink(path);
	if (symlink(race_target, path) != 0)
		fprintf(stderr, "symlink: %s\n", strerror(errno));
}

/*
 * The stats path is checked, then opened: a FIFO (or a link to one) swapped
 * in between for a link to a regular file is never written through, nor
 * is a FIFO swapped for a link to another FIFO. The hook makes the swap
 * land in that window every time.
 */
static void test_file_swapped_between_check_and_open(void)
{
	char path[128], fifo[128], buf[64];
	struct stat st;
	int rfd;

	in_tmp(race_target, sizeof(race_target), "victim");
	in_tmp(path, sizeof(path), "race.json");
	CU_ASSERT_EQUAL_FATAL(report_write_file(race_target, "precious\n", 9), 0);
	/* a FIFO with a reader, swapped for a link to the victim */
	CU_ASSERT_EQUAL_FATAL(mkfifo(path, 0600), 0);
	rfd = open(path, O_RDONLY | O_NONBLOCK);
	CU_ASSERT_FATAL(rfd >= 0);
	report_file_set_race_hook(race_swap_for_link);
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), 0);
	report_file_set_race_hook(NULL);
	close(rfd);
	CU_ASSERT_EQUAL(slurp(race_target, buf, sizeof(buf)), 9);
	CU_ASSERT_STRING_EQUAL(buf, "precious\n");		/* never written through */
	CU_ASSERT(lstat(path, &st) == 0 && S_ISREG(st.st_mode));	/* the name was replaced */
	CU_ASSERT_EQUAL(slurp(path, buf, sizeof(buf)), 3);
	unlink(path);
	/* a link the user named, to a FIFO, retargeted to the victim */
	in_tmp(fifo, sizeof(fifo), "race.fifo");
	CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
	CU_ASSERT_EQUAL_FATAL(symlink(fifo, path), 0);
	rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	CU_ASSERT_FATAL(rfd >= 0);
	report_file_set_race_hook(race_swap_for_link);
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), 0);
	report_file_set_race_hook(NULL);
	CU_ASSERT(read(rfd, buf, sizeof(buf)) <= 0);	/* nothing reached the FIFO either */
	close(rfd);
	CU_ASSERT_EQUAL(slurp(race_target, buf, sizeof(buf)), 9);
	CU_ASSERT_STRING_EQUAL(buf, "precious\n");
	CU_ASSERT(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
	unlink(path);
	unlink(race_target);
	/* a FIFO swapped for a link to another FIFO: the link is not followed (O_NOFOLLOW) */
	CU_ASSERT_EQUAL_FATAL(mkfifo(path, 0600), 0);
	snprintf(race_target, sizeof(race_target), "%s", fifo);
	rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	CU_ASSERT_FATAL(rfd >= 0);
	report_file_set_race_hook(race_swap_for_link);
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), 0);
	report_file_set_race_hook(NULL);
	CU_ASSERT(read(rfd, buf, sizeof(buf)) <= 0);
	close(rfd);
	CU_ASSERT(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
	unlink(path);
	unlink(fifo);
}

static void test_file_every_name_taken(void)
{
	char path[128], tmp[160];
	int i;

	in_tmp(path, sizeof(path), "t.json");
	for (i = 0; i < 16; i++) {
		if (i == 0)
			snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
		else
			snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%d", path, (long)getpid(), i);
		CU_ASSERT_EQUAL_FATAL(mkfifo(tmp, 0600), 0);
	}
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), -EEXIST);
	CU_ASSERT_EQUAL(access(path, F_OK), -1);
	for (i = 0; i < 16; i++) {
		if (i == 0)
			snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
		else
			snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%d", path, (long)getpid(), i);
		unlink(tmp);
	}
	in_tmp(path, sizeof(path), "missing/t.json");
	CU_ASSERT_EQUAL(report_write_file(path, "{}\n", 3), -ENOENT);
}

/* ---- load time and exit ------------------------------------------------------ */

static char setup_path[256];

static void setup_missing(void)
{
	setup(setup_path, NULL, 10, 0);
}

static void setup_missing_quiet(void)
{
	setup(setup_path, NULL, 10, 1);
}

static void test_missing_directory_reported_at_load(void)
{
	char out[2048];

	snprintf(setup_path, sizeof(setup_path), "%s/no\033[1mdir/s-%%p.json", tmpdir);
	captured(setup_missing, out, sizeof(out));
	CU_ASSERT(strncmp(out, "vrampool: VRAMPOOL_STATS: cannot write in '", 43) == 0);
	CU_ASSERT(strstr(out, "no\\x1b[1mdir'") != NULL);		/* escaped, not raw */
	CU_ASSERT(strstr(out, "no such file or directory") != NULL);
	CU_ASSERT(strchr(out, '\033') == NULL);
	CU_ASSERT(strchr(out, '\n') == out + strlen(out) - 1);	/* one line */
	/* a file where the directory should be */
	in_tmp(setup_path, sizeof(setup_path), "plainfile");
	CU_ASSERT_EQUAL(report_write_file(setup_path, "x", 1), 0);
	strcat(setup_path, "/s.json");
	captured(setup_missing, out, sizeof(out));
	CU_ASSERT(strstr(out, "not a directory") != NULL);
	/* a good directory: silence */
	in_tmp(setup_path, sizeof(setup_path), "s.json");
	captured(setup_missing, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "");
}

static void test_exit_report_once(void)
{
	char path[128], out[4096];
	json_t *root;

	in_tmp(path, sizeof(path), "exit.json");
	setup(path, NULL, 10, 0);
	captured(report_exit, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "");		/* the process never used CUDA */
	CU_ASSERT_EQUAL(access(path, F_OK), -1);

	stats_mark_used();
	stats_add(ST_H2D_CALLS, 5);
	captured(report_exit, out, sizeof(out));
	CU_ASSERT(strncmp(out, "vrampool: 5 host-to-device copies", 33) == 0);
	root = load(path);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT(json_is_true(json_object_get(root, "final")));
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "ended_by")), "exit");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "pid")), getpid());
	CU_ASSERT(json_is_string(json_object_get(root, "host")));
	CU_ASSERT(json_is_null(json_object_get(root, "rank")));
	json_decref(root);

	/* once */
	stats_add(ST_H2D_CALLS, 1);
	captured(report_exit, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "");
	root = load(path);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(root, "copies"), "h2d_calls")), 5);
	json_decref(root);
	unlink(path);

	/* quiet: the dump and no summary; a dump that cannot be written: one line, at load only */
	in_tmp(setup_path, sizeof(setup_path), "gone/exit.json");
	captured(setup_missing_quiet, out, sizeof(out));
	CU_ASSERT(strstr(out, "cannot write in") != NULL);
	CU_ASSERT(strchr(out, '\n') == out + strlen(out) - 1);
	stats_mark_used();
	captured(report_exit, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "");
}

/* ---- the reporter and signals, in children ------------------------------------ */

static char child_stats[256], child_tele[256];

/* The child's start: counters as after some copies, then the first CUDA call. */
static void child_start(uint64_t interval)
{
	setup(child_stats, child_tele[0] ? child_tele : NULL, interval, 0);
	stats_mark_used();
	stats_add(ST_H2D_CALLS, 7);
	stats_add(ST_BYTES_REQUESTED, 7 * 3072);
	stats_add(ST_BYTES_H2D, 7 * 3072);
	report_start();
}

/* Waits until path holds text (at most 20 s). Returns 0 when it does. */
static int child_wait_for(const char *path, const char *text)
{
	char buf[16384];
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	int i;

	for (i = 0; i < 1000; i++) {
		if (slurp(path, buf, sizeof(buf)) > 0 && strstr(buf, text))
			return 0;
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "child: %s never held %s: %s\n", path, text, buf);
	return 1;
}

static int child_sigterm(void)
{
	child_start(10);
	kill(getpid(), SIGTERM);
	pause();
	return 3;	/* not reached: the signal ends the child */
}

static int child_periodic(void)
{
	child_start(1);
	/* the first dump comes soon after the start, and says the job runs */
	if (child_wait_for(child_stats, "\"final\": false, \"ended_by\": null"))
		return 1;
	if (child_wait_for(child_tele, "\"rows_seen\""))
		return 1;
	stats_add(ST_ROWS_SEEN, 11);
	if (child_wait_for(child_tele, "\"rows_seen\": 11"))
		return 1;
	kill(getpid(), SIGINT);
	pause();
	return 3;
}

static void test_sigterm_leaves_final_dump(void)
{
	char err[128], buf[8192];
	json_t *root;
	int status;

	in_tmp(child_stats, sizeof(child_stats), "sigterm.json");
	child_tele[0] = '\0';
	in_tmp(err, sizeof(err), "sigterm.err");
	status = in_child(child_sigterm, err);
	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	if (!WIFSIGNALED(status))
		show(err);
	root = load(child_stats);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT(json_is_true(json_object_get(root, "final")));
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "ended_by")), "SIGTERM");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(root, "copies"), "h2d_calls")), 7);
	json_decref(root);
	slurp(err, buf, sizeof(buf));
	CU_ASSERT(strncmp(buf, "vrampool: 7 host-to-device copies", 33) == 0);
}

static void test_periodic_dump_and_telemetry(void)
{
	char err[128], buf[8192];
	json_t *root;
	int status;

	in_tmp(child_stats, sizeof(child_stats), "periodic.json");
	in_tmp(child_tele, sizeof(child_tele), "periodic.jsonl");
	in_tmp(err, sizeof(err), "periodic.err");
	status = in_child(child_periodic, err);
	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT);
	if (!WIFSIGNALED(status))
		show(err);
	root = load(child_stats);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "ended_by")), "SIGINT");
	json_decref(root);
	/* the last telemetry line is the final one */
	CU_ASSERT(slurp(child_tele, buf, sizeof(buf)) > 0);
	CU_ASSERT(strstr(buf, "\"rows_seen\": 0") != NULL);
	CU_ASSERT(strstr(buf, "\"rows_seen\": 11") != NULL);
	CU_ASSERT(strstr(buf, "\"state\": \"dormant\", \"stood_aside\": 0, \"ledger\": []}\n") != NULL);
	child_tele[0] = '\0';
}

static volatile sig_atomic_t own_ran;

static void own_handler(int sig)
{
	(void)sig;
	own_ran = 1;
}

/* A handler installed before the start is the program's: it stays. */
static int child_own_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = own_handler;
	sigaction(SIGTERM, &sa, NULL);
	child_start(10);
	kill(getpid(), SIGTERM);
	if (!own_ran) {
		fprintf(stderr, "child: the program's handler did not run\n");
		return 1;
	}
	return 7;
}

/* SIG_IGN before the start stays ignored. */
static int child_ignored(void)
{
	signal(SIGTERM, SIG_IGN);
	child_start(10);
	kill(getpid(), SIGTERM);
	return 9;
}

static void test_own_handler_and_ignore_kept(void)
{
	char err[128];
	int status;

	in_tmp(child_stats, sizeof(child_stats), "own.json");
	in_tmp(err, sizeof(err), "own.err");
	status = in_child(child_own_handler, err);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 7);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 7)
		show(err);
	in_tmp(child_stats, sizeof(child_stats), "ign.json");
	status = in_child(child_ignored, err);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 9);
}

/* An action with handler h, no flags, an empty mask. */
static struct sigaction action_of(void (*h)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	return sa;
}

/* What the program is told, what is really installed. */
static int child_sigaction_view(void)
{
	struct sigaction dfl = action_of(SIG_DFL), mine = action_of(own_handler), old, real;
	int bad = 0;

	child_start(10);

	/* owned: the program sees SIG_DFL, the shim's handler is installed */
	report_sigaction(SIGTERM, NULL, &old);
	sigaction(SIGTERM, NULL, &real);
	bad |= old.sa_handler != SIG_DFL;
	bad |= real.sa_handler == SIG_DFL || real.sa_handler == SIG_IGN;
	/* setting SIG_DFL keeps the shim's handler */
	bad |= report_sigaction(SIGTERM, &dfl, &old) != 0 || old.sa_handler != SIG_DFL;
	sigaction(SIGTERM, NULL, &old);
	bad |= old.sa_handler != real.sa_handler;
	if (bad)
		fprintf(stderr, "child: step 1 %d\n", bad);
	/* the program's own handler replaces it; it is reported back as its own */
	bad |= report_sigaction(SIGTERM, &mine, &old) != 0 || old.sa_handler != SIG_DFL;
	sigaction(SIGTERM, NULL, &old);
	bad |= old.sa_handler != own_handler;
	report_sigaction(SIGTERM, NULL, &old);
	bad |= old.sa_handler != own_handler;
	if (bad)
		fprintf(stderr, "child: step 2 %d\n", bad);
	/* back to SIG_DFL (Python before it re-raises): the shim takes it again */
	bad |= report_sigaction(SIGTERM, &dfl, &old) != 0 || old.sa_handler != own_handler;
	sigaction(SIGTERM, NULL, &old);
	bad |= old.sa_handler != real.sa_handler;
	/* one struct for both arguments */
	old = dfl;
	bad |= report_sigaction(SIGTERM, &old, &old) != 0 || old.sa_handler != SIG_DFL;
	/* another signal goes through untouched */
	bad |= report_sigaction(SIGUSR1, &mine, NULL) != 0;
	sigaction(SIGUSR1, NULL, &old);
	bad |= old.sa_handler != own_handler;
	if (bad)
		fprintf(stderr, "child: step 3 %d\n", bad);
	return bad ? 1 : 0;
}

/*
 * A handler installed by a route report_sigaction does not see (the C
 * library's sigaction called directly here, as a raw rt_sigaction system
 * call or glibc's internal one would be): asked, report_sigaction tells
 * the program's handler, not SIG_DFL; SIG_DFL set back through it is the
 * shim's again, and SIGTERM then leaves the final dump.
 */
static int child_unseen_route(void)
{
	struct sigaction mine = action_of(own_handler), dfl = action_of(SIG_DFL), old;
	int bad = 0;

	child_start(10);
	sigaction(SIGTERM, &mine, NULL);		/* behind the shim's back */
	report_sigaction(SIGTERM, NULL, &old);
	if (old.sa_handler != own_handler) {
		fprintf(stderr, "child: the query says %s, not the program's handler\n",
			old.sa_handler == SIG_DFL ? "SIG_DFL" : "something else");
		bad = 1;
	}
	/* SIG_DFL back: really back to the shim (it had kept the program's handler) */
	if (report_sigaction(SIGTERM, &dfl, &old) != 0 || old.sa_handler != own_handler) {
		fprintf(stderr, "child: setting SIG_DFL did not report the program's handler\n");
		bad = 1;
	}
	sigaction(SIGTERM, NULL, &old);
	if (old.sa_handler == own_handler) {
		fprintf(stderr, "child: the program's handler is still installed after SIG_DFL\n");
		bad = 1;
	}
	if (bad)
		return 1;
	kill(getpid(), SIGTERM);
	pause();
	return own_ran ? 42 : 3;
}

/*
 * Python's way: its own SIGINT handler from the start (not the shim's);
 * at the end SIG_DFL, then SIGINT to itself. The shim reports and the
 * process dies of SIGINT.
 */
static int child_python_exit(void)
{
	struct sigaction sa, dfl;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = own_handler;
	sigaction(SIGINT, &sa, NULL);
	child_start(10);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	if (report_sigaction(SIGINT, &dfl, NULL) != 0)
		return 1;
	kill(getpid(), SIGINT);
	pause();
	return 3;
}

/* Runs fn in a child (its dump NAME.json): it must die of sig, its final dump ended by ended_by. */
static void child_dies_with_dump(int (*fn)(void), const char *name, int sig, const char *ended_by)
{
	char err[128], file[64];
	json_t *root;
	int status;

	snprintf(file, sizeof(file), "%s.json", name);
	in_tmp(child_stats, sizeof(child_stats), file);
	snprintf(file, sizeof(file), "%s.err", name);
	in_tmp(err, sizeof(err), file);
	status = in_child(fn, err);
	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == sig);
	if (!WIFSIGNALED(status))
		show(err);
	root = load(child_stats);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "ended_by")), ended_by);
	json_decref(root);
}

static void test_sigaction_view(void)
{
	char err[128];
	int status;

	in_tmp(child_stats, sizeof(child_stats), "view.json");
	in_tmp(err, sizeof(err), "view.err");
	status = in_child(child_sigaction_view, err);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		show(err);

	child_dies_with_dump(child_python_exit, "python", SIGINT, "SIGINT");
}

static void test_unseen_route_is_the_programs(void)
{
	child_dies_with_dump(child_unseen_route, "unseen", SIGTERM, "SIGTERM");
}

/*
 * A handler the program sets to run once (SA_RESETHAND), before the start
 * (the C library's sigaction: the shim finds it in place) or after it:
 * it runs on the first SIGTERM, the program is told SIG_DFL after, and the
 * second SIGTERM leaves the final dump and ends the process.
 */
static int child_oneshot(int before)
{
	struct sigaction sa = action_of(own_handler), old;

	sa.sa_flags = SA_RESETHAND;
	if (before)
		sigaction(SIGTERM, &sa, NULL);
	child_start(10);
	if (!before && report_sigaction(SIGTERM, &sa, NULL) != 0)
		return 1;
	report_sigaction(SIGTERM, NULL, &old);
	if (old.sa_handler != own_handler || !(old.sa_flags & SA_RESETHAND)) {
		fprintf(stderr, "child: the query does not say the program's run-once handler\n");
		return 1;
	}
	kill(getpid(), SIGTERM);
	if (!own_ran) {
		fprintf(stderr, "child: the program's handler did not run\n");
		return 1;
	}
	report_sigaction(SIGTERM, NULL, &old);
	if (old.sa_handler != SIG_DFL) {
		fprintf(stderr, "child: after it ran, the query does not say SIG_DFL\n");
		return 1;
	}
	kill(getpid(), SIGTERM);
	pause();
	return 3;
}

static int child_oneshot_before(void)
{
	return child_oneshot(1);
}

static int child_oneshot_after(void)
{
	return child_oneshot(0);
}

static void test_oneshot_handler(void)
{
	child_dies_with_dump(child_oneshot_before, "oneshot-before", SIGTERM, "SIGTERM");
	child_dies_with_dump(child_oneshot_after, "oneshot-after", SIGTERM, "SIGTERM");
}

/* A forked child that has not used CUDA yet dies of a signal at once, writing nothing. */
static int child_forks(void)
{
	int status;
	pid_t pid;

	child_start(10);
	pid = fork();
	if (pid == 0) {
		stats_reset(1, "3072");
		report_atfork_child();
		kill(getpid(), SIGTERM);
		pause();
		_exit(3);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM) {
		fprintf(stderr, "child: grandchild status %d\n", status);
		return 1;
	}
	return 0;
}

static void test_fork_child_dies_at_once(void)
{
	char err[128], buf[4096];
	int status;

	in_tmp(child_stats, sizeof(child_stats), "fork-%p.json");
	in_tmp(err, sizeof(err), "fork.err");
	status = in_child(child_forks, err);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		show(err);
	CU_ASSERT_EQUAL(slurp(err, buf, sizeof(buf)), 0);	/* no summary from the grandchild */
}

static const CU_TestInfo tests[] = {
	{ "the dump is renamed into place with the usual mode", test_file_renamed_into_place },
	{ "a link planted at the temporary name is never followed",
	  test_file_never_follows_a_planted_link },
	{ "a FIFO planted at the temporary name is never opened or waited on",
	  test_file_never_waits_on_a_fifo },
	{ "a stats path naming a FIFO or a device is written in place and stays one",
	  test_file_special_path_written_in_place },
	{ "a FIFO or a link to one swapped for a link between the check and the open is never written through",
	  test_file_swapped_between_check_and_open },
	{ "a regular file that is not a dump is never the dump's to replace",
	  test_file_foreign_regular_file_is_left_alone },
	{ "when every temporary name is taken nothing is written", test_file_every_name_taken },
	{ "a stats directory that cannot be written is one escaped line at load time",
	  test_missing_directory_reported_at_load },
	{ "the exit report runs once, only after CUDA use, and a failure is one line",
	  test_exit_report_once },
	{ "SIGTERM leaves the final dump and summary and the process dies of it",
	  test_sigterm_leaves_final_dump },
	{ "the reporter rewrites the dump and appends telemetry while the job runs",
	  test_periodic_dump_and_telemetry },
	{ "a program's own handler and SIG_IGN are kept", test_own_handler_and_ignore_kept },
	{ "the program sees SIG_DFL while the shim's handler stands in for it",
	  test_sigaction_view },
	{ "a handler installed where the hooks cannot see is reported as the program's, and SIG_DFL is the shim's again",
	  test_unseen_route_is_the_programs },
	{ "a handler the program sets to run once runs once, and the signal after it leaves the final dump",
	  test_oneshot_handler },
	{ "a forked child that has not used CUDA dies of a signal at once",
	  test_fork_child_dies_at_once },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "report",
	.init = suite_init,
	.clean = suite_clean,
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
