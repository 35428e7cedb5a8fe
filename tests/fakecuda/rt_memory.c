/*
 * rt_memory.c: the runtime's memory: device, stream-ordered, managed and
 * pitched allocations, host memory (pinned, registered, flags), pointer
 * queries, prefetch and advice, the default memory pools, IPC (not
 * emulated).
 */
#include "fakecuda.h"

#include <string.h>

/* ---- memory ---- */

FC_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	const struct fc_rt_driver *d;
	CUdeviceptr p = 0;
	CUresult r;
	int err;

	RT_ENTER_ALLOC("cudaMalloc");
	if (!devPtr)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!size) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	if ((d = fc_rt_driver(0))) {
		r = d->alloc(&p, size);
		if (r == CUDA_SUCCESS)
			*devPtr = (void *)(uintptr_t)p;
		return fc_rt_ret_drv(r);
	}
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	err = fc_dev_alloc(fc_cur_dev(), size, devPtr);
	return fc_rt_reti(err);
}

FC_API cudaError_t cudaFree(void *devPtr)
{
	RT_ENTER("cudaFree");
	if (!devPtr)
		return cudaSuccess; /* cudaFree(0): initialise the context */
	atomic_fetch_add(&fc_cnt.free_calls, 1);
	return fc_rt_reti(fc_dev_free(devPtr));
}

static cudaError_t malloc_async(const char *name, int ptsz, void **p, size_t size, cudaStream_t h)
{
	struct CUstream_st *s;

	const struct fc_rt_driver *d;
	CUdeviceptr dp = 0;
	CUresult r;

	RT_ENTER_ALLOC(name);
	RT_STREAM(h, ptsz, s);
	if (!p)
		return fc_rt_ret(cudaErrorInvalidValue);
	if ((d = fc_rt_driver(ptsz))) {
		r = d->alloc_async(&dp, size ? size : 1, h);
		if (r == CUDA_SUCCESS)
			*p = (void *)(uintptr_t)dp;
		return fc_rt_ret_drv(r);
	}
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return fc_rt_reti(fc_dev_alloc(fc_stream_flags(s, &(unsigned){0}), size ? size : 1, p));
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
	return fc_rt_reti(fc_free_async(p, s));
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
	const struct fc_rt_driver *d;
	CUdeviceptr p = 0;
	CUresult r;

	RT_ENTER_ALLOC("cudaMallocManaged");
	if (!devPtr || !size || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
		return fc_rt_ret(cudaErrorInvalidValue);
	if ((d = fc_rt_driver(0))) {
		r = d->alloc_managed(&p, size, flags);
		if (r == CUDA_SUCCESS)
			*devPtr = (void *)(uintptr_t)p;
		return fc_rt_ret_drv(r);
	}
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return fc_rt_reti(fc_managed_alloc(fc_cur_dev(), size, devPtr));
}

FC_API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	const struct fc_rt_driver *d;
	CUdeviceptr dp = 0;
	size_t p, n;
	CUresult r;

	RT_ENTER_ALLOC("cudaMallocPitch");
	if (!devPtr || !pitch || fc_pitch_size(width, height, &p, &n))
		return fc_rt_ret(cudaErrorInvalidValue);
	*pitch = p;
	if ((d = fc_rt_driver(0))) {
		r = d->alloc_pitch(&dp, pitch, width, height, 16);
		if (r == CUDA_SUCCESS)
			*devPtr = (void *)(uintptr_t)dp;
		return fc_rt_ret_drv(r);
	}
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return fc_rt_reti(fc_dev_alloc(fc_cur_dev(), n, devPtr));
}

FC_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	RT_ENTER_ALLOC("cudaMallocHost");
	if (!ptr)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_host_alloc(size, 0, ptr));
}

FC_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	RT_ENTER_ALLOC("cudaHostAlloc");
	if (!pHost)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_host_alloc(size, flags, pHost));
}

FC_API cudaError_t cudaFreeHost(void *ptr)
{
	RT_ENTER("cudaFreeHost");
	if (!ptr)
		return cudaSuccess;
	return fc_rt_ret(fc_host_free(ptr) ? cudaErrorInvalidValue : cudaSuccess);
}

FC_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	RT_ENTER("cudaHostRegister");
	return fc_rt_reti(fc_host_register(ptr, size, flags));
}

FC_API cudaError_t cudaHostUnregister(void *ptr)
{
	RT_ENTER("cudaHostUnregister");
	return fc_rt_reti(fc_host_unregister(ptr));
}

