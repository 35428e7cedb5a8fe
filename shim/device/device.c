/*
 * device: the driver API calls the pool makes for its own work, through
 * function pointers taken with dlsym from dlopen("libcuda.so.1").
 *
 * Each call converts CUresult to 0 or a negative errno, counts itself in
 * pool.device_ops when it puts work on a stream, and counts a failed driver
 * call of the pool's own work in pool.faults (device_own). Primary contexts
 * are retained once per device and made current only around allocations,
 * frees and the gather kernel's set-up done on behalf of a device that is
 * not the caller's current one.
 *
 * Set-up work that can fail for a passing reason (the bridge stream of the
 * legacy stream in batch.c, the gather kernel's self-test in module.c) is
 * retried on later calls with a back-off counted in calls (struct
 * device_retry), never cached as failed for the rest of the context.
 *
 * This file knows nothing of batches or the gather kernel (batch.c,
 * table.c, module.c), nor of streams and events (stream.c), which stand
 * on it: the driver table, the error
 * conversion and the contexts are shared with them through
 * device/device_impl.h.
 */
#include "device/device.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include "core/clock.h"
#include "core/dlreal.h"
#include "core/log.h"
#include "core/stats.h"
#include "device/device_impl.h"

#define DEVICE_LOAD_WAIT_MS 2000   /* how long a caller waits for another thread loading the driver */

struct device_driver drv;

/* 0 not tried, 1 loading, 2 loaded, 3 start-up failed (tried again later), -1 failed for good */
static _Atomic int device_state;
static int device_loaded;   /* 1 ok, -1 failed */

/*
 * The driver's start-up (cuInit) that failed (issue 17, item C): tried
 * again on a later call, at most DEVICE_START_TRIES times in all, the
 * k-th retry no sooner than DEVICE_START_FIRST_MS << (k - 1) ms after the
 * failure before it. Written by the one thread that holds state 1.
 */
#define DEVICE_START_TRIES 12      /* cuInit calls at most: about 4 s of retries */
#define DEVICE_START_FIRST_MS 1    /* the first retry's delay, doubled each time */
static _Atomic int device_start_fails;          /* cuInit calls that failed */
static _Atomic uint64_t device_start_next_ns;   /* state 3: no retry before this (clock_now_ns) */
static _Atomic int device_start_err;            /* the last failure's CUresult */
static pthread_mutex_t device_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext device_ctx[DEVICE_MAX];

/* Takes one driver symbol; returns 0 or -ENOSYS. */
static int device_sym(void *handle, void **slot, const char *name)
{
	*slot = dlreal_sym(handle, name);
	if (!*slot) {
		log_verbose("driver has no %s; the pool stays off", name);
		return -ENOSYS;
	}
	return 0;
}

