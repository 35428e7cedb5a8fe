/*
 * run.c: `vrampool run [OPTIONS] -- CMD ARGS...`, the launcher.
 *
 * It finds the library that belongs to this command (beside it in build/,
 * or in ../lib/vrampool/ relative to its real path after `make install`),
 * prepends it to LD_PRELOAD (an existing LD_PRELOAD is kept), maps its flags
 * to the VRAMPOOL_* variables, runs CMD with fork and execvp, passes CMD's
 * exit status through (128 + the signal, as a shell does) and prints the
 * report of the dumps the library wrote, on stderr so that CMD's standard
 * output stays its own. `--ab` runs CMD twice, off then on, and prints the
 * comparison with the wall time of each run.
 *
 * Before it starts anything it checks what the library would only find out
 * later: every flag and every inherited VRAMPOOL_* variable goes through
 * the library's own parser (shim/config.c, linked into the command), whose
 * one-line complaints are shown as they are and stop the launch with exit
 * 2; the stats and telemetry paths must lie in a writable directory. Then
 * it asks inspect whether CMD's copies can be seen at all and warns when
 * not.
 *
 * Children of CMD inherit LD_PRELOAD and write one dump each (the stats path
 * has %p). The report takes the dumps of the processes that made copies:
 * one is reported alone, several side by side (one column per rank or
 * process); --ab sums each run's into one for the comparison.
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

#include "core/config.h"
#include "vrampool.h"

#define MAX_DUMPS 256
#define MAX_OVERRIDES 16

/* The command line of one `vrampool run`. */
struct run_options {
	const char *layout;
	const char *budget;
	const char *stats;		/* --stats, else an inherited VRAMPOOL_STATS */
	const char *telemetry;		/* --telemetry, else an inherited VRAMPOOL_TELEMETRY */
	const char *interval;
	bool stats_flag, telemetry_flag;
	bool off;
	bool dry;
	bool verbose;
	bool ab;
	char **cmd;
};

/* Where the dumps of one execution of CMD go, and what came back. */
struct run_target {
	char pattern[PATH_MAX];		/* VRAMPOOL_STATS for the child */
	char telemetry[PATH_MAX];	/* VRAMPOOL_TELEMETRY for the child, or "" */
	char tmpdir[PATH_MAX];		/* our own directory, removed after, or "" */
	time_t start;
	double wall_s;
	pid_t pid;
	int status;			/* exit status in shell terms */
	bool exec_failed;
};

/* The environment CMD will see, as changes to this process's. */
struct env_override {
	const char *name;
	const char *value;		/* NULL: unset */
};

struct child_env {
	struct env_override v[MAX_OVERRIDES];
	int n;
};

