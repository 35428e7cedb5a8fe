/*
 * copy: the copy hooks, runtime and driver, contiguous, 2D, to a module
 * variable and batched. Each describes its call and makes one call down;
 * copy.h states the rules.
 */
#include <stdint.h>

#include "intercept/copy.h"

/* The family of entry points a copy came through; the per-thread form is a flag of its own. */
enum vp_fn {
	VP_RT_SYNC, VP_RT_ASYNC, VP_RT_2D, VP_RT_2D_ASYNC, VP_RT_SYM, VP_RT_SYM_ASYNC,
	VP_DRV_HTOD, VP_DRV_HTOD_ASYNC, VP_DRV_COPY, VP_DRV_COPY_ASYNC,
	VP_DRV_2D, VP_DRV_2DU, VP_DRV_2D_ASYNC,
};

/* One copy the program made: its description for the pool layer, and what it takes to forward it. */
struct vp_call {
	struct copy_call cc;    /* cc.arg points back here */
	enum vp_fn fn;
	enum cudaMemcpyKind kind;       /* runtime entries */
	size_t dpitch, spitch, width, height;   /* runtime 2D entries, as the program passed them */
	const CUDA_MEMCPY2D *p2d;       /* driver 2D entries */
	const void *symbol;     /* to-symbol entries */
	size_t offset;
};

/* One of the program's own batches, and what it takes to forward it. */
struct vp_batch {
	struct copy_batch cb;   /* cb.arg points back here */
	int pt;
	void *attrs;            /* struct cudaMemcpyAttributes * or CUmemcpyAttributes * */
	size_t *idxs, nattrs;
	void *stream;
};

/* One row of vp_forward's table: entry family fn calls name (or name##sfx, per-thread) with args. */
#define VP_FORWARD(fn, name, sfx, fail, args)                                                        \
	case fn:                                                                                     \
		r = VP_CALL_PT(pt, name, sfx, fail, args);                                           \
		break;

/* Forwards a copy to the real entry point it came through. Returns its status. */
static int vp_forward(void *arg)
{
	const struct vp_call *c = arg;
	void *dst = c->cc.dst;
	const void *src = c->cc.src, *sym = c->symbol;
	size_t n = c->cc.n, dp = c->dpitch, sp = c->spitch, w = c->width, h = c->height, off = c->offset;
	CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, s = (CUdeviceptr)(uintptr_t)src;
	const CUDA_MEMCPY2D *p = c->p2d;
	enum cudaMemcpyKind k = c->kind;
	CUstream st = c->cc.stream;
	int pt = c->cc.per_thread, r, outer = vp_inside;       /* a nested forward keeps its caller's guard */

	vp_inside = 1;
	switch (c->fn) {
	VP_FORWARD(VP_RT_SYNC, cudaMemcpy, _ptds, VP_NO_RT, (dst, src, n, k))
	VP_FORWARD(VP_RT_ASYNC, cudaMemcpyAsync, _ptsz, VP_NO_RT, (dst, src, n, k, st))
	VP_FORWARD(VP_RT_2D, cudaMemcpy2D, _ptds, VP_NO_RT, (dst, dp, src, sp, w, h, k))
	VP_FORWARD(VP_RT_2D_ASYNC, cudaMemcpy2DAsync, _ptsz, VP_NO_RT, (dst, dp, src, sp, w, h, k, st))
	VP_FORWARD(VP_RT_SYM, cudaMemcpyToSymbol, _ptds, VP_NO_RT, (sym, src, n, off, k))
	VP_FORWARD(VP_RT_SYM_ASYNC, cudaMemcpyToSymbolAsync, _ptsz, VP_NO_RT, (sym, src, n, off, k, st))
	VP_FORWARD(VP_DRV_HTOD, cuMemcpyHtoD_v2, _ptds, VP_NO_DRV, (d, src, n))
	VP_FORWARD(VP_DRV_HTOD_ASYNC, cuMemcpyHtoDAsync_v2, _ptsz, VP_NO_DRV, (d, src, n, st))
	VP_FORWARD(VP_DRV_COPY, cuMemcpy, _ptds, VP_NO_DRV, (d, s, n))
	VP_FORWARD(VP_DRV_COPY_ASYNC, cuMemcpyAsync, _ptsz, VP_NO_DRV, (d, s, n, st))
	VP_FORWARD(VP_DRV_2D, cuMemcpy2D_v2, _ptds, VP_NO_DRV, (p))
	VP_FORWARD(VP_DRV_2DU, cuMemcpy2DUnaligned_v2, _ptds, VP_NO_DRV, (p))
	VP_FORWARD(VP_DRV_2D_ASYNC, cuMemcpy2DAsync_v2, _ptsz, VP_NO_DRV, (p, st))
	default:
		r = c->cc.driver ? CUDA_ERROR_INVALID_VALUE : cudaErrorInvalidValue;
		break;
	}
	vp_inside = outer;
	return r;
}

