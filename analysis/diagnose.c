/*
 * diagnose.c: why a pool served little (diagnose.h), from the counters and
 * the what-if figures of one dump.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "vrampool.h"

/* Returns A/B as a percentage, or -1 when B is 0. */
double diagnose_percent(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : -1.0;
}

/* Bytes that matched the layout, as the what-if figures count them. */
uint64_t diagnose_matched_bytes(const struct dump *d)
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
 * point), or without a curve less than DIAGNOSE_SERVED_LITTLE percent of the bytes
 * requested.
 */
bool diagnose_served_little(const struct dump *d)
{
	uint64_t potential;

	if (d->npoints) {
		potential = d->curve_served[d->npoints - 1];
		return potential ? d->served < potential / 2 : d->matched_calls > 0;
	}
	return d->served * 100 < DIAGNOSE_SERVED_LITTLE * d->requested;
}

bool diagnose_budget_short(const struct dump *d)
{
	uint64_t full, at;

	if (!d->has_whatif || !d->npoints || !d->budget || !d->repeat_bytes ||
	    d->budget >= d->unique_bytes)
		return false;
	full = dump_whatif_served_at(d, d->unique_bytes);
	at = dump_whatif_served_at(d, d->budget);
	return full && at < full / 4 * 3;
}

/*
 * Writes the reason of a budget below the unique working set into BUF:
 * what the what-if curve says this budget served and the whole set would
 * have (D passed diagnose_budget_short).
 */
static void diagnose_budget_reason(const struct dump *d, char *buf, size_t size)
{
	char b1[32], b2[32];
	uint64_t m = diagnose_matched_bytes(d);

	snprintf(buf, size,
		 "the budget is below the unique working set: a budget of %s holds part of the %s of unique rows, and the what-if curve says it serves %.1f%% of the matched bytes where a budget of %s would serve %.1f%% (%.1f%% of the matched bytes were repeats); raise --budget to %s or more",
		 tool_format_bytes(d->budget, b1, sizeof(b1)),
		 tool_format_bytes(d->unique_bytes, b2, sizeof(b2)),
		 diagnose_percent(dump_whatif_served_at(d, d->budget), m), b2,
		 diagnose_percent(dump_whatif_served_at(d, d->unique_bytes), m),
		 diagnose_percent(d->repeat_bytes, m), b2);
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
	m = diagnose_matched_bytes(d);
	never_hit = d->has_whatif && d->rows_captured && !d->hits && !d->repeat_bytes;
	if (never_hit && d->rows_seen && d->rows_seen <= d->matched_calls) {
		row = single_row(d->layout);
		snprintf(buf, size,
			 "the layout is probably several samples: each matched copy was a single row%s%s and none ever repeated; try --layout auto, or the size of one sample",
			 row ? " of " : "", row ? tool_format_bytes(row, b1, sizeof(b1)) : "");
		return true;
	}
	/* Before blaming augmentation: repeats there were, but the budget could not hold them. */
	if (diagnose_budget_short(d)) {
		diagnose_budget_reason(d, buf, size);
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
			 diagnose_percent(d->repeat_bytes, m));
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
			 diagnose_percent(served_full, m),
			 diagnose_percent(d->npoints ? dump_whatif_served_at(d, d->budget) : d->served, m));
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

void diagnose_print_ledger(FILE *out, const struct dump *d)
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

