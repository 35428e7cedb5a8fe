/*
 * pool: the registry of pools (one per device and context) and the copy
 * pipeline: plan every row under the lock (hit, miss or capture), issue the
 * device work in stream order, publish the captures. Slabs and segments
 * are slab.c's, the budget arithmetic budget.c's, the pinned-source check
 * pincheck.c's, the back-off backoff.c's. pool.h states the invariants.
 *
 * The order of one copy's device work on the program's stream:
 *   [waits for captures still running on other streams]
 *   [misses host-to-device, in runs of consecutive rows]
 *   [hits and captures: one gather kernel launch]
 * or, where the kernel is not available (device_gather_ready says so):
 *   [hits: one batched device-to-device copy] [misses] [captures: one batch]
 * then, when rows were captured, one event per segment behind them.
 */
#include "pool/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool/backoff.h"
#include "pool/fingerprint.h"
#include "pool/index.h"
#include "core/log.h"
#include "pool/pincheck.h"
#include "pool/slab.h"
#include "core/stats.h"
#include "pool/whatif.h"

#define POOL_MAX_DEVICES 64
#define POOL_STACK_ROWS 256
#define POOL_PRIOS (LAYOUT_MAX_PRIO + 1)
#define POOL_STREAMS 64         /* streams remembered for the reclaim fallback */
#define POOL_RETRY_FIRST 2      /* matched copies before a failed allocation or probe is retried, doubled each time */
#define POOL_RETRY_LIMIT 6      /* failed attempts before giving up for the run */
#define POOL_SAMPLES_MAX 16384  /* sampled fingerprints kept while stood down */

/* What the copy pipeline's steps return besides 0 and the program's own errors (positive). */
enum pool_result {
	POOL_DONE = 0,
	POOL_REDELIVER = -1,    /* a hit could not be issued: send every row not yet sent */
	POOL_CAPTURE_LOST = -2, /* delivered, but the captures failed: drop their rows */
};

enum plan_kind { PLAN_MISS, PLAN_HIT, PLAN_CAPTURE };

/* One row's plan inside a copy. */
struct plan {
	uint8_t kind;
	uint32_t slab;          /* HIT, CAPTURE */
	uint32_t seg;           /* CAPTURE: the segment the row went into */
	uint64_t off;           /* HIT, CAPTURE: the row's offset in the slab */
};

struct pool {
	int dev;
	uint64_t ctx_id;        /* the context the slabs live in */
	int retired;            /* the device was reset: this pool is not used again */
	pthread_mutex_t mu;
	pthread_rwlock_t evict_lock;
	struct index ix;
	struct slab **slabs;    /* by id; NULL once evicted */
	uint32_t nslabs, slabs_cap;
	int64_t tail[POOL_PRIOS];       /* slab being filled per priority, or -1 */
	enum pool_state state;
	int decided;
	uint64_t budget;
	uint64_t bytes;         /* slab bytes allocated */
	uint64_t matched_seen;
	uint64_t largest_copy;
	unsigned floor;         /* rows below this priority are no longer admitted */
	uint64_t drops;         /* rows dropped from the index by failed checks (a generation) */
	_Atomic int displace;          /* a higher-priority row was refused: free a lower slab */
	uint64_t alloc_retry_at, probe_retry_at;
	unsigned alloc_failures, probe_failures;
	struct backoff backoff;
	struct index samples;   /* fingerprints of rows sampled while stood down */
	dev_event *free_events;
	uint32_t nfree_events, free_events_cap;
	dev_stream streams[POOL_STREAMS];       /* streams the pool put work on */
	uint32_t nstreams;
	int streams_unsafe;     /* too many, or per-thread streams: no fallback */
};

static const struct config *pool_cfg;
static struct layout pool_layout;       /* the layout in use (the automatic one once found) */
static uint64_t pool_min_row = 1;
static pthread_mutex_t pool_table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool *pool_table[POOL_MAX_DEVICES];

static uint64_t pool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void pool_setup(const struct config *c)
{
	pool_cfg = c;
	pool_set_layout(&c->layout);
}

void pool_set_layout(const struct layout *l)
{
	uint64_t m;

	pthread_mutex_lock(&pool_table_lock);
	pool_layout = *l;
	m = layout_min_row(l);
	pool_min_row = m ? m : 1;
	pthread_mutex_unlock(&pool_table_lock);
}

static struct pool *pool_new(int dev)
{
	struct pool *p = calloc(1, sizeof(*p));
	pthread_rwlockattr_t attr;

	if (!p)
		return NULL;
	p->dev = dev;
	pthread_mutex_init(&p->mu, NULL);
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&p->evict_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (index_init(&p->ix, 0) || index_init(&p->samples, 0)) {
		index_release(&p->ix);
		free(p);
		return NULL;
	}
	for (int i = 0; i < POOL_PRIOS; i++)
		p->tail[i] = -1;
	p->state = POOL_DORMANT;
	if (!pool_cfg->dry)
		stats_set_state(POOL_DORMANT);         /* a dry run has no pool: it stays "off" */
	return p;
}

static void pool_set_state(struct pool *p, enum pool_state s)
{
	if (p->state == s)
		return;
	p->state = s;
	stats_set_state(s);
}

/* The slabs allocated now (ids of freed slabs are not reused). */
static uint32_t pool_live_slabs(const struct pool *p)
{
	uint32_t n = 0;

	for (uint32_t id = 0; id < p->nslabs; id++)
		n += p->slabs[id] != NULL;
	return n;
}

