/*
 * drv_copy.c: the driver's copies and memsets: linear, batched and
 * pitched (CUDA_MEMCPY2D), synchronous and stream-ordered.
 */
#include "fakecuda.h"

#include <stddef.h>
#include <string.h>

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
{ return copy_any("cuMemcpyHtoD_v2", 0, 1, fc_ptr(d), s, n, H2D, NULL); }
FC_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n)
{ return copy_any("cuMemcpyHtoD_v2_ptds", 1, 1, fc_ptr(d), s, n, H2D, NULL); }
FC_API CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpyDtoH_v2", 0, 1, d, fc_ptr(s), n, D2H, NULL); }
FC_API CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpyDtoH_v2_ptds", 1, 1, d, fc_ptr(s), n, D2H, NULL); }
FC_API CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpyDtoD_v2", 0, 1, fc_ptr(d), fc_ptr(s), n, D2D, NULL); }
FC_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpyDtoD_v2_ptds", 1, 1, fc_ptr(d), fc_ptr(s), n, D2D, NULL); }
FC_API CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpy", 0, 1, fc_ptr(d), fc_ptr(s), n, ANY, NULL); }
FC_API CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n)
{ return copy_any("cuMemcpy_ptds", 1, 1, fc_ptr(d), fc_ptr(s), n, ANY, NULL); }

FC_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream h)
{ return copy_any("cuMemcpyHtoDAsync_v2", 0, 0, fc_ptr(d), s, n, H2D, h); }
FC_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream h)
{ return copy_any("cuMemcpyHtoDAsync_v2_ptsz", 1, 0, fc_ptr(d), s, n, H2D, h); }
FC_API CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyDtoHAsync_v2", 0, 0, d, fc_ptr(s), n, D2H, h); }
FC_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyDtoHAsync_v2_ptsz", 1, 0, d, fc_ptr(s), n, D2H, h); }
FC_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyDtoDAsync_v2", 0, 0, fc_ptr(d), fc_ptr(s), n, D2D, h); }
FC_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyDtoDAsync_v2_ptsz", 1, 0, fc_ptr(d), fc_ptr(s), n, D2D, h); }
FC_API CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyAsync", 0, 0, fc_ptr(d), fc_ptr(s), n, ANY, h); }
FC_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{ return copy_any("cuMemcpyAsync_ptsz", 1, 0, fc_ptr(d), fc_ptr(s), n, ANY, h); }

/* The 13.0 batch (no failIdx): refuses the legacy stream and a zero
 * srcAccessOrder; one stream operation, one counted copy per entry, each
 * source read as its srcAccessOrder says (fc_copy_batch). */
static CUresult batch_any(const char *name, int ptsz, CUdeviceptr *dsts, CUdeviceptr *srcs,
			  size_t *sizes, size_t count, CUmemcpyAttributes *attrs,
			  size_t *idxs, size_t nattrs, CUstream h)
{
	struct CUstream_st *s;
	size_t i;

	_Static_assert(offsetof(CUmemcpyAttributes, srcAccessOrder) == 0, "the order comes first");
	_Static_assert(sizeof(CUdeviceptr) == sizeof(void *), "UVA: a CUdeviceptr is a pointer");

	DRV_ENTER(name, 1);
	DRV_STREAM(h, ptsz, s);
	if (fc_stream_is_legacy(s) || !count || !dsts || !srcs || !sizes || !attrs ||
	    !idxs || !nattrs || nattrs > count || idxs[0] != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < nattrs; i++)
		if (attrs[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID ||
		    (i && idxs[i] <= idxs[i - 1]) || idxs[i] >= count)
			return CUDA_ERROR_INVALID_VALUE;
	return fc_drv_err(fc_copy_batch((void *const *)(void *)dsts, (const void *const *)(void *)srcs, sizes,
					count, attrs, sizeof(*attrs), idxs, nattrs, s));
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
	return fc_drv_err(fc_memset(fc_ptr(d), v, n, s, sync));
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
	return fc_drv_err(fc_memset2d(fc_ptr(d), pitch, v, esize, w, h, s, sync));
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
			   : t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED ? fc_ptr(dev)
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
