/*
 * signals: the shim's handler for the signals that end a job, the
 * program's view of their dispositions, and the handshake of the final
 * report between the handlers, the exit report and the reporter thread
 * (signals.h is the contract; it says what runs in a handler).
 *
 * State. report_claim decides, once, who writes the final report: the exit
 * report (-1) or a signal (its number, handed to the reporter through the
 * wake pipe); report_finished and a byte on the fin pipe say it is
 * written. Each of the three handled signals is, in report_state, the
 * program's, owned by the shim (its handler installed in place of the
 * default) or wrapped (the program's handler set with SA_RESETHAND, run
 * by report_on_oneshot, which then gives the default back to the shim);
 * while owned or wrapped, report_view holds the disposition the program
 * believes in, and report_prog the program's run-once action.
 */
#include "report/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/dlreal.h"
#include "report/report.h"

#define REPORT_NSIGS 3

static atomic_int report_thread_up;     /* the reporter thread runs (report_signals_arm) */
static atomic_int report_claim;         /* 0; -1: the exit report writes; a signal: the reporter does */
static atomic_int report_finished;      /* the final report is written */
static atomic_int report_dying;         /* a handler restores SIG_DFL to die */
static int report_wake[2] = { -1, -1 }; /* handler -> reporter: the signal's number */
static int report_fin[2] = { -1, -1 };  /* reporter -> waiting handlers: done */
static __thread int report_in_exit;     /* this thread writes the exit report */
static volatile sig_atomic_t report_deferred;  /* a signal that landed on it meanwhile */

/* Who holds a handled signal's disposition (report_state). */
enum {
	REPORT_PROGRAM,         /* what the program set is installed as it is */
	REPORT_OWNED,           /* the shim's handler stands in for the default */
	REPORT_WRAPPED,         /* report_on_oneshot runs the program's SA_RESETHAND handler */
};

static const int report_sigs[REPORT_NSIGS] = { SIGINT, SIGTERM, SIGHUP };
static atomic_int report_state[REPORT_NSIGS];
static struct sigaction report_view[REPORT_NSIGS];
static struct sigaction report_prog[REPORT_NSIGS];     /* REPORT_WRAPPED: the program's action */

static int report_sig_index(int sig)
{
	int i;

	for (i = 0; i < REPORT_NSIGS; i++)
		if (report_sigs[i] == sig)
			return i;
	return -1;
}

const char *report_sig_name(int sig)
{
	switch (sig) {
	case SIGINT:
		return "SIGINT";
	case SIGTERM:
		return "SIGTERM";
	case SIGHUP:
		return "SIGHUP";
	}
	return "signal";
}

static void report_close_pair(int fds[2])
{
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	fds[0] = fds[1] = -1;
}

int report_pipes_open(void)
{
	if (pipe2(report_wake, O_CLOEXEC | O_NONBLOCK) != 0)
		return -errno;
	if (pipe2(report_fin, O_CLOEXEC | O_NONBLOCK) != 0) {
		int err = -errno;

		report_close_pair(report_wake);
		return err;
	}
	return 0;
}

void report_pipes_close(void)
{
	report_close_pair(report_fin);
	report_close_pair(report_wake);
}

void report_signals_arm(void)
{
	atomic_store(&report_thread_up, 1);
}

int report_wait_wake(int timeout_ms)
{
	struct pollfd p = { .fd = report_wake[0], .events = POLLIN };
	unsigned char sig;
	int n = poll(&p, 1, timeout_ms);

	if (n < 0)
		return errno == EINTR ? -EAGAIN : -errno;
	if (n == 0)
		return 0;
	return read(report_wake[0], &sig, 1) == 1 ? sig : -EAGAIN;
}

int report_claim_final(int who)
{
	int expected = 0;

	return atomic_compare_exchange_strong(&report_claim, &expected, who);
}

int report_final_claimed(void)
{
	return atomic_load(&report_claim) != 0;
}

void report_mark_finished(void)
{
	atomic_store(&report_finished, 1);
	if (report_fin[1] >= 0)
		(void)!write(report_fin[1], "x", 1);
}

int report_is_finished(void)
{
	return atomic_load(&report_finished);
}