/* Takes a retired pool's slabs out of the gauges; its memory died with its context. */
static void pool_retire(struct pool *p)
{
	uint64_t pooled = 0;

	pthread_mutex_lock(&p->mu);
	for (uint32_t id = 0; id < p->nslabs; id++)
		if (p->slabs[id])
			pooled += p->slabs[id]->pooled_rows;
	stats_sub(ST_POOL_BYTES, p->bytes);
	stats_sub(ST_POOL_SLABS, pool_live_slabs(p));
	stats_sub(ST_ROWS_POOLED, pooled);
	log_verbose("device %d was reset: its %u slabs are gone; a new pool starts dormant",
		    p->dev, pool_live_slabs(p));
	p->retired = 1;
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

/* The number of copies to wait before attempt failures + 1: 4, 8, 16, ... */
static uint64_t pool_retry_gap(unsigned failures)
{
	return (uint64_t)POOL_RETRY_FIRST << (failures < 10 ? failures : 10);
}

/* The one-shot probe (retried with back-off when the driver cannot answer). Called with p->mu held. */
static void pool_probe(struct pool *p)
{
	struct budget_probe b = { .largest_copy = p->largest_copy, .min_row = pool_min_row };
	char why[256];

	if (p->matched_seen < p->probe_retry_at)
		return;
	if (device_mem_info(p->dev, &b.free, &b.total)) {
		if (++p->probe_failures < POOL_RETRY_LIMIT) {
			p->probe_retry_at = p->matched_seen + pool_retry_gap(p->probe_failures);
			log_verbose("probe: cannot read free memory of device %d; trying again later", p->dev);
			stats_set_text(STATS_REASON, "the probe could not read free device memory yet "
				       "(%u tries); it is tried again", p->probe_failures);
			return;
		}
		p->decided = 1;
		stats_set_probe_decided();
		stats_set_text(STATS_REASON, "the probe could not read free device memory (%u tries); "
			       "the pool stays dormant", p->probe_failures);
		log_verbose("probe: cannot read free memory of device %d; the pool stays dormant", p->dev);
		return;
	}
	p->decided = 1;
	stats_set_probe_decided();
	p->budget = budget_decide(pool_cfg, &b);
	stats_set(ST_PROBE_FREE, b.free);
	stats_set(ST_PROBE_TOTAL, b.total);
	stats_set(ST_PROBE_RESERVE, b.reserve);
	stats_set(ST_PROBE_MARGIN, b.margin);
	stats_set(ST_POOL_BUDGET, p->budget);
	budget_explain(pool_cfg, &b, why, sizeof(why));
	if (!p->budget) {
		stats_set_text(STATS_REASON, "%s", why);
		log_verbose("probe: device %d: %s; the pool stays dormant", p->dev, why);
		pool_set_state(p, POOL_DORMANT);
		return;
	}
	stats_set_text(STATS_REASON, "%s", "");
	{
		char b1[32], b2[32], b3[32];

		log_verbose("probe: device %d has %s free of %s; pool budget %s", p->dev,
			    log_bytes(b1, sizeof(b1), b.free), log_bytes(b2, sizeof(b2), b.total),
			    log_bytes(b3, sizeof(b3), p->budget));
	}
	pool_set_state(p, POOL_ACTIVE);
}

/* Whether the probe is due: explicit sizes and automatic layouts decide at once. */
static int pool_probe_due(const struct pool *p)
{
	return p->matched_seen > pool_cfg->probe_after || pool_cfg->budget_kind == BUDGET_BYTES ||
	       pool_cfg->layout.is_auto;
}

/* Remembers stream s as one the pool put work on (the reclaim fallback syncs them). */
static void pool_note_stream(struct pool *p, dev_stream s)
{
	if (s == DEV_STREAM_PER_THREAD) {
		p->streams_unsafe = 1;  /* another thread's per-thread stream cannot be synced from here */
		return;
	}
	for (uint32_t i = 0; i < p->nstreams; i++)
		if (p->streams[i] == s)
			return;
	if (p->nstreams == POOL_STREAMS) {
		p->streams_unsafe = 1;
		return;
	}
	p->streams[p->nstreams++] = s;
}

static dev_event pool_event_get(struct pool *p)
{
	dev_event ev = NULL;

	if (p->nfree_events)
		return p->free_events[--p->nfree_events];
	if (device_event_new(&ev)) {
		return NULL;
	}
	return ev;
}

static void pool_event_put(struct pool *p, dev_event ev)
{
	if (!ev)
		return;
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

/* Drops the rows of segment g of slab s from the index and the gauges (FAILED). */
static void pool_seg_drop(struct pool *p, struct slab *s, struct seg *g, const struct pincheck *c)
{
	uint32_t dropped = 0;

	if (c) {
		for (uint64_t i = 0; i < c->n; i++) {
			if (c->slab[i] != s->id || c->off[i] < g->off ||
			    c->off[i] >= g->off + (uint64_t)g->n * g->row)
				continue;
			if (index_remove(&p->ix, &c->fps[i]) == 0)
				dropped++;
		}
	}
	s->pooled_rows -= dropped;
	s->pooled_bytes -= (uint64_t)dropped * g->row;
	p->drops++;
	stats_sub(ST_ROWS_POOLED, dropped);
	g->state = SEG_FAILED;
	if (dropped)
		log_verbose("dropped %u captured rows: their pinned source changed before the copy ran",
			    dropped);
}

/*
 * Settles segment g of slab s whose capture event has completed: DONE, or
 * FAILED when its run-time check found the source changed. Called with
 * p->mu held.
 */
static void pool_seg_settle(struct pool *p, struct slab *s, struct seg *g)
{
	struct pincheck *c = g->check;

	pool_event_put(p, g->ev);
	g->ev = NULL;
	g->state = SEG_DONE;
	if (!c)
		return;
	if (pincheck_result(c) != 1)
		pool_seg_drop(p, s, g, c);
	g->check = NULL;
	pincheck_put(c);
}

/* Settles the leading RECORDED segments whose events completed; moves "settled" on. */
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
	slab_advance(s);
}

/*
 * Decides whether the pooled row at offset off of slab s can be served on
 * stream: 1 (serve; the stream waits for the row's capture when needed,
 * once per event: *waited is the last event this copy waited for), 0
 * (a miss: capture still being issued or checked, or failed) or -1 (a
 * wait could not be issued). Called with p->mu held.
 */
static int pool_row_ready(struct pool *p, struct slab *s, uint64_t off, dev_stream stream,
			  dev_event *waited)
{
	struct seg *g;
	int64_t k;

	if (off < s->settled)
		return 1;       /* found in the index below settled: DONE (FAILED rows left it) */
	pool_slab_advance(p, s);
	k = slab_seg_find(s, off);
	if (k < 0)
		return 0;
	g = &s->segs[k];
	switch (g->state) {
	case SEG_DONE:
		return 1;
	case SEG_RECORDED:
		if (device_event_query(g->ev) == 0) {
			pool_seg_settle(p, s, g);
			return g->state == SEG_DONE;
		}
		if (g->check)
			return 0;       /* a row whose source is still to be checked is not served yet */
		if (*waited == g->ev)
			return 1;
		*waited = g->ev;
		if (device_stream_wait(stream, g->ev)) {
			return -1;
		}
		return 1;
	default:
		return 0;
	}
}

/* The per-copy state between planning, issuing and publishing. */
struct pool_copy_ctx {
	struct pool *p;
	const struct pool_request *r;
	uint64_t nrows;
	struct fp *fps;
	struct plan *plan;
	uint64_t *vals;         /* lookup results, then first-seen positions */
	uint8_t *found;
	uint64_t hits, misses, captures;
	uint64_t h2d_ns;
	int misses_sent;        /* the miss rows have been delivered host-to-device */
	int send_sync;          /* deliver with the synchronous entry (the copy's last operation) */
	int64_t open_slab, open_seg;
	struct pincheck *check;
};

/* Whether some row of a matched spec can still be admitted. Called with p->mu held. */
static int pool_can_admit(const struct pool *p)
{
	if (p->state != POOL_ACTIVE)
		return 0;
	if (p->budget - p->bytes >= pool_min_row)
		return 1;
	for (int i = (int)p->floor; i < POOL_PRIOS; i++) {
		const struct slab *s = p->tail[i] >= 0 ? p->slabs[p->tail[i]] : NULL;

		if (s && slab_room_for(s, pool_min_row) >= pool_min_row)
			return 1;
	}
	return 0;
}

/* Whether a slab of a priority below prio exists (displacement could make room). */
static int pool_has_lower(const struct pool *p, unsigned prio)
{
	for (uint32_t id = 0; id < p->nslabs; id++)
		if (p->slabs[id] && p->slabs[id]->prio < prio)
			return 1;
	return 0;
}

/*
 * Allocates a new slab for rows of priority prio with room for a row of
 * row bytes, within the budget. Returns its id, or -1 (not now: budget
 * used, allocation backing off, or failed). Called with p->mu held.
 */
static int64_t pool_slab_new(struct pool *p, uint64_t row, unsigned prio)
{
	uint64_t size = budget_slab_size(pool_cfg->slab, p->budget - p->bytes, row);
	struct slab *s;
	dev_ptr base = 0;
	char b1[32];
	int err;

	if (!size || p->nslabs >= SLAB_MAX_ID || p->matched_seen < p->alloc_retry_at ||
	    p->alloc_failures >= POOL_RETRY_LIMIT)
		return -1;
	if (p->nslabs == p->slabs_cap) {
		uint32_t ncap = p->slabs_cap ? 2 * p->slabs_cap : 16;
		struct slab **n = realloc(p->slabs, ncap * sizeof(*n));

		if (!n)
			return -1;
		p->slabs = n;
		p->slabs_cap = ncap;
	}
	err = device_mem_alloc(p->dev, size, &base);
	if (err) {
		p->alloc_failures++;
		p->alloc_retry_at = p->matched_seen + pool_retry_gap(p->alloc_failures);
		log_verbose("device %d refused a %s slab (%s); %s", p->dev, log_bytes(b1, sizeof(b1), size),
			    err == -ENOMEM ? "out of memory" : "driver error",
			    p->alloc_failures < POOL_RETRY_LIMIT ? "trying again later" : "not trying again");
		if (p->alloc_failures >= POOL_RETRY_LIMIT)
			stats_set_text(STATS_REASON, "the device refused %u slab allocations; the pool "
				       "keeps the %s it has", p->alloc_failures,
				       log_bytes(b1, sizeof(b1), p->bytes));
		return -1;
	}
	s = slab_new(p->nslabs, prio, base, size);
	if (!s) {
		device_mem_free(p->dev, base);
		return -1;
	}
	p->alloc_failures = 0;
	p->slabs[p->nslabs] = s;
	p->bytes += size;
	stats_add(ST_POOL_BYTES, size);
	stats_add(ST_POOL_SLABS, 1);
	return p->nslabs++;
}

/*
 * Takes room for one new row of the copy in a slab of its priority.
 * Returns 0 with the plan filled, or -1 (not admitted). Called with p->mu
 * held.
 */
static int pool_admit(struct pool_copy_ctx *x, struct plan *pl)
{
	struct pool *p = x->p;
	uint64_t row = x->r->row;
	unsigned prio = x->r->prio < POOL_PRIOS ? x->r->prio : POOL_PRIOS - 1;
	int64_t t = p->tail[prio];
	uint64_t off = UINT64_MAX;

	if (prio < p->floor)
		return -1;
	if (t >= 0) {
		if (x->open_slab != t)
			x->open_seg = -1;
		off = slab_take(p->slabs[t], row, &x->open_seg);
	}
	if (off == UINT64_MAX) {
		t = pool_slab_new(p, row, prio);
		if (t < 0) {
			/* The budget is used: rows of a lower priority make room. */
			if (p->budget - p->bytes < row && pool_has_lower(p, prio)) {
				if (p->floor < prio)
					log_verbose("rows of priority %u need the budget: rows below it are "
						    "no longer admitted", prio);
				p->floor = prio;
				p->displace = 1;
			}
			return -1;
		}
		p->tail[prio] = t;
		x->open_seg = -1;
		off = slab_take(p->slabs[t], row, &x->open_seg);
		if (off == UINT64_MAX)
			return -1;
	}
	x->open_slab = t;
	pl->kind = PLAN_CAPTURE;
	pl->slab = (uint32_t)t;
	pl->seg = (uint32_t)x->open_seg;
	pl->off = off;
	return 0;
}

/* Plans every row under p->mu: hits, misses and captures. Returns 0 or POOL_REDELIVER. */
static int pool_plan(struct pool_copy_ctx *x)
{
	struct pool *p = x->p;
	int admitting = p->state == POOL_ACTIVE && !x->r->no_admit;
	dev_event waited = NULL;
	uint64_t i, drops = p->drops;
	int err = POOL_DONE;

	index_lookup_many(&p->ix, x->fps, x->nrows, x->vals, x->found);
	for (i = 0; i < x->nrows; i++) {
		struct plan *pl = &x->plan[i];

		pl->kind = PLAN_MISS;
		/* A check that failed while planning dropped rows found above: look again. */
		if (x->found[i] && p->drops != drops)
			x->found[i] = index_lookup(&p->ix, &x->fps[i], &x->vals[i]) == 0;
		if (x->found[i]) {
			uint32_t id = slab_val_id(x->vals[i]);
			uint64_t off = slab_val_off(x->vals[i]);
			struct slab *s = id < p->nslabs ? p->slabs[id] : NULL;
			int ready;

			if (!s || off + x->r->row > s->fill)
				continue;
			ready = pool_row_ready(p, s, off, x->r->stream, &waited);
			if (ready < 0) {
				err = POOL_REDELIVER;
				break;
			}
			if (ready) {
				pl->kind = PLAN_HIT;
				pl->slab = id;
				pl->off = off;
				x->hits++;
			}
			continue;
		}
		if (!admitting)
			continue;
		if (pool_admit(x, pl)) {
			admitting = 0;
			continue;
		}
		if (index_insert(&p->ix, &x->fps[i], slab_val(pl->slab, pl->off))) {
			/* A duplicate inside this copy, or out of host memory: a miss. */
			slab_untake(p->slabs[pl->slab], pl->seg);
			pl->kind = PLAN_MISS;
			continue;
		}
		x->captures++;
	}
	for (; i < x->nrows; i++)
		x->plan[i].kind = PLAN_MISS;
	if (err) {
		/* Planning stopped: undo the captures planned so far, serve nothing. */
		for (i = 0; i < x->nrows; i++) {
			if (x->plan[i].kind == PLAN_CAPTURE) {
				index_remove(&p->ix, &x->fps[i]);
				p->slabs[x->plan[i].slab]->segs[x->plan[i].seg].state = SEG_FAILED;
			}
			x->plan[i].kind = PLAN_MISS;
		}
		x->hits = x->captures = 0;
	}
	x->misses = x->nrows - x->hits;
	if (x->hits || x->captures)
		pool_note_stream(p, x->r->stream);
	if (p->state == POOL_ACTIVE && !pool_can_admit(p)) {
		char b1[32], b2[32];

		pool_set_state(p, POOL_FULL);
		stats_set_text(STATS_REASON, "%s of budget %s in %u slabs holds every row it could admit",
			       log_bytes(b1, sizeof(b1), p->bytes), log_bytes(b2, sizeof(b2), p->budget),
			       pool_live_slabs(p));
		log_verbose("pool full: %s in %u slabs of budget %s", b1, pool_live_slabs(p), b2);
	}
	return err;
}

/* Delivers rows [i, j) host-to-device with the program's entry point. */
static int pool_send(struct pool_copy_ctx *x, uint64_t i, uint64_t j)
{
	uint64_t t0 = pool_now_ns();
	int err = (x->send_sync && x->r->h2d_sync ? x->r->h2d_sync : x->r->h2d)(
		x->r->arg, i * x->r->row, (j - i) * x->r->row);

	x->h2d_ns += pool_now_ns() - t0;
	return err;
}

/* Delivers every row whose plan kind is (want_hits ? HIT : not HIT), in runs. */
static int pool_send_rows(struct pool_copy_ctx *x, int want_hits)
{
	uint64_t i, j;
	int err;

	for (i = 0; i < x->nrows; i = j) {
		if ((x->plan[i].kind == PLAN_HIT) != want_hits) {
			j = i + 1;
			continue;
		}
		for (j = i + 1; j < x->nrows && (x->plan[j].kind == PLAN_HIT) == want_hits; j++)
			;
		err = pool_send(x, i, j);
		if (err)
			return err;
	}
	return 0;
}

/* The end of a run of rows of kind k starting at i: the same slab, consecutive offsets. */
static uint64_t pool_run_end(const struct pool_copy_ctx *x, uint64_t i, enum plan_kind k)
{
	uint64_t j;

	for (j = i + 1; j < x->nrows && x->plan[j].kind == k && x->plan[j].slab == x->plan[i].slab &&
	     x->plan[j].off == x->plan[i].off + (j - i) * x->r->row; j++)
		;
	return j;
}

/* Issues the hits and captures as gather entries (one kernel launch per DEV_GATHER_MAX). */
static int pool_issue_gather(struct pool_copy_ctx *x)
{
	struct dev_gather_entry stack[POOL_STACK_ROWS];
	struct dev_gather_entry *e = stack;
	uint64_t n = 0, i, j;
	int err;

	if (x->hits + x->captures > POOL_STACK_ROWS) {
		e = malloc((x->hits + x->captures) * sizeof(*e));
		if (!e)
			return -ENOMEM;
	}
	for (i = 0; i < x->nrows; i = j) {
		enum plan_kind k = x->plan[i].kind;

		if (k == PLAN_MISS) {
			j = i + 1;
			continue;
		}
		j = pool_run_end(x, i, k);
		if (j - i > 0x7fffffff)
			j = i + 0x7fffffff;
		e[n].slab = x->p->slabs[x->plan[i].slab]->base + x->plan[i].off;
		e[n].dst_row = (uint32_t)i;
		e[n].nrows_dir = (uint32_t)(j - i) | (k == PLAN_CAPTURE ? DEV_GATHER_CAPTURE : 0);
		n++;
	}
	err = device_gather(x->p->dev, x->r->dst, x->r->row, e, (uint32_t)n, x->r->stream);
	if (e != stack)
		free(e);
	return err;
}

/*
 * Collects the runs of rows of plan kind k as device-to-device copies:
 * slab -> destination for hits, destination -> slab for captures.
 */
static uint64_t pool_runs(struct pool_copy_ctx *x, enum plan_kind k, dev_ptr *dsts, dev_ptr *srcs,
			  uint64_t *sizes)
{
	uint64_t row = x->r->row, n = 0, i, j;

	for (i = 0; i < x->nrows; i = j) {
		dev_ptr slab_row, dst_row;

		if (x->plan[i].kind != k) {
			j = i + 1;
			continue;
		}
		j = pool_run_end(x, i, k);
		slab_row = x->p->slabs[x->plan[i].slab]->base + x->plan[i].off;
		dst_row = x->r->dst + i * row;
		dsts[n] = k == PLAN_HIT ? dst_row : slab_row;
		srcs[n] = k == PLAN_HIT ? slab_row : dst_row;
		sizes[n] = (j - i) * row;
		n++;
	}
	return n;
}

/* Issues with batched copies: hits, then misses (unless sent already), then captures. */
static int pool_issue_batched(struct pool_copy_ctx *x)
{
	dev_ptr dst_stack[POOL_STACK_ROWS], src_stack[POOL_STACK_ROWS];
	uint64_t size_stack[POOL_STACK_ROWS];
	dev_ptr *dsts = dst_stack, *srcs = src_stack;
	uint64_t *sizes = size_stack;
	uint64_t n;
	int err;

	if (x->nrows > POOL_STACK_ROWS) {
		dsts = malloc(x->nrows * sizeof(*dsts));
		srcs = malloc(x->nrows * sizeof(*srcs));
		sizes = malloc(x->nrows * sizeof(*sizes));
		if (!dsts || !srcs || !sizes) {
			/* Nothing issued yet: with hits, redeliver all; else send and drop the captures. */
			err = POOL_REDELIVER;
			if (!x->hits) {
				err = x->misses_sent ? 0 : pool_send_rows(x, 0);
				x->misses_sent = 1;
				if (!err)
					err = POOL_CAPTURE_LOST;
			}
			goto out;
		}
	}
	n = pool_runs(x, PLAN_HIT, dsts, srcs, sizes);
	if (n && device_copy_dtod_many(x->p->dev, dsts, srcs, sizes, n, x->r->stream)) {
		err = POOL_REDELIVER;
		goto out;
	}
	if (!x->misses_sent) {
		x->misses_sent = 1;
		err = pool_send_rows(x, 0);
		if (err)
			goto out;
	}
	n = pool_runs(x, PLAN_CAPTURE, dsts, srcs, sizes);
	if (n && device_copy_dtod_many(x->p->dev, dsts, srcs, sizes, n, x->r->stream)) {
		err = POOL_CAPTURE_LOST;
	}
out:
	if (dsts != dst_stack)
		free(dsts);
	if (srcs != src_stack)
		free(srcs);
	if (sizes != size_stack)
		free(sizes);
	return err;
}

/*
 * Issues the copy's device work in stream order (the file comment). Returns
 * 0, a positive error of the program's own copy, POOL_REDELIVER or
 * POOL_CAPTURE_LOST.
 */
static int pool_issue(struct pool_copy_ctx *x)
{
	int err;

	if (!x->hits && !x->captures) {
		/* Only misses: one run, the program's own entry (synchronous or not). */
		x->misses_sent = 1;
		x->send_sync = x->r->sync;
		return pool_send_rows(x, 0);
	}
	if (!device_gather_ready(x->p->dev))
		return pool_issue_batched(x);
	x->misses_sent = 1;
	err = pool_send_rows(x, 0);
	if (err)
		return err;
	err = pool_issue_gather(x);
	if (err == -ENOSYS || err == -EXDEV || err == -EAGAIN || err == -ENOMEM)
		return pool_issue_batched(x);   /* nothing was enqueued */
	if (err)
		return x->hits ? POOL_REDELIVER : POOL_CAPTURE_LOST;
	return POOL_DONE;
}

/*
 * Queues the run-time check of the copy's captured rows behind its
 * captures. Returns 0 or POOL_CAPTURE_LOST.
 */
static int pool_check_queue(struct pool_copy_ctx *x)
{
	struct pincheck *c = pincheck_new(x->captures, x->r->row);
	uint64_t k = 0;

	if (!c)
		return POOL_CAPTURE_LOST;
	for (uint64_t i = 0; i < x->nrows; i++) {
		if (x->plan[i].kind != PLAN_CAPTURE)
			continue;
		c->fps[k] = x->fps[i];
		c->src[k] = (const unsigned char *)x->r->src + i * x->r->row;
		c->slab[k] = x->plan[i].slab;
		c->off[k] = x->plan[i].off;
		k++;
	}
	if (device_host_func(x->r->stream, pincheck_run, c)) {
		pincheck_put(c);        /* refs 0 -> freed: the host function was not queued */
		return POOL_CAPTURE_LOST;
	}
	x->check = c;
	return POOL_DONE;
}

/*
 * Publishes the copy's captures after they were issued (ok), or drops
 * their rows (capture failed or never issued). Each segment the copy
 * opened gets an event recorded behind the captures. Called with p->mu held.
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
		g = &s->segs[pl->seg];
		if (g->state == SEG_PENDING) {
			dev_event ev = ok ? pool_event_get(p) : NULL;

			if (ev && device_event_record(ev, x->r->stream) == 0) {
				g->ev = ev;
				g->state = SEG_RECORDED;
				if (x->check) {
					g->check = x->check;
					x->check->refs++;
				}
			} else {
				pool_event_put(p, ev);
				g->state = SEG_FAILED;
			}
		}
		if (g->state == SEG_FAILED) {
			index_remove(&p->ix, &x->fps[i]);
			pl->kind = PLAN_MISS;
			continue;
		}
		s->pooled_rows++;
		s->pooled_bytes += x->r->row;
		if (x->vals[i] < s->pos_lo)
			s->pos_lo = x->vals[i];
		if (x->vals[i] > s->pos_hi)
			s->pos_hi = x->vals[i];
		captured++;
	}
	/* A queued check that no segment took is left to its host function, which
	 * may still read it: not freed. */
	x->captures = captured;
}

