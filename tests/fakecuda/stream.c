/*
 * stream.c: streams, events, stream capture and graphs of the emulated
 * device, and the copy engine.
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
#include "fakecuda.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum fc_op_kind { OP_COPY, OP_MEMSET, OP_EVENT, OP_NOP, OP_FREE, OP_HOSTFN, OP_CALLBACK, OP_GATHER };
enum fc_dir { DIR_H2D, DIR_D2H, DIR_D2D, DIR_H2H };

struct fc_dep {
	struct CUstream_st *s;
	uint64_t seq;
};

/* What an operation or a graph node does. Copies and memsets are pitched:
 * ROWS rows of WIDTH bytes, rows DPITCH (SPITCH) bytes apart; a linear one
 * is one row. N is the byte count the counters see. A memset writes VALUE
 * as elements of ESIZE bytes. A gather launch holds a reference to GATHER
 * (xfer_hold / xfer_drop follow every copy of the description). */
struct fc_xfer {
	enum fc_op_kind kind;
	void *dst;
	const void *src;
	size_t width, rows, dpitch, spitch, n;
	unsigned value, esize;
	enum fc_dir dir;
	void (*fn)(void *);
	void *arg;
	struct fc_gather *gather;
};

struct fc_op {
	struct fc_op *next;
	uint64_t seq;
	struct fc_dep *deps;
	size_t ndeps, depcap;
	struct fc_xfer x;
	void *staging;          /* a pageable source, packed (pitch = width) */
	struct CUevent_st *ev;
	cudaStreamCallback_t cb;
	void *cb_stream;        /* the handle the callback is given */
};

struct CUstream_st {
	struct CUstream_st *all_next;
	int dev;
	unsigned flags;
	int prio;
	int legacy;
	int destroyed;
	uint64_t submitted, completed;
	struct fc_op *head, *tail;
	unsigned seed;
	int capturing;           /* 0 none, 1 active */
	unsigned long long capture_id;
	struct CUgraph_st *graph;
	unsigned long long id;   /* cudaStreamGetId */
};

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

#define GRAPH_MAGIC 0x47524150u
#define EXEC_MAGIC 0x45584543u
#define NODE_MAGIC 0x4e4f4445u

/* A graph node (cudaGraphNode_t); owned by its graph. */
struct CUgraphNode_st {
	unsigned magic;
	struct CUgraph_st *g;
	struct fc_xfer x;
};

struct CUgraph_st {
	unsigned magic;
	struct CUgraphNode_st **nodes; /* in the order added */
	size_t n, cap;
};

struct CUgraphExec_st {
	unsigned magic;
	struct fc_xfer *nodes;
	size_t n;
};

static struct CUevent_st *ev_buckets[EV_BUCKETS];
static unsigned long long capture_ids, stream_ids;
static pthread_key_t pts_key;
static pthread_once_t pts_once = PTHREAD_ONCE_INIT;

static unsigned ev_hash(const void *p)
{
	return (unsigned)(((uintptr_t)p >> 4) % EV_BUCKETS);
}

/*
 * Live graph, node and executable handles. A handle is checked here before
 * it is read, so a destroyed or foreign one is recognised without reading
 * freed memory. live_lock is a leaf lock: it may be taken with fc.lock
 * held, never the other way round.
 */
#define LIVE_BUCKETS 1024

struct live {
	struct live *next;
	const void *p;
};

static struct live *live_buckets[LIVE_BUCKETS];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

static int live_add(const void *p)
{
	struct live *l = malloc(sizeof(*l));
	unsigned b = ev_hash(p) % LIVE_BUCKETS;

	if (!l)
		return -ENOMEM;
	l->p = p;
	pthread_mutex_lock(&live_lock);
	l->next = live_buckets[b];
	live_buckets[b] = l;
	pthread_mutex_unlock(&live_lock);
	return 0;
}

static void live_remove(const void *p)
{
	struct live **pp, *l;

	pthread_mutex_lock(&live_lock);
	for (pp = &live_buckets[ev_hash(p) % LIVE_BUCKETS]; (l = *pp); pp = &l->next) {
		if (l->p == p) {
			*pp = l->next;
			free(l);
			break;
		}
	}
	pthread_mutex_unlock(&live_lock);
}

