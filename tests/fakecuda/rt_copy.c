/*
 * rt_copy.c: the runtime's copies and memsets: linear, pitched, peer and
 * batched, synchronous and stream-ordered.
 */
#include "fakecuda.h"

#include <string.h>

/* ---- memsets ---- */

static cudaError_t memset_any(const char *name, int ptsz, int sync, void *p, int v, size_t n, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return fc_rt_reti(fc_memset(p, v, n, s, sync));
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
	const struct fc_rt_driver *d;
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if ((d = fc_rt_driver(ptsz)))
		return fc_rt_driver_copy(d, sync, dst, src, n, kind, h);
	return fc_rt_reti(fc_copy(dst, src, n, (int)kind, s, sync));
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

/* A peer copy needs no peer access; each pointer must lie on its device. */
static cudaError_t memcpy_peer(const char *name, int sync, void *dst, int ddev, const void *src,
			       int sdev, size_t n, cudaStream_t h)
{
	struct CUstream_st *s;
	int d = -1, e = -1;

	RT_ENTER(name);
	RT_STREAM(h, 0, s);
	if (ddev < 0 || ddev >= fc.cfg.devices || sdev < 0 || sdev >= fc.cfg.devices)
		return fc_rt_ret(cudaErrorInvalidDevice);
	if (n && (fc_mem_classify(dst, n, &d) != FC_DEVICE || d != ddev ||
		  fc_mem_classify(src, n, &e) != FC_DEVICE || e != sdev))
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_copy(dst, src, n, cudaMemcpyDeviceToDevice, s, sync));
}

FC_API cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t n)
{
	return memcpy_peer("cudaMemcpyPeer", 1, dst, dstDevice, src, srcDevice, n, 0);
}

FC_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				       size_t n, cudaStream_t h)
{
	return memcpy_peer("cudaMemcpyPeerAsync", 0, dst, dstDevice, src, srcDevice, n, h);
}

/* The 13.0 batch: unordered inside, stream-ordered as a whole (one stream
 * operation); refuses the legacy stream and a zero srcAccessOrder. */
static cudaError_t batch_any(const char *name, int ptsz, void *const *dsts, const void *const *srcs,
			     const size_t *sizes, size_t count, struct cudaMemcpyAttributes *attrs,
			     size_t *attrsIdxs, size_t numAttrs, cudaStream_t h)
{
	struct CUstream_st *s;
	size_t i;

	_Static_assert(offsetof(struct cudaMemcpyAttributes, srcAccessOrder) == 0, "the order comes first");

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (fc_stream_is_legacy(s) || !count || !dsts || !srcs || !sizes ||
	    !attrs || !attrsIdxs || !numAttrs || numAttrs > count || attrsIdxs[0] != 0)
		return fc_rt_ret(cudaErrorInvalidValue);
	for (i = 0; i < numAttrs; i++)
		if (attrs[i].srcAccessOrder == cudaMemcpySrcAccessOrderInvalid ||
		    (i && attrsIdxs[i] <= attrsIdxs[i - 1]) || attrsIdxs[i] >= count)
			return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_copy_batch(dsts, srcs, sizes, count, attrs, sizeof(*attrs), attrsIdxs, numAttrs, s));
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

/* ---- pitched copies and memsets ---- */

static cudaError_t memcpy2d_any(const char *name, int ptsz, int sync, void *dst, size_t dpitch,
				const void *src, size_t spitch, size_t width, size_t height,
				enum cudaMemcpyKind kind, cudaStream_t h)
{
	const struct fc_rt_driver *d;
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if ((d = fc_rt_driver(ptsz)))
		return fc_rt_driver_copy2d(d, sync, dst, dpitch, src, spitch, width, height, kind, h);
	return fc_rt_reti(fc_copy2d(dst, dpitch, src, spitch, width, height, (int)kind, s, sync));
}

FC_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
				size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return memcpy2d_any("cudaMemcpy2D", 0, 1, dst, dpitch, src, spitch, width, height, kind, 0);
}

FC_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return memcpy2d_any("cudaMemcpy2D_ptds", 1, 1, dst, dpitch, src, spitch, width, height, kind, 0);
}

FC_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind,
				     cudaStream_t h)
{
	return memcpy2d_any("cudaMemcpy2DAsync", 0, 0, dst, dpitch, src, spitch, width, height, kind, h);
}

FC_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
					  size_t width, size_t height, enum cudaMemcpyKind kind,
					  cudaStream_t h)
{
	return memcpy2d_any("cudaMemcpy2DAsync_ptsz", 1, 0, dst, dpitch, src, spitch, width, height, kind, h);
}

static cudaError_t memset2d_any(const char *name, int ptsz, int sync, void *p, size_t pitch,
				int v, size_t width, size_t height, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return fc_rt_reti(fc_memset2d(p, pitch, (unsigned)v & 0xff, 1, width, height, s, sync));
}

FC_API cudaError_t cudaMemset2D(void *p, size_t pitch, int v, size_t width, size_t height)
{
	return memset2d_any("cudaMemset2D", 0, 1, p, pitch, v, width, height, 0);
}

FC_API cudaError_t cudaMemset2D_ptds(void *p, size_t pitch, int v, size_t width, size_t height)
{
	return memset2d_any("cudaMemset2D_ptds", 1, 1, p, pitch, v, width, height, 0);
}

FC_API cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int v, size_t width, size_t height,
				     cudaStream_t h)
{
	return memset2d_any("cudaMemset2DAsync", 0, 0, p, pitch, v, width, height, h);
}

FC_API cudaError_t cudaMemset2DAsync_ptsz(void *p, size_t pitch, int v, size_t width, size_t height,
					  cudaStream_t h)
{
	return memset2d_any("cudaMemset2DAsync_ptsz", 1, 0, p, pitch, v, width, height, h);
}
