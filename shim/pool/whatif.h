/*
 * whatif: what a pool of any budget would have served, had it admitted
 * rows fill-until-full in first-seen order (DESIGN.md, "whatif").
 *
 * Every row the shim fingerprints gets a first-seen position: the unique
 * bytes seen up to and including it (its "end"). A pool of budget B holds
 * exactly the rows whose end is at most B, so each later sighting of such a
 * row is bytes a pool of budget B would have served. The module keeps, per
 * position, the repeat bytes seen, and answers the curve served(B).
 *
 * Two sources feed it. Rows the pool served (hits) are already known to the
 * pool, which reports them with whatif_repeat and the position it kept for
 * them (a slab remembers the first-seen positions of its rows). Every other
 * fingerprinted row (misses, dry runs, rows a full pool did not admit) goes
 * through whatif_observe, which keeps its own table of fingerprints. A row
 * must reach the module once per sighting, through one of the two. A row
 * the pool captures is observed once, for its position, and kept out of
 * the table while the pool holds it (WHATIF_KEPT, whatif_adopt; the pool's
 * side is pool/keep.h).
 *
 * Positions are kept in a histogram of log-linear buckets (64 per power of
 * two: a bucket spans at most 1/64 of its position), so the curve is exact
 * at bucket edges and interpolated inside a bucket; under reshuffle the
 * interpolation error is far below 1%.
 *
 * Memory cap and sampling. The fingerprint table holds one 16-byte entry
 * per tracked row (64 bits of the fingerprint and the row's position),
 * kept at most half full, in at most whatif_setup's max_bytes
 * (VRAMPOOL_WHATIF_MEM, default WHATIF_DEFAULT_MEM = 1 MiB: 32,768 rows),
 * with a bit per slot beside it (1/128 more: which slots hold an entry).
 * Below that many distinct rows the curve is exact. Past it, rows are
 * tracked by spatial sampling on their fingerprint, as SHARDS does for
 * miss-ratio curves: a row is tracked when its fingerprint lies below a
 * threshold, so a row is tracked or not by its content and its repeats
 * are too; the threshold halves each time the table fills again (entries
 * above it are dropped in place), and a tracked row stands for
 * sample_one_in rows: its bytes count that many times. The total of every
 * sighting is counted exactly, and what the sample misses of it is added
 * at the smallest budget (SHARDS-adj; whatif.c says why). Figures are then
 * estimates, flagged "sampled" in the snapshot: within 2 percentage points
 * of the exact curve on traces of 10^6 rows (reshuffled epochs, Zipf, a
 * scan; tests/unit/test_whatif.c), for about 1 MiB at any number of rows
 * (1 byte per row at 10^6 rows). The histogram is fixed (about 30 KiB).
 *
 * Copies not fingerprinted. While a spec stands aside or the pool stood
 * down (its copies go straight through), the curve still sees their rows
 * through whatif_observe_sparse, a content sample of them, so that it
 * stays true (issue 19: without it a run whose small budget filled saw
 * 16.7% where the dry run saw 75%). Copies it cannot read (the ledger
 * decides before any pointer query) are not observed: whoever decides
 * that calls whatif_set_estimate(1), and the snapshot says the curve is an
 * estimate from the copies it saw; a sparse observation sets it too.
 *
 * Cost. whatif_repeat is two relaxed atomic adds (no hashing, no lock), and
 * whatif_repeat_many about one a repeat: they run on the hit path. whatif_observe takes the module's lock once per
 * call; a row not tracked costs a compare, a tracked one a table probe,
 * and a kept row new to the table one bit of the slot bitmap; past the
 * exact size, the table's refills and rate halvings come to about 3
 * instructions a row at 10^6 rows (fewer as rows grow).
 *
 * Thread-safe: any number of threads may feed it. whatif_snapshot and
 * whatif_served_at take no lock (they read atomics only), so the reporter
 * can call them while a thread stopped by a signal holds the lock.
 */
#ifndef VRAMPOOL_WHATIF_H
#define VRAMPOOL_WHATIF_H

#include <stdint.h>

#include "pool/fingerprint.h"

#define WHATIF_POINTS 24        /* curve points evenly from 0 to U (at least 16) */
#define WHATIF_LOG_POINTS 38    /* and points below U, each 2^(1/4) below the last */
#define WHATIF_MAX_POINTS (WHATIF_POINTS + WHATIF_LOG_POINTS + 1)  /* with the run's budget: at most 63 */
#define WHATIF_DEFAULT_MEM (1ULL << 20)
#define WHATIF_SPARSE_SHIFT 5   /* whatif_observe_sparse samples one row in 32 */
#define WHATIF_SPARSE_MIN_ROW 2048 /* rows worth a pre-key while they go straight through */
#define WHATIF_MIN_MEM (16ULL << 10)

/*
 * Sets the memory cap (0: WHATIF_DEFAULT_MEM; less than WHATIF_MIN_MEM is
 * raised to it) and clears every figure.
 */
void whatif_setup(uint64_t max_bytes);

/* What whatif_observe does with row i (its kind[i]; a NULL kind: every row WHATIF_OBSERVE). */
#define WHATIF_OBSERVE 0        /* a row the pool did not serve: observed */
#define WHATIF_SKIP 1           /* a row the pool served (a hit): ignored */
#define WHATIF_KEPT 2           /* a row the pool captures and keeps: see whatif_observe */

