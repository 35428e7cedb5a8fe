/*
 * route: the ways a matched copy can take through the pool besides the
 * full path (pool.c), and the choice among them (issue 16: the cost
 * ledger and the back-off per copy kind decide it).
 *
 *   pool_route        under the pool's lock: which way, the copy kind's
 *                     back-off, and whether the plain send is timed for
 *                     the link meter (link.h)
 *   pool_copy_plain   the whole copy host-to-device, its rows counted as
 *                     misses (a retired pool, no memory, a link
 *                     measurement, and every way below)
 *   pool_copy_observe the plain copy, then fingerprints for the what-if
 *                     curve (dry runs, before the probe, a dormant pool)
 *   pool_copy_sample  stood down (backoff.h): the plain copy, then a few
 *                     rows looked up
 *   pool_copy_aside   the spec stands aside (ledger.h): the plain copy,
 *                     a few rows hashed and looked up on the CPU clock,
 *                     the ledger's judgement of the sample
 *   pool_ledger_pooled  a fingerprinted copy's figures into the ledger
 *
 * The plain send of every way runs first, right after the routing, so the
 * link meter's events stay tight around it; the source is read after it
 * (the program cannot touch it before its call returns). INTERNAL to the
 * pool's room (pool_impl.h): pool.c calls it; it calls issue.c
 * (pool_send) and reads registry.c's configuration.
 */
#ifndef VRAMPOOL_ROUTE_H
#define VRAMPOOL_ROUTE_H

#include <stdint.h>

#include "pool/pool_impl.h"

/* What the routing under the lock chose for a copy. */
enum pool_route {
	POOL_ROUTE_FULL,        /* fingerprint, look up, serve, capture */
	POOL_ROUTE_OBSERVE,     /* the plain copy, fingerprinted for the what-if curve */
	POOL_ROUTE_PLAIN,       /* the plain copy (a retired pool, no memory, a link measurement) */
	POOL_ROUTE_PASS,        /* stood down (back-off): straight through */
	POOL_ROUTE_SAMPLE,      /* stood down: straight through, a few rows sampled */
	POOL_ROUTE_ASIDE,       /* the spec stands aside (ledger): straight through, sampled */
};

/*
 * Routes one copy of spec slot slot (ledger_slot; -1: none); called with
 * p->mu held. *b gets the copy kind's back-off, *measure whether a send of
 * the whole copy (a plain one, or a pooling copy's send of all its rows)
 * is timed for the link meter: the caller keeps it in x->measure and
 * brackets such a send with pool_link_begin and pool_link_end. A pooling
 * copy is routed plain to measure only now and then (link.h).
 */
enum pool_route pool_route(struct pool *p, const struct pool_request *r, int slot, struct backoff **b,
			   int *measure);

/* Delivers the whole copy host-to-device, counting its rows as misses. */
int pool_copy_plain(struct pool_copy_ctx *x);

/*
 * Shows the what-if curve the rows of a copy sent without their hashes
 * (stood down or aside): a content sample of them (whatif_observe_sparse)
 * where rows are at least WHATIF_SPARSE_MIN_ROW bytes, else only the mark
 * that the curve is an estimate (for small rows, reading them would cost
 * what standing aside saves).
 */
void pool_copy_unhashed(struct pool_copy_ctx *x);

/*
 * Around a send of x's whole copy when x->measure is set (pool.c's send
 * wrapper): pool_link_begin clears x->measure, records the meter's first
 * event on the stream and returns 1, or 0 when no measurement began
 * (link_begin); after a 1, pool_link_end records the second event behind
 * the send (ok 0: it failed, and the measurement is dropped), wait_ns the
 * caller's wait in it. Both take p->mu.
 */
int pool_link_begin(struct pool_copy_ctx *x);
void pool_link_end(struct pool_copy_ctx *x, int ok, uint64_t wait_ns);

/* Fingerprints the copy's rows into x->fps. */
void pool_fingerprint(struct pool_copy_ctx *x);

/* Observes a copy: the plain copy, then its fingerprints (x->fps) fed to the what-if curve. */
int pool_copy_observe(struct pool_copy_ctx *x);

/* Samples a copy while stood down: the plain copy, then *rows looked up, *hits found, *repeats seen before. */
int pool_copy_sample(struct pool_copy_ctx *x, uint32_t *rows, uint32_t *hits, uint32_t *repeats);

/* A copy of a spec standing aside, whose slot is slot: see above. */
int pool_copy_aside(struct pool_copy_ctx *x, int slot);

/*
 * Feeds the ledger of slot a copy the pool fingerprinted: wall_ns and
 * cpu_ns of the shim's own time, ops the device operations it added,
 * sends the program's sends it made. Takes p->mu.
 */
void pool_ledger_pooled(struct pool_copy_ctx *x, int slot, uint64_t wall_ns, uint64_t cpu_ns, uint64_t ops,
			uint64_t sends);

#endif
