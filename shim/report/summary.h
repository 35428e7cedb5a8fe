/*
 * summary: the human summary of a run, several "vrampool: " lines, from
 * the counters (core/stats.h), the what-if curve (pool/whatif.h) and a
 * struct stats_dump. Printing it is report.c's business; this only
 * formats.
 *
 * Formatting makes no CUDA call, allocates nothing and takes no lock (as
 * json.h's), so the reporter thread can format the final summary while
 * another thread is stopped by a signal anywhere.
 */
#ifndef VRAMPOOL_SUMMARY_H
#define VRAMPOOL_SUMMARY_H

#include <stddef.h>
#include <stdio.h>

#include "report/dump.h"

/*
 * Declared in the same shape as json.h on purpose (duplicates lists the
 * pair): the two formats of a report are called alike, a buffer size, a
 * formatter into a caller's buffer, and the same written to a FILE.
 */
#define REPORT_SUMMARY_MAX 8192 /* a buffer this big always holds the summary */

/*
 * Formats the human summary, several "vrampool: " lines, into buf
 * (NUL-terminated; cut at a line's end when too small, REPORT_SUMMARY_MAX
 * suffices):
 *  - the copies and bytes, served share; for a pool off by a malformed
 *    variable, its name only (its own line at load said the rest);
 *  - rows and pool, with the budget ("budget not decided" only while the
 *    probe has not run);
 *  - for a pool that is on but not active (or has a reason), "pool
 *    STATE: why", the same reason as the JSON's (report_reason);
 *  - the what-if line, "a budget of X would have served Y% (Z of W
 *    matched bytes)" when a budget of X, the unique bytes seen, is more
 *    than the run's and would have served more than the run did, else
 *    "the budget held every repeated row"; W, the matched bytes, is the
 *    what-if's unique plus repeat bytes;
 *  - for an automatic layout, what was found and the evidence;
 *  - when pooling stood down (now, or stand_downs > 0), that rows did not
 *    repeat, "after N copies": copies.matched_calls less copies.stood_down;
 *  - without a layout, a suggestion: the evidence's (STATS_SUGGEST) when
 *    set, else from the copy sizes seen, most bytes first, at most five;
 *    for a VRAMPOOL_LAYOUT that was rejected, that it was and why (d's
 *    layout_error), with the sizes seen.
 * Text fields are written with control characters as '?'. d may be NULL.
 * Returns the length.
 */
int report_format_summary(char *buf, size_t len, const struct stats_dump *d);

/* report_format_summary written to f (d may be NULL). */
void report_write_summary(FILE *f, const struct stats_dump *d);

#endif