/* The first-seen position of a hit at offset off of slab s, from the slab's range. */
static uint64_t pool_hit_pos(const struct slab *s, uint64_t off)
{
	if (s->pos_lo == UINT64_MAX || s->pos_hi <= s->pos_lo || s->fill == 0)
		return s->pos_hi;
	return s->pos_lo + (uint64_t)((double)(s->pos_hi - s->pos_lo) * ((double)off / (double)s->fill));
}

/* Reports the copy's hits to the what-if curve, one call per run. Called with p->mu held. */
static void pool_whatif_hits(struct pool_copy_ctx *x)
{
	uint64_t i, j;

	for (i = 0; i < x->nrows; i = j) {
		if (x->plan[i].kind != PLAN_HIT) {
			j = i + 1;
			continue;
		}
		j = pool_run_end(x, i, PLAN_HIT);
		whatif_repeat(pool_hit_pos(x->p->slabs[x->plan[i].slab], x->plan[i].off),
			      (j - i) * x->r->row);
	}
}

/* Delivers the whole copy host-to-device, counting its rows as misses. */
static int pool_copy_plain(struct pool_copy_ctx *x)
{
	int err;

	x->send_sync = x->r->sync;
	err = pool_send(x, 0, x->nrows);

	if (err)
		return err;
	stats_add(ST_ROWS_SEEN, x->nrows);
	stats_add(ST_ROWS_MISSES, x->nrows);
	stats_add(ST_BYTES_H2D, x->r->n);
	return 0;
}