static void device_load(void)
{
	void *h;
	int err = 0;

	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		log_verbose("cannot load libcuda.so.1 (%s); the pool stays off", dlerror());
		device_loaded = -1;
		return;
	}
	err |= device_sym(h, (void **)&drv.init, "cuInit");
	err |= device_sym(h, (void **)&drv.pointer_get_attributes, "cuPointerGetAttributes");
	err |= device_sym(h, (void **)&drv.ctx_get_current, "cuCtxGetCurrent");
	err |= device_sym(h, (void **)&drv.ctx_set_current, "cuCtxSetCurrent");
	err |= device_sym(h, (void **)&drv.ctx_get_device, "cuCtxGetDevice");
	err |= device_sym(h, (void **)&drv.ctx_synchronize, "cuCtxSynchronize");
	err |= device_sym(h, (void **)&drv.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
	err |= device_sym(h, (void **)&drv.stream_is_capturing, "cuStreamIsCapturing");
	err |= device_sym(h, (void **)&drv.mem_alloc, "cuMemAlloc_v2");
	err |= device_sym(h, (void **)&drv.mem_free, "cuMemFree_v2");
	err |= device_sym(h, (void **)&drv.mem_get_info, "cuMemGetInfo_v2");
	err |= device_sym(h, (void **)&drv.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
	err |= device_sym(h, (void **)&drv.event_create, "cuEventCreate");
	err |= device_sym(h, (void **)&drv.event_record, "cuEventRecord");
	err |= device_sym(h, (void **)&drv.event_query, "cuEventQuery");
	err |= device_sym(h, (void **)&drv.event_destroy, "cuEventDestroy_v2");
	err |= device_sym(h, (void **)&drv.stream_wait_event, "cuStreamWaitEvent");
	err |= device_sym(h, (void **)&drv.stream_synchronize, "cuStreamSynchronize");
	err |= device_sym(h, (void **)&drv.event_synchronize, "cuEventSynchronize");
	err |= device_sym(h, (void **)&drv.stream_create, "cuStreamCreate");
	err |= device_sym(h, (void **)&drv.stream_destroy, "cuStreamDestroy_v2");
	err |= device_sym(h, (void **)&drv.stream_query, "cuStreamQuery");
	err |= device_sym(h, (void **)&drv.launch_host_func, "cuLaunchHostFunc");
	/* Optional: without it every run of rows is its own copy. */
	*(void **)&drv.memcpy_batch_async = dlreal_sym(h, "cuMemcpyBatchAsync_v2");
	*(void **)&drv.exchange_capture_mode = dlreal_sym(h, "cuThreadExchangeStreamCaptureMode");
	*(void **)&drv.capture_info = dlreal_sym(h, "cuStreamGetCaptureInfo_v3");
	*(void **)&drv.ctx_push = dlreal_sym(h, "cuCtxPushCurrent_v2");
	*(void **)&drv.ctx_pop = dlreal_sym(h, "cuCtxPopCurrent_v2");
	*(void **)&drv.ctx_get_id = dlreal_sym(h, "cuCtxGetId");
	/* device_current_primary (issue 18): without them a context not yet known is not taken for the primary. */
	*(void **)&drv.primary_ctx_get_state = dlreal_sym(h, "cuDevicePrimaryCtxGetState");
	*(void **)&drv.primary_ctx_release = dlreal_sym(h, "cuDevicePrimaryCtxRelease_v2");
	*(void **)&drv.module_load_data = dlreal_sym(h, "cuModuleLoadData");
	*(void **)&drv.module_get_function = dlreal_sym(h, "cuModuleGetFunction");
	*(void **)&drv.module_unload = dlreal_sym(h, "cuModuleUnload");
	*(void **)&drv.launch_kernel = dlreal_sym(h, "cuLaunchKernel");
	*(void **)&drv.memset_d32_async = dlreal_sym(h, "cuMemsetD32Async");
	*(void **)&drv.memset_d2d8_async = dlreal_sym(h, "cuMemsetD2D8Async");
	*(void **)&drv.memcpy_dtoh_async = dlreal_sym(h, "cuMemcpyDtoHAsync_v2");
	*(void **)&drv.get_error_name = dlreal_sym(h, "cuGetErrorName");
	*(void **)&drv.device_get_attribute = dlreal_sym(h, "cuDeviceGetAttribute");
	*(void **)&drv.stream_get_flags = dlreal_sym(h, "cuStreamGetFlags");
	*(void **)&drv.mem_host_alloc = dlreal_sym(h, "cuMemHostAlloc");
	*(void **)&drv.mem_free_host = dlreal_sym(h, "cuMemFreeHost");
	*(void **)&drv.mem_host_get_device_pointer = dlreal_sym(h, "cuMemHostGetDevicePointer_v2");
	/* The cost ledger's link meter (issue 16): without it the link is not measured. */
	*(void **)&drv.event_elapsed = dlreal_sym(h, "cuEventElapsedTime_v2");
	if (!drv.event_elapsed)
		*(void **)&drv.event_elapsed = dlreal_sym(h, "cuEventElapsedTime");
	*(void **)&drv.device_get_name = dlreal_sym(h, "cuDeviceGetName");
	device_loaded = err ? -1 : 1;
}

/* A start-up failure no retry can mend: no device, or not a real driver. */
static int device_start_final(CUresult r)
{
	return r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY;
}

/*
 * Under state 1: loads the library once, then starts the driver. Returns
 * the next state: 2 started, 3 tried again later, -1 given up.
 */
static int device_start(void)
{
	CUresult r;
	uint64_t ms;
	int fails = atomic_load_explicit(&device_start_fails, memory_order_relaxed);

	if (!device_loaded)
		device_load();
	if (device_loaded != 1)
		return -1;
	r = drv.init(0);
	if (r == CUDA_SUCCESS) {
		if (fails)
			log_verbose("the driver started at try %d", fails + 1);
		return 2;
	}
	atomic_store_explicit(&device_start_err, (int)r, memory_order_relaxed);
	atomic_store_explicit(&device_start_fails, ++fails, memory_order_relaxed);
	if (fails >= DEVICE_START_TRIES || device_start_final(r)) {
		log_verbose("cuInit failed (%s, %d tries); the pool stays off", device_err_name(r), fails);
		return -1;
	}
	ms = (uint64_t)DEVICE_START_FIRST_MS << (fails - 1);
	atomic_store_explicit(&device_start_next_ns, clock_now_ns() + ms * 1000000u, memory_order_relaxed);
	log_verbose("cuInit failed (%s); tried again in %llu ms", device_err_name(r), (unsigned long long)ms);
	return 3;
}

/*
 * The first caller loads the driver; a caller that finds another thread
 * loading it waits at most DEVICE_LOAD_WAIT_MS, then gets -EAGAIN and the
 * shim passes its call through (see below). A start-up that failed is
 * tried again by the first caller past its back-off; until then a call
 * costs a clock read.
 */
int device_open(void)
{
	int st = atomic_load_explicit(&device_state, memory_order_acquire);

	if (st == 2)
		return 0;
	if (st < 0)
		return -ENOSYS;
	if (st == 3 && clock_now_ns() < atomic_load_explicit(&device_start_next_ns, memory_order_relaxed))
		return -ENOSYS;
	if ((st == 0 || st == 3) && atomic_compare_exchange_strong(&device_state, &st, 1)) {
		st = device_start();
		atomic_store_explicit(&device_state, st, memory_order_release);
		return st == 2 ? 0 : -ENOSYS;
	}
	if (st == 3)
		return -ENOSYS;         /* another thread took this retry */
	/*
	 * Another thread is loading it: wait for it, but boundedly. It may be
	 * blocked on the dynamic linker's lock held by this thread (a library
	 * constructor that calls CUDA); then, after DEVICE_LOAD_WAIT_MS, this
	 * call passes through instead of deadlocking.
	 */
	for (int i = 0; i < DEVICE_LOAD_WAIT_MS * 10; i++) {
		struct timespec ts = { 0, 100000 };

		st = atomic_load_explicit(&device_state, memory_order_acquire);
		if (st == 2)
			return 0;
		if (st < 0 || st == 3)
			return -ENOSYS;
		nanosleep(&ts, NULL);
	}
	return -EAGAIN;
}

int device_start_failed(int *tries, int *given_up, int *err)
{
	int st = atomic_load_explicit(&device_state, memory_order_acquire);

	if (st != 3 && st != -1)
		return 0;
	*tries = atomic_load_explicit(&device_start_fails, memory_order_relaxed);
	*given_up = st == -1;
	*err = atomic_load_explicit(&device_start_err, memory_order_relaxed);
	return 1;
}

int device_can_query(void)
{
	int st = atomic_load_explicit(&device_state, memory_order_acquire);

	/* device_loaded is written under state 1, before the release of any later state. */
	return (st == 2 || st == 3 || st == -1) && device_loaded == 1;
}

/* The driver's name for r, for log lines. */
const char *device_err_name(CUresult r)
{
	const char *name = NULL;

	if (drv.get_error_name && drv.get_error_name(r, &name) == CUDA_SUCCESS && name)
		return name;
	return "an unknown error";
}

int device_classify(const void *p, enum dev_mem *kind, int *ordinal, uint64_t *end)
{
	CUpointer_attribute attrs[5] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
	};
	unsigned int type = 0;
	unsigned int managed = 0;
	int dev = -1;
	CUdeviceptr start = 0;
	size_t size = 0;
	void *data[5] = { &type, &managed, &dev, &start, &size };

	if (drv.pointer_get_attributes(5, attrs, data, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
		return -EIO;
	*ordinal = dev;
	if (end)
		*end = start && size ? (uint64_t)start + size : 0;
	if (managed)
		*kind = DEV_MEM_MANAGED;
	else if (type == CU_MEMORYTYPE_DEVICE)
		*kind = DEV_MEM_DEVICE;
	else if (type == CU_MEMORYTYPE_HOST)
		*kind = DEV_MEM_HOST;
	else
		*kind = DEV_MEM_UNREGISTERED;
	return 0;
}

/* The calling thread's current context and its device, or -ENODEV. */
static int device_current_ctx(CUcontext *ctx, int *ordinal)
{
	CUdevice d;

	*ctx = NULL;
	if (drv.ctx_get_current(ctx) != CUDA_SUCCESS || !*ctx)
		return -ENODEV;
	if (drv.ctx_get_device(&d) != CUDA_SUCCESS)
		return -ENODEV;
	*ordinal = (int)d;
	return 0;
}

int device_current(int *ordinal)
{
	CUcontext ctx;

	return device_current_ctx(&ctx, ordinal);
}

/*
 * Whether ctx, current on the calling thread and not the handle cached for
 * dev, is dev's primary context: there is none cached yet, or a reset gave
 * the primary context a new handle, or ctx is a context of the program's
 * own. An inactive primary context is not ctx (and is left inactive: the
 * shim makes no primary context for a program that uses only its own).
 * Else the primary context is retained: the first retain is the one the
 * pool keeps; a later one is released at once and, when its handle
 * differs, replaces the cached one (the old died with the reset). Queries
 * on the program's behalf: not counted.
 */
static int device_primary_check(int dev, CUcontext ctx)
{
	CUcontext prim = NULL;
	unsigned int flags = 0;
	int active = 0;

	if (!drv.primary_ctx_get_state || !drv.primary_ctx_release ||
	    drv.primary_ctx_get_state((CUdevice)dev, &flags, &active) != CUDA_SUCCESS || !active)
		return -EXDEV;
	pthread_mutex_lock(&device_ctx_lock);
	if (drv.primary_ctx_retain(&prim, (CUdevice)dev) != CUDA_SUCCESS) {
		prim = NULL;
	} else if (!device_ctx[dev]) {
		__atomic_store_n(&device_ctx[dev], prim, __ATOMIC_RELEASE);
	} else {
		if (prim != device_ctx[dev])
			__atomic_store_n(&device_ctx[dev], prim, __ATOMIC_RELEASE);
		drv.primary_ctx_release((CUdevice)dev);
	}
	pthread_mutex_unlock(&device_ctx_lock);
	return prim && prim == ctx ? 0 : -EXDEV;
}

int device_current_primary(int *ordinal)
{
	CUcontext ctx;
	int err = device_current_ctx(&ctx, ordinal);

	if (err)
		return err;
	if (*ordinal < 0 || *ordinal >= DEVICE_MAX)
		return -EXDEV;
	if (ctx == __atomic_load_n(&device_ctx[*ordinal], __ATOMIC_ACQUIRE))
		return 0;
	return device_primary_check(*ordinal, ctx);
}

int device_context_id(uint64_t *id)
{
	unsigned long long v = 0;

	*id = 0;
	if (!drv.ctx_get_id)
		return -ENOSYS;
	if (drv.ctx_get_id(NULL, &v) != CUDA_SUCCESS)
		return -EIO;
	*id = v;
	return 0;
}

int device_primary_id(int dev, uint64_t *id)
{
	CUcontext prim = NULL;
	unsigned long long v = 0;
	unsigned int flags = 0;
	int active = 0;
	CUresult r;

	*id = 0;
	if (!drv.ctx_get_id || !drv.primary_ctx_get_state || !drv.primary_ctx_release)
		return -ENOSYS;
	if (dev < 0 || dev >= DEVICE_MAX ||
	    drv.primary_ctx_get_state((CUdevice)dev, &flags, &active) != CUDA_SUCCESS)
		return -EIO;
	if (!active)
		return -ENODEV;
	/* Active: the retain makes nothing, and is given back at once. */
	if (drv.primary_ctx_retain(&prim, (CUdevice)dev) != CUDA_SUCCESS)
		return -EIO;
	r = drv.ctx_get_id(prim, &v);
	drv.primary_ctx_release((CUdevice)dev);
	if (r != CUDA_SUCCESS)
		return -EIO;
	*id = v;
	return 0;
}

int device_is_capturing(dev_stream s, int *capturing)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult r = drv.stream_is_capturing((CUstream)s, &st);

	/* A failed query (the legacy stream during another stream's global
	 * capture, for instance) is treated as capturing: stand aside. */
	*capturing = r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
	return r == CUDA_SUCCESS ? 0 : -EIO;
}

int device_capture_graph(dev_stream s, void **graph)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	cuuint64_t id = 0;
	CUgraph g = NULL;

	*graph = NULL;
	if (!drv.capture_info)
		return -ENOSYS;
	if (drv.capture_info((CUstream)s, &st, &id, &g, NULL, NULL, NULL) != CUDA_SUCCESS)
		return -EIO;
	if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || !g)
		return -ENOENT;
	*graph = g;
	return 0;
}

