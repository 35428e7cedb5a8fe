/*
 * issue: the second step of a matched copy, taken outside the pool's lock:
 * at most two device operations that move bytes. The rows the pool does
 * not serve go host-to-device first, in one operation (the program's own
 * entry point for one run, one batched call for several, or the whole copy
 * when splitting costs more than it saves); then the hits and captures in
 * one more (a gather kernel launch, or one batch of device-to-device
 * copies where the kernel is not available). issue.h states the order and
 * the contract.
 */
#include "pool/issue.h"

#include <errno.h>
#include <stdlib.h>

#include "pool/ledger.h"
#include "pool/pincheck.h"
#include "pool/pool_impl.h"

/*
 * The fewest hit bytes worth a device operation of their own: without
 * captures, serving hits costs a gather launch that sending the whole copy
 * would not (about a microsecond of the stream's time, more of the
 * caller's), worth about 16 KiB of a 16 GB/s link.
 */
#define POOL_SPLIT_MIN_BYTES (16 * 1024)

int pool_send(struct pool_copy_ctx *x, uint64_t i, uint64_t j)
{
	uint64_t t0 = pool_now_ns();
	int err = (x->send_sync && x->r->h2d_sync ? x->r->h2d_sync : x->r->h2d)(
		x->r->arg, i * x->r->row, (j - i) * x->r->row);

	x->h2d_ns += pool_now_ns() - t0;
	return err;
}

/* The end of the run of rows starting at i that are (want_hits) or are not hits. */
static uint64_t pool_kind_run_end(const struct pool_copy_ctx *x, uint64_t i, int want_hits)
{
	uint64_t j;

	for (j = i + 1; j < x->nrows && (x->plan[j].kind == PLAN_HIT) == want_hits; j++)
		;
	return j;
}

int pool_send_rows(struct pool_copy_ctx *x, int want_hits)
{
	uint64_t i, j;
	int err;

	for (i = 0; i < x->nrows; i = j) {
		if ((x->plan[i].kind == PLAN_HIT) != want_hits) {
			j = i + 1;
			continue;
		}
		j = pool_kind_run_end(x, i, want_hits);
		err = pool_send(x, i, j);
		if (err)
			return err;
	}
	return 0;
}

/* The runs of rows that go host-to-device (misses and captures); *first the start of the first. */
static uint64_t pool_send_runs(const struct pool_copy_ctx *x, uint64_t *first)
{
	uint64_t runs = 0;

	for (uint64_t i = 0; i < x->nrows; i++) {
		if (x->plan[i].kind == PLAN_HIT || (i && x->plan[i - 1].kind != PLAN_HIT))
			continue;
		if (!runs++)
			*first = i;
	}
	return runs;
}

/*
 * Whether the copy goes whole rather than split around its hits: when the
 * rows to send are scattered and the driver has no batched call, and when
 * the hits alone would need an operation (no captures need one anyway)
 * for fewer bytes than it costs.
 */
static int pool_whole_pays(const struct pool_copy_ctx *x, uint64_t runs)
{
	if (runs > 1 && !device_h2d_batch_ready())
		return 1;
	return !x->captures && x->hits * x->r->row < POOL_SPLIT_MIN_BYTES;
}

/* Serves none of the copy's hits: they go host-to-device with the rest, counted as misses. */
static void pool_unserve(struct pool_copy_ctx *x)
{
	for (uint64_t i = 0; i < x->nrows; i++)
		if (x->plan[i].kind == PLAN_HIT)
			x->plan[i].kind = PLAN_MISS;
	x->misses += x->hits;
	x->hits = 0;
}

/*
 * Sends the whole copy with the program's own entry point, serving none of
 * its hits; synchronously when nothing follows it (a synchronous copy
 * without captures).
 */
static int pool_send_whole(struct pool_copy_ctx *x)
{
	pool_unserve(x);
	x->misses_sent = 1;
	x->send_sync = x->r->sync && !x->captures;
	return pool_send(x, 0, x->nrows);
}

