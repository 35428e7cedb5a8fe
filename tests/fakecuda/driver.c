/*
 * driver.c: the cu* entry points of the emulated device, reachable by
 * linking -lcuda, by dlopen("libcuda.so.1") + dlsym, and by
 * cuGetProcAddress_v2.
 *
 * The driver shares every object with the runtime: a CUcontext is the
 * primary context of a device, CUstream and cudaStream_t are the same
 * structures, CUevent and cudaEvent_t too. Calls other than cuInit,
 * cuDriverGetVersion, the error strings and cuGetProcAddress need cuInit
 * (or a prior runtime call) first; memory and stream calls need a current
 * context, as on a real driver. Driver calls never touch the runtime's last
 * error.
 */
#include "fakecuda.h"

#include <errno.h>
#include <string.h>

CUresult fc_drv_err(int e)
{
	switch (e) {
	case 0: return CUDA_SUCCESS;
	case -ENOMEM: return CUDA_ERROR_OUT_OF_MEMORY;
	case -EINVAL: return CUDA_ERROR_INVALID_VALUE;
	case -EBADF: return CUDA_ERROR_INVALID_HANDLE;
	case -EAGAIN: return CUDA_ERROR_NOT_READY;
	case -ENODEV: return CUDA_ERROR_INVALID_DEVICE;
	case -EPERM: return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	case -ENOTSUP: return CUDA_ERROR_NOT_SUPPORTED;
	case -EEXIST: return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	case -ENOENT: return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	case -FC_ENOCTX: return CUDA_ERROR_INVALID_CONTEXT;
	case -FC_ENOINIT: return CUDA_ERROR_NOT_INITIALIZED;
	default: return CUDA_ERROR_UNKNOWN;
	}
}

int fc_drv_enter(const char *name, int need_ctx)
{
	if (fc_api_enter(name))
		return -EIO;
	if (!fc.driver_inited)
		return -FC_ENOINIT;
	if (need_ctx && !fc_tls_get()->ctx)
		return -FC_ENOCTX;
	return 0;
}

static void *dptr(CUdeviceptr p)
{
	return (void *)(uintptr_t)p;
}

/* ---- initialisation, devices, contexts ---- */

FC_API CUresult cuInit(unsigned int flags)
{
	if (fc_api_enter("cuInit"))
		return CUDA_ERROR_UNKNOWN;
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc.driver_inited = 1;
	return fc.cfg.devices ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

FC_API CUresult cuDriverGetVersion(int *v)
{
	if (fc_api_enter("cuDriverGetVersion"))
		return CUDA_ERROR_UNKNOWN;
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 13000;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetCount(int *count)
{
	DRV_ENTER("cuDeviceGetCount", 0);
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = fc.cfg.devices;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	DRV_ENTER("cuDeviceGet", 0);
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	DRV_ENTER("cuDeviceGetName", 0);
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	strncpy(name, "fakecuda emulated device", (size_t)len - 1);
	name[len - 1] = '\0';
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	DRV_ENTER("cuDeviceGetAttribute", 0);
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 4; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
	case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = dev + 1; break;
	default: *pi = 0; break;
	}
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	DRV_ENTER("cuDeviceTotalMem_v2", 0);
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = fc.dev[dev].cap;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	DRV_ENTER("cuDevicePrimaryCtxRetain", 0);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fc.lock);
	fc.dev[dev].ctx.refs++;
	fc.dev[dev].ctx.active = 1;
	pthread_mutex_unlock(&fc.lock);
	*pctx = &fc.dev[dev].ctx;
	return CUDA_SUCCESS;
}

/* Active once retained or used by the runtime, until a device reset. */
FC_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	DRV_ENTER("cuDevicePrimaryCtxGetState", 0);
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fc.lock);
	*active = fc.dev[dev].ctx.active;
	pthread_mutex_unlock(&fc.lock);
	*flags = 0;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	DRV_ENTER("cuDevicePrimaryCtxRelease_v2", 0);
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fc.lock);
	if (fc.dev[dev].ctx.refs > 0)
		fc.dev[dev].ctx.refs--;
	pthread_mutex_unlock(&fc.lock);
	return CUDA_SUCCESS;
}

static int ctx_valid(CUcontext c)
{
	int d;

	for (d = 0; d < fc.cfg.devices; d++)
		if (c == &fc.dev[d].ctx)
			return 1;
	return 0;
}

FC_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	DRV_ENTER("cuCtxGetCurrent", 0);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = fc_tls_get()->ctx;
	return CUDA_SUCCESS;
}

/* A context's id: the device and its generation, new after each reset. */
FC_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
	DRV_ENTER("cuCtxGetId", 0);
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		ctx = fc_tls_get()->ctx;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*id = ((unsigned long long)(ctx->dev + 1) << 32) | (ctx->gen & 0xffffffffULL);
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	struct fc_tls *t;

	DRV_ENTER("cuCtxSetCurrent", 0);
	if (ctx && !ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	/* It replaces the top of the context stack; NULL pops it. */
	t = fc_tls_get();
	if (!ctx && t->ctx_depth)
		ctx = t->ctx_stack[--t->ctx_depth];
	t->ctx = ctx;
	if (ctx)
		t->dev = ctx->dev;
	return CUDA_SUCCESS;
}

