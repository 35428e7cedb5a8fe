/*
 * link: the host-to-device link's speed, measured from the program's own
 * plain copies, for the cost ledger (ledger.h; issue 16).
 *
 * A measurement: a timed event recorded on the program's stream just
 * before one of the program's sends of a whole copy (a copy the pool
 * passes on plain, or a pooling copy that sends all its rows: captures
 * and misses), and one just after it. The time between their completions is the time the stream
 * spent on those bytes; on the emulated device it is its stream worker's
 * time, which includes the simulated link when FAKECUDA_H2D_GBPS is set.
 * It is read later without waiting: the pool's next copies poll it
 * (cuEventQuery, then cuEventElapsedTime). For a pageable source, which
 * CUDA stages during the call, a hit saves the caller's whole wait: the
 * caller's wait in the call is measured too, and the longer of the two
 * counts.
 *
 * Where the stream had work queued ahead of the copy, the first event
 * completes when that work does, with the send queued behind it already:
 * the time between the events is the send's. On an idle stream the first
 * event completes at once, before the send is even made, so the time also
 * counts the call (a few microseconds, more when the caller is descheduled
 * in it). A measurement is therefore never shorter than the link's own
 * time, only longer, and the estimate takes the fastest.
 *
 * The estimate is the fastest of the last LINK_KEEP measurements, in bytes
 * per nanosecond: a delay only ever adds time (earlier work on the stream
 * or the link, a worker waking up, jitter), so the fastest is closest to
 * the link itself. Only copies of LINK_MIN_BYTES or more are measured, and
 * a time under LINK_MIN_NS is dropped: the time of a small copy is mostly
 * the fixed cost of any copy (a launch, a wake-up, the events'
 * resolution), which a hit does not save either; counted as link time it
 * would make the link look slow and small rows look worth pooling. A job
 * whose copies are all small has no measured link: its specs are judged
 * by their first copies (ledger.h) against the stated or an assumed slow
 * link, which is where small rows are clearly decided anyway.
 *
 * When it measures: every copy whose rows the pool sends anyway (before
 * the probe, standing aside, stood down, captures) may be measured, one at
 * a time, while fewer than LINK_FIRST measurements are in and then one
 * copy in LINK_REFRESH (link_plain_due); a spec whose copies are all
 * served sends one plain for measuring (link_pool_due) when LINK_GAP
 * copies went by without a measurement while fewer than LINK_FIRST are
 * in, then one in LINK_POOL_REFRESH; one in LINK_POOL_REFRESH from the
 * start where the spec pools clearly (ledger_pays_clearly: more
 * measurements could not change its verdict, so none is worth a hit).
 * With VRAMPOOL_LINK_GBPS stated nothing is measured. After LINK_FAIL_MAX
 * failed measurements (no timed events, a failed record) it stops
 * measuring, and the link is unknown.
 *
 * One meter per pool, under the pool's lock; its events are made on first
 * use in the pool's context and freed by link_release. A measurement is
 * begun by link_begin and finished by link_end, each under the lock, so
 * the send between them runs outside it; one at a time.
 */
#ifndef VRAMPOOL_LINK_H
#define VRAMPOOL_LINK_H

#include <stdint.h>

#include "device/device.h"
#include "pool/ledger.h"

#define LINK_KEEP 8                     /* measurements the estimate is taken from */
#define LINK_FIRST LINK_KEEP             /* measurements wanted at once: a full set, so that slow first ones (fresh memory) are outvoted */
#define LINK_REFRESH 64                 /* then one plain copy in this many */
#define LINK_GAP 8                      /* a pooling spec: one copy in this many, for the first */
#define LINK_POOL_REFRESH 256           /* then one in this many */
#define LINK_MIN_BYTES (64ULL << 10)    /* the smallest copy measured */
#define LINK_MIN_NS 2000                /* the shortest time a measurement counts */
#define LINK_FAIL_MAX 8

enum link_phase { LINK_IDLE, LINK_CLAIMED, LINK_INFLIGHT };

struct link_meter {
	dev_event a, b;
	enum link_phase phase;
	uint64_t bytes, wait_ns;        /* of the measurement in flight */
	int pageable;
	double rate[LINK_KEEP];         /* bytes per ns */
	unsigned n;                     /* measurements in (all time) */
	unsigned fails;
	uint64_t plain, pooled;         /* copies since the last measurement began */
};

/*
 * The link known now: stated (stated_gbps > 0), measured, or none; and the
 * serving speed serve measured (link_serve_due; 0 while fewer than
 * LINK_FIRST gathers were timed, with a stated link, or serve NULL:
 * serving counts as free).
 */
void link_get(const struct link_meter *m, const struct link_meter *serve, double stated_gbps,
	      struct ledger_link *out);

/* The fastest of m's last measurements, in bytes per ns (1e9 bytes/s); 0: none. */
double link_rate(const struct link_meter *m);

/*
 * The serve meter: a second meter of the same kind, whose two events
 * bracket the pool's own device-to-device work of a copy (the gather of
 * its hits, slab -> destination) instead of a send. A hit
 * saves its link time less that time, which on a GPU is a small part of
 * it (device memory is far faster than the link) and on the emulated
 * device, whose device-to-device copies are this machine's memcpy, can be
 * all of it. Whether the gather of a copy moving bytes bytes should be
 * timed (counts one gather): while fewer than LINK_FIRST measurements are
 * in, then one in LINK_REFRESH; never with a stated link (stated_gbps > 0:
 * what cannot measure the link is not asked to measure serving either, and
 * the statement is taken as the whole saving). As with the link, on an
 * idle stream the first event completes before the launch is made, so a
 * time also counts the launch: a serving never looks faster than it is,
 * and the estimate is the fastest. The pool times only gathers of hits alone
 * (issue.c). Its measurements are read with link_poll(m, 0):
 * a short one is the point, not noise.
 */
int link_serve_due(struct link_meter *m, double stated_gbps, uint64_t bytes);

/* Whether the next plain copy, of bytes bytes, should be measured (counts one plain copy). */
int link_plain_due(struct link_meter *m, double stated_gbps, uint64_t bytes);

/*
 * Whether a pooling spec's copy of bytes bytes should be sent plain to
 * measure the link (counts one copy). clear: the spec pools clearly on the
 * link measured so far (ledger_pays_clearly), so the first full set is not
 * hurried: one copy in LINK_POOL_REFRESH, as after it.
 */
int link_pool_due(struct link_meter *m, double stated_gbps, uint64_t bytes, int clear);

/*
 * Begins a measurement: records the first event on stream s. Returns 0,
 * or a negative errno (no measurement: -EBUSY, one is in flight; a failure
 * to make or record an event).
 */
int link_begin(struct link_meter *m, dev_stream s);

/*
 * Finishes the measurement link_begin began: records the second event on
 * s behind the send of bytes bytes, which waited wait_ns in the call
 * (pageable: the source is pageable, staged during the call). ok 0: the
 * send failed, the measurement is dropped.
 */
void link_end(struct link_meter *m, dev_stream s, uint64_t bytes, uint64_t wait_ns, int pageable, int ok);

/*
 * Reads a finished measurement in, without waiting; a time under min_ns is
 * dropped (LINK_MIN_NS for the link, 0 for the serve meter).
 */
void link_poll(struct link_meter *m, uint64_t min_ns);

/* Frees the meter's events (the pool is freed with its context alive). */
void link_release(struct link_meter *m);

#endif
