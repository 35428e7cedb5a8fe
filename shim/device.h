/*
 * device: the CUDA driver API, for the pool's own device work.
 *
 * The driver is reached with dlopen("libcuda.so.1") and dlsym of the
 * versioned names, never through symbols the program could interpose, and
 * never through the runtime (whose calls set the program's last error).
 * Every function returns 0 or a negative errno; CUresult stays inside
 * device.c (STYLE.md 4). -ENOMEM means the device is out of memory,
 * -EBUSY "not yet" (event query), -EIO any other driver failure.
 *
 * Streams are the program's cudaStream_t values, which are the driver's
 * CUstream values: 0 and 0x1 the legacy default stream, 0x2 the calling
 * thread's per-thread default stream. All work happens in the device's
 * primary context, the one the runtime uses.
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

/* Loads the driver once (thread-safe). Returns 0 or -ENOSYS. */
int device_open(void);

/*
 * Classifies p. Returns 0 with *kind, *ordinal (-1 for host) and, when end
 * is not NULL, the end of the allocation p lies in (0 when unknown), or -EIO.
 */
int device_classify(const void *p, enum dev_mem *kind, int *ordinal, uint64_t *end);

/* Returns 0 and the device of the calling thread's current context, or -ENODEV (none yet). */
int device_current(int *ordinal);

/*
 * Returns 0 and the unique id of the calling thread's current context
 * (cuCtxGetId, CUDA 12.0+), or -ENOSYS without it (*id is then 0). The id
 * changes when the program resets the device (cudaDeviceReset), which
 * frees every allocation, the pool's slabs included.
 */
int device_context_id(uint64_t *id);

/* After a reset of device dev: forgets the handles made in its old context. */
void device_forget(int dev);

/* Returns 0 with *capturing set when stream s is being captured into a graph (or the query fails). */
int device_is_capturing(dev_stream s, int *capturing);

/* Allocates n bytes on device dev. Returns 0, -ENOMEM, or -EIO. */
int device_mem_alloc(int dev, uint64_t n, dev_ptr *out);

/* Frees p on device dev. */
int device_mem_free(int dev, dev_ptr p);

/* Free and total memory of device dev. */
int device_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes);

/* Waits for all work in device dev's primary context. */
int device_sync(int dev);

/*
 * Enqueues count device-to-device copies (dsts[i] <- srcs[i], sizes[i]
 * bytes) on stream s of device dev, as one operation where the driver has
 * cuMemcpyBatchAsync (CUDA 12.8+). That call refuses the legacy stream, so
 * a batch for it goes through a private stream joined to it by two event
 * waits (five operations instead of count). On failure, nothing the call
 * enqueued can still be running unordered after s: a plain copy enqueued
 * on s afterwards overwrites whatever it wrote.
 */
int device_copy_dtod_many(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count,
			  dev_stream s);

/*
 * The gather kernel: hits and captures of one copy as one device operation.
 *
 * vrampool_gather is a small kernel shipped inside the library as PTX
 * (shim/gather.cu, built with the toolkit's nvcc -ptx at make time) and
 * loaded with cuModuleLoadData in the device's primary context. One launch
 * moves every entry of one copy: an entry is nrows consecutive rows of row
 * bytes between a slab address and rows [dst_row, dst_row + nrows) of the
 * copy's destination, in one of two directions. Sources, destinations and
 * row sizes may have any alignment. Entries of one launch never overlap in
 * what they write, and no entry reads what another writes (hits write
 * destination rows and read settled slab rows; captures read the other
 * destination rows, already delivered by the stream, and write fresh slab
 * space), so they run in any order.
 *
 * The kernel's parameter is one struct dev_gather_params passed by value
 * (kernelParams[0] points to it), only its first
 * offsetof(entries) + count * sizeof(entry) bytes meaningful.
 */
#define DEV_GATHER_CAPTURE 0x80000000u  /* nrows_dir bit: destination -> slab */
#define DEV_GATHER_MAX 1024             /* entries per launch */

struct dev_gather_entry {
	dev_ptr slab;           /* the slab address of the first row */
	uint32_t dst_row;       /* the first destination row */
	uint32_t nrows_dir;     /* bits 0..30: rows; DEV_GATHER_CAPTURE: a capture, else a hit */
};

struct dev_gather_params {
	dev_ptr dst;            /* the copy's destination */
	uint64_t row;           /* row bytes */
	uint32_t count;         /* entries used, 1..DEV_GATHER_MAX */
	uint32_t pad;
	struct dev_gather_entry entries[DEV_GATHER_MAX];
};

/*
 * Returns 1 when device dev's gather kernel is loaded and has passed its
 * self-test, 0 when the pool must use batched copies instead. The first
 * call for a context loads the module and runs the kernel once on a known
 * pattern of odd alignments (device memory of its own, filled with
 * memsets, read back and compared); a module that cannot load or a result
 * that differs makes the answer 0 for that context, said once under
 * VRAMPOOL_VERBOSE, and stats' "gather" field says which path is used.
 * A transient failure (allocation, launch) is retried a limited number of
 * times on later calls. Thread-safe.
 */
int device_gather_ready(int dev);

/*
 * Enqueues the n entries (n >= 1) as kernel launches on stream s of device
 * dev (one launch per DEV_GATHER_MAX entries), the legacy stream included.
 * Returns 0, or a negative errno when a launch failed: launches before it
 * may have run, so the caller must treat the whole copy as failed (and a
 * plain copy enqueued on s afterwards overwrites whatever they wrote).
 */
int device_gather(int dev, dev_ptr dst, uint64_t row, const struct dev_gather_entry *e, uint32_t n,
		  dev_stream s);

/* Waits for all work on stream s (the driver's cuStreamSynchronize). */
int device_stream_sync(dev_stream s);

/* Creates an event without timing in the current context. */
int device_event_new(dev_event *ev);
int device_event_record(dev_event ev, dev_stream s);
/* Returns 0 when the event's work is done, -EBUSY when not yet, -EIO on error. */
int device_event_query(dev_event ev);
void device_event_free(dev_event ev);

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

/* In a forked child: the parent's contexts are unusable here; forget them. */
void device_atfork_child(void);

#endif
