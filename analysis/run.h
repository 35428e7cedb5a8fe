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
 *   run_wait.c   while CMD runs: the signals that end a job, passed on
 *                to CMD when they were meant for the launcher alone, the
 *                bounded wait with its escalation to SIGKILL, and the
 *                launcher's end with CMD's status (dying of CMD's signal);
 *   run_dumps.c  after each run: the dumps it wrote collected, the copiers
 *                kept, a missing dump explained, and the report printed
 *                (one run alone or side by side; --ab summed per run).
 *
 * Ownership: struct run_options points into argv and the environment and
 * owns nothing. A struct run_target owns its private temporary directory
 * (tmpdir, "" when the dumps are kept: the user's stats file, or the
 * default ./vrampool.PROGRAM.PID.json) and its list of files seen before
 * the run (seen) until run.c releases it;
 * the dumps collected from it are the caller's to free. A struct child_env
 * holds pointers only: to string literals, the options and its target,
 * which outlive it. The command is single-threaded.
 */
#ifndef VRAMPOOL_RUN_H
#define VRAMPOOL_RUN_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "dump.h"

#define MAX_OVERRIDES 16
#define RUN_KILL_AFTER_S 30.0	/* --kill-after's default */

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
	int repeat;			/* --repeat: pairs of an --ab (1 without) */
	bool force;			/* --force: overwrite a file that is not a dump */
	double kill_after;		/* --kill-after: seconds from a passed-on signal to SIGKILL */
	char **cmd;
};

/* Where the dumps of one execution of CMD go, and what came back. */
struct run_target {
	char pattern[PATH_MAX];		/* VRAMPOOL_STATS for the child */
	char telemetry[PATH_MAX];	/* VRAMPOOL_TELEMETRY for the child, or "" */
	char tmpdir[PATH_MAX];		/* our own directory, removed after, or "" */
	struct run_seen *seen;		/* the dumps the pattern matched before the run */
	int nseen;
	time_t start;
	double wall_s;
	pid_t pid;
	int status;			/* exit status in shell terms */
	int term_sig;			/* the signal that ended CMD, or 0 */
	bool exec_failed;
};

/*
 * The launcher's signals while CMD runs (run_wait.c): SIGINT, SIGTERM,
 * SIGHUP and SIGQUIT (those not ignored at the start) and SIGCHLD, blocked
 * and taken with sigtimedwait, from the first run to the end.
 */
struct run_signals {
	sigset_t taken;			/* what the launcher blocks and takes */
	sigset_t old_mask;		/* the mask before, for CMD and the end */
	struct sigaction old_chld;	/* SIGCHLD's disposition before, likewise */
	int got;			/* the first ending signal the launcher took, or 0 */
	int forwarded;			/* the first it passed on to CMD, or 0 */
};