void report_wait_finished(void)
{
	struct timespec start, now;
	struct pollfd p;
	long left = REPORT_SIGNAL_WAIT_MS;

	if (report_fin[0] < 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!atomic_load(&report_finished) && left > 0) {
		p.fd = report_fin[0];
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, (int)left) > 0)
			return;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = REPORT_SIGNAL_WAIT_MS - ((now.tv_sec - start.tv_sec) * 1000L +
						(now.tv_nsec - start.tv_nsec) / 1000000L);
	}
}

/* Ends the process with sig as the default action would. Async-signal-safe. */
static void report_die(int sig)
{
	struct sigaction dfl;
	sigset_t set;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	atomic_store(&report_dying, 1);
	dlreal_sigaction(sig, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
}

/*
 * The shim's handler for SIGINT, SIGTERM and SIGHUP (signals.h): claim the
 * final report for this signal and wake the reporter, or, when someone
 * else claimed it, wait for it; then die of the signal.
 */
static void report_on_signal(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;

	if (report_in_exit) {
		report_deferred = sig;
		errno = saved;
		return;
	}
	if (atomic_load(&report_thread_up)) {
		if (report_claim_final(sig))
			(void)!write(report_wake[1], &b, 1);
		report_wait_finished();
	}
	report_die(sig);
	errno = saved;
}

static struct sigaction report_handler_action(void)
{
	struct sigaction sa;
	int i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = report_on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < REPORT_NSIGS; i++)
		sigaddset(&sa.sa_mask, report_sigs[i]);
	sa.sa_flags = SA_RESTART;
	return sa;
}

/*
 * The program's handler set with SA_RESETHAND (signals.h): the kernel's
 * part of the flag is done here, before the handler runs. The first
 * delivery takes the signal from wrapped to owned (a second delivery
 * racing it finds it owned and is the default's, as the kernel would
 * have it), shows the program SIG_DFL with its flags and mask, puts the
 * shim's handler in place of that default, then calls the program's
 * handler as the kernel would have.
 */
static void report_on_oneshot(int sig, siginfo_t *info, void *ctx)
{
	int saved = errno, i = report_sig_index(sig), expected = REPORT_WRAPPED;
	struct sigaction prog, ours;

	if (i < 0 || !atomic_compare_exchange_strong(&report_state[i], &expected, REPORT_OWNED)) {
		report_on_signal(sig);
		return;
	}
	prog = report_prog[i];
	report_view[i] = prog;
	report_view[i].sa_handler = SIG_DFL;
	ours = report_handler_action();
	dlreal_sigaction(sig, &ours, NULL);
	errno = saved;
	if (prog.sa_flags & SA_SIGINFO)
		prog.sa_sigaction(sig, info, ctx);
	else
		prog.sa_handler(sig);
}

/* Whether act is a handler of the program's to run once (SA_RESETHAND), which the shim wraps. */
static int report_is_oneshot(const struct sigaction *act)
{
	return (act->sa_flags & SA_RESETHAND) && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
	       act->sa_sigaction != report_on_oneshot;
}

/*
 * Installs report_on_oneshot for the program's run-once action act on
 * signal i (sig), with act's mask and flags less SA_RESETHAND (so the
 * kernel blocks what it would have while the handler runs). The previous
 * disposition, as installed, goes to prev (may be NULL). Returns 0 or -1
 * (errno set) with nothing changed.
 */