/*
 * The pool's delivery of bytes [off, off + len) of a copy: the program's
 * plain host-to-device entry point of the same API and per-thread form,
 * asynchronous on the program's stream (a synchronous entry's stream:
 * legacy, or per-thread for _ptds), or synchronous when sync is set (for
 * a synchronous copy whose completion the pool could not wait for).
 */
static int vp_deliver(const struct vp_call *c, uint64_t off, uint64_t len, int sync)
{
	char *dst = (char *)c->cc.dst + off;
	const char *src = (const char *)c->cc.src + off;
	CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst;
	void *stream = c->cc.sync ? NULL : c->cc.stream;
	enum cudaMemcpyKind kind = c->kind == cudaMemcpyDefault ? cudaMemcpyDefault : cudaMemcpyHostToDevice;
	int pt = c->cc.per_thread;

	if (!c->cc.driver && sync)
		return VP_CALL_PT(pt, cudaMemcpy, _ptds, VP_NO_RT, (dst, src, len, kind));
	if (!c->cc.driver)
		return VP_CALL_PT(pt, cudaMemcpyAsync, _ptsz, VP_NO_RT, (dst, src, len, kind, stream));
	if (sync)
		return VP_CALL_PT(pt, cuMemcpyHtoD_v2, _ptds, VP_NO_DRV, (d, src, len));
	return VP_CALL_PT(pt, cuMemcpyHtoDAsync_v2, _ptsz, VP_NO_DRV, (d, src, len, stream));
}

static int vp_h2d(void *arg, uint64_t off, uint64_t len)
{
	return vp_deliver(arg, off, len, 0);
}

static int vp_h2d_sync(void *arg, uint64_t off, uint64_t len)
{
	return vp_deliver(arg, off, len, 1);
}

/* Fills in what every copy's description has: its entry point, its direction, the callbacks. */
static void vp_describe(struct vp_call *c, enum vp_fn fn, int pt, enum classify_dir dir)
{
	c->fn = fn;
	c->cc.dir = dir;
	c->cc.sync = fn == VP_RT_SYNC || fn == VP_RT_2D || fn == VP_RT_SYM || fn == VP_DRV_HTOD ||
		     fn == VP_DRV_COPY || fn == VP_DRV_2D || fn == VP_DRV_2DU;
	c->cc.per_thread = pt;
	c->cc.driver = fn >= VP_DRV_HTOD;
	c->cc.host_dst = fn >= VP_DRV_HTOD ? fn == VP_DRV_COPY || fn == VP_DRV_COPY_ASYNC
					   : c->kind == cudaMemcpyDeviceToHost || c->kind == cudaMemcpyHostToHost ||
					     c->kind == cudaMemcpyDefault;
	c->cc.forward = vp_forward;
	c->cc.h2d = vp_h2d;
	c->cc.h2d_sync = vp_h2d_sync;
	c->cc.arg = c;
}

