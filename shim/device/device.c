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
 * legacy stream, the gather kernel's self-test) is retried on later calls
 * with a back-off counted in calls (struct device_retry), never cached as
 * failed for the rest of the context.
 */
#include "device/device.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dlreal.h"
#include "core/log.h"
#include "core/stats.h"

#define DEVICE_MAX 64
#define DEVICE_LOAD_WAIT_MS 2000   /* how long a caller waits for another thread loading the driver */

/* The gather kernel's PTX text, NUL-terminated (shim/gather_ptx.S embeds build/shim/gather.ptx). */
extern const char vrampool_gather_ptx[] __attribute__((visibility("hidden")));

static struct {
	__typeof__(cuInit) *init;
	__typeof__(cuPointerGetAttributes) *pointer_get_attributes;
	__typeof__(cuCtxGetCurrent) *ctx_get_current;
	__typeof__(cuCtxSetCurrent) *ctx_set_current;
	__typeof__(cuCtxGetDevice) *ctx_get_device;
	__typeof__(cuCtxSynchronize) *ctx_synchronize;
	__typeof__(cuDevicePrimaryCtxRetain) *primary_ctx_retain;
	__typeof__(cuStreamIsCapturing) *stream_is_capturing;
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
	__typeof__(cuCtxGetId) *ctx_get_id;     /* CUDA 12.0+, may be NULL */
	/* The gather kernel and its self-test; without any of them the kernel is off. */
	__typeof__(cuModuleLoadData) *module_load_data;
	__typeof__(cuModuleGetFunction) *module_get_function;
	__typeof__(cuModuleUnload) *module_unload;
	__typeof__(cuLaunchKernel) *launch_kernel;
	__typeof__(cuMemsetD32Async) *memset_d32_async;
	__typeof__(cuMemsetD2D8Async) *memset_d2d8_async;
	__typeof__(cuMemcpyDtoHAsync_v2) *memcpy_dtoh_async;
	__typeof__(cuGetErrorName) *get_error_name;     /* may be NULL */
} drv;

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
static int device_retry_due(struct device_retry *r)
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
static int device_retry_failed(struct device_retry *r)
{
	r->fails++;
	r->skip = (uint64_t)1 << (2 * r->fails);
	return r->fails >= DEVICE_RETRY_MAX;
}

/*
 * The bridge that lets a batch reach the legacy default stream, which
 * cuMemcpyBatchAsync refuses: a private non-blocking stream per device and
 * two events, used under a lock so concurrent callers do not re-record an
 * event between its record and its wait. Made on first use in the current
 * context; a failed creation is retried (struct device_retry), and until
 * then the copies go one by one.
 */
struct device_bridge {
	pthread_mutex_t lock;
	CUstream stream;
	CUevent in, out;
	int ready;              /* 1 made, 0 not (yet), -1 given up for this context */
	struct device_retry retry;
};

/*
 * The gather kernel of one device. state is read without the lock on the
 * copy path; READY publishes ctx and fn (release/acquire). The lock is held
 * while loading and testing, and by device_forget.
 */
enum device_gather_state { GATHER_UNTRIED, GATHER_RETRY, GATHER_READY, GATHER_OFF };

struct device_kernel {
	pthread_mutex_t lock;
	_Atomic int state;              /* enum device_gather_state */
	_Atomic(CUcontext) ctx;         /* the primary context the module lives in */
	_Atomic(CUfunction) fn;
	uint64_t ctx_id;                /* that context's id (cuCtxGetId), 0 unknown */
	CUmodule mod;
	struct device_retry retry;
};

static _Atomic int device_state;        /* 0 not tried, 1 loading, 2 loaded, -1 failed */
static int device_loaded;   /* 1 ok, -1 failed */
static pthread_mutex_t device_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext device_ctx[DEVICE_MAX];
static struct device_bridge device_bridges[DEVICE_MAX];
static struct device_kernel device_kernels[DEVICE_MAX];

