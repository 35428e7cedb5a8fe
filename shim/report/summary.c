/*
 * summary: the human summary, formatted into a caller's buffer a whole
 * line at a time (summary.h is the contract).
 */
#include "report/summary.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "core/log.h"
#include "core/stats.h"
#include "pool/backoff.h"
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
 * VRAMPOOL_LAYOUT was set and rejected at load (why: the parser's
 * reason): said as such, never as a missing layout, with the sizes seen.
 * The pass-through read no row, so the row size is not guessed from them.
 */
static void summary_rejected_layout(struct sbuf *b, const char *why)
{
	char list[640];

	if (!report_sizes_list(list, sizeof(list), REPORT_SUGGEST_SIZES)) {
		sbuf_line(b, "vrampool: VRAMPOOL_LAYOUT was rejected at load (%s); no host-to-device copy seen",
			  why);
		return;
	}
	sbuf_line(b, "vrampool: VRAMPOOL_LAYOUT was rejected at load (%s); copy sizes seen (most bytes "
		  "first): %s; fix the layout, or find the row size with `vrampool run --dry "
		  "--layout auto -- PROGRAM` (VRAMPOOL=dry VRAMPOOL_LAYOUT=auto)", why, list);
}

/*
 * The "no layout" line: the evidence's suggestion when the content was
 * examined, else the sizes seen, most bytes first, and a suggestion from
 * them. A layout that was set and rejected is said so (d's layout_error).
 */