/* The context stack: the current context is its top. */
FC_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	struct fc_tls *t;

	DRV_ENTER("cuCtxPushCurrent_v2", 0);
	if (!ctx || !ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	t = fc_tls_get();
	if (t->ctx) {
		if (t->ctx_depth == FC_CTX_STACK)
			return CUDA_ERROR_OUT_OF_MEMORY;
		t->ctx_stack[t->ctx_depth++] = t->ctx;
	}
	t->ctx = ctx;
	t->dev = ctx->dev;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	struct fc_tls *t;

	DRV_ENTER("cuCtxPopCurrent_v2", 1);
	t = fc_tls_get();
	if (pctx)
		*pctx = t->ctx;
	t->ctx = t->ctx_depth ? t->ctx_stack[--t->ctx_depth] : NULL;
	if (t->ctx)
		t->dev = t->ctx->dev;
	return CUDA_SUCCESS;
}

/* Every context here is made by the CUDA 3.2+ API. */
FC_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	DRV_ENTER("cuCtxGetApiVersion", 0);
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		ctx = fc_tls_get()->ctx;
	if (!ctx || !ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	*version = 3020;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetDevice(CUdevice *dev)
{
	DRV_ENTER("cuCtxGetDevice", 1);
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = fc_tls_get()->ctx->dev;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxSynchronize(void)
{
	DRV_ENTER("cuCtxSynchronize", 1);
	return fc_drv_err(fc_device_sync(fc_tls_get()->ctx->dev));
}

/* ---- memory ---- */

FC_API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
	void *v;
	int err;

	DRV_ENTER_ALLOC("cuMemAlloc_v2");
	if (!p || !size)
		return CUDA_ERROR_INVALID_VALUE;
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	err = fc_dev_alloc(fc_tls_get()->ctx->dev, size, &v);
	if (!err)
		*p = (CUdeviceptr)(uintptr_t)v;
	return fc_drv_err(err);
}

FC_API CUresult cuMemFree_v2(CUdeviceptr p)
{
	DRV_ENTER("cuMemFree_v2", 1);
	if (!p)
		return CUDA_SUCCESS;
	atomic_fetch_add(&fc_cnt.free_calls, 1);
	return fc_drv_err(fc_dev_free(dptr(p)));
}

/* Stream-ordered allocation: made at once on the stream's device (the
 * emulation has no deferred pool), freed when the stream reaches the free.
 * A zero size is invalid, as on CUDA. */
static CUresult alloc_async(const char *name, int ptsz, CUdeviceptr *p, size_t size,
			    int from_pool, const struct CUmemPoolHandle_st *pool, CUstream h)
{
	struct CUstream_st *s;
	unsigned flags;
	void *v;
	int err, dev;

	DRV_ENTER_ALLOC(name);
	DRV_STREAM(h, ptsz, s);
	dev = fc_stream_flags(s, &flags);
	if (from_pool)
		dev = fc_pool_dev(pool);
	if (!p || !size || dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	err = fc_dev_alloc(dev, size, &v);
	if (!err)
		*p = (CUdeviceptr)(uintptr_t)v;
	return fc_drv_err(err);
}

FC_API CUresult cuMemAllocAsync(CUdeviceptr *p, size_t size, CUstream h)
{ return alloc_async("cuMemAllocAsync", 0, p, size, 0, NULL, h); }
FC_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t size, CUstream h)
{ return alloc_async("cuMemAllocAsync_ptsz", 1, p, size, 0, NULL, h); }
FC_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream h)
{ return alloc_async("cuMemAllocFromPoolAsync", 0, p, size, 1, pool, h); }
FC_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream h)
{ return alloc_async("cuMemAllocFromPoolAsync_ptsz", 1, p, size, 1, pool, h); }

static CUresult free_async(const char *name, int ptsz, CUdeviceptr p, CUstream h)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	atomic_fetch_add(&fc_cnt.free_calls, 1);
	return fc_drv_err(fc_free_async(dptr(p), s));
}

FC_API CUresult cuMemFreeAsync(CUdeviceptr p, CUstream h)
{ return free_async("cuMemFreeAsync", 0, p, h); }
FC_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream h)
{ return free_async("cuMemFreeAsync_ptsz", 1, p, h); }

/* Managed memory of the current context's device; FLAGS must say global
 * or host attachment. */
FC_API CUresult cuMemAllocManaged(CUdeviceptr *p, size_t size, unsigned int flags)
{
	void *v;
	int err;

	DRV_ENTER_ALLOC("cuMemAllocManaged");
	if (!p || !size || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	err = fc_managed_alloc(fc_tls_get()->ctx->dev, size, &v);
	if (!err)
		*p = (CUdeviceptr)(uintptr_t)v;
	return fc_drv_err(err);
}

/* Rows padded to 512 bytes, as cudaMallocPitch does here; the element size
 * must be 4, 8 or 16. A zero width or height allocates one block, as the
 * runtime does. */
FC_API CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height,
				   unsigned int esize)
{
	size_t pt, n;
	void *v;
	int err;

	DRV_ENTER_ALLOC("cuMemAllocPitch_v2");
	if (!p || !pitch || (esize != 4 && esize != 8 && esize != 16) ||
	    fc_pitch_size(width, height, &pt, &n))
		return CUDA_ERROR_INVALID_VALUE;
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	err = fc_dev_alloc(fc_tls_get()->ctx->dev, n, &v);
	if (!err) {
		*p = (CUdeviceptr)(uintptr_t)v;
		*pitch = pt;
	}
	return fc_drv_err(err);
}

