/*
 * autolayout: finds the row size of a program's host-to-device copies from
 * their content (autolayout.h is the contract; this comment says how).
 *
 * Candidates. Each copy size n seen (at most AL_MAX_SIZES at a time; when
 * all are taken, the one with the fewest bytes and no row gives way) gets
 * its candidate rows: the divisors of n of at least AUTOLAYOUT_MIN_ROW bytes,
 * n itself included. When there are more than AL_SIZE_CANDS, the ones kept
 * are those whose batch (n / row) is at most 64, then those whose batch is
 * a power of two, then a multiple of 8, then the rest, by batch ascending.
 *
 * Hashing. A row's fingerprint must not depend on where the row sits in the
 * copy, nor on the copy's size (the last, partial batch of an epoch holds
 * the same samples), and hashing each candidate's rows separately would
 * read the copy once per candidate. So each row size c has a hashing unit
 * u(c) that depends on c alone (64 bytes when 64 divides c, else the odd
 * part of c doubled up to at least 64 bytes: 147 for 2352 = 16 * 147, 3079
 * for a prime 3079), and a row's fingerprint is the Horner polynomial of
 * the XXH3-64 hashes of its units: P[e] - P[e-q] * K^q over the prefix
 * P[m] = P[m-1] * K + h(unit m) (mod 2^64) of the copy. One pass per unit
 * reads the copy once and gives every candidate of that unit all its row
 * fingerprints for a multiply each. A size gets at most AL_PASSES units;
 * a candidate whose unit finds no pass shares the pass whose unit has the
 * largest common divisor with it (at least AL_MIN_UNIT bytes), its
 * fingerprints then depending on the size, or is dropped; a second pass
 * is not made for a single candidate or for candidates that only make
 * batches of more than AL_PLAUSIBLE_BATCH rows. The passes read at most
 * AL_WINDOW bytes of a copy (its start); a candidate row longer than that is
 * represented by the window, a prefix of its first row. These fingerprints
 * are evidence only (64 bits, fixed keys): the pool fingerprints what it
 * serves.
 *
 * Sampling. Per row size, a table keeps the rows seen whose mixed key has
 * at least `level` leading zeros; a new table starts at the level where
 * about AL_SAMPLE_ROWS rows of one copy are sampled, and when it holds
 * AL_CAP rows the level rises (the share sampled halves) and the rows no
 * longer sampled go. A row is sampled or not by its whole content, and the
 * level only rises, so a sampled row that comes back was kept when first
 * seen: its repeat is always noticed. No row is selected by its first
 * bytes.
 *
 * Evidence. A sampled row seen in an earlier copy is a repeat. A row seen
 * earlier in the same copy (an all-black block, a padding run) and a row
 * already repeated AL_HOT times are no evidence at all: so the blocks of
 * black borders, which come back in every copy, are not taken for samples
 * that come back each epoch. Each copy size keeps, per candidate, the
 * sampled rows and repeats of its last AL_RING copies. A verdict over the
 * last K copies (K = 1, 2, 4, ...: the most recent evidence first; all
 * candidates over the same copies, so a window that straddles the start of
 * the second epoch dilutes them alike) takes b, the best lower bound
 * (Wilson, z^2 = AL_Z2) of a candidate's repeat rate, and finds the row
 * when b is at least AL_R_MIN times the share of bytes observed and some
 * candidate is "high" (rate >= AL_THETA * b, lower bound >= AL_THETA_LO * b,
 * at least AL_MIN_K repeats) while every larger one is "low" (upper bound
 * < AL_THETA_LO * b, or a multiple of a low one: a row that repeats is made
 * of parts that repeat). The row is the largest high candidate. Cut at the
 * true row size, a reshuffled dataset repeats from the first copy of the
 * second epoch, and so do the rows of its divisors, while a larger cut
 * spans samples whose neighbours change, and a smaller one that does not
 * divide it repeats at most half as often (its phase in the sample
 * changes): so the first copy of the second epoch usually decides.
 *
 * Decision. Once a size that carries at least 1/AL_SPEC_SHARE of the
 * observed bytes has a row, the settling begins: every other size with that
 * share, seen in the last AL_RECENT copies, gets AL_SETTLE copies to find its
 * own (another family: masks beside images, another weight buffer), unless
 * it repeated rows of a size with a row or comes at most half as often as
 * one (a partial batch); AL_SETTLE_MAX copies at most. The layout is then
 * the rows of the sizes with that share. NOTHING is stated when
 * AL_NOTHING_COPIES copies and AL_NOTHING_BYTES bytes went by with no repeat
 * at any size; it is not final: the module then observes 1/AL_SHARE of the
 * bytes and may still find rows.
 *
 * Bounds.
 *  - Bytes hashed per observed copy: at most AL_PASSES * AL_WINDOW (2 x
 *    16 MiB); one pass over min(n, AL_WINDOW) for most sizes.
 *  - Row fingerprints per observed copy: min(n, AL_WINDOW) / c per
 *    candidate c (a multiply and a mix each), of which about AL_SAMPLE_ROWS
 *    or fewer are looked up in the table.
 *  - Memory: the table slots, at most AL_SLOT_BUDGET of 8 bytes (2 MiB; a
 *    recurring size takes room from sizes with fewer bytes, else a table
 *    that may not grow samples fewer rows), the size records, AL_MAX_SIZES
 *    of about 13 KiB, and 50 KiB of static table headers and scratch
 *    (autolayout_result reports the bytes allocated).
 *  - POOL mode observes every copy until a decision and none after FOUND;
 *    after NOTHING, and always in SUGGEST mode, it observes a copy only while
 *    the bytes of the copies observed stay under 1/AL_SHARE of the bytes
 *    offered (SUGGEST mode: plus AL_SUGGEST_FREE, so that short runs are
 *    seen whole).
 *
 * Locking: one mutex, taken with trylock by observers (a busy module skips
 * the copy); the state is read without it on the fast path.
 */