/* The arrays of one batched call: on the stack up to POOL_STACK_ROWS copies, else allocated. */
struct pool_copies {
	dev_ptr *dsts, *srcs;
	uint64_t *sizes;
	dev_ptr dst_stack[POOL_STACK_ROWS], src_stack[POOL_STACK_ROWS];
	uint64_t size_stack[POOL_STACK_ROWS];
};

/* Makes room for most copies. Returns 0 or -ENOMEM (release it all the same). */
static int pool_copies_init(struct pool_copies *c, uint64_t most)
{
	c->dsts = c->dst_stack;
	c->srcs = c->src_stack;
	c->sizes = c->size_stack;
	if (most <= POOL_STACK_ROWS)
		return 0;
	c->dsts = malloc(most * sizeof(*c->dsts));
	c->srcs = malloc(most * sizeof(*c->srcs));
	c->sizes = malloc(most * sizeof(*c->sizes));
	return c->dsts && c->srcs && c->sizes ? 0 : -ENOMEM;
}

static void pool_copies_release(struct pool_copies *c)
{
	if (c->dsts != c->dst_stack)
		free(c->dsts);
	if (c->srcs != c->src_stack)
		free(c->srcs);
	if (c->sizes != c->size_stack)
		free(c->sizes);
}

/* Sends runs > 1 runs of rows as one batched host-to-device call. Returns 0 or a negative errno. */
static int pool_send_batch(struct pool_copy_ctx *x, uint64_t runs)
{
	struct pool_copies c;
	uint64_t row = x->r->row, n = 0, i, j, t0;
	int err = pool_copies_init(&c, runs);

	for (i = 0; i < x->nrows && !err; i = j) {
		j = pool_kind_run_end(x, i, x->plan[i].kind == PLAN_HIT);
		if (x->plan[i].kind == PLAN_HIT)
			continue;
		c.dsts[n] = x->r->dst + i * row;
		c.srcs[n] = (dev_ptr)(uintptr_t)((const unsigned char *)x->r->src + i * row);
		c.sizes[n] = (j - i) * row;
		n++;
	}
	if (!err) {
		/* The send is the program's: its CPU time is taken off the shim's,
		 * never its wall time (under load a send waits for a core). */
		uint64_t c0 = x->timed_cpu ? ledger_cpu_now() : 0;

		t0 = pool_now_ns();
		err = device_copy_h2d_many(x->p->dev, c.dsts, c.srcs, c.sizes, n, x->r->verify, x->r->stream);
		x->h2d_ns += pool_now_ns() - t0;
		if (x->timed_cpu)
			x->batch_cpu_ns += ledger_cpu_now() - c0;
	}
	pool_copies_release(&c);
	return err;
}

/*
 * The first operation: every row the pool does not serve, host-to-device.
 * One run goes through the program's own entry point, several as one
 * batched call (on the legacy stream through the device layer's bridge);
 * when that cannot be had or fails, the whole copy goes and no hit is
 * served. Returns 0 or the program's own copy error (positive).
 */
static int pool_send_misses(struct pool_copy_ctx *x)
{
	uint64_t first = 0, runs = pool_send_runs(x, &first);
	int err;

	if (x->hits && runs && pool_whole_pays(x, runs))
		return pool_send_whole(x);
	x->misses_sent = 1;
	if (runs == 0)
		return 0;
	if (runs == 1)
		return pool_send(x, first, pool_kind_run_end(x, first, 0));
	err = pool_send_batch(x, runs);
	if (!err)
		return 0;
	/* Refused (the legacy stream without its bridge) or failed: whatever a
	 * failed batch enqueued runs before the whole copy, which overwrites it. */
	if (err != -ENOTSUP)
		stats_add(ST_FALLBACKS, 1);
	return pool_send_whole(x);
}

/* Issues the hits and captures as gather entries: one kernel launch. */
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
	/* n >= 1 when the copy has a hit or a capture (pool_move's case); an
	 * empty gather enqueues nothing, and the compiler sees e filled. */
	err = n ? device_gather(x->p->dev, x->r->dst, x->r->row, e, (uint32_t)n, x->r->stream) : 0;
	if (e != stack)
		free(e);
	return err;
}

