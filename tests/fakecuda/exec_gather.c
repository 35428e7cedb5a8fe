/*
 * exec_gather.c: the gather executor of the emulated device. kernel.c
 * copies a vrampool_gather launch's parameter header and inline table at
 * call time into a struct fc_gather; enqueue.c puts it on the stream (or
 * into the capturing stream's graph, shared by reference with its nodes);
 * a stream's worker runs it here, as the device would run the kernel:
 * it reads the table (inline, or mapped host memory, read now), checks the
 * launch against the kernel's contract (the units, the warps' starts, a
 * grid that covers them, every range inside one allocation of the
 * device, no entry writing what another writes or reads), and moves every
 * entry, rate-limited on the device-to-device link like a copy. A launch
 * that breaks the contract faults: one line on stderr, kernel_faults + 1,
 * nothing moved.
 */
#include "stream_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fc_gather_hold(struct fc_gather *g)
{
	atomic_fetch_add(&g->refs, 1);
}

void fc_gather_drop(struct fc_gather *g)
{
	if (g && atomic_fetch_sub(&g->refs, 1) == 1)
		free(g);
}

CUresult fc_gather_fault(const char *how, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "fakecuda: vrampool_gather launch %s: %s\n", how, msg);
	atomic_fetch_add(&fc_cnt.kernel_faults, 1);
	return CUDA_ERROR_INVALID_VALUE;
}

/* A fault found on the worker: said and counted; returns -EFAULT. */
__attribute__((format(printf, 1, 2)))
static int gather_faulted(const char *fmt, ...)
{
	char msg[224];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fc_gather_fault("faulted", "%s", msg);
	return -EFAULT;
}

/* ---- the table and the warps ---- */

/* The launch's table of BYTES bytes: inline, or mapped page-locked host
 * memory (its device address is its host address), or NULL (faulted). */
static const unsigned char *gather_table(const struct fc_gather *g, uint64_t bytes)
{
	const unsigned char *t = (const unsigned char *)(uintptr_t)g->h.table;
	struct fc_hostrange *r;
	int ok;

	if (!t) {
		if (bytes <= g->tab_bytes)
			return g->tab;
		gather_faulted("an inline table of %llu bytes (the parameter holds %d)", (unsigned long long)bytes,
		      FC_GATHER_INLINE);
		return NULL;
	}
	if ((uintptr_t)t % 8) {
		gather_faulted("the table at 0x%llx is not 8-byte aligned", (unsigned long long)g->h.table);
		return NULL;
	}
	pthread_mutex_lock(&fc.lock);
	r = fc_host_find_locked(t);
	ok = r && r->kind == FC_PINNED && bytes <= (uint64_t)(r->base + r->size - (const char *)t);
	pthread_mutex_unlock(&fc.lock);
	if (!ok) {
		gather_faulted("the table at 0x%llx (%llu bytes) is not inside mapped page-locked host memory",
		      (unsigned long long)g->h.table, (unsigned long long)bytes);
		return NULL;
	}
	return t;
}

/* The units of entry E: its bytes in FC_GATHER_UNIT pieces, one when empty. */
static uint64_t entry_units(const struct fc_gather_entry *e, uint64_t row)
{
	uint64_t len = (uint64_t)(e->nrows_dir & ~FC_GATHER_CAPTURE) * row;

	return len ? (len + FC_GATHER_UNIT - 1) / FC_GATHER_UNIT : 1;
}

/*
 * Checks the work split as the kernel reads it: units, units per warp, a
 * 1-D grid with a thread for every lane of every warp that has work, and
 * each warp's start (or one unit per entry when there are none). Returns
 * 0 or -EFAULT (faulted).
 */
