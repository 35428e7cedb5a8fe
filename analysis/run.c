/*
 * run.c: `vrampool run [OPTIONS] -- CMD ARGS...`, the launcher.
 *
 * It finds the library that belongs to this command (beside it in build/,
 * or in ../lib/vrampool/ relative to its real path after `make install`),
 * prepends it to LD_PRELOAD (an existing LD_PRELOAD is kept), maps its flags
 * to the VRAMPOOL_* variables, runs CMD with fork and execvp, passes CMD's
 * exit status through (128 + the signal, as a shell does) and prints the
 * report of the dump the library wrote at exit, on stderr so that CMD's
 * standard output stays its own. `--ab` runs CMD twice, off then on, and
 * prints the comparison. Before it starts, it asks inspect whether CMD's
 * copies can be seen at all and warns when not.
 *
 * Children of CMD inherit LD_PRELOAD and write one dump each (the stats path
 * has %p). The report sums the dumps of the processes that made copies.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vrampool.h"

#define MAX_DUMPS 256

/* The command line of one `vrampool run`. */
struct run_options {
	const char *layout;
	const char *budget;
	const char *stats;
	bool off;
	bool verbose;
	bool ab;
	char **cmd;
};

/* Where the dumps of one execution of CMD go, and what came back. */
struct run_target {
	char pattern[PATH_MAX];		/* VRAMPOOL_STATS for the child */
	char tmpdir[PATH_MAX];		/* our own directory, removed after, or "" */
	time_t start;
	pid_t pid;
	int status;			/* exit status in shell terms */
	bool exec_failed;
};

void run_usage(FILE *out)
{
	fprintf(out,
		"usage: vrampool run [--layout SPEC] [--budget B] [--stats FILE] [--off]\n"
		"                    [--verbose] [--ab] -- CMD ARGS...\n"
		"\n"
		"Runs CMD with the vrampool library preloaded, then prints the report of\n"
		"the run on stderr. CMD's exit status is passed through (128 + N when a\n"
		"signal N killed it).\n"
		"\n"
		"  --layout SPEC  VRAMPOOL_LAYOUT: row specs, e.g. u8:3x224x224, 150528, whole:1M\n"
		"  --budget B     VRAMPOOL_BUDGET: auto, a size (8G) or a share of free memory (50%%)\n"
		"  --stats FILE   VRAMPOOL_STATS: keep the JSON dump there (%%p is the pid);\n"
		"                 with --ab, FILE.off and FILE.on (before the extension)\n"
		"  --off          VRAMPOOL=off: pure pass-through that still counts\n"
		"  --verbose      VRAMPOOL_VERBOSE=1, and the library's own exit summary\n"
		"  --ab           run CMD twice, off then on, and print the comparison;\n"
		"                 the exit status is the first nonzero of the two\n"
		"\n"
		"An existing LD_PRELOAD is kept. Before it starts, run warns when\n"
		"`vrampool inspect` says CMD's copies cannot be seen.\n");
}

/*
 * Finds libvrampool.so for this command: beside the executable's real path,
 * or in ../lib/vrampool/. Returns 0 or -ENOENT (OUT then names both tries).
 */
static int run_find_library(char *out, size_t size)
{
	char exe[PATH_MAX], *slash;
	ssize_t n;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(out, size, "/proc/self/exe: %s", strerror(errno));
		return -ENOENT;
	}
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(out, size, "%s/libvrampool.so", exe);
	if (access(out, R_OK) == 0)
		return 0;
	snprintf(out, size, "%s/../lib/vrampool/libvrampool.so", exe);
	if (access(out, R_OK) == 0)
		return 0;
	snprintf(out, size, "%s/libvrampool.so or %s/../lib/vrampool/libvrampool.so", exe, exe);
	return -ENOENT;
}

/*
 * Sets up T's stats destination: the user's FILE (with SUFFIX, "off" or
 * "on", inserted before the extension for --ab), or a private temporary
 * directory. Returns 0 or a negative errno.
 */
