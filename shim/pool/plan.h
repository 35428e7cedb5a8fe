/*
 * plan: the fate of every row of one copy, decided under the pool's lock:
 * a hit (served from a slab), a miss (sent host-to-device) or a capture
 * (room taken in a slab, filled from the destination after delivery).
 * INTERNAL to the pool's room (pool/pool_impl.h).
 *
 * Invariants:
 * - A row is a hit only when it is in the index and its capture is DONE,
 *   or RECORDED and the copy's stream now waits for its event; a row in a
 *   PENDING segment, or one whose pinned source is not checked yet, is a
 *   miss.
 * - A capture holds room in a PENDING segment of a slab of the copy's
 *   priority and is in the index from planning on; the copy must publish
 *   it (pool_publish) or drop it.
 * - Planning allocates slabs within the budget, raises the admission floor
 *   and asks for displacement (p->displace) when a row's priority needs
 *   room that lower priorities hold, and marks the pool FULL when no row
 *   of any spec can be admitted any more.
 */
#ifndef VRAMPOOL_PLAN_H
#define VRAMPOOL_PLAN_H

struct pool_copy_ctx;

/*
 * Plans every row of x (fingerprints in x->fps): x->plan, x->hits,
 * x->misses, x->captures. Returns 0, or POOL_REDELIVER when a wait for a
 * capture could not be issued (then every row is planned a miss and no
 * capture is left behind). Called with both of the pool's locks held
 * (p->evict_lock shared).
 */
int pool_plan(struct pool_copy_ctx *x);

#endif