/* Each thread's launch parameters (16 KiB, too big for a program thread's stack), freed at thread exit. */
static pthread_key_t device_params_key;
static int device_params_keyed;
static __thread struct dev_gather_params *device_params;

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
	*(void **)&drv.ctx_get_id = dlreal_sym(h, "cuCtxGetId");
	*(void **)&drv.module_load_data = dlreal_sym(h, "cuModuleLoadData");
	*(void **)&drv.module_get_function = dlreal_sym(h, "cuModuleGetFunction");
	*(void **)&drv.module_unload = dlreal_sym(h, "cuModuleUnload");
	*(void **)&drv.launch_kernel = dlreal_sym(h, "cuLaunchKernel");
	*(void **)&drv.memset_d32_async = dlreal_sym(h, "cuMemsetD32Async");
	*(void **)&drv.memset_d2d8_async = dlreal_sym(h, "cuMemsetD2D8Async");
	*(void **)&drv.memcpy_dtoh_async = dlreal_sym(h, "cuMemcpyDtoHAsync_v2");
	*(void **)&drv.get_error_name = dlreal_sym(h, "cuGetErrorName");
	for (int i = 0; i < DEVICE_MAX; i++) {
		pthread_mutex_init(&device_bridges[i].lock, NULL);
		pthread_mutex_init(&device_kernels[i].lock, NULL);
	}
	device_params_keyed = pthread_key_create(&device_params_key, free) == 0;
	if (err || drv.init(0) != CUDA_SUCCESS) {
		device_loaded = -1;
		return;
	}
	device_loaded = 1;
}

/*
 * The first caller loads the driver; a caller that finds another thread
 * loading it waits at most DEVICE_LOAD_WAIT_MS, then gets -EAGAIN and the
 * shim passes its call through (see below).
 */
int device_open(void)
{
	int st = atomic_load_explicit(&device_state, memory_order_acquire);

	if (st == 2)
		return 0;
	if (st < 0)
		return -ENOSYS;
	if (st == 0 && atomic_compare_exchange_strong(&device_state, &st, 1)) {
		device_load();
		atomic_store_explicit(&device_state, device_loaded == 1 ? 2 : -1, memory_order_release);
		return device_loaded == 1 ? 0 : -ENOSYS;
	}
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
		if (st < 0)
			return -ENOSYS;
		nanosleep(&ts, NULL);
	}
	return -EAGAIN;
}

static int device_err(CUresult r)
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
static int device_own(CUresult r)
{
	int err = device_err(r);

	if (err && err != -EBUSY)
		stats_add(ST_POOL_FAULTS, 1);
	return err;
}

/* The driver's name for r, for log lines. */
static const char *device_err_name(CUresult r)
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

