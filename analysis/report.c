/*
 * report.c: `vrampool report [--plot FILE] [--telemetry FILE] STATS.json...`,
 * the stats dumps of the preloaded library as tables and pictures.
 *
 * One dump becomes a table (copies, bytes, hit rate, bytes saved, pool,
 * evictions, the probe's decision, the what-if curve as a small table). An
 * off/on pair (mode "off" and "on", or enabled false and true in an older
 * dump, in either order) becomes a side-by-side comparison with the ratio
 * of host-to-device bytes and a one-line verdict. Any other set (two pool
 * runs, the ranks of a DDP job) becomes one column per dump and a total:
 * each run's own figures, and no verdict that would credit the pool with
 * the difference between two runs. Reading the files is dump.c's work,
 * drawing them plot.c's.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "plot.h"
#include "vrampool.h"

#define REPORT_MAX_DUMPS 4096
#define CURVE_ROWS 12		/* rows of the what-if table at most (plus marks) */
#define SERVED_LITTLE 10	/* percent of requested under which a reason is sought */

/* Returns A/B as a percentage, or -1 when B is 0. */
static double percent(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : -1.0;
}

/* Bytes that matched the layout, as the what-if figures count them. */
static uint64_t matched_bytes(const struct dump *d)
{
	return d->unique_bytes + d->repeat_bytes;
}

/* The row size of a layout made of one plain byte count ("3072"), or 0. */
static uint64_t single_row(const char *layout)
{
	char *end;
	unsigned long long v;

	if (!layout[0] || layout[0] < '0' || layout[0] > '9')
		return 0;
	v = strtoull(layout, &end, 10);
	return *end == '\0' ? v : 0;
}

/*
 * Whether the pool of D served little: less than half of what a pool
 * holding the whole unique set would have served (the what-if curve's last
 * point), or without a curve less than SERVED_LITTLE percent of the bytes
 * requested.
 */
static bool served_little(const struct dump *d)
{
	uint64_t potential;

	if (d->npoints) {
		potential = d->curve_served[d->npoints - 1];
		return potential ? d->served < potential / 2 : d->matched_calls > 0;
	}
	return d->served * 100 < SERVED_LITTLE * d->requested;
}

bool report_likely_reason(const struct dump *d, char *buf, size_t size)
{
	char b1[32], b2[32], b3[32];
	uint64_t row, full, served_full, m;
	bool never_hit;

	buf[0] = '\0';
	if (!d->h2d_calls)
		return false;
	if (!d->layout[0]) {
		snprintf(buf, size, "no layout was given (VRAMPOOL_LAYOUT): try --layout auto%s",
			 d->evidence[0] ? ", or what the evidence above suggests" : "");
		return true;
	}
	if (!d->matched_calls) {
		snprintf(buf, size, "no copy matched the layout %s%s", esc(d->layout),
			 d->nsizes ? " (see the copy sizes)" : "");
		return true;
	}
	for (int i = 0; i < d->nspecs; i++)
		if (d->specs[i].aside) {
			snprintf(buf, size, "pooling did not pay, so the cost ledger stood aside: %s",
				 esc(d->specs[i].reason));
			return true;
		}
	m = matched_bytes(d);
	never_hit = d->has_whatif && d->rows_captured && !d->hits && !d->repeat_bytes;
	if (never_hit && d->rows_seen && d->rows_seen <= d->matched_calls) {
		row = single_row(d->layout);
		snprintf(buf, size,
			 "the layout is probably several samples: each matched copy was a single row%s%s and none ever repeated; try --layout auto, or the size of one sample",
			 row ? " of " : "", row ? tool_format_bytes(row, b1, sizeof(b1)) : "");
		return true;
	}
	if (d->pool_stood_down || d->stand_downs) {
		snprintf(buf, size,
			 "rows never repeat (the pool stood down%s%s): host-side random augmentation makes every epoch unique, and then nothing can be served",
			 d->reason[0] ? ": " : "", d->reason[0] ? esc(d->reason) : "");
		return true;
	}
	if (never_hit) {
		snprintf(buf, size,
			 "rows never repeat: %" PRIu64 " rows captured, none seen again; either the layout spans several samples (try --layout auto) or every epoch's content is new (random augmentation on the host makes it so)",
			 d->rows_captured);
		return true;
	}
	if (d->has_whatif && m && d->repeat_bytes * 100 < m) {
		snprintf(buf, size,
			 "rows never repeat (%.1f%% of the matched bytes were repeats): host-side random augmentation makes every epoch unique, and then nothing can be served",
			 percent(d->repeat_bytes, m));
		return true;
	}
	if (d->has_whatif && d->budget && d->unique_bytes > 4 * d->budget) {
		full = d->unique_bytes;
		served_full = d->npoints ? dump_whatif_served_at(d, full) : d->repeat_bytes;
		snprintf(buf, size,
			 "the budget (%s) is far below the unique working set (%s): a budget of %s would have served %.0f%% of the matched bytes, this one %.0f%%",
			 tool_format_bytes(d->budget, b1, sizeof(b1)),
			 tool_format_bytes(d->unique_bytes, b2, sizeof(b2)),
			 tool_format_bytes(full, b3, sizeof(b3)),
			 percent(served_full, m),
			 percent(d->npoints ? dump_whatif_served_at(d, d->budget) : d->served, m));
		return true;
	}
	if (d->reason[0]) {
		snprintf(buf, size, "the pool was %s: %s", d->state[0] ? esc(d->state) : "off",
			 esc(d->reason));
		return true;
	}
	if (d->has_probe && !d->probe_decided) {
		snprintf(buf, size, "the budget was never decided (the probe did not run)");
		return true;
	}
	return false;
}

