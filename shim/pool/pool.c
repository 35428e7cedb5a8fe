/*
 * pool: the copy pipeline of one matched copy, and the top of the pool's
 * room. pool_copy counts the copy, runs the one-shot budget probe when it
 * is due, and routes the copy: plain (retired, stood down), sampled (stood
 * down), observed (dry run, dormant, before the probe) or full. The full
 * path fingerprints the rows, plans them under the lock (plan.c), issues
 * the device work in stream order (issue.c), publishes the captures behind
 * an event per segment, and completes a synchronous copy. Displacement and
 * the refresh of a pool that backs off free slabs through evict.c.
 *
 * The room: pool_impl.h (internal structures, the one-way order of its
 * files, the lock order), registry.c (pools per device and context),
 * plan.c, issue.c, evict.c. Slabs and segments are slab.c's, the budget
 * arithmetic budget.c's, the pinned-source check pincheck.c's, the
 * back-off backoff.c's. pool.h states the invariants.
 */
#include "pool/pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "pool/doorkeeper.h"
#include "pool/evict.h"
#include "pool/hazard.h"
#include "pool/issue.h"
#include "pool/pincheck.h"
#include "pool/plan.h"
#include "pool/pool_impl.h"
#include "pool/route.h"
#include "pool/keep.h"
#include "pool/whatif.h"

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
		__atomic_store_n(&p->decided, 1, __ATOMIC_RELEASE);     /* read unlocked in pool_copy (item E) */
		stats_set_probe_decided();
		stats_set_text(STATS_REASON, "the probe could not read free device memory (%u tries); "
			       "the pool stays dormant", p->probe_failures);
		log_verbose("probe: cannot read free memory of device %d; the pool stays dormant", p->dev);
		return;
	}
	__atomic_store_n(&p->decided, 1, __ATOMIC_RELEASE);
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
	(void)index_reserve(&p->ix, p->budget / pool_min_row);  /* issue 16: sized from the budget (index.h) */
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

/*
 * Publishes the copy's captures after they were issued (ok), or drops
 * their rows (capture failed or never issued). Each segment the copy
 * opened gets an event recorded behind the captures. Kept captures
 * (keep.h) that leave the pool here, or that the pool's rows were handed
 * to the what-if table without while this copy was under way, go to the
 * table now. Called with p->mu held.
 */
static void pool_publish(struct pool_copy_ctx *x, int ok)
{
	struct pool *p = x->p;
	uint64_t captured = 0;
	struct keep_batch *k = NULL;
	int late = x->kept && x->adopted != p->whatif_adopted;

	for (uint64_t i = 0; i < x->nrows && x->captures; i++) {
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
				g->stream = x->r->stream;
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
			if (x->kept)
				keep_row(&k, &x->fps[i], x->vals[i]);
			continue;
		}
		if (late)
			keep_row(&k, &x->fps[i], x->vals[i]);
		s->pooled_rows++;
		s->pooled_bytes += x->r->row;
		if (x->vals[i] < s->pos_lo)
			s->pos_lo = x->vals[i];
		if (x->vals[i] > s->pos_hi)
			s->pos_hi = x->vals[i];
		captured++;
	}
	keep_done(&k);
	/* A queued check that no segment took is left to its host function, which
	 * may still read it: not freed. */
	x->captures = captured;
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
	uint64_t t0 = pool_now_ns(), c0 = x->timed_cpu ? ledger_cpu_now() : 0;
	int err = device_stream_sync(r->stream);

	x->wait_ns += pool_now_ns() - t0;
	if (x->timed_cpu)
		x->wait_cpu_ns += ledger_cpu_now() - c0;     /* a driver may spin while it waits */
	if (err == 0)
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
	freed = pool_evict_newest(p, NULL, "refreshed");
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

/*
 * The full path: fingerprint, plan, issue, publish; b is the copy kind's
 * back-off. Returns what pool_copy returns.
 */