/* The allocation (arena block, or mapping of reserved memory) holding p. */
FC_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr p)
{
	void *base;
	size_t size;
	int dev;

	DRV_ENTER("cuMemGetAddressRange_v2", 1);
	if (fc_mem_classify(dptr(p), 1, NULL) != FC_DEVICE || fc_dev_block(dptr(p), &dev, &base, &size))
		return CUDA_ERROR_NOT_FOUND;
	if (pbase)
		*pbase = (CUdeviceptr)(uintptr_t)base;
	if (psize)
		*psize = size;
	return CUDA_SUCCESS;
}

FC_API CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
	size_t f, t;

	DRV_ENTER("cuMemGetInfo_v2", 1);
	fc_dev_meminfo(fc_tls_get()->ctx->dev, &f, &t);
	if (free_b)
		*free_b = f;
	if (total)
		*total = t;
	return CUDA_SUCCESS;
}

FC_API CUresult cuMemAllocHost_v2(void **pp, size_t size)
{
	DRV_ENTER_ALLOC("cuMemAllocHost_v2");
	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_drv_err(fc_host_alloc(size, 0, pp));
}

FC_API CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
	DRV_ENTER_ALLOC("cuMemHostAlloc");
	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_drv_err(fc_host_alloc(size, flags, pp));
}

FC_API CUresult cuMemFreeHost(void *p)
{
	DRV_ENTER("cuMemFreeHost", 1);
	return fc_host_free(p) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

FC_API CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
	DRV_ENTER("cuMemHostRegister_v2", 1);
	return fc_drv_err(fc_host_register(p, size, flags));
}

FC_API CUresult cuMemHostUnregister(void *p)
{
	DRV_ENTER("cuMemHostUnregister", 1);
	return fc_drv_err(fc_host_unregister(p));
}

/* Writes one pointer attribute; -EINVAL when ptr is not CUDA memory. */
static int ptr_attr(CUpointer_attribute a, CUdeviceptr ptr, void *data)
{
	void *base = NULL;
	size_t size = 0;
	int dev = 0, kind;
	struct fc_hostrange *h;

	kind = fc_mem_classify(dptr(ptr), 1, &dev);
	if (kind < 0 || kind == FC_PAGEABLE)
		return -EINVAL;
	if (kind == FC_DEVICE) {
		fc_dev_block(dptr(ptr), &dev, &base, &size);
	} else {
		pthread_mutex_lock(&fc.lock);
		h = fc_host_find_locked(dptr(ptr));
		if (h) {
			base = h->base;
			size = h->size;
		}
		pthread_mutex_unlock(&fc.lock);
	}
	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = &fc.dev[dev].ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = kind == FC_PINNED ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = ptr;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (kind == FC_DEVICE)
			return -EINVAL;
		*(void **)data = dptr(ptr);
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(unsigned int *)data = kind == FC_MANAGED;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = dev;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(unsigned int *)data = 1;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = (unsigned long long)(uintptr_t)base;
		break;
	default:
		return -ENOTSUP;
	}
	return 0;
}

FC_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr ptr)
{
	DRV_ENTER("cuPointerGetAttribute", 0);
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_drv_err(ptr_attr(a, ptr, data));
}

/* Unlike cuPointerGetAttribute, host memory unknown to CUDA is no error:
 * its attributes read as zero (memory type 0, not managed). */
FC_API CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
				       CUdeviceptr ptr)
{
	unsigned i;

	DRV_ENTER("cuPointerGetAttributes", 0);
	if (!attrs || !data)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < n; i++) {
		int err = ptr_attr(attrs[i], ptr, data[i]);

		if (err == -ENOTSUP)
			return CUDA_ERROR_INVALID_VALUE;
		if (!err)
			continue;
		switch (attrs[i]) {
		case CU_POINTER_ATTRIBUTE_CONTEXT:
		case CU_POINTER_ATTRIBUTE_HOST_POINTER:
			*(void **)data[i] = NULL;
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
			*(CUdeviceptr *)data[i] = 0;
			break;
		case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
			*(size_t *)data[i] = 0;
			break;
		case CU_POINTER_ATTRIBUTE_BUFFER_ID:
			*(unsigned long long *)data[i] = 0;
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
			*(int *)data[i] = -2;
			break;
		default:
			*(unsigned int *)data[i] = 0;
			break;
		}
	}
	return CUDA_SUCCESS;
}

/* ---- copies ---- */

static CUresult copy_any(const char *name, int ptsz, int sync, void *dst, const void *src,
			 size_t n, int kind, CUstream h)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	return fc_drv_err(fc_copy(dst, src, n, kind, s, sync));
}

#define H2D cudaMemcpyHostToDevice
#define D2H cudaMemcpyDeviceToHost
#define D2D cudaMemcpyDeviceToDevice
#define ANY cudaMemcpyDefault

FC_API CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{ return copy_any("cuMemcpyHtoD_v2", 0, 1, dptr(d), s, n, H2D, NULL); }
FC_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n)
{ return copy_any("cuMemcpyHtoD_v2_ptds", 1, 1, dptr(d), s, n, H2D, NULL); }
FC_API CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpyDtoH_v2", 0, 1, d, dptr(s), n, D2H, NULL); }
FC_API CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpyDtoH_v2_ptds", 1, 1, d, dptr(s), n, D2H, NULL); }
FC_API CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpyDtoD_v2", 0, 1, dptr(d), dptr(s), n, D2D, NULL); }
FC_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpyDtoD_v2_ptds", 1, 1, dptr(d), dptr(s), n, D2D, NULL); }
FC_API CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpy", 0, 1, dptr(d), dptr(s), n, ANY, NULL); }
FC_API CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpy_ptds", 1, 1, dptr(d), dptr(s), n, ANY, NULL); }

