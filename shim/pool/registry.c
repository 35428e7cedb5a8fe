/*
 * registry: one pool per device and context. It makes a pool on a
 * device's first matched copy, retires it when the device was reset (a new
 * context id), gives slabs back for a program allocation that failed
 * (reclaim, across the table), forgets every pool in a forked child and
 * frees them at shutdown. It also keeps the configuration and the layout
 * every pool reads. registry.h and pool.h state the contract.
 */
#include "pool/registry.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/log.h"
#include "pool/evict.h"
#include "pool/link.h"
#include "pool/pincheck.h"
#include "pool/pool_impl.h"

#define POOL_MAX_DEVICES 64

const struct config *pool_cfg;
uint64_t pool_min_row = 1;
static pthread_mutex_t pool_table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool *pool_table[POOL_MAX_DEVICES];

void pool_setup(const struct config *c)
{
	pool_cfg = c;
	pool_set_layout(&c->layout);
}

void pool_set_layout(const struct layout *l)
{
	uint64_t m;

	pthread_mutex_lock(&pool_table_lock);
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
	for (int i = 0; i < LEDGER_SPECS; i++)         /* its specs stand aside no more (issue 16) */
		ledger_retire(&p->ledgers[i], &ledger_board[i]);
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

/*
 * Whether pool p's device was reset since its last copy (which would have
 * retired it): its primary context is inactive, or has another id. Then
 * its slab addresses may be the program's allocations now. 0 when the
 * pool has no id to compare, or when the queries keep failing (asked three
 * times): a reset the pool cannot see then is a second fault, and the
 * program's allocation must not fail for the first.
 */
static int pool_reset_unseen(const struct pool *p)
{
	uint64_t id;
	int err = -EIO;

	if (!p->ctx_id)
		return 0;
	for (int tries = 0; tries < 3 && err == -EIO; tries++)
		err = device_primary_id(p->dev, &id);
	if (err == -ENODEV)
		return 1;
	if (err) {
		if (err == -EIO)
			log_verbose("cannot tell whether device %d was reset; its slabs are taken for its own",
				    p->dev);
		return 0;
	}
	return id != p->ctx_id;
}

/* pool_reclaim of one pool p (taken from the table, which holds it for the process). */
static int pool_reclaim_one(struct pool *p, uint64_t need)
{
	int evicted = 0;
	char b[32];

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
	evicted = pool_evict_newest(p, &need, "evicted");
	if (evicted == 0)
		goto out;
	p->budget = p->bytes;
	stats_set(ST_POOL_BUDGET, p->budget);
	pool_set_state(p, POOL_LATCHED);
	/* The reason is report_reason's latched line, which counts the slabs
	 * given back in all (pool.evictions), not this call's alone. */
	stats_set_text(STATS_REASON, "%s", "");
	log_verbose("memory pressure on device %d: evicted %d slabs; budget latched at %s", p->dev, evicted,
		    log_bytes(b, sizeof(b), p->budget));
out:
	pthread_mutex_unlock(&p->mu);
	pthread_rwlock_unlock(&p->evict_lock);
	return evicted;
}

int pool_reclaim(int dev, uint64_t need)
{
	struct pool *p;
	int evicted = 0, err = 0;

	if (dev >= POOL_MAX_DEVICES)
		return 0;
	/* dev < 0 (issue 17, item A): the device is unknown, so every pool gives back. */
	for (int d = dev < 0 ? 0 : dev; d < (dev < 0 ? POOL_MAX_DEVICES : dev + 1); d++) {
		int r;

		pthread_mutex_lock(&pool_table_lock);
		p = pool_table[d];
		r = p ? pool_reset_unseen(p) : 0;      /* 0 or 1 */
		if (r == 1) {
			/* Its slabs died with the reset: nothing to give back, and
			 * their addresses are not to be freed (the program's now). */
			pool_retire(p);
			device_forget(d);
			pool_table[d] = NULL;
		}
		pthread_mutex_unlock(&pool_table_lock);
		if (!p || r)
			continue;
		r = pool_reclaim_one(p, need);
		if (r < 0)
			err = r;
		else
			evicted += r;
	}
	return evicted ? evicted : err;
}

/* Frees pool p, host and (release_device) device memory; nothing else may hold it. */
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
	if (release_device) {
		for (uint32_t i = 0; i < p->nfree_events; i++)
			device_event_free(p->free_events[i]);
		link_release(&p->link);
		link_release(&p->serve);
	}
	free(p->free_events);
	free(p->slabs);
	index_release(&p->ix);
	index_release(&p->samples);
	doorkeeper_release(&p->dk);
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
		/* After a reset no copy saw, its slab addresses are not its own. */
		if (pool_table[i])
			pool_free(pool_table[i], !pool_reset_unseen(pool_table[i]));
		pool_table[i] = NULL;
	}
	pthread_mutex_unlock(&pool_table_lock);
}
