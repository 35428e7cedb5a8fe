/*
 * batch: the pool's batched copies, each one cuMemcpyBatchAsync (CUDA
 * 12.8+) where the driver has it: device-to-device (hits and captures
 * without the gather kernel) and host-to-device (the misses of a copy,
 * read from the program's source as its own copy would read it), and the
 * bridge that lets a device-to-device batch reach the legacy default
 * stream, which the call refuses. device.h states the contracts.
 */
#include "device/device.h"

#include <cuda.h>
#include <pthread.h>

#include "core/log.h"
#include "core/stats.h"
#include "device/device_impl.h"

/*
 * The bridge that lets a batch reach the legacy default stream, which
 * cuMemcpyBatchAsync refuses: a private non-blocking stream per device and
 * two events, used under a lock so concurrent callers do not re-record an
 * event between its record and its wait. Made on first use in the current
 * context; a failed creation is retried (struct device_retry), and until
 * then the copies go one by one.
 */
struct device_bridge {
	pthread_mutex_t lock;
	CUstream stream;
	CUevent in, out;
	int ready;              /* 1 made, 0 not (yet), -1 given up for this context */
	struct device_retry retry;
};

static struct device_bridge device_bridges[DEVICE_MAX];
static pthread_once_t device_bridges_once = PTHREAD_ONCE_INIT;

static void device_bridges_init(void)
{
	for (int i = 0; i < DEVICE_MAX; i++)
		pthread_mutex_init(&device_bridges[i].lock, NULL);
}

/* Enqueues one device-to-device copy of n bytes on stream s. */
static int device_copy_dtod(dev_ptr dst, dev_ptr src, uint64_t n, dev_stream s)
{
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.memcpy_dtod_async((CUdeviceptr)dst, (CUdeviceptr)src, (size_t)n, (CUstream)s));
}

/*
 * One cuMemcpyBatchAsync of count copies on stream s (not the legacy
 * stream), every source read in the given order: one device operation.
 */
static int device_batch_ordered(dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count, dev_stream s,
				CUmemcpySrcAccessOrder order)
{
	CUmemcpyAttributes attr = { .srcAccessOrder = order };
	size_t idx = 0;

	_Static_assert(sizeof(dev_ptr) == sizeof(CUdeviceptr), "dev_ptr is a CUdeviceptr");
	_Static_assert(sizeof(uint64_t) == sizeof(size_t), "sizes are size_t");
	stats_add(ST_DEVICE_OPS, 1);
	return device_own(drv.memcpy_batch_async((CUdeviceptr *)dsts, (CUdeviceptr *)srcs, (size_t *)sizes,
						 (size_t)count, &attr, &idx, 1, (CUstream)s));
}