/* Prints the what-if curve of D as a small table. */
static void report_print_curve(FILE *out, const struct dump *d)
{
	char b1[32], b2[32], b3[32], share[16];
	int i, shown = 0, step;
	uint64_t m = matched_bytes(d);
	bool marked = false;

	if (!d->has_whatif)
		return;
	fprintf(out, "  %-18s %s unique, %s repeated (fill-until-full, first-seen order)%s\n",
		"what-if", tool_format_bytes(d->unique_bytes, b1, sizeof(b1)),
		tool_format_bytes(d->repeat_bytes, b2, sizeof(b2)),
		d->whatif_sampled ? ", sampled: estimates" : "");
	if (!d->npoints)
		return;
	fprintf(out, "    %12s %12s  %s\n", "budget", "served", "share of matched bytes");
	step = d->npoints > CURVE_ROWS ? (d->npoints + CURVE_ROWS - 2) / (CURVE_ROWS - 1) : 1;
	for (i = 0; i < d->npoints; i++) {
		bool mark = d->budget && d->curve_budget[i] == d->budget;

		if (!(i % step == 0 || i == d->npoints - 1 || mark))
			continue;
		if (m)
			snprintf(share, sizeof(share), "%5.1f%%", percent(d->curve_served[i], m));
		else
			snprintf(share, sizeof(share), "%6s", "-");
		fprintf(out, "    %12s %12s  %s%s\n",
			tool_format_bytes(d->curve_budget[i], b1, sizeof(b1)),
			tool_format_bytes(d->curve_served[i], b2, sizeof(b2)), share,
			mark ? "   <- this run's budget" : "");
		marked = marked || mark;
		shown++;
	}
	if (d->budget && !marked && d->budget > d->curve_budget[d->npoints - 1])
		fprintf(out, "    (this run's budget, %s, holds the whole unique set: every repeat fits)\n",
			tool_format_bytes(d->budget, b3, sizeof(b3)));
	else if (d->budget && !marked)
		fprintf(out, "    (this run's budget, %s: about %s served)\n",
			tool_format_bytes(d->budget, b3, sizeof(b3)),
			tool_format_bytes(dump_whatif_served_at(d, d->budget), b1, sizeof(b1)));
}

