/*
 * runtime.c: the cuda* entry points of the emulated device.
 *
 * Each entry point counts itself (fc_api_enter, which also applies
 * FAKECUDA_FAIL), binds the thread to its device's primary context as the
 * real runtime does on first use, does its work through core.c / stream.c,
 * and converts the internal negative errno to a cudaError_t. A failing call
 * sets the calling thread's last error (cudaGetLastError returns and clears
 * it; cudaPeekAtLastError only returns it). cudaErrorNotReady is not an
 * error and is not recorded. Names ending _ptsz / _ptds are the entry points
 * of programs built with per-thread default streams: there, stream 0 is the
 * per-thread stream.
 */
#include "fakecuda.h"

#include <errno.h>
#include <string.h>

static cudaError_t fc_rt_err(int e)
{
	switch (e) {
	case 0: return cudaSuccess;
	case -ENOMEM: return cudaErrorMemoryAllocation;
	case -EINVAL: return cudaErrorInvalidValue;
	case -EBADF: return cudaErrorInvalidResourceHandle;
	case -EAGAIN: return cudaErrorNotReady;
	case -ENODEV: return cudaErrorInvalidDevice;
	case -EPERM: return cudaErrorStreamCaptureUnsupported;
	case -ENOTSUP: return cudaErrorNotSupported;
	case -EEXIST: return cudaErrorHostMemoryAlreadyRegistered;
	case -ENOENT: return cudaErrorHostMemoryNotRegistered;
	default: return cudaErrorUnknown;
	}
}

/* Records a failure as the thread's last error and returns it. */
static cudaError_t rt_ret(cudaError_t e)
{
	if (e != cudaSuccess && e != cudaErrorNotReady)
		fc_tls_get()->last_error = e;
	return e;
}

static cudaError_t rt_reti(int e)
{
	return rt_ret(fc_rt_err(e));
}

/* Counts the call and binds the thread to a context; 1 = inject a fault. */
static int rt_enter(const char *name)
{
	int inject = fc_api_enter(name);
	struct fc_tls *t = fc_tls_get();

	if (!t->ctx && t->dev < fc.cfg.devices)
		t->ctx = &fc.dev[t->dev].ctx;
	fc.driver_inited = 1;
	return inject;
}

#define RT_ENTER(name) do { if (rt_enter(name)) return rt_ret(cudaErrorUnknown); } while (0)
#define RT_ENTER_ALLOC(name) do { if (rt_enter(name)) return rt_ret(cudaErrorMemoryAllocation); } while (0)

/* Resolves a stream handle or returns its error from the caller. */
#define RT_STREAM(h, ptsz, s) do { int e_ = fc_stream_resolve((void *)(h), ptsz, &(s)); \
	if (e_) return rt_reti(e_); } while (0)

static int have_device(void)
{
	int d = fc_cur_dev();

	return d >= 0 && d < fc.cfg.devices;
}

/* ---- errors ---- */

FC_API cudaError_t cudaGetLastError(void)
{
	struct fc_tls *t;
	cudaError_t e;

	fc_api_enter("cudaGetLastError");
	t = fc_tls_get();
	e = t->last_error;
	t->last_error = cudaSuccess;
	return e;
}

FC_API cudaError_t cudaPeekAtLastError(void)
{
	fc_api_enter("cudaPeekAtLastError");
	return fc_tls_get()->last_error;
}

#define RT_ERRORS(X) \
	X(cudaSuccess, "no error") \
	X(cudaErrorInvalidValue, "invalid argument") \
	X(cudaErrorMemoryAllocation, "out of memory") \
	X(cudaErrorInitializationError, "initialization error") \
	X(cudaErrorInvalidDevice, "invalid device ordinal") \
	X(cudaErrorInvalidDevicePointer, "invalid device pointer") \
	X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy") \
	X(cudaErrorInvalidResourceHandle, "invalid resource handle") \
	X(cudaErrorNotReady, "device not ready") \
	X(cudaErrorNoDevice, "no CUDA-capable device is detected") \
	X(cudaErrorNotSupported, "operation not supported") \
	X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing") \
	X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture") \
	X(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped") \
	X(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region") \
	X(cudaErrorUnknown, "unknown error")

FC_API const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
#define X(c, s) case c: return s;
	RT_ERRORS(X)
#undef X
	default: return "unrecognized error code";
	}
}

