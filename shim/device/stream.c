/*
 * stream: the pool's stream and event calls (device.h: streams and events;
 * capture mode): each a driver call through the shared table, converted to
 * 0 or a negative errno; work put on a stream counts in pool.device_ops and
 * a failure of the pool's own work in pool.faults (device_own). No context
 * is entered here: streams and events carry theirs.
 */
#include "device/device.h"

#include <cuda.h>

#include "core/stats.h"
#include "device/device_impl.h"

int device_stream_sync(dev_stream s)
{
	return device_own(drv.stream_synchronize((CUstream)s));
}

int device_stream_wait_host(dev_stream s)
{
	CUevent e = NULL;
	int err = device_own(drv.event_create(&e, CU_EVENT_DISABLE_TIMING));

	if (err)
		return err;
	stats_add(ST_DEVICE_OPS, 1);
	err = device_own(drv.event_record(e, (CUstream)s));
	if (!err)
		err = device_own(drv.event_synchronize(e));
	drv.event_destroy(e);
	return err;
}

int device_event_new(dev_event *ev)
{
	CUevent e = NULL;
	int err = device_own(drv.event_create(&e, CU_EVENT_DISABLE_TIMING));

	*ev = e;
	return err;
}

int device_event_record(dev_event ev, dev_stream s)
{
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.event_record((CUevent)ev, (CUstream)s));
}

int device_event_record_meter(dev_event ev, dev_stream s)
{
	return device_own(drv.event_record((CUevent)ev, (CUstream)s));
}

int device_event_query(dev_event ev)
{
	return device_own(drv.event_query((CUevent)ev));
}

void device_event_free(dev_event ev)
{
	if (ev)
		drv.event_destroy((CUevent)ev);
}

/* ---- timed events, for the cost ledger's link meter (issue 16) ---- */

int device_event_new_timed(dev_event *ev)
{
	CUevent e = NULL;
	int err;

	*ev = NULL;
	if (!drv.event_elapsed)
		return -ENOSYS;
	err = device_own(drv.event_create(&e, CU_EVENT_DEFAULT));
	*ev = e;
	return err;
}

int device_event_elapsed_ns(dev_event a, dev_event b, uint64_t *ns)
{
	float ms = 0;
	int err;

	if (!drv.event_elapsed)
		return -ENOSYS;
	err = device_own(drv.event_query((CUevent)b));
	if (err)
		return err;
	err = device_own(drv.event_elapsed(&ms, (CUevent)a, (CUevent)b));
	if (err)
		return err;
	*ns = ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
	return 0;
}

int device_stream_wait(dev_stream s, dev_event ev)
{
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.stream_wait_event((CUstream)s, (CUevent)ev, 0));
}

int device_stream_query(dev_stream s)
{
	return device_err(drv.stream_query((CUstream)s));
}

int device_stream_idle(int dev, dev_stream s)
{
	unsigned int flags = 0;

	(void)dev;
	if (drv.stream_query((CUstream)s) != CUDA_SUCCESS)
		return 0;
	/* The legacy stream's query follows the default stream's rules: it
	 * answers for the blocking streams it waits for too. */
	if (s == NULL || s == DEV_STREAM_LEGACY)
		return 1;
	/* A blocking stream (the per-thread one included) also waits for the legacy stream. */
	if (s != DEV_STREAM_PER_THREAD && drv.stream_get_flags &&
	    drv.stream_get_flags((CUstream)s, &flags) == CUDA_SUCCESS && (flags & CU_STREAM_NON_BLOCKING))
		return 1;
	return drv.stream_query(CU_STREAM_LEGACY) == CUDA_SUCCESS;
}

int device_host_func(dev_stream s, void (*fn)(void *arg), void *arg)
{
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.launch_host_func((CUstream)s, fn, arg));
}

int device_capture_relax(void)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;

	if (!drv.exchange_capture_mode || drv.exchange_capture_mode(&mode) != CUDA_SUCCESS)
		return -1;
	return (int)mode;
}

void device_capture_restore(int mode)
{
	CUstreamCaptureMode m = (CUstreamCaptureMode)mode;

	if (mode >= 0 && drv.exchange_capture_mode)
		drv.exchange_capture_mode(&m);
}