/* Prints the header line of one dump: its file and who wrote it. */
static void report_print_title(FILE *out, const struct dump *d)
{
	fprintf(out, "vrampool report: %s", esc(d->path));
	if (d->processes > 1) {
		fprintf(out, " (%d processes summed)\n", d->processes);
		return;
	}
	if (d->pid || d->rank[0] || d->host[0]) {
		const char *sep = " (";

		if (d->pid) {
			fprintf(out, "%spid %lld", sep, d->pid);
			sep = ", ";
		}
		if (d->rank[0]) {
			fprintf(out, "%srank %s", sep, esc(d->rank));
			sep = ", ";
		}
		if (d->host[0])
			fprintf(out, "%son %s", sep, esc(d->host));
		fprintf(out, ")");
	}
	fprintf(out, "\n");
}

/* The cost ledger's verdicts (issue 16): one line per spec that stood aside at some point. */
static void report_print_ledger(FILE *out, const struct dump *d)
{
	const char *label = "ledger";

	for (int i = 0; i < d->nspecs; i++) {
		const struct dump_spec *s = &d->specs[i];

		if (!s->aside && !s->stand_asides)
			continue;
		fprintf(out, "  %-18s %s (stood aside %" PRIu64 "x, resumed %" PRIu64 "x; %" PRIu64
			" copies straight through)\n", label, esc(s->reason), s->stand_asides, s->resumes,
			s->aside_copies);
		label = "";
	}
}

