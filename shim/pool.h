/*
 * pool: the VRAM sample pool of one device: slabs of device memory holding
 * rows seen before, the index from fingerprints to slab rows, capture at
 * delivery, gather of hits, the one-shot budget probe and eviction under
 * memory pressure.
 *
 * Invariants:
 * - A row is admitted only by copying it device-to-device out of the
 *   destination the program's own copy just filled (capture at delivery),
 *   on the program's stream; no extra host-to-device byte is ever sent.
 * - A row is served (hit) only after the event recorded behind its capture
 *   is complete or the serving stream waits for it; a row whose capture is
 *   still being issued by another thread is a miss.
 * - Slabs are filled in consumption order and never rewritten; they are
 *   freed only under memory pressure, newest first, after all work in the
 *   device's context (which includes every read of them) has finished.
 *   After an eviction the budget latches: nothing new is admitted.
 * - Rows captured from a pinned source that the stream reads later than the
 *   call are not served until a host function queued behind the capture
 *   has fingerprinted the source again and found it unchanged; if it
 *   changed, the rows are dropped (never served under the old fingerprint).
 * - If the pool's own device work fails, the program still gets its bytes:
 *   when a hit cannot be issued the whole copy is delivered again with the
 *   program's plain host-to-device copy; when a capture cannot be issued
 *   (or checked), its rows are dropped from the index. The program never
 *   receives a wrong byte and never sees an error the plain copy would not
 *   give.
 *
 * Locking: a per-pool mutex guards the index and slab bookkeeping; an
 * rwlock is held shared by every copy from lookup to the last enqueue that
 * reads a slab, and exclusively by eviction.
 */
#ifndef VRAMPOOL_POOL_H
#define VRAMPOOL_POOL_H

#include <stdint.h>

#include "config.h"
#include "device.h"

struct pool;

/* One matched host-to-device copy, as the interposer hands it over. */
struct pool_request {
	dev_ptr dst;            /* device memory on the pool's device */
	const void *src;        /* host memory, n bytes, read now */
	uint64_t n;             /* a multiple of row, n >= row */
	uint64_t row;
	dev_stream stream;      /* the handle the driver should see (0x2 for a per-thread stream) */
	/*
	 * Delivers bytes [off, off + len) of the request host-to-device with
	 * the program's own entry point and stream. Returns 0 or the runtime's
	 * error code (positive).
	 */
	int (*h2d)(void *arg, uint64_t off, uint64_t len);
	void *arg;
	/*
	 * Set when the source is pinned and the stream may run the copy later
	 * than now: CUDA reads a pinned source when the copy runs, so the
	 * program may still change it in stream order (a host function queued
	 * before the copy). Rows captured from such a copy are fingerprinted
	 * again when the copy has run, and dropped if the source changed.
	 */
	int verify;
};

/* Remembers the configuration the pools use; called once before pool_get. */
void pool_setup(const struct config *c);

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
 * counter. Returns 0, or the runtime error of the program's own copy
 * (positive), exactly what the plain copy would have returned.
 */
int pool_copy(struct pool *p, const struct pool_request *r);

/*
 * Gives device memory back for a program allocation of need bytes on
 * device dev that just failed: evicts at least one slab, newest first,
 * then more until the device reports need bytes free or the pool is
 * empty, and latches the budget. Returns the number of slabs evicted, 0
 * when there was nothing to evict, or a negative errno (the pool could not
 * safely free anything).
 */
int pool_reclaim(int dev, uint64_t need);

/*
 * The probe's arithmetic: the budget for free bytes at the probe and the
 * largest matched copy seen, under c. Returns 0 when that leaves less than
 * one slab (the pool stays dormant for good).
 */
uint64_t pool_budget_decide(const struct config *c, uint64_t free_bytes, uint64_t largest_copy);

/* In a forked child: forget every pool (the parent's device memory is not ours). */
void pool_atfork_child(void);

/* Frees every pool's host and device memory (unit tests; never at exit). */
void pool_shutdown(void);

#endif
