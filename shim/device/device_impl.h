/*
 * device/device_impl.h: internal to the device layer, shared by its files
 * and included by nothing else (pool/ and above use device/device.h).
 *
 *   device.c  loads the driver table, contexts, memory, single copies,
 *             events, syncs, stream queries, capture mode.
 *   batch.c   batched copies (device-to-device, host-to-device) and the
 *             legacy-stream bridge.
 *   table.c   the gather's launch shape and entry table; the mapped
 *             tables of each device.
 *   module.c  the gather kernel: PTX load, launch, self-test, readiness.
 *   forget.c  what is forgotten after a device reset and in a fork child.
 *
 * Calls run one way: forget.c -> module.c -> table.c -> device.c -> core/,
 * and forget.c -> batch.c -> device.c. batch.c, table.c and module.c use
 * the driver table, the error conversion and the contexts of device.c;
 * device.c knows nothing of batches or the kernel.
 *
 * Invariants: drv is filled once by device_open (which every entry point
 * of the layer has succeeded in before it reads drv) and read-only after;
 * the optional entries may be NULL. Only the device layer calls through
 * it: the shim's own driver work goes nowhere else. Everything here is
 * hidden in the library (not exported).
 *
 * Locks, all leaves towards the layers above (the device layer calls
 * nothing above it, so it never waits for a pool lock while holding one
 * of its own):
 *   device_ctx_lock (device.c)  held only around retaining a primary
 *                               context, innermost of all.
 *   a bridge's lock (batch.c)   held across one batch on the legacy
 *                               stream; takes no other lock of the layer.
 *   a device's tables lock      held while a mapped table is chosen (an
 *   (table.c)                   event query, a growth: cuMemHostAlloc)
 *                               and given back; takes no other lock.
 *   a kernel's lock (module.c)  held while loading and testing the kernel
 *                               (then device_ctx_enter takes
 *                               device_ctx_lock inside it, and the
 *                               self-test a tables lock), by the recheck
 *                               after a failed launch and by
 *                               device_kernel_forget. The copy path only
 *                               ever trylocks it (device_gather_ready).
 * device_forget takes a bridge's lock, lets it go, then a kernel's, then
 * a tables lock: never two at once.
 */
#ifndef VRAMPOOL_DEVICE_IMPL_H
#define VRAMPOOL_DEVICE_IMPL_H

#include <cuda.h>
#include <errno.h>
#include <stdint.h>

#include "core/stats.h"
#include "device/device.h"

#define DEVICE_MAX 64

/* The driver's entry points, taken with dlsym from dlopen("libcuda.so.1"). */
struct device_driver {
	__typeof__(cuInit) *init;
	__typeof__(cuPointerGetAttributes) *pointer_get_attributes;
	__typeof__(cuCtxGetCurrent) *ctx_get_current;
	__typeof__(cuCtxSetCurrent) *ctx_set_current;
	__typeof__(cuCtxGetDevice) *ctx_get_device;
	__typeof__(cuCtxSynchronize) *ctx_synchronize;
	__typeof__(cuDevicePrimaryCtxRetain) *primary_ctx_retain;
	__typeof__(cuStreamIsCapturing) *stream_is_capturing;
	__typeof__(cuStreamGetCaptureInfo) *capture_info;       /* device_capture_graph; may be NULL */
	__typeof__(cuMemAlloc_v2) *mem_alloc;
	__typeof__(cuMemFree_v2) *mem_free;
	__typeof__(cuMemGetInfo_v2) *mem_get_info;
	__typeof__(cuMemcpyDtoDAsync_v2) *memcpy_dtod_async;
	__typeof__(cuEventCreate) *event_create;
	__typeof__(cuEventRecord) *event_record;
	__typeof__(cuEventQuery) *event_query;
	__typeof__(cuEventDestroy_v2) *event_destroy;
	__typeof__(cuEventSynchronize) *event_synchronize;
	__typeof__(cuStreamWaitEvent) *stream_wait_event;
	__typeof__(cuStreamSynchronize) *stream_synchronize;
	__typeof__(cuStreamCreate) *stream_create;
	__typeof__(cuStreamDestroy_v2) *stream_destroy;
	__typeof__(cuStreamQuery) *stream_query;
	__typeof__(cuLaunchHostFunc) *launch_host_func;
	__typeof__(cuMemcpyBatchAsync_v2) *memcpy_batch_async;   /* CUDA 12.8+, may be NULL */
	__typeof__(cuThreadExchangeStreamCaptureMode) *exchange_capture_mode;   /* may be NULL */
	/* Issue 17, item A: entering a context whose caller's cannot be read (may be NULL). */
	__typeof__(cuCtxPushCurrent) *ctx_push;
	__typeof__(cuCtxPopCurrent) *ctx_pop;
	__typeof__(cuCtxGetId) *ctx_get_id;     /* CUDA 12.0+, may be NULL */
	/* device_current_primary (issue 18); may be NULL. */
	__typeof__(cuDevicePrimaryCtxGetState) *primary_ctx_get_state;
	__typeof__(cuDevicePrimaryCtxRelease) *primary_ctx_release;
	/* The gather kernel and its self-test; without any of them the kernel is off. */
	__typeof__(cuModuleLoadData) *module_load_data;
	__typeof__(cuModuleGetFunction) *module_get_function;
	__typeof__(cuModuleUnload) *module_unload;
	__typeof__(cuLaunchKernel) *launch_kernel;
	__typeof__(cuMemsetD32Async) *memset_d32_async;
	__typeof__(cuMemsetD2D8Async) *memset_d2d8_async;
	__typeof__(cuMemcpyDtoHAsync_v2) *memcpy_dtoh_async;
	__typeof__(cuGetErrorName) *get_error_name;     /* may be NULL */
	__typeof__(cuDeviceGetAttribute) *device_get_attribute;        /* may be NULL: the grid assumes 1 SM */
	__typeof__(cuStreamGetFlags) *stream_get_flags;        /* may be NULL: streams count as blocking */
	/* Mapped entry tables of the gather kernel; without them tables go inline only. */
	__typeof__(cuMemHostAlloc) *mem_host_alloc;
	__typeof__(cuMemFreeHost) *mem_free_host;
	__typeof__(cuMemHostGetDevicePointer_v2) *mem_host_get_device_pointer;
	__typeof__(cuEventElapsedTime) *event_elapsed;  /* the ledger's link meter (issue 16); may be NULL */
	__typeof__(cuDeviceGetName) *device_get_name;   /* the dump's "device" (issue 19); may be NULL */
};

