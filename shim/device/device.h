/*
 * device: the CUDA driver API, for the pool's own device work.
 *
 * The driver is reached with dlopen("libcuda.so.1") and dlsym of the
 * versioned names, never through symbols the program could interpose, and
 * never through the runtime (whose calls set the program's last error).
 * Every function returns 0 or a negative errno; CUresult stays inside
 * the device layer (STYLE.md 4). -ENOMEM means the device is out of
 * memory, -EBUSY "not yet" (event query), -EIO any other driver failure.
 *
 * Counting: a call that puts work on a stream adds to pool.device_ops; every
 * failed driver call of the pool's own work (allocations, frees, copies,
 * events, waits, synchronisation, the kernel and its self-test; out of
 * memory included, "not ready" not) adds one to pool.faults, here and only
 * here, so callers must not count them again. Queries made on the program's
 * behalf (device_classify, device_current, device_context_id,
 * device_is_capturing, device_stream_query) are not counted.
 *
 * Streams are the program's cudaStream_t values, which are the driver's
 * CUstream values: 0 and 0x1 the legacy default stream, 0x2 the calling
 * thread's per-thread default stream. All work happens in the device's
 * primary context, the one the runtime uses.
 *
 * The layer's files: device.c (the driver table, contexts, memory, single
 * copies, events, syncs, capture mode), batch.c (batched copies, both
 * device-to-device and host-to-device, and the legacy-stream bridge),
 * table.c (the gather's launch shape and entry table, inline or in mapped
 * host memory), module.c (the gather kernel and its self-test), forget.c
 * (device_forget, device_atfork_child); what they share is in
 * device/device_impl.h, which nothing outside the layer reads.
 */
#ifndef VRAMPOOL_DEVICE_H
#define VRAMPOOL_DEVICE_H

#include <stdint.h>

typedef uint64_t dev_ptr;
typedef void *dev_stream;
typedef void *dev_event;

#define DEV_STREAM_LEGACY ((dev_stream)0x1)
#define DEV_STREAM_PER_THREAD ((dev_stream)0x2)

enum dev_mem {
	DEV_MEM_UNREGISTERED,  /* pageable host memory, or not a CUDA pointer */
	DEV_MEM_HOST,          /* page-locked host memory */
	DEV_MEM_DEVICE,        /* cudaMalloc'd device memory */
	DEV_MEM_MANAGED,       /* managed memory */
};

/*
 * Loads the driver (thread-safe). Returns 0 or -ENOSYS. Once started it
 * stays started (one atomic load a call). A library or symbol that cannot
 * be loaded is final. A start-up (cuInit) that fails is tried again by a
 * later call (issue 17, item C): the k-th retry no sooner than 2^(k-1) ms
 * after the failure before it, 12 tries in all (about 4 s), then given up
 * for the process; no device (CUDA_ERROR_NO_DEVICE) or a stub library
 * gives up at once. Until a retry is due a call costs a clock read.
 */
int device_open(void);

/*
 * Why the driver is not started, for the dump: 0 when it started, is
 * starting or was never tried; else 1 with *tries (the cuInit calls that
 * failed; 0: libcuda.so.1 or a symbol of it could not be loaded),
 * *given_up (1: it will not be tried again) and *err (the last cuInit's
 * CUresult). Lock-free; makes no CUDA call.
 */
int device_start_failed(int *tries, int *given_up, int *err);

/*
 * Whether the driver's library is loaded, started or not: a pointer query
 * (device_classify) can then be asked, and answers where the program's
 * own cuInit succeeded while the pool's start-up failed or waits for its
 * retry. Lock-free; makes no CUDA call.
 */
int device_can_query(void);

/*
 * Classifies p. Returns 0 with *kind, *ordinal (-1 for host) and, when end
 * is not NULL, the end of the allocation p lies in (0 when unknown), or -EIO.
 */
int device_classify(const void *p, enum dev_mem *kind, int *ordinal, uint64_t *end);

/* Returns 0 and the device of the calling thread's current context, or -ENODEV (none yet). */
int device_current(int *ordinal);

