/*
 * report_json.h: `vrampool report --json`, the report as one JSON object
 * on standard output, for scripts and dashboards (docs/vrampool.1.md lists
 * the keys). It holds what the text report holds: the kind of report, each
 * dump's figures, and for an off/on pair the off/on ratios and the verdict
 * (verdict.h) as values and as the sentences the text prints.
 *
 * Top-level keys: "report" (always "vrampool"), "format" (1), "kind"
 * ("one", "ab", "prediction" or "columns"), "convention" (off/on), "files",
 * and by kind: "dump" (one); "off", "on", "ratio", "verdict" (ab); "dry",
 * "outcome", "predicted_served" (prediction); "columns" (columns).
 * Each dump's figures: "path", "mode", "layout", "pid", "rank", "host",
 * "device", "h2d_calls", "matched_calls", "bytes_requested", "bytes_h2d",
 * "bytes_served", "rows_seen", "row_hits", "pool_bytes", "budget",
 * "evictions", "wall_time_s", "time_per_copy_s" (steady), "unique_bytes",
 * "repeat_bytes", "likely_reason". Numbers are JSON numbers (bytes as
 * integers, seconds as reals); what a dump does not state is null.
 */
#ifndef VRAMPOOL_REPORT_JSON_H
#define VRAMPOOL_REPORT_JSON_H

#include <stdio.h>

#include "dump.h"

/* Each writes its report to OUT and returns 0, or -ENOMEM (nothing written). */
int report_json_one(FILE *out, const struct dump *d);
int report_json_ab(FILE *out, const struct dump *off, const struct dump *on,
		   const double *ratios, int n);
int report_json_prediction(FILE *out, const struct dump *dry, const struct dump *real);
int report_json_columns(FILE *out, const struct dump *d, int n);

#endif