/*
 * The one way down of a copy hook: under the re-entry guard, forward;
 * else start (vp_enter) and make the one call down with the guard set.
 */
#define VP_DOWN(call, forward)                                                                       \
	do {                                                                                         \
		int vp_err;                                                                          \
                                                                                                     \
		if (vp_inside)                                                                       \
			return (forward);                                                            \
		vp_enter();                                                                          \
		vp_inside = 1;                                                                       \
		vp_err = (call);                                                                     \
		vp_inside = 0;                                                                       \
		return vp_err;                                                                       \
	} while (0)

/* ---- runtime copies --------------------------------------------------------- */

/* The direction of a runtime copy of kind k. */
static enum classify_dir vp_rt_dir(enum cudaMemcpyKind k)
{
	return k == cudaMemcpyHostToDevice ? CL_DIR_H2D : k == cudaMemcpyDefault ? CL_DIR_INFER : CL_DIR_OTHER;
}

static int vp_rt_copy(enum vp_fn fn, int pt, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
		      cudaStream_t stream)
{
	struct vp_call c = { .kind = kind, .cc = { .dst = dst, .src = src, .n = n, .stream = stream } };

	vp_describe(&c, fn, pt, vp_rt_dir(kind));
	VP_DOWN(calls_copy(&c.cc), vp_forward(&c));
}

VP_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_copy(VP_RT_SYNC, 0, dst, src, n, kind, NULL));
}

VP_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_copy(VP_RT_SYNC, 1, dst, src, n, kind, NULL));
}

VP_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
				   cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_copy(VP_RT_ASYNC, 0, dst, src, n, kind, stream));
}

VP_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
					cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_copy(VP_RT_ASYNC, 1, dst, src, n, kind, stream));
}

/*
 * A 2D copy whose pitches equal its width (or of one row) is one
 * contiguous copy of width * height bytes, pooled like any other; any
 * other 2D host-to-device copy is counted and forwarded.
 */
static int vp_rt_2d(enum vp_fn fn, int pt, void *dst, size_t dpitch, const void *src, size_t spitch,
		    size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	struct vp_call c = { .kind = kind, .dpitch = dpitch, .spitch = spitch, .width = width, .height = height,
			     .cc = { .dst = dst, .src = src, .stream = stream } };

	vp_describe(&c, fn, pt, vp_rt_dir(kind));
	if (width && height > SIZE_MAX / width)
		return vp_forward(&c);
	c.cc.n = width * height;
	if (height <= 1 || (dpitch == width && spitch == width))
		VP_DOWN(calls_copy(&c.cc), vp_forward(&c));
	if (c.cc.dir != CL_DIR_H2D) {
		c.cc.n = 0;     /* its rows are not one range (calls_copy_other) */
		VP_DOWN(calls_copy_other(&c.cc), vp_forward(&c));
	}
	VP_DOWN(calls_copy_unpooled(&c.cc), vp_forward(&c));
}

VP_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
				size_t height, enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_2d(VP_RT_2D, 0, dst, dpitch, src, spitch, width, height, kind, NULL));
}

VP_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_2d(VP_RT_2D, 1, dst, dpitch, src, spitch, width, height, kind, NULL));
}

VP_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind,
				     cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t,
		      vp_rt_2d(VP_RT_2D_ASYNC, 0, dst, dpitch, src, spitch, width, height, kind, stream));
}

VP_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
					  size_t width, size_t height, enum cudaMemcpyKind kind,
					  cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t,
		      vp_rt_2d(VP_RT_2D_ASYNC, 1, dst, dpitch, src, spitch, width, height, kind, stream));
}

/* A copy to a module variable: forwarded, and counted when host-to-device. */
static int vp_rt_symbol(enum vp_fn fn, int pt, const void *symbol, const void *src, size_t count,
			size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	struct vp_call c = { .kind = kind, .symbol = symbol, .offset = offset,
			     .cc = { .src = src, .n = count, .stream = stream } };

	vp_describe(&c, fn, pt, vp_rt_dir(kind));
	VP_DOWN(calls_copy_unpooled(&c.cc), vp_forward(&c));
}

