/*
 * issue: a planned copy's device work, enqueued on the program's stream in
 * stream order, and its host-to-device sends. INTERNAL to the pool's room
 * (pool/pool_impl.h).
 *
 * The order of one copy's device work on the program's stream:
 *   [waits for captures still running on other streams] (planned, plan.h)
 *   [misses host-to-device, in runs of consecutive rows]
 *   [hits and captures: one gather kernel launch]
 * or, where the kernel is not available (device_gather_ready says so):
 *   [hits: one batched device-to-device copy] [misses] [captures: one batch]
 * then the run-time check of a pinned source, when asked for, and (by
 * pool_publish) one event per segment behind the captures.
 *
 * Invariants:
 * - Sends use the program's own entry points (pool_request.h2d, h2d_sync)
 *   and their time is added to x->h2d_ns; their errors (positive) are
 *   returned unchanged.
 * - x->misses_sent is set once the miss rows were sent (or are being
 *   sent), so a fallback never sends them twice.
 * Called without the pool's p->mu, with p->evict_lock held shared from
 * planning on.
 */
#ifndef VRAMPOOL_ISSUE_H
#define VRAMPOOL_ISSUE_H

#include <stdint.h>

struct pool_copy_ctx;

/* Delivers rows [i, j) host-to-device with the program's entry point (synchronous when x->send_sync). */
int pool_send(struct pool_copy_ctx *x, uint64_t i, uint64_t j);

/* Delivers every row whose plan kind is (want_hits ? HIT : not HIT), in runs. */
int pool_send_rows(struct pool_copy_ctx *x, int want_hits);

/*
 * Issues the copy's device work in stream order (above). Returns 0, a
 * positive error of the program's own copy, POOL_REDELIVER or
 * POOL_CAPTURE_LOST.
 */
int pool_issue(struct pool_copy_ctx *x);

/*
 * Queues the run-time check of the copy's captured rows behind its
 * captures (x->check; the check's reference is the host function's).
 * Returns 0 or POOL_CAPTURE_LOST.
 */
int pool_check_queue(struct pool_copy_ctx *x);

#endif
