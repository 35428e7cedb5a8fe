/*
 * backoff: when to stop fingerprinting because the pool cannot help, and
 * when to start again (issue 8, "never slower").
 *
 * The pool pays host time for every row it fingerprints. That pays off
 * only if rows repeat and the pool holds them. When the pool can admit
 * no row it has not seen (full, latched, a budget below one row, or the
 * doorkeeper engaged: doorkeeper.h, pool_admits_unseen) and the rows of
 * the last BACKOFF_WINDOW copies (or of the last BACKOFF_WINDOW_BYTES, at
 * least BACKOFF_WINDOW_MIN copies: big rows come few per epoch) hit in
 * under 1% of their bytes (rows that
 * never repeat: random crops, flips, float normalisation on the host),
 * pooling stands down: matched copies go straight through, counted but not
 * fingerprinted. One copy in BACKOFF_SAMPLE_EVERY is still sampled: a few
 * of its rows (BACKOFF_SAMPLE_ROWS at most, spread over the copy) are
 * fingerprinted and looked up, nothing else. When at least one in 16 of
 * the last BACKOFF_RESUME_ROWS sampled rows was in the pool (the next
 * epoch of a dataset that filled the pool part-way through the first, a
 * new phase, a dataset that does repeat after all), pooling resumes. A
 * pool that can admit again (after a device reset, say) resumes at once.
 *
 * A pool can also be full of rows that no longer come back (an epoch of
 * augmented rows, then plain ones; a new dataset): then the sampled rows
 * repeat among themselves (the pool keeps the fingerprints of its samples)
 * but never hit. After BACKOFF_STALE_REPEATS such repeats the pool is
 * refreshed: emptied, to fill again with the rows that do come back (a
 * pool with room, which the doorkeeper kept the rows out of, is not
 * emptied: the doorkeeper disengages and pooling resumes). Each
 * refresh doubles the evidence the next one needs, so a pool too small to
 * serve much does not churn.
 *
 * The cost while stood down: two rows fingerprinted per copy at most.
 *
 * One state per copy kind (issue 16): a kind is a spec and the rows per
 * copy (a copy size, for a fixed row size; whole:MIN copies, one row each
 * whatever their size, are one kind), so a job whose copies alternate
 * (data and labels, rows and masks, full and partial batches) has each
 * stream of copies judged, stood down and sampled on its own; one state
 * for all would sample one copy in BACKOFF_SAMPLE_EVERY of the mix, which
 * can be always the same kind. The pool keeps BACKOFF_KINDS of them
 * (struct backoff_kinds); a new kind takes a free slot, else the one used
 * least recently, a stood-down one only when every slot stands down.
 *
 * Pure state machine: the pool holds one table per device, under its lock.
 */
#ifndef VRAMPOOL_BACKOFF_H
#define VRAMPOOL_BACKOFF_H

#include <stdint.h>

#define BACKOFF_WINDOW 32               /* copies judged before standing down */
#define BACKOFF_WINDOW_BYTES (256ULL << 20) /* or bytes, */
#define BACKOFF_WINDOW_MIN 4            /* in at least this many copies */
#define BACKOFF_SAMPLE_EVERY 8          /* while down: one copy in this many is sampled */
#define BACKOFF_SAMPLE_ROWS 16          /* rows fingerprinted in a sampled copy, at most */
#define BACKOFF_RESUME_ROWS 32          /* sampled rows judged before resuming */
#define BACKOFF_STALE_REPEATS 4         /* sampled rows seen again, never hit, before a refresh */
#define BACKOFF_KINDS 32                /* copy kinds (spec, rows per copy) judged apart */

struct backoff {
	int down;                       /* pooling stood down */
	uint32_t win_copies;            /* full-path copies since the pool could last admit */
	uint64_t win_bytes, win_hit_bytes;
	uint32_t skipped;               /* copies passed straight since the last sample */
	uint32_t sample_rows, sample_hits; /* the current judgement of samples */
	uint32_t repeats;               /* sampled rows seen in an earlier sample since standing down */
	uint32_t refreshes;             /* times the pool was emptied for rows that repeat */
	uint64_t stand_downs;           /* times pooling stood down */
};

/* What a sample says. */
enum backoff_verdict {
	BACKOFF_STAY,                   /* still stood down */
	BACKOFF_RESUME,                 /* rows hit again: pool */
	BACKOFF_REFRESH,                /* rows repeat but the pool holds others: empty it, then pool */
};

enum backoff_route {
	BACKOFF_FULL,                   /* fingerprint, look up, serve, capture */
	BACKOFF_SAMPLE,                 /* stood down: fingerprint a few rows, look them up */
	BACKOFF_PASS,                   /* stood down: straight through */
};

/* Decides what to do with the next matched copy; can_admit as in backoff_full. */
enum backoff_route backoff_route(struct backoff *b, int can_admit);

/*
 * Records a copy that took the full path: bytes matched, hit_bytes served.
 * can_admit says whether the pool can still admit rows. Returns 1 when
 * pooling just stood down, else 0.
 */
int backoff_full(struct backoff *b, int can_admit, uint64_t bytes, uint64_t hit_bytes);

/*
 * Records a sampled copy: rows looked up, hits found in the pool, repeats
 * (rows seen in an earlier sample). Returns the verdict; after RESUME or
 * REFRESH pooling is back.
 */
enum backoff_verdict backoff_sample(struct backoff *b, uint32_t rows, uint32_t hits, uint32_t repeats);

/* The states of the copy kinds of one pool. */
struct backoff_kinds {
	struct backoff_kind {
		int spec;               /* ledger.h's slot of the spec */
		uint64_t rows;          /* rows per copy; 0: the slot is free */
		uint64_t used;          /* the table's clock at its last copy */
		struct backoff b;
	} k[BACKOFF_KINDS];
	uint64_t clock;
};

/*
 * The state of copies of rows rows (at least 1) of spec slot spec, made (a
 * fresh state) in a slot as above when the kind is new. Never NULL.
 */
struct backoff *backoff_kind(struct backoff_kinds *t, int spec, uint64_t rows);

/* Whether any kind stands down now. */
int backoff_any_down(const struct backoff_kinds *t);

#endif