FC_API const char *cudaGetErrorName(cudaError_t error)
{
	switch (error) {
#define X(c, s) case c: return #c;
	RT_ERRORS(X)
#undef X
	default: return "cudaErrorUnknown";
	}
}

/* ---- devices ---- */

FC_API cudaError_t cudaGetDeviceCount(int *count)
{
	RT_ENTER("cudaGetDeviceCount");
	if (!count)
		return rt_ret(cudaErrorInvalidValue);
	*count = fc.cfg.devices;
	return rt_ret(fc.cfg.devices ? cudaSuccess : cudaErrorNoDevice);
}

FC_API cudaError_t cudaSetDevice(int device)
{
	struct fc_tls *t;

	RT_ENTER("cudaSetDevice");
	if (device < 0 || device >= fc.cfg.devices)
		return rt_ret(cudaErrorInvalidDevice);
	t = fc_tls_get();
	t->dev = device;
	t->ctx = &fc.dev[device].ctx;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDevice(int *device)
{
	RT_ENTER("cudaGetDevice");
	if (!device)
		return rt_ret(cudaErrorInvalidValue);
	*device = fc_cur_dev();
	return cudaSuccess;
}

FC_API cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
	RT_ENTER("cudaSetDeviceFlags");
	(void)flags;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
	RT_ENTER("cudaGetDeviceFlags");
	if (!flags)
		return rt_ret(cudaErrorInvalidValue);
	*flags = 0;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	RT_ENTER("cudaGetDeviceProperties");
	if (!prop)
		return rt_ret(cudaErrorInvalidValue);
	if (device < 0 || device >= fc.cfg.devices)
		return rt_ret(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	strcpy(prop->name, "fakecuda emulated device");
	prop->totalGlobalMem = fc.dev[device].cap;
	prop->sharedMemPerBlock = 48 << 10;
	prop->regsPerBlock = 65536;
	prop->warpSize = 32;
	prop->memPitch = (size_t)1 << 31;
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 0x7fffffff;
	prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
	prop->totalConstMem = 64 << 10;
	prop->major = 9;
	prop->minor = 0;
	prop->textureAlignment = 512;
	prop->multiProcessorCount = 4;
	prop->canMapHostMemory = 1;
	prop->concurrentKernels = 1;
	prop->pciBusID = device + 1;
	prop->asyncEngineCount = 2;
	prop->unifiedAddressing = 1;
	prop->memoryBusWidth = 5120;
	prop->l2CacheSize = 50 << 20;
	prop->maxThreadsPerMultiProcessor = 2048;
	prop->streamPrioritiesSupported = 1;
	prop->managedMemory = 1;
	prop->concurrentManagedAccess = 1;
	prop->hostRegisterSupported = 1;
	prop->memoryPoolsSupported = 1;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	RT_ENTER("cudaDeviceGetAttribute");
	if (!value)
		return rt_ret(cudaErrorInvalidValue);
	if (device < 0 || device >= fc.cfg.devices)
		return rt_ret(cudaErrorInvalidDevice);
	switch (attr) {
	case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
	case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
	case cudaDevAttrMultiProcessorCount: *value = 4; break;
	case cudaDevAttrWarpSize: *value = 32; break;
	case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
	case cudaDevAttrUnifiedAddressing:
	case cudaDevAttrManagedMemory:
	case cudaDevAttrConcurrentManagedAccess:
	case cudaDevAttrCanMapHostMemory:
	case cudaDevAttrMemoryPoolsSupported:
	case cudaDevAttrHostRegisterSupported: *value = 1; break;
	case cudaDevAttrPciBusId: *value = device + 1; break;
	default: *value = 0; break;
	}
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceSynchronize(void)
{
	RT_ENTER("cudaDeviceSynchronize");
	if (!have_device())
		return rt_ret(cudaErrorNoDevice);
	return rt_reti(fc_device_sync(fc_cur_dev()));
}

FC_API cudaError_t cudaDeviceReset(void)
{
	RT_ENTER("cudaDeviceReset");
	if (!have_device())
		return rt_ret(cudaErrorNoDevice);
	return rt_reti(fc_device_sync(fc_cur_dev()));
}

FC_API cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	size_t f, t;

	RT_ENTER("cudaMemGetInfo");
	if (!have_device())
		return rt_ret(cudaErrorNoDevice);
	fc_dev_meminfo(fc_cur_dev(), &f, &t);
	if (free_b)
		*free_b = f;
	if (total)
		*total = t;
	return cudaSuccess;
}

FC_API cudaError_t cudaDriverGetVersion(int *v)
{
	RT_ENTER("cudaDriverGetVersion");
	if (!v)
		return rt_ret(cudaErrorInvalidValue);
	*v = 13000;
	return cudaSuccess;
}

FC_API cudaError_t cudaRuntimeGetVersion(int *v)
{
	RT_ENTER("cudaRuntimeGetVersion");
	if (!v)
		return rt_ret(cudaErrorInvalidValue);
	*v = 13000;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
	RT_ENTER("cudaDeviceGetStreamPriorityRange");
	if (least)
		*least = 0;
	if (greatest)
		*greatest = -5;
	return cudaSuccess;
}

/* ---- memory ---- */

FC_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	int err;

	RT_ENTER_ALLOC("cudaMalloc");
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	if (!size) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	err = fc_dev_alloc(fc_cur_dev(), size, devPtr);
	return rt_reti(err);
}

