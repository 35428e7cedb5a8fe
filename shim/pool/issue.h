/*
 * issue: a planned copy's device work, enqueued on the program's stream in
 * stream order, and its host-to-device sends. INTERNAL to the pool's room
 * (pool/pool_impl.h).
 *
 * A copy with hits or captures makes at most two device operations that
 * move bytes, in this order on the program's stream:
 *   [waits for captures still running on other streams] (planned, plan.h)
 *   1. the rows not served (misses and captures) host-to-device: one run
 *      with the program's own entry point, several runs as one batched
 *      call (device_copy_h2d_many, which reads a pinned source in stream
 *      order and a pageable one during the call, as the program's copy
 *      would; the legacy stream, which the call refuses, through the
 *      device layer's bridge), or the whole copy, serving none of the hits
 *      (counted as misses): where the runs are scattered and the batched
 *      call cannot be had (no such driver call; the legacy stream without
 *      its bridge) or fails, or where the hits would need a launch of
 *      their own for fewer than POOL_SPLIT_MIN_BYTES;
 *   2. the hits and captures: one gather kernel launch, or where the
 *      kernel is not available (device_gather_ready) or cannot take them,
 *      one batch of device-to-device copies;
 * (Only where neither the kernel nor the batched call can be had, or after
 * a failure of the pool's own, do hits and captures take one copy per run
 * of rows, and a fallback sends rows again.)
 * Then the run-time check of a pinned source (a host function), only when
 * the copy captured rows from a pinned source and the stream had work
 * queued ahead of the copy (device_stream_idle, asked before step 1), and
 * (by pool_publish) one event per segment behind the captures. A copy
 * with neither hits nor captures is one send of the whole copy.
 *
 * Invariants:
 * - Sends use the program's own entry points (pool_request.h2d, h2d_sync)
 *   or, for a batch, the driver on the program's stream; their time is
 *   added to x->h2d_ns; the program's own errors (positive) are returned
 *   unchanged.
 * - x->misses_sent is set once the rows not served were sent (or are being
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

#endif
