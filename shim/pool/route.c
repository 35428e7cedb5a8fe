/*
 * route: the ways of route.h and the routing between them.
 */
#include "pool/route.h"

#include <pthread.h>

#include "core/log.h"
#include "pool/issue.h"
#include "pool/keep.h"
#include "pool/whatif.h"

#define POOL_SAMPLES_MAX 16384  /* sampled fingerprints kept while stood down */

int pool_link_begin(struct pool_copy_ctx *x)
{
	int err;

	x->measure = 0;
	pthread_mutex_lock(&x->p->mu);
	err = link_begin(&x->p->link, x->r->stream);
	pthread_mutex_unlock(&x->p->mu);
	return err == 0;
}

void pool_link_end(struct pool_copy_ctx *x, int ok, uint64_t wait_ns)
{
	pthread_mutex_lock(&x->p->mu);
	link_end(&x->p->link, x->r->stream, x->r->n, wait_ns, !x->r->src_pinned, ok);
	pthread_mutex_unlock(&x->p->mu);
}

/* Delivers the whole copy host-to-device, counting its rows as misses. */
int pool_copy_plain(struct pool_copy_ctx *x)
{
	int err;

	x->send_sync = x->r->sync;
	err = pool_send(x, 0, x->nrows);
	if (err)
		return err;
	stats_add(ST_ROWS_SEEN, x->nrows);
	stats_add(ST_ROWS_MISSES, x->nrows);
	stats_add(ST_BYTES_REQUESTED, x->r->n);  /* beside the bytes: pool.h */
	stats_add(ST_BYTES_H2D, x->r->n);
	return 0;
}

void pool_copy_unhashed(struct pool_copy_ctx *x)
{
	/* issue 19: the what-if curve stays true while copies go straight through */
	if (x->r->row >= WHATIF_SPARSE_MIN_ROW) {
		/* Its sample meets rows without the pool: the pool's rows must be in
		 * the what-if table first (keep.h). */
		if (__atomic_load_n(&x->p->whatif_kept, __ATOMIC_RELAXED)) {
			pthread_mutex_lock(&x->p->mu);
			pool_whatif_adopt_pooled(x->p);
			pthread_mutex_unlock(&x->p->mu);
		}
		whatif_observe_sparse(x->r->src, x->nrows, x->r->row);
	} else
		whatif_set_unobserved();
}

/* Fingerprints the copy's rows into x->fps. */
void pool_fingerprint(struct pool_copy_ctx *x)
{
	uint64_t ns = fingerprint_rows(x->r->src, x->r->row, x->nrows, x->fps);

	x->fp_ns += ns;
	stats_add(ST_TIME_FINGERPRINT_NS, ns);
}

/*
 * A copy the pool only observes (dry runs, before the probe, a dormant
 * pool): the plain copy, then fingerprints for the what-if curve (the
 * source is the program's until its call returns: reading it after the
 * send is safe, and the link meter's events stay tight around the send).
 */
int pool_copy_observe(struct pool_copy_ctx *x)
{
	int err = pool_copy_plain(x);

	pool_fingerprint(x);
	whatif_observe(x->fps, NULL, x->nrows, x->r->row, NULL);
	return err;
}

/*
 * Fingerprints up to BACKOFF_SAMPLE_ROWS rows spread over the copy and
 * looks them up: *hits those in the pool; with repeats, also the rows seen
 * in an earlier sample (the back-off's evidence that rows repeat, whatever
 * the pool holds), remembering the new ones. Returns the rows sampled.
 */