#include "pool/autolayout.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

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

_Static_assert(sizeof(struct al_size) <= 13 * 1024, "the size record bound stated above");

static struct {
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
} al = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Returns the 64-bit finaliser of MurmurHash3 of x: a well-spread key. */
static uint64_t al_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* Returns AL_K^e modulo 2^64. */
static uint64_t al_kpow(uint64_t e)
{
	uint64_t r = 1, b = AL_K;

	while (e) {
		if (e & 1)
			r *= b;
		b *= b;
		e >>= 1;
	}
	return r;
}

static uint64_t al_gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Square root by Newton's method (the preloaded object does not link libm). */
static double al_sqrt(double x)
{
	double r;

	if (x <= 0)
		return 0;
	r = x > 1 ? x : 1;
	for (int i = 0; i < 200; i++) {
		double nr = 0.5 * (r + x / r);

		if (nr >= r)
			break;
		r = nr;
	}
	return r;
}

/* Wilson score bound (z^2 = AL_Z2) of the rate k/n: the lower one, or the upper one when upper. */
static double al_wilson(uint32_t k, uint32_t n, int upper)
{
	double z2 = AL_Z2, dn = n, p, center, spread;

	if (n == 0)
		return upper ? 1.0 : 0.0;
	p = (double)k / dn;
	center = p + z2 / (2 * dn);
	spread = al_sqrt(z2 * (p * (1 - p) / dn + z2 / (4 * dn * dn)));
	return (upper ? center + spread : center - spread) / (1 + z2 / dn);
}

/* ---- fingerprint tables ------------------------------------------------- */

/* Returns the entry of id, or NULL and in *hole the empty slot where it would go. */
static struct al_entry *al_find(struct al_table *t, uint32_t id, struct al_entry **hole)
{
	*hole = NULL;
	if (!t->slot)
		return NULL;
	for (uint32_t i = id & t->mask;; i = (i + 1) & t->mask) {
		if (t->slot[i].id == id)
			return &t->slot[i];
		if (t->slot[i].id == 0) {
			*hole = &t->slot[i];
			return NULL;
		}
	}
}

/* Places e in a table with room (no such id in it). */
static void al_place(struct al_entry *slot, uint32_t mask, const struct al_entry *e)
{
	uint32_t i = e->id & mask;

	while (slot[i].id)
		i = (i + 1) & mask;
	slot[i] = *e;
}

static int al_budget(uint64_t more);

/*
 * Rebuilds t with nslots slots, keeping the entries still sampled at its
 * level. Returns 0, or -1 when out of memory or of slot budget (t unchanged).
 */
static int al_rebuild(struct al_table *t, uint32_t nslots)
{
	struct al_entry *slot;
	uint32_t count = 0;

	if (t->slot && nslots == t->mask + 1) {        /* a purge: in place, through scratch */
		for (uint32_t i = 0; i <= t->mask; i++)
			if (t->slot[i].id && t->slot[i].lz >= t->level && count < AL_CAP)
				al.scratch[count++] = t->slot[i];
		memset(t->slot, 0, (size_t)nslots * sizeof(*slot));
		for (uint32_t i = 0; i < count; i++)
			al_place(t->slot, t->mask, &al.scratch[i]);
		t->count = count;
		return 0;
	}
	if (al_budget(nslots - (t->slot ? t->mask + 1 : 0)) != 0)
		return -1;
	slot = calloc(nslots, sizeof(*slot));
	if (!slot)
		return -1;
	if (t->slot) {
		for (uint32_t i = 0; i <= t->mask; i++) {
			if (t->slot[i].id && t->slot[i].lz >= t->level) {
				al_place(slot, nslots - 1, &t->slot[i]);
				count++;
			}
		}
		free(t->slot);
		al.memory -= (uint64_t)(t->mask + 1) * sizeof(*slot);
		al.slots_used -= t->mask + 1;
	}
	t->slot = slot;
	t->mask = nslots - 1;
	t->count = count;
	al.memory += (uint64_t)nslots * sizeof(*slot);
	al.slots_used += nslots;
	return 0;
}

/*
 * Keeps a row first seen in this copy, at hole (from al_find) when the table
 * stays as it is. When t holds AL_CAP rows, or holds half its slots and may
 * not grow (AL_SLOTS_MAX, the slot budget), the share sampled halves.
 */
static void al_insert(struct al_table *t, uint32_t id, unsigned lz, int origin,
		      struct al_entry *hole)
{
	struct al_entry e = { .id = id, .seq = (uint16_t)al.seq, .lz = (uint8_t)lz,
			      .tag = (uint8_t)(origin << 4) };