/* A file the stats pattern matched before a run: not one of its dumps unless rewritten. */
struct run_seen {
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
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
 * environment E and the N targets T: the variables with the library's own
 * parser (its complaints shown as it prints them, naming the flag that set
 * a bad one), that the stats and telemetry files can be written (a file
 * is created and removed where none is), and that no stats file is a
 * regular file other than a vrampool dump (unless --force). Returns 0, or
 * TOOL_EXIT_ERROR after saying what is wrong.
 */
int run_check(const struct child_env *e, const struct run_target *t, int n,
	      const struct run_options *o);

/*
 * Expands the stats or telemetry PATTERN as the library would for PID
 * (config_expand_path, with this process's rank and host) into OUT.
 * Returns 0 or -ENAMETOOLONG.
 */
int run_expand(const char *pattern, long pid, char *out, size_t size);

/*
 * Whether a file can be written at PATH: a regular file there is opened
 * for writing (not truncated), a FIFO or a device is taken as it is, and
 * where nothing is, one is created and removed. Returns 0, or a negative
 * errno with the reason in WHY.
 */
int run_path_writable(const char *path, char *why, size_t size);

/* Warns on stderr when inspect says that CMD's copies cannot be seen. */
void run_preflight(const struct run_options *o);

/* ---- run_progress.c: a one-line progress on a terminal -------------------- */

/*
 * The progress line of one run of CMD: drawn on stderr only when it is a
 * terminal (not under --verbose, not with TERM=dumb), redrawn every second
 * from the dump the library rewrites at each telemetry interval.
 */
struct run_progress {
	bool on, shown, has_dump;
	const char *pattern;		/* the run's VRAMPOOL_STATS pattern */
	double start, next;		/* monotonic seconds */
	struct timespec mtime;		/* of the dump last read */
	uint64_t copies, requested, served, pool_bytes;
	char state[32];
};

/* Sets P up for the run of T that starts now. */
void run_progress_start(struct run_progress *p, const struct run_options *o,
			const struct run_target *t);
/* Seconds until P's next redraw (0: now), or -1 when P draws nothing (or is NULL). */
double run_progress_due(const struct run_progress *p);
/* Redraws P's line when it is due, reading CHILD's dump again when it changed. */
void run_progress_tick(struct run_progress *p, pid_t child);
/* Clears P's line, if one was drawn, so that what follows starts a clean line. */
void run_progress_end(struct run_progress *p);

/* ---- run_wait.c: while CMD runs ------------------------------------------ */

/*
 * Before the first run: blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT (each
 * unless ignored now: it stays ignored, for CMD too) and SIGCHLD, whose
 * disposition becomes the default. Returns 0 or -errno.
 */
int run_signals_init(struct run_signals *s);

/*
 * In the child, before exec: the mask and SIGCHLD's disposition as they
 * were, and SIGTERM as the parent-death signal, so that a launcher killed
 * outright (SIGKILL) still ends CMD politely.
 */
void run_signals_child(const struct run_signals *s, pid_t launcher);

/*
 * Waits for CMD (pid child) and fills *wstatus. An ending signal the
 * launcher takes meanwhile is noted (s->got) and passed on to CMD when it
 * was meant for the launcher alone (run_wait.c says how that is told);
 * o->kill_after seconds after the first passed on, CMD still running gets
 * SIGKILL. Messages go to stderr. Returns 0 or -errno from waitpid.
 */
int run_wait(struct run_signals *s, const struct run_options *o, pid_t child, int *wstatus,
	     struct run_progress *progress);

/* Between runs: takes the ending signals that came while no CMD ran. Returns s->got. */
int run_signals_poll(struct run_signals *s);

/* Restores the mask and SIGCHLD's disposition run_signals_init found. */
void run_signals_release(struct run_signals *s);

/*
 * Ends the launcher as sig would (default disposition, unblocked, no core
 * file), after flushing stdio. Returns only if sig did not end it.
 */
void run_die_of(int sig);

/* "SIGINT", "SIGTERM", ..., else "signal N" (a static buffer). */
const char *run_signal_name(int sig);

/* ---- run_dumps.c: after each run ---------------------------------------- */

/*
 * Before T's run: notes the files its pattern matches already (T's seen,
 * freed by run_target_release), so that an older dump in the same place
 * is never taken for one of this run's. Returns 0 or -ENOMEM.
 */
int run_snapshot(struct run_target *t);

/*
 * Loads the dumps T's run wrote: every file that matches the pattern
 * (config_expand_path's %p, %r and %q{NAME} match anything) and was
 * written or rewritten since run_snapshot. Returns the number loaded
 * (*ALL then holds them: free it), 0 when none was written, or -EINVAL
 * (a message is printed).
 */
int run_collect(const struct run_target *t, struct dump **all);

/*
 * Before the report (which reorders the dumps): the lines that say where
 * the kept dumps of the RUNS runs are (N[i] dumps ALL[i] of run i, target
 * T[i]) and the command that reads them again, as heaptrack does; printed
 * after the report. Returns a string to free, or NULL when nothing was
 * kept (dumps in a private directory) or memory ran out.
 */
char *run_kept_text(struct dump *const *all, const int *n, int runs, const struct run_target *t);

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