int device_current(int *ordinal)
{
	CUcontext ctx = NULL;
	CUdevice d;

	if (drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx)
		return -ENODEV;
	if (drv.ctx_get_device(&d) != CUDA_SUCCESS)
		return -ENODEV;
	*ordinal = (int)d;
	return 0;
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

/* Forgets device dev's gather kernel (its module died with the context); the lock is held. */
static void device_kernel_drop(struct device_kernel *k)
{
	atomic_store_explicit(&k->state, GATHER_UNTRIED, memory_order_release);
	k->mod = NULL;
	k->ctx_id = 0;
	k->retry = (struct device_retry){ 0 };
}

void device_forget(int dev)
{
	if (dev < 0 || dev >= DEVICE_MAX)
		return;
	/* The bridge's stream and events died with the context: drop them. */
	pthread_mutex_lock(&device_bridges[dev].lock);
	device_bridges[dev].ready = 0;
	device_bridges[dev].retry = (struct device_retry){ 0 };
	pthread_mutex_unlock(&device_bridges[dev].lock);
	pthread_mutex_lock(&device_kernels[dev].lock);
	device_kernel_drop(&device_kernels[dev]);
	pthread_mutex_unlock(&device_kernels[dev].lock);
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

/*
 * Makes device dev's primary context current on this thread and returns
 * the previous one in *prev, so device_ctx_leave can restore it.
 */
static int device_ctx_enter(int dev, CUcontext *prev)
{
	CUcontext ctx;
	int err = 0;

	if (dev < 0 || dev >= DEVICE_MAX)
		return -EINVAL;
	/* Without knowing the caller's context it could not be put back: do nothing. */
	if (device_own(drv.ctx_get_current(prev)))
		return -EIO;
	pthread_mutex_lock(&device_ctx_lock);
	if (!device_ctx[dev])
		err = device_own(drv.primary_ctx_retain(&device_ctx[dev], (CUdevice)dev));
	ctx = device_ctx[dev];
	pthread_mutex_unlock(&device_ctx_lock);
	if (err)
		return err;
	if (*prev != ctx)
		return device_own(drv.ctx_set_current(ctx));
	return 0;
}

static void device_ctx_leave(int dev, CUcontext prev)
{
	if (prev != device_ctx[dev] && device_own(drv.ctx_set_current(prev)))
		drv.ctx_set_current(prev);     /* once more: the program's thread must get its context back */
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

int device_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
	CUcontext prev;
	size_t f = 0, t = 0;
	int err = device_ctx_enter(dev, &prev);

	if (err)
		return err;
	err = device_own(drv.mem_get_info(&f, &t));
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

/* Enqueues one device-to-device copy of n bytes on stream s. */
static int device_copy_dtod(dev_ptr dst, dev_ptr src, uint64_t n, dev_stream s)
{
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.memcpy_dtod_async((CUdeviceptr)dst, (CUdeviceptr)src, (size_t)n, (CUstream)s));
}

/* One cuMemcpyBatchAsync of device-to-device copies on stream s (not the legacy stream). */
static int device_batch(dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count, dev_stream s)
{
	CUmemcpyAttributes attr = { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM };
	size_t idx = 0;

	_Static_assert(sizeof(dev_ptr) == sizeof(CUdeviceptr), "dev_ptr is a CUdeviceptr");
	_Static_assert(sizeof(uint64_t) == sizeof(size_t), "sizes are size_t");
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.memcpy_batch_async((CUdeviceptr *)dsts, (CUdeviceptr *)srcs, (size_t *)sizes,
						 (size_t)count, &attr, &idx, 1, (CUstream)s));
}

/* Creates the bridge's stream and events; on failure destroys what was made. */
static int device_bridge_make(struct device_bridge *b)
{
	CUresult r;

	b->stream = NULL;
	b->in = b->out = NULL;
	r = drv.stream_create(&b->stream, CU_STREAM_NON_BLOCKING);
	if (r == CUDA_SUCCESS)
		r = drv.event_create(&b->in, CU_EVENT_DISABLE_TIMING);
	if (r == CUDA_SUCCESS)
		r = drv.event_create(&b->out, CU_EVENT_DISABLE_TIMING);
	if (r == CUDA_SUCCESS)
		return 0;
	if (b->in)
		drv.event_destroy(b->in);
	if (b->stream)
		drv.stream_destroy(b->stream);
	b->stream = NULL;
	b->in = NULL;
	return device_own(r);
}

/*
 * Returns 0 and device dev's bridge, locked, making it in the current
 * context (its primary context) when due; -EAGAIN when there is none now
 * (a creation failed and waits for its retry, or was given up).
 */
static int device_bridge_get(int dev, struct device_bridge **out)
{
	struct device_bridge *b;

	if (dev < 0 || dev >= DEVICE_MAX)
		return -EINVAL;
	b = &device_bridges[dev];
	pthread_mutex_lock(&b->lock);
	if (b->ready == 0 && device_retry_due(&b->retry)) {
		if (device_bridge_make(b) == 0) {
			b->ready = 1;
		} else if (device_retry_failed(&b->retry)) {
			b->ready = -1;
			log_verbose("device %d: no private stream for batched copies on the legacy stream after %u "
				    "attempts; they go one copy at a time", dev, b->retry.fails);
		} else {
			log_verbose("device %d: could not make the private stream for batched copies on the legacy "
				    "stream; one copy at a time until it is tried again", dev);
		}
	}
	if (b->ready != 1) {
		pthread_mutex_unlock(&b->lock);
		return -EAGAIN;
	}
	*out = b;       /* returned locked */
	return 0;
}

/*
 * A batch on the legacy stream, through the bridge: the bridge waits for
 * everything before it on the legacy stream, runs the batch, and the legacy
 * stream waits for the batch before anything after it. If the last wait
 * cannot be issued, the batch is waited for here, so that a fallback copy
 * enqueued afterwards can never be overtaken by it. -EAGAIN: no bridge now,
 * nothing enqueued.
 */
static int device_batch_legacy(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count,
			       dev_stream s)
{
	struct device_bridge *b;
	int err = device_bridge_get(dev, &b);

	if (err)
		return err;
	stats_add(ST_DEVICE_OPS, 4);
	err = device_own(drv.event_record(b->in, (CUstream)s));
	if (!err)
		err = device_own(drv.stream_wait_event(b->stream, b->in, 0));
	if (!err)
		err = device_batch(dsts, srcs, sizes, count, b->stream);
	if (!err)
		err = device_own(drv.event_record(b->out, b->stream));
	if (!err)
		err = device_own(drv.stream_wait_event((CUstream)s, b->out, 0));
	if (err)
		drv.stream_synchronize(b->stream);
	pthread_mutex_unlock(&b->lock);
	return err;
}

int device_copy_dtod_many(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count,
			  dev_stream s)
{
	int err = 0;

	if (count > 1 && drv.memcpy_batch_async) {
		if (s != NULL && s != DEV_STREAM_LEGACY)
			return device_batch(dsts, srcs, sizes, count, s);
		err = device_batch_legacy(dev, dsts, srcs, sizes, count, s);
		if (err != -EAGAIN)
			return err;
		err = 0;        /* no bridge now: one copy at a time, in order on s */
	}
	for (uint64_t i = 0; i < count && !err; i++)
		err = device_copy_dtod(dsts[i], srcs[i], sizes[i], s);
	return err;
}

/* ---- the gather kernel ------------------------------------------------------ */

#define DEVICE_GATHER_THREADS 256                               /* threads per block */
#define DEVICE_GATHER_BLOCK_BYTES (DEVICE_GATHER_THREADS * 16 * 4)  /* four wide words per thread */
#define DEVICE_GATHER_BLOCKS 65536                              /* most blocks in one launch */

/* The calling thread's parameter block, allocated on first use; NULL when out of memory. */
static struct dev_gather_params *device_params_get(void)
{
	if (!device_params) {
		device_params = malloc(sizeof(*device_params));
		if (device_params && device_params_keyed)
			pthread_setspecific(device_params_key, device_params);
	}
	return device_params;
}

/*
 * One launch of the kernel for p (p->count entries) on stream s: blockIdx.y
 * picks entries (one row of blocks each), blockIdx.x spreads the largest
 * entry over enough blocks that each thread moves about four 16-byte words,
 * at most DEVICE_GATHER_BLOCKS blocks in all (the kernel's loops cover the
 * rest). One device operation.
 */
static int device_gather_launch(CUfunction fn, struct dev_gather_params *p, CUstream s)
{
	uint64_t most = 0, gx, cap;
	void *args[1] = { p };

	for (uint32_t i = 0; i < p->count; i++) {
		uint64_t rows = p->entries[i].nrows_dir & ~DEV_GATHER_CAPTURE;

		if (rows > most)
			most = rows;
	}
	gx = (most * p->row + DEVICE_GATHER_BLOCK_BYTES - 1) / DEVICE_GATHER_BLOCK_BYTES;
	cap = DEVICE_GATHER_BLOCKS / p->count;
	if (gx > cap)
		gx = cap;
	if (gx < 1)
		gx = 1;
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.launch_kernel(fn, (unsigned int)gx, p->count, 1, DEVICE_GATHER_THREADS, 1, 1, 0, s,
					    args, NULL));
}