FC_API cudaError_t cudaFree(void *devPtr)
{
	RT_ENTER("cudaFree");
	if (!devPtr)
		return cudaSuccess; /* cudaFree(0): initialise the context */
	atomic_fetch_add(&fc_cnt.free_calls, 1);
	return rt_reti(fc_dev_free(devPtr));
}

static cudaError_t malloc_async(const char *name, int ptsz, void **p, size_t size, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER_ALLOC(name);
	RT_STREAM(h, ptsz, s);
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return rt_reti(fc_dev_alloc(fc_stream_flags(s, &(unsigned){0}), size ? size : 1, p));
}

FC_API cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t h)
{
	return malloc_async("cudaMallocAsync", 0, p, size, h);
}

FC_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t h)
{
	return malloc_async("cudaMallocAsync_ptsz", 1, p, size, h);
}

static cudaError_t free_async(const char *name, int ptsz, void *p, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	atomic_fetch_add(&fc_cnt.free_calls, 1);
	return rt_reti(fc_free_async(p, s));
}

FC_API cudaError_t cudaFreeAsync(void *p, cudaStream_t h)
{
	return free_async("cudaFreeAsync", 0, p, h);
}

FC_API cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t h)
{
	return free_async("cudaFreeAsync_ptsz", 1, p, h);
}

FC_API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	RT_ENTER_ALLOC("cudaMallocManaged");
	(void)flags;
	if (!devPtr || !size)
		return rt_ret(cudaErrorInvalidValue);
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return rt_reti(fc_managed_alloc(fc_cur_dev(), size, devPtr));
}

FC_API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	size_t p = (width + 511) / 512 * 512;

	RT_ENTER_ALLOC("cudaMallocPitch");
	if (!devPtr || !pitch)
		return rt_ret(cudaErrorInvalidValue);
	*pitch = p;
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return rt_reti(fc_dev_alloc(fc_cur_dev(), p * height > 0 ? p * height : 1, devPtr));
}

FC_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	RT_ENTER_ALLOC("cudaMallocHost");
	if (!ptr)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_host_alloc(size, ptr));
}

FC_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	RT_ENTER_ALLOC("cudaHostAlloc");
	(void)flags;
	if (!pHost)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_host_alloc(size, pHost));
}

FC_API cudaError_t cudaFreeHost(void *ptr)
{
	RT_ENTER("cudaFreeHost");
	if (!ptr)
		return cudaSuccess;
	return rt_ret(fc_host_free(ptr) ? cudaErrorInvalidValue : cudaSuccess);
}

FC_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	RT_ENTER("cudaHostRegister");
	(void)flags;
	return rt_reti(fc_host_register(ptr, size));
}

FC_API cudaError_t cudaHostUnregister(void *ptr)
{
	RT_ENTER("cudaHostUnregister");
	return rt_reti(fc_host_unregister(ptr));
}

FC_API cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
	int kind;

	RT_ENTER("cudaHostGetDevicePointer");
	(void)flags;
	if (!pDevice)
		return rt_ret(cudaErrorInvalidValue);
	kind = fc_mem_classify(pHost, 1, NULL);
	if (kind != FC_PINNED && kind != FC_MANAGED)
		return rt_ret(cudaErrorInvalidValue);
	*pDevice = pHost;
	return cudaSuccess;
}