/*
 * Observes nrows rows of row bytes that the pool did not serve, each as
 * kind[i] says (kind may be NULL). A row seen for the first time gets the
 * next position; a row seen before counts row bytes of repeat at its
 * position. When pos is not NULL, pos[i] gets each row's first-seen
 * position end (0 for a skipped row; in sampled mode, for a row not
 * tracked, the estimated unique bytes so far), which the pool keeps for
 * the rows it captures.
 *
 * A WHATIF_KEPT row is one the pool captures, in a copy whose every other
 * row it serves or knows (a duplicate inside the copy would otherwise go
 * unrecognised). Seen before, it counts as any row does. New, it gets its
 * position without entering the fingerprint table: while the pool holds it,
 * its sightings reach the curve as pool hits (whatif_repeat), so the table
 * never needs it, and the capture epoch costs no table insert and no rate
 * halving. Whoever keeps such rows hands them to the table with
 * whatif_adopt before they can be observed again without the pool: when
 * they leave the pool, or before copies go through unhashed
 * (whatif_observe_sparse). Whether a row is new to the table is read from
 * a bitmap of its occupied slots (a row whose home slot is empty is not in
 * it), a cache-resident bit per slot, so a kept row costs no table miss.
 */
void whatif_observe(const struct fp *fps, const uint8_t *kind, uint64_t nrows, uint64_t row,
		    uint64_t *pos);

/*
 * Puts n rows into the fingerprint table at their first-seen positions
 * pos[i] (as whatif_observe gave them, or the pool's estimate of them):
 * rows kept out of it (WHATIF_KEPT) that can now be observed without the
 * pool. A row already in the table, or not tracked at the current rate,
 * is left as it is. Counts nothing: no sighting, no repeat.
 */
void whatif_adopt(const struct fp *fps, const uint64_t *pos, uint64_t n);

/*
 * Observes nrows rows of row bytes at src (host memory the caller may
 * read now) that go to the device without being fingerprinted: the
 * copies of a spec that stands aside or of a pool that stood down, so
 * that the curve stays true while they do. A row is sampled by its
 * content at 1 in 2^WHATIF_SPARSE_SHIFT: a pre-key of a few words read
 * from it (whatif.c), equal for equal rows, decides; only the sampled
 * rows are fingerprinted and observed, each standing for
 * 2^WHATIF_SPARSE_SHIFT rows (SHARDS again, before the hash). Marks the
 * curve an estimate. Costs a pre-key per row and a hash per sampled row.
 */
void whatif_observe_sparse(const void *src, uint64_t nrows, uint64_t row);

/*
 * For whatif_sparse.c: observes n sampled rows of a sparse observation,
 * each standing for 2^WHATIF_SPARSE_SHIFT rows; and counts bytes of copies
 * observed sparsely in the total, marking the curve sampled by content and
 * an estimate.
 */
void whatif_observe_weighted(const struct fp *fps, uint64_t n, uint64_t row);
void whatif_count_sparse(uint64_t bytes);

/*
 * Counts bytes of repeat (pool hits) at first-seen position end pos. A
 * position of 0 (unknown) counts at every budget from one byte up.
 */
void whatif_repeat(uint64_t pos, uint64_t bytes);

/*
 * whatif_repeat of n repeats at once, bytes[i] at position pos[i]: the
 * same figures, with one add to the total and one add per run of repeats
 * that fall in the same histogram bucket (the hit path reports a copy's
 * hits this way).
 */
void whatif_repeat_many(const uint64_t *pos, const uint64_t *bytes, uint64_t n);

/*
 * Marks the curve an estimate from the copies it saw (on != 0): copies of
 * a spec that stands aside go unobserved. The mark stays until
 * whatif_reset (the curve is cumulative); on == 0 changes nothing.
 * Lock-free, callable under any lock.
 */
void whatif_set_estimate(int on);

/*
 * Marks that copies went by unobserved, not even sampled (rows under
 * WHATIF_SPARSE_MIN_ROW going straight through): the curve is an estimate
 * and cannot tell that rows do not repeat. Lock-free.
 */
void whatif_set_unobserved(void);

struct whatif_snapshot {
	uint64_t unique_bytes;          /* U: distinct bytes seen (estimate when sampled) */
	uint64_t repeat_bytes;          /* R: bytes of repeat sightings */
	uint64_t tracked_rows;          /* rows in the table */
	int sampled;                    /* 1 when rows are sampled (past the memory cap) */
	uint64_t sample_one_in;         /* a tracked row stands for this many (1: exact) */
	int estimate;                   /* 1 after whatif_set_estimate: copies went unobserved */
	int unobserved;                 /* 1 after whatif_set_unobserved: some not even sampled */
	uint64_t table_bytes;           /* host bytes of the table and the histogram */
	int npoints;
	uint64_t budget[WHATIF_MAX_POINTS];   /* increasing, 0 first, U last */
	uint64_t served[WHATIF_MAX_POINTS];   /* bytes a pool of that budget would have served */
};

/*
 * Fills s: WHATIF_POINTS points evenly from 0 to U, U included (a single
 * point 0 while U is 0), WHATIF_LOG_POINTS more below U, each 2^(1/4)
 * below the one before (U/1.19, U/1.41, ... down to U/724 or 1 byte), so
 * that a budget between two neighbours is within 19% of either or 4.3% of
 * U from it, at any size, plus the point at extra_budget when it lies
 * inside (0, U) (the run's actual budget; 0: none). Budgets increase
 * (no two equal), at most WHATIF_MAX_POINTS of them; served is
 * non-decreasing along the curve.
 */
void whatif_snapshot(struct whatif_snapshot *s, uint64_t extra_budget);

/* Bytes a pool of budget b would have served (interpolated inside a bucket). */
uint64_t whatif_served_at(uint64_t b);

/*
 * Frees the table and clears every figure, keeping the cap (tests, fork
 * child: the child starts empty). Safe in a forked child whose parent had
 * another thread inside the module: the lock is made anew.
 */
void whatif_reset(void);

#endif
