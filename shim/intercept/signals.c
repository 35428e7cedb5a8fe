/*
 * signals: sigaction(2) and signal(2), handed to the report's signal
 * handling. signals.h states the rules.
 */
#include <signal.h>
#include <string.h>

#include "intercept/signals.h"
#include "report/report.h"

VP_API int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	return report_sigaction(sig, act, oldact);
}

VP_API sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	if (sig > 0 && sig < NSIG)
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = SA_RESTART;
	if (report_sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}
