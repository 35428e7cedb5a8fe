/*
 * keep: a pooled copy's rows for the what-if curve, and handing the rows
 * the pool kept out of the what-if table to it (keep.h states when and
 * why).
 */
#include "pool/keep.h"

#include <stdlib.h>
#include <string.h>

#include "pool/index.h"
#include "pool/pool_impl.h"
#include "pool/whatif.h"

#define KEEP_BATCH 256          /* rows handed to whatif_adopt per call */

/* Rows gathered for whatif_adopt. */
struct keep_batch {
	struct fp fps[KEEP_BATCH];
	uint64_t pos[KEEP_BATCH];
	uint32_t n;
};

void keep_row(struct keep_batch **k, const struct fp *key, uint64_t pos)
{
	if (!*k) {
		*k = malloc(sizeof(**k));       /* a few KiB: not on a program thread's stack */
		if (!*k)
			return;
		(*k)->n = 0;
	}
	if ((*k)->n == KEEP_BATCH) {
		whatif_adopt((*k)->fps, (*k)->pos, (*k)->n);
		(*k)->n = 0;
	}
	(*k)->fps[(*k)->n] = *key;
	(*k)->pos[(*k)->n++] = pos;
}

void keep_done(struct keep_batch **k)
{
	if (!*k)
		return;
	whatif_adopt((*k)->fps, (*k)->pos, (*k)->n);
	free(*k);
	*k = NULL;
}

struct keep_walk {
	struct pool *p;
	struct keep_batch *k;
};

/* index_for_each visitor: a settled pooled row goes to the batch. */
static void keep_visit(const struct fp *key, uint64_t val, void *arg)
{
	struct keep_walk *w = arg;
	uint32_t id = slab_val_id(val);
	uint64_t off = slab_val_off(val);
	const struct slab *s = id < w->p->nslabs ? w->p->slabs[id] : NULL;
	int64_t g;

	if (!s)
		return;
	g = slab_seg_find(s, off);
	if (g >= 0 && s->segs[g].state == SEG_PENDING)
		return;
	keep_row(&w->k, key, slab_row_pos(s, off));
}

void pool_whatif_adopt_pooled(struct pool *p)
{
	struct keep_walk w = { p, NULL };

	if (!__atomic_load_n(&p->whatif_kept, __ATOMIC_RELAXED))
		return;
	index_for_each(&p->ix, keep_visit, &w);
	keep_done(&w.k);
	__atomic_store_n(&p->whatif_kept, 0, __ATOMIC_RELAXED);
	p->whatif_adopted++;
}

#define POOL_WHATIF_RUNS 64       /* hit runs reported to the what-if curve per call */

/* Repeats go in calls of up to POOL_WHATIF_RUNS runs. */
void pool_whatif_hits(struct pool_copy_ctx *x)
{
	uint64_t pos[POOL_WHATIF_RUNS], bytes[POOL_WHATIF_RUNS];
	uint64_t i, j, n = 0, plain = 0;
	struct pool *p = x->p;

	for (i = 0; i < x->nrows; i = j) {
		const struct slab *s;

		j = i + 1;
		if (x->plan[i].kind == PLAN_CAPTURE)
			continue;
		if (x->plan[i].kind == PLAN_HIT) {
			j = pool_run_end(x, i, PLAN_HIT);
			s = p->slabs[x->plan[i].slab];
		} else {
			uint32_t id = x->found[i] == 1 ? slab_val_id(x->vals[i]) : UINT32_MAX;

			s = id < p->nslabs ? p->slabs[id] : NULL;
			if (!s) {
				plain++;
				continue;
			}
			x->found[i] = POOL_FOUND_REPEAT;
			x->repeats++;
		}
		if (n == POOL_WHATIF_RUNS) {
			whatif_repeat_many(pos, bytes, n);
			n = 0;
		}
		pos[n] = slab_row_pos(s, x->plan[i].kind == PLAN_HIT ? x->plan[i].off : slab_val_off(x->vals[i]));
		bytes[n++] = (j - i) * x->r->row;
	}
	whatif_repeat_many(pos, bytes, n);
	x->kept = x->captures && !plain;
	if (x->kept) {
		__atomic_store_n(&p->whatif_kept, 1, __ATOMIC_RELAXED);
		x->adopted = p->whatif_adopted;
	}
}

void pool_whatif_rows(struct pool_copy_ctx *x)
{
	uint8_t stack[POOL_STACK_ROWS] = { 0 }, *kind;   /* filled below; the compiler cannot tell */
	uint64_t i;

	if (!x->hits && !x->kept && !x->repeats) {
		whatif_observe(x->fps, NULL, x->nrows, x->r->row, x->vals);
		return;
	}
	if (x->hits == x->nrows)
		return;
	kind = x->nrows <= POOL_STACK_ROWS ? stack : malloc(x->nrows);
	if (!kind) {
		memset(x->vals, 0, x->nrows * sizeof(*x->vals));
		return;
	}
	for (i = 0; i < x->nrows; i++)
		kind[i] = x->plan[i].kind == PLAN_HIT || x->found[i] == POOL_FOUND_REPEAT ? WHATIF_SKIP
			: x->plan[i].kind == PLAN_CAPTURE && x->kept ? WHATIF_KEPT : WHATIF_OBSERVE;
	whatif_observe(x->fps, kind, x->nrows, x->r->row, x->vals);
	if (kind != stack)
		free(kind);
}
