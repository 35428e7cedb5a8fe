/*
 * stream.c: the engine of the emulated device: streams, their FIFO
 * workers, the ordering of the legacy and per-thread default streams,
 * jitter, waits and events. What runs is the executors' business
 * (exec_copy.c, exec_gather.c); what is put on a stream, enqueue.c's.
 *
 * Every stream is a FIFO of operations run by its own worker thread; no copy
 * ever runs on the calling thread (synchronous calls enqueue, then wait).
 * An operation carries dependencies, (stream, sequence number) pairs, and
 * runs only once each named stream has completed that many operations. The
 * legacy default stream and cudaStreamWaitEvent are both expressed this way:
 * an operation on the legacy stream depends on the last operation enqueued
 * on every blocking stream of its device, and an operation on a blocking
 * stream depends on the last legacy operation. Stream structures are never
 * freed, so a destroyed handle stays recognisable (invalid resource handle).
 */
#include "stream_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EV_BUCKETS 1024

struct CUevent_st {
	struct CUevent_st *hnext;
	unsigned flags;
	struct CUstream_st *rec_stream;
	uint64_t rec_seq;
	int ts_valid;
	struct timespec ts;
	int pending;
	int destroyed;
};

static struct CUevent_st *ev_buckets[EV_BUCKETS];
static unsigned settlers;       /* threads in fakecuda_stream_settle: every completion wakes them */
static unsigned long long stream_ids;
static pthread_key_t pts_key;
static pthread_once_t pts_once = PTHREAD_ONCE_INIT;

static unsigned ev_hash(const void *p)
{
	return (unsigned)(((uintptr_t)p >> 4) % EV_BUCKETS);
}

void fc_stream_forget(void)
{
	memset(ev_buckets, 0, sizeof(ev_buckets));
	settlers = 0;
	stream_ids = 0;
}

/* ---- operations ---- */

static int op_add_dep(struct fc_op *op, struct CUstream_st *s, uint64_t seq)
{
	if (op->ndeps == op->depcap) {
		size_t ncap = op->depcap ? op->depcap * 2 : 4;
		struct fc_dep *nd = realloc(op->deps, ncap * sizeof(*nd));

		if (!nd)
			return -ENOMEM;
		op->deps = nd;
		op->depcap = ncap;
	}
	op->deps[op->ndeps].s = s;
	op->deps[op->ndeps].seq = seq;
	op->ndeps++;
	return 0;
}

/* Frees a batch's staged sources and the batch. */
static void batch_free(struct fc_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		free(b->it[i].staging);
	free(b);
}

void fc_op_free(struct fc_op *op)
{
	xfer_drop(&op->x);
	batch_free(op->x.batch);
	free(op->staging);
	free(op->deps);
	free(op);
}

static int deps_done_locked(const struct fc_op *op)
{
	size_t i;

	for (i = 0; i < op->ndeps; i++)
		if (op->deps[i].s->completed < op->deps[i].seq)
			return 0;
	return 1;
}

/* Counts the time since t0 (fc_now_ns) in d2d_ns. */
static void d2d_since(double t0)
{
	atomic_fetch_add(&fc_cnt.d2d_ns, (unsigned long long)(fc_now_ns() - t0));
}

/* Performs a copy; a device-to-device one's time counts in d2d_ns. */
static void copy_timed(const struct fc_xfer *x, const void *staging)
{
	double t0;

	if (x->dir != DIR_D2D) {
		fc_exec_copy(x, staging);
		return;
	}
	t0 = fc_now_ns();
	fc_exec_copy(x, staging);
	d2d_since(t0);
}

/* Runs one operation on the worker, without the lock: the jitter, then
 * the executor of its kind. */