FC_API cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
	int kind;

	RT_ENTER("cudaHostGetDevicePointer");
	if (!pDevice || flags)
		return fc_rt_ret(cudaErrorInvalidValue);
	kind = fc_mem_classify(pHost, 1, NULL);
	if (kind != FC_PINNED && kind != FC_MANAGED)
		return fc_rt_ret(cudaErrorInvalidValue);
	*pDevice = pHost;
	return cudaSuccess;
}

FC_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr)
{
	int dev = 0;
	int kind;

	RT_ENTER("cudaPointerGetAttributes");
	if (!a)
		return fc_rt_ret(cudaErrorInvalidValue);
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
		return fc_rt_ret(cudaErrorInvalidValue);
	default:
		a->type = cudaMemoryTypeUnregistered;
		a->device = cudaInvalidDeviceId;
		a->hostPointer = (void *)(uintptr_t)ptr;
		break;
	}
	return cudaSuccess;
}

/* ---- host memory, prefetch, advice ---- */

FC_API cudaError_t cudaHostGetFlags(unsigned int *flags, void *p)
{
	RT_ENTER("cudaHostGetFlags");
	if (!flags || !p)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_host_flags(p, flags));
}

/* A location names a device or the host; -ENODEV / -EINVAL otherwise. */
static cudaError_t location_check(struct cudaMemLocation loc)
{
	switch (loc.type) {
	case cudaMemLocationTypeDevice:
		return fc_dev_valid(loc.id) ? cudaSuccess : cudaErrorInvalidDevice;
	case cudaMemLocationTypeHost:
	case cudaMemLocationTypeHostNuma:
	case cudaMemLocationTypeHostNumaCurrent:
		return cudaSuccess;
	default:
		return cudaErrorInvalidValue;
	}
}

/* Prefetching moves nothing here: after validation it is a stream-ordered
 * no-op. Only managed memory can be prefetched (no HMM). */
static cudaError_t prefetch(const char *name, int ptsz, const void *p, size_t n,
			    struct cudaMemLocation loc, unsigned flags, cudaStream_t h)
{
	struct CUstream_st *s;
	cudaError_t e;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!p || !n || flags || fc_mem_classify(p, n, NULL) != FC_MANAGED)
		return fc_rt_ret(cudaErrorInvalidValue);
	if ((e = location_check(loc)) != cudaSuccess)
		return fc_rt_ret(e);
	return fc_rt_reti(fc_stream_nop(s));
}

FC_API cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, struct cudaMemLocation loc,
					unsigned int flags, cudaStream_t h)
{
	return prefetch("cudaMemPrefetchAsync", 0, p, n, loc, flags, h);
}

FC_API cudaError_t cudaMemPrefetchAsync_ptsz(const void *p, size_t n, struct cudaMemLocation loc,
					     unsigned int flags, cudaStream_t h)
{
	return prefetch("cudaMemPrefetchAsync_ptsz", 1, p, n, loc, flags, h);
}

FC_API cudaError_t cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise advice,
				 struct cudaMemLocation loc)
{
	cudaError_t e;

	RT_ENTER("cudaMemAdvise");
	if (!p || !n || fc_mem_classify(p, n, NULL) != FC_MANAGED ||
	    advice < cudaMemAdviseSetReadMostly || advice > cudaMemAdviseUnsetAccessedBy)
		return fc_rt_ret(cudaErrorInvalidValue);
	if ((advice == cudaMemAdviseSetPreferredLocation || advice == cudaMemAdviseSetAccessedBy) &&
	    (e = location_check(loc)) != cudaSuccess)
		return fc_rt_ret(e);
	return cudaSuccess;
}

/* ---- memory pools: one default pool per device ---- */

#define pool_dev fc_pool_dev

FC_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
	RT_ENTER("cudaDeviceGetDefaultMemPool");
	if (!pool)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!fc_dev_valid(device))
		return fc_rt_ret(cudaErrorInvalidDevice);
	*pool = &fc.dev[device].pool;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device)
{
	RT_ENTER("cudaDeviceGetMemPool");
	if (!pool)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!fc_dev_valid(device))
		return fc_rt_ret(cudaErrorInvalidDevice);
	*pool = &fc.dev[device].pool;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool)
{
	RT_ENTER("cudaDeviceSetMemPool");
	if (!fc_dev_valid(device))
		return fc_rt_ret(cudaErrorInvalidDevice);
	if (pool_dev(pool) != device)
		return fc_rt_ret(cudaErrorInvalidValue);
	return cudaSuccess;
}