VP_API cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
				      enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_symbol(VP_RT_SYM, 0, symbol, src, count, offset, kind, NULL));
}

VP_API cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count,
					   size_t offset, enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_symbol(VP_RT_SYM, 1, symbol, src, count, offset, kind, NULL));
}

VP_API cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
					   size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_symbol(VP_RT_SYM_ASYNC, 0, symbol, src, count, offset, kind, stream));
}

VP_API cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count,
						size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_symbol(VP_RT_SYM_ASYNC, 1, symbol, src, count, offset, kind, stream));
}

/* ---- batches (runtime and driver) ------------------------------------------- */

/* Forwards a batch to the real entry point it came through. Returns its status. */
static int vp_forward_batch(void *arg)
{
	const struct vp_batch *b = arg;
	const struct copy_batch *cb = &b->cb;

	if (!cb->driver)
		return VP_CALL_PT(b->pt, cudaMemcpyBatchAsync, _ptsz, VP_NO_RT,
				  (cb->dsts, cb->srcs, cb->sizes, cb->count, b->attrs, b->idxs, b->nattrs, b->stream));
	return VP_CALL_PT(b->pt, cuMemcpyBatchAsync_v2, _ptsz, VP_NO_DRV,
			  ((CUdeviceptr *)cb->dsts, (CUdeviceptr *)cb->srcs, (size_t *)cb->sizes, cb->count,
			   b->attrs, b->idxs, b->nattrs, b->stream));
}

static int vp_batch(int driver, int pt, void *const *dsts, const void *const *srcs, const size_t *sizes,
		    size_t count, void *attrs, size_t *idxs, size_t nattrs, void *stream)
{
	struct vp_batch b = {
		.cb = { .dsts = dsts, .srcs = srcs, .sizes = sizes, .count = count, .driver = driver,
			.forward = vp_forward_batch },
		.pt = pt, .attrs = attrs, .idxs = idxs, .nattrs = nattrs, .stream = stream,
	};

	b.cb.arg = &b;
	VP_DOWN(calls_copy_batch(&b.cb), vp_forward_batch(&b));
}

VP_API cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes,
					size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
					size_t numAttrs, cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_batch(0, 0, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream));
}

VP_API cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs,
					     const size_t *sizes, size_t count,
					     struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
					     size_t numAttrs, cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_batch(0, 1, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream));
}

VP_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
				      CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
				      CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_batch(1, 0, (void *const *)dsts, (const void *const *)srcs, sizes, count,
					 attrs, attrsIdxs, numAttrs, stream));
}

VP_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
					   size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
					   size_t numAttrs, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_batch(1, 1, (void *const *)dsts, (const void *const *)srcs, sizes, count,
					 attrs, attrsIdxs, numAttrs, stream));
}

/* ---- driver copies ---------------------------------------------------------- */

static int vp_drv_copy(enum vp_fn fn, int pt, CUdeviceptr dst, const void *src, size_t n, CUstream stream,
		       enum classify_dir dir)
{
	struct vp_call c = { .cc = { .dst = (void *)(uintptr_t)dst, .src = src, .n = n, .stream = stream } };

	vp_describe(&c, fn, pt, dir);
	VP_DOWN(calls_copy(&c.cc), vp_forward(&c));
}

VP_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_HTOD, 0, dst, src, n, NULL, CL_DIR_H2D));
}

VP_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_HTOD, 1, dst, src, n, NULL, CL_DIR_H2D));
}

VP_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_HTOD_ASYNC, 0, dst, src, n, stream, CL_DIR_H2D));
}

VP_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_HTOD_ASYNC, 1, dst, src, n, stream, CL_DIR_H2D));
}

/* cuMemcpy and cuMemcpyAsync: unified addressing decides the direction. */
VP_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_COPY, 0, dst, (const void *)(uintptr_t)src, n, NULL, CL_DIR_INFER));
}

