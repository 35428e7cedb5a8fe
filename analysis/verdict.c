/*
 * verdict.c: an off/on pair side by side and judged, bytes and time
 * (verdict.h), and a dry dump set against a real run.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "verdict.h"
#include "vrampool.h"

const char *verdict_figure_name(bool steady)
{
	return steady ? "time per copy (steady)" : "wall time";
}

/* Seconds as "850 ns", "12.3 us", "1.25 ms" or "3.40 s" into BUF; returns BUF. */
static const char *format_seconds(double s, char *buf, size_t size)
{
	if (s < 1e-6)
		snprintf(buf, size, "%.0f ns", s * 1e9);
	else if (s < 1e-3)
		snprintf(buf, size, "%.1f us", s * 1e6);
	else if (s < 1.0)
		snprintf(buf, size, "%.1f ms", s * 1e3);
	else
		snprintf(buf, size, "%.2f s", s);
	return buf;
}

void verdict_figure_of(const struct dump *off, const struct dump *on, struct verdict_figure *f)
{
	memset(f, 0, sizeof(*f));
	if (off->has_steady && on->has_steady && off->steady_ns_per_copy > 0 &&
	    on->steady_ns_per_copy > 0) {
		f->known = f->steady = true;
		f->off = off->steady_ns_per_copy / 1e9;
		f->on = on->steady_ns_per_copy / 1e9;
	} else if (off->has_elapsed && on->has_elapsed && off->elapsed_s > 0 && on->elapsed_s > 0) {
		f->known = true;
		f->off = off->elapsed_s;
		f->on = on->elapsed_s;
	} else if (off->wall_s > 0 && on->wall_s > 0) {
		f->known = true;
		f->off = off->wall_s;
		f->on = on->wall_s;
	}
}

double verdict_time_ratio(const struct dump *off, const struct dump *on)
{
	struct verdict_figure f;

	verdict_figure_of(off, on, &f);
	return f.known ? f.off / f.on : 0.0;
}

/* Whether the ratio R is within BAND of 1, either way (1.25 and 0.80 alike). */
static bool within_band(double r, double band)
{
	return (r >= 1 ? r : 1 / r) <= 1 + band + 1e-9;
}

/* Adds run X, the K-th, into SUM: dump_add, with the mean of the runs' wall times. */
static void verdict_add_run(struct dump *sum, const struct dump *x, int k)
{
	double elapsed = sum->elapsed_s, wall = sum->wall_s;

	if (k == 0) {
		*sum = *x;
		return;
	}
	dump_add(sum, x);
	sum->elapsed_s = (elapsed * k + x->elapsed_s) / (k + 1);
	sum->wall_s = (wall * k + x->wall_s) / (k + 1);
}