/* Fingerprints the copy's rows into x->fps. */
static void pool_fingerprint(struct pool_copy_ctx *x)
{
	stats_add(ST_TIME_FINGERPRINT_NS, fingerprint_rows(x->r->src, x->r->row, x->nrows, x->fps));
}

/*
 * A copy the pool only observes (dry runs, before the probe, a dormant
 * pool): fingerprints for the what-if curve, then the plain copy.
 */
static int pool_copy_observe(struct pool_copy_ctx *x)
{
	pool_fingerprint(x);
	whatif_observe(x->fps, NULL, x->nrows, x->r->row, NULL);
	return pool_copy_plain(x);
}

/*
 * A copy sampled while pooling stood down: a few rows fingerprinted and
 * looked up, then the plain copy. Returns its result; *hits the rows found.
 */
static int pool_copy_sample(struct pool_copy_ctx *x, uint32_t *rows, uint32_t *hits, uint32_t *repeats)
{
	uint64_t step = x->nrows > BACKOFF_SAMPLE_ROWS ? x->nrows / BACKOFF_SAMPLE_ROWS : 1;
	struct fp fps[BACKOFF_SAMPLE_ROWS];
	uint64_t vals[BACKOFF_SAMPLE_ROWS];
	uint8_t found[BACKOFF_SAMPLE_ROWS];
	uint32_t n = 0;

	for (uint64_t i = 0; i < x->nrows && n < BACKOFF_SAMPLE_ROWS; i += step)
		fps[n++] = fingerprint_one((const unsigned char *)x->r->src + i * x->r->row, x->r->row);
	*rows = n;
	*hits = *repeats = 0;
	pthread_mutex_lock(&x->p->mu);
	index_lookup_many(&x->p->ix, fps, n, vals, found);
	for (uint32_t i = 0; i < n; i++) {
		*hits += found[i];
		/* Seen in an earlier sample: the rows repeat, whatever the pool holds. */
		if (index_lookup(&x->p->samples, &fps[i], &vals[i]) == 0)
			(*repeats)++;
		else if (x->p->samples.count < POOL_SAMPLES_MAX)
			index_insert(&x->p->samples, &fps[i], 1);
	}
	pthread_mutex_unlock(&x->p->mu);
	return pool_copy_plain(x);
}