/* One batch of device-to-device copies: the sources are device memory, read in stream order. */
static int device_batch(dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count, dev_stream s)
{
	return device_batch_ordered(dsts, srcs, sizes, count, s, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
}

/* Creates the bridge's stream and events; on failure destroys what was made. */
static int device_bridge_make(struct device_bridge *b)
{
	CUresult r;

	b->stream = NULL;
	b->in = b->out = NULL;
	r = drv.stream_create(&b->stream, CU_STREAM_NON_BLOCKING);
	if (r == CUDA_SUCCESS)
		r = drv.event_create(&b->in, CU_EVENT_DISABLE_TIMING);
	if (r == CUDA_SUCCESS)
		r = drv.event_create(&b->out, CU_EVENT_DISABLE_TIMING);
	if (r == CUDA_SUCCESS)
		return 0;
	if (b->in)
		drv.event_destroy(b->in);
	if (b->stream)
		drv.stream_destroy(b->stream);
	b->stream = NULL;
	b->in = NULL;
	return device_own(r);
}

/*
 * Returns 0 and device dev's bridge, locked, making it in the current
 * context (its primary context) when due; -EAGAIN when there is none now
 * (a creation failed and waits for its retry, or was given up).
 */
static int device_bridge_get(int dev, struct device_bridge **out)
{
	struct device_bridge *b;

	if (dev < 0 || dev >= DEVICE_MAX)
		return -EINVAL;
	pthread_once(&device_bridges_once, device_bridges_init);
	b = &device_bridges[dev];
	pthread_mutex_lock(&b->lock);
	if (b->ready == 0 && device_retry_due(&b->retry)) {
		if (device_bridge_make(b) == 0) {
			b->ready = 1;
		} else if (device_retry_failed(&b->retry)) {
			b->ready = -1;
			log_verbose("device %d: no private stream for batched copies on the legacy stream after %u "
				    "attempts; they go one copy at a time (scattered misses: the whole copy)", dev,
				    b->retry.fails);
		} else {
			log_verbose("device %d: could not make the private stream for batched copies on the legacy "
				    "stream; one copy at a time (scattered misses: the whole copy) until it is tried "
				    "again", dev);
		}
	}
	if (b->ready != 1) {
		pthread_mutex_unlock(&b->lock);
		return -EAGAIN;
	}
	*out = b;       /* returned locked */
	return 0;
}

/*
 * A batch on the legacy stream, through the bridge: the bridge waits for
 * everything before it on the legacy stream, runs the batch, and the legacy
 * stream waits for the bridge before anything after it, whether the batch
 * was enqueued or not (a failed one may have enqueued part of itself, which
 * must not land after what the program queues next). -EAGAIN: no bridge
 * now, or its first wait could not be issued: nothing enqueued. The last
 * record and wait are tried twice before the host waits for the bridge:
 * the legacy stream's earlier work may be held by the caller itself (a
 * host function waiting for it), so that wait might never return, and a
 * failed batch is never waited for. An enqueued batch the host waited for
 * counts as done (its bytes are never sent twice).
 */
static int device_batch_legacy(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count,
			       CUmemcpySrcAccessOrder order, dev_stream s)
{
	struct device_bridge *b;
	int err = device_bridge_get(dev, &b), ordered = 0;

	if (err)
		return err;
	stats_add(ST_DEVICE_OPS, 4);
	err = device_own(drv.event_record(b->in, (CUstream)s));
	if (!err)
		err = device_own(drv.stream_wait_event(b->stream, b->in, 0));
	if (err) {
		pthread_mutex_unlock(&b->lock);
		return -EAGAIN;
	}
	err = device_batch_ordered(dsts, srcs, sizes, count, b->stream, order);
	for (int tries = 0; tries < 2; tries++) {
		ordered = device_own(drv.event_record(b->out, b->stream));
		if (!ordered)
			ordered = device_own(drv.stream_wait_event((CUstream)s, b->out, 0));
		if (!ordered)
			break;
	}
	/* Last resort, for an enqueued batch only: wait for it here. */
	if (ordered && !err && device_own(drv.stream_synchronize(b->stream)) != 0)
		err = ordered;
	pthread_mutex_unlock(&b->lock);
	return err;
}

int device_copy_dtod_many(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count,
			  dev_stream s)
{
	int err = 0;

	if (count > 1 && drv.memcpy_batch_async) {
		if (s != NULL && s != DEV_STREAM_LEGACY)
			return device_batch(dsts, srcs, sizes, count, s);
		err = device_batch_legacy(dev, dsts, srcs, sizes, count, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, s);
		if (err != -EAGAIN)
			return err;
		err = 0;        /* no bridge now: one copy at a time, in order on s */
	}
	for (uint64_t i = 0; i < count && !err; i++)
		err = device_copy_dtod(dsts[i], srcs[i], sizes[i], s);
	return err;
}

void device_bridge_forget(int dev)
{
	pthread_once(&device_bridges_once, device_bridges_init);
	pthread_mutex_lock(&device_bridges[dev].lock);
	device_bridges[dev].ready = 0;
	device_bridges[dev].retry = (struct device_retry){ 0 };
	pthread_mutex_unlock(&device_bridges[dev].lock);
}


int device_h2d_batch_ready(void)
{
	return device_open() == 0 && drv.memcpy_batch_async;
}

int device_copy_h2d_many(int dev, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes, uint64_t count, int pinned,
			 dev_stream s)
{
	/* A pinned source is read in stream order, as the program's copy would
	 * read it; a pageable one during the call, as the runtime stages it. */
	CUmemcpySrcAccessOrder order = pinned ? CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
					      : CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
	int err;

	if (!device_h2d_batch_ready())
		return -ENOTSUP;
	if (s != NULL && s != DEV_STREAM_LEGACY)
		return device_batch_ordered(dsts, srcs, sizes, count, s, order);
	err = device_batch_legacy(dev, dsts, srcs, sizes, count, order, s);
	return err == -EAGAIN ? -ENOTSUP : err;
}

void device_bridge_atfork_child(void)
{
	for (int i = 0; i < DEVICE_MAX; i++) {
		pthread_mutex_init(&device_bridges[i].lock, NULL);
		device_bridges[i].ready = 0;
		device_bridges[i].retry = (struct device_retry){ 0 };
	}
}
