/*
 * autolayout_impl: the state and the types that the files of the
 * auto-layout room share. INTERNAL: only autolayout.c, autolayout_pass.c,
 * autolayout_judge.c and autolayout_sizes.c include it (through their own
 * headers); autolayout.h is the module's contract.
 *
 * The room, calls running one way (down):
 *   autolayout.c        the public calls: observe, result, set-up, reset;
 *   autolayout_pass.c   hashing one copy's rows for every candidate;
 *   autolayout_judge.c  verdicts, the module-wide decision, evidence text;
 *   autolayout_sizes.c  the state, copy sizes, candidates, fingerprint tables.
 *
 * Invariants: one record per copy size observed, at most AL_MAX_SIZES; a
 * size's candidates ascend by row, each holding a reference to the table of
 * its row (tables are shared by row size across sizes); table slots in all
 * stay within AL_SLOT_BUDGET; al.memory counts the bytes allocated.
 *
 * Ownership: al owns every size record and table slot array; they are
 * freed by autolayout_reset (or given up, unfreed, in a forked child whose
 * lock holder is gone).
 *
 * Locking: al.lock guards everything but the atomics, which the fast path
 * of autolayout_observe reads without it. Every internal function runs with
 * al.lock held, except al_sizes_clear in a forked child whose lock holder
 * is gone (autolayout_reset then forgets the records and makes a new lock).
 */
#ifndef VRAMPOOL_AUTOLAYOUT_IMPL_H
#define VRAMPOOL_AUTOLAYOUT_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/layout.h"
#include "pool/autolayout.h"

/* Bounds and thresholds of the whole room, in one place. */
#define AL_WINDOW (16ull << 20)         /* bytes of a copy read per pass */
#define AL_PASSES 2                     /* hashing units, hence passes, per size */
#define AL_PLAUSIBLE_BATCH 1024         /* a second pass needs a row of a batch this small */
#define AL_MIN_UNIT 64                  /* smallest hashing unit, in bytes */
#define AL_BLOCK 1024                   /* units hashed between row emissions */
#define AL_MAX_SIZES 16                 /* copy sizes tracked */
#define AL_SIZE_CANDS 40                /* candidates per copy size */
#define AL_MAX_TABLES (AL_MAX_SIZES * AL_SIZE_CANDS)  /* row sizes with a table */
#define AL_SLOT_BUDGET (256u << 10)     /* table slots in all (8 bytes each: 2 MiB) */
#define AL_CAP 2048                     /* fingerprints kept per row size */
#define AL_SAMPLE_ROWS 64               /* rows sampled per copy, about, at first */
#define AL_SLOTS_MIN 256                /* table slots at first */
#define AL_SLOTS_MAX 4096               /* table slots per row size (load <= 1/2) */
#define AL_RING 32                      /* copies of one size kept as evidence */
#define AL_HOT 4                        /* repeats of one row that count */
#define AL_MAX_DIVISORS 1024            /* divisors generated per size */
#define AL_TRIAL_MAX 65536              /* trial division bound */

#define AL_Z2 3.0                       /* z^2 of the Wilson bounds (z = 1.73) */
#define AL_THETA 0.75                   /* high: rate >= AL_THETA * best */
#define AL_THETA_LO 0.5                 /* high: lower bound >= this * best; low: upper < */
#define AL_R_MIN 0.25                   /* best >= AL_R_MIN * share observed */
#define AL_R_FLOOR 0.01
#define AL_MIN_K 4                      /* repeats at the row found */
#define AL_SPEC_SHARE 64                /* a spec needs 1/64 of the observed bytes */
#define AL_SETTLE 2                     /* copies a size gets to find its own row */
#define AL_SETTLE_MAX 64                /* copies the settling lasts at most */
#define AL_RECENT 32                    /* a size seen this many copies ago is active */
#define AL_NOTHING_COPIES 64
#define AL_NOTHING_BYTES (256ull << 20)
#define AL_SUGGEST_FREE (16ull << 20)
#define AL_SHARE 16

#define AL_K 0x9E3779B97F4A7C15ull       /* Horner multiplier (odd) */
#define AL_SEED 0x5851F42D4C957F2Dull    /* XXH3 seed of the units */

