/*
 * drv_stream.c: the driver's streams and events: host functions and
 * callbacks, stream queries, creation and synchronisation, waits,
 * capture, event records and queries.
 */
#include "fakecuda.h"

#include <string.h>

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

/* The calling thread's capture mode, the runtime's (recorded, not enforced). */
FC_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	struct fc_tls *t;
	CUstreamCaptureMode old;

	DRV_ENTER("cuThreadExchangeStreamCaptureMode", 0);
	if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	t = fc_tls_get();
	old = (CUstreamCaptureMode)t->capture_mode;
	t->capture_mode = (enum cudaStreamCaptureMode)*mode;
	*mode = old;
	return CUDA_SUCCESS;
}

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
