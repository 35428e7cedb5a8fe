/*
 * pool_impl: the pool's inside, shared by the files of its room and by no
 * one else: struct pool, the per-copy state (struct pool_copy_ctx) and the
 * row plans, the results the pipeline's steps return, and the small helpers
 * that the hot path needs inlined wherever it runs. INTERNAL to
 * pool/pool.c, pool/plan.c, pool/issue.c, pool/evict.c and
 * pool/registry.c; every other file uses pool/pool.h.
 *
 * The room, top to bottom (calls run one way, down):
 *   pool.c      pool_copy: probe, routing, publish, displacement, refresh,
 *               sync completion
 *   plan.c      every row's fate under p->mu: hit, miss or capture
 *   issue.c     the device work in stream order: sends, gather, batches
 *   registry.c  one pool per device and context; reclaim, fork, shutdown
 *   evict.c     freeing slabs safely, and the free list of events
 * pool.c calls all four below it, plan.c calls registry.c (the
 * configuration) and evict.c, registry.c calls evict.c; issue.c and
 * evict.c call nothing of the room.
 *
 * Locks, as they nest (outer first; none is ever taken in the other order):
 * - p->evict_lock, then p->mu. The rwlock is held shared by a copy from
 *   planning to its last enqueue that reads a slab (issue.c runs under it
 *   without p->mu) and exclusively while slabs are freed (evict.c's
 *   callers). p->mu guards the index, the slabs' bookkeeping, the events'
 *   free list and the pool's state.
 * - The registry's table lock, then p->mu: only to retire a pool
 *   (pool_get). No pool lock is held while the table lock is taken, and
 *   the table lock is never held with p->evict_lock.
 * - Innermost, below any of these: the stats text lock (stats_set_text)
 *   and device.c's own locks (device calls made under p->mu or the table
 *   lock). Neither calls back into the pool.
 */
#ifndef VRAMPOOL_POOL_IMPL_H
#define VRAMPOOL_POOL_IMPL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "pool/pool.h"
#include "pool/backoff.h"
#include "pool/doorkeeper.h"
#include "pool/fingerprint.h"
#include "pool/index.h"
#include "pool/ledger.h"
#include "pool/link.h"
#include "pool/registry.h"
#include "pool/slab.h"
#include "core/stats.h"

#define POOL_STACK_ROWS 256
#define POOL_FOUND_REPEAT 3     /* found[i]: in the pool, not ready, reported as a repeat (keep.c) */
#define POOL_PRIOS (LAYOUT_MAX_PRIO + 1)
#define POOL_STREAMS 64         /* streams remembered for the reclaim fallback */
#define POOL_RETRY_FIRST 2      /* matched copies before a failed allocation or probe is retried, doubled each time */
#define POOL_RETRY_LIMIT 6      /* failed attempts before giving up for the run */

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
	int told_queued;        /* the verbose log said rows of a pinned source were withheld (plan.c) */
	pthread_mutex_t mu;
	pthread_rwlock_t evict_lock;
	struct index ix;
	struct slab **slabs;    /* by id; NULL once evicted */
	uint32_t nslabs, slabs_cap;
	int64_t tail[POOL_PRIOS];       /* slab being filled per priority, or -1 */
	enum pool_state state;
	int decided;            /* the probe ran: written under mu, release; pool_copy reads it unlocked, acquire (issue 17, E) */
	uint64_t budget;
	uint64_t bytes;         /* slab bytes allocated */
	uint64_t matched_seen;
	uint64_t largest_copy;
	unsigned floor;         /* rows below this priority are no longer admitted */
	uint64_t drops;         /* rows dropped from the index by failed checks (a generation) */
	_Atomic int displace;          /* a higher-priority row was refused: free a lower slab */
	uint64_t alloc_retry_at, probe_retry_at;
	unsigned alloc_failures, probe_failures;
	/* Issue 16: the cost ledger per spec slot (ledger.h), the back-off per
	 * copy kind (backoff.h), and the link meter (link.h); under mu. */
	struct ledger ledgers[LEDGER_SPECS];
	struct backoff_kinds kinds;
	struct link_meter link;
	struct link_meter serve;        /* the pool's own device-to-device serving (link.h); under mu */
	struct index samples;   /* fingerprints of rows sampled while stood down */
	struct doorkeeper dk;   /* admission on evidence (issue 16, doorkeeper.h); under mu */
	/* Rows captured as WHATIF_KEPT may be missing from the what-if table
	 * (whatif.h) until pool_whatif_adopt_pooled hands them over, which
	 * counts its passes in whatif_adopted; under mu. */
	int whatif_kept;
	uint64_t whatif_adopted;
	dev_event *free_events;
	uint32_t nfree_events, free_events_cap;
	dev_stream streams[POOL_STREAMS];       /* streams the pool put work on */
	uint32_t nstreams;
	int streams_unsafe;     /* too many, or per-thread streams: no fallback */
};