	if (!t->slot && al_rebuild(t, AL_SLOTS_MIN) != 0)
		return;
	for (;;) {
		int full = (uint64_t)(t->count + 1) * 2 > (uint64_t)t->mask + 1;

		if (t->count < AL_CAP && !full)
			break;
		hole = NULL;
		if (t->count < AL_CAP && t->mask + 1 < AL_SLOTS_MAX &&
		    al_rebuild(t, (t->mask + 1) * 2) == 0)
			continue;
		if (t->level >= 64)
			return;
		t->level++;
		al_rebuild(t, t->mask + 1);
	}
	if (lz < t->level)
		return;
	if (hole)
		*hole = e;
	else
		al_place(t->slot, t->mask, &e);
	t->count++;
}

/*
 * Returns the table index for row (shared), or -1 when none is left. A new
 * table samples about AL_SAMPLE_ROWS of the rows of one copy of the size
 * that makes it (rows per copy of it): a power-of-two share of the keys.
 */
static int al_table_get(uint64_t row, uint64_t rows)
{
	int free_slot = -1;

	for (int i = 0; i < AL_MAX_TABLES; i++) {
		if (al.table[i].row == row) {
			al.table[i].refs++;
			return i;
		}
		if (al.table[i].row == 0 && free_slot < 0)
			free_slot = i;
	}
	if (free_slot >= 0) {
		struct al_table *t = &al.table[free_slot];

		memset(t, 0, sizeof(*t));
		t->row = row;
		t->refs = 1;
		for (; rows > AL_SAMPLE_ROWS; rows >>= 1)
			t->level++;
	}
	return free_slot;
}

/* Drops a reference to table i; frees it with the last one. */
static void al_table_put(int i)
{
	struct al_table *t = &al.table[i];

	if (--t->refs > 0)
		return;
	if (t->slot) {
		al.memory -= (uint64_t)(t->mask + 1) * sizeof(*t->slot);
		al.slots_used -= t->mask + 1;
	}
	free(t->slot);
	memset(t, 0, sizeof(*t));
}

/* ---- candidates of a copy size ------------------------------------------ */

/* One divisor of a size, with the order in which candidates are kept. */
struct al_div {
	uint64_t row;
	uint64_t batch;                 /* size / row */
	int tier;
};

/* Returns the tier of a batch count: 0 small, 1 power of two, 2 multiple of 8, 3 other. */
static int al_tier(uint64_t batch)
{
	if (batch <= 64)
		return 0;
	if ((batch & (batch - 1)) == 0)
		return 1;
	return batch % 8 == 0 ? 2 : 3;
}

static int al_div_cmp(const void *pa, const void *pb)
{
	const struct al_div *a = pa, *b = pb;

	if (a->tier != b->tier)
		return a->tier < b->tier ? -1 : 1;
	return a->batch < b->batch ? -1 : a->batch > b->batch;
}

static int al_cand_cmp(const void *pa, const void *pb)
{
	const struct al_cand *a = pa, *b = pb;

	return a->row < b->row ? -1 : a->row > b->row;
}

/*
 * Writes the divisors of n of at least AUTOLAYOUT_MIN_ROW into d (at most
 * AL_MAX_DIVISORS; all is scratch space for as many) and returns their count. Factors are found by trial
 * division up to AL_TRIAL_MAX; a cofactor left over is taken as prime.
 */
static int al_divisors(uint64_t n, struct al_div *d, uint64_t *all)
{
	uint64_t prime[64];
	unsigned exp[64];
	int np = 0, nall = 1, nd = 0;
	uint64_t m = n;

	for (uint64_t p = 2; p <= AL_TRIAL_MAX && p * p <= m; p += (p == 2 ? 1 : 2)) {
		if (m % p)
			continue;
		prime[np] = p;
		exp[np] = 0;
		while (m % p == 0) {
			m /= p;
			exp[np]++;
		}
		np++;
	}
	if (m > 1) {
		prime[np] = m;
		exp[np++] = 1;
	}
	all[0] = 1;
	for (int i = 0; i < np; i++) {
		int base = nall;
		uint64_t f = 1;

		for (unsigned e = 1; e <= exp[i]; e++) {
			f *= prime[i];
			for (int j = 0; j < base && nall < AL_MAX_DIVISORS; j++)
				all[nall++] = all[j] * f;
		}
	}
	for (int i = 0; i < nall; i++) {
		if (all[i] < AUTOLAYOUT_MIN_ROW || n % all[i])
			continue;
		d[nd].row = all[i];
		d[nd].batch = n / all[i];
		d[nd].tier = al_tier(d[nd].batch);
		nd++;
	}
	return nd;
}

/*
 * Returns the hashing unit of candidate row c: 64 when 64 divides c, else
 * the odd part of c doubled until it is at least 64. It depends on c alone,
 * so a row's fingerprint is the same in copies of every size.
 */
static uint64_t al_unit(uint64_t c)
{
	unsigned a = 0;
	uint64_t u;

	while (a < 6 && !(c >> a & 1))
		a++;
	if (a >= 6)
		return 64;
	u = c >> a;
	while (u < AL_MIN_UNIT)
		u <<= 1;
	return u;
}

