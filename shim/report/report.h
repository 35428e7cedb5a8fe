/*
 * report: what the shim writes about a run, while it runs and when it ends.
 *
 *  - At exit: the summary on stderr (unless VRAMPOOL_QUIET) and the JSON
 *    dump (VRAMPOOL_STATS, "final": true, "ended_by": "exit"), once per
 *    process and only if it used CUDA: the intercept layer says when a
 *    process does (report_start; intercept/life.h: from load time in a
 *    program linked against CUDA, else at its first hooked call).
 *  - While it runs: a reporter thread, started at the first CUDA call
 *    (report_start), never in a process that does not use CUDA, with every
 *    signal blocked, wakes once soon after the start (so a job killed early
 *    still leaves a dump) and then every VRAMPOOL_TELEMETRY_S seconds. Each
 *    time it rewrites the dump atomically ("final": false, "ended_by":
 *    null; so a job killed with SIGKILL leaves one at most that old),
 *    appends a telemetry line to VRAMPOOL_TELEMETRY, and under
 *    VRAMPOOL_VERBOSE, when rows moved, prints a telemetry line on stderr.
 *    The telemetry line (one JSON object per line, also appended at the
 *    end of the run):
 *      {"t": unix time, "elapsed_s", "pid", "format", "version", "host",
 *       "rank" (a number or null), "mode", "layout", "rows_seen",
 *       "rows_hits", "bytes_requested", "bytes_h2d", "bytes_served",
 *       "pool_bytes", "pool_budget", "state", "stood_aside", "ledger"}
 *    (issue 19 added format to layout; docs/schema/ holds its JSON Schema).
 *  - When SIGINT, SIGTERM or SIGHUP ends the job: the summary and the dump
 *    ("ended_by": "SIGTERM"...), then the process dies of the same signal
 *    (same exit status as without the shim). The shim handles only signals
 *    whose disposition is the default when report_start runs; a handler
 *    the program installs itself, before or after, is never replaced, and
 *    SIG_IGN stays ignored. A handler set to run once (SA_RESETHAND) runs
 *    once; the default that comes back after it is the shim's handler
 *    (report/signals.h), so the next signal leaves the report too. When the program later sets one of them back
 *    to SIG_DFL (Python does, just before it re-raises SIGINT to end on a
 *    KeyboardInterrupt), the shim keeps its handler in place of the
 *    default and reports the default to the program (report_sigaction).
 *
 * How a signal is handled without deadlock. The thread the signal lands
 * on may hold any lock (malloc's, stdio's, the shim's own). Its handler
 * only claims the final report, wakes the reporter thread through a pipe
 * and waits for its answer on another, then dies of the signal
 * (report/signals.h says exactly what runs there). The reporter formats
 * the dump and the summary into static buffers (report/json.h,
 * report/summary.h: vsnprintf, atomics, a sequence-counted read of the
 * text fields that gives up after bounded retries; the what-if snapshot
 * takes no lock) and writes them with open/write/rename (report/file.h):
 * no malloc, no stdio, no lock the stopped thread could hold. If the exit
 * report is being written by the very thread the signal lands on, the
 * handler defers the signal to the end of that report.
 *
 * Files: the dump replaces the previous one through an exclusive
 * temporary file and a rename, never following a link or waiting on a
 * FIFO planted at the temporary name (report/file.h). The telemetry file
 * is opened for appending with O_NOFOLLOW|O_NONBLOCK and used only if it
 * is a regular file. Paths come from secure_getenv (config); "%p" (pid),
 * "%r" (rank: RANK, else LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,
 * SLURM_PROCID; 0 when none is set) and "%h" (host name) are expanded.
 *
 * The rooms of report/ (each header is its contract); calls run one way,
 * down this list, never back up:
 *   report.c   this contract but report_sigaction: the reporter thread,
 *              the dumps and telemetry, load time, exit, fork; calls
 *              json.c, summary.c, file.c, signals.c;
 *   json.c     the JSON dump; summary.c the summary; both call reason.c
 *              and sbuf.c;
 *   reason.c   why the pool is not serving, text fields fit to print;
 *   sbuf.c     the bounded writer both format with;
 *   file.c     the dump's file, the paths and their checks;
 *   signals.c  the signals that end a job, report_sigaction, and the
 *              handshake of the final report.
 *
 * No function here makes a CUDA call.
 */
#ifndef VRAMPOOL_REPORT_H
#define VRAMPOOL_REPORT_H

#include <signal.h>

#include "core/config.h"

#define REPORT_FIRST_TICK_MS 200        /* the reporter's first wake-up after report_start */

/*
 * Load time: remembers c (it must outlive the process), sets up the
 * what-if table (VRAMPOOL_WHATIF_MEM), expands the paths for this process,
 * and checks that the directories of the stats and telemetry paths exist
 * and can be written: if not, one line on stderr now (the run goes on,
 * and the write is tried again later). Starts nothing.
 */
void report_setup(const struct config *c);

/*
 * The first CUDA call of the process (load time, for a program linked
 * against CUDA; and of a forked child that uses CUDA): starts the
 * reporter thread and installs the signal handlers.
 * Idempotent; after the first call one relaxed atomic load.
 */
void report_start(void);

/* The exit report (atexit): summary and dump, once. Makes no CUDA call. */
void report_exit(void);

/*
 * In a forked child: the parent's reporter thread does not exist here. The
 * child re-expands its paths (its pid), forgets the parent's what-if
 * figures and reporter, and re-arms the once-only report; its first CUDA
 * call starts a reporter of its own. The signal handlers stay installed
 * (dispositions are inherited); until then they end the child at once.
 * Call it after stats_reset.
 */
void report_atfork_child(void);

/*
 * The program's sigaction(2), for the intercept layer's signal hooks; the
 * real call is the C library's (core/dlreal.h).
 * For SIGINT, SIGTERM and SIGHUP, once report_start has run, it keeps the
 * shim's handler in place of SIG_DFL and reports SIG_DFL back (with the
 * mask and flags the program last set); a handler or SIG_IGN the program
 * sets replaces the shim's, but one set to run once (SA_RESETHAND) is run
 * by the shim's wrapper and reported as the program set it. Each call first checks that the shim's
 * handler is still the one installed: one replaced by a route the hooks do
 * not see (a raw rt_sigaction system call) is the program's again, and is
 * reported as what it is. Everything else goes to the C library as is. Safe to
 * call from a signal handler (no lock, no allocation).
 */
int report_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact);

#endif
