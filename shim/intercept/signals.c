/*
 * signals: sigaction(2) and every C library function that sets a
 * disposition with it from inside (signal, bsd_signal, ssignal,
 * sysv_signal, __sysv_signal, sigset), handed to the report's signal
 * handling. signals.h states the rules.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "intercept/signals.h"
#include "report/report.h"

/* Not declared under _GNU_SOURCE (POSIX.1-2008 dropped it); glibc still exports it. */
sighandler_t bsd_signal(int sig, sighandler_t handler);

VP_API int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	return report_sigaction(sig, act, oldact);
}

/*
 * The signal() family as glibc writes it: handler with FLAGS, SIG itself
 * blocked while it runs when SELF; the previous handler, or SIG_ERR with
 * errno EINVAL for SIG_ERR or a signal out of range.
 */
static sighandler_t vp_signal_as(int sig, sighandler_t handler, int flags, int self)
{
	struct sigaction act, old;

	if (handler == SIG_ERR || sig < 1 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	if (self)
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = flags;
	if (report_sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* BSD semantics: restarted system calls, the signal blocked in its own handler. */
VP_API sighandler_t signal(int sig, sighandler_t handler)
{
	return vp_signal_as(sig, handler, SA_RESTART, 1);
}

VP_API sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return vp_signal_as(sig, handler, SA_RESTART, 1);
}

VP_API sighandler_t ssignal(int sig, sighandler_t handler)
{
	return vp_signal_as(sig, handler, SA_RESTART, 1);
}

/*
 * System V semantics (what signal() is in a strict ISO C or X/Open
 * build): the default restored on delivery, the signal not blocked in its
 * handler, system calls not restarted.
 */
VP_API sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	return vp_signal_as(sig, handler, SA_RESETHAND | SA_NODEFER, 0);
}

VP_API sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	return vp_signal_as(sig, handler, SA_RESETHAND | SA_NODEFER, 0);
}

/*
 * sigset(3) as glibc writes it. SIG_HOLD blocks the signal and returns
 * SIG_HOLD when it was blocked already, else the disposition. Anything
 * else is installed (no flags, empty mask) and the signal unblocked; the
 * return is SIG_HOLD when it had been blocked, else the previous
 * disposition.
 */
VP_API sighandler_t sigset(int sig, sighandler_t disp)
{
	struct sigaction act, old;
	sigset_t set, was;

	sigemptyset(&set);
	if (sigaddset(&set, sig) < 0)
		return SIG_ERR;
	if (disp == SIG_HOLD) {
		if (sigprocmask(SIG_BLOCK, &set, &was) < 0)
			return SIG_ERR;
		if (sigismember(&was, sig))
			return SIG_HOLD;
		if (report_sigaction(sig, NULL, &old) < 0)
			return SIG_ERR;
		return old.sa_handler;
	}
	memset(&act, 0, sizeof(act));
	act.sa_handler = disp;
	sigemptyset(&act.sa_mask);
	if (report_sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	if (sigprocmask(SIG_UNBLOCK, &set, &was) < 0)
		return SIG_ERR;
	return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
}