FC_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream h)
{ return copy_any("cuMemcpyHtoDAsync_v2", 0, 0, dptr(d), s, n, H2D, h); }
FC_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream h)
{ return copy_any("cuMemcpyHtoDAsync_v2_ptsz", 1, 0, dptr(d), s, n, H2D, h); }
FC_API CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyDtoHAsync_v2", 0, 0, d, dptr(s), n, D2H, h); }
FC_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyDtoHAsync_v2_ptsz", 1, 0, d, dptr(s), n, D2H, h); }
FC_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyDtoDAsync_v2", 0, 0, dptr(d), dptr(s), n, D2D, h); }
FC_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyDtoDAsync_v2_ptsz", 1, 0, dptr(d), dptr(s), n, D2D, h); }
FC_API CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyAsync", 0, 0, dptr(d), dptr(s), n, ANY, h); }
FC_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyAsync_ptsz", 1, 0, dptr(d), dptr(s), n, ANY, h); }

/* The 13.0 batch (no failIdx): refuses the legacy stream and a zero
 * srcAccessOrder; one counted copy per entry. */
static CUresult batch_any(const char *name, int ptsz, CUdeviceptr *dsts, CUdeviceptr *srcs,
			  size_t *sizes, size_t count, CUmemcpyAttributes *attrs,
			  size_t *idxs, size_t nattrs, CUstream h)
{
	struct CUstream_st *s;
	size_t i;
	int err = 0;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	if (fc_stream_is_legacy(s) || !count || !dsts || !srcs || !sizes || !attrs ||
	    !idxs || !nattrs || nattrs > count || idxs[0] != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < nattrs; i++)
		if (attrs[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID ||
		    (i && idxs[i] <= idxs[i - 1]) || idxs[i] >= count)
			return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < count && !err; i++)
		err = fc_copy(dptr(dsts[i]), dptr(srcs[i]), sizes[i], ANY, s, 0);
	return fc_drv_err(err);
}

FC_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
				      CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, CUstream h)
{ return batch_any("cuMemcpyBatchAsync_v2", 0, dsts, srcs, sizes, count, attrs, idxs, nattrs, h); }
FC_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
					   CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, CUstream h)
{ return batch_any("cuMemcpyBatchAsync_v2_ptsz", 1, dsts, srcs, sizes, count, attrs, idxs, nattrs, h); }

static CUresult memset_any(const char *name, int ptsz, int sync, CUdeviceptr d, unsigned char v,
			   size_t n, CUstream h)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	return fc_drv_err(fc_memset(dptr(d), v, n, s, sync));
}

FC_API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{ return memset_any("cuMemsetD8_v2", 0, 1, d, v, n, NULL); }
FC_API CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream h)
{ return memset_any("cuMemsetD8Async", 0, 0, d, v, n, h); }
FC_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream h)
{ return memset_any("cuMemsetD8Async_ptsz", 1, 0, d, v, n, h); }

/* Element memsets (16- and 32-bit) and pitched ones. */
static CUresult memset2d_any(const char *name, int ptsz, int sync, CUdeviceptr d, size_t pitch,
			     unsigned v, unsigned esize, size_t w, size_t h, CUstream hs)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(hs, ptsz, s);
	return fc_drv_err(fc_memset2d(dptr(d), pitch, v, esize, w, h, s, sync));
}

FC_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n)
{ return memset2d_any("cuMemsetD8_v2_ptds", 1, 1, d, 0, v, 1, n, 1, NULL); }
FC_API CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n)
{ return memset2d_any("cuMemsetD16_v2", 0, 1, d, 0, v, 2, n, 1, NULL); }
FC_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n)
{ return memset2d_any("cuMemsetD16_v2_ptds", 1, 1, d, 0, v, 2, n, 1, NULL); }
FC_API CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n)
{ return memset2d_any("cuMemsetD32_v2", 0, 1, d, 0, v, 4, n, 1, NULL); }
FC_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n)
{ return memset2d_any("cuMemsetD32_v2_ptds", 1, 1, d, 0, v, 4, n, 1, NULL); }
FC_API CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream h)
{ return memset2d_any("cuMemsetD16Async", 0, 0, d, 0, v, 2, n, 1, h); }
FC_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream h)
{ return memset2d_any("cuMemsetD16Async_ptsz", 1, 0, d, 0, v, 2, n, 1, h); }
FC_API CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream h)
{ return memset2d_any("cuMemsetD32Async", 0, 0, d, 0, v, 4, n, 1, h); }
FC_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream h)
{ return memset2d_any("cuMemsetD32Async_ptsz", 1, 0, d, 0, v, 4, n, 1, h); }
FC_API CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h)
{ return memset2d_any("cuMemsetD2D8_v2", 0, 1, d, pitch, v, 1, w, h, NULL); }
FC_API CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h)
{ return memset2d_any("cuMemsetD2D16_v2", 0, 1, d, pitch, v, 2, w, h, NULL); }
FC_API CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h)
{ return memset2d_any("cuMemsetD2D32_v2", 0, 1, d, pitch, v, 4, w, h, NULL); }
FC_API CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream hs)
{ return memset2d_any("cuMemsetD2D8Async", 0, 0, d, pitch, v, 1, w, h, hs); }
FC_API CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream hs)
{ return memset2d_any("cuMemsetD2D16Async", 0, 0, d, pitch, v, 2, w, h, hs); }
FC_API CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream hs)
{ return memset2d_any("cuMemsetD2D32Async", 0, 0, d, pitch, v, 4, w, h, hs); }