void report_print_one(FILE *out, const struct dump *d)
{
	char b1[32], b2[32], b3[32], b4[32], why[1024];
	bool dry = strcmp(dump_mode(d), "dry") == 0;
	int i;

	report_print_title(out, d);
	if (dry)
		fprintf(out, "  %-18s dry (fingerprinting only: no pool, no device work of its own)", "mode");
	else
		fprintf(out, "  %-18s %s", "mode",
			dump_is_off(d) ? "off (pass-through, counting only)" : "on");
	if (d->layout[0])
		fprintf(out, ", layout %s%s\n", esc(d->layout),
			strcmp(d->layout_source, "auto") == 0 ? " (found automatically)" : "");
	else
		fprintf(out, ", no layout (pass-through)\n");
	if (d->evidence[0])
		fprintf(out, "  %-18s %s\n", "evidence", esc(d->evidence));
	if (d->has_final && !d->final)
		fprintf(out, "  %-18s still running when this dump was written (%.1f s in): figures so far\n",
			"run", d->elapsed_s);
	else if (d->ended_by[0] && strcmp(d->ended_by, "exit") != 0)
		fprintf(out, "  %-18s ended by %s after %.1f s\n", "run", esc(d->ended_by), d->elapsed_s);
	else if (d->has_elapsed)
		fprintf(out, "  %-18s exited after %.1f s\n", "run", d->elapsed_s);
	if (d->reason[0])
		fprintf(out, "  %-18s %s\n", "reason", esc(d->reason));
	fprintf(out, "  %-18s %" PRIu64 " calls, %" PRIu64 " matched the layout, %" PRIu64 " passed through",
		"host-to-device", d->h2d_calls, d->matched_calls, d->passthrough_calls);
	if (d->graph_capture || d->fallbacks)
		fprintf(out, " (%" PRIu64 " in graph capture, %" PRIu64 " fallbacks)",
			d->graph_capture, d->fallbacks);
	fprintf(out, "\n");
	if (d->driver_calls || d->batch_calls || d->stood_down_calls)
		fprintf(out, "  %-18s %" PRIu64 " through the driver API, %" PRIu64 " batched, %" PRIu64 " while stood down\n",
			"", d->driver_calls, d->batch_calls, d->stood_down_calls);
	fprintf(out, "  %-18s %s\n", "bytes requested", tool_format_bytes(d->requested, b1, sizeof(b1)));
	fprintf(out, "  %-18s %s\n", "bytes over PCIe", tool_format_bytes(d->h2d, b1, sizeof(b1)));
	fprintf(out, "  %-18s %s", "served from pool", tool_format_bytes(d->served, b1, sizeof(b1)));
	if (d->requested)
		fprintf(out, " (%.1f%% of requested: bytes saved)", percent(d->served, d->requested));
	fprintf(out, "\n");
	if (d->has_rows) {
		fprintf(out, "  %-18s %" PRIu64 " seen, %" PRIu64 " hits", "rows", d->rows_seen, d->hits);
		if (d->rows_seen)
			fprintf(out, " (%.1f%% hit rate)", percent(d->hits, d->rows_seen));
		fprintf(out, ", %" PRIu64 " misses, %" PRIu64 " captured, %" PRIu64 " pooled\n",
			d->misses, d->rows_captured, d->pooled);
	}
	if (d->has_pool) {
		fprintf(out, "  %-18s %s, %" PRIu64 " slab%s, %s of %s budget", "pool",
			d->state[0] ? esc(d->state) : "?", d->slabs, d->slabs == 1 ? "" : "s",
			tool_format_bytes(d->pool_bytes, b1, sizeof(b1)),
			tool_format_bytes(d->budget, b2, sizeof(b2)));
		if (d->gather[0])
			fprintf(out, ", gather: %s (%" PRIu64 " launches)", esc(d->gather),
				d->gather_launches);
		if (d->pool_stood_down)
			fprintf(out, ", stood down");
		if (d->stand_downs)
			fprintf(out, ", %" PRIu64 " stand-down%s", d->stand_downs,
				d->stand_downs == 1 ? "" : "s");
		fprintf(out, "\n");
		fprintf(out, "  %-18s %" PRIu64 " (%s), %" PRIu64 " out-of-memory retries",
			"evictions", d->evictions, tool_format_bytes(d->evicted_bytes, b1, sizeof(b1)),
			d->oom_retries);
		if (d->displaced_slabs || d->faults)
			fprintf(out, ", %" PRIu64 " slabs (%s) displaced, %" PRIu64 " faults",
				d->displaced_slabs, tool_format_bytes(d->displaced_bytes, b2, sizeof(b2)),
				d->faults);
		fprintf(out, "\n");
	}
	if (d->has_probe) {
		if (d->probe_decided)
			fprintf(out, "  %-18s decided: %s free of %s, reserve %s, margin %s\n", "probe",
				tool_format_bytes(d->probe_free, b1, sizeof(b1)),
				tool_format_bytes(d->probe_total, b2, sizeof(b2)),
				tool_format_bytes(d->probe_reserve, b3, sizeof(b3)),
				tool_format_bytes(d->probe_margin, b4, sizeof(b4)));
		else
			fprintf(out, "  %-18s not run (the budget was never decided)\n", "probe");
	}
	fprintf(out, "  %-18s fingerprint %.3f s, shim total %.3f s (CPU %.3f s)\n", "time",
		(double)d->fingerprint_ns / 1e9, (double)d->shim_ns / 1e9, (double)d->shim_cpu_ns / 1e9);
	report_print_ledger(out, d);
	report_print_curve(out, d);
	if (!d->h2d_calls) {
		fprintf(out, "note: no host-to-device copy was seen; if the program made some, run `vrampool inspect` on it.\n");
	} else if (!d->layout[0] && d->nsizes) {
		fprintf(out, "note: no layout; the copy sizes with the most bytes were:\n");
		for (i = 0; i < d->nsizes; i++)
			fprintf(out, "    %" PRIu64 " bytes x %" PRIu64 " calls (%s)\n",
				d->sizes[i].bytes, d->sizes[i].calls,
				tool_format_bytes(d->sizes[i].total, b1, sizeof(b1)));
		fprintf(out, "  try `--layout auto`, or `--layout %" PRIu64 "` (VRAMPOOL_LAYOUT=%" PRIu64 ") if one sample is one such row.\n",
			d->sizes[0].bytes, d->sizes[0].bytes);
	} else if (!dry && dump_is_on(d) && served_little(d) &&
		   report_likely_reason(d, why, sizeof(why))) {
		fprintf(out, "note: the pool served little; likely reason: %s.\n", why);
	}
}

