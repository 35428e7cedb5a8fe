/*
 * keep: the what-if curve's view of the rows of a pooled copy, and of the
 * rows the pool keeps (issue 16, item 3: cheap captures). INTERNAL to the
 * pool's room (pool/pool_impl.h).
 *
 * A copy's hits reach the curve as repeats at their slab's position, and
 * so does a row found in the pool but not ready (its capture unsettled):
 * pool_whatif_hits, under the pool's lock. The rest is observed
 * (whatif_observe) by pool_whatif_rows, outside it.
 *
 * A capture is a row's first sighting. In a copy whose other rows the pool
 * serves or knows, the pool hands its captures to the curve as WHATIF_KEPT
 * (whatif.h): each gets its first-seen position without entering the
 * what-if's fingerprint table, since while the pool holds the row its
 * sightings reach the curve as pool hits (whatif_repeat), or, found but
 * not yet ready, as repeats at their slab's position (pool_whatif_hits). That saves
 * the capture epoch a table insert per row, the table's rate halvings and
 * the cache the table would take from the index.
 *
 * The table must learn of such a row before the row can be observed
 * without the pool's index:
 * - when it leaves the pool: a failed capture (pool.c), a pinned source
 *   found changed (plan.c), an evicted slab (evict.c);
 * - before copies go through unhashed, sampled by content
 *   (whatif_observe_sparse: the back-off stood the pool down), all rows
 *   the pool holds: pool_whatif_adopt_pooled (route.c).
 * Every function here but pool_whatif_rows is called with p->mu held.
 */
#ifndef VRAMPOOL_KEEP_H
#define VRAMPOOL_KEEP_H

#include <stdint.h>

#include "pool/fingerprint.h"

struct pool;
struct pool_copy_ctx;

struct keep_batch;

/*
 * Gathers a row at first-seen position pos for whatif_adopt in *k (NULL
 * at first: made on first use; a row that finds no memory for it counts as
 * new if it is seen again without the pool), adopting a full batch first.
 */
void keep_row(struct keep_batch **k, const struct fp *key, uint64_t pos);

/* Adopts the rows left in *k and frees it (NULL: nothing). */
void keep_done(struct keep_batch **k);

/*
 * Reports the copy's hits (one repeat per run) and its rows found but not
 * ready (marked found[i] = POOL_FOUND_REPEAT) to the what-if curve, and
 * decides whether its captures go as WHATIF_KEPT (x->kept): when every
 * other row is one of those (a duplicate of a capture in the same copy,
 * or a row the pool refused, goes through the table, and the captures
 * beside it too). After planning.
 */
void pool_whatif_hits(struct pool_copy_ctx *x);

/*
 * Observes the copy's other rows, captures as pool_whatif_hits decided;
 * x->vals gets each row's first-seen position (the captures' go into
 * their slab's range when they are published). Without the pool's lock.
 */
void pool_whatif_rows(struct pool_copy_ctx *x);

/*
 * Hands every row the pool holds to the what-if table at its slab's
 * position estimate (slab_row_pos), when rows were kept out of it
 * (p->whatif_kept), and counts the pass (p->whatif_adopted). Rows of a
 * capture still being planned or issued (a PENDING segment) are the
 * capturing copy's to hand over: it sees the count change (pool_publish).
 */
void pool_whatif_adopt_pooled(struct pool *p);

#endif
