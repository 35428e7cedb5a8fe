/*
 * report: what the shim writes about a run, while it runs and when it ends.
 *
 *  - At exit: the summary on stderr (unless VRAMPOOL_QUIET) and the JSON
 *    dump (VRAMPOOL_STATS), once per process and only if it used CUDA.
 *  - While it runs: every VRAMPOOL_TELEMETRY_S seconds the dump is rewritten
 *    atomically (so a job killed with SIGKILL leaves one at most that old),
 *    a JSON line is appended to VRAMPOOL_TELEMETRY, and under
 *    VRAMPOOL_VERBOSE a telemetry line goes to stderr. A reporter thread
 *    does this; it starts at the first CUDA call (report_start), never in a
 *    process that does not use CUDA, and blocks every signal.
 *  - When SIGINT, SIGTERM or SIGHUP ends the job: the summary and the dump,
 *    then the process dies of the same signal (same exit status as without
 *    the shim). The shim handles only signals whose disposition is the
 *    default; a handler the program installs itself is never replaced.
 *    When the program later sets one of them back to SIG_DFL (Python does,
 *    just before it re-raises SIGINT to end on a KeyboardInterrupt), the
 *    shim keeps its handler in place of the default and reports the
 *    default to the program (report_sigaction).
 *
 * Files: the dump is written to a temporary file created exclusively in
 * the target directory (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 until it is
 * renamed over the path), never following a link planted at that name and
 * never blocking on a FIFO. Paths come from secure_getenv. "%p" (pid), "%r"
 * (rank: RANK, else LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,
 * SLURM_PROCID; 0 when none is set) and "%h" (host name) are expanded.
 *
 * No function here makes a CUDA call.
 */
#ifndef VRAMPOOL_REPORT_H
#define VRAMPOOL_REPORT_H

#include <signal.h>

#include "config.h"

/*
 * Load time: remembers c (it must outlive the process), checks that the
 * stats and telemetry paths can be written (one line on stderr now if not,
 * rather than at exit), installs nothing yet.
 */
void report_setup(const struct config *c);

/*
 * The first CUDA call of the process (and of a forked child that uses
 * CUDA): starts the reporter thread and installs the signal handlers.
 * Idempotent and cheap after the first call.
 */
void report_start(void);

/* The exit report (atexit): summary and dump, once. Makes no CUDA call. */
void report_exit(void);

/* In a forked child: the parent's reporter thread does not exist here. */
void report_atfork_child(void);

/*
 * The program's sigaction(2), for interpose.c's wrapper: real is libc's.
 * For SIGINT, SIGTERM and SIGHUP it keeps the shim's handler in place of
 * SIG_DFL and reports SIG_DFL back; everything else goes to real as is.
 */
int report_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact,
		     int (*real)(int, const struct sigaction *, struct sigaction *));

#endif