static int report_wrap(int i, int sig, const struct sigaction *act, struct sigaction *prev)
{
	struct sigaction tramp = *act, view = report_view[i], prog = report_prog[i];
	int st = atomic_load(&report_state[i]), rc;

	tramp.sa_flags = (act->sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
	tramp.sa_sigaction = report_on_oneshot;
	report_prog[i] = *act;
	report_view[i] = *act;
	atomic_store(&report_state[i], REPORT_WRAPPED);
	rc = dlreal_sigaction(sig, &tramp, prev);
	if (rc != 0) {
		report_prog[i] = prog;
		report_view[i] = view;
		atomic_store(&report_state[i], st);
	}
	return rc;
}

/*
 * Whether the shim's handler (or its wrapper of a run-once handler) is
 * still the one installed for sig. A route no hook sees (a raw
 * rt_sigaction system call, glibc's sigignore) may have replaced it: then
 * the signal is the program's again.
 */
static int report_still_ours(int sig)
{
	struct sigaction cur;

	return dlreal_sigaction(sig, NULL, &cur) != 0 || cur.sa_handler == report_on_signal ||
	       cur.sa_sigaction == report_on_oneshot;
}

/*
 * report_sigaction for a signal the shim owns or wraps (state st), act
 * not NULL: SIG_DFL is kept in the shim's hands, a run-once handler is
 * wrapped, anything else is installed and the signal is the program's.
 * The program is told view, what it believed installed.
 */
static int report_set_held(int i, int sig, int st, const struct sigaction *want, struct sigaction *oldact)
{
	struct sigaction view = report_view[i], ours;
	int rc;

	if (want->sa_handler == SIG_DFL) {
		if (st == REPORT_WRAPPED) {
			ours = report_handler_action();
			if ((rc = dlreal_sigaction(sig, &ours, NULL)) != 0)
				return rc;
			atomic_store(&report_state[i], REPORT_OWNED);
		}
		report_view[i] = *want;
	} else if (report_is_oneshot(want)) {
		if ((rc = report_wrap(i, sig, want, NULL)) != 0)
			return rc;
	} else {
		if ((rc = dlreal_sigaction(sig, want, NULL)) != 0)
			return rc;
		atomic_store(&report_state[i], REPORT_PROGRAM);
	}
	if (oldact)
		*oldact = view;
	return 0;
}

int report_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	struct sigaction want, prev, ours;
	int i = report_sig_index(sig), rc, st;

	if (i < 0 || atomic_load(&report_dying) ||
	    (act && (act->sa_handler == report_on_signal || act->sa_sigaction == report_on_oneshot)))
		return dlreal_sigaction(sig, act, oldact);
	if (act)
		want = *act;	/* act and oldact may be one struct */
	st = atomic_load(&report_state[i]);
	if (st != REPORT_PROGRAM && !report_still_ours(sig)) {
		atomic_store(&report_state[i], REPORT_PROGRAM);
		st = REPORT_PROGRAM;
	}
	if (st != REPORT_PROGRAM) {
		if (act)
			return report_set_held(i, sig, st, &want, oldact);
		if (oldact)
			*oldact = report_view[i];
		return 0;
	}
	if (!act || !atomic_load(&report_thread_up))
		return dlreal_sigaction(sig, act, oldact);
	if (want.sa_handler == SIG_DFL) {
		ours = report_handler_action();
		rc = dlreal_sigaction(sig, &ours, &prev);
		if (rc == 0) {
			report_view[i] = want;
			atomic_store(&report_state[i], REPORT_OWNED);
		}
	} else if (report_is_oneshot(&want)) {
		rc = report_wrap(i, sig, &want, &prev);
	} else {
		return dlreal_sigaction(sig, act, oldact);
	}
	if (rc == 0 && oldact)
		*oldact = prev;
	return rc;
}

/*
 * The calls go to the C library's sigaction (dlreal), never through the
 * exported hook. A run-once handler found in place is wrapped; should the
 * signal come between the look and the wrap, the kernel has reset it and
 * the wrapper runs the program's handler a second time: the window is a
 * few instructions, once per process.
 */
void report_take_signals(void)
{
	struct sigaction cur, ours = report_handler_action();
	int i, sig;

	for (i = 0; i < REPORT_NSIGS; i++) {
		sig = report_sigs[i];
		if (dlreal_sigaction(sig, NULL, &cur) != 0)
			continue;
		if (report_is_oneshot(&cur)) {
			(void)report_wrap(i, sig, &cur, NULL);
			continue;
		}
		if (cur.sa_handler != SIG_DFL || dlreal_sigaction(sig, &ours, NULL) != 0)
			continue;
		report_view[i] = cur;
		atomic_store(&report_state[i], REPORT_OWNED);
	}
}

void report_hold_signals(void)
{
	report_in_exit = 1;
}

void report_release_signals(void)
{
	int sig;

	report_in_exit = 0;
	sig = report_deferred;
	if (sig)
		report_die(sig);
}

void report_signals_atfork(void)
{
	atomic_store(&report_thread_up, 0);
	atomic_store(&report_claim, 0);
	atomic_store(&report_finished, 0);
	atomic_store(&report_dying, 0);
	report_in_exit = 0;
	report_deferred = 0;
	report_pipes_close();
}