/* One side of a CUDA_MEMCPY2D: its start address, or NULL for an array or
 * an unknown memory type (not emulated). */
static void *side_ptr(CUmemorytype t, const void *host, CUdeviceptr dev, size_t x, size_t y,
		      size_t pitch)
{
	const char *base = t == CU_MEMORYTYPE_HOST ? host
			   : t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED ? dptr(dev)
			   : NULL;

	return base ? (void *)(uintptr_t)(base + y * pitch + x) : NULL;
}

/* cuMemcpy2D*: the memory types give the direction; UNIFIED infers it. */
static CUresult copy2d_any(const char *name, int ptsz, int sync, const CUDA_MEMCPY2D *p, CUstream h)
{
	struct CUstream_st *s;
	void *src, *dst;
	int kind;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	src = side_ptr(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcPitch);
	dst = side_ptr(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstPitch);
	if (!src || !dst)
		return p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY
		       ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
	if (p->srcMemoryType == CU_MEMORYTYPE_UNIFIED || p->dstMemoryType == CU_MEMORYTYPE_UNIFIED)
		kind = ANY;
	else if (p->srcMemoryType == CU_MEMORYTYPE_HOST)
		kind = p->dstMemoryType == CU_MEMORYTYPE_HOST ? cudaMemcpyHostToHost : H2D;
	else
		kind = p->dstMemoryType == CU_MEMORYTYPE_HOST ? D2H : D2D;
	return fc_drv_err(fc_copy2d(dst, p->dstPitch, src, p->srcPitch, p->WidthInBytes, p->Height,
				    kind, s, sync));
}

FC_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{ return copy2d_any("cuMemcpy2D_v2", 0, 1, p, NULL); }
FC_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p)
{ return copy2d_any("cuMemcpy2D_v2_ptds", 1, 1, p, NULL); }
FC_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p)
{ return copy2d_any("cuMemcpy2DUnaligned_v2", 0, 1, p, NULL); }
FC_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p)
{ return copy2d_any("cuMemcpy2DUnaligned_v2_ptds", 1, 1, p, NULL); }
FC_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream h)
{ return copy2d_any("cuMemcpy2DAsync_v2", 0, 0, p, h); }
FC_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream h)
{ return copy2d_any("cuMemcpy2DAsync_v2_ptsz", 1, 0, p, h); }

/* ---- host functions and stream queries ---- */

static CUresult host_func(const char *name, int ptsz, CUstream h, CUhostFn fn, void *arg)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	return fc_drv_err(fc_hostfn(s, fn, arg));
}

FC_API CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *arg)
{ return host_func("cuLaunchHostFunc", 0, h, fn, arg); }
FC_API CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void *arg)
{ return host_func("cuLaunchHostFunc_ptsz", 1, h, fn, arg); }

static CUresult add_callback(const char *name, int ptsz, CUstream h, CUstreamCallback cb, void *arg,
			     unsigned flags)
{
	struct CUstream_st *s;
	cudaStreamCallback_t rcb;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	if (flags || !cb)
		return CUDA_ERROR_INVALID_VALUE;
	/* Same ABI: the status argument is an int-sized enum either way. */
	memcpy(&rcb, &cb, sizeof(rcb));
	return fc_drv_err(fc_stream_callback(s, h, rcb, arg));
}

FC_API CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void *arg, unsigned int flags)
{ return add_callback("cuStreamAddCallback", 0, h, cb, arg, flags); }
FC_API CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void *arg, unsigned int flags)
{ return add_callback("cuStreamAddCallback_ptsz", 1, h, cb, arg, flags); }

/* WHAT: 0 priority, 1 flags, 2 id. */
static CUresult stream_get(const char *name, int ptsz, CUstream h, int what, void *out)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (what == 0)
		*(int *)out = fc_stream_priority(s);
	else if (what == 1)
		fc_stream_flags(s, out);
	else
		*(unsigned long long *)out = fc_stream_id(s);
	return CUDA_SUCCESS;
}

FC_API CUresult cuStreamGetPriority(CUstream h, int *p)
{ return stream_get("cuStreamGetPriority", 0, h, 0, p); }
FC_API CUresult cuStreamGetPriority_ptsz(CUstream h, int *p)
{ return stream_get("cuStreamGetPriority_ptsz", 1, h, 0, p); }
FC_API CUresult cuStreamGetFlags(CUstream h, unsigned int *p)
{ return stream_get("cuStreamGetFlags", 0, h, 1, p); }
FC_API CUresult cuStreamGetFlags_ptsz(CUstream h, unsigned int *p)
{ return stream_get("cuStreamGetFlags_ptsz", 1, h, 1, p); }
FC_API CUresult cuStreamGetId(CUstream h, unsigned long long *p)
{ return stream_get("cuStreamGetId", 0, h, 2, p); }
FC_API CUresult cuStreamGetId_ptsz(CUstream h, unsigned long long *p)
{ return stream_get("cuStreamGetId_ptsz", 1, h, 2, p); }

/* ---- streams ---- */

FC_API CUresult cuStreamCreate(CUstream *p, unsigned int flags)
{
	DRV_ENTER("cuStreamCreate", 1);
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_drv_err(fc_stream_create(fc_tls_get()->ctx->dev, flags, 0, p));
}

