/*
 * drv_context.c: contexts of their own (cuCtxCreate_v4, cuCtxDestroy_v2)
 * beside each device's primary context, and which contexts are live.
 *
 * A created context is separate, as on a real driver: the arena
 * allocations made while it is current belong to it (core.c records the
 * owner), and a copy, memset or gather launch issued in one context that
 * touches device memory of another is refused (CUDA_ERROR_INVALID_VALUE at
 * the call; a faulted launch on the worker), counted in the report's
 * ctx_refusals. Its id (cuCtxGetId) differs from every other context's.
 * cuCtxDestroy waits for the device, frees the context's allocations and
 * pops it where it is current on the calling thread; the handle then
 * answers CUDA_ERROR_INVALID_CONTEXT. Streams, events and host memory are
 * not tied to a context (more lenient than CUDA).
 */
#include "fakecuda.h"

#include <stdlib.h>

#define FC_MAX_CTX 64

static struct CUctx_st *made[FC_MAX_CTX]; /* every created context, live or destroyed; under fc.lock */
static int nmade;

int fc_ctx_valid(CUcontext c)
{
	int d, i, ok = 0;

	if (!c)
		return 0;
	for (d = 0; d < fc.cfg.devices; d++)
		if (c == &fc.dev[d].ctx)
			return 1;
	pthread_mutex_lock(&fc.lock);
	for (i = 0; i < nmade; i++)
		if (c == made[i] && !c->destroyed)
			ok = 1;
	pthread_mutex_unlock(&fc.lock);
	return ok;
}

/* A new context on DEV, pushed on the calling thread's stack (current).
 * Scheduling flags and the other CU_CTX_* bits are accepted and ignored;
 * creation parameters (execution affinity, CIG) are not emulated. */
FC_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
	struct CUctx_st *c;
	struct fc_tls *t;

	DRV_ENTER("cuCtxCreate_v4", 0);
	if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK) || (flags & CU_CTX_SCHED_MASK) > CU_CTX_SCHED_BLOCKING_SYNC)
		return CUDA_ERROR_INVALID_VALUE;
	if (params)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	t = fc_tls_get();
	if (t->ctx && t->ctx_depth == FC_CTX_STACK)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&fc.lock);
	if (nmade == FC_MAX_CTX) {
		pthread_mutex_unlock(&fc.lock);
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	c->dev = dev;
	c->refs = 1;
	c->created = 1;
	atomic_init(&c->active, 1);
	c->gen = 0x80000000ULL + (unsigned long long)nmade;  /* ids apart from the primary's generations */
	made[nmade++] = c;
	pthread_mutex_unlock(&fc.lock);
	if (t->ctx)
		t->ctx_stack[t->ctx_depth++] = t->ctx;
	t->ctx = c;
	t->dev = dev;
	*pctx = c;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	struct fc_tls *t;

	DRV_ENTER("cuCtxDestroy_v2", 0);
	if (!ctx || !fc_ctx_valid(ctx) || !ctx->created)
		return CUDA_ERROR_INVALID_CONTEXT;
	fc_device_sync(ctx->dev);
	fc_ctx_free_blocks(ctx);
	pthread_mutex_lock(&fc.lock);
	ctx->destroyed = 1;
	ctx->gen++;                 /* its modules die with it */
	pthread_mutex_unlock(&fc.lock);
	t = fc_tls_get();
	if (t->ctx == ctx) {
		t->ctx = t->ctx_depth ? t->ctx_stack[--t->ctx_depth] : NULL;
		if (t->ctx)
			t->dev = t->ctx->dev;
	}
	return CUDA_SUCCESS;
}