/*
 * As device_current, and whether that context is the device's primary
 * context, the one the pool works in (issue 18). Returns 0 when it is;
 * -ENODEV (no context yet) or -EXDEV (a context of the program's own,
 * cuCtxCreate; *ordinal is set) when it is not. Costs what device_current
 * does while the current context is the primary handle the layer has
 * retained; otherwise a state query, and (the primary being active) a
 * retain and release to learn its handle, kept when it is the first or
 * has changed (after a reset). Not counted.
 */
int device_current_primary(int *ordinal);

/*
 * Returns 0 and the unique id of the calling thread's current context
 * (cuCtxGetId, CUDA 12.0+), or -ENOSYS without it (*id is then 0). The id
 * changes when the program resets the device (cudaDeviceReset), which
 * frees every allocation, the pool's slabs included.
 */
int device_context_id(uint64_t *id);

/*
 * Returns 0 and the id of device dev's primary context, from any thread:
 * -ENODEV when it is inactive (reset, and not made again yet), -ENOSYS
 * without the queries, -EIO when one failed (the answer is unknown). Makes
 * no context. Not counted.
 */
int device_primary_id(int dev, uint64_t *id);

/*
 * Returns 0 and the graph stream s is being captured into, -ENOENT when
 * it is not capturing, -ENOSYS without the query (CUDA 12.3+), -EIO when
 * it failed. Not counted.
 */
int device_capture_graph(dev_stream s, void **graph);

/*
 * After a reset of device dev: forgets the handles made in its old context
 * (the legacy-stream bridge, the gather kernel's module and its verdict), so
 * that the next use makes them again in the new one. pool_get calls it when
 * the context id changes.
 */
void device_forget(int dev);

/* Returns 0 with *capturing set when stream s is being captured into a graph (or the query fails). */
int device_is_capturing(dev_stream s, int *capturing);

/* Allocates n bytes on device dev. Returns 0, -ENOMEM, or -EIO. */
int device_mem_alloc(int dev, uint64_t n, dev_ptr *out);

/* Frees p on device dev. */
int device_mem_free(int dev, dev_ptr p);

/*
 * Free and total memory of device dev. The first time it answers in a
 * process, it also reads the device's name (cuDeviceGetName, where the
 * driver has it) for device_probed_name.
 */
int device_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes);

#define DEVICE_NAME_MAX 256

/*
 * The name of the first device whose memory device_mem_info read (the
 * probe's), and its ordinal in *ordinal; NULL when none yet (no probe, or
 * the driver could not name it). No CUDA call, no lock: for the reports,
 * at exit too. A forked child forgets its parent's.
 */
const char *device_probed_name(int *ordinal);

/* Waits for all work in device dev's primary context. */
int device_sync(int dev);

/*
 * Enqueues count device-to-device copies (dsts[i] <- srcs[i], sizes[i]
 * bytes) on stream s of device dev, as one operation where the driver has
 * cuMemcpyBatchAsync (CUDA 12.8+). That call refuses the legacy stream, so
 * a batch for it goes through a private stream joined to it by two event
 * waits (one byte-moving operation and four event operations). While that
 * private stream cannot be made (a failed creation is retried after 4, 16,
 * 64, 256 calls, then given up for the context), a batch for the legacy
 * stream goes as count single copies on it. On failure, nothing the call
 * enqueued can still be running unordered after s: a plain copy enqueued
 * on s afterwards overwrites whatever it wrote. (shim/device/batch.c)
 */
int device_copy_dtod_many(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count,
			  dev_stream s);

/*
 * Enqueues count host-to-device copies (dsts[i] <- srcs[i], sizes[i]
 * bytes; srcs[i] a host address, which unified addressing makes its own
 * device address) on stream s as ONE cuMemcpyBatchAsync: one device
 * operation that moves bytes, stream-ordered as a whole, unordered inside.
 * pinned says how the program's own copy would read its source, and the
 * batch reads it the same way: a page-locked source when the copy runs,
 * in stream order (CU_MEMCPY_SRC_ACCESS_ORDER_STREAM); a pageable one
 * before the call returns (CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL), as
 * cudaMemcpyAsync stages it. The legacy stream, which the call refuses,
 * is reached through device_copy_dtod_many's bridge (the batch on a
 * private stream between two event waits: four event operations, still
 * one that moves bytes). Returns 0; -ENOTSUP with nothing enqueued (a
 * driver without the call, or no bridge now for the legacy stream); or
 * another negative errno (counted as a fault) when the call failed, in
 * which case the caller must send those bytes again. (shim/device/batch.c)
 */