static void op_run(struct CUstream_st *s, struct fc_op *op)
{
	const struct fc_xfer *x = &op->x;
	double t0;

	if (fc.cfg.jitter_us)
		fc_sleep_ns((double)(rand_r(&s->seed) % (fc.cfg.jitter_us + 1)) * 1000.0);
	switch (x->kind) {
	case OP_COPY:
		copy_timed(x, op->staging);
		break;
	case OP_MEMSET:
		fc_exec_memset(x);
		break;
	case OP_GATHER:
		t0 = fc_now_ns();
		fc_exec_gather(x);
		d2d_since(t0);
		break;
	case OP_BATCH:
		for (size_t i = 0; i < x->batch->n; i++)
			copy_timed(&x->batch->it[i].x, x->batch->it[i].staging);
		break;
	case OP_FREE:
		fc_dev_free(x->dst);
		break;
	case OP_HOSTFN:
		x->fn(x->arg);
		break;
	case OP_CALLBACK:
		op->cb(op->cb_stream, cudaSuccess, x->arg);
		break;
	case OP_EVENT:
	case OP_NOP:
		break;
	}
}

/* Completes an event record (lock held); frees a destroyed event. */
static void event_done_locked(struct CUstream_st *s, struct fc_op *op)
{
	struct CUevent_st *e = op->ev;

	e->pending--;
	if (e->destroyed) {
		if (!e->pending)
			free(e);
		return;
	}
	if (e->rec_stream == s && e->rec_seq == op->seq) {
		clock_gettime(CLOCK_MONOTONIC, &e->ts);
		/* Not before the cost model's link finished the copies ahead of it. */
		if (s->link_done_ns > (double)e->ts.tv_sec * 1e9 + (double)e->ts.tv_nsec) {
			e->ts.tv_sec = (time_t)(s->link_done_ns / 1e9);
			e->ts.tv_nsec = (long)(s->link_done_ns - (double)e->ts.tv_sec * 1e9);
		}
		e->ts_valid = 1;
	}
}

/* Wakes the worker of s if it sleeps (lock held). */
static void wake_locked(struct CUstream_st *s)
{
	if (s->sleeping)
		pthread_cond_signal(&s->wake);
}

/* Wakes the sleeping workers whose next operation waits for another stream
 * (lock held): a completion on s may be what it waits for. */
static void wake_waiters_locked(const struct CUstream_st *s)
{
	for (struct CUstream_st *t = fc.streams; t; t = t->all_next)
		if (t != s && t->sleeping && t->head && t->head->ndeps)
			pthread_cond_signal(&t->wake);
}

static void *stream_worker(void *arg)
{
	struct CUstream_st *s = arg;
	struct fc_op *op;
	double done;

	pthread_mutex_lock(&fc.lock);
	for (;;) {
		op = s->head;
		if (!op && s->destroyed)
			break;
		if (!op || s->held || !deps_done_locked(op)) {
			s->sleeping = 1;
			pthread_cond_wait(&s->wake, &fc.lock);
			s->sleeping = 0;
			continue;
		}
		s->running = 1;
		pthread_mutex_unlock(&fc.lock);
		op_run(s, op);
		done = fc_link_take_done();
		pthread_mutex_lock(&fc.lock);
		s->running = 0;
		if (done > s->link_done_ns)
			s->link_done_ns = done;
		if (op->x.kind == OP_EVENT)
			event_done_locked(s, op);
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->completed = op->seq;
		if ((s->want && s->completed >= s->want) || settlers) {
			s->want = 0;    /* the waiters still short of theirs set it again */
			pthread_cond_broadcast(&fc.cond);
		}
		wake_waiters_locked(s);
		fc_op_free(op);
	}
	pthread_mutex_unlock(&fc.lock);
	return NULL;
}

/* Enqueues op on s (lock held), adding the legacy-stream dependencies.
 * Returns the op's sequence number. */
/* Each kind's operation counter. */
static atomic_ullong *const op_counter[] = {
	[OP_COPY] = &fc_cnt.ops_copy, [OP_MEMSET] = &fc_cnt.ops_memset, [OP_EVENT] = &fc_cnt.ops_event,
	[OP_NOP] = &fc_cnt.ops_other, [OP_FREE] = &fc_cnt.ops_other, [OP_HOSTFN] = &fc_cnt.ops_hostfn,
	[OP_CALLBACK] = &fc_cnt.ops_hostfn, [OP_GATHER] = &fc_cnt.ops_kernel, [OP_BATCH] = &fc_cnt.ops_batch,
};