extern struct device_driver drv __attribute__((visibility("hidden")));

/*
 * Back-off for set-up that failed for a passing reason: after the k-th
 * failed attempt the next 4^k calls pass without trying (4, 16, 64, 256);
 * after DEVICE_RETRY_MAX failed attempts the set-up is given up for the
 * context. Counted in calls, not time, so that a busy program retries
 * soon and a test can drive it without sleeping. Used under a lock.
 */
#define DEVICE_RETRY_MAX 5

struct device_retry {
	unsigned fails;         /* failed attempts so far */
	uint64_t skip;          /* calls to let pass before the next attempt */
};

/* Returns 1 when an attempt may be made now; otherwise counts one skipped call. */
static inline int device_retry_due(struct device_retry *r)
{
	if (r->fails >= DEVICE_RETRY_MAX)
		return 0;
	if (r->skip) {
		r->skip--;
		return 0;
	}
	return 1;
}

/* Records a failed attempt; returns 1 when it was the last one allowed. */
static inline int device_retry_failed(struct device_retry *r)
{
	r->fails++;
	r->skip = (uint64_t)1 << (2 * r->fails);
	return r->fails >= DEVICE_RETRY_MAX;
}

/* 0, or the negative errno for r: -ENOMEM, -EBUSY (not ready), -EIO. */
static inline int device_err(CUresult r)
{
	switch (r) {
	case CUDA_SUCCESS:
		return 0;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case CUDA_ERROR_NOT_READY:
		return -EBUSY;
	default:
		return -EIO;
	}
}

/*
 * device_err for a driver call of the pool's own work: a failure (out of
 * memory included, "not ready" excluded) is counted in pool.faults. The
 * caller handles it; the count says how often it had to.
 */
static inline int device_own(CUresult r)
{
	int err = device_err(r);

	if (err && err != -EBUSY)
		stats_add(ST_POOL_FAULTS, 1);
	return err;
}

/* The driver's name for r, for log lines ("an unknown error" without one). */
const char *device_err_name(CUresult r);

/*
 * Makes device dev's primary context current on this thread (retaining it
 * on first use, under device_ctx_lock) and returns the previous one in
 * *prev; when that cannot be read (cuCtxGetCurrent fails), dev's context
 * is pushed (cuCtxPushCurrent) and *prev is DEVICE_CTX_PUSHED, so that
 * leaving pops it. Returns 0, -EINVAL, -EIO or the retain's error (counted).
 * device_ctx_leave puts *prev back; call it only after a 0.
 */
int device_ctx_enter(int dev, CUcontext *prev);
/* *prev when the caller's context could not be read: dev's was pushed, and leaving pops it. */
#define DEVICE_CTX_PUSHED ((CUcontext)(uintptr_t)-1)
void device_ctx_leave(int dev, CUcontext prev);

/* Device dev's retained primary context, or NULL before the first device_ctx_enter or device_current_primary. */
CUcontext device_ctx_primary(int dev);

/* device.c, in a fork child: forgets every retained context. */
void device_ctx_atfork_child(void);

/* batch.c: drops device dev's legacy-stream bridge (its stream and events died with the context). */
void device_bridge_forget(int dev);
/* batch.c, in a fork child: forgets every bridge. */
void device_bridge_atfork_child(void);

/*
 * table.c: the mapped entry tables. device_table_take returns a table of
 * at least bytes for device dev (whose primary context is current), with
 * its host and device addresses, marked busy, or NULL when none can be had
 * now (all in flight, no mapping, out of memory). device_table_give hands
 * it back once the launch that reads it was enqueued on s (launched: an
 * event recorded behind the launch guards the next write; without it the
 * stream is waited for) or was not (launched 0).
 */
struct device_table;
struct device_table *device_table_take(int dev, uint64_t bytes, void **host, dev_ptr *dptr);
void device_table_give(int dev, struct device_table *t, CUstream s, int launched);
/* table.c: forgets device dev's mapped tables (they died with the context). */
void device_table_forget(int dev);
void device_table_atfork_child(void);

/* module.c: drops device dev's gather kernel and its verdict (its module died with the context). */
void device_kernel_forget(int dev);
/* module.c, in a fork child: forgets every gather kernel. */
void device_kernel_atfork_child(void);

#endif
