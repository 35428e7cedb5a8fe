/*
 * plan: the first step of a matched copy, taken under the pool's lock.
 * Every row found in the index is checked for readiness (its capture
 * settled, or an event the stream can wait for): a hit, or a miss. Every
 * row not found is admitted while the budget allows: room in the tail slab
 * of its priority, or a new slab, and an index entry: a capture; once the
 * doorkeeper has engaged (admission on evidence, doorkeeper.h), only a row
 * seen before is, and each copy planned while the pool could admit is
 * evidence for it. Segments whose captures completed are settled here,
 * their pinned-source checks read. plan.h states the contract.
 */
#include "pool/plan.h"

#include <errno.h>
#include <stdlib.h>

#include "core/log.h"
#include "pool/doorkeeper.h"
#include "pool/evict.h"
#include "pool/keep.h"
#include "pool/pincheck.h"
#include "pool/pool_impl.h"

#define POOL_INSERT_AHEAD 8  /* captures whose index slots are loaded ahead of their insert */

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

/* Drops the rows of segment g of slab s from the index and the gauges (FAILED). */
static void pool_seg_drop(struct pool *p, struct slab *s, struct seg *g, const struct pincheck *c)
{
	int keep = __atomic_load_n(&p->whatif_kept, __ATOMIC_RELAXED);
	struct keep_batch *k = NULL;
	uint32_t dropped = 0;

	if (c) {
		for (uint64_t i = 0; i < c->n; i++) {
			if (c->slab[i] != s->id || c->off[i] < g->off ||
			    c->off[i] >= g->off + (uint64_t)g->n * g->row)
				continue;
			if (index_remove(&p->ix, &c->fps[i]) != 0)
				continue;
			dropped++;
			if (keep)       /* a row kept out of the what-if table leaves the pool (keep.h) */
				keep_row(&k, &c->fps[i], slab_row_pos(s, c->off[i]));
		}
	}
	keep_done(&k);
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
		/* Waiting for a capture queued on another stream would make this
		 * copy wait for work the program never ordered it after (which may
		 * wait for the program): a miss. On the same stream the order is
		 * there already; the wait keeps it when a handle was reused. */
		if (g->stream != stream || stream == DEV_STREAM_PER_THREAD)
			return 0;
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

/*
 * Gives the doorkeeper the evidence of a copy planned while the pool could
 * admit (its rows, hits and captures), counts the rows it refused, and
 * says what it decided. Called with p->mu held.
 */
static void pool_admission(struct pool *p, const struct pool_copy_ctx *x, uint64_t refused)
{
	uint64_t row = x->r->row;
	char b1[32];

	stats_add(ST_ROWS_REFUSED, refused);
	switch (doorkeeper_judge(&p->dk, p->budget, row, x->nrows * row, x->hits * row, x->captures * row)) {
	case DK_ENGAGED:
		stats_add(ST_ADMIT_ENGAGEMENTS, 1);
		log_verbose("a pass of the rows seen (%s) got no hits: rows are captured on their second "
			    "sighting from now on", log_bytes(b1, sizeof(b1), p->dk.win_seen));
		break;
	case DK_DISENGAGED:
		stats_add(ST_ADMIT_DISENGAGEMENTS, 1);
		log_verbose("one in %d rows hit or had been seen before: rows are captured on first "
			    "sight again", DK_AGAIN_SHARE);
		break;
	default:
		break;
	}
}

int pool_plan(struct pool_copy_ctx *x)
{
	struct pool *p = x->p;
	int admitting = p->state == POOL_ACTIVE && !x->r->no_admit, judged = admitting;
	dev_event waited = NULL;
	uint64_t i, drops = p->drops, refused = 0, withheld = 0;
	int err = POOL_DONE;

	index_lookup_many(&p->ix, x->fps, x->nrows, x->vals, x->found);
	if (admitting)
		refused = doorkeeper_filter(&p->dk, x->fps, x->nrows, x->found);
	for (i = 0; i < x->nrows; i++) {
		struct plan *pl = &x->plan[i];

		pl->kind = PLAN_MISS;
		/* A check that failed while planning dropped rows found above: look again. */
		if (x->found[i] == 1 && p->drops != drops)
			x->found[i] = index_lookup(&p->ix, &x->fps[i], &x->vals[i]) == 0;
		if (x->found[i] == 1 && x->queued) {
			withheld++;
			continue;       /* its source may change before the copy reads it (pool_impl.h) */
		}
		if (x->found[i] == 1) {
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
		if (!admitting || x->found[i] == DK_REFUSED)
			continue;
		/* the inserts' walks miss beyond what the look-up loaded: start them early */
		if (i + POOL_INSERT_AHEAD < x->nrows && !x->found[i + POOL_INSERT_AHEAD])
			index_prefetch_insert(&p->ix, &x->fps[i + POOL_INSERT_AHEAD]);
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
	if (withheld && !p->told_queued) {
		p->told_queued = 1;
		log_verbose("pooled rows of a pinned source were sent host-to-device: work queued ahead of "
			    "the copy (a host function, a graph, a copy to pinned memory) may change the "
			    "source before the copy reads it");
	}
	if (judged && !err)
		pool_admission(p, x, refused);
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
