/*
 * rt_stream.c: the runtime's streams and events: creation, queries and
 * synchronisation, waits, host functions and callbacks, priorities and
 * ids.
 */
#include "fakecuda.h"

#include <string.h>

/* ---- streams ---- */

FC_API cudaError_t cudaStreamCreate(cudaStream_t *p)
{
	RT_ENTER("cudaStreamCreate");
	if (!p)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_stream_create(fc_cur_dev(), 0, 0, p));
}

FC_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *p, unsigned int flags)
{
	RT_ENTER("cudaStreamCreateWithFlags");
	if (!p)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_stream_create(fc_cur_dev(), flags, 0, p));
}

FC_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *p, unsigned int flags, int priority)
{
	RT_ENTER("cudaStreamCreateWithPriority");
	if (!p)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_stream_create(fc_cur_dev(), flags, priority, p));
}

FC_API cudaError_t cudaStreamDestroy(cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER("cudaStreamDestroy");
	if ((uintptr_t)h <= 2)
		return fc_rt_ret(cudaErrorInvalidResourceHandle);
	RT_STREAM(h, 0, s);
	return fc_rt_reti(fc_stream_destroy(s));
}

#define RT_STREAM_PAIR(fn, body_call) \
	FC_API cudaError_t fn(cudaStream_t h) { return body_call(#fn, 0, h); } \
	FC_API cudaError_t fn##_ptsz(cudaStream_t h) { return body_call(#fn "_ptsz", 1, h); }

static cudaError_t stream_sync(const char *name, int ptsz, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return fc_rt_reti(fc_stream_sync(s));
}

static cudaError_t stream_query(const char *name, int ptsz, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return fc_rt_reti(fc_stream_query(s));
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
	return fc_rt_reti(fc_stream_wait_event(s, e));
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
	return fc_rt_reti(fc_hostfn(s, fn, arg));
}

FC_API cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *arg)
{
	return host_func("cudaLaunchHostFunc", 0, h, fn, arg);
}

FC_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t h, cudaHostFn_t fn, void *arg)
{
	return host_func("cudaLaunchHostFunc_ptsz", 1, h, fn, arg);
}

/* ---- events ---- */

FC_API cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	RT_ENTER("cudaEventCreate");
	if (!e)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_event_create(0, e));
}

FC_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	RT_ENTER("cudaEventCreateWithFlags");
	if (!e)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_event_create(flags, e));
}

FC_API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	RT_ENTER("cudaEventDestroy");
	return fc_rt_reti(fc_event_destroy(e));
}

static cudaError_t event_record(const char *name, int ptsz, cudaEvent_t e, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return fc_rt_reti(fc_event_record(e, s));
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
	return fc_rt_reti(fc_event_query(e));
}

FC_API cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	RT_ENTER("cudaEventSynchronize");
	return fc_rt_reti(fc_event_sync(e));
}

FC_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	RT_ENTER("cudaEventElapsedTime");
	return fc_rt_reti(fc_event_elapsed(ms, a, b));
}

/* ---- stream queries and callbacks ---- */

static cudaError_t add_callback(const char *name, int ptsz, cudaStream_t h, cudaStreamCallback_t cb,
				void *arg, unsigned flags)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (flags || !cb)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_stream_callback(s, h, cb, arg));
}

FC_API cudaError_t cudaStreamAddCallback(cudaStream_t h, cudaStreamCallback_t cb, void *arg,
					 unsigned int flags)
{
	return add_callback("cudaStreamAddCallback", 0, h, cb, arg, flags);
}

FC_API cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t h, cudaStreamCallback_t cb, void *arg,
					      unsigned int flags)
{
	return add_callback("cudaStreamAddCallback_ptsz", 1, h, cb, arg, flags);
}

static cudaError_t stream_prio(const char *name, int ptsz, cudaStream_t h, int *prio)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!prio)
		return fc_rt_ret(cudaErrorInvalidValue);
	*prio = fc_stream_priority(s);
	return cudaSuccess;
}

FC_API cudaError_t cudaStreamGetPriority(cudaStream_t h, int *prio)
{
	return stream_prio("cudaStreamGetPriority", 0, h, prio);
}

FC_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t h, int *prio)
{
	return stream_prio("cudaStreamGetPriority_ptsz", 1, h, prio);
}

static cudaError_t stream_id(const char *name, int ptsz, cudaStream_t h, unsigned long long *id)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!id)
		return fc_rt_ret(cudaErrorInvalidValue);
	*id = fc_stream_id(s);
	return cudaSuccess;
}

FC_API cudaError_t cudaStreamGetId(cudaStream_t h, unsigned long long *id)
{
	return stream_id("cudaStreamGetId", 0, h, id);
}

FC_API cudaError_t cudaStreamGetId_ptsz(cudaStream_t h, unsigned long long *id)
{
	return stream_id("cudaStreamGetId_ptsz", 1, h, id);
}
