/*
 * autolayout: finds the row size of a program's host-to-device copies from
 * their content, for VRAMPOOL_LAYOUT=auto and for the suggestion in the
 * exit summary of runs without a layout.
 *
 * The evidence. Sizes alone cannot tell a sample from a batch of samples;
 * content can. Under per-epoch reshuffle, rows cut at the true sample size
 * repeat across copies (every sample comes back next epoch), and so do
 * rows cut at its divisors, while rows cut at a size that straddles samples
 * (two samples, one and a half) almost never repeat: their neighbours
 * change. So the module groups the copies it sees by size, takes as
 * candidates the divisors of those sizes (at least AUTOLAYOUT_MIN_ROW
 * bytes, the copy size itself included: offloaded weights repeat whole),
 * fingerprints a consistent sample of each candidate's rows (a row is
 * sampled or not by its content, so a sampled row stays sampled when it
 * comes back) and counts the sampled rows seen before. The layout found is,
 * per family of copy sizes, the largest candidate whose rows repeat about
 * as often as the best candidate's; families whose rows do not repeat, or
 * that carry too few bytes to pay for pooling, get no spec.
 *
 * Timing. Nothing can repeat before the second epoch. In AUTOLAYOUT_POOL
 * mode the module decides as soon as the evidence is clear, at the latest
 * within the first few copies of the second epoch, so that the pool fills
 * during the second epoch and serves from the third on. In
 * AUTOLAYOUT_SUGGEST mode (no layout set) it observes a bounded share of
 * copies, for the summary only.
 *
 * Cost. It reads each observed copy at most about once (one XXH3 pass
 * over the bytes it samples) and keeps a bounded table of fingerprints
 * (autolayout.c states the bounds). After a decision in POOL mode it stops
 * observing; autolayout_observe then returns at once.
 *
 * Thread-safe: any thread may observe; a copy that finds the module busy
 * with another thread's copy is skipped, never waited for.
 */
#ifndef VRAMPOOL_AUTOLAYOUT_H
#define VRAMPOOL_AUTOLAYOUT_H

#include <stdint.h>

#include "layout.h"

#define AUTOLAYOUT_MIN_ROW 256          /* smaller rows do not pay for pooling */

enum autolayout_mode { AUTOLAYOUT_POOL, AUTOLAYOUT_SUGGEST };

enum autolayout_state {
	AUTOLAYOUT_LOOKING,             /* not enough evidence yet */
	AUTOLAYOUT_FOUND,               /* layout holds the specs found */
	AUTOLAYOUT_NOTHING,             /* enough observed and no row size repeats */
};

struct autolayout_result {
	enum autolayout_state state;
	struct layout layout;           /* FOUND: fixed-row specs, text set (layout_format) */
	/*
	 * One line for the summary and the dump, e.g. "rows of 3072 bytes
	 * repeated in 96% of sampled rows over 33 copies of 196608 and 49152
	 * bytes; 6144 repeated 0%" or, for NOTHING, "no row size repeated in
	 * 64 copies (5.0 MiB): host-side random augmentation makes every
	 * epoch unique".
	 */
	char evidence[256];
	uint64_t observed_copies;
	uint64_t observed_bytes;
};

/* Sets the mode and forgets everything observed. */
void autolayout_setup(enum autolayout_mode mode);

/*
 * Observes one host-to-device copy of n bytes whose source src is host
 * memory readable now. Returns 1 when this call made the decision (the
 * state became FOUND or NOTHING), else 0.
 */
int autolayout_observe(const void *src, uint64_t n);

/* Fills r with the current state, layout and evidence. */
void autolayout_result(struct autolayout_result *r);

/* Frees everything (tests, a forked child). */
void autolayout_reset(void);

#endif