static uint32_t pool_sample_rows(struct pool_copy_ctx *x, uint32_t *hits, uint32_t *repeats)
{
	uint64_t step = x->nrows > BACKOFF_SAMPLE_ROWS ? x->nrows / BACKOFF_SAMPLE_ROWS : 1;
	struct fp fps[BACKOFF_SAMPLE_ROWS];
	uint64_t vals[BACKOFF_SAMPLE_ROWS];
	uint8_t found[BACKOFF_SAMPLE_ROWS];
	uint32_t n = 0;

	for (uint64_t i = 0; i < x->nrows && n < BACKOFF_SAMPLE_ROWS; i += step)
		fps[n++] = fingerprint_one((const unsigned char *)x->r->src + i * x->r->row, x->r->row);
	*hits = 0;
	pthread_mutex_lock(&x->p->mu);
	index_lookup_many(&x->p->ix, fps, n, vals, found);
	for (uint32_t i = 0; i < n; i++) {
		*hits += found[i];
		if (!repeats)
			continue;
		if (index_lookup(&x->p->samples, &fps[i], &vals[i]) == 0)
			(*repeats)++;
		else if (x->p->samples.count < POOL_SAMPLES_MAX)
			index_insert(&x->p->samples, &fps[i], 1);
	}
	pthread_mutex_unlock(&x->p->mu);
	return n;
}

/*
 * A copy sampled while pooling stood down: the plain copy, then a few rows
 * fingerprinted and looked up. Returns its result; *hits the rows found.
 */
int pool_copy_sample(struct pool_copy_ctx *x, uint32_t *rows, uint32_t *hits, uint32_t *repeats)
{
	int err = pool_copy_plain(x);

	pool_copy_unhashed(x);

	*repeats = 0;
	*rows = pool_sample_rows(x, hits, repeats);
	return err;
}

/* The ledger's verdicts as the user sees them: counters and a verbose line. */
static void pool_ledger_said(int slot, enum ledger_event ev)
{
	struct ledger_view v;
	char why[320];

	if (ev == LEDGER_EV_NONE)
		return;
	stats_add(ev == LEDGER_EV_ASIDE ? ST_LEDGER_ASIDES : ST_LEDGER_RESUMES, 1);
	ledger_view(&ledger_board[slot], &v);
	if (ev == LEDGER_EV_ASIDE) {
		whatif_set_estimate(1);         /* the curve sees the sampled copies only */
		log_verbose("ledger: %s; its copies go straight through, one in %d sampled",
			    ledger_reason(&v, why, sizeof(why)), LEDGER_SAMPLE_EVERY);
	} else {
		log_verbose("ledger: %s; the sample says pooling pays again: it pools",
			    ledger_reason(&v, why, sizeof(why)));
	}
}

/*
 * Feeds the ledger a copy the pool fingerprinted (full or observed),
 * wall_ns and cpu_ns of the shim's own time, ops the device operations it
 * added, sends the program's sends it made. The hash's share of the CPU
 * time is taken as its share of the wall time (the hash is timed on the
 * wall clock only). Takes p->mu.
 */
void pool_ledger_pooled(struct pool_copy_ctx *x, int slot, uint64_t wall_ns, uint64_t cpu_ns,
			uint64_t ops, uint64_t sends)
{
	struct pool *p = x->p;
	uint64_t hash = x->fp_ns >= wall_ns ? cpu_ns : (uint64_t)((double)x->fp_ns * (double)cpu_ns / (double)wall_ns);
	struct ledger_copy c = {
		.rows = x->nrows, .row = x->r->row, .cpu_ns = cpu_ns, .wall_ns = wall_ns, .hash_ns = hash,
		.hit_rows = x->hits, .captured_rows = x->captures,
		.calls_added = ops + sends > 1 ? ops + sends - 1 : 0,
	};
	struct ledger_link link;
	enum ledger_event ev;

	pthread_mutex_lock(&p->mu);
	c.can_admit = !p->decided || pool_admits_unseen(p);
	link_get(&p->link, &p->serve, pool_cfg->link_gbps, &link);
	ev = ledger_pooled(&p->ledgers[slot], &ledger_board[slot], &c, &link, pool_cfg->ledger);
	pthread_mutex_unlock(&p->mu);
	pool_ledger_said(slot, ev);
}

