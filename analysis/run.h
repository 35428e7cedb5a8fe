/*
 * run.h: the contract between the files of `vrampool run`, internal to
 * them (nothing else includes it). The launcher is cut along its three
 * moments:
 *
 *   run.c        the launcher proper: options, finding the library, where
 *                each run's dumps go, CMD's environment, fork/exec/wait,
 *                and run_main, which strings the moments together (one run,
 *                or two for --ab);
 *   run_check.c  before the launch: every variable through the library's
 *                own parser, the stats and telemetry paths, and inspect's
 *                warning that CMD's copies will not be seen;
 *   run_dumps.c  after each run: the dumps it wrote collected, the copiers
 *                kept, a missing dump explained, and the report printed
 *                (one run alone or side by side; --ab summed per run).
 *
 * Ownership: struct run_options points into argv and the environment and
 * owns nothing. A struct run_target owns its private temporary directory
 * (tmpdir, "" when the user named the stats file) until run.c releases it;
 * the dumps collected from it are the caller's to free. A struct child_env
 * holds pointers only: to string literals, the options and its target,
 * which outlive it. The command is single-threaded.
 */
#ifndef VRAMPOOL_RUN_H
#define VRAMPOOL_RUN_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "dump.h"

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

/* ---- run_check.c: before the launch ------------------------------------- */

/*
 * Checks everything the library would complain about, for the first run's
 * environment E and target T: the variables with the library's own parser
 * (its complaints shown as it prints them, naming the flag that set a bad
 * one), and that the stats and telemetry files can be written. Returns 0,
 * or TOOL_EXIT_ERROR after saying what is wrong.
 */
int run_check(const struct child_env *e, const struct run_target *t,
	      const struct run_options *o);

/* Warns on stderr when inspect says that CMD's copies cannot be seen. */
void run_preflight(const struct run_options *o);

/* ---- run_dumps.c: after each run ---------------------------------------- */

/*
 * Loads the dumps T's run wrote: the one file, or every file that matches
 * the pattern and is not older than the run. Returns the number loaded
 * (*ALL then holds them: free it), 0 when none was written, or -EINVAL
 * (a message is printed).
 */
int run_collect(const struct run_target *t, struct dump **all);

/*
 * Says on stderr why T's run wrote no dump: it failed first, or made no
 * CUDA call (WHAT, e.g. " (pool on)", follows CMD's name).
 */
void run_no_dump(const struct run_options *o, const struct run_target *t, const char *what);

/*
 * Prints the report of one run from its N dumps ALL on stderr: the
 * copiers alone, one dump as a table, several side by side. Reorders ALL.
 */
void run_report_one(struct dump *all, int n, const struct run_target *t,
		    const struct run_options *o);

/* Sums the copiers among the N dumps ALL of one --ab run into D. Reorders ALL. */
void run_sum(struct dump *d, struct dump *all, int n, const struct run_target *t,
	     const struct run_options *o);

#endif