static int gather_check_warps(const struct fc_gather *g, const struct fc_gather_entry *e,
			      const struct fc_gather_start *st)
{
	const struct fc_gather_head *h = &g->h;
	uint64_t units = 0, working, first = 0, w = 0;
	uint32_t i;

	for (i = 0; i < h->count; i++)
		units += entry_units(&e[i], h->row);
	if (units != h->units)
		return gather_faulted("units %llu, but the entries make %llu", (unsigned long long)h->units,
			     (unsigned long long)units);
	working = (units + h->per_warp - 1) / h->per_warp;
	if (!g->threads)
		return gather_faulted("the kernel takes a 1-D grid of 1-D blocks");
	if (g->threads < working * 32)
		return gather_faulted("%llu threads for %llu warps of work", (unsigned long long)g->threads,
			     (unsigned long long)working);
	if (!h->warps) {
		if (units != h->count)
			return gather_faulted("no warp starts, but %llu units in %u entries", (unsigned long long)units,
				     h->count);
		return 0;
	}
	if (h->warps != working)
		return gather_faulted("%u warp starts for %llu warps of work", h->warps, (unsigned long long)working);
	for (i = 0; i < h->count && w < working; i++) {
		uint64_t u = entry_units(&e[i], h->row);

		for (; w < working && w * h->per_warp < first + u; w++)
			if (st[w].entry != i || st[w].unit != w * h->per_warp - first)
				return gather_faulted("warp %llu starts at entry %u unit %u, its first unit is entry %u "
					     "unit %llu", (unsigned long long)w, st[w].entry, st[w].unit, i,
					     (unsigned long long)(w * h->per_warp - first));
		first += u;
	}
	return 0;
}

/* ---- ranges and the no-overlap contract ---- */

