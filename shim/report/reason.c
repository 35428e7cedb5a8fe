/*
 * reason: why the pool is not serving, and the text fields cleaned for
 * printing; shared by the JSON dump and the summary (reason.h is the
 * contract).
 */
#include "report/reason.h"

#include <stdatomic.h>
#include <stdio.h>

#include "core/log.h"
#include "device/device.h"

void report_get_text(enum stats_text which, char *buf, size_t len)
{
	char *p;

	stats_get_text(which, buf, len);
	for (p = buf; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

const char *report_reason(const struct stats_dump *d, char *buf, size_t len)
{
	enum pool_state st = stats_state();
	char layout[STATS_TEXT_MAX], b1[32], b2[32], b3[32], b4[32];
	int tries, given_up, err;

	/* Not the probe's doing: the driver did not start (issue 17, item C). */
	if (st == POOL_DORMANT && device_start_failed(&tries, &given_up, &err)) {
		if (tries == 0)
			snprintf(buf, len, "the CUDA driver (libcuda.so.1) could not be loaded");
		else
			snprintf(buf, len, "the CUDA driver did not start: cuInit failed %d time%s (CUresult %d)%s",
				 tries, tries == 1 ? "" : "s", err, given_up ? "" : "; it is tried again");
		return buf;
	}
	report_get_text(STATS_REASON, buf, len);
	if (buf[0] != '\0')
		return buf;
	if (st == POOL_ACTIVE)
		return NULL;
	if (d && d->problem && d->problem[0] != '\0') {
		snprintf(buf, len, "%s", d->problem);
		return buf;
	}
	if (stats_global.mode == STATS_MODE_DRY) {
		snprintf(buf, len, "VRAMPOOL=dry: no pool of its own; the what-if figures tell what one would have served");
		return buf;
	}
	if (!stats_global.enabled) {
		snprintf(buf, len, "VRAMPOOL=off");
		return buf;
	}
	stats_get_text(STATS_LAYOUT, layout, sizeof(layout));
	if (layout[0] == '\0') {
		snprintf(buf, len, "no VRAMPOOL_LAYOUT set");
		return buf;
	}
	switch (st) {
	case POOL_DORMANT:
		if (!atomic_load(&stats_global.probe_decided))
			snprintf(buf, len, stats_get(ST_MATCHED_CALLS) == 0 ? "no copy matched the layout"
					   : "the budget is decided after VRAMPOOL_PROBE_AFTER matched copies");
		else if (stats_get(ST_POOL_BUDGET) == 0)
			snprintf(buf, len, "the probe found %s free of %s: no room for one slab beside the "
				 "reserve (%s) and the margin (%s)",
				 log_bytes(b1, sizeof(b1), stats_get(ST_PROBE_FREE)),
				 log_bytes(b2, sizeof(b2), stats_get(ST_PROBE_TOTAL)),
				 log_bytes(b3, sizeof(b3), stats_get(ST_PROBE_RESERVE)),
				 log_bytes(b4, sizeof(b4), stats_get(ST_PROBE_MARGIN)));
		else
			snprintf(buf, len, "a budget of %s is decided and no row admitted yet",
				 log_bytes(b1, sizeof(b1), stats_get(ST_POOL_BUDGET)));
		return buf;
	case POOL_FULL:
		snprintf(buf, len, "the budget of %s is full: rows past it cross PCIe",
			 log_bytes(b1, sizeof(b1), stats_get(ST_POOL_BUDGET)));
		return buf;
	case POOL_LATCHED:
		snprintf(buf, len, "%llu slab%s given back for the program's allocations: nothing new is admitted",
			 (unsigned long long)stats_get(ST_POOL_EVICTIONS), stats_get(ST_POOL_EVICTIONS) == 1 ? "" : "s");
		return buf;
	case POOL_OFF:
		snprintf(buf, len, "pool off");
		return buf;
	case POOL_ACTIVE:
		break;
	}
	return NULL;
}
