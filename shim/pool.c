/*
 * pool: slabs, capture at delivery, gather of hits, the budget probe and
 * eviction. pool.h states the invariants; this file keeps them.
 *
 * Bookkeeping. Every slab holds rows of one size, filled in consumption
 * order. Each copy that admits rows appends one capture segment per slab
 * it fills: rows [first, first + n) and the event recorded behind their
 * device-to-device capture. A segment is PENDING while its capture is being
 * issued (hits on it are misses), RECORDED once the event is recorded, DONE
 * when the event has completed (hits need no wait) and FAILED when the
 * capture could not be issued (its rows were dropped from the index). Index
 * values pack (slab id, row) into 32 bits: row in the low row_bits.
 */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fingerprint.h"
#include "index.h"
#include "log.h"
#include "stats.h"

#define POOL_MAX_DEVICES 64
#define POOL_MAX_CLASSES 64
#define POOL_ROW_BITS_MAX 24
#define POOL_STACK_ROWS 256

enum seg_state { SEG_PENDING, SEG_RECORDED, SEG_DONE, SEG_FAILED };

/*
 * The run-time check of one copy's captured rows (pool_request.verify): a
 * host function queued behind the captures fingerprints each row's source
 * again and sets result. The segments of the copy point here; the record
 * is freed when the last of them is settled (under the pool's mutex).
 */
struct pool_verify {
	uint64_t row;
	uint64_t n;
	const unsigned char **src;      /* source of each captured row */
	struct fp *fps;                 /* its call-time fingerprint */
	uint32_t *slab, *slot;          /* where it was captured */
	_Atomic int result;             /* 0 not yet run, 1 unchanged, -1 changed */
	int refs;
};

struct seg {
	uint32_t first, n;
	enum seg_state state;
	dev_event ev;
	struct pool_verify *verify;     /* pending run-time check, or NULL */
};

struct slab {
	uint32_t id;
	dev_ptr base;
	uint64_t row;           /* row size */
	uint64_t bytes;         /* allocated bytes */
	uint32_t cap;           /* rows it can hold */
	uint32_t used;          /* rows handed out */
	uint32_t pooled;        /* rows captured successfully */
	struct seg *segs;
	uint32_t nsegs, segs_cap;
	uint32_t done_segs;     /* segs[0..done_segs) are all DONE or FAILED */
};

struct pool_class {
	uint64_t row;
	int64_t tail;           /* slab id being filled, or -1 */
};

struct pool {
	int dev;
	uint64_t ctx_id;        /* the context the slabs live in */
	pthread_mutex_t mu;
	pthread_rwlock_t evict_lock;
	struct index ix;
	struct slab **slabs;    /* by id; NULL once evicted */
	uint32_t nslabs, slabs_cap;
	struct pool_class classes[POOL_MAX_CLASSES];
	int nclasses;
	unsigned row_bits;
	uint32_t max_slabs;
	enum pool_state state;
	int decided;
	uint64_t budget;
	uint64_t bytes;         /* slab bytes allocated */
	uint64_t matched_seen;
	uint64_t largest_copy;
	dev_event *free_events;
	uint32_t nfree_events, free_events_cap;
};

/* One row's plan inside a copy. */
enum plan_kind { PLAN_MISS, PLAN_HIT, PLAN_CAPTURE };

struct plan {
	uint8_t kind;
	uint32_t slab;          /* HIT, CAPTURE */
	uint32_t slot;
};

static const struct config *pool_cfg;
static pthread_mutex_t pool_table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool *pool_table[POOL_MAX_DEVICES];
static _Atomic uint64_t pool_last_report_ns;

static uint64_t pool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void pool_setup(const struct config *c)
{
	pool_cfg = c;
}

uint64_t pool_budget_decide(const struct config *c, uint64_t free_bytes, uint64_t largest_copy)
{
	uint64_t budget = 0;
	uint64_t reserve;

	switch (c->budget_kind) {
	case BUDGET_BYTES:
		budget = c->budget_bytes < free_bytes ? c->budget_bytes : free_bytes;
		break;
	case BUDGET_SHARE:
		budget = (uint64_t)((double)free_bytes * c->budget_share);
		break;
	case BUDGET_AUTO:
		reserve = c->reserve_batches * largest_copy;
		if (reserve / (largest_copy ? largest_copy : 1) != c->reserve_batches)
			return 0;       /* overflow: nothing can be left */
		if (free_bytes <= reserve || free_bytes - reserve <= c->margin)
			return 0;
		budget = free_bytes - reserve - c->margin;
		break;
	}
	return budget < c->slab ? 0 : budget;
}

