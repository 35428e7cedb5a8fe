/*
 * reason: the texts the JSON dump and the summary share: why the pool is
 * not serving, and the stats text fields made safe to print.
 *
 * Takes no lock and allocates nothing (it reads core/stats.h's atomics and
 * sequence-counted text fields), so the reporter thread can call it while
 * another thread is stopped by a signal anywhere.
 */
#ifndef VRAMPOOL_REASON_H
#define VRAMPOOL_REASON_H

#include <stddef.h>

#include "core/stats.h"
#include "report/dump.h"

#define REPORT_REASON_MAX 1024  /* a buffer this big holds any reason report_reason gives */

/* stats_get_text with control characters (and DEL) as '?', for a terminal. */
void report_get_text(enum stats_text which, char *buf, size_t len);

/*
 * Why the pool is not serving, into buf: for a dormant pool whose driver
 * did not start, that (device_start_failed); else the pool's own reason
 * when it set one, else, for an off, dormant, full or latched pool, what the counters
 * and d tell (a malformed variable, VRAMPOOL=off, a dry run, no layout, the
 * probe's figures, a full budget). A layout no copy matched lists the copy
 * sizes seen and points to VRAMPOOL_LAYOUT=auto; VRAMPOOL_LAYOUT=auto that
 * has not found a row size says what it examined and what to do. A full
 * pool, and one that stood down, add the what-if curve's word on repeats
 * (report_repeat_why). d may be NULL. Returns buf, or NULL when there is
 * nothing to say (an active pool without a reason).
 */
const char *report_reason(const struct stats_dump *d, char *buf, size_t len);

/*
 * Why rows did not hit, as the what-if curve tells it (issue 19), into
 * buf: no repeat at all (under half a percent of the matched bytes) is
 * host-side random augmentation; repeats a budget below the distinct
 * bytes seen could not hold make the budget below the unique working set,
 * with the figures (distinct bytes, the budget, what a budget of the
 * distinct bytes would have served, what this one served). Returns buf,
 * or NULL when the curve says neither (no rows seen, or the budget held
 * every repeat).
 */
const char *report_repeat_why(char *buf, size_t len);

/*
 * The copy sizes seen (stats_sizes), most bytes first, at most max of
 * them, as "786432 (x128, 96.0 MiB), 8 (x128, 1.0 KiB)" into buf.
 * Returns buf, or NULL when no copy was seen (buf "").
 */
const char *report_sizes_list(char *buf, size_t len, int max);

#endif