FC_API cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
	RT_ENTER("cudaMemPoolCreate");
	if (!pool || !props)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
	RT_ENTER("cudaMemPoolDestroy");
	(void)pool;
	return fc_rt_ret(cudaErrorInvalidValue); /* a default pool cannot be destroyed */
}

static cudaError_t malloc_pool(const char *name, int ptsz, void **p, size_t size,
			       cudaMemPool_t pool, cudaStream_t h)
{
	struct CUstream_st *s;
	int d = pool_dev(pool);

	RT_ENTER_ALLOC(name);
	RT_STREAM(h, ptsz, s);
	if (!p || d < 0)
		return fc_rt_ret(cudaErrorInvalidValue);
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return fc_rt_reti(fc_dev_alloc(d, size ? size : 1, p));
}

FC_API cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool, cudaStream_t h)
{
	return malloc_pool("cudaMallocFromPoolAsync", 0, p, size, pool, h);
}

FC_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t size, cudaMemPool_t pool, cudaStream_t h)
{
	return malloc_pool("cudaMallocFromPoolAsync_ptsz", 1, p, size, pool, h);
}

FC_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep)
{
	RT_ENTER("cudaMemPoolTrimTo");
	(void)keep;
	return fc_rt_ret(pool_dev(pool) < 0 ? cudaErrorInvalidValue : cudaSuccess);
}

FC_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
	int d = pool_dev(pool);

	RT_ENTER("cudaMemPoolSetAttribute");
	if (d < 0 || !value)
		return fc_rt_ret(cudaErrorInvalidValue);
	switch (attr) {
	case cudaMemPoolReuseFollowEventDependencies:
	case cudaMemPoolReuseAllowOpportunistic:
	case cudaMemPoolReuseAllowInternalDependencies:
		pool->reuse[attr - 1] = *(int *)value != 0;
		return cudaSuccess;
	case cudaMemPoolAttrReleaseThreshold:
		pool->release_threshold = *(unsigned long long *)value;
		return cudaSuccess;
	case cudaMemPoolAttrReservedMemHigh:
	case cudaMemPoolAttrUsedMemHigh:
		/* Only a reset to zero is allowed. */
		return fc_rt_ret(*(unsigned long long *)value ? cudaErrorInvalidValue : cudaSuccess);
	default:
		return fc_rt_ret(cudaErrorInvalidValue);
	}
}

/* The pool's memory is the device's: current and high figures are the
 * device arena's use. */
FC_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
	int d = pool_dev(pool);
	size_t f = 0, t = 0;

	RT_ENTER("cudaMemPoolGetAttribute");
	if (d < 0 || !value)
		return fc_rt_ret(cudaErrorInvalidValue);
	switch (attr) {
	case cudaMemPoolReuseFollowEventDependencies:
	case cudaMemPoolReuseAllowOpportunistic:
	case cudaMemPoolReuseAllowInternalDependencies:
		*(int *)value = pool->reuse[attr - 1];
		return cudaSuccess;
	case cudaMemPoolAttrReleaseThreshold:
		*(unsigned long long *)value = pool->release_threshold;
		return cudaSuccess;
	case cudaMemPoolAttrReservedMemCurrent:
	case cudaMemPoolAttrReservedMemHigh:
	case cudaMemPoolAttrUsedMemCurrent:
	case cudaMemPoolAttrUsedMemHigh:
		fc_dev_meminfo(d, &f, &t);
		*(unsigned long long *)value = t - f;
		return cudaSuccess;
	default:
		return fc_rt_ret(cudaErrorInvalidValue);
	}
}

/* ---- IPC: not emulated ---- */

FC_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *p)
{
	(void)handle, (void)p;
	RT_ENTER("cudaIpcGetMemHandle");
	return fc_rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t handle, unsigned int flags)
{
	(void)p, (void)handle, (void)flags;
	RT_ENTER("cudaIpcOpenMemHandle");
	return fc_rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaIpcCloseMemHandle(void *p)
{
	(void)p;
	RT_ENTER("cudaIpcCloseMemHandle");
	return fc_rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t e)
{
	(void)handle, (void)e;
	RT_ENTER("cudaIpcGetEventHandle");
	return fc_rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *e, cudaIpcEventHandle_t handle)
{
	(void)e, (void)handle;
	RT_ENTER("cudaIpcOpenEventHandle");
	return fc_rt_ret(cudaErrorNotSupported);
}