/*
 * Makes device dev's primary context current on this thread and returns
 * the previous one in *prev, so device_ctx_leave can restore it.
 */
int device_ctx_enter(int dev, CUcontext *prev)
{
	CUcontext ctx;
	int err = 0;

	if (dev < 0 || dev >= DEVICE_MAX)
		return -EINVAL;
	/*
	 * Without knowing the caller's context it could not be put back by
	 * name: push dev's on the thread's stack and pop it after (issue 17,
	 * item A: a reclaim must still free); without push and pop, do nothing.
	 */
	err = device_own(drv.ctx_get_current(prev));
	if (err && (!drv.ctx_push || !drv.ctx_pop))
		return -EIO;
	if (err)
		*prev = DEVICE_CTX_PUSHED;
	err = 0;
	pthread_mutex_lock(&device_ctx_lock);
	if (!device_ctx[dev])
		err = device_own(drv.primary_ctx_retain(&device_ctx[dev], (CUdevice)dev));
	ctx = device_ctx[dev];
	pthread_mutex_unlock(&device_ctx_lock);
	if (err)
		return err;
	if (*prev == DEVICE_CTX_PUSHED)
		return device_own(drv.ctx_push(ctx));
	if (*prev != ctx)
		return device_own(drv.ctx_set_current(ctx));
	return 0;
}