/* Prints one row of the comparison: two byte counts and their ratio. */
static void ab_bytes(FILE *out, const char *label, uint64_t a, uint64_t b, bool ratio)
{
	char b1[32], b2[32], r[32] = "";

	if (ratio && a)
		snprintf(r, sizeof(r), "%.2f", (double)b / (double)a);
	fprintf(out, "  %-22s %14s %14s", label, tool_format_bytes(a, b1, sizeof(b1)),
		tool_format_bytes(b, b2, sizeof(b2)));
	fprintf(out, r[0] ? " %8s\n" : "\n", r);
}

/* Prints one row of the comparison: two counts. */
static void ab_count(FILE *out, const char *label, uint64_t a, uint64_t b)
{
	char s1[32], s2[32];

	snprintf(s1, sizeof(s1), "%" PRIu64, a);
	snprintf(s2, sizeof(s2), "%" PRIu64, b);
	fprintf(out, "  %-22s %14s %14s\n", label, s1, s2);
}

/* Prints the time row of the comparison: wall time of each run, else the dumps' elapsed. */
static void ab_time(FILE *out, const struct dump *off, const struct dump *on)
{
	char s1[32], s2[32], r[32] = "";
	double a, b;
	const char *label;

	if (off->wall_s > 0 && on->wall_s > 0) {
		a = off->wall_s;
		b = on->wall_s;
		label = "wall time";
	} else if (off->has_elapsed && on->has_elapsed) {
		a = off->elapsed_s;
		b = on->elapsed_s;
		label = "elapsed (CUDA in use)";
	} else {
		return;
	}
	snprintf(s1, sizeof(s1), "%.2f s", a);
	snprintf(s2, sizeof(s2), "%.2f s", b);
	if (a > 0)
		snprintf(r, sizeof(r), "%.2f", b / a);
	fprintf(out, "  %-22s %14s %14s", label, s1, s2);
	fprintf(out, r[0] ? " %8s\n" : "\n", r);
}