FC_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr)
{
	int dev = 0;
	int kind;

	RT_ENTER("cudaPointerGetAttributes");
	if (!a)
		return rt_ret(cudaErrorInvalidValue);
	memset(a, 0, sizeof(*a));
	kind = fc_mem_classify(ptr, 1, &dev);
	switch (kind) {
	case FC_DEVICE:
		a->type = cudaMemoryTypeDevice;
		a->device = dev;
		a->devicePointer = (void *)(uintptr_t)ptr;
		break;
	case FC_MANAGED:
		a->type = cudaMemoryTypeManaged;
		a->device = dev;
		a->devicePointer = a->hostPointer = (void *)(uintptr_t)ptr;
		break;
	case FC_PINNED:
		a->type = cudaMemoryTypeHost;
		a->device = fc_cur_dev();
		a->devicePointer = a->hostPointer = (void *)(uintptr_t)ptr;
		break;
	case -EINVAL: /* inside the arena but not allocated */
		a->type = cudaMemoryTypeUnregistered;
		a->device = cudaInvalidDeviceId;
		return rt_ret(cudaErrorInvalidValue);
	default:
		a->type = cudaMemoryTypeUnregistered;
		a->device = cudaInvalidDeviceId;
		a->hostPointer = (void *)(uintptr_t)ptr;
		break;
	}
	return cudaSuccess;
}

static cudaError_t memset_any(const char *name, int ptsz, int sync, void *p, int v, size_t n, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_memset(p, v, n, s, sync));
}

FC_API cudaError_t cudaMemset(void *p, int v, size_t n)
{
	return memset_any("cudaMemset", 0, 1, p, v, n, 0);
}

FC_API cudaError_t cudaMemset_ptds(void *p, int v, size_t n)
{
	return memset_any("cudaMemset_ptds", 1, 1, p, v, n, 0);
}

FC_API cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t h)
{
	return memset_any("cudaMemsetAsync", 0, 0, p, v, n, h);
}

FC_API cudaError_t cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t h)
{
	return memset_any("cudaMemsetAsync_ptsz", 1, 0, p, v, n, h);
}

/* ---- copies ---- */

static cudaError_t memcpy_any(const char *name, int ptsz, int sync, void *dst, const void *src,
			      size_t n, enum cudaMemcpyKind kind, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_copy(dst, src, n, (int)kind, s, sync));
}

FC_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	return memcpy_any("cudaMemcpy", 0, 1, dst, src, n, kind, 0);
}

FC_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	return memcpy_any("cudaMemcpy_ptds", 1, 1, dst, src, n, kind, 0);
}

FC_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
				   enum cudaMemcpyKind kind, cudaStream_t h)
{
	return memcpy_any("cudaMemcpyAsync", 0, 0, dst, src, n, kind, h);
}

FC_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n,
					enum cudaMemcpyKind kind, cudaStream_t h)
{
	return memcpy_any("cudaMemcpyAsync_ptsz", 1, 0, dst, src, n, kind, h);
}

FC_API cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t n)
{
	(void)dstDevice;
	(void)srcDevice;
	return memcpy_any("cudaMemcpyPeer", 0, 1, dst, src, n, cudaMemcpyDeviceToDevice, 0);
}

FC_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				       size_t n, cudaStream_t h)
{
	(void)dstDevice;
	(void)srcDevice;
	return memcpy_any("cudaMemcpyPeerAsync", 0, 0, dst, src, n, cudaMemcpyDeviceToDevice, h);
}

/* The 13.0 batch: unordered inside, stream-ordered as a whole; refuses the
 * legacy stream and a zero srcAccessOrder. */
static cudaError_t batch_any(const char *name, int ptsz, void *const *dsts, const void *const *srcs,
			     const size_t *sizes, size_t count, struct cudaMemcpyAttributes *attrs,
			     size_t *attrsIdxs, size_t numAttrs, cudaStream_t h)
{
	struct CUstream_st *s;
	size_t i;
	int err = 0;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (fc_stream_is_legacy(s) || !count || !dsts || !srcs || !sizes ||
	    !attrs || !attrsIdxs || !numAttrs || numAttrs > count || attrsIdxs[0] != 0)
		return rt_ret(cudaErrorInvalidValue);
	for (i = 0; i < numAttrs; i++)
		if (attrs[i].srcAccessOrder == cudaMemcpySrcAccessOrderInvalid ||
		    (i && attrsIdxs[i] <= attrsIdxs[i - 1]) || attrsIdxs[i] >= count)
			return rt_ret(cudaErrorInvalidValue);
	for (i = 0; i < count && !err; i++)
		err = fc_copy(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, s, 0);
	return rt_reti(err);
}