/*
 * Chooses the candidates of s (see the file comment) and their classes (one
 * per hashing unit, at most AL_PASSES; a second class is not worth a pass
 * when it has one candidate, or none that makes batches of at most
 * AL_PLAUSIBLE_BATCH rows), and takes their tables. Returns the number of
 * candidates.
 */
static int al_size_candidates(struct al_size *s)
{
	struct al_div *d = malloc(AL_MAX_DIVISORS * (sizeof(*d) + sizeof(uint64_t)));
	int nd, count[AL_PASSES] = { 0 }, plausible[AL_PASSES] = { 0 }, keep = 0;

	if (!d)
		return 0;
	nd = al_divisors(s->size, d, (uint64_t *)(d + AL_MAX_DIVISORS));
	qsort(d, (size_t)nd, sizeof(*d), al_div_cmp);
	for (int i = 0; i < nd && s->ncands < AL_SIZE_CANDS; i++) {
		uint64_t c = d[i].row, u = al_unit(c);
		int cls = -1;

		for (int k = 0; k < s->nclasses; k++)
			if (s->unit[k] == u)
				cls = k;
		if (cls < 0 && s->nclasses < AL_PASSES) {
			cls = s->nclasses++;
			s->unit[cls] = u;
		}
		if (cls < 0) {                  /* no pass left: share one, with a smaller unit */
			uint64_t best = 0;

			for (int k = 0; k < s->nclasses; k++) {
				uint64_t g = al_gcd(s->unit[k], c);

				if (g >= AL_MIN_UNIT && g > best) {
					best = g;
					cls = k;
				}
			}
			if (cls < 0)
				continue;
			s->unit[cls] = best;
		}
		s->cand[s->ncands].row = c;
		s->cand[s->ncands].cls = cls;
		s->ncands++;
		count[cls]++;
	}
	free(d);
	for (int i = 0; i < s->ncands; i++)
		if (s->size / s->cand[i].row <= AL_PLAUSIBLE_BATCH)
			plausible[s->cand[i].cls] = 1;
	if (s->nclasses == 2 && (count[0] == 1 || count[1] == 1 || !plausible[0] || !plausible[1])) {
		int drop = (count[1] == 1 || !plausible[1]) ? 1 : 0;

		s->unit[0] = s->unit[1 - drop];
		s->nclasses = 1;
		for (int i = 0; i < s->ncands; i++)
			if (s->cand[i].cls != drop)
				s->cand[keep++] = (struct al_cand){ .row = s->cand[i].row };
		s->ncands = keep;
	}
	keep = 0;
	for (int i = 0; i < s->ncands; i++) {
		uint64_t w = s->size < AL_WINDOW ? s->size : AL_WINDOW;
		int t = al_table_get(s->cand[i].row, w / s->cand[i].row);

		if (t < 0)
			continue;
		s->cand[keep] = s->cand[i];
		s->cand[keep++].table = t;
	}
	s->ncands = keep;
	qsort(s->cand, (size_t)s->ncands, sizeof(s->cand[0]), al_cand_cmp);
	for (int i = 0; i < s->ncands; i++) {
		struct al_cand *c = &s->cand[i];

		c->q = c->row / s->unit[c->cls];
		c->kq = al_kpow(c->q);
		c->salt = al_mix(c->row * 0x2545F4914F6CDD1Dull);
	}
	return s->ncands;
}

/* Frees s and drops its tables. */
static void al_size_free(struct al_size *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->ncands; i++)
		al_table_put(s->cand[i].table);
	al.memory -= sizeof(*s);
	free(s);
}

/* Frees the size in slot i and forgets it in the other sizes' shares. */
static void al_size_evict(int i)
{
	al_size_free(al.size[i]);
	al.size[i] = NULL;
	for (int j = 0; j < AL_MAX_SIZES; j++)
		if (al.size[j])
			al.size[j]->shares &= ~(1u << i);
}

/*
 * Makes room for more table slots within AL_SLOT_BUDGET by evicting the
 * sizes with the fewest bytes that have no row and fewer bytes than the
 * size being observed (so that one-off sizes cannot take the room of a
 * family that recurs). Returns 0, or -1 when no room can be made.
 */
static int al_budget(uint64_t more)
{
	while (al.slots_used + more > AL_SLOT_BUDGET) {
		int victim = -1;

		for (int i = 0; i < AL_MAX_SIZES; i++) {
			struct al_size *v = al.size[i];

			if (!v || v == al.cur || v->found.kind == AL_FOUND || !al.cur ||
			    v->bytes >= al.cur->bytes)
				continue;
			if (victim < 0 || v->bytes < al.size[victim]->bytes)
				victim = i;
		}
		if (victim < 0)
			return -1;
		al_size_evict(victim);
	}
	return 0;
}

/*
 * Returns the record of copy size n, made when new (the size with the
 * fewest bytes that has no row gives way when all are taken, at most once
 * per AL_RECENT copies), or NULL.
 */
static struct al_size *al_size_get(uint64_t n)
{
	int slot = -1;
	struct al_size *s;