void report_print_ab(FILE *out, const struct dump *off, const struct dump *on)
{
	char s1[32], s2[32], b1[32], b2[32], why[1024];
	double a, b;
	bool little;

	if (strcmp(off->path, on->path) == 0)
		fprintf(out, "vrampool report: %s, pool off, then on\n", esc(on->path));
	else
		fprintf(out, "vrampool report: off %s\n                 on  %s\n", esc(off->path),
			esc(on->path));
	fprintf(out, "  %-22s %14s %14s %8s\n", "", "off", "on", "on/off");
	ab_count(out, "host-to-device calls", off->h2d_calls, on->h2d_calls);
	ab_count(out, "matched the layout", off->matched_calls, on->matched_calls);
	ab_bytes(out, "bytes requested", off->requested, on->requested, true);
	ab_bytes(out, "bytes over PCIe", off->h2d, on->h2d, true);
	ab_bytes(out, "served from pool", off->served, on->served, false);
	snprintf(s1, sizeof(s1), "-");
	if (off->rows_seen)
		snprintf(s1, sizeof(s1), "%.1f%%", percent(off->hits, off->rows_seen));
	snprintf(s2, sizeof(s2), "-");
	if (on->rows_seen)
		snprintf(s2, sizeof(s2), "%.1f%%", percent(on->hits, on->rows_seen));
	fprintf(out, "  %-22s %14s %14s\n", "row hit rate", s1, s2);
	ab_bytes(out, "pool size", off->pool_bytes, on->pool_bytes, false);
	ab_count(out, "evictions", off->evictions, on->evictions);
	snprintf(s1, sizeof(s1), "%.3f s", (double)off->shim_ns / 1e9);
	snprintf(s2, sizeof(s2), "%.3f s", (double)on->shim_ns / 1e9);
	fprintf(out, "  %-22s %14s %14s\n", "shim time", s1, s2);
	ab_time(out, off, on);
	if (on->processes > 1 || off->processes > 1)
		fprintf(out, "  (processes summed: off %d, on %d)\n", off->processes, on->processes);
	report_print_ledger(out, on);

	a = (double)off->requested;
	b = (double)on->requested;
	little = served_little(on);
	if (!off->h2d_calls && !on->h2d_calls) {
		fprintf(out, "verdict: no host-to-device copy was seen in either run; run `vrampool inspect` on the program.\n");
		return;
	} else if (a <= 0 || b <= 0 || (a > b ? a - b : b - a) > 0.01 * (a > b ? a : b)) {
		fprintf(out, "verdict: not comparable: the runs asked for different amounts (%s off, %s on).\n",
			tool_format_bytes(off->requested, b1, sizeof(b1)),
			tool_format_bytes(on->requested, b2, sizeof(b2)));
		return;
	} else if (on->h2d >= off->h2d) {
		fprintf(out, "verdict: no saving: the pool served nothing%s.\n",
			on->layout[0] ? (on->matched_calls ? "" : " (no copy matched the layout)") :
			" (no layout given: try --layout)");
	} else {
		fprintf(out, "verdict: with the pool, %.2fx fewer bytes crossed to the device (%s instead of %s, %.1f%% saved) for the same %s requested.\n",
			on->h2d ? (double)off->h2d / (double)on->h2d : 0.0,
			tool_format_bytes(on->h2d, b1, sizeof(b1)),
			tool_format_bytes(off->h2d, b2, sizeof(b2)),
			100.0 - percent(on->h2d, off->h2d),
			tool_format_bytes(on->requested, s1, sizeof(s1)));
	}
	if (little && report_likely_reason(on, why, sizeof(why)))
		fprintf(out, "likely reason the pool served little: %s.\n", why);
}

/* The rows of the side-by-side table. */
enum column_row {
	COL_LABEL, COL_MODE, COL_LAYOUT, COL_CALLS, COL_MATCHED, COL_REQUESTED, COL_H2D,
	COL_SERVED, COL_SHARE, COL_HITRATE, COL_STATE, COL_POOL, COL_BUDGET, COL_EVICTIONS,
	COL_ELAPSED, COL_ROWS,
};

static const char *const column_names[COL_ROWS] = {
	"", "mode", "layout", "host-to-device calls", "matched the layout", "bytes requested",
	"bytes over PCIe", "served from pool", "served / requested", "row hit rate",
	"pool state", "pool size", "budget", "evictions", "elapsed (longest)",
};

/* Writes "A/B" as a percentage into CELL, or "-" when B is 0. */
static void cell_share(char *cell, size_t size, uint64_t a, uint64_t b)
{
	if (b)
		snprintf(cell, size, "%.1f%%", percent(a, b));
	else
		snprintf(cell, size, "-");
}

/*
 * Writes the cell of ROW for dump X into CELL, cut to WIDTH; TOTAL says X
 * is the sum of the columns (its names and states stay empty).
 */