/* Smallest row the layout can produce, which bounds rows per slab. */
static uint64_t pool_min_row(const struct config *c)
{
	uint64_t m = UINT64_MAX;

	for (int i = 0; i < c->layout.nrows; i++)
		if (c->layout.rows[i] < m)
			m = c->layout.rows[i];
	if (c->layout.has_whole && c->layout.whole_min < m)
		m = c->layout.whole_min;
	return m == UINT64_MAX || m == 0 ? 1 : m;
}

static struct pool *pool_new(int dev)
{
	struct pool *p = calloc(1, sizeof(*p));
	pthread_rwlockattr_t attr;
	uint64_t rows;
	unsigned bits = 0;

	if (!p)
		return NULL;
	p->dev = dev;
	pthread_mutex_init(&p->mu, NULL);
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&p->evict_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (index_init(&p->ix, 0)) {
		free(p);
		return NULL;
	}
	rows = pool_cfg->slab / pool_min_row(pool_cfg);
	while (bits < POOL_ROW_BITS_MAX && (1ULL << bits) < rows)
		bits++;
	p->row_bits = bits;
	p->max_slabs = (uint32_t)((1ULL << (32 - bits)) - 1);
	p->state = POOL_DORMANT;
	stats_set_state(POOL_DORMANT);
	return p;
}

/* Takes a retired pool's slabs out of the gauges; its memory died with its context. */
static void pool_retire(struct pool *p)
{
	uint64_t pooled = 0;

	pthread_mutex_lock(&p->mu);
	for (uint32_t id = 0; id < p->nslabs; id++)
		if (p->slabs[id])
			pooled += p->slabs[id]->pooled;
	stats_sub(ST_POOL_BYTES, p->bytes);
	stats_sub(ST_POOL_SLABS, p->nslabs);
	stats_sub(ST_ROWS_POOLED, pooled);
	log_verbose("device %d was reset: its %u slabs are gone; a new pool starts dormant",
		    p->dev, p->nslabs);
	p->state = POOL_OFF;
	pthread_mutex_unlock(&p->mu);
}

struct pool *pool_get(int dev, uint64_t ctx_id)
{
	struct pool *p;

	if (dev < 0 || dev >= POOL_MAX_DEVICES || !pool_cfg)
		return NULL;
	pthread_mutex_lock(&pool_table_lock);
	p = pool_table[dev];
	if (p && ctx_id && p->ctx_id && p->ctx_id != ctx_id) {
		pool_retire(p);
		device_forget(dev);
		p = NULL;
	}
	if (!p) {
		p = pool_table[dev] = pool_new(dev);
		if (p)
			p->ctx_id = ctx_id;
	}
	pthread_mutex_unlock(&pool_table_lock);
	return p;
}

static void pool_set_state(struct pool *p, enum pool_state s)
{
	if (p->state == s)
		return;
	p->state = s;
	stats_set_state(s);
}

/* The one-shot probe. Called with p->mu held. */
static void pool_probe(struct pool *p)
{
	uint64_t free_bytes = 0, total = 0;
	char b1[32], b2[32], b3[32];

	p->decided = 1;
	atomic_store(&stats_global.probe_decided, 1);
	if (device_mem_info(p->dev, &free_bytes, &total)) {
		log_verbose("probe: cannot read free memory of device %d; the pool stays dormant", p->dev);
		return;
	}
	p->budget = pool_budget_decide(pool_cfg, free_bytes, p->largest_copy);
	stats_set(ST_PROBE_FREE, free_bytes);
	stats_set(ST_PROBE_TOTAL, total);
	stats_set(ST_PROBE_RESERVE, pool_cfg->budget_kind == BUDGET_AUTO ?
		  pool_cfg->reserve_batches * p->largest_copy : 0);
	stats_set(ST_PROBE_MARGIN, pool_cfg->budget_kind == BUDGET_AUTO ? pool_cfg->margin : 0);
	stats_set(ST_POOL_BUDGET, p->budget);
	if (!p->budget) {
		log_verbose("probe: device %d has %s free of %s; budget below one slab, the pool stays dormant",
			    p->dev, log_bytes(b1, sizeof(b1), free_bytes), log_bytes(b2, sizeof(b2), total));
		return;
	}
	log_verbose("probe: device %d has %s free of %s; pool budget %s",
		    p->dev, log_bytes(b1, sizeof(b1), free_bytes), log_bytes(b2, sizeof(b2), total),
		    log_bytes(b3, sizeof(b3), p->budget));
	pool_set_state(p, POOL_ACTIVE);
}

