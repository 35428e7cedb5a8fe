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
 * through whatif_observe, which keeps its own table of fingerprints.
 *
 * Memory cap. The table holds at most whatif_setup's max_bytes of host
 * memory. Past it, rows are tracked by consistent sampling on their
 * fingerprint (a row is tracked or not by its content, so its repeats are
 * too) at a rate halved each time the cap is reached again, and the figures
 * are scaled back up: estimates, flagged "sampled" in the snapshot.
 *
 * Thread-safe: any number of threads may feed it; one lock per call.
 */
#ifndef VRAMPOOL_WHATIF_H
#define VRAMPOOL_WHATIF_H

#include <stdint.h>

#include "fingerprint.h"

#define WHATIF_POINTS 24        /* curve points in a snapshot (at least 16) */

/* Sets the memory cap (0: the default, 256 MiB) and clears every figure. */
void whatif_setup(uint64_t max_bytes);

/*
 * Observes nrows rows of row bytes that the pool did not serve. Rows with
 * skip[i] set are ignored (skip may be NULL). A row seen for the first time
 * gets the next position; a row seen before counts row bytes of repeat at
 * its position. When pos is not NULL, pos[i] gets each row's first-seen
 * position end (0 for a skipped row), which the pool keeps for the rows it
 * captures.
 */
void whatif_observe(const struct fp *fps, const uint8_t *skip, uint64_t nrows, uint64_t row,
		    uint64_t *pos);

/* Counts bytes of repeat (pool hits) at first-seen position end pos. */
void whatif_repeat(uint64_t pos, uint64_t bytes);

struct whatif_snapshot {
	uint64_t unique_bytes;          /* U: distinct bytes seen (estimate when sampled) */
	uint64_t repeat_bytes;          /* R: bytes of repeat sightings */
	uint64_t tracked_rows;          /* rows in the table */
	int sampled;                    /* 1 when past the memory cap */
	int npoints;
	uint64_t budget[WHATIF_POINTS + 2];   /* increasing, 0 first, U last */
	uint64_t served[WHATIF_POINTS + 2];   /* bytes a pool of that budget would have served */
};

/*
 * Fills s: npoints points from 0 to U, U included, plus the point at
 * extra_budget when it lies inside (0, U) (the run's actual budget; 0: none).
 */
void whatif_snapshot(struct whatif_snapshot *s, uint64_t extra_budget);

/* Bytes a pool of budget b would have served (interpolated inside a bucket). */
uint64_t whatif_served_at(uint64_t b);

/* Frees the table (tests, fork child: the child starts empty). */
void whatif_reset(void);

#endif