/*
 * Waits for all work in the pool's context so that slabs can be freed:
 * cuCtxSynchronize, tried twice; when it keeps failing, a sync of every
 * stream the pool put work on (and the legacy stream), when that set is
 * known and complete. Returns 0 or -EIO. Called with both locks held.
 */
static int pool_quiesce(struct pool *p)
{
	int err;

	if (device_sync(p->dev) == 0 || device_sync(p->dev) == 0)
		return 0;
	if (p->streams_unsafe)
		return -EIO;
	err = device_stream_sync(DEV_STREAM_LEGACY);
	for (uint32_t i = 0; i < p->nstreams && !err; i++)
		err = device_stream_sync(p->streams[i]);
	return err ? -EIO : 0;
}

/* index_remove_if predicate: the value points into slab *(uint32_t *)arg. */
static int pool_val_in_slab(uint64_t val, void *arg)
{
	return slab_val_id(val) == *(const uint32_t *)arg;
}

/*
 * Frees slab id: its device memory first (a failed free keeps the slab
 * whole and counts nothing), then its index entries, events and checks.
 * why ("evicted", "displaced") goes in the verbose line. Returns 0 or -EIO.
 * Called with both locks held, after pool_quiesce.
 */
static int pool_evict_slab(struct pool *p, uint32_t id, const char *why)
{
	struct slab *s = p->slabs[id];
	char b[32];

	if (device_mem_free(p->dev, s->base) && device_mem_free(p->dev, s->base)) {
		log_verbose("could not free slab %u of device %d; it stays", id, p->dev);
		return -EIO;
	}
	for (uint32_t i = 0; i < s->nsegs; i++) {
		if (s->segs[i].ev)
			pool_event_put(p, s->segs[i].ev);
		if (s->segs[i].check)
			pincheck_put(s->segs[i].check);     /* the sync ran its host function */
	}
	index_remove_if(&p->ix, pool_val_in_slab, &id);
	p->bytes -= s->bytes;
	stats_sub(ST_POOL_BYTES, s->bytes);
	stats_sub(ST_POOL_SLABS, 1);
	stats_sub(ST_ROWS_POOLED, s->pooled_rows);
	log_verbose("%s slab %u (%s, %llu rows, priority %u) of device %d", why, id,
		    log_bytes(b, sizeof(b), s->bytes), (unsigned long long)s->pooled_rows, s->prio, p->dev);
	for (int i = 0; i < POOL_PRIOS; i++)
		if (p->tail[i] == (int64_t)id)
			p->tail[i] = -1;
	p->slabs[id] = NULL;
	slab_free(s);
	return 0;
}

