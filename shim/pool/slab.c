/*
 * slab: the host record of a slab, its segments and its fill (slab.h).
 */
#include "pool/slab.h"

#include <stdlib.h>

/* The alignment of a segment of rows of row bytes: min(256, lowest set bit of row). */
static uint64_t slab_align(uint64_t row)
{
	uint64_t a = row & (~row + 1);

	return a > 256 || a == 0 ? 256 : a;
}

static uint64_t slab_align_up(uint64_t off, uint64_t a)
{
	return (off + a - 1) & ~(a - 1);
}

struct slab *slab_new(uint32_t id, unsigned prio, dev_ptr base, uint64_t bytes)
{
	struct slab *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->id = id;
	s->prio = prio;
	s->base = base;
	s->bytes = bytes;
	s->pos_lo = UINT64_MAX;
	return s;
}

void slab_free(struct slab *s)
{
	if (!s)
		return;
	free(s->segs);
	free(s);
}

uint64_t slab_room_for(const struct slab *s, uint64_t row)
{
	uint64_t off = slab_align_up(s->fill, slab_align(row));

	return off >= s->bytes ? 0 : s->bytes - off;
}

/* Appends a PENDING segment at off for rows of row bytes. Returns its index or -1. */
static int64_t slab_seg_open(struct slab *s, uint64_t off, uint64_t row)
{
	if (s->nsegs == s->segs_cap) {
		uint32_t ncap = s->segs_cap ? 2 * s->segs_cap : 8;
		struct seg *n = realloc(s->segs, ncap * sizeof(*n));

		if (!n)
			return -1;
		s->segs = n;
		s->segs_cap = ncap;
	}
	s->segs[s->nsegs] = (struct seg){ .off = off, .row = row, .n = 0, .state = SEG_PENDING };
	return s->nsegs++;
}

uint64_t slab_take(struct slab *s, uint64_t row, int64_t *open)
{
	struct seg *g = *open >= 0 ? &s->segs[*open] : NULL;
	uint64_t off;

	if (g && g->row == row && g->off + (uint64_t)g->n * row == s->fill && s->fill + row <= s->bytes &&
	    g->n < UINT32_MAX) {
		off = s->fill;
		g->n++;
		s->fill += row;
		return off;
	}
	off = slab_align_up(s->fill, slab_align(row));
	if (off > s->bytes || row > s->bytes - off)
		return UINT64_MAX;
	*open = slab_seg_open(s, off, row);
	if (*open < 0)
		return UINT64_MAX;
	s->segs[*open].n = 1;
	s->fill = off + row;
	return off;
}

void slab_untake(struct slab *s, uint32_t seg)
{
	struct seg *g = &s->segs[seg];

	g->n--;
	if (g->off + (uint64_t)(g->n + 1) * g->row == s->fill)
		s->fill -= g->row;
	if (g->n == 0)
		g->state = SEG_FAILED;
}

uint64_t slab_row_pos(const struct slab *s, uint64_t off)
{
	if (s->pos_lo == UINT64_MAX || s->pos_hi <= s->pos_lo || s->fill == 0)
		return s->pos_hi;
	return s->pos_lo + (uint64_t)((double)(s->pos_hi - s->pos_lo) * ((double)off / (double)s->fill));
}

int64_t slab_seg_find(const struct slab *s, uint64_t off)
{
	uint32_t lo = 0, hi = s->nsegs;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct seg *g = &s->segs[mid];

		if (g->off + (uint64_t)g->n * g->row <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->nsegs && s->segs[lo].off <= off)
		return lo;
	return -1;
}

void slab_advance(struct slab *s)
{
	while (s->done_segs < s->nsegs) {
		const struct seg *g = &s->segs[s->done_segs];

		if (g->state != SEG_DONE && g->state != SEG_FAILED)
			break;
		s->done_segs++;
	}
	s->settled = s->done_segs < s->nsegs ? s->segs[s->done_segs].off : s->fill;
}
