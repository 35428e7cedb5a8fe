/*
 * run.c: `vrampool run [OPTIONS] -- CMD ARGS...`, the launcher.
 *
 * It finds the library that belongs to this command (beside it in build/,
 * or in ../lib/vrampool/ relative to its real path after `make install`),
 * prepends it to LD_PRELOAD (an existing LD_PRELOAD is kept), maps its flags
 * to the VRAMPOOL_* variables, runs CMD with fork and execvp, prints the
 * report of the dumps the library wrote, on stderr so that CMD's standard
 * output stays its own, and ends as CMD did (its exit status, or dying of
 * its signal, which a shell shows as 128 + the signal). The dumps are kept:
 * ./vrampool.PROGRAM.PID.json by default, and the command that reads them
 * again is printed last. `--ab` runs CMD twice, off then on (`--repeat N`:
 * N pairs, alternating which runs first), and prints the comparison with
 * its verdict on bytes and time (verdict.h); a signal that stops a run
 * ends the A/B there.
 *
 * Before it starts anything it checks what the library would only find out
 * later (run_check.c); while CMD runs it passes signals on and bounds the
 * wait (run_wait.c); after each run it collects and reports the dumps
 * (run_dumps.c). run.h is the contract between the four.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "options.h"
#include "run.h"
#include "verdict.h"
#include "vrampool.h"

void run_usage(FILE *out)
{
	fprintf(out,
		"usage: vrampool run [--layout SPEC] [--budget B] [--stats FILE] [--off | --dry]\n"
		"                    [--telemetry FILE] [--interval S] [--verbose] [--ab]\n"
		"                    [--repeat N] [--force] [--kill-after S] -- CMD ARGS...\n"
		"\n"
		"Runs CMD with the vrampool library preloaded, then prints the report of\n"
		"the run on stderr. The dump is kept as ./vrampool.CMD.PID.json (.rRANK\n"
		"where the launcher has a rank), with the command that reads it again.\n"
		"CMD's exit status is passed through; when signal N killed it, vrampool\n"
		"dies of N too (a shell says 128 + N).\n"
		"\n"
		"  -l, --layout SPEC VRAMPOOL_LAYOUT: row specs, e.g. u8:3x224x224, 150528,\n"
		"                    whole:1M, or auto (the library finds the row size)\n"
		"  -b, --budget B    VRAMPOOL_BUDGET: auto, a size (8G) or a share of free memory (50%%)\n"
		"  -s, --stats FILE  VRAMPOOL_STATS: keep the JSON dump there (%%p pid, %%r rank,\n"
		"                    %%h host); with --ab, FILE.off and FILE.on (before the extension)\n"
		"  --force           let --stats overwrite a file that is not a vrampool dump\n"
		"  -o, --off         VRAMPOOL=off: pure pass-through that still counts\n"
		"  --dry             VRAMPOOL=dry: fingerprint and count, no pool: what a pool\n"
		"                    of any budget would have served\n"
		"  --telemetry FILE  VRAMPOOL_TELEMETRY: append a JSON line of counters there\n"
		"                    at each interval (for `vrampool report --plot`)\n"
		"  --interval S      VRAMPOOL_TELEMETRY_S: the telemetry interval in seconds\n"
		"  -v, --verbose     VRAMPOOL_VERBOSE=1, and the library's own exit summary\n"
		"  -a, --ab          run CMD twice, off then on, and print the comparison:\n"
		"                    bytes and time, off/on (> 1: fewer or faster with the\n"
		"                    pool); the exit status is the first nonzero. The second\n"
		"                    run is skipped when the first ends before any CUDA call;\n"
		"                    a signal that stops a run (Ctrl-C) ends the A/B there.\n"
		"  --repeat N        with --ab: N pairs, interleaved (off on, on off, ...):\n"
		"                    the median time ratio and its spread judge the time\n"
		"  --kill-after S    seconds from a signal passed on to CMD to SIGKILL (default 30)\n"
		"\n"
		"SIGINT, SIGTERM, SIGHUP or SIGQUIT sent to vrampool alone (kill PID, docker\n"
		"stop) is passed on to CMD; one that reached CMD too (Ctrl-C on the terminal,\n"
		"CMD's own kill(0, ...)) is not. CMD still running S seconds after a signal\n"
		"passed on gets SIGKILL. vrampool then ends as CMD did: its exit status, or\n"
		"dying of the same signal.\n"
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

/* Copies S into OUT with what is not [A-Za-z0-9._-] as '_' (a file name's part). */
static void name_part(const char *s, char *out, size_t size)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < size; i++)
		out[i] = (isalnum((unsigned char)s[i]) || strchr("._-", s[i])) ? s[i] : '_';
	out[i] = '\0';
}