/*
 * Frees the newest slab below the admission floor, to make room for rows
 * of a higher priority. Takes both locks.
 */
static void pool_displace(struct pool *p)
{
	pthread_rwlock_wrlock(&p->evict_lock);
	pthread_mutex_lock(&p->mu);
	if (!p->displace)
		goto out;
	p->displace = 0;
	for (int64_t id = (int64_t)p->nslabs - 1; id >= 0; id--) {
		struct slab *s = p->slabs[id];
		uint64_t bytes;

		if (!s || s->prio >= p->floor)
			continue;
		if (pool_quiesce(p)) {
			log_verbose("cannot synchronise device %d; no slab displaced", p->dev);
			break;
		}
		bytes = s->bytes;
		if (pool_evict_slab(p, (uint32_t)id, "displaced") == 0) {
			stats_add(ST_POOL_DISPLACED_BYTES, bytes);
			stats_add(ST_POOL_DISPLACED_SLABS, 1);
			if (p->state == POOL_FULL)
				pool_set_state(p, POOL_ACTIVE);
		}
		break;
	}
out:
	pthread_mutex_unlock(&p->mu);
	pthread_rwlock_unlock(&p->evict_lock);
}

/*
 * Waits until a synchronous copy's bytes are on the device (pool_request.sync):
 * the stream, twice; an event behind the copy; the whole context. When no
 * wait works, the rows served from the pool are delivered again with the
 * program's synchronous entry (which waits itself) and counted as misses.
 * Returns 0 or the program's own copy error.
 */