static void column_cell(const struct dump *x, enum column_row row, bool total,
			char *cell, size_t size, int width)
{
	char text[256];

	text[0] = '\0';
	switch (row) {
	case COL_LABEL:
		snprintf(text, sizeof(text), "%s", total ? "total" : esc(dump_label(x, text, sizeof(text))));
		break;
	case COL_MODE:
		snprintf(text, sizeof(text), "%s", total ? "" : dump_mode(x));
		break;
	case COL_LAYOUT:
		snprintf(text, sizeof(text), "%s", total ? "" : x->layout[0] ? esc(x->layout) : "-");
		break;
	case COL_CALLS:
		snprintf(text, sizeof(text), "%" PRIu64, x->h2d_calls);
		break;
	case COL_MATCHED:
		snprintf(text, sizeof(text), "%" PRIu64, x->matched_calls);
		break;
	case COL_REQUESTED:
		tool_format_bytes(x->requested, text, sizeof(text));
		break;
	case COL_H2D:
		tool_format_bytes(x->h2d, text, sizeof(text));
		break;
	case COL_SERVED:
		tool_format_bytes(x->served, text, sizeof(text));
		break;
	case COL_SHARE:
		cell_share(text, sizeof(text), x->served, x->requested);
		break;
	case COL_HITRATE:
		cell_share(text, sizeof(text), x->hits, x->rows_seen);
		break;
	case COL_STATE:
		snprintf(text, sizeof(text), "%s", total ? "" : x->state[0] ? esc(x->state) : "-");
		break;
	case COL_POOL:
		tool_format_bytes(x->pool_bytes, text, sizeof(text));
		break;
	case COL_BUDGET:
		tool_format_bytes(x->budget, text, sizeof(text));
		break;
	case COL_EVICTIONS:
		snprintf(text, sizeof(text), "%" PRIu64, x->evictions);
		break;
	case COL_ELAPSED:
		if (x->has_elapsed)
			snprintf(text, sizeof(text), "%.1f s", x->elapsed_s);
		else
			snprintf(text, sizeof(text), "-");
		break;
	default:
		break;
	}
	if ((int)strlen(text) > width && width > 3)
		snprintf(cell, size, "%.*s...", width - 3, text);
	else
		snprintf(cell, size, "%s", text);
}

void report_print_columns(FILE *out, const struct dump *d, int n)
{
	struct dump *total = calloc(1, sizeof(*total));
	char label[256], cell[256];
	int i, r, width = 12, on = 0;

	if (!total)
		return;
	for (i = 0; i < n; i++) {
		int len = (int)strlen(esc(dump_label(&d[i], label, sizeof(label))));

		if (len > width)
			width = len < 24 ? len : 24;
		on += dump_is_on(&d[i]);
		if (i == 0)
			*total = d[0];
		else
			dump_add(total, &d[i]);
	}
	fprintf(out, "vrampool report: %d runs side by side (not an off/on pair: no A/B verdict)\n", n);
	for (i = 0; i < n; i++)
		fprintf(out, "  %-22s %s%s\n", i ? "" : "files", esc(d[i].path),
			d[i].has_final && !d[i].final ? " (still running when written)" : "");
	for (r = 0; r < COL_ROWS; r++) {
		fprintf(out, "  %-22s", column_names[r]);
		for (i = 0; i < n; i++) {
			column_cell(&d[i], (enum column_row)r, false, cell, sizeof(cell), width);
			fprintf(out, " %*s", width, cell);
		}
		column_cell(total, (enum column_row)r, true, cell, sizeof(cell), width);
		fprintf(out, " %*s\n", width, cell);
	}
	if (on == n)
		fprintf(out, "note: %s the pool on: each column is what that run's own pool served; a difference between them is not the pool's doing. For the pool's effect, compare with a run with VRAMPOOL=off (`vrampool run --ab`).\n",
			n == 2 ? "both runs had" : "every run had");
	else
		fprintf(out, "note: each column is one run's own figures; an A/B verdict needs exactly two dumps, one with the pool off and one with it on.\n");
	free(total);
}

void report_usage(FILE *out)
{
	fprintf(out,
		"usage: vrampool report [--plot FILE.png|FILE.svg] [--telemetry FILE] STATS.json...\n"
		"\n"
		"Prints stats dumps of the vrampool library (VRAMPOOL_STATS, or\n"
		"`vrampool run --stats FILE`); `-` reads one from standard input.\n"
		"\n"
		"  one dump        a table: copies, bytes requested and sent, bytes served\n"
		"                  from the pool, row hit rate, pool, evictions, the budget\n"
		"                  probe, and the what-if curve (what other budgets would\n"
		"                  have served) as a small table\n"
		"  off and on      (mode off, then on, in either order) side by side with\n"
		"                  the ratio of host-to-device bytes and a verdict\n"
		"  any other set   (pool runs, the ranks of one job) one column per dump,\n"
		"                  labelled by rank, pid or file, and a total\n"
		"\n"
		"  --plot FILE        draw the what-if curve (share of matched bytes served\n"
		"                     against budget, the run's budget marked) into FILE,\n"
		"                     a .png or .svg\n"
		"  --telemetry FILE   with --plot, also draw hit share and pool fill over\n"
		"                     time from a VRAMPOOL_TELEMETRY file\n"
		"\n"
		"Exit status: 0, or 2 for bad usage, a file that is not a dump, or a\n"
		"number the dump holds that cannot be represented.\n");
}