int device_copy_h2d_many(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count, int pinned,
			 dev_stream s);

/* Returns 1 when the driver has the batched call device_copy_h2d_many needs (cuMemcpyBatchAsync). */
int device_h2d_batch_ready(void);

/*
 * Returns 1 when an operation enqueued on stream s of device dev now
 * would wait for nothing: every operation it would be ordered after is
 * done. Queries only (nothing is enqueued): s (cuStreamQuery, which for
 * the legacy stream answers for the blocking streams it waits for too),
 * and for a blocking stream (cuStreamGetFlags; the per-thread stream is
 * one) the legacy stream as well, whose answer covers the other blocking
 * streams too (so a busy one of them makes this 0: conservative, never
 * wrong). Returns 0 when work is queued ahead or a query fails. Not
 * counted.
 */
int device_stream_idle(int dev, dev_stream s);

/*
 * The gather kernel: hits and captures of one copy as one device operation.
 *
 * vrampool_gather is a small kernel shipped inside the library as PTX
 * (shim/device/gather.cu, built with the toolkit's nvcc -ptx at make time) and
 * loaded with cuModuleLoadData in the device's primary context. One launch
 * moves every entry of one copy, however many: an entry is nrows
 * consecutive rows of row bytes between a slab address and rows [dst_row,
 * dst_row + nrows) of the copy's destination, in one of two directions.
 * Sources, destinations and row sizes may have any alignment. Entries of
 * one launch never overlap in what they write, and no entry reads what
 * another writes (hits write destination rows and read settled slab rows;
 * captures read the other destination rows, already delivered by the
 * stream, and write fresh slab space), so they run in any order.
 *
 * The kernel's parameter is one struct dev_gather_params passed by value
 * (kernelParams[0] points to it; 16432 bytes, of which the header and the
 * table bytes in use are meaningful). It needs the large kernel
 * parameters of CUDA 12.1 (PTX ISA 8.1, sm_70 and up): the embedded PTX
 * declares .version 8.1 and .target sm_75, so a driver for CUDA 12.1 or
 * newer loads it on any Turing or newer GPU; an older driver refuses the
 * module and the pool uses batched copies.
 *
 * The table: the entries (16 bytes each), then, unless every entry is one
 * unit, one start per warp (8 bytes: the entry and the unit of it where
 * that warp begins). It lies inside the parameter (inline_table, table 0)
 * when it fits in DEV_GATHER_INLINE bytes, else in page-locked host memory
 * mapped into the device's address space (table: its device address),
 * which the kernel reads over the bus as it runs; nothing is uploaded, so
 * no byte of the table counts as host-to-device traffic. A mapped table
 * is written before the launch and reused only after an event recorded
 * behind the launch has completed.
 *
 * Launch shape (device/table.c): units of DEV_GATHER_UNIT bytes, each
 * entry cut into ceil(bytes / DEV_GATHER_UNIT) units (an empty one: 1);
 * per_warp = ceil(units / (multiprocessors x DEV_GATHER_WARPS_PER_SM)),
 * warps = ceil(units / per_warp), a 1-D grid of ceil(warps /
 * (DEV_GATHER_THREADS / 32)) blocks of DEV_GATHER_THREADS threads. A warp's
 * 32 lanes move one unit together, each with four words in flight. An
 * entry whose slab and destination addresses agree modulo 16, 8 or 4
 * moves in words of that size after a few head bytes; otherwise the
 * destination is aligned to 4 and each word is assembled from the two
 * source words it straddles.
 */
#define DEV_GATHER_CAPTURE 0x80000000u  /* nrows_dir bit: destination -> slab */
#define DEV_GATHER_UNIT 2048            /* bytes one warp moves at a time: 32 lanes x 4 x 16 */
#define DEV_GATHER_THREADS 256          /* threads per block */
#define DEV_GATHER_WARPS_PER_SM 32      /* warps the grid gives each multiprocessor at most */
#define DEV_GATHER_INLINE 16384         /* table bytes the parameter holds */