static int pool_complete_sync(struct pool_copy_ctx *x)
{
	const struct pool_request *r = x->r;
	int err;

	if (device_stream_sync(r->stream) == 0)
		return 0;
	if (device_stream_sync(r->stream) == 0 || device_stream_wait_host(r->stream) == 0 ||
	    device_sync(x->p->dev) == 0)
		return 0;
	stats_add(ST_FALLBACKS, 1);
	x->send_sync = 1;
	if (!x->hits)
		return pool_send(x, x->nrows - 1, x->nrows);
	err = pool_send_rows(x, 1);
	if (err)
		return err;
	x->misses += x->hits;
	x->hits = 0;
	return 0;
}

/*
 * Empties a pool full of rows that no longer come back (backoff.h), so it
 * fills again with the rows that do. Takes both locks.
 */
static void pool_refresh(struct pool *p)
{
	int freed = 0;

	pthread_rwlock_wrlock(&p->evict_lock);
	pthread_mutex_lock(&p->mu);
	if (p->retired || p->state == POOL_LATCHED || pool_quiesce(p)) {
		log_verbose("cannot empty the pool of device %d now", p->dev);
		goto out;
	}
	for (int64_t id = (int64_t)p->nslabs - 1; id >= 0; id--) {
		uint64_t bytes;

		if (!p->slabs[id])
			continue;
		bytes = p->slabs[id]->bytes;
		if (pool_evict_slab(p, (uint32_t)id, "refreshed") == 0) {
			freed++;
			stats_add(ST_POOL_EVICTIONS, 1);
			stats_add(ST_POOL_EVICTED_BYTES, bytes);
		}
	}
	index_release(&p->samples);
	p->floor = 0;
	p->displace = 0;
	if (p->state == POOL_FULL)
		pool_set_state(p, POOL_ACTIVE);
	stats_set_text(STATS_REASON, "%s", "");
	log_verbose("rows repeat but the pool held others that no longer come back: emptied %d slabs "
		    "to admit the rows that do", freed);
out:
	pthread_mutex_unlock(&p->mu);
	pthread_rwlock_unlock(&p->evict_lock);
}

/* The full path: fingerprint, plan, issue, publish. Returns what pool_copy returns. */
static int pool_copy_full(struct pool_copy_ctx *x)
{
	struct pool *p = x->p;
	const struct pool_request *r = x->r;
	int err, can_admit, event;

	pool_fingerprint(x);
	pthread_rwlock_rdlock(&p->evict_lock);
	pthread_mutex_lock(&p->mu);
	err = pool_plan(x);
	if (!err)
		pool_whatif_hits(x);
	pthread_mutex_unlock(&p->mu);

	/* Rows the pool did not serve feed the what-if curve; the positions of
	 * captured rows go into their slab's range when they are published. */
	{
		uint8_t skip_stack[POOL_STACK_ROWS];
		uint8_t *skip = x->nrows <= POOL_STACK_ROWS ? skip_stack : malloc(x->nrows);

		if (skip) {
			for (uint64_t i = 0; i < x->nrows; i++)
				skip[i] = x->plan[i].kind == PLAN_HIT;
			whatif_observe(x->fps, skip, x->nrows, r->row, x->vals);
			if (skip != skip_stack)
				free(skip);
		} else {
			memset(x->vals, 0, x->nrows * sizeof(*x->vals));
		}
	}

	if (!err)
		err = pool_issue(x);
	if (!err && r->verify && x->captures)
		err = pool_check_queue(x);
	pthread_mutex_lock(&p->mu);
	pool_publish(x, err == POOL_DONE);
	can_admit = pool_can_admit(p);
	event = backoff_full(&p->backoff, can_admit, r->n, err == POOL_DONE ? x->hits * r->row : 0);
	if (event) {
		stats_add(ST_BACKOFF_EVENTS, 1);
		stats_set_stood_down(1);
		stats_set_text(STATS_REASON, "rows did not repeat: pooling stood down after %llu copies; "
			       "host-side random augmentation makes every epoch unique",
			       (unsigned long long)p->matched_seen);
		log_verbose("rows did not repeat in the last %d copies and the pool cannot admit more: "
			    "pooling stands down (one copy in %d is sampled)", BACKOFF_WINDOW,
			    BACKOFF_SAMPLE_EVERY);
	}
	pthread_mutex_unlock(&p->mu);
	pthread_rwlock_unlock(&p->evict_lock);

	if (err == POOL_REDELIVER) {
		/* Every row not yet sent host-to-device goes the plain way, stream-ordered
		 * after whatever the pool enqueued, so it overwrites it. */
		stats_add(ST_FALLBACKS, 1);
		x->send_sync = r->sync;
		err = x->misses_sent ? pool_send_rows(x, 1) : pool_send(x, 0, x->nrows);
		if (err)
			return err;
		stats_add(ST_ROWS_SEEN, x->nrows);
		stats_add(ST_ROWS_MISSES, x->nrows);
		stats_add(ST_BYTES_H2D, r->n);
		return 0;
	}
	if (err > 0)
		return err;
	if (err == POOL_CAPTURE_LOST)
		stats_add(ST_FALLBACKS, 1);
	if (r->sync && !x->send_sync) {
		err = pool_complete_sync(x);
		if (err)
			return err;
	}
	stats_add(ST_ROWS_SEEN, x->nrows);
	stats_add(ST_ROWS_HITS, x->hits);
	stats_add(ST_ROWS_MISSES, x->misses);
	stats_add(ST_ROWS_CAPTURED, x->captures);
	stats_add(ST_ROWS_POOLED, x->captures);
	stats_add(ST_BYTES_SERVED, x->hits * r->row);
	stats_add(ST_BYTES_H2D, x->misses * r->row);
	stats_add(ST_BYTES_CAPTURED, x->captures * r->row);
	return 0;
}

