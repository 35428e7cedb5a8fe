/*
 * summary: the human summary, formatted into a caller's buffer a whole
 * line at a time (summary.h is the contract).
 */
#include "report/summary.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "core/log.h"
#include "core/stats.h"
#include "pool/ledger.h"
#include "pool/whatif.h"
#include "report/reason.h"
#include "report/sbuf.h"

#define REPORT_SUGGEST_SIZES 5		/* sizes listed in the summary */
#define REPORT_MIN_COMMON_ROW 1024	/* smallest common row worth suggesting */

static uint64_t summary_gcd(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * Chooses the row to suggest from the listed sizes (most bytes first): the
 * size with most bytes, unless smaller listed sizes share a common divisor
 * of at least REPORT_MIN_COMMON_ROW with it, as full and partial batches of
 * one sample size do (64 and 40 rows of 3072 bytes); then that divisor,
 * which matches both. Small copies (labels) do not pull the row below the
 * threshold: a size that would is left out.
 */
static uint64_t summary_suggest_row(const struct stats_size *sizes, int n, int *common)
{
	uint64_t row = sizes[0].size;
	int i;

	*common = 0;
	for (i = 1; i < n; i++) {
		uint64_t g;

		if (sizes[i].size >= sizes[0].size)
			continue;
		g = summary_gcd(row, sizes[i].size);
		if (g >= REPORT_MIN_COMMON_ROW) {
			row = g;
			*common = 1;
		}
	}
	return row;
}

/*
 * The "no layout" line: the evidence's suggestion when the content was
 * examined, else the sizes seen, most bytes first, and a suggestion from
 * them.
 */
static void summary_suggestion(struct sbuf *b)
{
	struct stats_size sizes[STATS_MAX_SIZES];
	char suggest[STATS_TEXT_MAX], evidence[STATS_TEXT_MAX];
	char list[640], b1[32];
	size_t used = 0;
	uint64_t row;
	int i, n, common;

	report_get_text(STATS_SUGGEST, suggest, sizeof(suggest));
	report_get_text(STATS_EVIDENCE, evidence, sizeof(evidence));
	if (suggest[0] != '\0') {
		sbuf_line(b, "vrampool: no VRAMPOOL_LAYOUT set; %s%stry VRAMPOOL_LAYOUT=%s", evidence,
			  evidence[0] ? "; " : "", suggest);
		return;
	}
	if (evidence[0] != '\0') {
		sbuf_line(b, "vrampool: no VRAMPOOL_LAYOUT set; %s", evidence);
		return;
	}
	n = stats_sizes(sizes);
	if (n == 0) {
		sbuf_line(b, "vrampool: no VRAMPOOL_LAYOUT set and no host-to-device copy seen");
		return;
	}
	if (n > REPORT_SUGGEST_SIZES)
		n = REPORT_SUGGEST_SIZES;
	list[0] = '\0';
	for (i = 0; i < n && used < sizeof(list); i++) {
		int k = snprintf(list + used, sizeof(list) - used, "%s%llu (x%llu, %s)",
				 i ? ", " : "", (unsigned long long)sizes[i].size,
				 (unsigned long long)sizes[i].calls,
				 log_bytes(b1, sizeof(b1), sizes[i].bytes));
		if (k < 0)
			break;
		used += (size_t)k;
	}
	/* VRAMPOOL=off looks at no row, so a copy's size is all it knows, and a
	 * batch's size is not its sample's: point to the runs that look. */
	if (stats_global.mode == STATS_MODE_OFF) {
		sbuf_line(b, "vrampool: no VRAMPOOL_LAYOUT set; copy sizes seen (most bytes first): %s; "
			  "VRAMPOOL=off reads no row, so it cannot tell the sample's size: to find it, run "
			  "`vrampool run --dry --layout auto -- PROGRAM` (VRAMPOOL=dry VRAMPOOL_LAYOUT=auto)",
			  list);
		return;
	}
	row = summary_suggest_row(sizes, n, &common);
	sbuf_line(b, "vrampool: no VRAMPOOL_LAYOUT set; copy sizes seen (most bytes first): "
		  "%s; try VRAMPOOL_LAYOUT=%llu%s", list, (unsigned long long)row,
		  common ? " (the common row of these batch sizes; use one sample's size "
			   "if it is smaller)" : "");
}

/*
 * The what-if line. W, the matched bytes, is U + R: every row sighting is
 * either a first (unique) or a repeat. A budget of U would have served
 * served(U). When the run's budget was below U (or there was none: a dry
 * run, a dormant pool) and served(U) beats what the run served by more
 * than half a percent of W, say so; otherwise the budget held every row
 * (repeats the run did not serve were missed for other reasons, such as
 * copies made before the probe).
 */
static void summary_whatif(struct sbuf *b, int stood_down)
{
	struct whatif_snapshot w;
	uint64_t total, at_u, served = stats_get(ST_BYTES_SERVED), budget = stats_get(ST_POOL_BUDGET);
	char b1[32], b2[32], b3[32];

	whatif_snapshot(&w, 0);
	if (w.unique_bytes == 0)
		return;
	total = w.unique_bytes + w.repeat_bytes;
	at_u = w.served[w.npoints - 1];
	if (w.repeat_bytes == 0) {
		if (!stood_down)
			sbuf_line(b, "vrampool: no matched row repeated (%s of distinct rows seen): no budget "
				  "would have served any", log_bytes(b1, sizeof(b1), w.unique_bytes));
		return;
	}
	if (budget < w.unique_bytes && at_u > served && at_u - served > total / 200) {
		sbuf_line(b, "vrampool: a budget of %s would have served %.1f%% (%s of %s matched bytes)%s",
			  log_bytes(b1, sizeof(b1), w.unique_bytes), 100.0 * (double)at_u / (double)total,
			  log_bytes(b2, sizeof(b2), at_u), log_bytes(b3, sizeof(b3), total),
			  w.estimate ? ", estimated from the copies sampled while pooling stood aside" :
			  w.sampled ? ", estimated from a sample of the rows" : "");
		return;
	}
	sbuf_line(b, "vrampool: the budget held every repeated row (%s served of %s matched bytes)",
		  log_bytes(b1, sizeof(b1), served), log_bytes(b2, sizeof(b2), total));
}

/*
 * The cost ledger's lines (issue 16): one per spec that stood aside at some
 * point, its verdict in numbers and what it did. Returns whether any spec
 * stood aside.
 */
static int summary_ledger(struct sbuf *b)
{
	struct ledger_view v;
	char why[256];
	int any = 0;

	for (int i = 0; i < LEDGER_SPECS; i++) {
		if (!ledger_view(&ledger_board[i], &v) || (!v.aside && !v.stand_asides))
			continue;
		any = 1;
		sbuf_line(b, "vrampool: %s; %llu copies went straight through (stood aside %llu time%s, "
			  "resumed %llu time%s)", ledger_reason(&v, why, sizeof(why)),
			  (unsigned long long)v.aside_copies, (unsigned long long)v.stand_asides,
			  v.stand_asides == 1 ? "" : "s", (unsigned long long)v.resumes, v.resumes == 1 ? "" : "s");
	}
	return any;
}

int report_format_summary(char *buf, size_t len, const struct stats_dump *d)
{
	uint64_t calls = stats_get(ST_H2D_CALLS);
	uint64_t req = stats_get(ST_BYTES_REQUESTED);
	uint64_t h2d = stats_get(ST_BYTES_H2D);
	uint64_t served = stats_get(ST_BYTES_SERVED);
	uint64_t budget = stats_get(ST_POOL_BUDGET);
	uint64_t matched = stats_get(ST_MATCHED_CALLS), passed = stats_get(ST_STOOD_DOWN_CALLS);
	int dry = stats_global.mode == STATS_MODE_DRY;
	int stood = atomic_load(&stats_global.stood_down) || stats_get(ST_BACKOFF_EVENTS) > 0;
	char layout[STATS_TEXT_MAX], source[16], evidence[STATS_TEXT_MAX], why[STATS_TEXT_MAX];
	char b1[32], b2[32], b3[32], b4[48];
	const char *reason;
	struct sbuf b;

	sbuf_init(&b, buf, len);
	report_get_text(STATS_LAYOUT, layout, sizeof(layout));
	report_get_text(STATS_LAYOUT_SOURCE, source, sizeof(source));
	report_get_text(STATS_EVIDENCE, evidence, sizeof(evidence));
	if (dry) {
		sbuf_line(&b, "vrampool: dry run (no pool of its own): %llu host-to-device copies, "
			  "%s requested, %s crossed PCIe",
			  (unsigned long long)calls, log_bytes(b1, sizeof(b1), req), log_bytes(b2, sizeof(b2), h2d));
	} else if (!stats_global.enabled) {
		sbuf_line(&b, "vrampool: pass-through, pool off: %llu host-to-device copies, "
			  "%s requested, %s crossed PCIe",
			  (unsigned long long)calls, log_bytes(b1, sizeof(b1), req), log_bytes(b2, sizeof(b2), h2d));
	} else if (layout[0] == '\0') {
		sbuf_line(&b, "vrampool: %llu host-to-device copies, %s requested, "
			  "%s crossed PCIe (nothing pooled without a layout)",
			  (unsigned long long)calls, log_bytes(b1, sizeof(b1), req), log_bytes(b2, sizeof(b2), h2d));
	} else {
		sbuf_line(&b, "vrampool: %llu host-to-device copies, %s requested; "
			  "%s served from VRAM (%.1f%%), %s crossed PCIe",
			  (unsigned long long)calls, log_bytes(b1, sizeof(b1), req),
			  log_bytes(b2, sizeof(b2), served), req ? 100.0 * (double)served / (double)req : 0.0,
			  log_bytes(b3, sizeof(b3), h2d));
	}
	if (stats_global.enabled && layout[0] != '\0') {
		if (budget > 0)
			snprintf(b4, sizeof(b4), "budget %s", log_bytes(b3, sizeof(b3), budget));
		else
			snprintf(b4, sizeof(b4), "%s", atomic_load(&stats_global.probe_decided)
						     ? "no budget" : "budget not decided");
		sbuf_line(&b, "vrampool: rows %llu seen, %llu hits, %llu misses, %llu captured; "
			  "pool %s, %s in %llu slab%s of %s",
			  (unsigned long long)stats_get(ST_ROWS_SEEN), (unsigned long long)stats_get(ST_ROWS_HITS),
			  (unsigned long long)stats_get(ST_ROWS_MISSES),
			  (unsigned long long)stats_get(ST_ROWS_CAPTURED), stats_state_name(stats_state()),
			  log_bytes(b1, sizeof(b1), stats_get(ST_POOL_BYTES)),
			  (unsigned long long)stats_get(ST_POOL_SLABS), stats_get(ST_POOL_SLABS) == 1 ? "" : "s", b4);
	}
	/* Why the pool is not serving, as the JSON says it. Without a layout
	 * the suggestion below says it; a plain VRAMPOOL=off or a dry run the
	 * first line. */
	reason = report_reason(d, why, sizeof(why));
	if (reason && layout[0] != '\0' && !dry &&
	    (stats_global.enabled || (d && d->problem && d->problem[0] != '\0')))
		sbuf_line(&b, "vrampool: pool %s: %s", stats_state_name(stats_state()), reason);
	/* What a spec standing aside did not look at, the curve cannot count. */
	summary_whatif(&b, summary_ledger(&b) || stood);
	if (strcmp(source, "auto") == 0 && layout[0] != '\0' && strcmp(layout, "auto") != 0)
		sbuf_line(&b, "vrampool: layout found from the copies' content: %s%s%s", layout,
			  evidence[0] ? "; " : "", evidence);
	else if (strcmp(layout, "auto") == 0 && evidence[0] != '\0' && (!reason || !strstr(reason, evidence)))
		sbuf_line(&b, "vrampool: VRAMPOOL_LAYOUT=auto found no layout: %s", evidence);
	if (stood)
		sbuf_line(&b, "vrampool: rows did not repeat: pooling stood down after %llu copies; "
			  "host-side random augmentation makes every epoch unique",
			  (unsigned long long)(matched > passed ? matched - passed : matched));
	/* Admission on evidence (issue 16): rows kept out by the doorkeeper. */
	if (stats_get(ST_ADMIT_ENGAGEMENTS) > 0)
		sbuf_line(&b, "vrampool: a pass of the rows seen got no hits: rows are captured on their second "
			  "sighting (%llu rows seen once kept out of the pool; engaged %llu times, "
			  "disengaged %llu)", (unsigned long long)stats_get(ST_ROWS_REFUSED),
			  (unsigned long long)stats_get(ST_ADMIT_ENGAGEMENTS),
			  (unsigned long long)stats_get(ST_ADMIT_DISENGAGEMENTS));
	if (layout[0] == '\0')
		summary_suggestion(&b);
	return (int)b.used;
}

void report_write_summary(FILE *f, const struct stats_dump *d)
{
	char buf[REPORT_SUMMARY_MAX];
	int n = report_format_summary(buf, sizeof(buf), d);

	fwrite(buf, 1, (size_t)n, f);
}