/* Writes the value of the embedded PTX's directive (".version", ".target") into buf. */
static void device_ptx_directive(const char *directive, char *buf, size_t len)
{
	char key[16];
	const char *v;
	size_t n = 0;

	snprintf(key, sizeof(key), "\n%s ", directive);
	v = strstr(vrampool_gather_ptx, key);
	if (v) {
		v += strlen(key);
		while (v[n] && v[n] != '\n' && n + 1 < len)
			n++;
		memcpy(buf, v, n);
	}
	buf[n] = '\0';
}

/*
 * Loads the module and finds the kernel in the current context. Returns 0,
 * -ENOMEM (the load ran out of memory: worth another try) or -ENOEXEC (the
 * driver refuses the module or lacks the calls: final), with why set.
 */
static int device_kernel_load(struct device_kernel *k, char *why, size_t len)
{
	CUfunction fn = NULL;
	CUresult r;
	char ver[16], target[16];

	if (!drv.module_load_data || !drv.module_get_function || !drv.module_unload || !drv.launch_kernel ||
	    !drv.memset_d32_async || !drv.memset_d2d8_async || !drv.memcpy_dtoh_async) {
		snprintf(why, len, "cannot be used: the driver lacks the module, launch or memset calls");
		return -ENOEXEC;
	}
	r = drv.module_load_data(&k->mod, vrampool_gather_ptx);
	if (r != CUDA_SUCCESS) {
		k->mod = NULL;
		device_own(r);
		device_ptx_directive(".version", ver, sizeof(ver));
		device_ptx_directive(".target", target, sizeof(target));
		snprintf(why, len, "did not load (cuModuleLoadData: %s; the embedded PTX is .version %s, .target %s: "
			 "it needs a CUDA 12.1 or newer driver and a GPU of that target or newer)",
			 device_err_name(r), ver, target);
		return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -ENOEXEC;
	}
	r = drv.module_get_function(&fn, k->mod, "vrampool_gather");
	if (r != CUDA_SUCCESS) {
		device_own(r);
		drv.module_unload(k->mod);
		k->mod = NULL;
		snprintf(why, len, "has no vrampool_gather (cuModuleGetFunction: %s)", device_err_name(r));
		return -ENOEXEC;
	}
	atomic_store_explicit(&k->fn, fn, memory_order_relaxed);
	return 0;
}

