/*
 * doorkeeper: admission on evidence (issue 16). A pool with room captures
 * every row it has not seen, on first sight, so that epoch 2 is served.
 * When the evidence says rows do not come back, a filter of the
 * fingerprints seen once (a TinyLFU-style doorkeeper: a blocked Bloom
 * filter) stands in front of the index, and a row is captured only on its
 * second sighting. A row that never repeats then costs its hash and one
 * filter probe, and is never copied into a slab: the pool does not fill
 * with rows that never come back, and standing aside needs no full pool.
 *
 * Evidence, in bytes of the rows the pool planned while it could admit:
 * a window is one pass of the unique rows seen when it opened (the bytes
 * captured so far), and at least the first pass: the budget, at most
 * DK_FIRST_PASS_BYTES or DK_FIRST_PASS_ROWS rows. When a window closes
 * with no hits (at most one byte in DK_HIT_SHARE hit), rows captured and
 * at least half the budget still free of them, the doorkeeper engages;
 * otherwise the next window opens. So a dataset that fits the budget
 * keeps every hit of its epoch 2 (its repeats come inside the first
 * window, or the pool is full before it closes), and rare repeats inside
 * epoch 1 engage nothing: only a whole pass without a hit does. A budget
 * below twice the caps is half full before any window closes: there the
 * pool fills soon, the back-off stands down (backoff.h) and the doorkeeper
 * is not needed. A larger budget (an H200's) is where rows that never
 * repeat would otherwise be captured for the whole run: there the
 * doorkeeper engages after 4 GiB or 4 million rows, long before the pool
 * is full. A dataset larger than that which does repeat may be judged in
 * its first epoch; then pooling stands down for the rest of it (below),
 * and in epoch 2 the back-off's samples find the rows of the first pass in
 * the pool: pooling resumes capturing on first sight, and from epoch 3
 * every row is served but those of epoch 2 that went by before the resume
 * (about 16 copies' worth), which are served from epoch 4.
 *
 * Disengaging: while engaged, every row not in the index is looked up in
 * the filter. When, over DK_JUDGE_ROWS rows seen, one in DK_AGAIN_SHARE or
 * more was a hit or had been seen before, rows repeat again: the filter is
 * dropped, capture on first sight resumes, and the first pass the next
 * engagement needs doubles (evidence that was wrong once must be
 * stronger).
 *
 * Engaged, the pool admits no row it has not seen: for the back-off and
 * the ledger it is a pool that cannot admit (pool_admits_unseen), so rows
 * that still do not hit stand pooling down (backoff.h) and cost nothing
 * but the sample; when the samples see rows come back (hits, or repeats
 * among themselves), pooling resumes and the doorkeeper disengages
 * (doorkeeper_disengage).
 *
 * The filter: two generations of 64-byte blocks, each sized for the unique
 * rows seen at the engagement (DK_MIN_ROWS to DK_MAX_ROWS rows at
 * DK_BITS_PER_ROW bits, 6 bits of a row in one block: about 1% of rows
 * never seen pass as seen). Rows are added to the current generation; when
 * it holds its rows the older one is cleared and becomes the current one,
 * so the filter remembers between one and two generations of first
 * sightings. At most 2 * DK_MAX_ROWS * DK_BITS_PER_ROW / 8 bytes (20 MiB).
 * Block and bits come from other bits of the fingerprint than the index's
 * home slot and the what-if's sampling.
 *
 * Not thread-safe: the pool calls it under its lock. A zeroed struct is a
 * disengaged doorkeeper with nothing allocated.
 */
#ifndef VRAMPOOL_DOORKEEPER_H
#define VRAMPOOL_DOORKEEPER_H

#include <stdint.h>

#include "pool/fingerprint.h"

#define DK_FIRST_PASS_BYTES (4ULL << 30) /* the first pass, at most: 4 GiB of rows */
#define DK_FIRST_PASS_ROWS (1ULL << 22)  /* or this many rows */
#define DK_HIT_SHARE 1024               /* "no hits": at most one byte in this many hit */
#define DK_JUDGE_ROWS 4096              /* rows seen per judgement while engaged */
#define DK_AGAIN_SHARE 4                /* one in this many hit or seen before: rows repeat again */
#define DK_MIN_ROWS (1ULL << 16)        /* rows a filter generation holds, at least */
#define DK_MAX_ROWS (1ULL << 23)        /* and at most */
#define DK_BITS_PER_ROW 10

struct doorkeeper {
	int engaged;                    /* rows are captured on their second sighting */
	uint64_t first_pass;            /* bytes of the first pass (0: not set yet) */
	uint64_t unique;                /* bytes captured while disengaged: the unique rows seen */
	uint64_t win_len, win_seen, win_hits;  /* the evidence window, bytes */
	uint64_t *bits;                 /* the filter: 2 generations of nblocks blocks, or NULL */
	uint64_t nblocks;               /* 64-byte blocks a generation */
	uint64_t gen_rows, gen_cap;     /* rows added to the current generation, and its capacity */
	unsigned cur;                   /* the current generation, 0 or 1 */
	uint64_t judged, again;         /* engaged: rows seen, and those hit or seen before, this judgement */
	uint64_t engagements, disengagements, refused;  /* totals */
};

/* What a judgement decided. */
enum dk_event {
	DK_NONE,
	DK_ENGAGED,                     /* a pass without hits: capture on the second sighting */
	DK_DISENGAGED,                  /* rows repeat again: capture on first sight */
};

/* The value doorkeeper_filter writes into found[] for a row it refuses. */
#define DK_REFUSED 2

/*
 * While engaged, looks up every row i with found[i] == 0 (not in the
 * index) in the filter: a row seen before stays 0 (admit it); one not
 * seen is added and gets found[i] = DK_REFUSED (a miss, not captured).
 * Rows of one call are judged in order, so a row twice in one copy is
 * refused, then admitted. Returns the rows refused. Disengaged: does
 * nothing and returns 0.
 */
uint64_t doorkeeper_filter(struct doorkeeper *dk, const struct fp *fps, uint64_t n, uint8_t *found);

/*
 * Records a copy the pool planned while it could admit rows: seen bytes
 * of rows of row bytes, hit bytes served, captured bytes admitted, under
 * the pool's budget. Engages or disengages when the evidence says so
 * (DK_ENGAGED, DK_DISENGAGED), else DK_NONE. An engagement whose filter
 * cannot be allocated is not made.
 */
enum dk_event doorkeeper_judge(struct doorkeeper *dk, uint64_t budget, uint64_t row, uint64_t seen,
			       uint64_t hits, uint64_t captured);

/*
 * Disengages now, as a judgement that saw rows repeat would: the filter
 * is freed, capture on first sight resumes and the next engagement needs
 * twice the evidence. For evidence from outside the filter (the back-off's
 * samples saw rows come back while pooling stood down, backoff.h).
 * Returns DK_DISENGAGED, or DK_NONE where it was not engaged.
 */
enum dk_event doorkeeper_disengage(struct doorkeeper *dk);

/* Host bytes of the filter. */
uint64_t doorkeeper_bytes(const struct doorkeeper *dk);

/* Frees the filter; dk is a zeroed, disengaged doorkeeper afterwards. */
void doorkeeper_release(struct doorkeeper *dk);

/*
 * For tests: the first pass is at most bytes from now on, instead of
 * DK_FIRST_PASS_BYTES (0 restores it), for doorkeepers that have not set
 * theirs yet.
 */
void doorkeeper_set_first_pass_for_tests(uint64_t bytes);

#endif