static struct pool_class *pool_class_for(struct pool *p, uint64_t row)
{
	for (int i = 0; i < p->nclasses; i++)
		if (p->classes[i].row == row)
			return &p->classes[i];
	if (p->nclasses == POOL_MAX_CLASSES)
		return NULL;
	p->classes[p->nclasses].row = row;
	p->classes[p->nclasses].tail = -1;
	return &p->classes[p->nclasses++];
}

/*
 * Allocates a new slab for rows of row bytes within the budget. Returns
 * its id, or -1 (the pool is then full). Called with p->mu held.
 */
static int64_t pool_slab_new(struct pool *p, uint64_t row)
{
	uint64_t cap = pool_cfg->slab / row;
	struct slab *s;
	uint64_t bytes;
	char b1[32], b2[32];
	int err;

	if (cap == 0)
		cap = 1;
	if (cap > (1ULL << p->row_bits))
		cap = 1ULL << p->row_bits;
	bytes = cap * row;
	if (p->bytes + bytes > p->budget || p->nslabs >= p->max_slabs) {
		log_verbose("pool full: %s in %u slabs of budget %s",
			    log_bytes(b1, sizeof(b1), p->bytes), p->nslabs, log_bytes(b2, sizeof(b2), p->budget));
		pool_set_state(p, POOL_FULL);
		return -1;
	}
	if (p->nslabs == p->slabs_cap) {
		uint32_t ncap = p->slabs_cap ? 2 * p->slabs_cap : 16;
		struct slab **n = realloc(p->slabs, ncap * sizeof(*n));

		if (!n)
			return -1;
		p->slabs = n;
		p->slabs_cap = ncap;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	err = device_mem_alloc(p->dev, bytes, &s->base);
	if (err) {
		free(s);
		log_verbose("pool full: device %d refused a %s slab (%s)", p->dev,
			    log_bytes(b1, sizeof(b1), bytes), err == -ENOMEM ? "out of memory" : "driver error");
		pool_set_state(p, POOL_FULL);
		return -1;
	}
	s->id = p->nslabs;
	s->row = row;
	s->bytes = bytes;
	s->cap = (uint32_t)cap;
	p->slabs[p->nslabs] = s;
	p->bytes += bytes;
	stats_add(ST_POOL_BYTES, bytes);
	stats_add(ST_POOL_SLABS, 1);
	return p->nslabs++;
}

/* Appends a PENDING segment to slab s starting at slot. Returns it or NULL. */
static struct seg *pool_seg_open(struct slab *s, uint32_t slot)
{
	if (s->nsegs == s->segs_cap) {
		uint32_t ncap = s->segs_cap ? 2 * s->segs_cap : 8;
		struct seg *n = realloc(s->segs, ncap * sizeof(*n));

		if (!n)
			return NULL;
		s->segs = n;
		s->segs_cap = ncap;
	}
	s->segs[s->nsegs] = (struct seg){ .first = slot, .n = 0, .state = SEG_PENDING };
	return &s->segs[s->nsegs++];
}

/*
 * Reserves the next slot for a new row of row bytes, opening a segment on
 * the copy's behalf when the slot starts a new run. Returns 0 with slab and
 * slot, or -1 when nothing can be admitted. Called with p->mu held.
 */
static int pool_reserve(struct pool *p, uint64_t row, uint32_t *slab_id, uint32_t *slot,
			int64_t *open_slab)
{
	struct pool_class *c = pool_class_for(p, row);
	struct slab *s;

	if (!c)
		return -1;
	if (c->tail < 0 || p->slabs[c->tail]->used == p->slabs[c->tail]->cap) {
		c->tail = pool_slab_new(p, row);
		if (c->tail < 0)
			return -1;
	}
	s = p->slabs[c->tail];
	if (*open_slab != c->tail) {
		if (!pool_seg_open(s, s->used))
			return -1;
		*open_slab = c->tail;
	}
	s->segs[s->nsegs - 1].n++;
	*slab_id = (uint32_t)c->tail;
	*slot = s->used++;
	return 0;
}

static dev_event pool_event_get(struct pool *p)
{
	dev_event ev = NULL;

	if (p->nfree_events)
		return p->free_events[--p->nfree_events];
	if (device_event_new(&ev))
		return NULL;
	return ev;
}

static void pool_event_put(struct pool *p, dev_event ev)
{
	if (p->nfree_events == p->free_events_cap) {
		uint32_t ncap = p->free_events_cap ? 2 * p->free_events_cap : 16;
		dev_event *n = realloc(p->free_events, ncap * sizeof(*n));

		if (!n) {
			device_event_free(ev);
			return;
		}
		p->free_events = n;
		p->free_events_cap = ncap;
	}
	p->free_events[p->nfree_events++] = ev;
}

/* Finds the segment holding slot (segments are sorted by first). */
static struct seg *pool_seg_find(struct slab *s, uint32_t slot)
{
	uint32_t lo = 0, hi = s->nsegs;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (s->segs[mid].first + s->segs[mid].n <= slot)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->nsegs && s->segs[lo].first <= slot ? &s->segs[lo] : NULL;
}

/* Drops one segment's reference to its check; frees the check with the last one. */
static void pool_verify_put(struct seg *g)
{
	if (g->verify && --g->verify->refs == 0)
		free(g->verify);
	g->verify = NULL;
}

/*
 * The host function of a run-time check: runs on a driver thread after
 * the copy and its captures, makes no CUDA call and takes no lock.
 */
static void pool_verify_run(void *arg)
{
	struct pool_verify *v = arg;
	int result = 1;

	for (uint64_t i = 0; i < v->n && result > 0; i++) {
		struct fp now = fingerprint_one(v->src[i], v->row);

		if (!fp_equal(&now, &v->fps[i]))
			result = -1;
	}
	atomic_store(&v->result, result);
}

/*
 * Settles segment g of slab s whose capture event has completed: DONE, or
 * FAILED when its run-time check found the source changed (its rows leave
 * the index). Called with p->mu held.
 */
static void pool_seg_settle(struct pool *p, struct slab *s, struct seg *g)
{
	struct pool_verify *v = g->verify;
	uint32_t dropped = 0;

	pool_event_put(p, g->ev);
	g->ev = NULL;
	g->state = SEG_DONE;
	if (!v)
		return;
	if (atomic_load(&v->result) != 1) {
		for (uint64_t i = 0; i < v->n; i++) {
			if (v->slab[i] != s->id || v->slot[i] < g->first || v->slot[i] >= g->first + g->n)
				continue;
			if (index_remove(&p->ix, &v->fps[i]) == 0)
				dropped++;
		}
		s->pooled -= dropped;
		stats_sub(ST_ROWS_POOLED, dropped);
		g->state = SEG_FAILED;
		log_verbose("dropped %u captured rows: their pinned source changed before the copy ran",
			    dropped);
	}
	pool_verify_put(g);
}

/* Advances done_segs over leading segments whose capture is known finished. */
static void pool_slab_advance(struct pool *p, struct slab *s)
{
	while (s->done_segs < s->nsegs) {
		struct seg *g = &s->segs[s->done_segs];

		if (g->state == SEG_RECORDED && device_event_query(g->ev) == 0)
			pool_seg_settle(p, s, g);
		if (g->state != SEG_DONE && g->state != SEG_FAILED)
			break;
		s->done_segs++;
	}
}

/*
 * Decides whether the pooled row at (slab, slot) can be served on stream:
 * returns 1 (serve; the stream waits for the row's capture if needed, once
 * per event: *waited is the last event this copy waited for), 0
 * (treat as a miss: capture still being issued, or failed) or -1 (a wait
 * could not be issued). Called with p->mu held.
 */
static int pool_row_ready(struct pool *p, struct slab *s, uint32_t slot, dev_stream stream,
			  dev_event *waited)
{
	struct seg *g;

	if (s->done_segs < s->nsegs && s->segs[s->done_segs].first <= slot)
		pool_slab_advance(p, s);
	if (s->done_segs == s->nsegs || slot < s->segs[s->done_segs].first) {
		g = pool_seg_find(s, slot);
		return g && g->state == SEG_DONE;
	}
	g = pool_seg_find(s, slot);
	if (!g)
		return 0;
	switch (g->state) {
	case SEG_DONE:
		return 1;
	case SEG_RECORDED:
		if (device_event_query(g->ev) == 0) {
			pool_seg_settle(p, s, g);
			return g->state == SEG_DONE;
		}
		/* A row whose source is still to be checked is not served yet. */
		if (g->verify)
			return 0;
		/* One wait per capture, not per row: rows of a capture share its event. */
		if (*waited == g->ev)
			return 1;
		*waited = g->ev;
		return device_stream_wait(stream, g->ev) ? -1 : 1;
	default:
		return 0;
	}
}

/* Holds the per-copy state between the planning and the publishing steps. */
struct pool_copy_ctx {
	struct pool *p;
	const struct pool_request *r;
	uint64_t nrows;
	struct fp *fps;
	struct plan *plan;
	uint64_t hits, misses, captures;
	uint64_t h2d_ns;
	struct pool_verify *verify;     /* the run-time check of this copy's captures */
};

/* Plans every row under p->mu: hits, misses and captures. Returns 0 or -1 (fall back). */
static int pool_plan(struct pool_copy_ctx *x)
{
	struct pool *p = x->p;
	int64_t open_slab = -1;
	int admitting = p->state == POOL_ACTIVE;
	dev_event waited = NULL;
	int err = 0;
	uint64_t i;

	for (i = 0; i < x->nrows; i++) {
		uint64_t val;
		struct plan *pl = &x->plan[i];

		pl->kind = PLAN_MISS;
		if (index_lookup(&p->ix, &x->fps[i], &val) == 0) {
			uint32_t id = (uint32_t)(val >> p->row_bits);
			uint32_t slot = (uint32_t)(val & ((1U << p->row_bits) - 1));
			struct slab *s = id < p->nslabs ? p->slabs[id] : NULL;
			int ready;

			if (!s || s->row != x->r->row)
				continue;
			ready = pool_row_ready(p, s, slot, x->r->stream, &waited);
			if (ready < 0) {
				err = -1;
				break;
			}
			if (ready) {
				pl->kind = PLAN_HIT;
				pl->slab = id;
				pl->slot = slot;
				x->hits++;
			}
			continue;
		}
		if (!admitting)
			continue;
		if (pool_reserve(p, x->r->row, &pl->slab, &pl->slot, &open_slab)) {
			admitting = 0;
			continue;
		}
		if (index_insert(&p->ix, &x->fps[i], (pl->slab << p->row_bits) | pl->slot)) {
			/* Out of host memory: the slot goes back, the row is a miss. */
			struct slab *s = p->slabs[pl->slab];
			struct seg *g = &s->segs[s->nsegs - 1];

			g->n--;
			s->used--;
			if (g->n == 0)
				g->state = SEG_FAILED;
			admitting = 0;
			continue;
		}
		pl->kind = PLAN_CAPTURE;
		x->captures++;
	}
	for (; i < x->nrows; i++)
		x->plan[i].kind = PLAN_MISS;    /* planning stopped early: fall back */
	x->misses = x->nrows - x->hits;
	return err;
}

/*
 * Collects the runs of rows of plan kind k (consecutive rows whose slab
 * rows are consecutive too) as device-to-device copies: from the slab into
 * the destination for hits, from the destination into the slab for
 * captures. Returns the number of runs written to the arrays.
 */
static uint64_t pool_runs(struct pool_copy_ctx *x, enum plan_kind k, dev_ptr *dsts, dev_ptr *srcs,
			  uint64_t *sizes)
{
	const struct pool_request *r = x->r;
	uint64_t row = r->row, n = 0, i, j;

	for (i = 0; i < x->nrows; i = j) {
		dev_ptr slab_row, dst_row;

		if (x->plan[i].kind != k) {
			j = i + 1;
			continue;
		}
		for (j = i + 1; j < x->nrows && x->plan[j].kind == k &&
		     x->plan[j].slab == x->plan[i].slab &&
		     x->plan[j].slot == x->plan[i].slot + (j - i); j++)
			;
		slab_row = x->p->slabs[x->plan[i].slab]->base + (uint64_t)x->plan[i].slot * row;
		dst_row = r->dst + i * row;
		dsts[n] = k == PLAN_HIT ? dst_row : slab_row;
		srcs[n] = k == PLAN_HIT ? slab_row : dst_row;
		sizes[n] = (j - i) * row;
		n++;
	}
	return n;
}

/*
 * Issues the copy's device work in stream order: hits device-to-device
 * (one batched operation where the driver can), misses host-to-device in
 * runs, then the captures. Returns 0, a positive runtime error from the
 * program's own copy, -1 when the hits could not be issued (fall back),
 * -2 when only the capture failed (the data is delivered), or -ENOMEM.
 */
static int pool_issue(struct pool_copy_ctx *x)
{
	const struct pool_request *r = x->r;
	dev_ptr dst_stack[POOL_STACK_ROWS], src_stack[POOL_STACK_ROWS];
	uint64_t size_stack[POOL_STACK_ROWS];
	dev_ptr *dsts = dst_stack, *srcs = src_stack;
	uint64_t *sizes = size_stack;
	uint64_t row = r->row, n, i, j;
	int err = 0;

	if (x->nrows > POOL_STACK_ROWS) {
		dsts = malloc(x->nrows * sizeof(*dsts));
		srcs = malloc(x->nrows * sizeof(*srcs));
		sizes = malloc(x->nrows * sizeof(*sizes));
		if (!dsts || !srcs || !sizes) {
			err = x->hits ? -1 : -2;
			goto out;
		}
	}
	n = pool_runs(x, PLAN_HIT, dsts, srcs, sizes);
	if (n && device_copy_dtod_many(x->p->dev, dsts, srcs, sizes, n, r->stream)) {
		err = -1;
		goto out;
	}
	/* Misses: runs of consecutive rows not served from the pool. */
	for (i = 0; i < x->nrows; i = j) {
		uint64_t t0;

		if (x->plan[i].kind == PLAN_HIT) {
			j = i + 1;
			continue;
		}
		for (j = i + 1; j < x->nrows && x->plan[j].kind != PLAN_HIT; j++)
			;
		t0 = pool_now_ns();
		err = r->h2d(r->arg, i * row, (j - i) * row);
		x->h2d_ns += pool_now_ns() - t0;
		if (err)
			goto out;
	}
	/* Captures: out of the rows just delivered, into consecutive slab rows. */
	n = pool_runs(x, PLAN_CAPTURE, dsts, srcs, sizes);
	if (n && device_copy_dtod_many(x->p->dev, dsts, srcs, sizes, n, r->stream))
		err = -2;
out:
	if (dsts != dst_stack) {
		free(dsts);
		free(srcs);
		free(sizes);
	}
	return err;
}

/*
 * Publishes the copy's segments after its captures were issued (ok), or
 * drops their rows from the index (capture failed or never issued). Each
 * segment opened by this copy gets an event recorded behind the captures.
 * Called with p->mu held.
 */
static void pool_publish(struct pool_copy_ctx *x, int ok)
{
	struct pool *p = x->p;
	uint64_t captured = 0;

	for (uint64_t i = 0; i < x->nrows; i++) {
		struct plan *pl = &x->plan[i];
		struct slab *s;
		struct seg *g;

		if (pl->kind != PLAN_CAPTURE)
			continue;
		s = p->slabs[pl->slab];
		g = pool_seg_find(s, pl->slot);
		if (g->state == SEG_PENDING) {
			dev_event ev = ok ? pool_event_get(p) : NULL;

			if (ev && device_event_record(ev, x->r->stream) == 0) {
				g->ev = ev;
				g->state = SEG_RECORDED;
				if (x->verify) {
					g->verify = x->verify;
					x->verify->refs++;
				}
			} else {
				if (ev)
					pool_event_put(p, ev);
				g->state = SEG_FAILED;
			}
		}
		if (g->state == SEG_FAILED) {
			index_remove(&p->ix, &x->fps[i]);
			continue;
		}
		s->pooled++;
		captured++;
	}
	x->captures = captured;
}

/* Under VRAMPOOL_VERBOSE, one line of telemetry per VRAMPOOL_TELEMETRY_S (10) seconds of activity. */
static void pool_telemetry(void)
{
	uint64_t now = pool_now_ns();
	uint64_t last = atomic_load_explicit(&pool_last_report_ns, memory_order_relaxed);
	char b1[32], b2[32], b3[32];

	if (last == 0) {
		atomic_compare_exchange_strong(&pool_last_report_ns, &last, now);
		return;
	}
	if (now - last < pool_cfg->telemetry_s * 1000000000ULL ||
	    !atomic_compare_exchange_strong(&pool_last_report_ns, &last, now))
		return;
	log_line("served %llu/%llu rows from VRAM (%s PCIe saved), %llu captured, %llu pooled, pool %s/%s",
		 (unsigned long long)stats_get(ST_ROWS_HITS), (unsigned long long)stats_get(ST_ROWS_SEEN),
		 log_bytes(b1, sizeof(b1), stats_get(ST_BYTES_SERVED)),
		 (unsigned long long)stats_get(ST_ROWS_CAPTURED), (unsigned long long)stats_get(ST_ROWS_POOLED),
		 log_bytes(b2, sizeof(b2), stats_get(ST_POOL_BYTES)),
		 log_bytes(b3, sizeof(b3), stats_get(ST_POOL_BUDGET)));
}

/*
 * Queues the run-time check of the copy's captured rows behind its
 * captures. Returns 0, or -2 (treat as a failed capture) when it cannot.
 * The record is referenced by the segments in pool_publish and freed with
 * the last of them, after the host function has run (its event is behind).
 */
static int pool_verify_queue(struct pool_copy_ctx *x)
{
	uint64_t n = x->captures, k = 0;
	struct pool_verify *v;
	char *mem;

	mem = malloc(sizeof(*v) + n * (sizeof(*v->src) + sizeof(*v->fps) + 2 * sizeof(uint32_t)));
	if (!mem)
		return -2;
	v = (struct pool_verify *)mem;
	v->fps = (struct fp *)(mem + sizeof(*v));
	v->src = (const unsigned char **)(v->fps + n);
	v->slab = (uint32_t *)(v->src + n);
	v->slot = v->slab + n;
	v->row = x->r->row;
	v->n = n;
	v->refs = 0;
	atomic_init(&v->result, 0);
	for (uint64_t i = 0; i < x->nrows; i++) {
		if (x->plan[i].kind != PLAN_CAPTURE)
			continue;
		v->fps[k] = x->fps[i];
		v->src[k] = (const unsigned char *)x->r->src + i * x->r->row;
		v->slab[k] = x->plan[i].slab;
		v->slot[k] = x->plan[i].slot;
		k++;
	}
	if (device_host_func(x->r->stream, pool_verify_run, v)) {
		free(v);
		return -2;
	}
	x->verify = v;
	return 0;
}

/* Delivers the whole copy host-to-device, counting its rows as misses. */
static int pool_copy_plain(const struct pool_request *r, uint64_t nrows, uint64_t *h2d_ns)
{
	uint64_t t0 = pool_now_ns();
	int err = r->h2d(r->arg, 0, r->n);

	*h2d_ns += pool_now_ns() - t0;
	if (err)
		return err;
	stats_add(ST_ROWS_SEEN, nrows);
	stats_add(ST_ROWS_MISSES, nrows);
	stats_add(ST_BYTES_H2D, r->n);
	return 0;
}

int pool_copy(struct pool *p, const struct pool_request *r)
{
	struct pool_copy_ctx x = { .p = p, .r = r, .nrows = r->n / r->row };
	struct fp fps_stack[POOL_STACK_ROWS];
	struct plan plan_stack[POOL_STACK_ROWS];
	uint64_t t0 = pool_now_ns();
	enum pool_state state;
	int err;

	pthread_mutex_lock(&p->mu);
	p->matched_seen++;
	if (r->n > p->largest_copy)
		p->largest_copy = r->n;
	/* An explicit size needs no measurement of the program's own use:
	 * decide at the first matched copy. Otherwise wait for the probe point. */
	if (!p->decided && (p->matched_seen > pool_cfg->probe_after ||
			    pool_cfg->budget_kind == BUDGET_BYTES))
		pool_probe(p);
	state = p->state;
	pthread_mutex_unlock(&p->mu);

	stats_add(ST_MATCHED_CALLS, 1);
	if (state == POOL_DORMANT || state == POOL_OFF) {
		err = pool_copy_plain(r, x.nrows, &x.h2d_ns);
		goto out;
	}

	x.fps = x.nrows <= POOL_STACK_ROWS ? fps_stack : malloc(x.nrows * sizeof(*x.fps));
	x.plan = x.nrows <= POOL_STACK_ROWS ? plan_stack : malloc(x.nrows * sizeof(*x.plan));
	if (!x.fps || !x.plan) {
		err = pool_copy_plain(r, x.nrows, &x.h2d_ns);
		goto out_free;
	}
	stats_add(ST_TIME_FINGERPRINT_NS, fingerprint_rows(r->src, r->row, x.nrows, x.fps));

	pthread_rwlock_rdlock(&p->evict_lock);
	pthread_mutex_lock(&p->mu);
	err = pool_plan(&x);
	pthread_mutex_unlock(&p->mu);
	if (!err)
		err = pool_issue(&x);
	if (!err && r->verify && x.captures)
		err = pool_verify_queue(&x);

	pthread_mutex_lock(&p->mu);
	pool_publish(&x, err == 0);
	/* A queued check that no segment took (every event record failed) is
	 * left to its host function, which may still read it: not freed. */
	pthread_mutex_unlock(&p->mu);
	pthread_rwlock_unlock(&p->evict_lock);

	if (err == -1) {
		/* A hit could not be issued: deliver everything the plain way. The
		 * plain copy is stream-ordered after anything already enqueued, so
		 * it overwrites every row. */
		stats_add(ST_FALLBACKS, 1);
		err = pool_copy_plain(r, x.nrows, &x.h2d_ns);
		goto out_free;
	}
	if (err > 0)
		goto out_free;          /* the program's own copy failed */
	if (err == -2)
		stats_add(ST_FALLBACKS, 1);
	err = 0;
	stats_add(ST_ROWS_SEEN, x.nrows);
	stats_add(ST_ROWS_HITS, x.hits);
	stats_add(ST_ROWS_MISSES, x.misses);
	stats_add(ST_ROWS_CAPTURED, x.captures);
	stats_add(ST_ROWS_POOLED, x.captures);
	stats_add(ST_BYTES_SERVED, x.hits * r->row);
	stats_add(ST_BYTES_H2D, x.misses * r->row);
	stats_add(ST_BYTES_CAPTURED, x.captures * r->row);

out_free:
	if (x.fps != fps_stack)
		free(x.fps);
	if (x.plan != plan_stack)
		free(x.plan);
out:
	stats_add(ST_TIME_SHIM_NS, pool_now_ns() - t0 - x.h2d_ns);
	if (log_is_verbose())
		pool_telemetry();
	return err;
}

static int pool_val_in_slab(uint64_t val, void *arg)
{
	const uint32_t *id_bits = arg;

	return (val >> id_bits[1]) == id_bits[0];
}

/* Frees slab id: its index entries, events and device memory. Called with both locks held. */
static void pool_evict_slab(struct pool *p, uint32_t id)
{
	struct slab *s = p->slabs[id];
	uint32_t arg[2] = { id, p->row_bits };
	char b[32];

	index_remove_if(&p->ix, pool_val_in_slab, arg);
	for (uint32_t i = 0; i < s->nsegs; i++) {
		if (s->segs[i].ev)
			pool_event_put(p, s->segs[i].ev);
		pool_verify_put(&s->segs[i]);   /* the sync before eviction ran its host function */
	}
	device_mem_free(p->dev, s->base);
	p->bytes -= s->bytes;
	stats_sub(ST_POOL_BYTES, s->bytes);
	stats_sub(ST_POOL_SLABS, 1);
	stats_sub(ST_ROWS_POOLED, s->pooled);
	stats_add(ST_POOL_EVICTIONS, 1);
	stats_add(ST_POOL_EVICTED_BYTES, s->bytes);
	log_verbose("evicted slab %u (%s, %u rows) of device %d", id, log_bytes(b, sizeof(b), s->bytes),
		    s->pooled, p->dev);
	free(s->segs);
	free(s);
	p->slabs[id] = NULL;
	for (int c = 0; c < p->nclasses; c++)
		if (p->classes[c].tail == (int64_t)id)
			p->classes[c].tail = -1;
}

int pool_reclaim(int dev, uint64_t need)
{
	struct pool *p;
	int evicted = 0;
	char b[32];

	if (dev < 0 || dev >= POOL_MAX_DEVICES)
		return 0;
	pthread_mutex_lock(&pool_table_lock);
	p = pool_table[dev];
	pthread_mutex_unlock(&pool_table_lock);
	if (!p)
		return 0;

	pthread_rwlock_wrlock(&p->evict_lock);
	pthread_mutex_lock(&p->mu);
	if (p->bytes == 0)
		goto out;
	/* Every read and capture of a slab is work in this context. */
	if (device_sync(p->dev)) {
		log_verbose("cannot synchronise device %d; no slab freed", p->dev);
		evicted = -EIO;
		goto out;
	}
	for (int64_t id = (int64_t)p->nslabs - 1; id >= 0; id--) {
		uint64_t free_bytes = 0, total = 0;

		if (!p->slabs[id])
			continue;
		if (evicted > 0 && device_mem_info(p->dev, &free_bytes, &total) == 0 && free_bytes >= need)
			break;
		pool_evict_slab(p, (uint32_t)id);
		evicted++;
	}
	p->budget = p->bytes;
	stats_set(ST_POOL_BUDGET, p->budget);
	pool_set_state(p, POOL_LATCHED);
	log_verbose("memory pressure on device %d: evicted %d slabs; budget latched at %s", dev, evicted,
		    log_bytes(b, sizeof(b), p->budget));
out:
	pthread_mutex_unlock(&p->mu);
	pthread_rwlock_unlock(&p->evict_lock);
	return evicted;
}

static void pool_free(struct pool *p, int release_device)
{
	for (uint32_t id = 0; id < p->nslabs; id++) {
		struct slab *s = p->slabs[id];

		if (!s)
			continue;
		if (release_device) {
			for (uint32_t i = 0; i < s->nsegs; i++)
				device_event_free(s->segs[i].ev);
			device_mem_free(p->dev, s->base);
		}
		for (uint32_t i = 0; i < s->nsegs; i++)
			pool_verify_put(&s->segs[i]);
		free(s->segs);
		free(s);
	}
	if (release_device)
		for (uint32_t i = 0; i < p->nfree_events; i++)
			device_event_free(p->free_events[i]);
	free(p->free_events);
	free(p->slabs);
	index_release(&p->ix);
	free(p);
}

void pool_atfork_child(void)
{
	pthread_mutex_init(&pool_table_lock, NULL);
	for (int i = 0; i < POOL_MAX_DEVICES; i++) {
		/* The parent's pools may be locked by threads that do not exist
		 * here; their device memory is the parent's. Drop them unused. */
		pool_table[i] = NULL;
	}
	atomic_store(&pool_last_report_ns, 0);
}

void pool_shutdown(void)
{
	pthread_mutex_lock(&pool_table_lock);
	for (int i = 0; i < POOL_MAX_DEVICES; i++) {
		if (pool_table[i])
			pool_free(pool_table[i], 1);
		pool_table[i] = NULL;
	}
	pthread_mutex_unlock(&pool_table_lock);
}
