/*
 * calls: the program's CUDA calls as the pool layer sees them. The
 * interception layer describes each call it catches and hands it here in
 * one call; everything about its fate is decided here, one way down:
 * classify, auto layout, spec picking, the pool, the counters.
 *
 *   copy hook -> calls_copy -> classify_copy, autolayout, specpick_choose,
 *                              pool_get, pool_copy (or forward) -> counters
 *   allocation hook -> calls_alloc_begin, calls_alloc_again -> pool_reclaim
 *
 * Invariants:
 * - What the program gets back is exactly what its plain call would have
 *   returned: a copy is either forwarded unchanged (through the caller's
 *   forward callback) or delivered by pool_copy, which answers with the
 *   status of the program's own entry point (pool.h).
 * - This layer knows no symbol: the caller's callbacks reach the real
 *   functions. It makes no CUDA runtime call of its own; device work goes
 *   through device.h.
 * - The copy and allocation functions run under the caller's re-entry
 *   guard (the interception layer sets it around the call), so the pool's
 *   own work never reaches an interposed entry point twice.
 * - The callbacks are called on the calling thread, before the function
 *   returns; they and their argument belong to the caller.
 * - A host-to-device copy (by its kind) that only one spec of the layout
 *   divides, while the cost ledger stands that spec aside (ledger.h,
 *   VRAMPOOL_LEDGER=on), is forwarded before any pointer query and
 *   counted as matched and stood aside (copies.stood_aside), unclassified:
 *   one in LEDGER_SAMPLE_EVERY goes the whole way, to be sampled. The
 *   board is per process: where one pool (device) stands a spec aside,
 *   the others' copies of that spec are thinned the same way, and their
 *   own ledgers judge what reaches them.
 *
 * Set-up: calls_setup once at load, before any other call here, with a
 * configuration that outlives the process; calls_atfork_child in a forked
 * child. No CUDA call in either.
 */
#ifndef VRAMPOOL_CALLS_H
#define VRAMPOOL_CALLS_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "device/device.h"
#include "pool/classify.h"

/* One copy the program made, described by the hook that caught it. */
struct copy_call {
	void *dst;              /* the contiguous destination (a 2D copy: its first row) */
	const void *src;
	uint64_t n;             /* bytes (a 2D copy: width * height) */
	enum classify_dir dir;  /* how its direction is known */
	dev_stream stream;      /* as the program passed it (ignored for synchronous entries) */
	int sync;               /* a synchronous entry point (cudaMemcpy, cuMemcpyHtoD) */
	int per_thread;         /* a _ptds/_ptsz entry point */
	int driver;             /* a driver entry point (cu*): counted as such */
	/* The destination may be host memory (a device-to-host, host-to-host
	 * or unified copy): asynchronous into pinned memory, it is written in
	 * stream order (calls_host_work). */
	int host_dst;
	/* The program's call exactly as it made it. Returns its status (0: success). */
	int (*forward)(void *arg);
	/*
	 * Bytes [off, off + len) host-to-device with the program's own plain
	 * entry point, asynchronously on its stream (h2d) or synchronously
	 * (h2d_sync): pool_request's h2d and h2d_sync (pool.h), which calls_copy
	 * runs under the program's own stream-capture mode.
	 */
	int (*h2d)(void *arg, uint64_t off, uint64_t len);
	int (*h2d_sync)(void *arg, uint64_t off, uint64_t len);
	void *arg;              /* the callbacks' argument */
	int capture_mode;       /* calls_copy's: the program's capture mode while the pool works */
};

/*
 * A contiguous copy: classifies it (feeding the layout finder while it
 * looks), picks the spec that cuts it, and hands it to its device's pool,
 * or forwards it. Counts it when it succeeded. Returns exactly what the
 * program's plain call returns.
 */
int calls_copy(struct copy_call *c);

/*
 * A copy the pool never takes by its nature (a 2D copy with pitches, a
 * copy to a module variable): forwards it, and counts it as a
 * host-to-device copy that matched nothing when it succeeded and is
 * host-to-device: dir CL_DIR_H2D, or CL_DIR_INFER with a host source.
 * Only dst, src, n, dir, driver and forward are read.
 */
