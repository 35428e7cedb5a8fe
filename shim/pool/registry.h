/*
 * registry: one pool per device and context, and the configuration every
 * pool reads. Its public half is declared in pool/pool.h (pool_setup,
 * pool_set_layout, pool_get, pool_reclaim, pool_atfork_child,
 * pool_shutdown); this header holds what the other files of the pool's
 * room read of it. INTERNAL to the room (pool/pool_impl.h).
 *
 * Invariants:
 * - pool_cfg is set once by pool_setup, before the first pool_get, and
 *   never changes; the registry does not own it (the caller's config).
 * - pool_min_row is at least 1: the smallest row of the layout in use
 *   (pool_set_layout), which bounds admission.
 * - A device has at most one live pool. A pool made in another context is
 *   retired, not freed: threads still finishing a copy with it may use its
 *   structure; its device memory is never touched again.
 *
 * Locking: the table lock guards the table and the layout; it is taken
 * alone, except that retiring a pool takes that pool's p->mu under it.
 */
#ifndef VRAMPOOL_REGISTRY_H
#define VRAMPOOL_REGISTRY_H

#include <stdint.h>

#include "core/config.h"

/* The configuration the pools use (pool_setup's); read-only after setup. */
extern const struct config *pool_cfg;

/* The smallest row of the layout in use, at least 1. */
extern uint64_t pool_min_row;

#endif