struct dev_gather_entry {
	dev_ptr slab;           /* the slab address of the first row */
	uint32_t dst_row;       /* the first destination row */
	uint32_t nrows_dir;     /* bits 0..30: rows; DEV_GATHER_CAPTURE: a capture, else a hit */
};

/* Where warp w begins: unit `unit` of entry `entry`. */
struct dev_gather_start {
	uint32_t entry;
	uint32_t unit;
};

struct dev_gather_params {
	dev_ptr dst;            /* 0: the copy's destination */
	uint64_t row;           /* 8: row bytes */
	dev_ptr table;          /* 16: the mapped table's device address, or 0: inline_table */
	uint64_t units;         /* 24: units of all entries */
	uint32_t count;         /* 32: entries, >= 1 */
	uint32_t per_warp;      /* 36: units per warp, >= 1 */
	uint32_t warps;         /* 40: warp starts in the table; 0: entry u is unit u */
	uint32_t pad;           /* 44 */
	unsigned char inline_table[DEV_GATHER_INLINE];  /* 48: the table, when table is 0 */
};

/* A launch's shape and table size (device_gather_shape). */
struct dev_gather_shape {
	uint64_t units;
	uint64_t per_warp;
	uint64_t warps;         /* warp starts the table carries (0 or the warps that work) */
	uint64_t blocks;        /* blocks of DEV_GATHER_THREADS */
	uint64_t table_bytes;   /* entries, then warp starts */
};

/*
 * Shapes a launch of n entries (n >= 1) of rows of row bytes for a device
 * of sms multiprocessors, as above. Returns 0, or -E2BIG when a field
 * would not fit in its parameter. Pure arithmetic (device/table.c).
 */
int device_gather_shape(struct dev_gather_shape *sh, const struct dev_gather_entry *e, uint32_t n,
			uint64_t row, uint32_t sms);

/* Writes the table of that launch (sh->table_bytes bytes: the entries, then the warp starts) at t. */
void device_gather_table(const struct dev_gather_shape *sh, const struct dev_gather_entry *e, uint32_t n,
			 uint64_t row, void *t);

/*
 * Returns 1 when device dev's gather kernel is loaded and has passed its
 * self-test, 0 when the pool must use batched copies instead. The first
 * call for a context loads the module (cuModuleLoadData of the embedded
 * PTX in dev's primary context) and runs the kernel on a known pattern of
 * odd alignments and row sizes, hits and captures, one launch with its
 * table inline and one with it mapped: 64 KiB of device memory of its own
 * filled with memsets (no host-to-device byte), on a private non-blocking
 * stream (it waits for none of the program's work), read back with
 * cuMemcpyDtoHAsync and compared with what the host computes, then freed.
 * It runs in relaxed capture mode. When no mapped table can be had, the
 * kernel is used with inline tables only (larger gathers answer -EAGAIN).
 *
 * A module that cannot load, a missing kernel or a byte that differs makes
 * the answer 0 for the rest of that context. A failure that may pass (an
 * allocation, memset, launch, readback or synchronisation of the self-test
 * that fails, a load out of memory) is retried: after the k-th one the
 * next 4^k calls answer 0 without trying, and after 5 the kernel is given
 * up for the context. Each outcome is one VRAMPOOL_VERBOSE line (why, and
 * that hits and captures use batched copies instead) and sets stats'
 * "gather" field ("kernel" or "batched copy"; one field for the process,
 * the last device decided wins).
 *
 * Context: the verdict belongs to the primary context it was reached in
 * (its cuCtxGetId id is recorded); device_forget drops it, and a launch
 * that fails in a context with a new id drops it too, so after a reset the
 * next call loads and tests again. Thread-safe: 1 is one atomic load; while
 * one thread loads and tests, the others get 0 at once (never blocked).
 * Self-test device work counts in pool.device_ops, not in
 * pool.gather_launches.
 */
int device_gather_ready(int dev);