static void summary_suggestion(struct sbuf *b, const struct stats_dump *d)
{
	struct stats_size sizes[STATS_MAX_SIZES];
	char suggest[STATS_TEXT_MAX], evidence[STATS_TEXT_MAX];
	char list[640];
	uint64_t row;
	int n, common;

	if (d && d->layout_error && d->layout_error[0] != '\0') {
		summary_rejected_layout(b, d->layout_error);
		return;
	}
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
	report_sizes_list(list, sizeof(list), REPORT_SUGGEST_SIZES);
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
			  w.unobserved ? ", estimated: copies that went straight through (stood aside, or rows too small to sample) were not observed; a dry run (VRAMPOOL=dry) measures it" :
			  w.estimate ? ", estimated: copies that went straight through were sampled by content" :
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
/* A duration in ns for humans: "850 ns", "12.3 us", "4.56 ms", "1.23 s". */
static const char *summary_ns(char *buf, size_t len, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, len, "%llu ns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
	return buf;
}

/*
 * The cost ledger's books in one line (issue 19, the never-slower work of
 * issue 16): over every spec, the host time spent pooling, the link time
 * its hits saved, the device calls it added, and the copies that stood
 * aside. Nothing when no spec was weighed.
 */
static void summary_ledger_total(struct sbuf *b)
{
	struct ledger_view v;
	uint64_t cpu = 0, saved = 0, calls = 0, copies = 0, aside = 0, specs = 0;
	char t1[32], t2[32];

	for (int i = 0; i < LEDGER_SPECS; i++) {
		if (!ledger_view(&ledger_board[i], &v))
			continue;
		specs++;
		cpu += v.cpu_ns;
		saved += v.saved_ns;
		calls += v.calls_added;
		copies += v.copies;
		aside += v.aside_copies;
	}
	if (specs == 0)
		return;
	sbuf_line(b, "vrampool: cost ledger: %s of host time spent pooling %llu copies, %s of link time saved, "
		  "%llu device calls added; %llu copies stood aside (went straight through)",
		  summary_ns(t1, sizeof(t1), cpu), (unsigned long long)copies, summary_ns(t2, sizeof(t2), saved),
		  (unsigned long long)calls, (unsigned long long)aside);
}

static int summary_ledger(struct sbuf *b)
{
	struct ledger_view v;
	char why[320];
	int any = 0;

	summary_ledger_total(b);
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

/*
 * Pooling stood down at some point: after how many copies, what the pool
 * could admit (nothing more, or, the doorkeeper engaged, only rows seen
 * twice) and why, as the what-if curve tells it (report_repeat_why: a
 * budget below the unique working set, or no repeat at all), unless the
 * reason line above said it.
 */
static void summary_stood(struct sbuf *b, const char *reason, uint64_t copies)
{
	char why[REPORT_REASON_MAX / 2];
	const char *w = report_repeat_why(why, sizeof(why));
	int twice = stats_get(ST_ADMIT_ENGAGEMENTS) > stats_get(ST_ADMIT_DISENGAGEMENTS);

	if (w && reason && strstr(reason, w))
		w = NULL;
	sbuf_line(b, "vrampool: pooling stood down after %llu copies (rows did not hit the pool and it %s; "
		  "one copy in %d sampled after)%s%s", (unsigned long long)copies,
		  twice ? "admitted only rows seen twice" : "could admit no more", BACKOFF_SAMPLE_EVERY,
		  w ? ": " : "", w ? w : "");
}

/*
 * The copies that went through untouched, by reason, in words (issue 19:
 * the dump's copies.passthrough_reasons). VRAMPOOL=off and a missing
 * layout are said by the first line and the suggestion; the line lists
 * every reason once another is there too.
 */
static void summary_passthrough(struct sbuf *b)
{
	static const struct { enum stat_id id; const char *words; } why[] = {
		{ ST_PASS_NO_MATCH, "whose size matched no row of the layout" },
		{ ST_PASS_DST_NOT_DEVICE, "destination not device memory (managed or host)" },
		{ ST_PASS_DST_EXTENT, "copy ran past its destination's allocation" },
		{ ST_PASS_NO_CONTEXT, "not the device's primary context on the calling thread" },
		{ ST_PASS_SRC_NOT_HOST, "source not host memory" },
		{ ST_GRAPH_CAPTURE_CALLS, "stream capturing a graph" },
		{ ST_PASS_NO_DRIVER, "CUDA driver not loaded" },
		{ ST_PASS_NO_LAYOUT, "no layout yet" },
		{ ST_PASS_OFF, "VRAMPOOL=off" },
	};
	char list[768];
	struct sbuf l;
	uint64_t total = 0, n;
	size_t i, shown = 0;

	sbuf_init(&l, list, sizeof(list));
	list[0] = '\0';
	for (i = 0; i < sizeof(why) / sizeof(why[0]); i++) {
		if ((n = stats_get(why[i].id)) == 0)
			continue;
		/* the last two alone are said elsewhere */
		if (i < sizeof(why) / sizeof(why[0]) - 2)
			shown++;
		total += n;
		sbuf_printf(&l, "%s%llu %s", l.used ? ", " : "", (unsigned long long)n, why[i].words);
	}
	if (shown)
		sbuf_line(b, "vrampool: %llu cop%s passed through untouched: %s", (unsigned long long)total,
			  total == 1 ? "y" : "ies", list);
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
	char layout[STATS_TEXT_MAX], source[16], evidence[STATS_TEXT_MAX], why[REPORT_REASON_MAX];
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
	} else if (!stats_global.enabled && d && d->problem && d->problem[0] != '\0') {
		/* the variable's own line at load said what is wrong: named here, not repeated */
		sbuf_line(&b, "vrampool: pass-through, pool off by a malformed %.*s%s: %llu host-to-device copies, "
			  "%s requested, %s crossed PCIe", (int)strcspn(d->problem, "="), d->problem,
			  d->invalid > 1 ? " (and others)" : "",
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
	 * the suggestion below says it; VRAMPOOL=off, a dry run or a malformed
	 * variable the first line (a malformed variable's own line at load
	 * said what is wrong: DESIGN.md's one clear line, not repeated). */
	reason = report_reason(d, why, sizeof(why));
	if (reason && layout[0] != '\0' && !dry && stats_global.enabled)
		sbuf_line(&b, "vrampool: pool %s: %s", stats_state_name(stats_state()), reason);
	/* What a spec standing aside did not look at, the curve cannot count. */
	summary_whatif(&b, summary_ledger(&b) || stood);
	if (strcmp(source, "auto") == 0 && layout[0] != '\0' && strcmp(layout, "auto") != 0)
		sbuf_line(&b, "vrampool: layout found from the copies' content: %s%s%s", layout,
			  evidence[0] ? "; " : "", evidence);
	else if (strcmp(layout, "auto") == 0 && evidence[0] != '\0' && (!reason || !strstr(reason, evidence)))
		sbuf_line(&b, "vrampool: VRAMPOOL_LAYOUT=auto found no layout: %s", evidence);
	if (stood)
		summary_stood(&b, reason, matched > passed ? matched - passed : matched);
	summary_passthrough(&b);
	/* Admission on evidence (issue 16): rows kept out by the doorkeeper. */
	if (stats_get(ST_ADMIT_ENGAGEMENTS) > 0)
		sbuf_line(&b, "vrampool: a pass of the rows seen got no hits: rows are captured on their second "
			  "sighting (%llu rows seen once kept out of the pool; engaged %llu times, "
			  "disengaged %llu)", (unsigned long long)stats_get(ST_ROWS_REFUSED),
			  (unsigned long long)stats_get(ST_ADMIT_ENGAGEMENTS),
			  (unsigned long long)stats_get(ST_ADMIT_DISENGAGEMENTS));
	if (layout[0] == '\0')
		summary_suggestion(&b, d);
	return (int)b.used;
}

void report_write_summary(FILE *f, const struct stats_dump *d)
{
	char buf[REPORT_SUMMARY_MAX];
	int n = report_format_summary(buf, sizeof(buf), d);

	fwrite(buf, 1, (size_t)n, f);
}
