/*
 * pool: the VRAM sample pool of one device: slabs of device memory holding
 * rows seen before, the index from fingerprints to slab rows, capture at
 * delivery, gather of hits, the one-shot budget probe, eviction under
 * memory pressure, displacement by priority and the back-off.
 *
 * Invariants:
 * - A row is admitted only by copying it device-to-device out of the
 *   destination the program's own copy just filled (capture at delivery),
 *   on the program's stream; no extra host-to-device byte is ever sent.
 * - A row is served (hit) only after the event recorded behind its capture
 *   is complete or the serving stream waits for it; a row whose capture is
 *   still being issued by another thread is a miss.
 * - Slabs are filled in consumption order and never rewritten; they are
 *   freed only under memory pressure (newest first) or to make room for
 *   rows of a higher priority (lower priorities, newest first), after all
 *   work in the device's context (which includes every read of them) has
 *   finished. After an eviction under memory pressure the budget latches:
 *   nothing new is admitted.
 * - Budget (budget.h): any budget of at least one row is honoured; rows of
 *   every matched spec share it (slabs are byte-addressed, slab.h); the
 *   pool is full only when no row of any matched spec can be admitted.
 * - Priorities: a row of priority P that the budget cannot admit makes the
 *   pool free a slab holding only rows of a lower priority (newest first)
 *   and stop admitting rows below P from then on, so lower priorities only
 *   get budget that no higher-priority row needs.
 * - Rows captured from a pinned source that the stream reads later than the
 *   call are not served until their run-time check (pincheck.h) found the
 *   source unchanged; if it changed, the rows are dropped.
 * - The pool's own failures never reach the program. When a hit cannot be
 *   issued, every row not yet delivered host-to-device is delivered with
 *   the program's plain host-to-device copy (stream-ordered after whatever
 *   the pool enqueued, so it overwrites it); when a capture cannot be
 *   issued (or checked), its rows are dropped from the index. The program
 *   gets exactly the bytes and the status the plain copy would give, and
 *   requested == h2d + served_from_pool still holds. A transient failure
 *   (a slab allocation, the probe) is retried later with back-off, not
 *   cached for the rest of the run.
 * - Dry runs (VRAMPOOL=dry) fingerprint and feed the what-if curve only:
 *   no device memory, no device work of the pool's own.
 *
 * Locking: a per-pool mutex guards the index and slab bookkeeping; an
 * rwlock is held shared by every copy from lookup to the last enqueue that
 * reads a slab, and exclusively by eviction.
 */
#ifndef VRAMPOOL_POOL_H
#define VRAMPOOL_POOL_H

#include <stdint.h>

#include "pool/budget.h"
#include "core/config.h"
#include "device/device.h"

struct pool;

/* One matched host-to-device copy, as calls_copy (pool/calls.h) hands it over. */
struct pool_request {
	dev_ptr dst;            /* device memory on the pool's device */
	const void *src;        /* host memory, n bytes, read now */
	uint64_t n;             /* a multiple of row, n >= row */
	uint64_t row;
	unsigned prio;          /* the matched spec's priority */
	dev_stream stream;      /* the handle the driver should see (0x2 for a per-thread stream) */
	/*
	 * Delivers bytes [off, off + len) of the request host-to-device with
	 * the program's own entry point, asynchronously on the program's
	 * stream. Returns 0 or the entry point's own error code (positive: a
	 * cudaError_t or a CUresult), which pool_copy passes back unchanged.
	 */
	int (*h2d)(void *arg, uint64_t off, uint64_t len);
	/*
	 * The same synchronously (the program's synchronous entry point): the
	 * bytes are on the device when it returns, and so is everything
	 * enqueued before it on the stream.
	 */
	int (*h2d_sync)(void *arg, uint64_t off, uint64_t len);
	void *arg;
	/*
	 * Set for a synchronous copy (cudaMemcpy, cuMemcpyHtoD): pool_copy
	 * returns only when every byte is on the device. It waits with the
	 * driver (stream, then event, then context synchronisation, so a
	 * failure of one is not the program's); if none can wait, the rows
	 * it served are delivered again with h2d_sync, which waits itself.
	 */
	int sync;
	/* Serve hits only, admit nothing (the row size of this copy is not settled yet). */
	int no_admit;
	/*
	 * Set when the source is pinned: the device reads it when the copy
	 * runs, so a batch of its rows reads it in stream order, and captured
	 * rows are checked then when the stream has work queued ahead of the
	 * copy (pincheck.h, issue.h). A pageable source is read during the call.
	 */
	int verify;
	/*
	 * The cost ledger and the back-off per copy kind (issue 16): the
	 * matched spec (layout_hit.spec: its index in the layout, -1 for
	 * whole:MIN), and whether the source is pinned (a pageable one is
	 * staged during the call, so the link meter times the caller's wait).
	 */
	int spec;
	int src_pinned;
};

/* Remembers the configuration the pools use; called once before pool_get. */
void pool_setup(const struct config *c);

/*
 * Sets the layout the pools match (the automatic layout, found after
 * start): its smallest row bounds admission. Called before the first copy
 * of that layout reaches a pool; a pool created before keeps working.
 */
void pool_set_layout(const struct layout *l);

/*
 * Returns device dev's pool for the context whose id is ctx_id (0: unknown),
 * creating it on first use, or NULL (no memory). When the id differs from
 * the one the pool was made in, the device was reset and every slab is gone:
 * the old pool is retired (its memory is not touched again, its structure
 * is left to threads still finishing a copy with it) and a new, dormant
 * pool takes its place.
 */
struct pool *pool_get(int dev, uint64_t ctx_id);

/*
 * Delivers one matched copy: hits from slabs, misses host-to-device, new
 * rows captured while the budget allows. Updates every row and byte
 * counter, bytes.requested among them (beside the bytes sent and served,
 * so that a dump taken meanwhile sees all of a copy's bytes or none; the
 * caller counts the copy itself). Returns 0, or the error of the program's
 * own copy (positive), exactly what the plain copy would have returned.
 */
int pool_copy(struct pool *p, const struct pool_request *r);

/*
 * Gives device memory back for a program allocation of need bytes on
 * device dev that just failed: evicts at least one slab, newest first,
 * then more until the device reports need bytes free or the pool is
 * empty, and latches the budget. Returns the number of slabs evicted, 0
 * when there was nothing to evict, or a negative errno (the pool could not
 * safely free anything: said under VRAMPOOL_VERBOSE). dev < 0: the device
 * is not known (the program's current device could not be read), and
 * every pool gives back so (issue 17, item A); the slabs evicted in all.
 */
int pool_reclaim(int dev, uint64_t need);

/* In a forked child: forget every pool (the parent's device memory is not ours). */
void pool_atfork_child(void);

/* Frees every pool's host and device memory (unit tests; never at exit). */
void pool_shutdown(void);

#endif