/*
 * The per-copy state between planning, issuing and publishing. It lives on
 * pool_copy's stack; the arrays are its stack buffers or its allocations.
 */
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
	/*
	 * A pinned source on a stream with work queued ahead of the copy, while
	 * some of the program's work that may write host memory may not have
	 * run (hazard.h: a host function, a graph, a copy to pinned memory;
	 * or the program itself while a host function holds the stream): the
	 * source may change before the copy reads it, so none of its rows is
	 * served from the pool (their bytes were fingerprinted at the call);
	 * captures are checked in stream order. Asked before anything of the
	 * copy is queued.
	 */
	int queued;
	/* The cost ledger (issue 16): a link measurement claimed for the
	 * copy's plain send (route.h: ended right behind the send); whether
	 * the shim's CPU time is read for this copy; the time a synchronous
	 * copy waited for its stream, on both clocks (the device's time, not
	 * the shim's); the time its rows took to hash. */
	int measure, timed_cpu;
	int serve_due;          /* the gather of its hits is timed for the serve meter (issue.c) */
	int kept;               /* its captures reached the what-if curve as WHATIF_KEPT (keep.c) */
	uint64_t repeats;       /* rows marked POOL_FOUND_REPEAT (keep.c) */
	uint64_t adopted;       /* p->whatif_adopted when it was planned */
	uint64_t wait_ns, wait_cpu_ns, fp_ns;
	uint64_t batch_cpu_ns;  /* CPU time of the batched sends of misses (issue.c), when timed_cpu */
};

static inline uint64_t pool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline void pool_set_state(struct pool *p, enum pool_state s)
{
	if (p->state == s)
		return;
	p->state = s;
	stats_set_state(s);
}

/* The slabs allocated now (ids of freed slabs are not reused). */
static inline uint32_t pool_live_slabs(const struct pool *p)
{
	uint32_t n = 0;

	for (uint32_t id = 0; id < p->nslabs; id++)
		n += p->slabs[id] != NULL;
	return n;
}

/* The number of copies to wait before attempt failures + 1: 4, 8, 16, ... */
static inline uint64_t pool_retry_gap(unsigned failures)
{
	return (uint64_t)POOL_RETRY_FIRST << (failures < 10 ? failures : 10);
}

/* Whether some row of a matched spec can still be admitted. Called with p->mu held. */
static inline int pool_can_admit(const struct pool *p)
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

/*
 * Whether a row the pool has not seen would be captured: room for it, and
 * the doorkeeper not engaged (doorkeeper.h). Where it would not, only the
 * hits save: the back-off and the ledger judge the pool as a full one.
 * Called with p->mu held.
 */
static inline int pool_admits_unseen(const struct pool *p)
{
	return !p->dk.engaged && pool_can_admit(p);
}

/* The end of a run of rows of kind k starting at i: the same slab, consecutive offsets. */
static inline uint64_t pool_run_end(const struct pool_copy_ctx *x, uint64_t i, enum plan_kind k)
{
	uint64_t j;

	for (j = i + 1; j < x->nrows && x->plan[j].kind == k && x->plan[j].slab == x->plan[i].slab &&
	     x->plan[j].off == x->plan[i].off + (j - i) * x->r->row; j++)
		;
	return j;
}

#endif