uint64_t fc_submit_locked(struct CUstream_st *s, struct fc_op *op)
{
	struct CUstream_st *t;

	atomic_fetch_add(op_counter[op->x.kind], 1);

	if (s->legacy) {
		for (t = fc.streams; t; t = t->all_next) {
			if (t == s || t->legacy || t->dev != s->dev ||
			    (t->flags & cudaStreamNonBlocking))
				continue;
			if (t->submitted > t->completed)
				op_add_dep(op, t, t->submitted);
		}
	} else if (!(s->flags & cudaStreamNonBlocking)) {
		t = fc.dev[s->dev].legacy;
		if (t && t->submitted > t->completed)
			op_add_dep(op, t, t->submitted);
	}
	op->seq = ++s->submitted;
	op->next = NULL;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	wake_locked(s);
	return op->seq;
}

void fc_wait_seq_locked(struct CUstream_st *s, uint64_t seq)
{
	while (s->completed < seq) {
		if (!s->want || seq < s->want)
			s->want = seq;
		pthread_cond_wait(&fc.cond, &fc.lock);
	}
}

/* ---- streams ---- */

/* Creates a stream and its worker (lock held). */
static int stream_new_locked(int dev, unsigned flags, int prio, int legacy,
			     struct CUstream_st **out)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));
	pthread_attr_t attr;
	pthread_t th;
	int err;

	if (!s)
		return -ENOMEM;
	s->dev = dev;
	s->flags = flags;
	s->prio = prio;
	s->legacy = legacy;
	s->seed = (unsigned)(uintptr_t)s ^ (unsigned)time(NULL);
	s->id = ++stream_ids;
	pthread_cond_init(&s->wake, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	err = -pthread_create(&th, &attr, stream_worker, s);
	pthread_attr_destroy(&attr);
	if (err) {
		free(s);
		return err;
	}
	s->all_next = fc.streams;
	fc.streams = s;
	*out = s;
	return 0;
}

int fc_stream_create(int dev, unsigned flags, int prio, struct CUstream_st **out)
{
	int err;

	if (dev < 0 || dev >= fc.cfg.devices)
		return -ENODEV;
	if (flags & ~(unsigned)cudaStreamNonBlocking)
		return -EINVAL;
	/* Priorities are clamped to [-5, 0], as cudaDeviceGetStreamPriorityRange says. */
	prio = prio > 0 ? 0 : prio < -5 ? -5 : prio;
	pthread_mutex_lock(&fc.lock);
	err = stream_new_locked(dev, flags, prio, 0, out);
	pthread_mutex_unlock(&fc.lock);
	return err;
}

/* Destroys the calling thread's per-thread streams when it exits. */
static void pts_destructor(void *v)
{
	struct fc_tls *t = v;
	int d;

	if (t->gen != fc.gen)
		return;
	for (d = 0; d < FC_MAX_DEV; d++) {
		if (t->pts[d])
			fc_stream_destroy(t->pts[d]);
		t->pts[d] = NULL;
	}
}

static void pts_key_init(void)
{
	pthread_key_create(&pts_key, pts_destructor);
}