static int pool_copy_full(struct pool_copy_ctx *x, struct backoff *b)
{
	struct pool *p = x->p;
	const struct pool_request *r = x->r;
	int err, can_admit, event;

	/* the table first: without noted work no driver query is made */
	x->queued = r->verify && hazard_pending(r->src, r->n) && !device_stream_idle(p->dev, r->stream);
	pool_fingerprint(x);
	pthread_rwlock_rdlock(&p->evict_lock);
	pthread_mutex_lock(&p->mu);
	err = pool_plan(x);
	if (!err)
		pool_whatif_hits(x);
	/* The serve meter's turn (link.h): a gather of hits alone, counted under the plan's lock. */
	x->serve_due = !err && x->hits && !x->captures && pool_cfg->ledger != LEDGER_OFF && !pool_cfg->dry &&
		       link_serve_due(&p->serve, pool_cfg->link_gbps, x->hits * r->row);
	pthread_mutex_unlock(&p->mu);

	pool_whatif_rows(x);

	if (!err)
		err = pool_issue(x);
	pthread_mutex_lock(&p->mu);
	pool_publish(x, err == POOL_DONE);
	can_admit = pool_admits_unseen(p);
	event = backoff_full(b, can_admit, r->n, err == POOL_DONE ? x->hits * r->row : 0);
	if (event) {
		const char *admits = p->dk.engaged ? "admits only rows seen twice" : "can admit no more";

		stats_add(ST_BACKOFF_EVENTS, 1);
		stats_set_stood_down(1);
		/* why, the what-if curve tells at report time (report_repeat_why, issue 19) */
		stats_set_text(STATS_REASON, "rows did not hit the pool and it %s: pooling stood down after "
			       "%llu copies", admits, (unsigned long long)p->matched_seen);
		log_verbose("under 1%% of the last copies' bytes came from the pool and it %s: pooling "
			    "stands down (one copy in %d is sampled)", admits, BACKOFF_SAMPLE_EVERY);
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
		stats_add(ST_BYTES_REQUESTED, r->n);     /* beside the bytes: pool.h */
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
	stats_add(ST_BYTES_REQUESTED, r->n);     /* beside the bytes: pool.h */
	stats_add(ST_BYTES_SERVED, x->hits * r->row);
	stats_add(ST_BYTES_H2D, x->misses * r->row);
	stats_add(ST_BYTES_CAPTURED, x->captures * r->row);
	return 0;
}

/* The thread's own count of device operations so far (no sum over threads). */
static uint64_t pool_thread_ops(void)
{
	return stats_self ? atomic_load_explicit(&stats_self->v[ST_DEVICE_OPS], memory_order_relaxed) : 0;
}

/*
 * The request as the pool runs it (pool_copy): the program's sends are
 * counted on the way (the device calls the pool adds), and, where the
 * shim's CPU time is read, timed on the thread's CPU clock too, to be
 * taken off it (a send may block or be descheduled: its wall time is not
 * its CPU time). The misses the pool sends as one batched call
 * (issue.c) do not come this way: they are timed on the CPU clock there
 * (x->batch_cpu_ns), never by their wall time, which on a busy machine is
 * mostly the wait for a core and took the whole copy's CPU time to 0.
 */
struct pool_counted {
	struct pool_request r;
	const struct pool_request *orig;
	struct pool_copy_ctx *x;
	uint64_t sends, send_cpu_ns;
	int cpu;                /* time the sends' CPU */
};

/* One send of the program's; a send of the whole copy may be timed for the link meter (route.h). */
static int pool_counted_send(struct pool_counted *c, int sync, uint64_t off, uint64_t len)
{
	int measured = c->x->measure && off == 0 && len == c->orig->n && pool_link_begin(c->x);
	uint64_t t0 = c->cpu ? ledger_cpu_now() : 0, w0 = measured ? pool_now_ns() : 0;
	int err = sync ? c->orig->h2d_sync(c->orig->arg, off, len) : c->orig->h2d(c->orig->arg, off, len);

	if (measured)
		pool_link_end(c->x, err == 0, pool_now_ns() - w0);
	if (c->cpu)
		c->send_cpu_ns += ledger_cpu_now() - t0;
	c->sends++;
	return err;
}

static int pool_counted_h2d(void *arg, uint64_t off, uint64_t len)
{
	return pool_counted_send(arg, 0, off, len);
}

static int pool_counted_h2d_sync(void *arg, uint64_t off, uint64_t len)
{
	return pool_counted_send(arg, 1, off, len);
}

/* a - b, or 0. */
static uint64_t pool_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

int pool_copy(struct pool *p, const struct pool_request *r)
{
	struct pool_counted rc = { .r = *r, .orig = r };
	struct pool_copy_ctx x = { .p = p, .r = &rc.r, .nrows = r->n / r->row, .open_slab = -1, .open_seg = -1 };
	struct fp fps_stack[POOL_STACK_ROWS];
	struct plan plan_stack[POOL_STACK_ROWS];
	uint64_t vals_stack[POOL_STACK_ROWS];
	uint8_t found_stack[POOL_STACK_ROWS];
	uint64_t ops0 = pool_thread_ops(), wall_ns, cpu_ns;
	struct ledger_stamp t0;
	enum pool_route route;
	struct backoff *b;
	int err, fed = 0, slot = ledger_slot(r->spec), hashed;
	uint32_t srows, shits, sreps;
	enum backoff_verdict verdict;

	ledger_stamp(&t0);
	rc.x = &x;
	rc.r.arg = &rc;
	rc.r.h2d = pool_counted_h2d;
	rc.r.h2d_sync = r->h2d_sync ? pool_counted_h2d_sync : NULL;
	pthread_mutex_lock(&p->mu);
	p->matched_seen++;
	if (r->n > p->largest_copy)
		p->largest_copy = r->n;
	if (!pool_cfg->dry && !p->decided && !p->retired && pool_probe_due(p))
		pool_probe(p);
	route = pool_route(p, r, slot, &b, &x.measure);
	pthread_mutex_unlock(&p->mu);
	/* The CPU clock is a system call: read only where the shim hashes rows, and there sampled. */
	hashed = route == POOL_ROUTE_FULL || route == POOL_ROUTE_OBSERVE;
	if (hashed && ledger_cpu_due(r->sync)) {
		ledger_stamp_cpu(&t0);
		x.timed_cpu = rc.cpu = 1;
	}

	stats_add(ST_MATCHED_CALLS, 1);
	switch (route) {
	case POOL_ROUTE_PLAIN:
	case POOL_ROUTE_PASS:
		if (route == POOL_ROUTE_PASS)
			stats_add(ST_STOOD_DOWN_CALLS, 1);
		err = pool_copy_plain(&x);
		if (route == POOL_ROUTE_PASS && !err)
			pool_copy_unhashed(&x);    /* issue 19: the curve stays true */
		goto out;
	case POOL_ROUTE_ASIDE:
		err = pool_copy_aside(&x, slot);
		goto out;
	case POOL_ROUTE_SAMPLE:
		stats_add(ST_STOOD_DOWN_CALLS, 1);
		err = pool_copy_sample(&x, &srows, &shits, &sreps);
		pthread_mutex_lock(&p->mu);
		verdict = backoff_sample(b, srows, shits, sreps);
		/*
		 * Rows come back (hits, or repeats among the samples): where the
		 * doorkeeper kept them out, they are captured on first sight
		 * again; a pool with room has nothing to empty.
		 */
		if (verdict == BACKOFF_REFRESH && pool_can_admit(p))
			verdict = BACKOFF_RESUME;
		if (verdict != BACKOFF_STAY && doorkeeper_disengage(&p->dk) == DK_DISENGAGED) {
			stats_add(ST_ADMIT_DISENGAGEMENTS, 1);
			log_verbose("sampled rows come back: rows are captured on first sight again");
		}
		if (verdict != BACKOFF_STAY) {
			stats_set_stood_down(backoff_any_down(&p->kinds));
			stats_set_text(STATS_REASON, "%s", "");
			if (verdict == BACKOFF_RESUME)
				log_verbose("sampled rows are in the pool again: pooling resumes");
		}
		pthread_mutex_unlock(&p->mu);
		if (verdict == BACKOFF_REFRESH)
			pool_refresh(p);
		goto out;
	case POOL_ROUTE_OBSERVE:
	case POOL_ROUTE_FULL:
		break;
	}

	x.fps = x.nrows <= POOL_STACK_ROWS ? fps_stack : malloc(x.nrows * sizeof(*x.fps));
	if (!x.fps) {
		err = pool_copy_plain(&x);
		goto out;
	}
	fed = 1;
	if (route == POOL_ROUTE_OBSERVE) {
		err = pool_copy_observe(&x);
		/* Unlocked: the probe may decide meanwhile (issue 17, item E: an atomic read). */
		if (!err && __atomic_load_n(&p->decided, __ATOMIC_ACQUIRE) && !pool_cfg->dry) {
			pthread_mutex_lock(&p->mu);
			backoff_full(b, 0, r->n, 0);
			pthread_mutex_unlock(&p->mu);
		}
		goto out_free;
	}
	x.plan = x.nrows <= POOL_STACK_ROWS ? plan_stack : malloc(x.nrows * sizeof(*x.plan));
	x.vals = x.nrows <= POOL_STACK_ROWS ? vals_stack : malloc(x.nrows * sizeof(*x.vals));
	x.found = x.nrows <= POOL_STACK_ROWS ? found_stack : malloc(x.nrows);
	if (!x.plan || !x.vals || !x.found) {
		fed = 0;
		err = pool_copy_plain(&x);
		goto out_free;
	}
	err = pool_copy_full(&x, b);
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
	ledger_elapsed(&t0, &wall_ns, &cpu_ns);
	wall_ns = pool_sub(wall_ns, x.h2d_ns);
	cpu_ns = pool_sub(cpu_ns, rc.cpu ? rc.send_cpu_ns + x.batch_cpu_ns : x.h2d_ns);
	if (hashed && !x.wait_ns)
		cpu_ns = ledger_cpu_share(x.timed_cpu, wall_ns, cpu_ns);
	stats_add(ST_TIME_SHIM_NS, wall_ns);
	stats_add(ST_TIME_SHIM_CPU_NS, cpu_ns);
	/* The ledger weighs host time: a synchronous copy's wait for its stream is the device's. */
	wall_ns = pool_sub(wall_ns, x.wait_ns);
	cpu_ns = pool_sub(cpu_ns, x.timed_cpu ? x.wait_cpu_ns : x.wait_ns);
	if (fed && !err && slot >= 0 && pool_cfg->ledger != LEDGER_OFF && !pool_cfg->dry)
		pool_ledger_pooled(&x, slot, wall_ns, cpu_ns, pool_thread_ops() - ops0, rc.sends);
	return err;
}
