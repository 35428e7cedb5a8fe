/*
 * diagnose.h: why a pool served little, read from one dump (or the sum of
 * one run's), and the small figures every table of the report shares.
 * Internal to the report's files (report.c, verdict.c, report_json.c).
 *
 * report_likely_reason (declared in vrampool.h) names the first reason, in
 * order of how telling it is: no layout, no copy matched, the cost ledger
 * stood aside, a layout of several samples, a budget below the unique
 * working set while the what-if curve shows repeats it could not hold,
 * rows that never repeat, a budget far below the working set, the pool's
 * own reason, a probe that never ran. Nothing here prints but
 * diagnose_print_ledger; nothing allocates.
 */
#ifndef VRAMPOOL_DIAGNOSE_H
#define VRAMPOOL_DIAGNOSE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dump.h"

#define DIAGNOSE_SERVED_LITTLE 10	/* percent of requested under which a reason is sought */

/* Returns A/B as a percentage, or -1 when B is 0. */
double diagnose_percent(uint64_t a, uint64_t b);

/* Bytes that matched the layout, as the what-if figures count them. */
uint64_t diagnose_matched_bytes(const struct dump *d);

/*
 * Whether the pool of D served little: less than half of what a pool
 * holding the whole unique set would have served (the what-if curve's last
 * point), or without a curve less than DIAGNOSE_SERVED_LITTLE percent of
 * the bytes requested.
 */
bool diagnose_served_little(const struct dump *d);

/*
 * Whether D's budget is below its unique working set by enough that the
 * what-if curve shows repeats it could not hold: at D's budget the curve
 * serves less than half of what it serves holding everything. False
 * without a budget, a curve or repeats.
 */
bool diagnose_budget_short(const struct dump *d);

/* The cost ledger's verdicts: one line per spec that stood aside at some point. */
void diagnose_print_ledger(FILE *out, const struct dump *d);

#endif
