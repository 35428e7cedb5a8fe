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

/* stats_get_text with control characters (and DEL) as '?', for a terminal. */
void report_get_text(enum stats_text which, char *buf, size_t len);

/*
 * Why the pool is not serving, into buf: for a dormant pool whose driver
 * did not start, that (device_start_failed); else the pool's own reason
 * when it set one, else, for an off, dormant, full or latched pool, what the counters
 * and d tell (a malformed variable, VRAMPOOL=off, a dry run, no layout, the
 * probe's figures, a full budget). d may be NULL. Returns buf, or NULL when
 * there is nothing to say (an active pool without a reason).
 */
const char *report_reason(const struct stats_dump *d, char *buf, size_t len);

#endif