/*
 * The self-test pattern. Its device memory is two halves: the slab side
 * (what hits read and captures write) and the destination side. Each half
 * is filled by memsets alone: a 4-byte fill, then 2D byte memsets whose
 * pitches are coprime, so that every position in the test has a byte value
 * that its neighbours within several hundred bytes do not share in the
 * same combination (a shifted or misdirected copy shows). The destination
 * half has the top bit set in every byte, the slab half clear.
 */
#define SELFTEST_HALF 32768

static const struct {
	uint32_t off, pitch, width;
	uint8_t value;
} selftest_layers[] = {
	{ 0, 7, 2, 0x10 }, { 3, 11, 3, 0x20 }, { 6, 13, 1, 0x30 }, { 1, 17, 1, 0x40 }, { 9, 19, 2, 0x50 },
};

/*
 * The launches of the self-test: an odd row size, a misaligned destination,
 * and entries whose slab address differs from their destination address by
 * delta modulo 16 (0: 16-byte words, 8: 8-byte, 4 and 12: 4-byte, others:
 * the funnel-shift path), hits and captures, one to eleven rows. Hits take
 * destination rows from 0 up, captures the rows after them.
 */
struct selftest_entry {
	uint8_t rows, capture, delta;
};

static const struct {
	uint32_t row, dst_off, n;
	struct selftest_entry e[10];
} selftest_launches[] = {
	{ 37, 3, 10, { { 1, 0, 0 }, { 2, 0, 8 }, { 3, 0, 4 }, { 5, 0, 1 }, { 6, 0, 6 }, { 7, 0, 13 },
		       { 1, 1, 0 }, { 2, 1, 3 }, { 4, 1, 8 }, { 11, 1, 12 } } },
	{ 1029, 8199, 7, { { 1, 0, 0 }, { 3, 0, 8 }, { 2, 0, 4 }, { 4, 0, 5 },
			   { 2, 1, 0 }, { 3, 1, 2 }, { 1, 1, 9 } } },
};

/* Fills half h (0 slab, 1 destination) of the host image as the memsets do. */
static void selftest_fill_host(unsigned char *half, int h)
{
	uint8_t top = h ? 0x80 : 0;

	for (uint32_t i = 0; i < SELFTEST_HALF; i++)
		half[i] = (uint8_t)((i % 4 + 1) | top);
	for (size_t l = 0; l < sizeof(selftest_layers) / sizeof(selftest_layers[0]); l++) {
		uint32_t off = selftest_layers[l].off, pitch = selftest_layers[l].pitch;
		uint32_t width = selftest_layers[l].width;

		for (uint32_t at = off; at + width <= SELFTEST_HALF; at += pitch)
			memset(half + at, selftest_layers[l].value | top, width);
	}
}

/* Enqueues the memsets of half h at d on stream s. */
static int selftest_fill_device(CUdeviceptr d, int h, CUstream s)
{
	uint8_t top = h ? 0x80 : 0;
	int err;

	stats_add(ST_DEVICE_OPS, 1);
	err = device_own(drv.memset_d32_async(d, 0x04030201u | (h ? 0x80808080u : 0), SELFTEST_HALF / 4, s));
	for (size_t l = 0; l < sizeof(selftest_layers) / sizeof(selftest_layers[0]) && !err; l++) {
		uint32_t off = selftest_layers[l].off, pitch = selftest_layers[l].pitch;
		uint32_t width = selftest_layers[l].width;
		size_t height = (SELFTEST_HALF - off - width) / pitch + 1;

		stats_add(ST_DEVICE_OPS, 1);
		err = device_own(drv.memset_d2d8_async(d + off, pitch, (unsigned char)(selftest_layers[l].value | top),
						       width, height, s));
	}
	return err;
}