int fc_stream_resolve(void *handle, int ptsz, struct CUstream_st **out)
{
	uintptr_t h = (uintptr_t)handle;
	struct CUstream_st *s;
	struct fc_tls *t;
	int dev, err = 0;

	pthread_mutex_lock(&fc.lock);
	if (h == 0 && ptsz)
		h = 2;
	if (h == 0 || h == 1 || h == 2) {
		dev = fc_cur_dev();
		if (dev < 0 || dev >= fc.cfg.devices) {
			err = -ENODEV;
			goto out_unlock;
		}
		if (h == 2) {
			t = fc_tls_get();
			if (!t->pts[dev]) {
				err = stream_new_locked(dev, 0, 0, 0, &t->pts[dev]);
				pthread_once(&pts_once, pts_key_init);
				pthread_setspecific(pts_key, t);
			}
			*out = t->pts[dev];
			goto out_unlock;
		}
		if (!fc.dev[dev].legacy)
			err = stream_new_locked(dev, 0, 0, 1, &fc.dev[dev].legacy);
		*out = fc.dev[dev].legacy;
		goto out_unlock;
	}
	err = -EBADF;
	for (s = fc.streams; s; s = s->all_next) {
		if (s == handle) {
			if (!s->destroyed && !s->legacy) {
				*out = s;
				err = 0;
			}
			break;
		}
	}
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_stream_destroy(struct CUstream_st *s)
{
	pthread_mutex_lock(&fc.lock);
	s->destroyed = 1;
	wake_locked(s);
	pthread_mutex_unlock(&fc.lock);
	return 0;
}

int fc_stream_flags(struct CUstream_st *s, unsigned *flags)
{
	*flags = s->flags;
	return s->dev;
}

int fc_stream_is_legacy(struct CUstream_st *s)
{
	return s->legacy;
}

int fc_stream_priority(struct CUstream_st *s)
{
	return s->prio;
}

unsigned long long fc_stream_id(struct CUstream_st *s)
{
	return s->id;
}

int fc_stream_sync(struct CUstream_st *s)
{
	struct fc_op *op;
	int err = 0;

	pthread_mutex_lock(&fc.lock);
	if (s->capturing) {
		err = -EPERM;
		goto out_unlock;
	}
	if (s->legacy) {
		/* A marker picks up the implicit waits on blocking streams. */
		op = calloc(1, sizeof(*op));
		if (!op) {
			err = -ENOMEM;
			goto out_unlock;
		}
		op->x.kind = OP_NOP;
		fc_wait_seq_locked(s, fc_submit_locked(s, op));
		goto out_unlock;
	}
	fc_wait_seq_locked(s, s->submitted);
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	return err;
}

/* Whether the blocking streams a legacy-stream operation would wait for are all done (lock held). */
static int blocking_done_locked(const struct CUstream_st *s)
{
	const struct CUstream_st *t;

	for (t = fc.streams; t; t = t->all_next)
		if (t != s && !t->legacy && t->dev == s->dev && !(t->flags & cudaStreamNonBlocking) &&
		    t->completed != t->submitted)
			return 0;
	return 1;
}

/* A query of the legacy stream answers as its synchronisation would
 * wait: for its own work and that of every blocking stream. */
int fc_stream_query(struct CUstream_st *s)
{
	int err;

	pthread_mutex_lock(&fc.lock);
	if (s->capturing)
		err = -EPERM;
	else
		err = s->completed == s->submitted && (!s->legacy || blocking_done_locked(s)) ? 0 : -EAGAIN;
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_device_sync(int dev)
{
	struct CUstream_st *s;

	pthread_mutex_lock(&fc.lock);
	for (s = fc.streams; s; s = s->all_next)
		if (s->dev == dev)
			fc_wait_seq_locked(s, s->submitted);
	pthread_mutex_unlock(&fc.lock);
	return 0;
}

/* ---- events ---- */

int fc_event_create(unsigned flags, struct CUevent_st **out)
{
	struct CUevent_st *e;
	unsigned b;

	if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->flags = flags;
	b = ev_hash(e);
	pthread_mutex_lock(&fc.lock);
	e->hnext = ev_buckets[b];
	ev_buckets[b] = e;
	pthread_mutex_unlock(&fc.lock);
	*out = e;
	return 0;
}

static int event_live_locked(struct CUevent_st *e)
{
	struct CUevent_st *x;

	for (x = ev_buckets[ev_hash(e)]; x; x = x->hnext)
		if (x == e)
			return 1;
	return 0;
}

int fc_event_check(struct CUevent_st *e)
{
	int live;

	pthread_mutex_lock(&fc.lock);
	live = e && event_live_locked(e);
	pthread_mutex_unlock(&fc.lock);
	return live ? 0 : -EBADF;
}

int fc_event_destroy(struct CUevent_st *e)
{
	struct CUevent_st **pp;
	int err = -EBADF;

	pthread_mutex_lock(&fc.lock);
	for (pp = &ev_buckets[ev_hash(e)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == e) {
			*pp = e->hnext;
			e->destroyed = 1;
			if (!e->pending)
				free(e);
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_event_record(struct CUevent_st *e, struct CUstream_st *s)
{
	struct fc_op *op = calloc(1, sizeof(*op));
	int err = 0;

	if (!op)
		return -ENOMEM;
	op->x.kind = OP_EVENT;
	op->ev = e;
	pthread_mutex_lock(&fc.lock);
	if (!event_live_locked(e)) {
		err = -EBADF;
		fc_op_free(op);
	} else if (s->capturing) {
		fc_op_free(op); /* a capture-internal dependency: nothing to run */
	} else {
		e->pending++;
		e->rec_stream = s;
		e->ts_valid = 0;
		e->rec_seq = fc_submit_locked(s, op);
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_event_query(struct CUevent_st *e)
{
	int err = 0;

	pthread_mutex_lock(&fc.lock);
	if (!event_live_locked(e))
		err = -EBADF;
	else if (e->rec_stream && e->rec_stream->completed < e->rec_seq)
		err = -EAGAIN;
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_event_sync(struct CUevent_st *e)
{
	int err = 0;

	pthread_mutex_lock(&fc.lock);
	if (!event_live_locked(e))
		err = -EBADF;
	else if (e->rec_stream)
		fc_wait_seq_locked(e->rec_stream, e->rec_seq);
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_event_elapsed(float *ms, struct CUevent_st *a, struct CUevent_st *b)
{
	int err = 0;

	if (!ms)
		return -EINVAL;
	pthread_mutex_lock(&fc.lock);
	if (!event_live_locked(a) || !event_live_locked(b) ||
	    ((a->flags | b->flags) & cudaEventDisableTiming) ||
	    !a->rec_stream || !b->rec_stream) {
		err = -EBADF;
	} else if (!a->ts_valid || !b->ts_valid) {
		err = -EAGAIN;
	} else {
		*ms = (float)((double)(b->ts.tv_sec - a->ts.tv_sec) * 1e3 +
			      (double)(b->ts.tv_nsec - a->ts.tv_nsec) / 1e6);
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_stream_wait_event(struct CUstream_st *s, struct CUevent_st *e)
{
	struct fc_op *op;
	int err = 0;

	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->x.kind = OP_NOP;
	pthread_mutex_lock(&fc.lock);
	if (!event_live_locked(e)) {
		err = -EBADF;
		fc_op_free(op);
	} else if (!e->rec_stream || s->capturing) {
		fc_op_free(op); /* never recorded: a no-op, as documented */
	} else {
		if (e->rec_stream != s)
			err = op_add_dep(op, e->rec_stream, e->rec_seq);
		if (err)
			fc_op_free(op);
		else
			fc_submit_locked(s, op);
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

/* ---- test hooks (version node FAKECUDA): holding a stream back, and its settling ---- */

/*
 * Holds back (on) or releases (!on) the stream a handle names (0: the
 * legacy stream): while held, its worker starts no operation, so work
 * enqueued on it waits, and so does work on other streams that depends on
 * it. An operation running when the hold begins runs to its end. Returns
 * 0, or -EBADF for a handle that names no live stream.
 */
FC_API int fakecuda_stream_hold(void *stream, int on)
{
	struct CUstream_st *s;
	int err = fc_stream_resolve(stream, 0, &s);

	if (err)
		return err;
	pthread_mutex_lock(&fc.lock);
	s->held = on != 0;
	wake_locked(s);
	pthread_cond_broadcast(&fc.cond);     /* fakecuda_stream_settle */
	pthread_mutex_unlock(&fc.lock);
	return 0;
}

/*
 * Waits until the stream a handle names (0: the legacy stream) can run
 * nothing more for now: no operation running, and its queue empty, held,
 * or headed by an operation that waits for another stream. Returns the
 * operations enqueued on it and not completed, or -EBADF. Deterministic:
 * it never waits for time, only for the worker.
 */
FC_API long long fakecuda_stream_settle(void *stream)
{
	struct CUstream_st *s;
	long long pending;
	int err = fc_stream_resolve(stream, 0, &s);

	if (err)
		return err;
	pthread_mutex_lock(&fc.lock);
	settlers++;
	while (s->head && (s->running || (!s->held && deps_done_locked(s->head))))
		pthread_cond_wait(&fc.cond, &fc.lock);
	settlers--;
	pending = (long long)(s->submitted - s->completed);
	pthread_mutex_unlock(&fc.lock);
	return pending;
}