FC_API cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes,
					size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
					size_t numAttrs, cudaStream_t h)
{
	return batch_any("cudaMemcpyBatchAsync", 0, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, h);
}

FC_API cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs, const size_t *sizes,
					     size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
					     size_t numAttrs, cudaStream_t h)
{
	return batch_any("cudaMemcpyBatchAsync_ptsz", 1, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, h);
}

/* ---- streams ---- */

FC_API cudaError_t cudaStreamCreate(cudaStream_t *p)
{
	RT_ENTER("cudaStreamCreate");
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_stream_create(fc_cur_dev(), 0, 0, p));
}

FC_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *p, unsigned int flags)
{
	RT_ENTER("cudaStreamCreateWithFlags");
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_stream_create(fc_cur_dev(), flags, 0, p));
}

FC_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *p, unsigned int flags, int priority)
{
	RT_ENTER("cudaStreamCreateWithPriority");
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_stream_create(fc_cur_dev(), flags, priority, p));
}

FC_API cudaError_t cudaStreamDestroy(cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER("cudaStreamDestroy");
	if ((uintptr_t)h <= 2)
		return rt_ret(cudaErrorInvalidResourceHandle);
	RT_STREAM(h, 0, s);
	return rt_reti(fc_stream_destroy(s));
}

#define RT_STREAM_PAIR(fn, body_call) \
	FC_API cudaError_t fn(cudaStream_t h) { return body_call(#fn, 0, h); } \
	FC_API cudaError_t fn##_ptsz(cudaStream_t h) { return body_call(#fn "_ptsz", 1, h); }

static cudaError_t stream_sync(const char *name, int ptsz, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_stream_sync(s));
}

static cudaError_t stream_query(const char *name, int ptsz, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_stream_query(s));
}

RT_STREAM_PAIR(cudaStreamSynchronize, stream_sync)
RT_STREAM_PAIR(cudaStreamQuery, stream_query)

static cudaError_t stream_get_flags(const char *name, int ptsz, cudaStream_t h, unsigned *flags, int *dev)
{
	struct CUstream_st *s;
	unsigned f;
	int d;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	d = fc_stream_flags(s, &f);
	if (flags)
		*flags = f;
	if (dev)
		*dev = d;
	return cudaSuccess;
}

FC_API cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int *flags)
{
	return stream_get_flags("cudaStreamGetFlags", 0, h, flags, NULL);
}

FC_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t h, unsigned int *flags)
{
	return stream_get_flags("cudaStreamGetFlags_ptsz", 1, h, flags, NULL);
}

FC_API cudaError_t cudaStreamGetDevice(cudaStream_t h, int *dev)
{
	return stream_get_flags("cudaStreamGetDevice", 0, h, NULL, dev);
}

FC_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t h, int *dev)
{
	return stream_get_flags("cudaStreamGetDevice_ptsz", 1, h, NULL, dev);
}

static cudaError_t stream_wait_event(const char *name, int ptsz, cudaStream_t h, cudaEvent_t e)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_stream_wait_event(s, e));
}

FC_API cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned int flags)
{
	(void)flags;
	return stream_wait_event("cudaStreamWaitEvent", 0, h, e);
}

FC_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t h, cudaEvent_t e, unsigned int flags)
{
	(void)flags;
	return stream_wait_event("cudaStreamWaitEvent_ptsz", 1, h, e);
}

static cudaError_t host_func(const char *name, int ptsz, cudaStream_t h, cudaHostFn_t fn, void *arg)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_hostfn(s, fn, arg));
}

FC_API cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *arg)
{
	return host_func("cudaLaunchHostFunc", 0, h, fn, arg);
}

FC_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t h, cudaHostFn_t fn, void *arg)
{
	return host_func("cudaLaunchHostFunc_ptsz", 1, h, fn, arg);
}

/* ---- capture and graphs ---- */

static cudaError_t begin_capture(const char *name, int ptsz, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_capture_begin(s));
}

