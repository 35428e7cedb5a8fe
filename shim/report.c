/*
 * report: the exit report for now; the reporter thread, periodic dumps and
 * signals land behind this contract (report.h).
 */
#include "report.h"

#include <stdlib.h>
#include <unistd.h>

#include "stats.h"

static const struct config *report_cfg;

void report_setup(const struct config *c)
{
	report_cfg = c;
}

void report_start(void)
{
}

void report_exit(void)
{
	char path[sizeof(report_cfg->stats_path) + 32];

	if (!report_cfg)
		return;
	path[0] = '\0';
	if (report_cfg->stats_path[0] &&
	    config_stats_path(report_cfg, (long)getpid(), path, sizeof(path)))
		path[0] = '\0';
	stats_exit_report(report_cfg->quiet, path);
}

void report_atfork_child(void)
{
}

int report_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact,
		     int (*real)(int, const struct sigaction *, struct sigaction *))
{
	return real(sig, act, oldact);
}