static int live_has(const void *p)
{
	struct live *l;
	int found = 0;

	pthread_mutex_lock(&live_lock);
	for (l = live_buckets[ev_hash(p) % LIVE_BUCKETS]; l && !found; l = l->next)
		found = l->p == p;
	pthread_mutex_unlock(&live_lock);
	return found;
}

void fc_stream_forget(void)
{
	memset(ev_buckets, 0, sizeof(ev_buckets));
	memset(live_buckets, 0, sizeof(live_buckets));
	pthread_mutex_init(&live_lock, NULL);
	capture_ids = 0;
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

void fc_gather_hold(struct fc_gather *g)
{
	atomic_fetch_add(&g->refs, 1);
}

void fc_gather_drop(struct fc_gather *g)
{
	if (g && atomic_fetch_sub(&g->refs, 1) == 1)
		free(g);
}

/* A copy of an operation's description was made / is being dropped. */
static void xfer_hold(const struct fc_xfer *x)
{
	if (x->gather)
		fc_gather_hold(x->gather);
}

static void xfer_drop(struct fc_xfer *x)
{
	fc_gather_drop(x->gather);
	x->gather = NULL;
}

static void op_free(struct fc_op *op)
{
	xfer_drop(&op->x);
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

static void sleep_ns(double ns)
{
	struct timespec t;

	if (ns <= 0)
		return;
	t.tv_sec = (time_t)(ns / 1e9);
	t.tv_nsec = (long)(ns - (double)t.tv_sec * 1e9);
	nanosleep(&t, NULL);
}

/*
 * The cost model's links: one per direction (host-to-device and
 * device-to-host share PCIe rates, device-to-device has its own), each busy
 * until a time on the monotonic clock. A copy occupies its link for n/rate
 * after the link is free; the worker sleeps only when the link has fallen
 * more than LINK_SLACK_NS behind, so that nanosleep's coarse granularity
 * costs no throughput: the average rate is exact, single small copies are
 * not delayed one by one.
 */
#define LINK_SLACK_NS 200000.0

static pthread_mutex_t link_lock = PTHREAD_MUTEX_INITIALIZER;
static double link_busy_until[2];

static double link_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void link_occupy(int link, double ns)
{
	double now = link_now_ns(), until;

	pthread_mutex_lock(&link_lock);
	if (link_busy_until[link] < now)
		link_busy_until[link] = now;
	link_busy_until[link] += ns;
	until = link_busy_until[link];
	pthread_mutex_unlock(&link_lock);
	if (until - now > LINK_SLACK_NS)
		sleep_ns(until - now - LINK_SLACK_NS / 2);
}

/* Fills each of X's rows with its element value. */
static void run_memset(const struct fc_xfer *x)
{
	char *row = fc_dev_rw(x->dst);
	uint16_t v16 = (uint16_t)x->value;
	uint32_t v32 = x->value;
	size_t r, i;

	for (r = 0; r < x->rows; r++, row += x->dpitch) {
		if (x->esize == 1) {
			memset(row, (int)(x->value & 0xff), x->width);
			continue;
		}
		for (i = 0; i + x->esize <= x->width; i += x->esize)
			memcpy(row + i, x->esize == 2 ? (const void *)&v16 : (const void *)&v32, x->esize);
	}
}

/* Performs a gather launch's entries; the launch checked every range.
 * FAKECUDA_KERNEL=broken flips a byte of the last row written. */
static void run_gather(const struct fc_gather *g)
{
	char *last = NULL;
	uint32_t i;

	for (i = 0; i < g->count; i++) {
		const struct fc_gather_entry *e = &g->e[i];
		size_t n = (size_t)(e->nrows_dir & ~FC_GATHER_CAPTURE) * g->row;
		char *slab = fc_dev_rw((const void *)(uintptr_t)e->slab);
		char *rows = fc_dev_rw((const void *)(uintptr_t)(g->dst + (uint64_t)e->dst_row * g->row));

		if (!n)
			continue;
		if (e->nrows_dir & FC_GATHER_CAPTURE) {
			memcpy(slab, rows, n);
			last = slab + n - g->row;
		} else {
			memcpy(rows, slab, n);
			last = rows + n - g->row;
		}
	}
	if (last && fc.cfg.kernel == FC_KERNEL_BROKEN)
		last[g->row / 2] ^= 0x5a;
}

/* Runs one operation on the worker, without the lock. */
static void op_run(struct CUstream_st *s, struct fc_op *op)
{
	const struct fc_xfer *x = &op->x;
	const char *src;
	char *dst;
	size_t spitch, r;
	double gbps = 0;

	if (fc.cfg.jitter_us)
		sleep_ns((double)(rand_r(&s->seed) % (fc.cfg.jitter_us + 1)) * 1000.0);
	switch (x->kind) {
	case OP_COPY:
		gbps = x->dir == DIR_D2D ? fc.cfg.d2d_gbps
		       : x->dir == DIR_H2H ? 0 : fc.cfg.h2d_gbps;
		if (gbps > 0)
			link_occupy(x->dir == DIR_D2D, (double)x->n / gbps);
		src = fc_dev_rw(op->staging ? op->staging : x->src);
		spitch = op->staging ? x->width : x->spitch;
		dst = fc_dev_rw(x->dst);
		for (r = 0; r < x->rows; r++)
			memcpy(dst + r * x->dpitch, src + r * spitch, x->width);
		break;
	case OP_MEMSET:
		run_memset(x);
		break;
	case OP_GATHER:
		if (fc.cfg.d2d_gbps > 0)
			link_occupy(1, (double)x->n / fc.cfg.d2d_gbps);
		run_gather(x->gather);
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
		e->ts_valid = 1;
	}
}

static void *stream_worker(void *arg)
{
	struct CUstream_st *s = arg;
	struct fc_op *op;

	pthread_mutex_lock(&fc.lock);
	for (;;) {
		op = s->head;
		if (!op && s->destroyed)
			break;
		if (!op || !deps_done_locked(op)) {
			pthread_cond_wait(&fc.cond, &fc.lock);
			continue;
		}
		pthread_mutex_unlock(&fc.lock);
		op_run(s, op);
		pthread_mutex_lock(&fc.lock);
		if (op->x.kind == OP_EVENT)
			event_done_locked(s, op);
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->completed = op->seq;
		pthread_cond_broadcast(&fc.cond);
		op_free(op);
	}
	pthread_mutex_unlock(&fc.lock);
	return NULL;
}

/* Enqueues op on s (lock held), adding the legacy-stream dependencies.
 * Returns the op's sequence number. */
static uint64_t submit_locked(struct CUstream_st *s, struct fc_op *op)
{
	struct CUstream_st *t;

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
	pthread_cond_broadcast(&fc.cond);
	return op->seq;
}

static void wait_seq_locked(struct CUstream_st *s, uint64_t seq)
{
	while (s->completed < seq)
		pthread_cond_wait(&fc.cond, &fc.lock);
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
	pthread_cond_broadcast(&fc.cond);
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
		wait_seq_locked(s, submit_locked(s, op));
		goto out_unlock;
	}
	wait_seq_locked(s, s->submitted);
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_stream_query(struct CUstream_st *s)
{
	int err;

	pthread_mutex_lock(&fc.lock);
	if (s->capturing)
		err = -EPERM;
	else
		err = s->completed == s->submitted ? 0 : -EAGAIN;
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_device_sync(int dev)
{
	struct CUstream_st *s;

	pthread_mutex_lock(&fc.lock);
	for (s = fc.streams; s; s = s->all_next)
		if (s->dev == dev)
			wait_seq_locked(s, s->submitted);
	pthread_mutex_unlock(&fc.lock);
	return 0;
}

/* ---- copies ---- */

static void count_copy(enum fc_dir dir, size_t n)
{
	switch (dir) {
	case DIR_H2D:
		atomic_fetch_add(&fc_cnt.h2d_calls, 1);
		atomic_fetch_add(&fc_cnt.h2d_bytes, n);
		break;
	case DIR_D2H:
		atomic_fetch_add(&fc_cnt.d2h_calls, 1);
		atomic_fetch_add(&fc_cnt.d2h_bytes, n);
		break;
	case DIR_D2D:
		atomic_fetch_add(&fc_cnt.d2d_calls, 1);
		atomic_fetch_add(&fc_cnt.d2d_bytes, n);
		break;
	case DIR_H2H:
		atomic_fetch_add(&fc_cnt.h2h_calls, 1);
		atomic_fetch_add(&fc_cnt.h2h_bytes, n);
		break;
	}
}

/* Counts an operation accepted for execution. */
static void count_xfer(const struct fc_xfer *x)
{
	if (x->kind == OP_COPY) {
		count_copy(x->dir, x->n);
	} else if (x->kind == OP_MEMSET) {
		atomic_fetch_add(&fc_cnt.memset_calls, 1);
		atomic_fetch_add(&fc_cnt.memset_bytes, x->n);
	} else if (x->kind == OP_GATHER) {
		/* Kernel bytes are device-to-device moves. */
		atomic_fetch_add(&fc_cnt.kernel_launches, 1);
		atomic_fetch_add(&fc_cnt.kernel_bytes, x->n);
		count_copy(DIR_D2D, x->n);
	}
}

/* Appends a node doing X to G (lock held). */
static int graph_add_locked(struct CUgraph_st *g, const struct fc_xfer *x,
			    struct CUgraphNode_st **out)
{
	struct CUgraphNode_st **nn, *nd;

	if (g->n == g->cap) {
		size_t ncap = g->cap ? g->cap * 2 : 16;

		nn = realloc(g->nodes, ncap * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		g->nodes = nn;
		g->cap = ncap;
	}
	nd = calloc(1, sizeof(*nd));
	if (!nd)
		return -ENOMEM;
	if (live_add(nd)) {
		free(nd);
		return -ENOMEM;
	}
	nd->magic = NODE_MAGIC;
	nd->g = g;
	nd->x = *x;
	xfer_hold(x);
	g->nodes[g->n++] = nd;
	atomic_fetch_add(&fc_cnt.graph_nodes_captured, 1);
	if (out)
		*out = nd;
	return 0;
}

/* Enqueues a copy, memset or host function, or records it as a node when
 * s is capturing. */
static int enqueue_data_op(struct CUstream_st *s, struct fc_op *op, int sync)
{
	uint64_t seq;
	int err = 0;

	pthread_mutex_lock(&fc.lock);
	if (s->capturing) {
		err = graph_add_locked(s->graph, &op->x, NULL);
		pthread_mutex_unlock(&fc.lock);
		op_free(op);
		return err;
	}
	count_xfer(&op->x);
	seq = submit_locked(s, op);
	if (sync)
		wait_seq_locked(s, seq);
	pthread_mutex_unlock(&fc.lock);
	return err;
}

/* The span in bytes of ROWS rows of WIDTH bytes PITCH apart; 0 on overflow. */
static size_t span_2d(size_t pitch, size_t width, size_t rows)
{
	if (rows > 1 && pitch > (SIZE_MAX - width) / (rows - 1))
		return 0;
	return pitch * (rows - 1) + width;
}

/* The largest pitch a device accepts (cudaDevAttrMaxPitch). */
#define FC_MAX_PITCH ((size_t)INT32_MAX)

/* Validates a pitched copy and describes it in X; *SK gets the source's
 * memory kind. */
static int copy_describe(struct fc_xfer *x, void *dst, size_t dpitch, const void *src,
			 size_t spitch, size_t width, size_t height, int kind, int *skp)
{
	size_t sspan, dspan;
	int sk, dk, sdev, ddev;

	if (!dst || !src)
		return -EINVAL;
	if (height > 1 && (width > dpitch || width > spitch))
		return -EINVAL;
	if (height > 1 && (dpitch > FC_MAX_PITCH || spitch > FC_MAX_PITCH))
		return -ERANGE;
	if (height <= 1)
		dpitch = spitch = width;
	sspan = span_2d(spitch, width, height);
	dspan = span_2d(dpitch, width, height);
	if (!sspan || !dspan)
		return -EINVAL;
	sk = fc_mem_classify(src, sspan, NULL);
	dk = fc_mem_classify(dst, dspan, NULL);
	if (sk < 0 || dk < 0)
		return -EINVAL;
	sdev = sk == FC_DEVICE || sk == FC_MANAGED;
	ddev = dk == FC_DEVICE || dk == FC_MANAGED;
	switch (kind) {
	case cudaMemcpyHostToHost:
		if (sk == FC_DEVICE || dk == FC_DEVICE)
			return -EINVAL;
		break;
	case cudaMemcpyHostToDevice:
		if (sk == FC_DEVICE || !ddev)
			return -EINVAL;
		break;
	case cudaMemcpyDeviceToHost:
		if (!sdev || dk == FC_DEVICE)
			return -EINVAL;
		break;
	case cudaMemcpyDeviceToDevice:
		if (!sdev || !ddev)
			return -EINVAL;
		break;
	case cudaMemcpyDefault:
		break;
	default:
		return -EINVAL;
	}
	memset(x, 0, sizeof(*x));
	x->kind = OP_COPY;
	x->dst = dst;
	x->src = src;
	x->width = width;
	x->rows = height;
	x->dpitch = dpitch;
	x->spitch = spitch;
	x->n = width * height;
	x->dir = sdev ? (ddev ? DIR_D2D : DIR_D2H) : (ddev ? DIR_H2D : DIR_H2H);
	*skp = sk;
	return dk;
}

int fc_copy2d_check(void *dst, size_t dpitch, const void *src, size_t spitch,
		    size_t width, size_t height, int kind)
{
	struct fc_xfer x;
	int sk, dk;

	if (!width || !height)
		return 0;
	dk = copy_describe(&x, dst, dpitch, src, spitch, width, height, kind, &sk);
	return dk < 0 ? dk : 0;
}

int fc_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch,
	      size_t width, size_t height, int kind, struct CUstream_st *s, int sync)
{
	struct fc_op *op;
	size_t r;
	int sk, dk;

	if (!width || !height)
		return 0;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	dk = copy_describe(&op->x, dst, dpitch, src, spitch, width, height, kind, &sk);
	if (dk < 0) {
		op_free(op);
		return dk;
	}
	if (sk == FC_PAGEABLE && !s->capturing) {
		/* A pageable source is read now, as the real runtime stages it. */
		op->staging = malloc(op->x.n);
		if (!op->staging) {
			op_free(op);
			return -ENOMEM;
		}
		for (r = 0; r < height; r++)
			memcpy((char *)op->staging + r * width,
			       (const char *)src + r * op->x.spitch, width);
	}
	if (dk == FC_PAGEABLE)
		sync = 1;
	return enqueue_data_op(s, op, sync);
}

int fc_copy(void *dst, const void *src, size_t n, int kind,
	    struct CUstream_st *s, int sync)
{
	return fc_copy2d(dst, n, src, n, n, 1, kind, s, sync);
}

/* Validates a pitched memset (WIDTH in elements) and describes it in X. */
static int memset_describe(struct fc_xfer *x, void *dst, size_t pitch, unsigned value,
			   unsigned esize, size_t width, size_t height)
{
	size_t wbytes, span;
	int dk;

	if (esize != 1 && esize != 2 && esize != 4)
		return -EINVAL;
	if (!dst || width > SIZE_MAX / esize)
		return -EINVAL;
	wbytes = width * esize;
	if (height <= 1)
		pitch = wbytes;
	if (wbytes > pitch)
		return -EINVAL;
	if (pitch > FC_MAX_PITCH && height > 1)
		return -ERANGE;
	span = span_2d(pitch, wbytes, height);
	if (!span)
		return -EINVAL;
	dk = fc_mem_classify(dst, span, NULL);
	if (dk != FC_DEVICE && dk != FC_MANAGED)
		return -EINVAL;
	memset(x, 0, sizeof(*x));
	x->kind = OP_MEMSET;
	x->dst = dst;
	x->width = wbytes;
	x->rows = height;
	x->dpitch = pitch;
	x->spitch = pitch;
	x->n = wbytes * height;
	x->value = value;
	x->esize = esize;
	return 0;
}

int fc_memset2d(void *dst, size_t pitch, unsigned value, unsigned esize,
		size_t width, size_t height, struct CUstream_st *s, int sync)
{
	struct fc_op *op;
	int err;

	if (!width || !height)
		return esize == 1 || esize == 2 || esize == 4 ? 0 : -EINVAL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	err = memset_describe(&op->x, dst, pitch, value, esize, width, height);
	if (err) {
		op_free(op);
		return err;
	}
	return enqueue_data_op(s, op, sync);
}

int fc_memset(void *dst, int value, size_t n, struct CUstream_st *s, int sync)
{
	return fc_memset2d(dst, n, (unsigned)value & 0xff, 1, n, 1, s, sync);
}

/* Enqueues a non-data operation (lock not held); refused while capturing. */
static int enqueue_simple(struct CUstream_st *s, struct fc_op *op)
{
	int err = 0;

	pthread_mutex_lock(&fc.lock);
	if (s->capturing) {
		err = -ENOTSUP;
		op_free(op);
	} else {
		submit_locked(s, op);
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_free_async(void *p, struct CUstream_st *s)
{
	struct fc_op *op;
	void *base;
	size_t size;
	int dev;

	if (fc_dev_block(p, &dev, &base, &size) < 0 || base != p || fc_vmm_reserved(p))
		return -EINVAL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->x.kind = OP_FREE;
	op->x.dst = p;
	return enqueue_simple(s, op);
}

int fc_gather_enqueue(struct CUstream_st *s, struct fc_gather *g)
{
	struct fc_op *op = calloc(1, sizeof(*op));

	if (!op) {
		fc_gather_drop(g);
		return -ENOMEM;
	}
	op->x.kind = OP_GATHER;
	op->x.gather = g;
	op->x.n = g->bytes;
	op->x.dir = DIR_D2D;
	return enqueue_data_op(s, op, 0);
}

/* A host function runs on the worker in stream order; while the stream is
 * capturing it becomes a host node, as on a real device. */
int fc_hostfn(struct CUstream_st *s, void (*fn)(void *), void *arg)
{
	struct fc_op *op;

	if (!fn)
		return -EINVAL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->x.kind = OP_HOSTFN;
	op->x.fn = fn;
	op->x.arg = arg;
	return enqueue_data_op(s, op, 0);
}

/* The legacy callback form; not capturable (cudaErrorStreamCaptureUnsupported). */
int fc_stream_callback(struct CUstream_st *s, void *handle, cudaStreamCallback_t cb, void *arg)
{
	struct fc_op *op;
	int err;

	if (!cb)
		return -EINVAL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->x.kind = OP_CALLBACK;
	op->x.arg = arg;
	op->cb = cb;
	op->cb_stream = handle;
	err = enqueue_simple(s, op);
	return err == -ENOTSUP ? -EPERM : err;
}

int fc_stream_nop(struct CUstream_st *s)
{
	struct fc_op *op = calloc(1, sizeof(*op));

	if (!op)
		return -ENOMEM;
	op->x.kind = OP_NOP;
	pthread_mutex_lock(&fc.lock);
	if (s->capturing)
		op_free(op);
	else
		submit_locked(s, op);
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
		op_free(op);
	} else if (s->capturing) {
		op_free(op); /* a capture-internal dependency: nothing to run */
	} else {
		e->pending++;
		e->rec_stream = s;
		e->ts_valid = 0;
		e->rec_seq = submit_locked(s, op);
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
		wait_seq_locked(e->rec_stream, e->rec_seq);
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
		op_free(op);
	} else if (!e->rec_stream || s->capturing) {
		op_free(op); /* never recorded: a no-op, as documented */
	} else {
		if (e->rec_stream != s)
			err = op_add_dep(op, e->rec_stream, e->rec_seq);
		if (err)
			op_free(op);
		else
			submit_locked(s, op);
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

/* ---- capture and graphs ---- */

static int graph_valid(struct CUgraph_st *g)
{
	return g && live_has(g) && g->magic == GRAPH_MAGIC;
}

int fc_graph_create(struct CUgraph_st **out)
{
	struct CUgraph_st *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	if (live_add(g)) {
		free(g);
		return -ENOMEM;
	}
	g->magic = GRAPH_MAGIC;
	*out = g;
	return 0;
}

int fc_capture_begin(struct CUstream_st *s, struct CUgraph_st *into)
{
	struct CUgraph_st *g = into;
	int err = 0;

	if (s->legacy)
		return -EPERM;
	if (into && !graph_valid(into))
		return -EINVAL;
	if (!g && (err = fc_graph_create(&g)))
		return err;
	pthread_mutex_lock(&fc.lock);
	if (s->capturing) {
		err = -EPERM;
		if (!into) {
			live_remove(g);
			free(g);
		}
	} else {
		s->capturing = 1;
		s->capture_id = ++capture_ids;
		s->graph = g;
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_capture_end(struct CUstream_st *s, struct CUgraph_st **out)
{
	int err = 0;

	pthread_mutex_lock(&fc.lock);
	if (!s->capturing) {
		err = -EPERM;
	} else {
		*out = s->graph;
		s->graph = NULL;
		s->capturing = 0;
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_capture_status(struct CUstream_st *s, unsigned long long *id,
		      struct CUgraph_st **graph)
{
	int st;

	pthread_mutex_lock(&fc.lock);
	st = s->capturing;
	if (id)
		*id = st ? s->capture_id : 0;
	if (graph)
		*graph = st ? s->graph : NULL;
	pthread_mutex_unlock(&fc.lock);
	return st;
}

/* Checks that every dependency is a node of G (lock held). */
static int deps_valid_locked(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps)
{
	size_t i;

	if (ndeps && !deps)
		return -EINVAL;
	for (i = 0; i < ndeps; i++)
		if (!deps[i] || !live_has(deps[i]) || deps[i]->magic != NODE_MAGIC || deps[i]->g != g)
			return -EINVAL;
	return 0;
}

/* Adds a described node to an explicit graph. */
static int graph_add_node(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
			  const struct fc_xfer *x, struct CUgraphNode_st **out)
{
	int err;

	if (!graph_valid(g) || !out)
		return -EINVAL;
	pthread_mutex_lock(&fc.lock);
	err = deps_valid_locked(g, deps, ndeps);
	if (!err)
		err = graph_add_locked(g, x, out);
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_graph_add_copy(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
		      void *dst, const void *src, size_t n, int kind,
		      struct CUgraphNode_st **out)
{
	struct fc_xfer x;
	int sk, err;

	if (!n)
		return -EINVAL;
	err = copy_describe(&x, dst, n, src, n, n, 1, kind, &sk);
	if (err < 0)
		return err;
	return graph_add_node(g, deps, ndeps, &x, out);
}

int fc_graph_add_memset(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
			void *dst, size_t pitch, unsigned value, unsigned esize,
			size_t width, size_t height, struct CUgraphNode_st **out)
{
	struct fc_xfer x;
	int err;

	if (!width || !height)
		return -EINVAL;
	err = memset_describe(&x, dst, pitch, value, esize, width, height);
	if (err)
		return err;
	return graph_add_node(g, deps, ndeps, &x, out);
}

int fc_graph_add_host(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
		      void (*fn)(void *), void *arg, struct CUgraphNode_st **out)
{
	struct fc_xfer x;

	memset(&x, 0, sizeof(x));
	x.kind = fn ? OP_HOSTFN : OP_NOP;
	x.fn = fn;
	x.arg = arg;
	return graph_add_node(g, deps, ndeps, &x, out);
}

int fc_graph_nodes(struct CUgraph_st *g, struct CUgraphNode_st **nodes, size_t *num)
{
	size_t i;

	if (!graph_valid(g) || !num)
		return -EINVAL;
	pthread_mutex_lock(&fc.lock);
	if (nodes) {
		for (i = 0; i < *num; i++)
			nodes[i] = i < g->n ? g->nodes[i] : NULL;
		if (*num > g->n)
			*num = g->n;
	} else {
		*num = g->n;
	}
	pthread_mutex_unlock(&fc.lock);
	return 0;
}

static int xfer_type(const struct fc_xfer *x)
{
	switch (x->kind) {
	case OP_COPY: return cudaGraphNodeTypeMemcpy;
	case OP_MEMSET: return cudaGraphNodeTypeMemset;
	case OP_HOSTFN: return cudaGraphNodeTypeHost;
	case OP_GATHER: return cudaGraphNodeTypeKernel;
	default: return cudaGraphNodeTypeEmpty;
	}
}

int fc_graph_node_type(struct CUgraphNode_st *nd)
{
	if (!nd || !live_has(nd) || nd->magic != NODE_MAGIC)
		return -EINVAL;
	return xfer_type(&nd->x);
}

int fc_graph_instantiate(struct CUgraph_st *g, struct CUgraphExec_st **out)
{
	struct CUgraphExec_st *x;
	size_t i;

	if (!graph_valid(g))
		return -EBADF;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	if (live_add(x)) {
		free(x);
		return -ENOMEM;
	}
	x->magic = EXEC_MAGIC;
	pthread_mutex_lock(&fc.lock);
	x->n = g->n;
	x->nodes = malloc((g->n ? g->n : 1) * sizeof(*x->nodes));
	for (i = 0; x->nodes && i < g->n; i++) {
		x->nodes[i] = g->nodes[i]->x;
		xfer_hold(&x->nodes[i]);
	}
	pthread_mutex_unlock(&fc.lock);
	if (!x->nodes) {
		live_remove(x);
		free(x);
		return -ENOMEM;
	}
	*out = x;
	return 0;
}

int fc_graph_exec_update(struct CUgraphExec_st *x, struct CUgraph_st *g,
			 enum cudaGraphExecUpdateResult *result, struct CUgraphNode_st **errnode)
{
	size_t i;
	int err = 0;

	*result = cudaGraphExecUpdateSuccess;
	*errnode = NULL;
	if (fc_graph_exec_check(x) || !graph_valid(g))
		return -EBADF;
	pthread_mutex_lock(&fc.lock);
	if (g->n != x->n) {
		*result = cudaGraphExecUpdateErrorTopologyChanged;
		err = -EXDEV;
		goto out_unlock;
	}
	for (i = 0; i < g->n; i++) {
		if (xfer_type(&g->nodes[i]->x) != xfer_type(&x->nodes[i])) {
			*result = cudaGraphExecUpdateErrorNodeTypeChanged;
			*errnode = g->nodes[i];
			err = -EXDEV;
			goto out_unlock;
		}
	}
	for (i = 0; i < g->n; i++) {
		xfer_drop(&x->nodes[i]);
		x->nodes[i] = g->nodes[i]->x;
		xfer_hold(&x->nodes[i]);
	}
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_graph_destroy(struct CUgraph_st *g)
{
	size_t i;

	if (!graph_valid(g))
		return -EBADF;
	g->magic = 0;
	for (i = 0; i < g->n; i++) {
		g->nodes[i]->magic = 0;
		live_remove(g->nodes[i]);
		xfer_drop(&g->nodes[i]->x);
		free(g->nodes[i]);
	}
	free(g->nodes);
	g->nodes = NULL;
	live_remove(g);
	free(g);
	return 0;
}

int fc_graph_exec_check(struct CUgraphExec_st *x)
{
	return x && live_has(x) && x->magic == EXEC_MAGIC ? 0 : -EBADF;
}

int fc_graph_exec_destroy(struct CUgraphExec_st *x)
{
	size_t i;

	if (fc_graph_exec_check(x))
		return -EBADF;
	x->magic = 0;
	for (i = 0; i < x->n; i++)
		xfer_drop(&x->nodes[i]);
	free(x->nodes);
	x->nodes = NULL;
	live_remove(x);
	free(x);
	return 0;
}

/* Replays the nodes on s in order; sources are read when each runs. */
int fc_graph_launch(struct CUgraphExec_st *x, struct CUstream_st *s)
{
	struct fc_op *op;
	size_t i;
	int err = 0;

	if (fc_graph_exec_check(x))
		return -EBADF;
	pthread_mutex_lock(&fc.lock);
	if (s->capturing) {
		err = -ENOTSUP;
		goto out_unlock;
	}
	for (i = 0; i < x->n; i++) {
		op = calloc(1, sizeof(*op));
		if (!op) {
			err = -ENOMEM;
			break;
		}
		op->x = x->nodes[i];
		xfer_hold(&op->x);
		count_xfer(&op->x);
		submit_locked(s, op);
	}
	atomic_fetch_add(&fc_cnt.graph_launches, 1);
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	return err;
}