/*
 * Collects the runs of hits and captures as device-to-device copies:
 * slab -> destination for hits, destination -> slab for captures.
 */
static uint64_t pool_runs(struct pool_copy_ctx *x, dev_ptr *dsts, dev_ptr *srcs, uint64_t *sizes)
{
	uint64_t row = x->r->row, n = 0, i, j;

	for (i = 0; i < x->nrows; i = j) {
		enum plan_kind k = x->plan[i].kind;
		dev_ptr slab_row, dst_row;

		if (k == PLAN_MISS) {
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

/* Issues the hits and captures as one batch of device-to-device copies. */
static int pool_issue_batched(struct pool_copy_ctx *x)
{
	struct pool_copies c;
	int err = pool_copies_init(&c, x->hits + x->captures);

	if (!err)
		err = device_copy_dtod_many(x->p->dev, c.dsts, c.srcs, c.sizes, pool_runs(x, c.dsts, c.srcs, c.sizes),
					    x->r->stream);
	pool_copies_release(&c);
	/* Nothing of it can still run unordered: hits are sent again after it, captures dropped. */
	return err ? (x->hits ? POOL_REDELIVER : POOL_CAPTURE_LOST) : POOL_DONE;
}

/* The second operation: the hits and captures, as one gather launch or one batch. */
static int pool_move_rows(struct pool_copy_ctx *x)
{
	int err;

	if (!device_gather_ready(x->p->dev))
		return pool_issue_batched(x);
	err = pool_issue_gather(x);
	if (err == -ENOSYS || err == -EXDEV || err == -EAGAIN || err == -ENOMEM || err == -E2BIG)
		return pool_issue_batched(x);   /* nothing was enqueued */
	if (err)
		return x->hits ? POOL_REDELIVER : POOL_CAPTURE_LOST;
	return POOL_DONE;
}

/*
 * The gather of a copy's hits, bytes bytes, timed for the serve meter
 * (link.h) when its turn came at planning (x->serve_due: hits alone, the
 * ledger on; pool.c). On an idle stream the first event completes before
 * the launch is made, so the time counts the launch too: serving never
 * looks faster than it is, and the estimate takes the fastest. Captures
 * are not timed: they write slab memory written for the first time, which
 * on the emulated device costs the host's page faults, and they are paid
 * once.
 */
static int pool_move(struct pool_copy_ctx *x)
{
	uint64_t bytes = x->hits * x->r->row;
	int timed = 0, err;

	if (!x->hits && !x->captures)
		return POOL_DONE;
	if (x->serve_due) {
		pthread_mutex_lock(&x->p->mu);
		timed = link_begin(&x->p->serve, x->r->stream) == 0;
		pthread_mutex_unlock(&x->p->mu);
	}
	err = pool_move_rows(x);
	if (timed) {
		pthread_mutex_lock(&x->p->mu);
		link_end(&x->p->serve, x->r->stream, bytes, 0, 0, err == POOL_DONE);
		pthread_mutex_unlock(&x->p->mu);
	}
	return err;
}

/*
 * Queues the run-time check of the copy's captured rows behind its
 * captures (x->check; the check's reference is the host function's).
 * Returns 0 or POOL_CAPTURE_LOST.
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

int pool_issue(struct pool_copy_ctx *x)
{
	int err, check;

	if (!x->hits && !x->captures) {
		/* Only misses: one run, the program's own entry (synchronous or not). */
		x->misses_sent = 1;
		x->send_sync = x->r->sync;
		return pool_send_rows(x, 0);
	}
	/*
	 * A pinned source is read when the copy runs. On a stream with nothing
	 * queued ahead that is now, before the program can change it; otherwise
	 * (x->queued, asked before anything of this copy was queued) the
	 * captured rows are checked in stream order, and no row was served.
	 */
	check = x->r->verify && x->captures && x->queued;
	err = pool_send_misses(x);
	if (err)
		return err;
	err = pool_move(x);
	if (!err && check)
		err = pool_check_queue(x);
	return err;
}
