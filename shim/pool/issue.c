/*
 * issue: the second step of a matched copy, taken outside the pool's lock:
 * the misses go host-to-device with the program's own entry point, the
 * hits and captures as one gather kernel launch, or as batched
 * device-to-device copies where the kernel is not available or cannot be
 * launched. issue.h states the order and the contract.
 */
#include "pool/issue.h"

#include <errno.h>
#include <stdlib.h>

#include "pool/pincheck.h"
#include "pool/pool_impl.h"

int pool_send(struct pool_copy_ctx *x, uint64_t i, uint64_t j)
{
	uint64_t t0 = pool_now_ns();
	int err = (x->send_sync && x->r->h2d_sync ? x->r->h2d_sync : x->r->h2d)(
		x->r->arg, i * x->r->row, (j - i) * x->r->row);

	x->h2d_ns += pool_now_ns() - t0;
	return err;
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
		for (j = i + 1; j < x->nrows && (x->plan[j].kind == PLAN_HIT) == want_hits; j++)
			;
		err = pool_send(x, i, j);
		if (err)
			return err;
	}
	return 0;
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
	/* n >= 1 when the copy has a hit or a capture (pool_issue's case); an
	 * empty gather enqueues nothing, and the compiler sees e filled. */
	err = n ? device_gather(x->p->dev, x->r->dst, x->r->row, e, (uint32_t)n, x->r->stream) : 0;
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

int pool_issue(struct pool_copy_ctx *x)
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

int pool_check_queue(struct pool_copy_ctx *x)
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