FC_API cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
	(void)mode;
	return begin_capture("cudaStreamBeginCapture", 0, h);
}

FC_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
	(void)mode;
	return begin_capture("cudaStreamBeginCapture_ptsz", 1, h);
}

static cudaError_t end_capture(const char *name, int ptsz, cudaStream_t h, cudaGraph_t *g)
{
	struct CUstream_st *s;
	int err;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!g)
		return rt_ret(cudaErrorInvalidValue);
	err = fc_capture_end(s, g);
	return rt_ret(err == -EPERM ? cudaErrorIllegalState : fc_rt_err(err));
}

FC_API cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *g)
{
	return end_capture("cudaStreamEndCapture", 0, h, g);
}

FC_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t h, cudaGraph_t *g)
{
	return end_capture("cudaStreamEndCapture_ptsz", 1, h, g);
}

static cudaError_t capture_info(const char *name, int ptsz, cudaStream_t h,
				enum cudaStreamCaptureStatus *st, unsigned long long *id,
				cudaGraph_t *graph, const cudaGraphNode_t **deps,
				const cudaGraphEdgeData **edges, size_t *ndeps)
{
	struct CUstream_st *s;
	int c;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!st)
		return rt_ret(cudaErrorInvalidValue);
	c = fc_capture_status(s, id, graph);
	*st = c ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
	if (deps)
		*deps = NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = 0;
	return cudaSuccess;
}

FC_API cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus *st)
{
	return capture_info("cudaStreamIsCapturing", 0, h, st, NULL, NULL, NULL, NULL, NULL);
}

FC_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t h, enum cudaStreamCaptureStatus *st)
{
	return capture_info("cudaStreamIsCapturing_ptsz", 1, h, st, NULL, NULL, NULL, NULL, NULL);
}

FC_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t h, enum cudaStreamCaptureStatus *st,
					    unsigned long long *id, cudaGraph_t *graph,
					    const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
					    size_t *ndeps)
{
	return capture_info("cudaStreamGetCaptureInfo", 0, h, st, id, graph, deps, edges, ndeps);
}

FC_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t h, enum cudaStreamCaptureStatus *st,
						 unsigned long long *id, cudaGraph_t *graph,
						 const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
						 size_t *ndeps)
{
	return capture_info("cudaStreamGetCaptureInfo_ptsz", 1, h, st, id, graph, deps, edges, ndeps);
}

FC_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
	RT_ENTER("cudaGraphInstantiate");
	(void)flags;
	if (!x)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_graph_instantiate(g, x));
}

FC_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
	RT_ENTER("cudaGraphInstantiateWithFlags");
	(void)flags;
	if (!x)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_graph_instantiate(g, x));
}

static cudaError_t graph_launch(const char *name, int ptsz, cudaGraphExec_t x, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_graph_launch(x, s));
}

FC_API cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_launch("cudaGraphLaunch", 0, x, h);
}

FC_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_launch("cudaGraphLaunch_ptsz", 1, x, h);
}

FC_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	RT_ENTER("cudaGraphExecDestroy");
	return rt_reti(fc_graph_exec_destroy(x));
}

FC_API cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	RT_ENTER("cudaGraphDestroy");
	return rt_reti(fc_graph_destroy(g));
}

/* ---- events ---- */

FC_API cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	RT_ENTER("cudaEventCreate");
	if (!e)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_event_create(0, e));
}

FC_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	RT_ENTER("cudaEventCreateWithFlags");
	if (!e)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_event_create(flags, e));
}

FC_API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	RT_ENTER("cudaEventDestroy");
	return rt_reti(fc_event_destroy(e));
}

static cudaError_t event_record(const char *name, int ptsz, cudaEvent_t e, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_event_record(e, s));
}

FC_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h)
{
	return event_record("cudaEventRecord", 0, e, h);
}

FC_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t h)
{
	return event_record("cudaEventRecord_ptsz", 1, e, h);
}

FC_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t h, unsigned int flags)
{
	(void)flags;
	return event_record("cudaEventRecordWithFlags", 0, e, h);
}

FC_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t h, unsigned int flags)
{
	(void)flags;
	return event_record("cudaEventRecordWithFlags_ptsz", 1, e, h);
}

FC_API cudaError_t cudaEventQuery(cudaEvent_t e)
{
	RT_ENTER("cudaEventQuery");
	return rt_reti(fc_event_query(e));
}

