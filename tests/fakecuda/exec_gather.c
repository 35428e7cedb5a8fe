/*
 * exec_gather.c: the gather executor of the emulated device. kernel.c
 * checks a vrampool_gather launch and copies its parameters into a struct
 * fc_gather at call time; enqueue.c puts it on the stream (or into the
 * capturing stream's graph, shared by reference with its nodes); a
 * stream's worker performs it here, rate-limited on the device-to-device
 * link like a copy.
 */
#include "stream_impl.h"

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

/* Performs a gather launch's entries; the launch checked every range.
 * FAKECUDA_KERNEL=broken flips a byte of the last row written. */
static void run_gather(const struct fc_gather *g)
{
	char *last = NULL;
	uint32_t i;

	for (i = 0; i < g->count; i++) {
		const struct fc_gather_entry *e = &g->e[i];
		size_t n = (size_t)(e->nrows_dir & ~FC_GATHER_CAPTURE) * g->row;
		char *slab = fc_dev_rw((const void *)(uintptr_t)e->slab);
		char *rows = fc_dev_rw((const void *)(uintptr_t)(g->dst + (uint64_t)e->dst_row * g->row));

		if (!n)
			continue;
		if (e->nrows_dir & FC_GATHER_CAPTURE) {
			memcpy(slab, rows, n);
			last = slab + n - g->row;
		} else {
			memcpy(rows, slab, n);
			last = rows + n - g->row;
		}
	}
	if (last && fc.cfg.kernel == FC_KERNEL_BROKEN)
		last[g->row / 2] ^= 0x5a;
}

/* Performs the gather launch X describes, on the device-to-device link. */
void fc_exec_gather(const struct fc_xfer *x)
{
	if (fc.cfg.d2d_gbps > 0)
		fc_link_occupy(1, (double)x->n / fc.cfg.d2d_gbps);
	run_gather(x->gather);
}