/*
 * Fills p with self-test launch l over the device image at base and applies
 * it to the host image want, as the kernel must. *slab_at is the next free
 * offset in the slab half.
 */
static void selftest_plan(size_t l, CUdeviceptr base, struct dev_gather_params *p, unsigned char *want,
			  uint64_t *slab_at)
{
	uint32_t row = selftest_launches[l].row, n = selftest_launches[l].n, next_row = 0;
	dev_ptr dst = base + SELFTEST_HALF + selftest_launches[l].dst_off;

	p->dst = dst;
	p->row = row;
	p->count = n;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < n; i++) {
			const struct selftest_entry *x = &selftest_launches[l].e[i];
			struct dev_gather_entry *e = &p->entries[i];
			uint64_t len = (uint64_t)x->rows * row, d = dst + (uint64_t)next_row * row, at;

			if (x->capture != pass)
				continue;
			at = ((*slab_at + 15) & ~(uint64_t)15) + ((d + x->delta - base) & 15);
			*slab_at = at + len;
			e->slab = base + at;
			e->dst_row = next_row;
			e->nrows_dir = x->rows | (x->capture ? DEV_GATHER_CAPTURE : 0);
			if (x->capture)
				memcpy(want + at, want + (d - base), len);
			else
				memcpy(want + (d - base), want + at, len);
			next_row += x->rows;
		}
	}
}

/*
 * Runs the kernel once on the known pattern in device memory of its own, on
 * a private non-blocking stream (so that it waits for none of the program's
 * work and never touches the legacy stream while a program's stream is being
 * captured), reads it back and compares it with what the host computed.
 * Returns 0 (passed), -EBADMSG (a byte differs: final), or another negative
 * errno (could not run: worth another try), with why set.
 */
static int device_selftest(struct device_kernel *k, char *why, size_t len)
{
	CUfunction fn = atomic_load_explicit(&k->fn, memory_order_relaxed);
	unsigned char *want = malloc(2 * SELFTEST_HALF), *got = malloc(2 * SELFTEST_HALF);
	struct dev_gather_params *p = malloc(sizeof(*p));
	CUstream s = NULL;
	CUdeviceptr base = 0;
	uint64_t slab_at = 0;
	CUresult r;
	int err;

	if (!want || !got || !p) {
		snprintf(why, len, "out of host memory");
		err = -ENOMEM;
		goto out_free_host;
	}
	selftest_fill_host(want, 0);
	selftest_fill_host(want + SELFTEST_HALF, 1);
	err = device_own(r = drv.stream_create(&s, CU_STREAM_NON_BLOCKING));
	if (err) {
		snprintf(why, len, "cuStreamCreate: %s", device_err_name(r));
		goto out_free_host;
	}
	err = device_own(r = drv.mem_alloc(&base, 2 * SELFTEST_HALF));
	if (err) {
		snprintf(why, len, "cuMemAlloc: %s", device_err_name(r));
		goto out_destroy_stream;
	}
	err = selftest_fill_device(base, 0, s);
	if (!err)
		err = selftest_fill_device(base + SELFTEST_HALF, 1, s);
	if (err)
		snprintf(why, len, "a memset failed");
	for (size_t l = 0; l < sizeof(selftest_launches) / sizeof(selftest_launches[0]) && !err; l++) {
		memset(p, 0, sizeof(*p));
		selftest_plan(l, base, p, want, &slab_at);
		err = device_gather_launch(fn, p, s);
		if (err)
			snprintf(why, len, "a launch failed");
	}
	if (!err) {
		stats_add(ST_DEVICE_OPS, 1);
		err = device_own(r = drv.memcpy_dtoh_async(got, base, 2 * SELFTEST_HALF, s));
		if (err)
			snprintf(why, len, "cuMemcpyDtoHAsync: %s", device_err_name(r));
	}
	/* Everything enqueued must be done before the memory is freed. */
	r = drv.stream_synchronize(s);
	if (r != CUDA_SUCCESS) {
		device_own(r);
		if (!err)
			snprintf(why, len, "cuStreamSynchronize: %s", device_err_name(r));
		err = err ? err : -EIO;
		if (device_own(drv.ctx_synchronize())) {
			base = 0;       /* cannot tell when it is unused: 64 KiB left behind */
			goto out_destroy_stream;
		}
	}
	if (!err) {
		for (size_t i = 0; i < 2 * SELFTEST_HALF; i++) {
			if (got[i] != want[i]) {
				snprintf(why, len, "failed its self-test (byte %zu of the %s half is 0x%02x, expected 0x%02x)",
					 i % SELFTEST_HALF, i < SELFTEST_HALF ? "slab" : "destination", got[i], want[i]);
				stats_add(ST_POOL_FAULTS, 1);
				err = -EBADMSG;
				break;
			}
		}
	}
	if (device_own(drv.mem_free(base)))
		device_own(drv.mem_free(base));        /* once more: 64 KiB the program may need */
out_destroy_stream:
	drv.stream_destroy(s);
out_free_host:
	free(want);
	free(got);
	free(p);
	return err;
}