	for (int i = 0; i < AL_MAX_SIZES; i++) {
		if (al.size[i] && al.size[i]->size == n)
			return al.size[i];
		if (!al.size[i] && slot < 0)
			slot = i;
	}
	if (slot < 0) {
		uint64_t calls = atomic_load_explicit(&al.calls, memory_order_relaxed);

		if (al.evict_calls && calls - al.evict_calls < AL_RECENT)
			return NULL;            /* sizes churning: one new size per AL_RECENT copies */
		for (int i = 0; i < AL_MAX_SIZES; i++) {
			if (al.size[i]->found.kind == AL_FOUND)
				continue;
			if (slot < 0 || al.size[i]->bytes < al.size[slot]->bytes)
				slot = i;
		}
		if (slot < 0)
			return NULL;
		al_size_evict(slot);
		al.evict_calls = calls ? calls : 1;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	al.memory += sizeof(*s);
	s->size = n;
	s->slot = slot;
	if (al_size_candidates(s) == 0) {
		al_size_free(s);
		return NULL;
	}
	al.size[slot] = s;
	return s;
}

/* ---- observing one copy ------------------------------------------------- */

/* Looks up one row of candidate c of s with fingerprint fp and counts the evidence. */
static void al_row(struct al_size *s, struct al_cand *c, uint64_t fp)
{
	struct al_table *t = &al.table[c->table];
	uint64_t key = al_mix(fp ^ c->salt);
	unsigned lz = key ? (unsigned)__builtin_clzll(key) : 64, origin;
	uint32_t id = (uint32_t)key ? (uint32_t)key : 1;
	struct al_entry *e, *hole;

	if (lz < t->level)
		return;
	e = al_find(t, id, &hole);
	if (!e) {
		al_insert(t, id, lz, s->slot, hole);
		if (lz >= t->level)
			c->cur_n++;     /* still sampled after the level rose, if it did */
		return;
	}
	if (e->seq == (uint16_t)al.seq)
		return;                 /* seen earlier in this copy: no evidence */
	e->seq = (uint16_t)al.seq;
	if ((e->tag & 15) >= AL_HOT)
		return;                 /* comes back all the time: no evidence */
	e->tag++;
	c->cur_n++;
	c->cur_k++;
	origin = e->tag >> 4;
	if (origin != (unsigned)s->slot) {
		s->shares |= 1u << origin;
		if (al.size[origin])
			al.size[origin]->shares |= 1u << s->slot;
	}
}

/*
 * Runs the pass of class cls of s over the copy src of n bytes: hashes its
 * units in the window and looks up the rows of the class's candidates.
 * Returns the bytes hashed.
 */
static uint64_t al_pass(struct al_size *s, int cls, const unsigned char *src, uint64_t n)
{
	uint64_t a = s->unit[cls], w = n < AL_WINDOW ? n : AL_WINDOW;
	uint64_t nunits = w / a, p = 0, m0 = 0;
	int proxy = 0;

	for (int i = 0; i < s->ncands; i++) {
		struct al_cand *c = &s->cand[i];

		if (c->cls != cls)
			continue;
		c->next = c->q;
		c->start = 0;
		if (c->q > nunits)
			proxy = 1;
	}
	if (nunits == 0) {
		p = XXH3_64bits_withSeed(src, (size_t)w, AL_SEED);
		for (int i = 0; i < s->ncands; i++)
			if (s->cand[i].cls == cls)
				al_row(s, &s->cand[i], p);
		return w;
	}
	for (; m0 < nunits; m0 += AL_BLOCK) {
		uint64_t mb = nunits - m0 < AL_BLOCK ? nunits - m0 : AL_BLOCK;
		const unsigned char *base = src + m0 * a;

		for (uint64_t i = 0; i < mb; i++) {
			p = p * AL_K + XXH3_64bits_withSeed(base + i * a, (size_t)a, AL_SEED);
			al.pbuf[i] = p;
		}
		for (int i = 0; i < s->ncands; i++) {
			struct al_cand *c = &s->cand[i];

			if (c->cls != cls || c->q > nunits)
				continue;
			while (c->next <= m0 + mb) {
				uint64_t end = al.pbuf[c->next - 1 - m0];

				al_row(s, c, end - c->start * c->kq);
				c->start = end;
				c->next += c->q;
			}
		}
	}
	if (proxy)
		for (int i = 0; i < s->ncands; i++)
			if (s->cand[i].cls == cls && s->cand[i].q > nunits)
				al_row(s, &s->cand[i], p);
	return nunits * a;
}

/* ---- verdicts ----------------------------------------------------------- */

/* Returns the least best rate that shows a repeat regime, given the share observed. */
static double al_floor(void)
{
	uint64_t offered = atomic_load_explicit(&al.offered, memory_order_relaxed);
	double q = offered ? (double)al.observed_bytes / (double)offered : 1.0;
	double f = AL_R_MIN * (q > 1 ? 1 : q);

	return f < AL_R_FLOOR ? AL_R_FLOOR : f;
}

/* Judges s over its last K copies (see the file comment) into v. */
static void al_judge(const struct al_size *s, unsigned K, double floor, struct al_verdict *v)
{
	uint32_t n[AL_SIZE_CANDS], k[AL_SIZE_CANDS];
	char low[AL_SIZE_CANDS], high[AL_SIZE_CANDS];
	int star = -1;
	double b = 0;

	memset(v, 0, sizeof(*v));
	for (int i = 0; i < s->ncands; i++) {
		n[i] = k[i] = 0;
		for (unsigned j = 1; j <= K; j++) {
			unsigned at = (s->ring_pos + AL_RING - j) % AL_RING;

			n[i] += s->cand[i].ring_n[at];
			k[i] += s->cand[i].ring_k[at];
		}
		if (k[i]) {
			double lb = al_wilson(k[i], n[i], 0);

			if (lb > b)
				b = lb;
		}
	}
	v->best = b;
	v->kind = b >= floor ? AL_UNSURE : AL_NONE;
	if (v->kind == AL_NONE)
		return;
	for (int i = 0; i < s->ncands; i++) {
		low[i] = n[i] && al_wilson(k[i], n[i], 1) < AL_THETA_LO * b;
		for (int j = 0; j < i && !low[i]; j++)
			if (low[j] && s->cand[i].row % s->cand[j].row == 0)
				low[i] = 1;
		high[i] = !low[i] && n[i] && k[i] >= AL_MIN_K &&
			  (double)k[i] >= AL_THETA * b * n[i] &&
			  al_wilson(k[i], n[i], 0) >= AL_THETA_LO * b;
		if (high[i])
			star = i;
	}
	if (star < 0)
		return;
	for (int i = star + 1; i < s->ncands; i++)
		if (!low[i])
			return;
	v->kind = AL_FOUND;
	v->row = s->cand[star].row;
	v->n = n[star];
	v->k = k[star];
	for (int i = star + 1; i < s->ncands; i++) {     /* the next multiple, else the next */
		if (s->cand[i].row % v->row == 0 || !v->next) {
			v->next = s->cand[i].row;
			v->next_n = n[i];
			v->next_k = k[i];
			if (s->cand[i].row % v->row == 0)
				break;
		}
	}
}

/* Updates the verdict of s from its most recent window that finds a row. */
static void al_size_verdict(struct al_size *s)
{
	double floor = al_floor();
	struct al_verdict v = { .kind = AL_NONE };

	for (unsigned K = 1;; K *= 2) {
		if (K > s->ring_len)
			K = s->ring_len;
		al_judge(s, K, floor, &v);
		if (v.kind == AL_FOUND || K == s->ring_len)
			break;
	}
	s->last = v;
	if (v.kind == AL_FOUND)
		s->found = v;
}

/* Returns 1 when size s carries at least 1/share of the observed bytes. */
static int al_share(const struct al_size *s, unsigned share)
{
	return s->bytes * share >= al.observed_bytes;
}

/*
 * Returns 1 when s comes at most half as often as a size whose row was
 * found (the last, partial batch of an epoch): waiting for its next copy
 * would take too long.
 */
static int al_rare(const struct al_size *s)
{
	for (int i = 0; i < AL_MAX_SIZES; i++) {
		const struct al_size *f = al.size[i];

		if (f && f != s && f->found.kind == AL_FOUND && s->copies * 2 <= f->copies)
			return 1;
	}
	return 0;
}

/*
 * Returns 1 when the settling is over: every active size (seen in the last
 * AL_RECENT copies) that could get a spec has found its row, repeated rows
 * of a size that did, comes rarely (al_rare: a partial batch), or
 * had AL_SETTLE copies.
 */
static int al_settled(void)
{
	uint32_t found = 0;

	if (al.seq - al.settle_seq >= AL_SETTLE_MAX)
		return 1;
	for (int i = 0; i < AL_MAX_SIZES; i++)
		if (al.size[i] && al.size[i]->found.kind == AL_FOUND)
			found |= 1u << i;
	for (int i = 0; i < AL_MAX_SIZES; i++) {
		struct al_size *s = al.size[i];

		if (!s || (found >> i & 1) || !al_share(s, AL_SPEC_SHARE) ||
		    s->last_seq + AL_RECENT < al.settle_seq || (s->shares & found) ||
		    al_rare(s) || s->copies - s->settle_base >= AL_SETTLE)
			continue;
		return 0;
	}
	return 1;
}

/* Appends printf-style text to buf (size cap) at *len, truncating safely. */
static void al_append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void al_append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (*len + 1 >= cap)
		return;
	va_start(ap, fmt);
	w = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (w < 0)
		return;
	*len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
}