FC_API CUresult cuStreamCreateWithPriority(CUstream *p, unsigned int flags, int prio)
{
	DRV_ENTER("cuStreamCreateWithPriority", 1);
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_drv_err(fc_stream_create(fc_tls_get()->ctx->dev, flags, prio, p));
}

FC_API CUresult cuStreamDestroy_v2(CUstream h)
{
	struct CUstream_st *s;

	DRV_ENTER("cuStreamDestroy_v2", 1);
	if ((uintptr_t)h <= 2)
		return CUDA_ERROR_INVALID_HANDLE;
	DRV_STREAM(h, 0, s);
	return fc_drv_err(fc_stream_destroy(s));
}

static CUresult stream_sync(const char *name, int ptsz, CUstream h)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	return fc_drv_err(fc_stream_sync(s));
}

static CUresult stream_query(const char *name, int ptsz, CUstream h)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	return fc_drv_err(fc_stream_query(s));
}

FC_API CUresult cuStreamSynchronize(CUstream h) { return stream_sync("cuStreamSynchronize", 0, h); }
FC_API CUresult cuStreamSynchronize_ptsz(CUstream h) { return stream_sync("cuStreamSynchronize_ptsz", 1, h); }
FC_API CUresult cuStreamQuery(CUstream h) { return stream_query("cuStreamQuery", 0, h); }
FC_API CUresult cuStreamQuery_ptsz(CUstream h) { return stream_query("cuStreamQuery_ptsz", 1, h); }

static CUresult stream_wait(const char *name, int ptsz, CUstream h, CUevent e)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	return fc_drv_err(fc_stream_wait_event(s, e));
}

FC_API CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags)
{ (void)flags; return stream_wait("cuStreamWaitEvent", 0, h, e); }
FC_API CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags)
{ (void)flags; return stream_wait("cuStreamWaitEvent_ptsz", 1, h, e); }

static CUresult capture_info(const char *name, int ptsz, CUstream h, CUstreamCaptureStatus *st,
			     cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
			     const CUgraphEdgeData **edges, size_t *ndeps)
{
	struct CUstream_st *s;
	unsigned long long cid = 0;
	int c;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	c = fc_capture_status(s, &cid, graph);
	*st = c ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	if (id)
		*id = cid;
	if (deps)
		*deps = NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = 0;
	return CUDA_SUCCESS;
}

FC_API CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st)
{ return capture_info("cuStreamIsCapturing", 0, h, st, NULL, NULL, NULL, NULL, NULL); }
FC_API CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st)
{ return capture_info("cuStreamIsCapturing_ptsz", 1, h, st, NULL, NULL, NULL, NULL, NULL); }
FC_API CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
					  CUgraph *graph, const CUgraphNode **deps,
					  const CUgraphEdgeData **edges, size_t *ndeps)
{ return capture_info("cuStreamGetCaptureInfo_v3", 0, h, st, id, graph, deps, edges, ndeps); }
FC_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
					       CUgraph *graph, const CUgraphNode **deps,
					       const CUgraphEdgeData **edges, size_t *ndeps)
{ return capture_info("cuStreamGetCaptureInfo_v3_ptsz", 1, h, st, id, graph, deps, edges, ndeps); }

static CUresult begin_capture(const char *name, int ptsz, CUstream h)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	return fc_drv_err(fc_capture_begin(s, NULL));
}

FC_API CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode)
{ (void)mode; return begin_capture("cuStreamBeginCapture_v2", 0, h); }
FC_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode)
{ (void)mode; return begin_capture("cuStreamBeginCapture_v2_ptsz", 1, h); }

static CUresult end_capture(const char *name, int ptsz, CUstream h, CUgraph *g)
{
	struct CUstream_st *s;
	int err;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	err = fc_capture_end(s, g);
	return err == -EPERM ? CUDA_ERROR_ILLEGAL_STATE : fc_drv_err(err);
}

FC_API CUresult cuStreamEndCapture(CUstream h, CUgraph *g)
{ return end_capture("cuStreamEndCapture", 0, h, g); }
FC_API CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *g)
{ return end_capture("cuStreamEndCapture_ptsz", 1, h, g); }

/* ---- events ---- */

FC_API CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
	DRV_ENTER("cuEventCreate", 1);
	if (!e)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_drv_err(fc_event_create(flags, e));
}

FC_API CUresult cuEventDestroy_v2(CUevent e)
{
	DRV_ENTER("cuEventDestroy_v2", 1);
	return fc_drv_err(fc_event_destroy(e));
}

static CUresult event_record(const char *name, int ptsz, CUevent e, CUstream h)
{
	struct CUstream_st *s;

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	return fc_drv_err(fc_event_record(e, s));
}

FC_API CUresult cuEventRecord(CUevent e, CUstream h) { return event_record("cuEventRecord", 0, e, h); }
FC_API CUresult cuEventRecord_ptsz(CUevent e, CUstream h) { return event_record("cuEventRecord_ptsz", 1, e, h); }

FC_API CUresult cuEventQuery(CUevent e)
{
	DRV_ENTER("cuEventQuery", 1);
	return fc_drv_err(fc_event_query(e));
}

FC_API CUresult cuEventSynchronize(CUevent e)
{
	DRV_ENTER("cuEventSynchronize", 1);
	return fc_drv_err(fc_event_sync(e));
}