/*
 * Loads and tests device dev's kernel in its primary context, with the
 * lock held, and publishes the outcome: READY, RETRY (a passing failure,
 * with back-off) or OFF (final for this context). Runs in relaxed capture
 * mode so that a program's global-mode capture on another stream is not
 * invalidated by the allocation, frees and synchronisation here.
 */
static void device_kernel_try(int dev, struct device_kernel *k)
{
	char why[320] = "its context could not be made current";
	int mode = device_capture_relax();
	CUcontext prev;
	uint64_t id = 0;
	int err = device_ctx_enter(dev, &prev);

	if (!err) {
		device_context_id(&id);
		if (k->mod && id != k->ctx_id)
			k->mod = NULL;  /* a module of an earlier context, gone with it */
		k->ctx_id = id;
		atomic_store_explicit(&k->ctx, device_ctx[dev], memory_order_relaxed);
		err = k->mod ? 0 : device_kernel_load(k, why, sizeof(why));
		if (!err)
			err = device_selftest(k, why, sizeof(why));
		if (err == -EBADMSG || err == -ENOEXEC) {
			if (k->mod)
				drv.module_unload(k->mod);
			k->mod = NULL;
		}
		device_ctx_leave(dev, prev);
	}
	device_capture_restore(mode);
	if (!err) {
		atomic_store_explicit(&k->state, GATHER_READY, memory_order_release);
		stats_set_text(STATS_GATHER, "kernel");
		log_verbose("device %d: the gather kernel loaded and passed its self-test; each copy's hits and "
			    "captures go in one launch", dev);
		return;
	}
	stats_set_text(STATS_GATHER, "batched copy");
	if (err == -EBADMSG || err == -ENOEXEC) {
		atomic_store_explicit(&k->state, GATHER_OFF, memory_order_release);
		log_verbose("device %d: the gather kernel %s; hits and captures use batched copies instead", dev, why);
	} else if (device_retry_failed(&k->retry)) {
		atomic_store_explicit(&k->state, GATHER_OFF, memory_order_release);
		log_verbose("device %d: the gather kernel's self-test could not run in %u attempts (%s); hits and "
			    "captures use batched copies instead", dev, k->retry.fails, why);
	} else {
		atomic_store_explicit(&k->state, GATHER_RETRY, memory_order_release);
		log_verbose("device %d: the gather kernel's self-test could not run (%s); batched copies until it "
			    "is tried again", dev, why);
	}
}

int device_gather_ready(int dev)
{
	struct device_kernel *k;
	int state;

	if (dev < 0 || dev >= DEVICE_MAX || device_open())
		return 0;
	k = &device_kernels[dev];
	state = atomic_load_explicit(&k->state, memory_order_acquire);
	if (state == GATHER_READY || state == GATHER_OFF)
		return state == GATHER_READY;
	/* Another thread is loading or testing: batched copies meanwhile. */
	if (pthread_mutex_trylock(&k->lock))
		return 0;
	state = atomic_load_explicit(&k->state, memory_order_relaxed);
	if (state == GATHER_UNTRIED || (state == GATHER_RETRY && device_retry_due(&k->retry)))
		device_kernel_try(dev, k);
	state = atomic_load_explicit(&k->state, memory_order_relaxed);
	pthread_mutex_unlock(&k->lock);
	return state == GATHER_READY;
}

/*
 * After a failed launch: when device dev's primary context is no longer
 * the one the module was loaded in (a reset nobody told us of), forget the
 * kernel so that the next device_gather_ready loads it again.
 */