FC_API cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	RT_ENTER("cudaEventSynchronize");
	return rt_reti(fc_event_sync(e));
}

FC_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	RT_ENTER("cudaEventElapsedTime");
	return rt_reti(fc_event_elapsed(ms, a, b));
}

/* ---- kernels (not emulated) and driver entry points ---- */

FC_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				    size_t sharedMem, cudaStream_t stream)
{
	(void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("cudaLaunchKernel");
	return rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
					 size_t sharedMem, cudaStream_t stream)
{
	(void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("cudaLaunchKernel_ptsz");
	return rt_ret(cudaErrorNotSupported);
}

static cudaError_t entry_point(const char *name, const char *sym, void **fp, unsigned int ver,
			       unsigned long long flags, enum cudaDriverEntryPointQueryResult *st)
{
	int err;

	RT_ENTER(name);
	if (!sym || !fp)
		return rt_ret(cudaErrorInvalidValue);
	err = fc_proc_lookup(sym, (int)ver, flags, fp);
	if (st)
		*st = err == 0 ? cudaDriverEntryPointSuccess
		      : err == -ERANGE ? cudaDriverEntryPointVersionNotSufficent
		      : cudaDriverEntryPointSymbolNotFound;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDriverEntryPoint(const char *sym, void **fp, unsigned long long flags,
					   enum cudaDriverEntryPointQueryResult *st)
{
	return entry_point("cudaGetDriverEntryPoint", sym, fp, 13000, flags, st);
}

FC_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *sym, void **fp, unsigned long long flags,
						enum cudaDriverEntryPointQueryResult *st)
{
	return entry_point("cudaGetDriverEntryPoint_ptsz", sym, fp, 13000, flags, st);
}

FC_API cudaError_t cudaGetDriverEntryPointByVersion(const char *sym, void **fp, unsigned int ver,
						    unsigned long long flags,
						    enum cudaDriverEntryPointQueryResult *st)
{
	return entry_point("cudaGetDriverEntryPointByVersion", sym, fp, ver, flags, st);
}

FC_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *sym, void **fp, unsigned int ver,
							 unsigned long long flags,
							 enum cudaDriverEntryPointQueryResult *st)
{
	return entry_point("cudaGetDriverEntryPointByVersion_ptsz", sym, fp, ver, flags, st);
}

/* ---- fat-binary registration: accepted and ignored ---- */

static void *fatbin_handle[1];

FC_API void **__cudaRegisterFatBinary(void *fatCubin)
{
	(void)fatCubin;
	fc_api_enter("__cudaRegisterFatBinary");
	return fatbin_handle;
}

FC_API void __cudaRegisterFatBinaryEnd(void **handle)
{
	(void)handle;
}

FC_API void __cudaUnregisterFatBinary(void **handle)
{
	(void)handle;
}

FC_API void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
				   const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
				   dim3 *bDim, dim3 *gDim, int *wSize)
{
	(void)handle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)thread_limit;
	(void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

FC_API void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress,
			      const char *deviceName, int ext, size_t size, int constant, int global)
{
	(void)handle, (void)hostVar, (void)deviceAddress, (void)deviceName;
	(void)ext, (void)size, (void)constant, (void)global;
}

FC_API void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
				     const char *deviceName, int ext, size_t size, int constant,
				     int global)
{
	(void)handle, (void)hostVarPtrAddress, (void)deviceAddress, (void)deviceName;
	(void)ext, (void)size, (void)constant, (void)global;
}

FC_API char __cudaInitModule(void **handle)
{
	(void)handle;
	return 1;
}

FC_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream)
{
	(void)gridDim, (void)blockDim, (void)sharedMem, (void)stream;
	return 0;
}

FC_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
	(void)gridDim, (void)blockDim, (void)sharedMem, (void)stream;
	return cudaSuccess;
}

/* nvcc 13 launch stubs: a kernel handle is looked up, then launched. The
 * lookup succeeds (so static initialisers are happy); the launch is refused. */
FC_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
	if (kernel)
		*kernel = (cudaKernel_t)(uintptr_t)func;
	return cudaSuccess;
}

FC_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				      void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)kernel, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("__cudaLaunchKernel");
	return rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					   void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)kernel, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("__cudaLaunchKernel_ptsz");
	return rt_ret(cudaErrorNotSupported);
}