int report_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "plot", required_argument, NULL, 'p' },
		{ "telemetry", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct telemetry tel = { NULL, 0 };
	const char *plot = NULL, *telemetry = NULL;
	struct dump *d = NULL;
	char msg[1024];
	int c, i, n, status = TOOL_EXIT_ERROR, stdin_used = 0;

	optind = 1;
	opterr = 0;	/* one-line errors: tool_option_error (options.h) */
	while ((c = getopt_long(argc, argv, "+:h", options, NULL)) != -1) {
		if (tool_option_empty("report", options, c, optarg))
			return TOOL_EXIT_ERROR;
		switch (c) {
		case 'p':
			plot = optarg;
			break;
		case 't':
			telemetry = optarg;
			break;
		case 'h':
			report_usage(stdout);
			return TOOL_EXIT_OK;
		default:
			return tool_option_error("report", options, c, argc, argv);
		}
	}
	n = argc - optind;
	if (n < 1) {
		fprintf(stderr, "vrampool report: expected one or more stats files, got none\n");
		report_usage(stderr);
		return TOOL_EXIT_ERROR;
	}
	if (n > REPORT_MAX_DUMPS) {
		fprintf(stderr, "vrampool report: %d stats files, at most %d\n", n, REPORT_MAX_DUMPS);
		return TOOL_EXIT_ERROR;
	}
	if (telemetry && !plot) {
		fprintf(stderr, "vrampool report: --telemetry is drawn with --plot FILE\n");
		return TOOL_EXIT_ERROR;
	}
	if (plot && plot_check_name(plot, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "vrampool report: %s\n", msg);
		return TOOL_EXIT_ERROR;
	}
	for (i = optind; i < argc; i++)
		stdin_used += strcmp(argv[i], "-") == 0;
	if (stdin_used + (telemetry && strcmp(telemetry, "-") == 0) > 1) {
		fprintf(stderr, "vrampool report: standard input (-) can be read only once\n");
		return TOOL_EXIT_ERROR;
	}
	d = calloc((size_t)n, sizeof(*d));
	if (!d) {
		fprintf(stderr, "vrampool report: out of memory\n");
		return TOOL_EXIT_ERROR;
	}
	for (i = 0; i < n; i++) {
		if (dump_load(&d[i], argv[optind + i], msg, sizeof(msg)) != 0) {
			fprintf(stderr, "vrampool report: %s\n", msg);
			goto out_free;
		}
	}
	if (telemetry && telemetry_load(&tel, telemetry, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "vrampool report: %s\n", msg);
		goto out_free;
	}
	if (n == 1)
		report_print_one(stdout, &d[0]);
	else if (n == 2 && dump_is_off(&d[0]) && dump_is_on(&d[1]))
		report_print_ab(stdout, &d[0], &d[1]);
	else if (n == 2 && dump_is_on(&d[0]) && dump_is_off(&d[1]))
		report_print_ab(stdout, &d[1], &d[0]);
	else
		report_print_columns(stdout, d, n);
	if (plot) {
		fflush(stdout);
		if (plot_write(plot, d, n, telemetry ? &tel : NULL, msg, sizeof(msg)) != 0) {
			fprintf(stderr, "vrampool report: %s\n", msg);
			goto out_free;
		}
		printf("plot: %s\n", esc(plot));
	}
	status = TOOL_EXIT_OK;
out_free:
	telemetry_release(&tel);
	free(d);
	return status;
}
