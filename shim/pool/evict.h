/*
 * evict: freeing slabs safely, for the copy pipeline (displacement and
 * refresh, pool.c) and the registry (reclaim under memory pressure), and
 * the pool's free list of events, which settled and evicted segments give
 * back and published segments take. INTERNAL to the pool's room
 * (pool/pool_impl.h).
 *
 * Invariants:
 * - A slab is freed only after pool_quiesce returned 0 under both of the
 *   pool's locks: every read and capture of it (work in the device's
 *   context) has finished.
 * - A slab whose device memory could not be freed stays whole: in the
 *   index, the gauges and the pool's bytes.
 * - Events on the free list belong to the pool and are not recorded on
 *   any stream.
 */
#ifndef VRAMPOOL_EVICT_H
#define VRAMPOOL_EVICT_H

#include <stdint.h>

#include "device/device.h"

struct pool;

/* Returns a recycled or new event, or NULL (none could be made). Called with p->mu held. */
dev_event pool_event_get(struct pool *p);

/*
 * Gives event ev (NULL: nothing) back to the free list; the pool owns it
 * from now on (freed when the list cannot grow). Called with p->mu held.
 */
void pool_event_put(struct pool *p, dev_event ev);

/*
 * Waits for all work in the pool's context so that slabs can be freed:
 * cuCtxSynchronize, tried twice; when it keeps failing, a sync of every
 * stream the pool put work on (and the legacy stream), when that set is
 * known and complete. Returns 0 or -EIO. Called with both locks held.
 */
int pool_quiesce(struct pool *p);

/*
 * Frees slab id: its device memory first (a free that fails is tried
 * once more after a device_sync; failing again, it keeps the slab whole
 * and counts nothing), then its index entries, events and checks.
 * why ("evicted", "displaced") goes in the verbose line. Returns 0 or -EIO.
 * Called with both locks held, after pool_quiesce.
 */
int pool_evict_slab(struct pool *p, uint32_t id, const char *why);

/*
 * Frees slabs newest first, each counted as an eviction, with why in the
 * verbose lines: every slab when need is NULL, else until the device
 * reports *need bytes free (asked before each slab after the first freed).
 * Returns the number of slabs freed. Called with both locks held, after
 * pool_quiesce.
 */
int pool_evict_newest(struct pool *p, const uint64_t *need, const char *why);

#endif