/* Returns the percentage k/n, rounded down (0 when n is 0). */
static unsigned al_pct(uint32_t k, uint32_t n)
{
	return n ? (unsigned)((uint64_t)k * 100 / n) : 0;
}

/*
 * Fills al.found and its evidence from the sizes with a row and enough
 * bytes (largest first). Returns the number of specs.
 */
static int al_fill_found(void)
{
	struct al_size *by[AL_MAX_SIZES];
	int nby = 0;
	size_t len = 0;
	struct layout *l = &al.found;

	memset(l, 0, sizeof(*l));
	for (int i = 0; i < AL_MAX_SIZES; i++)
		if (al.size[i] && al.size[i]->found.kind == AL_FOUND && al_share(al.size[i], AL_SPEC_SHARE))
			by[nby++] = al.size[i];
	for (int i = 1; i < nby; i++)          /* most bytes first */
		for (int j = i; j > 0 && by[j]->bytes > by[j - 1]->bytes; j--) {
			struct al_size *t = by[j];

			by[j] = by[j - 1];
			by[j - 1] = t;
		}
	al.found_evidence[0] = '\0';
	for (int i = 0; i < nby && l->nrows < LAYOUT_MAX_SPECS; i++) {
		const struct al_verdict *v = &by[i]->found;
		int dup = 0;

		for (int j = 0; j < l->nrows; j++)
			dup |= l->rows[j] == v->row;
		if (dup)
			continue;
		l->rows[l->nrows++] = v->row;
		al_append(al.found_evidence, sizeof(al.found_evidence), &len,
			  "%srows of %llu bytes repeated in %u%% of %u sampled rows of %llu-byte copies",
			  len ? "; " : "", (unsigned long long)v->row, al_pct(v->k, v->n), v->n,
			  (unsigned long long)by[i]->size);
		if (v->next)
			al_append(al.found_evidence, sizeof(al.found_evidence), &len, " (%llu: %u%% of %u)",
				  (unsigned long long)v->next, al_pct(v->next_k, v->next_n), v->next_n);
	}
	for (int i = 1; i < l->nrows; i++)     /* largest row first */
		for (int j = i; j > 0 && l->rows[j] > l->rows[j - 1]; j--) {
			uint64_t t = l->rows[j];

			l->rows[j] = l->rows[j - 1];
			l->rows[j - 1] = t;
		}
	if (l->nrows) {
		layout_format(l);
		al_append(al.found_evidence, sizeof(al.found_evidence), &len,
			  "; %llu copies observed (%.1f MiB)", (unsigned long long)al.observed_copies,
			  (double)al.observed_bytes / (1 << 20));
	}
	return l->nrows;
}