void run_usage(FILE *out)
{
	fprintf(out,
		"usage: vrampool run [--layout SPEC] [--budget B] [--stats FILE] [--off | --dry]\n"
		"                    [--telemetry FILE] [--interval S] [--verbose] [--ab]\n"
		"                    -- CMD ARGS...\n"
		"\n"
		"Runs CMD with the vrampool library preloaded, then prints the report of\n"
		"the run on stderr. CMD's exit status is passed through (128 + N when a\n"
		"signal N killed it).\n"
		"\n"
		"  --layout SPEC     VRAMPOOL_LAYOUT: row specs, e.g. u8:3x224x224, 150528,\n"
		"                    whole:1M, or auto (the library finds the row size)\n"
		"  --budget B        VRAMPOOL_BUDGET: auto, a size (8G) or a share of free memory (50%%)\n"
		"  --stats FILE      VRAMPOOL_STATS: keep the JSON dump there (%%p pid, %%r rank,\n"
		"                    %%h host); with --ab, FILE.off and FILE.on (before the extension)\n"
		"  --off             VRAMPOOL=off: pure pass-through that still counts\n"
		"  --dry             VRAMPOOL=dry: fingerprint and count, no pool: what a pool\n"
		"                    of any budget would have served\n"
		"  --telemetry FILE  VRAMPOOL_TELEMETRY: append a JSON line of counters there\n"
		"                    at each interval (for `vrampool report --plot`)\n"
		"  --interval S      VRAMPOOL_TELEMETRY_S: the telemetry interval in seconds\n"
		"  --verbose         VRAMPOOL_VERBOSE=1, and the library's own exit summary\n"
		"  --ab              run CMD twice, off then on, and print the comparison with\n"
		"                    the wall time of each run; the exit status is the first\n"
		"                    nonzero of the two. The second run is skipped when the\n"
		"                    first ends before any CUDA call.\n"
		"\n"
		"Before it starts CMD, run checks every flag and every inherited VRAMPOOL_*\n"
		"variable with the library's own parser, and that the stats directory can\n"
		"be written: a bad one is exit 2 with the library's message. It warns when\n"
		"`vrampool inspect` says CMD's copies cannot be seen. An existing\n"
		"LD_PRELOAD is kept.\n");
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

/* Inserts ".SUFFIX" before the extension of PATH ("s.json" -> "s.on.json") into OUT. */
static void insert_suffix(const char *path, const char *suffix, char *out, size_t size)
{
	const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');

	if (!suffix) {
		snprintf(out, size, "%s", path);
		return;
	}
	if (!dot || (slash && dot < slash))
		dot = path + strlen(path);
	snprintf(out, size, "%.*s.%s%s", (int)(dot - path), path, suffix, dot);
}

/*
 * Sets up T's stats destination: the user's FILE (with SUFFIX, "off" or
 * "on", inserted before the extension for --ab), or a private temporary
 * directory; and the telemetry file likewise. Returns 0 or a negative errno.
 */
static int run_target_init(struct run_target *t, const struct run_options *o, const char *suffix)
{
	const char *base = getenv("TMPDIR");

	memset(t, 0, sizeof(*t));
	if (o->telemetry)
		insert_suffix(o->telemetry, suffix, t->telemetry, sizeof(t->telemetry));
	if (o->stats) {
		insert_suffix(o->stats, suffix, t->pattern, sizeof(t->pattern));
		return 0;
	}
	snprintf(t->tmpdir, sizeof(t->tmpdir), "%s/vrampool-run.XXXXXX",
		 base && *base ? base : "/tmp");
	if (!mkdtemp(t->tmpdir)) {
		int err = -errno;

		fprintf(stderr, "vrampool run: cannot create a temporary directory in %s: %s\n",
			esc(base && *base ? base : "/tmp"), strerror(errno));
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
	if (glob(pat, GLOB_NOESCAPE, NULL, &g) == 0) {
		for (i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
		globfree(&g);
	}
	rmdir(t->tmpdir);
	t->tmpdir[0] = '\0';
}

/* Sets NAME to VALUE (NULL: unset) in the environment E describes. */
static void env_set(struct child_env *e, const char *name, const char *value)
{
	int i;

	for (i = 0; i < e->n; i++)
		if (strcmp(e->v[i].name, name) == 0)
			break;
	if (i == e->n) {
		if (e->n == MAX_OVERRIDES)
			return;
		e->n++;
	}
	e->v[i].name = name;
	e->v[i].value = value;
}

/*
 * The environment of CMD for one run in MODE ("off", "on", "dry" or NULL to
 * leave VRAMPOOL as inherited), as overrides of this process's.
 */
static void child_env_init(struct child_env *e, const struct run_options *o,
			   const struct run_target *t, const char *mode)
{
	memset(e, 0, sizeof(*e));
	env_set(e, "VRAMPOOL_STATS", t->pattern);
	if (o->layout)
		env_set(e, "VRAMPOOL_LAYOUT", o->layout);
	if (o->budget)
		env_set(e, "VRAMPOOL_BUDGET", o->budget);
	if (t->telemetry[0])
		env_set(e, "VRAMPOOL_TELEMETRY", t->telemetry);
	if (o->interval)
		env_set(e, "VRAMPOOL_TELEMETRY_S", o->interval);
	if (mode && strcmp(mode, "on") == 0)
		env_set(e, "VRAMPOOL", NULL);
	else if (mode)
		env_set(e, "VRAMPOOL", mode);
	if (o->verbose)
		env_set(e, "VRAMPOOL_VERBOSE", "1");
	else
		env_set(e, "VRAMPOOL_QUIET", "1");
}

/* The environment being checked, for child_getenv (the command is single-threaded). */
static const struct child_env *checked_env;

/* getenv as CMD will see it: config_load's getter. */
static const char *child_getenv(const char *name)
{
	int i;

	for (i = 0; checked_env && i < checked_env->n; i++)
		if (strcmp(checked_env->v[i].name, name) == 0)
			return checked_env->v[i].value;
	return getenv(name);
}

/* The flag of `vrampool run` that sets variable NAME, when O used it. */
static const char *flag_of(const char *name, const struct run_options *o)
{
	if (strncmp(name, "VRAMPOOL_LAYOUT=", 16) == 0 && o->layout)
		return "--layout";
	if (strncmp(name, "VRAMPOOL_BUDGET=", 16) == 0 && o->budget)
		return "--budget";
	if (strncmp(name, "VRAMPOOL_TELEMETRY_S=", 21) == 0 && o->interval)
		return "--interval";
	if (strncmp(name, "VRAMPOOL_TELEMETRY=", 19) == 0 && o->telemetry_flag)
		return "--telemetry";
	if (strncmp(name, "VRAMPOOL_STATS=", 15) == 0 && o->stats_flag)
		return "--stats";
	return NULL;
}

/*
 * Runs the library's own parser over the environment E. Its complaints,
 * one line per bad variable, are shown as the library prints them (less
 * "running as pass-through": here nothing runs). Returns the number of bad
 * variables, or a negative errno when the check itself failed.
 */
static int run_check_variables(const struct child_env *e, const struct run_options *o)
{
	static const char prefix[] = "vrampool: ", suffix[] = "; running as pass-through";
	struct config *c;
	char out[32768], *line, *nl;
	size_t len = 0;
	ssize_t n;
	int pipefd[2], saved, bad;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (pipe2(pipefd, O_CLOEXEC) != 0) {
		free(c);
		return -errno;
	}
	fflush(stderr);
	saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (saved < 0 || dup2(pipefd[1], STDERR_FILENO) < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		if (saved >= 0)
			close(saved);
		free(c);
		return -EIO;
	}
	close(pipefd[1]);
	checked_env = e;
	bad = config_load(c, child_getenv);
	checked_env = NULL;
	dup2(saved, STDERR_FILENO);
	close(saved);
	while (len + 1 < sizeof(out) &&
	       (n = read(pipefd[0], out + len, sizeof(out) - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(pipefd[0]);
	for (line = out; *line; line = nl) {
		const char *flag;
		size_t l;

		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		else
			nl = line + strlen(line);
		if (strncmp(line, prefix, sizeof(prefix) - 1) == 0)
			line += sizeof(prefix) - 1;
		l = strlen(line);
		if (l >= sizeof(suffix) - 1 && strcmp(line + l - (sizeof(suffix) - 1), suffix) == 0)
			line[l - (sizeof(suffix) - 1)] = '\0';
		flag = flag_of(line, o);
		fprintf(stderr, "vrampool run: %s%s%s%s\n", esc(line), flag ? " (set by " : "",
			flag ? flag : "", flag ? ")" : "");
	}
	free(c);
	return bad;
}

/* This process's rank as the library reads it (RANK, LOCAL_RANK, ...), for %r. */
static const char *run_rank(void)
{
	static const char *const names[] = {
		"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
	};
	const char *v;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((v = getenv(names[i])) != NULL && *v)
			return v;
	return "0";
}

/* Expands %p (as 0), %r and %h in PATTERN into OUT, for checking its directory. */
static void expand_for_check(const char *pattern, char *out, size_t size)
{
	char host[256];
	size_t o = 0;
	const char *p, *v;

	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	for (p = pattern; *p && o + 1 < size; p++) {
		v = NULL;
		if (p[0] == '%' && p[1] == 'p')
			v = "0";
		else if (p[0] == '%' && p[1] == 'r')
			v = run_rank();
		else if (p[0] == '%' && p[1] == 'h')
			v = host;
		if (v) {
			o += (size_t)snprintf(out + o, size - o, "%s", v);
			if (o >= size)
				o = size - 1;
			p++;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = '\0';
}

/*
 * Checks that the library will be able to write VAR's file PATTERN: its
 * directory exists and is writable, and what is at the path, if anything,
 * is a regular file. Returns 0, or -EINVAL after one line on stderr.
 */
static int run_check_path(const char *var, const char *pattern, const char *flag)
{
	char path[PATH_MAX], dir[PATH_MAX], why[PATH_MAX + 128], *slash;
	struct stat st;

	expand_for_check(pattern, path, sizeof(path));
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	why[0] = '\0';
	if (stat(dir, &st) != 0)
		snprintf(why, sizeof(why), "the directory %s %s", esc(dir),
			 errno == ENOENT ? "does not exist" : strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		snprintf(why, sizeof(why), "%s is not a directory", esc(dir));
	else if (access(dir, W_OK | X_OK) != 0)
		snprintf(why, sizeof(why), "cannot write in %s: %s", esc(dir), strerror(errno));
	else if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(why, sizeof(why), "%s is a directory", esc(path));
	else if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		snprintf(why, sizeof(why), "%s is not a regular file", esc(path));
	if (!why[0])
		return 0;
	fprintf(stderr, "vrampool run: %s='%s': %s%s%s%s\n", var, esc(pattern), why,
		flag ? " (set by " : "", flag ? flag : "", flag ? ")" : "");
	return -EINVAL;
}

/*
 * Checks everything the library would complain about, for the first run's
 * environment E and target T. Returns 0, or TOOL_EXIT_ERROR after saying
 * what is wrong.
 */
static int run_check(const struct child_env *e, const struct run_target *t,
		     const struct run_options *o)
{
	int bad = run_check_variables(e, o), paths = 0;

	if (bad < 0) {
		fprintf(stderr, "vrampool run: cannot check the variables: %s\n", strerror(-bad));
		return TOOL_EXIT_ERROR;
	}
	if (!t->tmpdir[0])
		paths += run_check_path("VRAMPOOL_STATS", t->pattern,
					o->stats_flag ? "--stats" : NULL) != 0;
	if (t->telemetry[0])
		paths += run_check_path("VRAMPOOL_TELEMETRY", t->telemetry,
					o->telemetry_flag ? "--telemetry" : NULL) != 0;
	if (!bad && !paths)
		return 0;
	fprintf(stderr, "vrampool run: %s not started: fix the value%s above (the library would have run it %s)\n",
		esc(o->cmd[0]), bad + paths > 1 ? "s" : "",
		bad ? "as a pass-through" : "and lost its stats at exit");
	return TOOL_EXIT_ERROR;
}

/* Applies E in this (child) process. */
static void child_env_apply(const struct child_env *e)
{
	int i;

	for (i = 0; i < e->n; i++) {
		if (e->v[i].value)
			setenv(e->v[i].name, e->v[i].value, 1);
		else
			unsetenv(e->v[i].name);
	}
}

/* Seconds on the monotonic clock. */
static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Runs CMD once with the library LIB preloaded in environment E. Fills T's
 * pid, status and wall time. Returns 0, or a negative errno when CMD could
 * not be started (a message is printed).
 */
static int run_once(struct run_target *t, const struct run_options *o,
		    const char *lib, const struct child_env *e)
{
	struct sigaction ign, old_int, old_quit;
	const char *pre = getenv("LD_PRELOAD");
	char *preload;
	int pipefd[2], child_errno = 0, wstatus, ret = 0;
	double start;
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
	start = now_s();
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
		child_env_apply(e);
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
	t->wall_s = now_s() - start;
	if (WIFEXITED(wstatus))
		t->status = WEXITSTATUS(wstatus);
	else if (WIFSIGNALED(wstatus))
		t->status = 128 + WTERMSIG(wstatus);
	if (n == (ssize_t)sizeof(child_errno)) {
		t->exec_failed = true;
		fprintf(stderr, "vrampool run: cannot run %s: %s\n", esc(o->cmd[0]), strerror(child_errno));
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

/* Turns the stats PATTERN into a glob: %p, %r, %h match anything, the rest literally. */
static void pattern_glob(const char *pattern, char *out, size_t size)
{
	const char *p;
	size_t o = 0;

	for (p = pattern; *p && o + 3 < size; p++) {
		if (p[0] == '%' && (p[1] == 'p' || p[1] == 'r' || p[1] == 'h')) {
			out[o++] = '*';
			p++;
		} else {
			if (strchr("*?[]\\", *p))
				out[o++] = '\\';
			out[o++] = *p;
		}
	}
	out[o] = '\0';
}

/*
 * Loads the dumps T's run wrote: the one file, or every file that matches
 * the pattern and is not older than the run. Returns the number loaded
 * (*ALL then holds them: free it), 0 when none was written, or -EINVAL
 * (a message is printed).
 */
static int run_collect(const struct run_target *t, struct dump **all)
{
	char pat[PATH_MAX * 2], msg[1024];
	struct stat st;
	glob_t g;
	size_t i;
	int n = 0;

	*all = NULL;
	pattern_glob(t->pattern, pat, sizeof(pat));
	if (glob(pat, 0, NULL, &g) != 0)
		return 0;
	*all = calloc(g.gl_pathc < MAX_DUMPS ? g.gl_pathc : MAX_DUMPS, sizeof(**all));
	if (!*all) {
		globfree(&g);
		return -ENOMEM;
	}
	for (i = 0; i < g.gl_pathc && n < MAX_DUMPS; i++) {
		if (stat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode) ||
		    st.st_mtime < t->start - 1)
			continue;
		if (dump_load(&(*all)[n], g.gl_pathv[i], msg, sizeof(msg)) != 0) {
			fprintf(stderr, "vrampool run: %s\n", msg);
			free(*all);
			*all = NULL;
			globfree(&g);
			return -EINVAL;
		}
		(*all)[n].wall_s = t->wall_s;
		n++;
	}
	globfree(&g);
	if (!n) {
		free(*all);
		*all = NULL;
	}
	return n;
}

/*
 * Keeps, among the N dumps of ALL, those of the processes that made copies
 * (moved to the front), or when none did, the main process's alone.
 * Returns how many are kept.
 */
static int run_keep_copiers(struct dump *all, int n, pid_t main_pid)
{
	struct dump tmp;
	int i, k = 0;

	for (i = 0; i < n; i++) {
		if (!all[i].h2d_calls)
			continue;
		if (i != k) {
			tmp = all[k];
			all[k] = all[i];
			all[i] = tmp;
		}
		k++;
	}
	if (k)
		return k;
	for (i = 0; i < n && all[i].pid != (long long)main_pid; i++)
		;
	if (i < n && i != 0)
		all[0] = all[i];
	return 1;
}

/* Names what T's run was, for the report: CMD, or CMD and its children. */
static void run_name(struct dump *d, const struct run_target *t, const struct run_options *o)
{
	if (!t->tmpdir[0])
		return;
	snprintf(d->path, sizeof(d->path), "%.4000s%s", o->cmd[0],
		 d->processes > 1 ? " and its children" : "");
}

/* Says why T's run wrote no dump: it failed first, or made no CUDA call. */
static void run_no_dump(const struct run_options *o, const struct run_target *t, const char *what)
{
	char why[1024];
	int v;

	if (t->status > 128 && t->status < 128 + 65)
		fprintf(stderr, "vrampool run: %s%s was killed by signal %d before its first CUDA call: no stats were written\n",
			esc(o->cmd[0]), what, t->status - 128);
	else if (t->status)
		fprintf(stderr, "vrampool run: %s%s exited with status %d before its first CUDA call: no stats were written (the failure is the program's own; its output says why)\n",
			esc(o->cmd[0]), what, t->status);
	else if ((v = inspect_program_verdict(o->cmd[0], why, sizeof(why))) >= 0 &&
		 !inspect_verdict_seen(v) && v != INSPECT_NONE)
		fprintf(stderr, "vrampool run: %s%s wrote no stats: its CUDA calls cannot be seen (%s)\n",
			esc(o->cmd[0]), what, why);
	else
		fprintf(stderr, "vrampool run: %s%s wrote no stats: the library saw no CUDA call in it (no CUDA use on this path); `vrampool inspect %s` tells more\n",
			esc(o->cmd[0]), what, esc(o->cmd[0]));
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
	case INSPECT_UNREACHABLE:
	case INSPECT_DRIVER:
	case INSPECT_OTHER:
	case INSPECT_PROVIDER:
		fprintf(stderr, "vrampool run: warning: the copies of %s will not be seen: %s\n"
			"  (`vrampool inspect %s` says what to do); running it anyway.\n",
			esc(o->cmd[0]), why, esc(o->cmd[0]));
		break;
	case INSPECT_NONE:
		if (o->verbose)
			fprintf(stderr, "vrampool run: note: %s does not link CUDA; its copies are seen only if it loads CUDA at run time (as PyTorch does).\n",
				esc(o->cmd[0]));
		break;
	default:
		break;
	}
}

/* Parses the options of `vrampool run`. Returns 0, -1 (help printed) or TOOL_EXIT_ERROR. */
static int run_parse(struct run_options *o, int argc, char **argv)
{
	static const struct option options[] = {
		{ "layout", required_argument, NULL, 'l' },
		{ "budget", required_argument, NULL, 'b' },
		{ "stats", required_argument, NULL, 's' },
		{ "telemetry", required_argument, NULL, 'T' },
		{ "interval", required_argument, NULL, 'i' },
		{ "off", no_argument, NULL, 'o' },
		{ "dry", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "ab", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env;
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
			o->stats_flag = true;
			break;
		case 'T':
			o->telemetry = optarg;
			o->telemetry_flag = true;
			break;
		case 'i':
			o->interval = optarg;
			break;
		case 'o':
			o->off = true;
			break;
		case 'd':
			o->dry = true;
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
	if (o->off + o->dry + o->ab > 1) {
		fprintf(stderr, "vrampool run: --ab, --off and --dry exclude each other\n");
		return TOOL_EXIT_ERROR;
	}
	if (!o->stats && (env = getenv("VRAMPOOL_STATS")) != NULL && *env)
		o->stats = env;
	if (!o->telemetry && (env = getenv("VRAMPOOL_TELEMETRY")) != NULL && *env)
		o->telemetry = env;
	o->cmd = argv + optind;
	return 0;
}

/* Prints the report of one run from its N dumps (the copiers first). */
static void run_report_one(struct dump *all, int n, const struct run_target *t,
			   const struct run_options *o)
{
	int k = run_keep_copiers(all, n, t->pid), i;

	if (k == 1) {
		run_name(&all[0], t, o);
		report_print_one(stderr, &all[0]);
		return;
	}
	/* The private directory goes away: name each dump by its process. */
	for (i = 0; i < k && t->tmpdir[0]; i++)
		snprintf(all[i].path, sizeof(all[i].path), "%.4000s, pid %lld", o->cmd[0], all[i].pid);
	report_print_columns(stderr, all, k);
}

/* Sums the copiers among the N dumps of one --ab run into D. */
static void run_sum(struct dump *d, struct dump *all, int n, const struct run_target *t,
		    const struct run_options *o)
{
	int k = run_keep_copiers(all, n, t->pid), i;

	*d = all[0];
	for (i = 1; i < k; i++)
		dump_add(d, &all[i]);
	d->wall_s = t->wall_s;
	if (d->processes > 1 && !t->tmpdir[0])
		snprintf(d->path, sizeof(d->path), "%.4000s", t->pattern);
	run_name(d, t, o);
}

int run_main(int argc, char **argv)
{
	static const char *const ab_modes[2] = { "off", "on" };
	struct run_options o;
	struct run_target t[2];
	struct child_env env;
	struct dump *all[2] = { NULL, NULL }, sum[2];
	char lib[3 * PATH_MAX];
	int ret, status = TOOL_EXIT_ERROR, i, runs, ndumps[2] = { 0, 0 };

	ret = run_parse(&o, argc, argv);
	if (ret)
		return ret < 0 ? TOOL_EXIT_OK : ret;
	if (run_find_library(lib, sizeof(lib)) != 0) {
		fprintf(stderr, "vrampool run: cannot find the library: no %s\n", esc(lib));
		return TOOL_EXIT_ERROR;
	}
	runs = o.ab ? 2 : 1;
	for (i = 0; i < runs; i++) {
		if (run_target_init(&t[i], &o, o.ab ? ab_modes[i] : NULL) != 0) {
			runs = i;
			goto out_release;
		}
	}
	child_env_init(&env, &o, &t[runs - 1],
		       o.ab ? "on" : o.off ? "off" : o.dry ? "dry" : NULL);
	if (run_check(&env, &t[runs - 1], &o) != 0)
		goto out_release;
	run_preflight(&o);
	status = TOOL_EXIT_OK;
	for (i = 0; i < runs; i++) {
		const char *mode = o.ab ? ab_modes[i] : o.off ? "off" : o.dry ? "dry" : NULL;

		if (o.ab)
			fprintf(stderr, "vrampool run: run %d of 2, pool %s\n", i + 1, ab_modes[i]);
		child_env_init(&env, &o, &t[i], mode);
		if (run_once(&t[i], &o, lib, &env) != 0) {
			status = t[i].exec_failed ? t[i].status : TOOL_EXIT_ERROR;
			goto out_release;
		}
		if (status == TOOL_EXIT_OK)
			status = t[i].status;
		if (t[i].status && runs == 2)
			fprintf(stderr, "vrampool run: run %d exited with status %d\n", i + 1, t[i].status);
		ndumps[i] = run_collect(&t[i], &all[i]);
		if (ndumps[i] < 0)
			goto out_release;
		if (ndumps[i] == 0) {
			run_no_dump(&o, &t[i], o.ab ? (i ? " (pool on)" : " (pool off)") : "");
			if (o.ab && i == 0) {
				fprintf(stderr, "vrampool run: not running it again with the pool on: the comparison needs a run that reaches CUDA\n");
				goto out_release;
			}
		}
	}
	fflush(stdout);
	if (runs == 1 && ndumps[0] > 0) {
		run_report_one(all[0], ndumps[0], &t[0], &o);
	} else if (runs == 2 && ndumps[0] > 0 && ndumps[1] > 0) {
		run_sum(&sum[0], all[0], ndumps[0], &t[0], &o);
		run_sum(&sum[1], all[1], ndumps[1], &t[1], &o);
		report_print_ab(stderr, &sum[0], &sum[1]);
	}
out_release:
	for (i = 0; i < 2; i++)
		free(all[i]);
	for (i = 0; i < runs; i++)
		run_target_release(&t[i]);
	return status;
}