FC_API CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b)
{
	DRV_ENTER("cuEventElapsedTime_v2", 1);
	return fc_drv_err(fc_event_elapsed(ms, a, b));
}

/* ---- errors ---- */

#define DRV_ERRORS(X) \
	X(CUDA_SUCCESS, "no error") \
	X(CUDA_ERROR_INVALID_VALUE, "invalid argument") \
	X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory") \
	X(CUDA_ERROR_NOT_INITIALIZED, "initialization error") \
	X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected") \
	X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") \
	X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context") \
	X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle") \
	X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid") \
	X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device") \
	X(CUDA_ERROR_NOT_FOUND, "named symbol not found") \
	X(CUDA_ERROR_NOT_READY, "device not ready") \
	X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
	X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
	X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
	X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped") \
	X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region") \
	X(CUDA_ERROR_UNKNOWN, "unknown error")

FC_API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define X(c, s) case c: *pStr = s; return CUDA_SUCCESS;
	DRV_ERRORS(X)
#undef X
	default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
	}
}

FC_API CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define X(c, s) case c: *pStr = #c; return CUDA_SUCCESS;
	DRV_ERRORS(X)
#undef X
	default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
	}
}

/* ---- cuGetProcAddress ---- */

typedef void (*fc_fn)(void);

/* A base name, the oldest CUDA version it answers, the default entry and
 * the per-thread-default-stream entry (NULL when there is none). */
struct fc_proc {
	const char *name;
	int min_version;
	fc_fn fn;
	fc_fn fn_ptsz;
};

#define P(n, v, f, fp) { n, v, (fc_fn)(f), (fc_fn)(fp) }

