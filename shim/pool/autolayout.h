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
 * Rows seen earlier in the same copy (black borders, padding) and rows that
 * come back in every copy are not evidence; neither is a row size that
 * repeats less than about half as often as the best one.
 *
 * Timing. Nothing can repeat before the second epoch (except duplicate
 * samples). In AUTOLAYOUT_POOL mode the module observes every copy until it
 * decides, and decides as soon as the evidence is clear: for a reshuffled
 * dataset whose batches fit AL_WINDOW (16 MiB), on the first copy of the
 * second epoch, or a copy or two later when another major family of copies
 * must find its row too (autolayout_judge.h says exactly). The copy whose
 * autolayout_observe returned 1 may itself be pooled with the layout found.
 * In AUTOLAYOUT_SUGGEST mode (no layout set, for the summary only) it
 * observes the copies of the first 16 MiB, then 1/16 of the bytes, and
 * decides the same way (so a short run is judged as in POOL mode; a long one
 * from a share of its copies, later in the second epoch).
 *
 * NOTHING is stated after AL_NOTHING_COPIES copies and AL_NOTHING_BYTES
 * (64 copies, 256 MiB) of copies without any repeat. It is not final: the
 * module goes on observing a small share of the bytes (1/16) and may still
 * find rows (a dataset bigger than that bound repeats only in its second
 * epoch); autolayout_observe then returns 1 again, with the state FOUND.
 *
 * Cost. It reads each observed copy at most about once (one XXH3 pass over
 * the first 16 MiB; two for sizes whose plausible rows need two hashing
 * units) and keeps bounded tables of fingerprints (at most about 2.3 MiB
 * in all; autolayout.c states every bound). After FOUND it stops observing;
 * autolayout_observe then returns at once.
 *
 * Thread-safe: any thread may observe or ask for the result; a copy that
 * finds the module busy with another thread's copy is skipped, never waited
 * for. autolayout_setup and autolayout_reset must not run concurrently with
 * the other calls (they run at start, in a forked child, in tests).
 */
#ifndef VRAMPOOL_AUTOLAYOUT_H
#define VRAMPOOL_AUTOLAYOUT_H

#include <stdint.h>

#include "core/layout.h"

#define AUTOLAYOUT_MIN_ROW 256          /* smaller rows do not pay for pooling */
#define AUTOLAYOUT_MAX_SIZES 16         /* copy sizes listed in a result */

enum autolayout_mode { AUTOLAYOUT_POOL, AUTOLAYOUT_SUGGEST };

enum autolayout_state {
	AUTOLAYOUT_LOOKING,             /* not enough evidence yet */
	AUTOLAYOUT_FOUND,               /* layout holds the specs found */
	AUTOLAYOUT_NOTHING,             /* enough observed and no row size repeats */
};

struct autolayout_result {
	enum autolayout_state state;
	/*
	 * FOUND: the rows found, largest first, priority 0, no whole:MIN,
	 * is_auto 0, text set (layout_format). Empty otherwise.
	 */
	struct layout layout;
	/*
	 * One line for the summary and the dump. FOUND: "rows of 3072 bytes
	 * repeated in 100% of 64 sampled rows of 196608-byte copies (6144: 0%
	 * of 32); 64 copies observed (6.1 MiB)" (one clause per row, the next
	 * larger candidate in brackets). NOTHING: "no row size repeated in 112
	 * copies (257.2 MiB observed): every copy is new; host-side random
	 * augmentation is the usual cause". LOOKING: "no row repeated yet in
	 * 63 copies (5.9 MiB observed); rows of a reshuffled dataset repeat
	 * from the second epoch on", or "rows repeat, the row size is not
	 * settled yet in ...".
	 */
	char evidence[256];
	uint64_t observed_copies;
	uint64_t observed_bytes;        /* bytes of the copies observed */
	uint64_t hashed_bytes;          /* bytes read to hash them (at most observed_bytes * 2) */
	uint64_t memory;                /* bytes the module has allocated now */
	/*
	 * The copy sizes tracked (most bytes first), the bytes observed of each
	 * and the row found for it so far (0: none; the last, partial batch of
	 * an epoch usually has none and is cut by layout_match). The layout's
	 * rule "the largest row dividing the copy wins" can cut a size at
	 * another family's row (masks of 8192-byte rows in copies of 64 rows
	 * are also 16 rows of 32768 bytes, the images' row): a caller that pools
	 * by copy size can take the row here first, layout_match otherwise.
	 */
	int nsizes;
	struct autolayout_size {
		uint64_t size;
		uint64_t row;
		uint64_t bytes;
	} sizes[AUTOLAYOUT_MAX_SIZES];
};

/* Sets the mode and forgets everything observed. Call it first (the default is POOL). */
void autolayout_setup(enum autolayout_mode mode);

/*
 * Observes one host-to-device copy of n bytes whose source src is host
 * memory readable now (copies under AUTOLAYOUT_MIN_ROW bytes are ignored).
 * Returns 1 when this call changed the state to FOUND or to NOTHING, else 0.
 */
int autolayout_observe(const void *src, uint64_t n);

/* Fills r with the current state, layout and evidence. */
void autolayout_result(struct autolayout_result *r);

/*
 * Frees everything (tests, a forked child). In a forked child whose lock
 * was held at the fork by a thread that is gone, the records are forgotten
 * and the lock made anew.
 */
void autolayout_reset(void);

/*
 * Test hook (issue 17, item F): takes (hold 1) or releases (hold 0) the
 * module's lock on the calling thread, as an observing thread holds it,
 * so that a test can fork meanwhile.
 */
void autolayout_lock_for_tests(int hold);

#endif