int pool_copy(struct pool *p, const struct pool_request *r)
{
	struct pool_copy_ctx x = { .p = p, .r = r, .nrows = r->n / r->row, .open_slab = -1, .open_seg = -1 };
	struct fp fps_stack[POOL_STACK_ROWS];
	struct plan plan_stack[POOL_STACK_ROWS];
	uint64_t vals_stack[POOL_STACK_ROWS];
	uint8_t found_stack[POOL_STACK_ROWS];
	uint64_t t0 = pool_now_ns();
	enum backoff_route route;
	int observe, err, retired;
	uint32_t srows, shits, sreps;
	enum backoff_verdict verdict;

	pthread_mutex_lock(&p->mu);
	p->matched_seen++;
	if (r->n > p->largest_copy)
		p->largest_copy = r->n;
	if (!pool_cfg->dry && !p->decided && !p->retired && pool_probe_due(p))
		pool_probe(p);
	retired = p->retired;
	observe = pool_cfg->dry || !p->decided || p->state == POOL_DORMANT;
	if (pool_cfg->dry || !p->decided) {
		route = BACKOFF_FULL;
	} else {
		int was_down = p->backoff.down;

		route = backoff_route(&p->backoff, pool_can_admit(p));
		if (was_down && !p->backoff.down)
			stats_set_stood_down(0);        /* the pool can admit again */
	}
	pthread_mutex_unlock(&p->mu);

	stats_add(ST_MATCHED_CALLS, 1);
	if (retired || route == BACKOFF_PASS) {
		if (!retired)
			stats_add(ST_STOOD_DOWN_CALLS, 1);
		err = pool_copy_plain(&x);
		goto out;
	}
	if (route == BACKOFF_SAMPLE) {
		stats_add(ST_STOOD_DOWN_CALLS, 1);
		err = pool_copy_sample(&x, &srows, &shits, &sreps);
		pthread_mutex_lock(&p->mu);
		verdict = backoff_sample(&p->backoff, srows, shits, sreps);
		if (verdict != BACKOFF_STAY) {
			stats_set_stood_down(0);
			stats_set_text(STATS_REASON, "%s", "");
			if (verdict == BACKOFF_RESUME)
				log_verbose("sampled rows are in the pool again: pooling resumes");
		}
		pthread_mutex_unlock(&p->mu);
		if (verdict == BACKOFF_REFRESH)
			pool_refresh(p);
		goto out;
	}

	x.fps = x.nrows <= POOL_STACK_ROWS ? fps_stack : malloc(x.nrows * sizeof(*x.fps));
	if (!x.fps) {
		err = pool_copy_plain(&x);
		goto out;
	}
	if (observe) {
		err = pool_copy_observe(&x);
		if (!err && p->decided && !pool_cfg->dry) {
			pthread_mutex_lock(&p->mu);
			backoff_full(&p->backoff, 0, r->n, 0);
			pthread_mutex_unlock(&p->mu);
		}
		goto out_free;
	}
	x.plan = x.nrows <= POOL_STACK_ROWS ? plan_stack : malloc(x.nrows * sizeof(*x.plan));
	x.vals = x.nrows <= POOL_STACK_ROWS ? vals_stack : malloc(x.nrows * sizeof(*x.vals));
	x.found = x.nrows <= POOL_STACK_ROWS ? found_stack : malloc(x.nrows);
	if (!x.plan || !x.vals || !x.found) {
		err = pool_copy_plain(&x);
		goto out_free;
	}
	err = pool_copy_full(&x);
	if (p->displace)
		pool_displace(p);

out_free:
	if (x.fps != fps_stack)
		free(x.fps);
	if (x.plan != plan_stack)
		free(x.plan);
	if (x.vals != vals_stack)
		free(x.vals);
	if (x.found != found_stack)
		free(x.found);
out:
	stats_add(ST_TIME_SHIM_NS, pool_now_ns() - t0 - x.h2d_ns);
	return err;
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
	if (p->bytes == 0 || p->retired)
		goto out;
	/* Every read and capture of a slab is work in this context. */
	if (pool_quiesce(p)) {
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
		free_bytes = p->slabs[id]->bytes;
		if (pool_evict_slab(p, (uint32_t)id, "evicted") == 0) {
			evicted++;
			stats_add(ST_POOL_EVICTIONS, 1);
			stats_add(ST_POOL_EVICTED_BYTES, free_bytes);
		}
	}
	if (evicted == 0)
		goto out;
	p->budget = p->bytes;
	stats_set(ST_POOL_BUDGET, p->budget);
	pool_set_state(p, POOL_LATCHED);
	stats_set_text(STATS_REASON, "%d slabs were given back to the program under memory "
		       "pressure; nothing new is admitted", evicted);
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
		for (uint32_t i = 0; i < s->nsegs; i++) {
			if (release_device)
				device_event_free(s->segs[i].ev);
			if (s->segs[i].check)
				pincheck_put(s->segs[i].check);
		}
		if (release_device)
			device_mem_free(p->dev, s->base);
		slab_free(s);
	}
	if (release_device)
		for (uint32_t i = 0; i < p->nfree_events; i++)
			device_event_free(p->free_events[i]);
	free(p->free_events);
	free(p->slabs);
	index_release(&p->ix);
	index_release(&p->samples);
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