static const struct fc_proc procs[] = {
	P("cuInit", 0, cuInit, NULL),
	P("cuDriverGetVersion", 0, cuDriverGetVersion, NULL),
	P("cuDeviceGet", 0, cuDeviceGet, NULL),
	P("cuDeviceGetCount", 0, cuDeviceGetCount, NULL),
	P("cuDeviceGetName", 0, cuDeviceGetName, NULL),
	P("cuDeviceGetAttribute", 0, cuDeviceGetAttribute, NULL),
	P("cuDeviceTotalMem", 0, cuDeviceTotalMem_v2, NULL),
	P("cuDevicePrimaryCtxRetain", 0, cuDevicePrimaryCtxRetain, NULL),
	P("cuDevicePrimaryCtxRelease", 0, cuDevicePrimaryCtxRelease_v2, NULL),
	P("cuCtxGetCurrent", 0, cuCtxGetCurrent, NULL),
	P("cuCtxSetCurrent", 0, cuCtxSetCurrent, NULL),
	P("cuCtxGetId", 0, cuCtxGetId, NULL),
	P("cuCtxGetDevice", 0, cuCtxGetDevice, NULL),
	P("cuCtxSynchronize", 0, cuCtxSynchronize, NULL),
	P("cuCtxPushCurrent", 0, cuCtxPushCurrent_v2, NULL),
	P("cuCtxPopCurrent", 0, cuCtxPopCurrent_v2, NULL),
	P("cuCtxGetApiVersion", 0, cuCtxGetApiVersion, NULL),
	P("cuDevicePrimaryCtxGetState", 0, cuDevicePrimaryCtxGetState, NULL),
	P("cuMemAlloc", 0, cuMemAlloc_v2, NULL),
	P("cuMemFree", 0, cuMemFree_v2, NULL),
	P("cuMemGetInfo", 0, cuMemGetInfo_v2, NULL),
	P("cuMemAllocPitch", 0, cuMemAllocPitch_v2, NULL),
	P("cuMemAllocManaged", 0, cuMemAllocManaged, NULL),
	P("cuMemAllocAsync", 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
	P("cuMemFreeAsync", 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
	P("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
	P("cuMemAllocHost", 0, cuMemAllocHost_v2, NULL),
	P("cuMemHostAlloc", 0, cuMemHostAlloc, NULL),
	P("cuMemGetAddressRange", 0, cuMemGetAddressRange_v2, NULL),
	P("cuMemGetAllocationGranularity", 0, cuMemGetAllocationGranularity, NULL),
	P("cuMemAddressReserve", 0, cuMemAddressReserve, NULL),
	P("cuMemAddressFree", 0, cuMemAddressFree, NULL),
	P("cuMemCreate", 0, cuMemCreate, NULL),
	P("cuMemRelease", 0, cuMemRelease, NULL),
	P("cuMemMap", 0, cuMemMap, NULL),
	P("cuMemUnmap", 0, cuMemUnmap, NULL),
	P("cuMemSetAccess", 0, cuMemSetAccess, NULL),
	P("cuMemGetAccess", 0, cuMemGetAccess, NULL),
	P("cuMemRetainAllocationHandle", 0, cuMemRetainAllocationHandle, NULL),
	P("cuMemGetAllocationPropertiesFromHandle", 0, cuMemGetAllocationPropertiesFromHandle, NULL),
	P("cuMemFreeHost", 0, cuMemFreeHost, NULL),
	P("cuMemHostRegister", 0, cuMemHostRegister_v2, NULL),
	P("cuMemHostUnregister", 0, cuMemHostUnregister, NULL),
	P("cuPointerGetAttribute", 0, cuPointerGetAttribute, NULL),
	P("cuPointerGetAttributes", 0, cuPointerGetAttributes, NULL),
	P("cuMemcpyHtoD", 0, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
	P("cuMemcpyDtoH", 0, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
	P("cuMemcpyDtoD", 0, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
	P("cuMemcpy", 0, cuMemcpy, cuMemcpy_ptds),
	P("cuMemcpyHtoDAsync", 0, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
	P("cuMemcpyDtoHAsync", 0, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
	P("cuMemcpyDtoDAsync", 0, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
	P("cuMemcpyAsync", 0, cuMemcpyAsync, cuMemcpyAsync_ptsz),
	P("cuMemcpyBatchAsync", 13000, cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz),
	P("cuMemsetD8", 0, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
	P("cuMemsetD16", 0, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
	P("cuMemsetD32", 0, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
	P("cuMemsetD16Async", 0, cuMemsetD16Async, cuMemsetD16Async_ptsz),
	P("cuMemsetD32Async", 0, cuMemsetD32Async, cuMemsetD32Async_ptsz),
	P("cuMemsetD2D8", 0, cuMemsetD2D8_v2, NULL),
	P("cuMemsetD2D16", 0, cuMemsetD2D16_v2, NULL),
	P("cuMemsetD2D32", 0, cuMemsetD2D32_v2, NULL),
	P("cuMemsetD2D8Async", 0, cuMemsetD2D8Async, NULL),
	P("cuMemsetD2D16Async", 0, cuMemsetD2D16Async, NULL),
	P("cuMemsetD2D32Async", 0, cuMemsetD2D32Async, NULL),
	P("cuMemcpy2D", 0, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds),
	P("cuMemcpy2DUnaligned", 0, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds),
	P("cuMemcpy2DAsync", 0, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz),
	P("cuLaunchHostFunc", 0, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),
	P("cuStreamAddCallback", 0, cuStreamAddCallback, cuStreamAddCallback_ptsz),
	P("cuStreamGetPriority", 0, cuStreamGetPriority, cuStreamGetPriority_ptsz),
	P("cuStreamGetFlags", 0, cuStreamGetFlags, cuStreamGetFlags_ptsz),
	P("cuStreamGetId", 0, cuStreamGetId, cuStreamGetId_ptsz),
	P("cuMemsetD8Async", 0, cuMemsetD8Async, cuMemsetD8Async_ptsz),
	P("cuStreamCreate", 0, cuStreamCreate, NULL),
	P("cuStreamCreateWithPriority", 0, cuStreamCreateWithPriority, NULL),
	P("cuStreamDestroy", 0, cuStreamDestroy_v2, NULL),
	P("cuStreamSynchronize", 0, cuStreamSynchronize, cuStreamSynchronize_ptsz),
	P("cuStreamQuery", 0, cuStreamQuery, cuStreamQuery_ptsz),
	P("cuStreamWaitEvent", 0, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
	P("cuStreamIsCapturing", 0, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
	P("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz),
	P("cuStreamBeginCapture", 0, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
	P("cuStreamEndCapture", 0, cuStreamEndCapture, cuStreamEndCapture_ptsz),
	P("cuEventCreate", 0, cuEventCreate, NULL),
	P("cuEventDestroy", 0, cuEventDestroy_v2, NULL),
	P("cuEventRecord", 0, cuEventRecord, cuEventRecord_ptsz),
	P("cuEventQuery", 0, cuEventQuery, NULL),
	P("cuEventSynchronize", 0, cuEventSynchronize, NULL),
	P("cuEventElapsedTime", 0, cuEventElapsedTime_v2, NULL),
	P("cuModuleLoadData", 0, cuModuleLoadData, NULL),
	P("cuModuleLoadDataEx", 0, cuModuleLoadDataEx, NULL),
	P("cuModuleUnload", 0, cuModuleUnload, NULL),
	P("cuModuleGetFunction", 0, cuModuleGetFunction, NULL),
	P("cuLaunchKernel", 0, cuLaunchKernel, cuLaunchKernel_ptsz),
	P("cuGetErrorString", 0, cuGetErrorString, NULL),
	P("cuGetErrorName", 0, cuGetErrorName, NULL),
	P("cuGetProcAddress", 12000, cuGetProcAddress_v2, NULL),
	P("cuGetProcAddress", 0, cuGetProcAddress, NULL),
};

/* A name may have several rows, newest first: the first row whose version
 * the caller reaches answers. */
int fc_proc_lookup(const char *sym, int version, unsigned long long flags, void **pfn)
{
	size_t i;
	int known = 0;
	fc_fn fn;

	for (i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].name, sym) != 0)
			continue;
		known = 1;
		if (version < procs[i].min_version)
			continue;
		fn = procs[i].fn;
		if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && procs[i].fn_ptsz)
			fn = procs[i].fn_ptsz;
		memcpy(pfn, &fn, sizeof(fn));
		return 0;
	}
	*pfn = NULL;
	return known ? -ERANGE : -ENOENT;
}

FC_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	int err;

	if (fc_api_enter("cuGetProcAddress_v2"))
		return CUDA_ERROR_UNKNOWN;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	err = fc_proc_lookup(symbol, cudaVersion, flags, pfn);
	if (status)
		*status = err == 0 ? CU_GET_PROC_ADDRESS_SUCCESS
			  : err == -ERANGE ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
			  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return err ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

/* The CUDA 11 form: no status; an unknown symbol or a version too old is
 * CUDA_ERROR_NOT_FOUND. */
FC_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	if (fc_api_enter("cuGetProcAddress"))
		return CUDA_ERROR_UNKNOWN;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_proc_lookup(symbol, cudaVersion, flags, pfn) ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}