/*
 * The default stats destination, kept: ./vrampool.PROGRAM.%p[.rRANK].json
 * (the rank the launcher itself has in RANK, OMPI_COMM_WORLD_RANK,
 * SLURM_PROCID or PMI_RANK), SUFFIX inserted for --ab, as an absolute path
 * (CMD may change its directory). Returns 0, or -errno when the current
 * directory cannot take it (a note is printed once).
 */
static int run_default_pattern(struct run_target *t, const struct run_options *o, const char *suffix)
{
	static const char *const ranks[] = { "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK" };
	static bool noted;
	char cwd[PATH_MAX], prog[128], rank[80] = "", part[64], base[PATH_MAX + 256];
	const char *slash = strrchr(o->cmd[0], '/'), *v;
	size_t i;
	int err;

	if (!getcwd(cwd, sizeof(cwd)) || access(cwd, W_OK | X_OK) != 0) {
		err = -errno;
		if (!noted)
			fprintf(stderr, "vrampool run: note: the dump cannot be kept in the current directory (%s): it goes to a temporary directory, removed after the report (--stats FILE keeps it elsewhere)\n",
				strerror(errno));
		noted = true;
		return err;
	}
	name_part(slash ? slash + 1 : o->cmd[0], prog, sizeof(prog));
	for (i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
		if ((v = getenv(ranks[i])) != NULL && *v) {
			name_part(v, part, sizeof(part));
			snprintf(rank, sizeof(rank), ".r%s", part);
			break;
		}
	}
	snprintf(base, sizeof(base), "%s/vrampool.%s.%%p%s.json", strcmp(cwd, "/") ? cwd : "", prog, rank);
	insert_suffix(base, suffix, t->pattern, sizeof(t->pattern));
	return 0;
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
	if (run_default_pattern(t, o, suffix) == 0)
		return 0;
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

/* Removes T's private directory and the dumps in it; frees what T holds. */
static void run_target_release(struct run_target *t)
{
	char pat[PATH_MAX + 16];
	glob_t g;
	size_t i;

	free(t->seen);
	t->seen = NULL;
	t->nseen = 0;

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
	/* issue 19: the report below is the summary; --verbose adds the library's progress lines only */
	if (o->verbose)
		env_set(e, "VRAMPOOL_VERBOSE", "1");
	env_set(e, "VRAMPOOL_QUIET", "1");
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
		    const char *lib, const struct child_env *e, struct run_signals *sigs)
{
	const char *pre = getenv("LD_PRELOAD");
	struct run_progress progress;
	pid_t launcher = getpid();
	char *preload;
	int pipefd[2], child_errno = 0, wstatus = 0, ret = 0;
	double start;
	ssize_t n;

	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -errno;
	if (asprintf(&preload, "%s%s%s", lib, pre && *pre ? ":" : "", pre && *pre ? pre : "") < 0) {
		ret = -ENOMEM;
		goto out_close_pipe;
	}
	t->start = time(NULL);
	start = now_s();
	fflush(NULL);
	t->pid = fork();
	if (t->pid < 0) {
		ret = -errno;
		fprintf(stderr, "vrampool run: fork: %s\n", strerror(errno));
		goto out_free;
	}
	if (t->pid == 0) {
		run_signals_child(sigs, launcher);
		close(pipefd[0]);
		setenv("LD_PRELOAD", preload, 1);
		child_env_apply(e);
		/* issue 19: the launcher showed the job's config warnings (run_check); CMD stays silent */
		setenv(CONFIG_WARNED, "1", 1);
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
	run_progress_start(&progress, o, t);
	ret = run_wait(sigs, o, t->pid, &wstatus, &progress);
	if (ret != 0) {
		fprintf(stderr, "vrampool run: waiting for %s: %s\n", esc(o->cmd[0]), strerror(-ret));
		goto out_free;
	}
	t->wall_s = now_s() - start;
	if (WIFEXITED(wstatus)) {
		t->status = WEXITSTATUS(wstatus);
	} else if (WIFSIGNALED(wstatus)) {
		t->term_sig = WTERMSIG(wstatus);
		t->status = 128 + t->term_sig;
	}
	if (n == (ssize_t)sizeof(child_errno)) {
		t->exec_failed = true;
		fprintf(stderr, "vrampool run: cannot run %s: %s\n", esc(o->cmd[0]), strerror(child_errno));
		ret = -child_errno;
	}
out_free:
	free(preload);
out_close_pipe:
	close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	return ret;
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
		{ "kill-after", required_argument, NULL, 'K' },
		{ "repeat", required_argument, NULL, 'R' },
		{ "force", no_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env;
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->kill_after = RUN_KILL_AFTER_S;
	optind = 1;
	opterr = 0;	/* one-line errors: tool_option_error (options.h) */
	while ((c = getopt_long(argc, argv, "+:l:b:s:ovah", options, NULL)) != -1) {
		if (tool_option_empty("run", options, c, optarg))
			return TOOL_EXIT_ERROR;
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
		case 'K':
			errno = 0;
			o->kill_after = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->kill_after > 0) || o->kill_after > 86400) {
				fprintf(stderr, "vrampool run: --kill-after '%s' is not a number of seconds from 0 to 86400 (e.g. 30, 2.5)\n",
					esc(optarg));
				return TOOL_EXIT_ERROR;
			}
			break;
		case 'R':
			errno = 0;
			o->repeat = (int)strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || o->repeat < 1 || o->repeat > VERDICT_PAIRS_MAX) {
				fprintf(stderr, "vrampool run: --repeat '%s' is not a number of pairs from 1 to %d\n",
					esc(optarg), VERDICT_PAIRS_MAX);
				return TOOL_EXIT_ERROR;
			}
			break;
		case 'F':
			o->force = true;
			break;
		case 'h':
			run_usage(stdout);
			return -1;
		default:
			return tool_option_error("run", options, c, argc, argv);
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
	if (o->repeat && !o->ab) {
		fprintf(stderr, "vrampool run: --repeat N repeats the pairs of --ab: add --ab\n");
		return TOOL_EXIT_ERROR;
	}
	if (!o->repeat)
		o->repeat = 1;
	if (!o->stats && (env = getenv("VRAMPOOL_STATS")) != NULL && *env)
		o->stats = env;
	if (!o->telemetry && (env = getenv("VRAMPOOL_TELEMETRY")) != NULL && *env)
		o->telemetry = env;
	o->cmd = argv + optind;
	return 0;
}

/* How an A/B stopped early (run_ab_stopped). */
enum run_stop { RUN_ENDED, RUN_INTERRUPTED, RUN_BETWEEN };

/*
 * The mode of run I of an A/B: pairs alternate which runs first (off on,
 * on off, ...), so that neither mode always runs on a cold machine.
 */
static const char *run_ab_mode(int i)
{
	return (i + i / 2) % 2 ? "on" : "off";
}

/* The ".SUFFIX" of run I's dumps: "off"/"on", or "off.K"/"on.K" for pair K of several. */
static void run_ab_suffix(const struct run_options *o, int i, char *out, size_t size)
{
	if (o->repeat > 1)
		snprintf(out, size, "%s.%d", run_ab_mode(i), i / 2 + 1);
	else
		snprintf(out, size, "%s", run_ab_mode(i));
}

/*
 * --ab stopped by a signal: run I+1 of RUNS was ended by SIG (RUN_ENDED:
 * CMD died of it) or interrupted (RUN_INTERRUPTED: the launcher took SIG
 * while it ran), or SIG came after it, before the next started
 * (RUN_BETWEEN). Says so, and reports run I (its N dumps ALL) alone: no
 * comparison of a run cut short with a whole one.
 */
static void run_ab_stopped(struct dump *all, int n, const struct run_target *t,
			   const struct run_options *o, int i, int runs, int sig, enum run_stop how)
{
	if (how == RUN_BETWEEN)
		fprintf(stderr, "vrampool run: %s came after run %d: run %d is not started, and there is no comparison\n",
			run_signal_name(sig), i + 1, i + 2);
	else
		fprintf(stderr, "vrampool run: run %d of %d (pool %s) was %s by %s: the A/B stops here, with no comparison\n",
			i + 1, runs, run_ab_mode(i), how == RUN_INTERRUPTED ? "interrupted" : "ended",
			run_signal_name(sig));
	fflush(stdout);
	if (n > 0)
		run_report_one(all, n, t, o);
	else
		run_no_dump(o, t, strcmp(run_ab_mode(i), "on") ? " (pool off)" : " (pool on)");
}

/*
 * The comparison of an A/B's RUNS runs (N[i] dumps ALL[i] each): each
 * mode's runs summed, and each whole pair's time ratio. Reorders ALL.
 */
static void run_ab_report(struct dump **all, const int *n, const struct run_target *t,
			  const struct run_options *o, int runs)
{
	struct dump *sum = calloc(4, sizeof(*sum));
	double ratios[VERDICT_PAIRS_MAX];
	int i, pairs = 0, off;

	if (!sum)
		return;
	for (i = 0; i + 1 < runs; i += 2) {
		if (!n[i] || !n[i + 1])
			continue;
		off = strcmp(run_ab_mode(i), "off") == 0 ? i : i + 1;
		run_sum(&sum[2], all[off], n[off], &t[off], o);
		run_sum(&sum[3], all[off ^ 1], n[off ^ 1], &t[off ^ 1], o);
		verdict_add_pair(&sum[0], &sum[1], &sum[2], &sum[3], pairs, ratios);
		pairs++;
	}
	if (pairs)
		verdict_print_ab(stderr, &sum[0], &sum[1], ratios, pairs);
	free(sum);
}

/* Prints where the dumps were kept (TEXT from run_kept_text) and frees TEXT. */
static void run_print_kept(char *text)
{
	if (!text)
		return;
	fprintf(stderr, "vrampool run: the dumps are kept; read them again with:\n  %s\n", text);
	free(text);
}

int run_main(int argc, char **argv)
{
	struct run_options o;
	struct run_target *t = NULL;
	struct run_signals sigs;
	struct child_env env;
	struct dump **all = NULL;
	char lib[3 * PATH_MAX], suffix[32], *kept = NULL;
	int ret, status = TOOL_EXIT_ERROR, i, runs = 0, *ndumps = NULL, die = 0, stopped = -1;
	enum run_stop how = RUN_ENDED;
	bool sigs_on = false;

	ret = run_parse(&o, argc, argv);
	if (ret)
		return ret < 0 ? TOOL_EXIT_OK : ret;
	if (run_find_library(lib, sizeof(lib)) != 0) {
		fprintf(stderr, "vrampool run: cannot find the library: no %s\n", esc(lib));
		return TOOL_EXIT_ERROR;
	}
	runs = o.ab ? 2 * o.repeat : 1;
	t = calloc((size_t)runs, sizeof(*t));
	all = calloc((size_t)runs, sizeof(*all));
	ndumps = calloc((size_t)runs, sizeof(*ndumps));
	if (!t || !all || !ndumps) {
		fprintf(stderr, "vrampool run: out of memory\n");
		runs = 0;
		goto out_release;
	}
	for (i = 0; i < runs; i++) {
		run_ab_suffix(&o, i, suffix, sizeof(suffix));
		if (run_target_init(&t[i], &o, o.ab ? suffix : NULL) != 0) {
			runs = i;
			goto out_release;
		}
	}
	child_env_init(&env, &o, &t[runs - 1],
		       o.ab ? "on" : o.off ? "off" : o.dry ? "dry" : NULL);
	if (run_check(&env, t, runs, &o) != 0)
		goto out_release;
	run_preflight(&o);
	if ((ret = run_signals_init(&sigs)) != 0) {
		fprintf(stderr, "vrampool run: cannot block the signals it passes on: %s\n", strerror(-ret));
		goto out_release;
	}
	sigs_on = true;
	status = TOOL_EXIT_OK;
	for (i = 0; i < runs; i++) {
		const char *mode = o.ab ? run_ab_mode(i) : o.off ? "off" : o.dry ? "dry" : NULL;

		if (i > 0 && run_signals_poll(&sigs)) {
			stopped = i - 1;
			how = RUN_BETWEEN;
			die = die ? die : sigs.got;
			break;
		}
		if (o.ab)
			fprintf(stderr, "vrampool run: run %d of %d, pool %s\n", i + 1, runs, mode);
		child_env_init(&env, &o, &t[i], mode);
		if (run_snapshot(&t[i]) != 0 || run_once(&t[i], &o, lib, &env, &sigs) != 0) {
			status = t[i].exec_failed ? t[i].status : TOOL_EXIT_ERROR;
			goto out_release;
		}
		if (status == TOOL_EXIT_OK) {
			status = t[i].status;
			die = t[i].term_sig;
		}
		if (t[i].status && runs > 1 && !t[i].term_sig)
			fprintf(stderr, "vrampool run: run %d exited with status %d\n", i + 1, t[i].status);
		ndumps[i] = run_collect(&t[i], &all[i]);
		if (ndumps[i] < 0)
			goto out_release;
		if (o.ab && (sigs.got || t[i].term_sig)) {
			stopped = i;
			how = sigs.got ? RUN_INTERRUPTED : RUN_ENDED;
			break;
		}
		if (ndumps[i] == 0) {
			run_no_dump(&o, &t[i], o.ab ? (strcmp(mode, "on") ? " (pool off)" : " (pool on)") : "");
			if (o.ab && i == 0) {
				fprintf(stderr, "vrampool run: not running it again with the pool on: the comparison needs a run that reaches CUDA\n");
				goto out_release;
			}
		}
	}
	fflush(stdout);
	kept = run_kept_text(all, ndumps, stopped >= 0 ? stopped + 1 : runs, t);
	if (stopped >= 0) {
		run_ab_stopped(all[stopped], ndumps[stopped], &t[stopped], &o, stopped, runs,
			       how == RUN_ENDED ? t[stopped].term_sig : sigs.got, how);
	} else if (runs == 1 && ndumps[0] > 0) {
		run_report_one(all[0], ndumps[0], &t[0], &o);
	} else if (runs > 1) {
		run_ab_report(all, ndumps, t, &o, runs);
	}
	run_print_kept(kept);
out_release:
	for (i = 0; all && i < (o.ab ? 2 * o.repeat : 1); i++)
		free(all[i]);
	for (i = 0; t && i < runs; i++)
		run_target_release(&t[i]);
	free(all);
	free(ndumps);
	free(t);
	if (sigs_on)
		run_signals_release(&sigs);
	if (die)
		run_die_of(die);
	return status;
}