void verdict_add_pair(struct dump *sum_off, struct dump *sum_on, const struct dump *off,
		      const struct dump *on, int k, double *ratios)
{
	ratios[k] = verdict_time_ratio(off, on);
	verdict_add_run(sum_off, off, k);
	verdict_add_run(sum_on, on, k);
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median, min and max of the N known (nonzero) RATIOS into V; V->pairs counts them. */
static void verdict_spread(struct verdict *v, const double *ratios, int n)
{
	double r[VERDICT_PAIRS_MAX];
	int i, k = 0;

	for (i = 0; i < n && k < VERDICT_PAIRS_MAX; i++)
		if (ratios[i] > 0 && isfinite(ratios[i]))
			r[k++] = ratios[i];
	v->pairs = k;
	if (!k)
		return;
	qsort(r, (size_t)k, sizeof(r[0]), compare_doubles);
	v->min = r[0];
	v->max = r[k - 1];
	v->median = k % 2 ? r[k / 2] : (r[k / 2 - 1] + r[k / 2]) / 2;
	v->band = k == 1 ? VERDICT_ONE_PAIR_BAND : VERDICT_BAND_MIN;
}

/* The time half of the verdict: V's pairs judged, its text written. */
static void verdict_judge_time(struct verdict *v)
{
	char s1[32], s2[32], what[160], spread[160] = "";
	const char *name = verdict_figure_name(v->figure.steady);

	if (!v->figure.known || !v->pairs) {
		v->time = VERDICT_TIME_UNKNOWN;
		snprintf(v->time_text, sizeof(v->time_text),
			 "time: not known (the dumps state neither a pace nor an elapsed time)");
		return;
	}
	snprintf(what, sizeof(what), "%s %s off, %s on%s", name,
		 format_seconds(v->figure.off, s1, sizeof(s1)),
		 format_seconds(v->figure.on, s2, sizeof(s2)),
		 v->figure.steady ? "" : "; the dumps have no pace, and wall time counts start-up");
	if (v->pairs > 1)
		snprintf(spread, sizeof(spread), "median of %d pairs, spread %.2f-%.2f, band +-%.0f%%: ",
			 v->pairs, v->min, v->max, 100 * v->band);
	if (v->pairs == 1 && within_band(v->median, v->band)) {
		v->time = VERDICT_TIME_ONE_PAIR;
		snprintf(v->time_text, sizeof(v->time_text),
			 "time: off/on %.2f (%s): one pair cannot carry a time verdict on a noisy machine unless the difference is over %.0f%%; `--ab --repeat 5` runs five pairs",
			 v->median, what, 100 * VERDICT_ONE_PAIR_BAND);
	} else if (v->min <= 1 + v->band + 1e-9 && v->max >= 1 / (1 + v->band) - 1e-9) {
		/* the pairs disagree, or one is within the band: no direction holds in every pair */
		v->time = VERDICT_TIME_SAME;
		snprintf(v->time_text, sizeof(v->time_text),
			 "time: no measurable difference in time: off/on %.2f (%s%s)", v->median, spread, what);
	} else {
		v->time = v->median > 1 ? VERDICT_TIME_FASTER : VERDICT_TIME_SLOWER;
		snprintf(v->time_text, sizeof(v->time_text), "time: %s with the pool: off/on %.2f (%s%s)",
			 v->median > 1 ? "faster" : "slower", v->median, spread, what);
	}
}

void verdict_judge(struct verdict *v, const struct dump *off, const struct dump *on,
		   const double *ratios, int n)
{
	char b1[32], b2[32], b3[32];
	double a = (double)off->requested, b = (double)on->requested;

	memset(v, 0, sizeof(*v));
	v->bytes_ratio = on->h2d ? (double)off->h2d / (double)on->h2d : 0.0;
	if (!off->h2d_calls && !on->h2d_calls) {
		v->bytes = VERDICT_BYTES_NO_COPIES;
		snprintf(v->bytes_text, sizeof(v->bytes_text),
			 "no host-to-device copy was seen in either run; run `vrampool inspect` on the program.");
	} else if (a <= 0 || b <= 0 || fabs(a - b) > 0.01 * (a > b ? a : b)) {
		v->bytes = VERDICT_BYTES_NOT_COMPARABLE;
		snprintf(v->bytes_text, sizeof(v->bytes_text),
			 "not comparable: the runs asked for different amounts (%s off, %s on).",
			 tool_format_bytes(off->requested, b1, sizeof(b1)),
			 tool_format_bytes(on->requested, b2, sizeof(b2)));
	} else if (on->h2d >= off->h2d) {
		v->bytes = VERDICT_BYTES_NO_SAVING;
		snprintf(v->bytes_text, sizeof(v->bytes_text), "no saving: the pool served nothing%s.",
			 on->layout[0] ? (on->matched_calls ? "" : " (no copy matched the layout)") :
			 " (no layout given: try --layout)");
	} else {
		v->bytes = VERDICT_BYTES_FEWER;
		snprintf(v->bytes_text, sizeof(v->bytes_text),
			 "with the pool, %.2fx fewer bytes crossed to the device (%s instead of %s, %.1f%% saved) for the same %s requested.",
			 v->bytes_ratio, tool_format_bytes(on->h2d, b1, sizeof(b1)),
			 tool_format_bytes(off->h2d, b2, sizeof(b2)),
			 100.0 - diagnose_percent(on->h2d, off->h2d),
			 tool_format_bytes(on->requested, b3, sizeof(b3)));
	}
	verdict_figure_of(off, on, &v->figure);
	verdict_spread(v, ratios, n);
	verdict_judge_time(v);
	if (diagnose_served_little(on))
		report_likely_reason(on, v->reason, sizeof(v->reason));
}

/* One row of the comparison: two cells and, when R > 0, their off/on ratio. */
static void ab_row(FILE *out, const char *label, const char *a, const char *b, double r)
{
	fprintf(out, "  %-22s %14s %14s", label, a, b);
	if (r > 0)
		fprintf(out, " %8.2f", r);
	fprintf(out, "\n");
}

/* One row of byte counts, with their off/on ratio when RATIO. */
static void ab_bytes(FILE *out, const char *label, uint64_t a, uint64_t b, bool ratio)
{
	char b1[32], b2[32];

	ab_row(out, label, tool_format_bytes(a, b1, sizeof(b1)), tool_format_bytes(b, b2, sizeof(b2)),
	       ratio && b ? (double)a / (double)b : 0.0);
}

/* One row of two counts. */
static void ab_count(FILE *out, const char *label, uint64_t a, uint64_t b)
{
	char s1[32], s2[32];

	snprintf(s1, sizeof(s1), "%" PRIu64, a);
	snprintf(s2, sizeof(s2), "%" PRIu64, b);
	ab_row(out, label, s1, s2, 0);
}

/* The time rows: the judged figure, and wall time beside a steady one. */
static void ab_time(FILE *out, const struct dump *off, const struct dump *on,
		    const struct verdict_figure *f)
{
	char s1[32], s2[32];

	if (!f->known)
		return;
	ab_row(out, verdict_figure_name(f->steady), format_seconds(f->off, s1, sizeof(s1)),
	       format_seconds(f->on, s2, sizeof(s2)), f->off / f->on);
	if (f->steady && off->has_elapsed && on->has_elapsed)
		ab_row(out, "wall time", format_seconds(off->elapsed_s, s1, sizeof(s1)),
		       format_seconds(on->elapsed_s, s2, sizeof(s2)),
		       on->elapsed_s > 0 ? off->elapsed_s / on->elapsed_s : 0);
}

/* The pairs' time ratios, their median and spread. */
static void ab_pairs(FILE *out, const struct verdict *v, const double *ratios, int n)
{
	int i;

	if (n < 2)
		return;
	fprintf(out, "  %-22s", "pairs (time off/on)");
	for (i = 0; i < n; i++)
		fprintf(out, ratios[i] > 0 ? " %.2f" : " -", ratios[i]);
	if (v->pairs)
		fprintf(out, ": median %.2f, spread %.2f-%.2f", v->median, v->min, v->max);
	fprintf(out, "\n");
}

void verdict_print_ab(FILE *out, const struct dump *off, const struct dump *on,
		      const double *ratios, int n)
{
	struct verdict *v = calloc(1, sizeof(*v));
	char s1[32], s2[32];

	if (!v)
		return;
	verdict_judge(v, off, on, ratios, n);
	if (n > 1)
		fprintf(out, "vrampool report: %d pairs, off and on, summed (the first: %s, %s)\n", n,
			esc(off->path), esc(on->path));
	else if (strcmp(off->path, on->path) == 0)
		fprintf(out, "vrampool report: %s, pool off, then on\n", esc(on->path));
	else
		fprintf(out, "vrampool report: off %s\n                 on  %s\n", esc(off->path),
			esc(on->path));
	fprintf(out, "  %-22s %14s %14s %8s\n", "", "off", "on", "off/on");
	ab_count(out, "host-to-device calls", off->h2d_calls, on->h2d_calls);
	ab_count(out, "matched the layout", off->matched_calls, on->matched_calls);
	ab_bytes(out, "bytes requested", off->requested, on->requested, true);
	ab_bytes(out, "bytes over PCIe", off->h2d, on->h2d, true);
	ab_bytes(out, "served from pool", off->served, on->served, false);
	snprintf(s1, sizeof(s1), "-");
	if (off->rows_seen)
		snprintf(s1, sizeof(s1), "%.1f%%", diagnose_percent(off->hits, off->rows_seen));
	snprintf(s2, sizeof(s2), "-");
	if (on->rows_seen)
		snprintf(s2, sizeof(s2), "%.1f%%", diagnose_percent(on->hits, on->rows_seen));
	ab_row(out, "row hit rate", s1, s2, 0);
	ab_bytes(out, "pool size", off->pool_bytes, on->pool_bytes, false);
	ab_count(out, "evictions", off->evictions, on->evictions);
	snprintf(s1, sizeof(s1), "%.3f s", (double)off->shim_ns / 1e9);
	snprintf(s2, sizeof(s2), "%.3f s", (double)on->shim_ns / 1e9);
	ab_row(out, "shim time", s1, s2, 0);
	ab_time(out, off, on, &v->figure);
	ab_pairs(out, v, ratios, n);
	if (on->processes > n || off->processes > n)
		fprintf(out, "  (processes summed: off %d, on %d)\n", off->processes, on->processes);
	fprintf(out, "  (off/on: > 1 means fewer bytes or less time with the pool)\n");
	diagnose_print_ledger(out, on);
	fprintf(out, "verdict: %s\n", v->bytes_text);
	if (v->bytes != VERDICT_BYTES_NO_COPIES)
		fprintf(out, "verdict: %s.\n", v->time_text);
	if (v->bytes != VERDICT_BYTES_NO_COPIES && v->bytes != VERDICT_BYTES_NOT_COMPARABLE &&
	    v->reason[0])
		fprintf(out, "likely reason the pool served little: %s.\n", v->reason);
	free(v);
}

void report_print_ab(FILE *out, const struct dump *off, const struct dump *on)
{
	double r = verdict_time_ratio(off, on);

	verdict_print_ab(out, off, on, &r, 1);
}

/* A share of matched bytes as "75.0%", or "-" without matched bytes. */
static const char *format_share(uint64_t a, uint64_t m, char *buf, size_t size)
{
	if (m)
		snprintf(buf, size, "%.1f%%", diagnose_percent(a, m));
	else
		snprintf(buf, size, "-");
	return buf;
}

void verdict_print_prediction(FILE *out, const struct dump *dry, const struct dump *real)
{
	char s1[32], s2[32], b1[64];
	uint64_t budget = real->budget, predicted;
	bool whole = !budget || !dry->npoints;

	predicted = dry->npoints ? dump_whatif_served_at(dry, whole ? UINT64_MAX : budget) :
		    dry->repeat_bytes;
	fprintf(out, "vrampool report: prediction (dry run) against outcome (pool %s)\n", dump_mode(real));
	fprintf(out, "  %-22s %s\n  %-22s %s\n", "prediction", esc(dry->path), "outcome", esc(real->path));
	fprintf(out, "  %-22s %14s %14s\n", "", "prediction", "outcome");
	ab_count(out, "host-to-device calls", dry->h2d_calls, real->h2d_calls);
	ab_count(out, "matched the layout", dry->matched_calls, real->matched_calls);
	ab_bytes(out, "bytes requested", dry->requested, real->requested, false);
	ab_bytes(out, "served from pool", predicted, real->served, false);
	ab_row(out, "share of matched", format_share(predicted, diagnose_matched_bytes(dry), s1, sizeof(s1)),
	       format_share(real->served, diagnose_matched_bytes(real), s2, sizeof(s2)), 0);
	if (dry->has_whatif)
		ab_bytes(out, "unique working set", dry->unique_bytes, real->unique_bytes, false);
	if (whole)
		snprintf(b1, sizeof(b1), "holding the whole unique set");
	else
		snprintf(b1, sizeof(b1), "of the outcome's budget, %s",
			 tool_format_bytes(budget, s1, sizeof(s1)));
	fprintf(out, "note: the dry run predicts what a pool %s, would serve; the outcome is what the %s run's pool served. A prediction and an outcome are never summed.\n",
		b1, dump_mode(real));
	if (dump_is_off(real))
		fprintf(out, "note: the outcome ran with the pool off: it served nothing by design; run it with the pool on to test the prediction.\n");
}
