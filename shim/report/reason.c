/*
 * reason: why the pool is not serving, and the text fields cleaned for
 * printing; shared by the JSON dump and the summary (reason.h is the
 * contract).
 */
#include "report/reason.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "device/device.h"
#include "pool/whatif.h"
#include "report/sbuf.h"

#define REASON_SIZES 5          /* copy sizes a reason lists */

void report_get_text(enum stats_text which, char *buf, size_t len)
{
	char *p;

	stats_get_text(which, buf, len);
	for (p = buf; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

const char *report_sizes_list(char *buf, size_t len, int max)
{
	struct stats_size sizes[STATS_MAX_SIZES];
	struct sbuf b;
	char b1[32];
	int n = stats_sizes(sizes);

	sbuf_init(&b, buf, len);
	buf[0] = '\0';
	for (int i = 0; i < n && i < max; i++)
		sbuf_printf(&b, "%s%llu (x%llu, %s)", i ? ", " : "", (unsigned long long)sizes[i].size,
			    (unsigned long long)sizes[i].calls, log_bytes(b1, sizeof(b1), sizes[i].bytes));
	return n ? buf : NULL;
}

const char *report_repeat_why(char *buf, size_t len)
{
	struct whatif_snapshot w;
	uint64_t total, at_u, at_b, budget = stats_get(ST_POOL_BUDGET), served = stats_get(ST_BYTES_SERVED);
	char b1[32], b2[32], b3[32];

	whatif_snapshot(&w, budget);
	total = w.unique_bytes + w.repeat_bytes;
	if (w.unique_bytes == 0 || total == 0)
		return NULL;
	if (w.repeat_bytes * 200 <= total && w.unobserved) {
		snprintf(buf, len, "no row repeated in the copies the what-if curve saw (%s of distinct rows), but "
			 "copies of a spec the cost ledger stood aside, or of rows under %d bytes, went straight "
			 "through unobserved: a dry run (VRAMPOOL=dry) "
			 "tells whether rows repeat", log_bytes(b1, sizeof(b1), w.unique_bytes), WHATIF_SPARSE_MIN_ROW);
		return buf;
	}
	if (w.repeat_bytes * 200 <= total) {
		snprintf(buf, len, "no row repeated (%s of distinct rows seen, the what-if curve finds no "
			 "repeat): host-side random augmentation (random crops, flips, noise) makes every epoch "
			 "unique", log_bytes(b1, sizeof(b1), w.unique_bytes));
		return buf;
	}
	at_u = w.served[w.npoints - 1];
	at_b = budget < w.unique_bytes ? whatif_served_at(budget) : at_u;
	/* repeats the budget could not hold: the curve past it, and the run itself, got fewer */
	if (budget == 0 || budget >= w.unique_bytes || at_u <= at_b + total / 200 || at_u <= served + total / 200)
		return NULL;
	snprintf(buf, len, "the budget is below the unique working set: %s of distinct rows seen against a "
		 "budget of %s; a budget of %s would have served %.1f%% of the matched bytes, this one served "
		 "%.1f%%", log_bytes(b1, sizeof(b1), w.unique_bytes), log_bytes(b2, sizeof(b2), budget),
		 log_bytes(b3, sizeof(b3), w.unique_bytes), 100.0 * (double)at_u / (double)total,
		 100.0 * (double)served / (double)total);
	return buf;
}

/* Appends "; " and the curve's word on repeats (report_repeat_why) to buf, when it has one. */
static const char *report_with_why(char *buf, size_t len)
{
	char why[REPORT_REASON_MAX / 2];
	size_t n = strlen(buf);

	if (report_repeat_why(why, sizeof(why)) && n + 2 < len)
		snprintf(buf + n, len - n, "; %s", why);
	return buf;
}

/*
 * A layout named and no copy matching it: the sizes the program copies
 * and the way to the row size (case 2 of issue 19).
 */
static const char *report_no_match(const char *layout, char *buf, size_t len)
{
	char list[REPORT_REASON_MAX / 2];

	if (!report_sizes_list(list, sizeof(list), REASON_SIZES))
		snprintf(buf, len, "no copy matched the layout %s: no host-to-device copy was seen", layout);
	else
		snprintf(buf, len, "no copy matched the layout %s: copy sizes seen (most bytes first): %s; "
			 "let the shim find the row size with VRAMPOOL_LAYOUT=auto (vrampool run --layout auto)",
			 layout, list);
	return buf;
}

/*
 * VRAMPOOL_LAYOUT=auto still looking when asked: what it looked at, why
 * no row size yet, and the next step (case 3 of issue 19).
 */
static const char *report_auto_looking(char *buf, size_t len)
{
	char evidence[STATS_TEXT_MAX], list[REPORT_REASON_MAX / 2];

	report_get_text(STATS_EVIDENCE, evidence, sizeof(evidence));
	snprintf(buf, len, "VRAMPOOL_LAYOUT=auto found no row size: %s; copy sizes seen (most bytes first): %s; "
		 "next: run longer (rows of a reshuffled dataset repeat from the second epoch on), or name "
		 "the row size (one sample's bytes) with VRAMPOOL_LAYOUT",
		 evidence[0] ? evidence : "no copy was examined (none of at least 256 bytes from host memory)",
		 report_sizes_list(list, sizeof(list), REASON_SIZES) ? list : "none");
	return buf;
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
		return atomic_load(&stats_global.stood_down) ? report_with_why(buf, len) : buf;
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
		if (strcmp(layout, "auto") == 0)
			return report_auto_looking(buf, len);
		if (!atomic_load(&stats_global.probe_decided) && stats_get(ST_MATCHED_CALLS) == 0)
			return report_no_match(layout, buf, len);
		if (!atomic_load(&stats_global.probe_decided))
			snprintf(buf, len, "the budget is decided after VRAMPOOL_PROBE_AFTER matched copies");
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
		return report_with_why(buf, len);
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