void device_ctx_leave(int dev, CUcontext prev)
{
	CUcontext popped;

	if (prev == DEVICE_CTX_PUSHED) {
		if (device_own(drv.ctx_pop(&popped)))
			drv.ctx_pop(&popped);  /* once more: the program's thread must get its context back */
		return;
	}
	if (prev != device_ctx[dev] && device_own(drv.ctx_set_current(prev)))
		drv.ctx_set_current(prev);     /* once more: the program's thread must get its context back */
}

CUcontext device_ctx_primary(int dev)
{
	return device_ctx[dev];
}

int device_mem_alloc(int dev, uint64_t n, dev_ptr *out)
{
	CUcontext prev;
	CUdeviceptr p = 0;
	int err = device_ctx_enter(dev, &prev);

	if (err)
		return err;
	err = device_own(drv.mem_alloc(&p, (size_t)n));
	device_ctx_leave(dev, prev);
	*out = (dev_ptr)p;
	return err;
}

int device_mem_free(int dev, dev_ptr p)
{
	CUcontext prev;
	int err = device_ctx_enter(dev, &prev);

	if (err)
		return err;
	err = device_own(drv.mem_free((CUdeviceptr)p));
	device_ctx_leave(dev, prev);
	return err;
}

/*
 * The name of the first device whose memory the pool read (the probe), for
 * the dump (issue 19): written once by the thread that claims it (state
 * 0 -> 1 -> 2), read lock-free once 2.
 */
