/*
 * signals: the signals that end a job (SIGINT, SIGTERM, SIGHUP), and the
 * handshake that decides who writes the final report: the exit report, or
 * the reporter thread for a signal. Internal to report/: report.c calls it;
 * the intercept layer only calls report_sigaction (report.h).
 *
 * The handshake. A claim, taken once per process by compare-and-swap,
 * says who writes the final report: the exit report (-1) or the reporter
 * thread for a signal (its number). Two pipes carry the word: wake, from a
 * handler to the reporter (the signal's number, one byte); fin, from the
 * reporter to waiting handlers (one byte once the report is written,
 * together with the finished flag).
 *
 * What runs in a signal handler (report_on_signal, static here): when the
 * exit report is being written by the very thread the signal lands on, it
 * only notes the signal (report_release_signals dies of it afterwards).
 * Otherwise, when the reporter thread runs, it claims the final report and
 * writes the signal's number on the wake pipe (write(2)), or, when someone
 * else claimed it, does not; then waits for the fin pipe (poll(2), at most
 * REPORT_SIGNAL_WAIT_MS); then restores SIG_DFL through the C library's
 * sigaction (core/dlreal.h), unblocks the signal and raises it again
 * (report_die). Atomics, write, poll, clock_gettime, sigaction,
 * pthread_sigmask and raise only: no lock, no allocation, no stdio, so the
 * thread the signal lands on may hold any lock (malloc's, stdio's, the
 * shim's own).
 *
 * Which signals the shim owns. It handles only signals whose disposition
 * is the default when report_take_signals runs; a handler the program
 * installs itself, before or after, is never replaced, and SIG_IGN stays
 * ignored. When the program later sets one of them back to SIG_DFL, the
 * shim keeps its handler and reports the default to the program
 * (report_sigaction, report.h). While a signal is owned, the shim keeps
 * the disposition the program believes in. A handler installed by a route
 * no hook sees (a raw rt_sigaction system call, as the Go runtime makes)
 * ends the ownership when report_sigaction next finds it in place of the
 * shim's: from then on the program is told what is really installed.
 *
 * A handler set to run once (SA_RESETHAND: sysv_signal, a strict ISO C
 * build's signal, or sigaction with the flag), set before or after the
 * start, is wrapped: the shim installs its own handler with the
 * program's mask and flags less SA_RESETHAND (report_on_oneshot), and
 * the program is told its own action. At the first delivery the wrapper
 * does what the kernel would have done, SIG_DFL back (shown to the
 * program with its flags and mask), but with the shim's handler standing
 * in for that default, then calls the program's handler; so the next
 * such signal leaves the final report and kills, as the default would.
 * The program's handler itself is never replaced, and runs as the kernel
 * would have run it (same mask, same siginfo and context).
 */
#ifndef VRAMPOOL_SIGNALS_H
#define VRAMPOOL_SIGNALS_H

#define REPORT_SIGNAL_WAIT_MS 5000      /* a signal handler waits this long for the final report */

/* Opens the wake and fin pipes (non-blocking, close-on-exec). Returns 0 or -errno; on an error none is open. */
int report_pipes_open(void);

/* Closes the pipes (those open). */
void report_pipes_close(void);

/*
 * The reporter thread runs: from now on a handled signal hands the final
 * report to it (before, a handler ends the process at once).
 */
void report_signals_arm(void);

/* Installs the shim's handler for each handled signal whose disposition is the default now. */
void report_take_signals(void);

/*
 * The reporter's wait: at most timeout_ms (-1: no limit) for a handler's
 * word. Returns the signal's number, 0 when the time ran out, -EAGAIN when
 * woken without one (interrupted, or nothing to read), or another -errno
 * when poll failed.
 */
int report_wait_wake(int timeout_ms);

/* The name of a handled signal ("SIGTERM"...), "signal" for another. */
const char *report_sig_name(int sig);

/* Claims the final report for who (-1: the exit report). Returns 1 when this call took it, 0 when it was taken. */
int report_claim_final(int who);

/* Whether the final report is claimed (by anyone). */
int report_final_claimed(void);

/* The final report is written: sets the flag and wakes the handlers waiting on the fin pipe. */
void report_mark_finished(void);

/* Whether the final report is written. */
int report_is_finished(void);

/* Waits, at most REPORT_SIGNAL_WAIT_MS, for the final report to be written. Async-signal-safe. */
void report_wait_finished(void);

/*
 * Around the exit report, on the thread that writes it: a handled signal
 * that lands on that thread meanwhile is noted, not handled (its handler
 * would wait for a report its own thread is writing); release then dies of
 * it, if one came.
 */
void report_hold_signals(void);
void report_release_signals(void);

/*
 * In a forked child: the parent's reporter is gone. Closes the pipes and
 * clears the claim, the finished flag, the armed and dying flags and a
 * held signal; the signals the shim owns stay owned (dispositions are
 * inherited).
 */
void report_signals_atfork(void);

#endif