/* Switches observation to the byte share (after NOTHING in POOL mode). */
static void al_share_from_now(void)
{
	atomic_store(&al.base_offered, atomic_load(&al.offered));
	atomic_store(&al.base_seen, atomic_load(&al.seen));
	atomic_store(&al.free_bytes, 0);
	atomic_store(&al.share_on, 1);
}

/* Returns 1 when some size's latest verdict saw repeats (a regime, settled or not). */
static int al_any_regime(void)
{
	for (int i = 0; i < AL_MAX_SIZES; i++)
		if (al.size[i] && al.size[i]->last.kind != AL_NONE)
			return 1;
	return 0;
}

/* Takes the module-wide decision after a copy. Returns 1 when the state changed. */
static int al_decide(void)
{
	int state = atomic_load(&al.state);

	if (state == AUTOLAYOUT_FOUND)
		return 0;
	if (!al.settle_seq) {
		for (int i = 0; i < AL_MAX_SIZES; i++) {
			struct al_size *s = al.size[i];

			if (s && s->found.kind == AL_FOUND && al_share(s, AL_SPEC_SHARE)) {
				al.settle_seq = al.seq;
				break;
			}
		}
		if (al.settle_seq)
			for (int i = 0; i < AL_MAX_SIZES; i++)
				if (al.size[i])
					al.size[i]->settle_base = al.size[i]->copies;
	}
	if (al.settle_seq) {
		if (!al_settled())
			return 0;
		if (al_fill_found()) {
			atomic_store(&al.state, AUTOLAYOUT_FOUND);
			return 1;
		}
		al.settle_seq = 0;
	}
	if (state == AUTOLAYOUT_LOOKING && al.observed_copies >= AL_NOTHING_COPIES &&
	    atomic_load(&al.offered) >= AL_NOTHING_BYTES && !al_any_regime()) {
		atomic_store(&al.state, AUTOLAYOUT_NOTHING);
		if (al.mode == AUTOLAYOUT_POOL)
			al_share_from_now();
		return 1;
	}
	return 0;
}

/* Returns 1 when the share rule lets a copy be observed now. */
static int al_wanted(void)
{
	uint64_t seen, offered;

	if (!atomic_load_explicit(&al.share_on, memory_order_relaxed))
		return 1;
	seen = atomic_load_explicit(&al.seen, memory_order_relaxed) -
	       atomic_load_explicit(&al.base_seen, memory_order_relaxed);
	offered = atomic_load_explicit(&al.offered, memory_order_relaxed) -
		  atomic_load_explicit(&al.base_offered, memory_order_relaxed);
	return seen * AL_SHARE <= offered + atomic_load_explicit(&al.free_bytes, memory_order_relaxed) * AL_SHARE;
}

int autolayout_observe(const void *src, uint64_t n)
{
	struct al_size *s;
	uint64_t hashed = 0;
	int decided;

	if (!src || n < AUTOLAYOUT_MIN_ROW ||
	    atomic_load_explicit(&al.state, memory_order_acquire) == AUTOLAYOUT_FOUND)
		return 0;
	atomic_fetch_add_explicit(&al.offered, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&al.calls, 1, memory_order_relaxed);
	if (!al_wanted() || pthread_mutex_trylock(&al.lock) != 0)
		return 0;
	if (atomic_load(&al.state) == AUTOLAYOUT_FOUND) {
		pthread_mutex_unlock(&al.lock);
		return 0;
	}
	s = al_size_get(n);
	if (!s) {
		pthread_mutex_unlock(&al.lock);
		return 0;
	}
	al.cur = s;
	al.seq++;
	if (al.seq == 0)
		al.seq = 1;
	for (int i = 0; i < s->ncands; i++)
		s->cand[i].cur_n = s->cand[i].cur_k = 0;
	for (int cls = 0; cls < s->nclasses; cls++)
		hashed += al_pass(s, cls, src, n);
	al.cur = NULL;
	for (int i = 0; i < s->ncands; i++) {
		s->cand[i].ring_n[s->ring_pos] = s->cand[i].cur_n;
		s->cand[i].ring_k[s->ring_pos] = s->cand[i].cur_k;
	}
	s->ring_pos = (s->ring_pos + 1) % AL_RING;
	if (s->ring_len < AL_RING)
		s->ring_len++;
	s->bytes += n;
	s->copies++;
	s->last_seq = al.seq;
	al.observed_bytes += n;
	al.observed_copies++;
	al.hashed_bytes += hashed;
	atomic_fetch_add_explicit(&al.seen, n, memory_order_relaxed);
	al_size_verdict(s);
	decided = al_decide();
	pthread_mutex_unlock(&al.lock);
	return decided;
}