/*
 * A copy of a spec standing aside (ledger.h): the plain copy, then a few
 * rows hashed and looked up, on the thread's CPU clock (what a row's hash
 * and look-up cost now; with a full pool, the share that would hit), and
 * the ledger's judgement of the sample.
 */
int pool_copy_aside(struct pool_copy_ctx *x, int slot)
{
	struct pool *p = x->p;
	struct ledger_sample s = { .bytes = x->r->n, .row = x->r->row, .sampled = 1 };
	struct ledger_link link;
	enum ledger_event ev;
	uint32_t hits = 0;
	uint64_t t0;
	int err;

	stats_add(ST_STOOD_ASIDE_CALLS, 1);
	err = pool_copy_plain(x);
	whatif_set_unobserved();        /* one copy in N: a content sample of it would miss the repeats */
	pthread_mutex_lock(&p->mu);
	s.can_admit = pool_admits_unseen(p) || !p->decided;
	pthread_mutex_unlock(&p->mu);
	t0 = ledger_cpu_now();
	s.rows = pool_sample_rows(x, &hits, NULL);
	s.cpu_ns = ledger_cpu_now() - t0;
	s.hits = hits;
	pthread_mutex_lock(&p->mu);
	link_get(&p->link, &p->serve, pool_cfg->link_gbps, &link);
	ev = ledger_aside(&p->ledgers[slot], &ledger_board[slot], &s, &link);
	pthread_mutex_unlock(&p->mu);
	pool_ledger_said(slot, ev);
	return err;
}

/* Routes one copy (route.h); called with p->mu held. */
enum pool_route pool_route(struct pool *p, const struct pool_request *r, int slot, struct backoff **b,
			   int *measure)
{
	int ledger = pool_cfg->ledger != LEDGER_OFF && !pool_cfg->dry && slot >= 0;
	enum pool_route route;

	*measure = 0;
	*b = backoff_kind(&p->kinds, slot, r->n / r->row);
	if (p->retired)
		return POOL_ROUTE_PLAIN;
	if (ledger) {
		link_poll(&p->link, LINK_MIN_NS);
		link_poll(&p->serve, 0);
	}
	if (ledger && p->ledgers[slot].state == LEDGER_ASIDE) {
		route = POOL_ROUTE_ASIDE;
	} else if (pool_cfg->dry || !p->decided) {
		route = POOL_ROUTE_OBSERVE;
	} else {
		int was_down = backoff_any_down(&p->kinds);
		enum backoff_route br = backoff_route(*b, pool_admits_unseen(p));

		if (was_down && !backoff_any_down(&p->kinds))
			stats_set_stood_down(0);        /* the pool can admit again */
		route = br == BACKOFF_PASS ? POOL_ROUTE_PASS : br == BACKOFF_SAMPLE ? POOL_ROUTE_SAMPLE
			: p->state == POOL_DORMANT ? POOL_ROUTE_OBSERVE : POOL_ROUTE_FULL;
	}
	if (!ledger)
		return route;
	/*
	 * A pooling copy that sends all its rows (captures, misses) measures
	 * the link as well as a plain one; one that has not for a while is
	 * sent plain to measure it (link.h).
	 */
	if (route == POOL_ROUTE_FULL && pool_cfg->ledger == LEDGER_ON) {
		struct ledger_link link;
		int clear = 0;

		/* whether the spec pools clearly matters only before the meter's first full set */
		if (p->link.n < LINK_FIRST) {
			link_get(&p->link, &p->serve, pool_cfg->link_gbps, &link);
			clear = ledger_pays_clearly(&p->ledgers[slot], &link);
		}
		if (link_pool_due(&p->link, pool_cfg->link_gbps, r->n, clear)) {
			*measure = 1;
			return POOL_ROUTE_PLAIN;
		}
	}
	*measure = link_plain_due(&p->link, pool_cfg->link_gbps, r->n);
	return route;
}