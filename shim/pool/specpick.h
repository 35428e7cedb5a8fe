/*
 * specpick: which spec a copy is cut by when several divide its size.
 *
 * VRAMPOOL_LAYOUT=32768,8192 (the images and the masks of a segmentation
 * loader): a batch of 32 masks is 262144 bytes, which is also 8 images.
 * Cut at 32768, the masks would straddle samples and never repeat. Sizes
 * cannot tell the two apart; content can: rows cut at the true size come
 * back next epoch, rows that straddle samples do not (autolayout.h has the
 * same argument). So for each copy size that several specs divide, the
 * rows of every such spec are fingerprinted and remembered until one
 * copy shows which spec's rows repeat: the largest spec whose rows repeat
 * in at least half of that copy wins, for that copy and every later copy
 * of the size. Until then the largest dividing spec is used (the rule of
 * layout.h) for hits only: nothing is admitted from such a copy, so the
 * pool never fills with rows cut at the wrong size.
 *
 * That happens at the first copy of a size in the second epoch, so the
 * pool fills from there and serves from the third epoch on. The cost is
 * one extra fingerprint pass per extra spec over the copies of ambiguous
 * sizes until the decision, and at most SPECPICK_MEM_MAX bytes of host
 * memory (past it, fingerprints are kept by consistent sampling on their
 * value, so a row kept once is kept when it comes back).
 *
 * Thread-safe; a copy that finds the module busy with another thread's
 * copy gets the current choice without being observed, never waits.
 */
#ifndef VRAMPOOL_SPECPICK_H
#define VRAMPOOL_SPECPICK_H

#include <stdint.h>

#include "core/layout.h"

#define SPECPICK_MEM_MAX (64ULL << 20)

enum specpick_result {
	SPECPICK_ONE,           /* one spec divides n: *hit as it was */
	SPECPICK_DECIDED,       /* several; *hit is the one whose rows repeat */
	SPECPICK_UNDECIDED,     /* several, not known yet: *hit the largest; admit nothing */
};

/*
 * For a copy of n bytes from host memory src that layout l matched as
 * *hit: when other specs of l divide n too, sets *hit to the spec the
 * content shows (see above).
 */
enum specpick_result specpick_choose(const struct layout *l, uint64_t n, const void *src,
				     struct layout_hit *hit);

/* Forgets everything (a new layout, a forked child, tests). */
void specpick_reset(void);

#endif