VP_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_COPY, 1, dst, (const void *)(uintptr_t)src, n, NULL, CL_DIR_INFER));
}

VP_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult,
		      vp_drv_copy(VP_DRV_COPY_ASYNC, 0, dst, (const void *)(uintptr_t)src, n, stream, CL_DIR_INFER));
}

VP_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult,
		      vp_drv_copy(VP_DRV_COPY_ASYNC, 1, dst, (const void *)(uintptr_t)src, n, stream, CL_DIR_INFER));
}

/* A driver 2D copy that is not host-to-device: forwarded, noted when it writes host memory. */
static int vp_drv_2d_other(struct vp_call *c)
{
	const CUDA_MEMCPY2D *p = c->p2d;

	c->cc.host_dst = p->dstMemoryType == CU_MEMORYTYPE_HOST || p->dstMemoryType == CU_MEMORYTYPE_UNIFIED;
	c->cc.dst = p->dstMemoryType == CU_MEMORYTYPE_HOST ? p->dstHost : (void *)(uintptr_t)p->dstDevice;
	VP_DOWN(calls_copy_other(&c->cc), vp_forward(c));
}

/*
 * A driver 2D copy: host (or unified host) to device (or unified device)
 * with pitches equal to the width (or one row) is one contiguous copy.
 * One with other pitches is counted only when plainly host-to-device
 * (host to device memory types), as it always was.
 */
static int vp_drv_2d(enum vp_fn fn, int pt, const CUDA_MEMCPY2D *p, CUstream stream)
{
	struct vp_call c = { .p2d = p, .cc = { .stream = stream } };
	enum classify_dir dir;
	const char *src;

	vp_describe(&c, fn, pt, CL_DIR_OTHER);
	if (!p)
		return vp_forward(&c);
	c.cc.host_dst = p->dstMemoryType == CU_MEMORYTYPE_UNIFIED;
	if (p->srcMemoryType == CU_MEMORYTYPE_HOST && p->dstMemoryType == CU_MEMORYTYPE_DEVICE)
		dir = CL_DIR_H2D;
	else if ((p->srcMemoryType == CU_MEMORYTYPE_HOST || p->srcMemoryType == CU_MEMORYTYPE_UNIFIED) &&
		 (p->dstMemoryType == CU_MEMORYTYPE_DEVICE || p->dstMemoryType == CU_MEMORYTYPE_UNIFIED))
		dir = CL_DIR_INFER;
	else
		return vp_drv_2d_other(&c);
	if (p->WidthInBytes && p->Height > SIZE_MAX / p->WidthInBytes)
		return vp_forward(&c);
	src = p->srcMemoryType == CU_MEMORYTYPE_HOST ? (const char *)p->srcHost
						     : (const char *)(uintptr_t)p->srcDevice;
	if (!src)
		return vp_forward(&c);
	c.cc.src = src + p->srcY * p->srcPitch + p->srcXInBytes;
	c.cc.dst = (void *)(uintptr_t)(p->dstDevice + p->dstY * p->dstPitch + p->dstXInBytes);
	c.cc.n = p->WidthInBytes * p->Height;
	c.cc.dir = dir;
	if (p->Height <= 1 || (p->srcPitch == p->WidthInBytes && p->dstPitch == p->WidthInBytes))
		VP_DOWN(calls_copy(&c.cc), vp_forward(&c));
	c.cc.dir = dir == CL_DIR_H2D ? CL_DIR_H2D : CL_DIR_OTHER;
	VP_DOWN(calls_copy_unpooled(&c.cc), vp_forward(&c));
}

VP_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2D, 0, p, NULL));
}

VP_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2D, 1, p, NULL));
}

VP_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2DU, 0, p, NULL));
}

VP_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2DU, 1, p, NULL));
}

VP_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2D_ASYNC, 0, p, stream));
}

VP_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2D_ASYNC, 1, p, stream));
}