_Static_assert(AL_MAX_SIZES <= 16 && AL_HOT < 16, "an entry's tag holds an origin and repeats in 4 bits each");
_Static_assert(AL_MAX_SIZES <= 32, "a size's shares are a 32-bit mask of slots");

enum al_kind { AL_NONE, AL_UNSURE, AL_FOUND };

/*
 * One kept fingerprint (8 bytes): 32 bits of its key (0: empty slot), the
 * low bits of the copy it was last seen in, the leading zeros of its key
 * (sampled while at least the table's level), its repeats (low 4 bits of
 * tag) and the slot of the size it was first seen in (high 4 bits).
 */
struct al_entry {
	uint32_t id;
	uint16_t seq;
	uint8_t lz;
	uint8_t tag;
};

/* The sampled fingerprints of one candidate row size, shared by all sizes. */
struct al_table {
	uint64_t row;                   /* 0: unused */
	unsigned level;                 /* keys with fewer leading zeros are not sampled */
	struct al_entry *slot;
	uint32_t mask;                  /* slots - 1; slot NULL before the first insert */
	uint32_t count;
	int refs;
};

/* A candidate row of one copy size: its pass state and its evidence ring. */
struct al_cand {
	uint64_t row;
	uint64_t q;                     /* units per row */
	uint64_t kq;                    /* AL_K^q */
	uint64_t salt;
	int table;
	int cls;
	uint64_t next;                  /* unit index where the current row ends */
	uint64_t start;                 /* prefix at the current row's start */
	uint32_t cur_n, cur_k;          /* this copy: sampled rows, repeats */
	uint32_t ring_n[AL_RING];
	uint32_t ring_k[AL_RING];
};

/* What a window of copies says about one size. */
struct al_verdict {
	enum al_kind kind;
	double best;                    /* b: best lower bound of a repeat rate */
	uint64_t row;                   /* FOUND: the row */
	uint32_t n, k;                  /* its sampled rows and repeats in the window */
	uint64_t next;                  /* the next larger candidate (0: none) */
	uint32_t next_n, next_k;
};

/* One copy size and its candidates (ascending rows). */
struct al_size {
	uint64_t size;
	uint64_t bytes;                 /* observed bytes of this size */
	uint64_t copies;                /* observed copies */
	uint64_t settle_base;           /* copies when the settling began */
	uint64_t last_seq;              /* seq of its latest copy */
	uint32_t shares;                /* slots of sizes whose rows it repeated, or they its */
	int slot;
	int ncands;
	int nclasses;
	uint64_t unit[AL_PASSES];      /* hashing unit of each pass */
	unsigned ring_pos, ring_len;
	struct al_verdict found;        /* kind AL_FOUND once a row was found */
	struct al_verdict last;         /* the latest verdict */
	struct al_cand cand[AL_SIZE_CANDS];
};

_Static_assert(sizeof(struct al_size) <= 13 * 1024, "the size record bound stated in autolayout.c");

/* The module's state: one per process, defined in autolayout_sizes.c. */
struct al_state {
	pthread_mutex_t lock;
	enum autolayout_mode mode;
	atomic_int state;               /* enum autolayout_state */
	atomic_uint_fast64_t offered;   /* bytes of copies of at least MIN_ROW offered */
	atomic_uint_fast64_t seen;      /* bytes of the copies observed */
	atomic_uint_fast64_t calls;     /* copies of at least MIN_ROW offered */
	atomic_uint_fast64_t base_offered, base_seen, free_bytes;  /* share rule */
	atomic_int share_on;
	uint64_t observed_bytes, observed_copies, hashed_bytes;
	uint32_t seq;                   /* observed copy number */
	uint64_t settle_seq;            /* seq when the settling began, 0: none */
	uint64_t evict_calls;           /* calls when a size last gave way, 0: never */
	uint64_t slots_used;            /* table slots allocated, at most AL_SLOT_BUDGET */
	struct al_size *cur;            /* the size being observed */
	uint64_t memory;
	struct al_size *size[AL_MAX_SIZES];
	struct al_table table[AL_MAX_TABLES];
	uint64_t pbuf[AL_BLOCK];
	struct al_entry scratch[AL_CAP];
	struct layout found;            /* FOUND: the layout */
	char found_evidence[256];
};

extern struct al_state al;

/* Returns the 64-bit finaliser of MurmurHash3 of x: a well-spread key. */
static inline uint64_t al_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

#endif