/* A byte range [lo, hi) one entry reads or writes. */
struct span {
	uint64_t lo, hi;
	uint32_t entry;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The last arena allocation a range was found in (a launch's entries mostly share two). */
struct range_cache {
	const char *lo, *hi;
};

/* Says whether [p, p + n) lies inside one allocation the kernel of
 * launch G may touch: device memory of its device and context, or
 * managed memory. */
static int range_ok(uint64_t p, uint64_t n, const struct fc_gather *g, struct range_cache *c)
{
	int dev = g->dev;
	const char *a = (const char *)(uintptr_t)p;
	const char *lo, *hi;
	int d = -1, kind;

	if (c->lo && a >= c->lo && a < c->hi && n <= (uint64_t)(c->hi - a))
		return 1;
	if (fc_mem_extent(a, &d, &lo, &hi) == 0) {
		if (d != dev || n > (uint64_t)(hi - a) || fc_mem_ctx_check(a, g->ctx))
			return 0;
		c->lo = lo;
		c->hi = hi;
		return 1;
	}
	kind = fc_mem_classify(a, (size_t)n, &d);
	return (kind == FC_DEVICE && d == dev) || kind == FC_MANAGED;
}

/* Checks one entry's two ranges and notes what it writes (W) and reads (R). */
static int gather_check_entry(const struct fc_gather *g, const struct fc_gather_entry *e, uint32_t i,
			      struct range_cache *slabs, struct range_cache *dsts, struct span *w, struct span *r)
{
	uint32_t nrows = e->nrows_dir & ~FC_GATHER_CAPTURE;
	uint64_t n, off, slab_end, dst, dst_end;

	if (__builtin_mul_overflow((uint64_t)nrows, g->h.row, &n) ||
	    __builtin_mul_overflow((uint64_t)e->dst_row, g->h.row, &off) ||
	    __builtin_add_overflow(g->h.dst, off, &dst) || __builtin_add_overflow(dst, n, &dst_end) ||
	    __builtin_add_overflow(e->slab, n, &slab_end))
		return gather_faulted("entry %u: %u rows of %llu bytes overflow the address space", i, nrows,
			     (unsigned long long)g->h.row);
	if (!range_ok(e->slab, n, g, slabs))
		return gather_faulted("entry %u: slab range 0x%llx + %llu is not inside one allocation of device %d "
			     "and the launch's context", i, (unsigned long long)e->slab, (unsigned long long)n,
			     g->dev);
	if (!range_ok(dst, n, g, dsts))
		return gather_faulted("entry %u: destination rows %u..%u (0x%llx + %llu) are not inside one allocation "
			     "of device %d and the launch's context", i, e->dst_row, e->dst_row + nrows - 1,
			     (unsigned long long)dst, (unsigned long long)n, g->dev);
	if (e->nrows_dir & FC_GATHER_CAPTURE) {
		*w = (struct span){ e->slab, slab_end, i };
		*r = (struct span){ dst, dst_end, i };
	} else {
		*w = (struct span){ dst, dst_end, i };
		*r = (struct span){ e->slab, slab_end, i };
	}
	return 0;
}

/*
 * Checks every entry's slab and destination ranges (inside one allocation
 * of the launch's device) and the contract that no entry writes what
 * another writes or reads (the real kernel runs entries in parallel).
 * Returns 0 or -EFAULT (faulted).
 */
static int gather_check_ranges(const struct fc_gather *g, const struct fc_gather_entry *e)
{
	struct range_cache slabs = { 0 }, dsts = { 0 };
	struct span *w, *r;
	uint32_t i, nspans = 0;
	int err = 0;

	w = malloc(2 * (size_t)g->h.count * sizeof(*w));
	if (!w)
		return gather_faulted("no host memory to check %u entries", g->h.count);
	r = w + g->h.count;
	for (i = 0; i < g->h.count && !err; i++) {
		if (!(e[i].nrows_dir & ~FC_GATHER_CAPTURE))
			continue;
		err = gather_check_entry(g, &e[i], i, &slabs, &dsts, &w[nspans], &r[nspans]);
		nspans++;
	}
	if (err)
		goto out_free;
	/* Writes pairwise disjoint: sorted by start, neighbours suffice. */
	qsort(w, nspans, sizeof(*w), span_cmp);
	for (i = 1; i < nspans && !err; i++)
		if (w[i].lo < w[i - 1].hi)
			err = gather_faulted("entries %u and %u write the same bytes", w[i - 1].entry, w[i].entry);
	/* No read meets a write: the last write starting before the read's
	 * end is the only candidate (writes are disjoint, ends sorted). */
	for (i = 0; i < nspans && !err; i++) {
		uint32_t lo = 0, hi = nspans;

		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (w[mid].lo < r[i].hi)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo && w[lo - 1].hi > r[i].lo)
			err = gather_faulted("entry %u reads bytes that entry %u writes", r[i].entry, w[lo - 1].entry);
	}
out_free:
	free(w);
	return err;
}

/* ---- running it ---- */

/* Moves every entry (the launch was checked); returns the bytes moved.
 * FAKECUDA_KERNEL=broken flips a byte of the last row written. */
static uint64_t run_gather(const struct fc_gather *g, const struct fc_gather_entry *e)
{
	uint64_t moved = 0, row = g->h.row;
	char *last = NULL;
	uint32_t i;

	for (i = 0; i < g->h.count; i++) {
		size_t n = (size_t)(e[i].nrows_dir & ~FC_GATHER_CAPTURE) * row;
		char *slab = fc_dev_rw((const void *)(uintptr_t)e[i].slab);
		char *rows = fc_dev_rw((const void *)(uintptr_t)(g->h.dst + (uint64_t)e[i].dst_row * row));

		if (!n)
			continue;
		if (e[i].nrows_dir & FC_GATHER_CAPTURE) {
			memcpy(slab, rows, n);
			last = slab + n - row;
		} else {
			memcpy(rows, slab, n);
			last = rows + n - row;
		}
		moved += n;
	}
	if (last && fc.cfg.kernel == FC_KERNEL_BROKEN)
		last[row / 2] ^= 0x5a;
	return moved;
}

/* Performs the gather launch X describes, on the device-to-device link. */
void fc_exec_gather(const struct fc_xfer *x)
{
	const struct fc_gather *g = x->gather;
	const struct fc_gather_head *h = &g->h;
	const unsigned char *t;
	uint64_t moved;

	if (h->count < 1 || !h->row || !h->per_warp) {
		gather_faulted("count %u, row %llu, per_warp %u", h->count, (unsigned long long)h->row, h->per_warp);
		return;
	}
	t = gather_table(g, (uint64_t)h->count * sizeof(struct fc_gather_entry) +
			    (uint64_t)h->warps * sizeof(struct fc_gather_start));
	if (!t)
		return;
	if (gather_check_warps(g, (const struct fc_gather_entry *)(const void *)t,
			       (const struct fc_gather_start *)(const void *)(t + (uint64_t)h->count *
									sizeof(struct fc_gather_entry))) ||
	    gather_check_ranges(g, (const struct fc_gather_entry *)(const void *)t))
		return;
	moved = run_gather(g, (const struct fc_gather_entry *)(const void *)t);
	if (fc.cfg.d2d_gbps > 0)
		fc_link_occupy(1, (double)moved / fc.cfg.d2d_gbps);
	atomic_fetch_add(&fc_cnt.kernel_bytes, moved);
	atomic_fetch_add(&fc_cnt.d2d_bytes, moved);
}