static void device_kernel_recheck(int dev, struct device_kernel *k)
{
	uint64_t id = 0;

	if (device_context_id(&id) || !id)
		return;
	pthread_mutex_lock(&k->lock);
	if (atomic_load_explicit(&k->state, memory_order_relaxed) == GATHER_READY && k->ctx_id && id != k->ctx_id) {
		log_verbose("device %d: its context changed under the gather kernel; it is loaded again", dev);
		device_kernel_drop(k);
	}
	pthread_mutex_unlock(&k->lock);
}

int device_gather(int dev, dev_ptr dst, uint64_t row, const struct dev_gather_entry *e, uint32_t n,
		  dev_stream s)
{
	struct dev_gather_params *p;
	struct device_kernel *k;
	CUcontext cur = NULL;
	CUfunction fn;
	int err = 0;

	if (dev < 0 || dev >= DEVICE_MAX || n == 0)
		return -EINVAL;
	k = &device_kernels[dev];
	if (atomic_load_explicit(&k->state, memory_order_acquire) != GATHER_READY)
		return -ENOSYS;
	fn = atomic_load_explicit(&k->fn, memory_order_relaxed);
	/* The stream belongs to the current context; the kernel to the primary one. */
	if (drv.ctx_get_current(&cur) != CUDA_SUCCESS || cur != atomic_load_explicit(&k->ctx, memory_order_relaxed))
		return -EXDEV;
	p = device_params_get();
	if (!p)
		return -EAGAIN;
	p->dst = dst;
	p->row = row;
	p->pad = 0;
	for (uint32_t done = 0, c; done < n && !err; done += c) {
		c = n - done < DEV_GATHER_MAX ? n - done : DEV_GATHER_MAX;
		memcpy(p->entries, e + done, c * sizeof(*e));
		p->count = c;
		err = device_gather_launch(fn, p, (CUstream)s);
		if (!err)
			stats_add(ST_GATHER_LAUNCHES, 1);
	}
	if (err)
		device_kernel_recheck(dev, k);
	return err;
}

int device_stream_sync(dev_stream s)
{
	return device_own(drv.stream_synchronize((CUstream)s));
}

int device_stream_wait_host(dev_stream s)
{
	CUevent e = NULL;
	int err = device_own(drv.event_create(&e, CU_EVENT_DISABLE_TIMING));

	if (err)
		return err;
	stats_add(ST_DEVICE_OPS, 1);
	err = device_own(drv.event_record(e, (CUstream)s));
	if (!err)
		err = device_own(drv.event_synchronize(e));
	drv.event_destroy(e);
	return err;
}

int device_event_new(dev_event *ev)
{
	CUevent e = NULL;
	int err = device_own(drv.event_create(&e, CU_EVENT_DISABLE_TIMING));

	*ev = e;
	return err;
}

int device_event_record(dev_event ev, dev_stream s)
{
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.event_record((CUevent)ev, (CUstream)s));
}

int device_event_query(dev_event ev)
{
	return device_own(drv.event_query((CUevent)ev));
}

void device_event_free(dev_event ev)
{
	if (ev)
		drv.event_destroy((CUevent)ev);
}

int device_stream_wait(dev_stream s, dev_event ev)
{
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.stream_wait_event((CUstream)s, (CUevent)ev, 0));
}

int device_stream_query(dev_stream s)
{
	return device_err(drv.stream_query((CUstream)s));
}

int device_host_func(dev_stream s, void (*fn)(void *arg), void *arg)
{
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.launch_host_func((CUstream)s, fn, arg));
}

int device_capture_relax(void)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;

	if (!drv.exchange_capture_mode || drv.exchange_capture_mode(&mode) != CUDA_SUCCESS)
		return -1;
	return (int)mode;
}

void device_capture_restore(int mode)
{
	CUstreamCaptureMode m = (CUstreamCaptureMode)mode;

	if (mode >= 0 && drv.exchange_capture_mode)
		drv.exchange_capture_mode(&m);
}

void device_atfork_child(void)
{
	/* The parent's primary contexts mean nothing in the child; the driver
	 * itself refuses them. Forget the handles so a child that uses CUDA
	 * retains its own. */
	for (int i = 0; i < DEVICE_MAX; i++) {
		device_ctx[i] = NULL;
		pthread_mutex_init(&device_bridges[i].lock, NULL);
		device_bridges[i].ready = 0;
		device_bridges[i].retry = (struct device_retry){ 0 };
		pthread_mutex_init(&device_kernels[i].lock, NULL);
		device_kernel_drop(&device_kernels[i]);
	}
}
