/*
 * drv_memory.c: the driver's memory: device, stream-ordered, managed and
 * pitched allocations, host memory, address ranges and pointer
 * attributes. (Virtual memory management is vmm.c.)
 */
#include "fakecuda.h"

#include <string.h>

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
	return fc_drv_err(fc_dev_free(fc_ptr(p)));
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
	return fc_drv_err(fc_free_async(fc_ptr(p), s));
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
	if (fc_mem_classify(fc_ptr(p), 1, NULL) != FC_DEVICE || fc_dev_block(fc_ptr(p), &dev, &base, &size))
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

/* Unified addressing: a page-locked host range's device address is its host address. */
FC_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
	DRV_ENTER("cuMemHostGetDevicePointer_v2", 1);
	if (!pdptr || flags || fc_mem_classify(p, 1, NULL) != FC_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
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

	kind = fc_mem_classify(fc_ptr(ptr), 1, &dev);
	if (kind < 0 || kind == FC_PAGEABLE)
		return -EINVAL;
	if (kind == FC_DEVICE) {
		fc_dev_block(fc_ptr(ptr), &dev, &base, &size);
	} else {
		pthread_mutex_lock(&fc.lock);
		h = fc_host_find_locked(fc_ptr(ptr));
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
		*(void **)data = fc_ptr(ptr);
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
