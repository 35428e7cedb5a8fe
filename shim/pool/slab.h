/*
 * slab: one device allocation of the pool and the bookkeeping of what it
 * holds, as plain host data (no device call here; plan.c makes them).
 *
 * A slab is byte-addressed: rows of any size are appended at its fill
 * offset, so rows of several specs share one budget. Rows of one priority
 * only: the pool keeps a tail slab per priority, so that displacing a
 * lower priority frees whole slabs. Slabs are filled in consumption order
 * and never rewritten.
 *
 * Each copy that admits rows appends one segment per slab it fills: rows
 * [off, off + n * row) captured by that copy, and the state of their
 * capture. A segment starts aligned to min(256, the largest power of two
 * dividing its row size), so rows whose size is a multiple of 256 stay
 * 256-byte aligned; inside a segment rows are contiguous. Segments are
 * kept in offset order:
 *   PENDING   being issued by the copy that opened it (a hit is a miss),
 *   RECORDED  the event behind its capture is recorded (a hit waits for it),
 *   DONE      the capture has completed (a hit needs no wait),
 *   FAILED    the capture failed or its source changed (its rows left the
 *             index).
 * "settled" is the offset below which every segment is DONE or FAILED:
 * a row found in the index below it is served without looking at segments.
 *
 * Index values pack a slab id and a byte offset (slab_val).
 */
#ifndef VRAMPOOL_SLAB_H
#define VRAMPOOL_SLAB_H

#include <stdint.h>

#include "device/device.h"

#define SLAB_OFF_BITS 40                /* byte offsets below 1 TiB */
#define SLAB_MAX_ID ((1u << 24) - 1)    /* slab ids fit the other 24 bits */

enum seg_state { SEG_PENDING, SEG_RECORDED, SEG_DONE, SEG_FAILED };

struct pincheck;

struct seg {
	uint64_t off;           /* offset of the first row */
	uint64_t row;           /* row bytes */
	uint32_t n;             /* rows */
	uint8_t state;          /* enum seg_state */
	dev_event ev;           /* RECORDED: the event behind the capture */
	dev_stream stream;      /* RECORDED: the stream it was recorded on */
	struct pincheck *check; /* the run-time check of a pinned source, or NULL */
};

struct slab {
	uint32_t id;
	unsigned prio;
	dev_ptr base;
	uint64_t bytes;         /* allocated */
	uint64_t fill;          /* bytes handed out */
	uint64_t settled;       /* below this offset every segment is DONE or FAILED */
	uint64_t pooled_rows;   /* rows captured successfully and still in the index */
	uint64_t pooled_bytes;
	uint64_t pos_lo, pos_hi;/* first-seen positions (whatif) of the rows captured here */
	struct seg *segs;
	uint32_t nsegs, segs_cap;
	uint32_t done_segs;     /* segs[0, done_segs) are DONE or FAILED */
};

static inline uint64_t slab_val(uint32_t id, uint64_t off)
{
	return ((uint64_t)id << SLAB_OFF_BITS) | off;
}

static inline uint32_t slab_val_id(uint64_t val)
{
	return (uint32_t)(val >> SLAB_OFF_BITS);
}

static inline uint64_t slab_val_off(uint64_t val)
{
	return val & ((1ULL << SLAB_OFF_BITS) - 1);
}

/* Returns a new slab's host record (no segments), or NULL when out of memory. */
struct slab *slab_new(uint32_t id, unsigned prio, dev_ptr base, uint64_t bytes);

/* Frees the host record and its segments (the caller frees the device memory). */
void slab_free(struct slab *s);

/* Bytes a new segment of rows of row bytes would need for one row, alignment included. */
uint64_t slab_room_for(const struct slab *s, uint64_t row);

/*
 * Takes room for one row of row bytes for the copy whose open segment in
 * this slab is *open (-1: none yet; updated). The row extends the open
 * segment when it directly follows it, else starts a new PENDING segment.
 * Returns the row's offset, or UINT64_MAX when it does not fit (or no
 * memory for a segment).
 */
uint64_t slab_take(struct slab *s, uint64_t row, int64_t *open);

/* Gives back the last row taken into segment index seg (the copy could not index it). */
void slab_untake(struct slab *s, uint32_t seg);

/*
 * The first-seen position (whatif.h) of the row at offset off, estimated
 * from the slab's range of its rows' positions (rows fill a slab in about
 * the order they were first seen).
 */
uint64_t slab_row_pos(const struct slab *s, uint64_t off);

/* Returns the index of the segment holding offset off, or -1. */
int64_t slab_seg_find(const struct slab *s, uint64_t off);

/*
 * Advances done_segs and settled over leading segments that are DONE or
 * FAILED (the caller settles RECORDED ones first).
 */
void slab_advance(struct slab *s);

#endif