static int run_target_init(struct run_target *t, const char *stats, const char *suffix)
{
	const char *base = getenv("TMPDIR");
	const char *dot, *slash;

	memset(t, 0, sizeof(*t));
	if (stats && !suffix) {
		snprintf(t->pattern, sizeof(t->pattern), "%s", stats);
		return 0;
	}
	if (stats) {
		slash = strrchr(stats, '/');
		dot = strrchr(stats, '.');
		if (!dot || (slash && dot < slash))
			dot = stats + strlen(stats);
		snprintf(t->pattern, sizeof(t->pattern), "%.*s.%s%s",
			 (int)(dot - stats), stats, suffix, dot);
		return 0;
	}
	snprintf(t->tmpdir, sizeof(t->tmpdir), "%s/vrampool-run.XXXXXX",
		 base && *base ? base : "/tmp");
	if (!mkdtemp(t->tmpdir)) {
		int err = -errno;

		fprintf(stderr, "vrampool run: cannot create a temporary directory in %s: %s\n",
			base && *base ? base : "/tmp", strerror(errno));
		t->tmpdir[0] = '\0';
		return err;
	}
	snprintf(t->pattern, sizeof(t->pattern), "%s/stats.%%p.json", t->tmpdir);
	return 0;
}

/* Removes T's private directory and the dumps in it. */
static void run_target_release(struct run_target *t)
{
	char pat[PATH_MAX + 16];
	glob_t g;
	size_t i;

	if (!t->tmpdir[0])
		return;
	snprintf(pat, sizeof(pat), "%s/*", t->tmpdir);
	if (glob(pat, 0, NULL, &g) == 0) {
		for (i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
		globfree(&g);
	}
	rmdir(t->tmpdir);
	t->tmpdir[0] = '\0';
}

/* Sets NAME to VALUE in this (child) process, or leaves it when VALUE is NULL. */
static void child_setenv(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
}

/*
 * Runs CMD once with the library LIB preloaded and MODE ("off", "on" or
 * NULL to leave VRAMPOOL as it is). Fills T's pid and status. Returns 0, or
 * a negative errno when CMD could not be started (a message is printed).
 */
static int run_once(struct run_target *t, const struct run_options *o,
		    const char *lib, const char *mode)
{
	struct sigaction ign, old_int, old_quit;
	const char *pre = getenv("LD_PRELOAD");
	char *preload;
	int pipefd[2], child_errno = 0, wstatus, ret = 0;
	ssize_t n;

	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -errno;
	if (asprintf(&preload, "%s%s%s", lib, pre && *pre ? ":" : "", pre && *pre ? pre : "") < 0) {
		ret = -ENOMEM;
		goto out_close_pipe;
	}
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	t->start = time(NULL);
	fflush(NULL);
	t->pid = fork();
	if (t->pid < 0) {
		ret = -errno;
		fprintf(stderr, "vrampool run: fork: %s\n", strerror(errno));
		goto out_restore;
	}
	if (t->pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		close(pipefd[0]);
		setenv("LD_PRELOAD", preload, 1);
		setenv("VRAMPOOL_STATS", t->pattern, 1);
		child_setenv("VRAMPOOL_LAYOUT", o->layout);
		child_setenv("VRAMPOOL_BUDGET", o->budget);
		if (mode && strcmp(mode, "off") == 0)
			setenv("VRAMPOOL", "off", 1);
		else if (mode)
			unsetenv("VRAMPOOL");
		if (o->verbose)
			setenv("VRAMPOOL_VERBOSE", "1", 1);
		else
			setenv("VRAMPOOL_QUIET", "1", 1);
		execvp(o->cmd[0], o->cmd);
		child_errno = errno;
		n = write(pipefd[1], &child_errno, sizeof(child_errno));
		(void)n;
		_exit(child_errno == ENOENT ? 127 : 126);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	do
		n = read(pipefd[0], &child_errno, sizeof(child_errno));
	while (n < 0 && errno == EINTR);
	while (waitpid(t->pid, &wstatus, 0) < 0) {
		if (errno != EINTR) {
			ret = -errno;
			goto out_restore;
		}
	}
	if (WIFEXITED(wstatus))
		t->status = WEXITSTATUS(wstatus);
	else if (WIFSIGNALED(wstatus))
		t->status = 128 + WTERMSIG(wstatus);
	if (n == (ssize_t)sizeof(child_errno)) {
		t->exec_failed = true;
		fprintf(stderr, "vrampool run: cannot run %s: %s\n", o->cmd[0], strerror(child_errno));
		ret = -child_errno;
	}
out_restore:
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	free(preload);
out_close_pipe:
	close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	return ret;
}

/*
 * Loads the dumps T's run wrote into D: the one file, or every file that
 * matches the %p pattern and is not older than the run. When several
 * processes wrote one, the dumps with host-to-device copies are summed (or,
 * when none made any, the main process's). Returns 0, -ENOENT when no dump
 * was written, or -EINVAL (a message is printed).
 */
static int run_collect(const struct run_target *t, struct dump *d)
{
	char pat[PATH_MAX], msg[512];
	const char *p;
	struct dump *all = NULL;
	struct stat st;
	glob_t g;
	size_t i, o = 0;
	int n = 0, k, copies = 0, ret = -ENOENT;

	for (p = t->pattern; *p && o + 2 < sizeof(pat); p++) {
		if (p[0] == '%' && p[1] == 'p') {
			pat[o++] = '*';
			p++;
		} else {
			pat[o++] = *p;
		}
	}
	pat[o] = '\0';
	if (glob(pat, 0, NULL, &g) != 0)
		return -ENOENT;
	all = calloc(g.gl_pathc < MAX_DUMPS ? g.gl_pathc : MAX_DUMPS, sizeof(*all));
	if (!all) {
		ret = -ENOMEM;
		goto out_globfree;
	}
	for (i = 0; i < g.gl_pathc && n < MAX_DUMPS; i++) {
		if (stat(g.gl_pathv[i], &st) != 0 || st.st_mtime < t->start - 1)
			continue;
		if (dump_load(&all[n], g.gl_pathv[i], msg, sizeof(msg)) != 0) {
			fprintf(stderr, "vrampool run: %s\n", msg);
			ret = -EINVAL;
			goto out_free;
		}
		copies += all[n].h2d_calls > 0;
		n++;
	}
	if (!n)
		goto out_free;
	for (k = 0; k < n && !copies; k++)
		if (all[k].pid == (long long)t->pid)
			break;
	if (!copies) {
		*d = all[k < n ? k : 0];
	} else {
		memset(d, 0, sizeof(*d));
		for (k = 0; k < n; k++) {
			if (!all[k].h2d_calls)
				continue;
			if (!d->processes) {
				*d = all[k];
				continue;
			}
			dump_add(d, &all[k]);
		}
		if (d->processes > 1)
			snprintf(d->path, sizeof(d->path), "%.4000s", t->pattern);
	}
	ret = 0;
out_free:
	free(all);
out_globfree:
	globfree(&g);
	return ret;
}

/* Says that T's run wrote no dump, and what that usually means. */
static void run_no_dump(const struct run_options *o)
{
	fprintf(stderr,
		"vrampool run: %s wrote no stats: the library saw no CUDA runtime call in it\n"
		"  (a statically linked CUDA runtime, or no CUDA use); try `vrampool inspect %s`.\n",
		o->cmd[0], o->cmd[0]);
}

/* Warns on stderr when inspect says that CMD's copies cannot be seen. */
static void run_preflight(const struct run_options *o)
{
	char why[1024];
	int v = inspect_program_verdict(o->cmd[0], why, sizeof(why));

	if (v < 0)
		return;
	switch (v) {
	case INSPECT_STATIC:
		fprintf(stderr, "vrampool run: warning: the copies of %s will not be seen: %s\n"
			"  rebuild it with `nvcc -cudart shared`; running it anyway.\n",
			o->cmd[0], why);
		break;
	case INSPECT_DRIVER:
	case INSPECT_RUNTIME_OTHER:
	case INSPECT_PROVIDER:
		fprintf(stderr, "vrampool run: warning: the copies of %s will not be seen: %s\n",
			o->cmd[0], why);
		break;
	case INSPECT_NONE:
		if (o->verbose)
			fprintf(stderr, "vrampool run: note: %s does not link the CUDA runtime; its copies are seen only if it loads libcudart at run time (as PyTorch does).\n",
				o->cmd[0]);
		break;
	default:
		break;
	}
}

/* Parses the options of `vrampool run`. Returns 0 or TOOL_EXIT_ERROR. */
static int run_parse(struct run_options *o, int argc, char **argv)
{
	static const struct option options[] = {
		{ "layout", required_argument, NULL, 'l' },
		{ "budget", required_argument, NULL, 'b' },
		{ "stats", required_argument, NULL, 's' },
		{ "off", no_argument, NULL, 'o' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "ab", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	while ((c = getopt_long(argc, argv, "+l:b:s:ovah", options, NULL)) != -1) {
		switch (c) {
		case 'l':
			o->layout = optarg;
			break;
		case 'b':
			o->budget = optarg;
			break;
		case 's':
			o->stats = optarg;
			break;
		case 'o':
			o->off = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'a':
			o->ab = true;
			break;
		case 'h':
			run_usage(stdout);
			return -1;
		default:
			run_usage(stderr);
			return TOOL_EXIT_ERROR;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "vrampool run: no command given (vrampool run [OPTIONS] -- CMD ARGS...)\n");
		return TOOL_EXIT_ERROR;
	}
	if (o->ab && o->off) {
		fprintf(stderr, "vrampool run: --ab and --off exclude each other\n");
		return TOOL_EXIT_ERROR;
	}
	o->cmd = argv + optind;
	return 0;
}

int run_main(int argc, char **argv)
{
	struct run_options o;
	struct run_target t[2];
	struct dump d[2];
	char lib[3 * PATH_MAX];
	int ret, status = TOOL_EXIT_ERROR, i, runs;
	bool have[2] = { false, false };

	ret = run_parse(&o, argc, argv);
	if (ret)
		return ret < 0 ? TOOL_EXIT_OK : ret;
	if (run_find_library(lib, sizeof(lib)) != 0) {
		fprintf(stderr, "vrampool run: cannot find the library: no %s\n", lib);
		return TOOL_EXIT_ERROR;
	}
	run_preflight(&o);
	runs = o.ab ? 2 : 1;
	for (i = 0; i < runs; i++) {
		if (run_target_init(&t[i], o.stats, o.ab ? (i ? "on" : "off") : NULL) != 0) {
			runs = i;
			goto out_release;
		}
	}
	status = TOOL_EXIT_OK;
	for (i = 0; i < runs; i++) {
		const char *mode = o.ab ? (i ? "on" : "off") : (o.off ? "off" : NULL);

		if (o.ab)
			fprintf(stderr, "vrampool run: run %d of 2, pool %s\n", i + 1, i ? "on" : "off");
		if (run_once(&t[i], &o, lib, mode) != 0) {
			status = t[i].exec_failed ? t[i].status : TOOL_EXIT_ERROR;
			goto out_release;
		}
		if (status == TOOL_EXIT_OK)
			status = t[i].status;
		if (t[i].status && runs == 2)
			fprintf(stderr, "vrampool run: run %d exited with status %d\n", i + 1, t[i].status);
		ret = run_collect(&t[i], &d[i]);
		have[i] = ret == 0;
		if (have[i] && t[i].tmpdir[0] && d[i].processes == 1)
			snprintf(d[i].path, sizeof(d[i].path), "%.4000s", o.cmd[0]);
		else if (have[i] && t[i].tmpdir[0])
			snprintf(d[i].path, sizeof(d[i].path), "%.4000s and its children", o.cmd[0]);
		if (ret == -ENOENT)
			run_no_dump(&o);
	}
	fflush(stdout);
	if (runs == 1 && have[0])
		report_print_one(stderr, &d[0]);
	else if (runs == 2 && have[0] && have[1])
		report_print_ab(stderr, &d[0], &d[1]);
out_release:
	for (i = 0; i < runs; i++)
		run_target_release(&t[i]);
	return status;
}
