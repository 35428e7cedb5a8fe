/*
 * evict: the bottom of the pool's room. It frees slabs once the device's
 * context is quiet (displacement and refresh in pool.c, reclaim in
 * registry.c all come down here), and keeps the free list of events that
 * segments record behind their captures. evict.h states the contract.
 */
#include "pool/evict.h"

#include <errno.h>
#include <stdlib.h>

#include "core/log.h"
#include "pool/keep.h"
#include "pool/pincheck.h"
#include "pool/pool_impl.h"

dev_event pool_event_get(struct pool *p)
{
	dev_event ev = NULL;

	if (p->nfree_events)
		return p->free_events[--p->nfree_events];
	if (device_event_new(&ev)) {
		return NULL;
	}
	return ev;
}

void pool_event_put(struct pool *p, dev_event ev)
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

int pool_quiesce(struct pool *p)
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

/* A slab being evicted; whether its rows go to the what-if table (keep.h), and their batch. */
struct evict_walk {
	uint32_t id;
	const struct slab *s;
	int keep;
	struct keep_batch *k;
};

/* index_remove_if predicate: the value points into the slab; its row is handed to the curve. */
static int pool_val_in_slab(const struct fp *key, uint64_t val, void *arg)
{
	struct evict_walk *w = arg;

	if (slab_val_id(val) != w->id)
		return 0;
	if (w->keep)
		keep_row(&w->k, key, slab_row_pos(w->s, slab_val_off(val)));
	return 1;
}

int pool_evict_slab(struct pool *p, uint32_t id, const char *why)
{
	struct slab *s = p->slabs[id];
	char b[32];
	int err = device_mem_free(p->dev, s->base);

	if (err) {      /* a free that fails once is tried again once the device is quiet (issue 17, A) */
		device_sync(p->dev);
		err = device_mem_free(p->dev, s->base);
	}
	if (err) {
		log_verbose("could not free slab %u of device %d; it stays", id, p->dev);
		return -EIO;
	}
	for (uint32_t i = 0; i < s->nsegs; i++) {
		if (s->segs[i].ev)
			pool_event_put(p, s->segs[i].ev);
		if (s->segs[i].check)
			pincheck_put(s->segs[i].check);     /* the sync ran its host function */
	}
	{
		/* Rows kept out of the what-if table leave the pool: it learns of them now. */
		struct evict_walk w = { id, s, __atomic_load_n(&p->whatif_kept, __ATOMIC_RELAXED), NULL };

		index_remove_if(&p->ix, pool_val_in_slab, &w);
		keep_done(&w.k);
	}
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

int pool_evict_newest(struct pool *p, const uint64_t *need, const char *why)
{
	int evicted = 0;

	for (int64_t id = (int64_t)p->nslabs - 1; id >= 0; id--) {
		uint64_t free_bytes = 0, total = 0;

		if (!p->slabs[id])
			continue;
		if (need && evicted > 0 && device_mem_info(p->dev, &free_bytes, &total) == 0 &&
		    free_bytes >= *need)
			break;
		free_bytes = p->slabs[id]->bytes;
		if (pool_evict_slab(p, (uint32_t)id, why) == 0) {
			evicted++;
			stats_add(ST_POOL_EVICTIONS, 1);
			stats_add(ST_POOL_EVICTED_BYTES, free_bytes);
		}
	}
	return evicted;
}