static _Atomic int device_probed_state;
static int device_probed_ord;
static char device_probed_buf[DEVICE_NAME_MAX];

static void device_note_name(int dev)
{
	int expected = 0;

	if (!drv.device_get_name || atomic_load_explicit(&device_probed_state, memory_order_relaxed) != 0 ||
	    !atomic_compare_exchange_strong(&device_probed_state, &expected, 1))
		return;
	if (drv.device_get_name(device_probed_buf, (int)sizeof(device_probed_buf), (CUdevice)dev) != CUDA_SUCCESS) {
		atomic_store(&device_probed_state, 0);
		return;
	}
	device_probed_buf[sizeof(device_probed_buf) - 1] = '\0';
	device_probed_ord = dev;
	atomic_store_explicit(&device_probed_state, 2, memory_order_release);
}

const char *device_probed_name(int *ordinal)
{
	if (atomic_load_explicit(&device_probed_state, memory_order_acquire) != 2)
		return NULL;
	*ordinal = device_probed_ord;
	return device_probed_buf;
}

int device_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
	CUcontext prev;
	size_t f = 0, t = 0;
	int err = device_ctx_enter(dev, &prev);

	if (err)
		return err;
	err = device_own(drv.mem_get_info(&f, &t));
	if (err == 0)
		device_note_name(dev);
	device_ctx_leave(dev, prev);
	*free_bytes = f;
	*total_bytes = t;
	return err;
}

int device_sync(int dev)
{
	CUcontext prev;
	int err = device_ctx_enter(dev, &prev);

	if (err)
		return err;
	err = device_own(drv.ctx_synchronize());
	device_ctx_leave(dev, prev);
	return err;
}

void device_ctx_atfork_child(void)
{
	int loading = 1;

	/* Issue 17, item F: a thread of the parent may have held the lock, or
	 * been loading the driver, at the fork; it does not exist here. */
	pthread_mutex_init(&device_ctx_lock, NULL);
	atomic_compare_exchange_strong(&device_state, &loading, 0);
	atomic_store(&device_probed_state, 0);  /* the child's own probe names its device */
	for (int i = 0; i < DEVICE_MAX; i++)
		device_ctx[i] = NULL;
}

void device_ctx_lock_for_tests(int hold)
{
	if (hold)
		pthread_mutex_lock(&device_ctx_lock);
	else
		pthread_mutex_unlock(&device_ctx_lock);
}