/* ---- results and set-up ------------------------------------------------- */

void autolayout_result(struct autolayout_result *r)
{
	struct al_size *by[AL_MAX_SIZES];
	int nby = 0, regime;
	size_t len = 0;

	memset(r, 0, sizeof(*r));
	pthread_mutex_lock(&al.lock);
	r->state = (enum autolayout_state)atomic_load(&al.state);
	r->observed_copies = al.observed_copies;
	r->observed_bytes = al.observed_bytes;
	r->hashed_bytes = al.hashed_bytes;
	r->memory = al.memory;
	for (int i = 0; i < AL_MAX_SIZES; i++)
		if (al.size[i])
			by[nby++] = al.size[i];
	for (int i = 1; i < nby; i++)
		for (int j = i; j > 0 && by[j]->bytes > by[j - 1]->bytes; j--) {
			struct al_size *t = by[j];

			by[j] = by[j - 1];
			by[j - 1] = t;
		}
	for (int i = 0; i < nby && i < AUTOLAYOUT_MAX_SIZES; i++) {
		r->sizes[i].size = by[i]->size;
		r->sizes[i].bytes = by[i]->bytes;
		r->sizes[i].row = by[i]->found.kind == AL_FOUND ? by[i]->found.row : 0;
		r->nsizes++;
	}
	regime = al_any_regime();
	if (r->state == AUTOLAYOUT_FOUND) {
		r->layout = al.found;
		memcpy(r->evidence, al.found_evidence, sizeof(r->evidence));
	} else if (r->state == AUTOLAYOUT_NOTHING) {
		al_append(r->evidence, sizeof(r->evidence), &len,
			  "no row size repeated in %llu copies (%.1f MiB observed): every copy is new; "
			  "host-side random augmentation is the usual cause",
			  (unsigned long long)al.observed_copies, (double)al.observed_bytes / (1 << 20));
	} else {
		al_append(r->evidence, sizeof(r->evidence), &len,
			  "%s in %llu copies (%.1f MiB observed)%s",
			  regime ? "rows repeat, the row size is not settled yet" : "no row repeated yet",
			  (unsigned long long)al.observed_copies, (double)al.observed_bytes / (1 << 20),
			  regime ? "" : "; rows of a reshuffled dataset repeat from the second epoch on");
	}
	pthread_mutex_unlock(&al.lock);
}

/* Frees the state under the lock (held), or forgets it when holder_gone. */
static void al_clear(int holder_gone)
{
	for (int i = 0; i < AL_MAX_SIZES; i++) {
		if (!holder_gone)
			al_size_free(al.size[i]);
		al.size[i] = NULL;
	}
	for (int i = 0; i < AL_MAX_TABLES; i++) {
		if (!holder_gone)
			free(al.table[i].slot);
		memset(&al.table[i], 0, sizeof(al.table[i]));
	}
	atomic_store(&al.state, AUTOLAYOUT_LOOKING);
	atomic_store(&al.offered, 0);
	atomic_store(&al.seen, 0);
	atomic_store(&al.calls, 0);
	atomic_store(&al.base_offered, 0);
	atomic_store(&al.base_seen, 0);
	atomic_store(&al.free_bytes, 0);
	atomic_store(&al.share_on, 0);
	al.observed_bytes = al.observed_copies = al.hashed_bytes = 0;
	al.seq = 0;
	al.settle_seq = 0;
	al.evict_calls = 0;
	al.slots_used = 0;
	al.cur = NULL;
	al.memory = 0;
	memset(&al.found, 0, sizeof(al.found));
	al.found_evidence[0] = '\0';
}

void autolayout_reset(void)
{
	if (pthread_mutex_trylock(&al.lock) == 0) {
		al_clear(0);
		pthread_mutex_unlock(&al.lock);
		return;
	}
	/* Held by a thread that did not survive fork: forget, and start a new lock. */
	al_clear(1);
	pthread_mutex_init(&al.lock, NULL);
}

void autolayout_setup(enum autolayout_mode mode)
{
	autolayout_reset();
	pthread_mutex_lock(&al.lock);
	al.mode = mode;
	if (mode == AUTOLAYOUT_SUGGEST) {
		atomic_store(&al.free_bytes, AL_SUGGEST_FREE);
		atomic_store(&al.share_on, 1);
	}
	pthread_mutex_unlock(&al.lock);
}