/*
 * Enqueues the n entries (n >= 1) as ONE kernel launch on stream s of
 * device dev, any stream: a created one, the legacy stream (NULL or
 * DEV_STREAM_LEGACY) or the calling thread's per-thread stream
 * (DEV_STREAM_PER_THREAD). The launch counts one in pool.device_ops and
 * pool.gather_launches (the event behind a mapped table one more in
 * pool.device_ops). e is copied; the caller keeps it. Returns 0; or, with
 * nothing enqueued (batched copies can still serve this copy), -ENOSYS
 * (the kernel is not ready), -EXDEV (the calling thread's current context
 * is not dev's primary context), -EAGAIN (no host memory for the
 * parameter block, or no mapped table for a table too large to go
 * inline) or -E2BIG (a shape that does not fit the parameter); or any
 * other negative errno (-EIO, -ENOMEM) when the launch failed: the
 * caller must treat the whole copy as failed (and a plain copy enqueued
 * on s afterwards overwrites whatever it wrote).
 */
int device_gather(int dev, dev_ptr dst, uint64_t row, const struct dev_gather_entry *e, uint32_t n,
		  dev_stream s);

/*
 * Waits on the host for everything enqueued on stream s so far through an
 * event (cuEventRecord, cuEventSynchronize): another way to wait when
 * cuStreamSynchronize fails. Returns 0 or a negative errno (counted).
 */
int device_stream_wait_host(dev_stream s);

/* Waits for all work on stream s (the driver's cuStreamSynchronize). Returns 0 or -EIO (counted as a fault). */
int device_stream_sync(dev_stream s);

/* Creates an event without timing in the current context. */
int device_event_new(dev_event *ev);
int device_event_record(dev_event ev, dev_stream s);
/*
 * The same for a meter's timing event (the pool's link and serve meters,
 * pool/link.h): not counted in the pool's device operations, which are
 * the work it issues for the rows (copies, launches, and the events and
 * waits that order them); a measurement orders nothing.
 */
int device_event_record_meter(dev_event ev, dev_stream s);
/* Returns 0 when the event's work is done, -EBUSY when not yet, -EIO on error. */
int device_event_query(dev_event ev);
void device_event_free(dev_event ev);

/*
 * Timed events, for the cost ledger's link meter (issue 16, pool/link.h).
 * device_event_new_timed creates an event that keeps when the stream
 * reached it (-ENOSYS when the driver cannot tell elapsed times).
 * device_event_elapsed_ns never waits: it returns -EBUSY while b has not
 * completed, else 0 and the nanoseconds between a's and b's completion
 * (cuEventQuery, then cuEventElapsedTime), or -EIO (counted).
 */
int device_event_new_timed(dev_event *ev);
int device_event_elapsed_ns(dev_event a, dev_event b, uint64_t *ns);

/* Makes stream s wait for ev's most recent record. */
int device_stream_wait(dev_stream s, dev_event ev);

/* Returns 0 when all work on stream s is done, -EBUSY when not yet, -EIO on error. */
int device_stream_query(dev_stream s);

/*
 * Enqueues fn(arg) on stream s, run by the driver on a thread of its own
 * once everything before it on s is done. fn must not call CUDA.
 */
int device_host_func(dev_stream s, void (*fn)(void *arg), void *arg);

/*
 * Makes the calling thread's stream-capture mode relaxed and returns the
 * previous one (or -1 when the driver has no such call). While another
 * stream is captured in global mode, event queries and synchronisation are
 * "potentially unsafe" calls that would invalidate that capture; in relaxed
 * mode the pool's own work does not. device_capture_restore puts it back.
 */
int device_capture_relax(void);
void device_capture_restore(int mode);

/*
 * In a forked child: the parent's contexts are unusable here; forget them.
 * The layer's locks are made anew (a thread of the parent may have held
 * one at the fork), and a driver load another thread had under way starts
 * again on the next device_open.
 */
void device_atfork_child(void);

/*
 * Test hook (issue 17, item F): takes (hold 1) or releases (hold 0) on the
 * calling thread the lock under which contexts are retained, as a thread
 * inside device_ctx_enter holds it, so that a test can fork meanwhile.
 */
void device_ctx_lock_for_tests(int hold);

#endif