int calls_copy_unpooled(struct copy_call *c);

/* One of the program's own batched copies (cudaMemcpyBatchAsync, cuMemcpyBatchAsync). */
struct copy_batch {
	void *const *dsts;      /* count destinations (the driver's: CUdeviceptr values) */
	const void *const *srcs;
	const size_t *sizes;
	size_t count;
	int driver;
	int (*forward)(void *arg);      /* the program's call as it made it */
	void *arg;
};

/*
 * Forwards a batch as it is and, when it succeeded, counts the batch and
 * each host-to-device entry of it as one copy that matched nothing.
 * Returns the forward's status.
 */
int calls_copy_batch(struct copy_batch *b);

/*
 * One allocation the program asked for. The hook fills oom, dev, need and
 * clear_error; the rest is calls_alloc_again's.
 */
struct alloc_call {
	int oom;                /* the entry point's out-of-memory code */
	int dev;                /* its device, or -1: the calling thread's current context's */
	uint64_t need;          /* bytes it asks for */
	/* A runtime entry point: clears the runtime's last error (NULL for the driver's). */
	void (*clear_error)(void);
	int retries;            /* retries granted so far */
};

/* Counts an allocation call; call it once before the first attempt. */
void calls_alloc_begin(struct alloc_call *a);

/*
 * After an attempt that returned err: returns 1 when the caller should
 * make the call again, 0 when err is the answer. On out-of-memory, while
 * the shim is enabled, pool memory is given back (pool_reclaim, newest
 * slabs first) and the call tried again, until it fits, fails otherwise,
 * or the pool has nothing left. An allocation on the calling thread's
 * current device whose device cannot be read (the driver's query fails)
 * gets memory back from every pool. The runtime's last error, set by a failed
 * attempt, is cleared before each retry and after one that succeeded: the
 * program asked once and got its memory.
 */
int calls_alloc_again(struct alloc_call *a, int err);

/*
 * Load time: remembers c (it must outlive the process), sets the pool's
 * starting state and reason for the dump, sets up the layout finder (when
 * the layout is auto, or unset in a run that is not off), the pools and
 * the fingerprint workers. No CUDA call.
 */
void calls_setup(const struct config *c);

/*
 * In a forked child, which cannot use its parent's CUDA context: forgets
 * the pools, the device's handles, the fingerprint workers, the spec
 * choices and the what-if figures, and zeroes the counters (keeping the
 * layout found; a child that has found none yet starts the layout finder
 * afresh, with a new lock). Locks a thread of the parent held at the fork
 * are made anew. Call it before report_atfork_child.
 */
void calls_atfork_child(void);

/*
 * A copy the pool does not take (not host-to-device): forwarded; when it
 * may write host memory after it returned (host_dst, asynchronous, the
 * destination page-locked), its stream is noted as calls_host_work does,
 * for bytes [dst, dst + n) (n 0: any, a strided copy's).
 * Returns exactly what the program's plain call returns.
 */
int calls_copy_other(struct copy_call *c);

/*
 * The program queued work on stream (as it passed it; per_thread for a
 * _ptsz entry) that may write host memory after the call returned: a host
 * function or callback, a graph launch, an asynchronous copy to the host.
 * Rows of pinned sources are not served on busy streams until it has run
 * (hazard.h). Nothing in a run that cannot pool (off, invalid, dry).
 */
void calls_host_work(dev_stream stream, int per_thread);

/* calls_host_work of a copy that writes bytes [dst, dst + n) of host memory only (dst NULL: any). */
void calls_host_write(dev_stream stream, int per_thread, const void *dst, uint64_t n);

/*
 * The program's graph work (graphs.h). A launch of exec on stream is
 * counted as one host-to-device copy of its captured copies' bytes, left
 * untouched (copies.graph_capture; none when it has none), and is host
 * work (calls_host_work). The executable exec was made or
 * updated from graph. A graph or executable handle was destroyed.
 */
void calls_graph_launch(const void *exec, dev_stream stream, int per_thread);
void calls_graph_exec(const void *exec, const void *graph);
void calls_graph_gone(const void *h);

/* The program began capturing a stream into a graph: from now on copies that pass through are asked whether they went into one. */
void calls_capture_begun(void);

#endif
