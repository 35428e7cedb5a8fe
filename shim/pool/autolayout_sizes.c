/*
 * autolayout_sizes: copy sizes, candidate rows and the tables of sampled
 * row fingerprints (autolayout_sizes.h is the contract and says how
 * candidates are chosen and rows sampled).
 *
 * A table is an open-addressed hash of 8-byte entries keyed by 32 bits of
 * a row's mixed fingerprint, at most half full; it grows by doubling up to
 * AL_SLOTS_MAX, and purges in place (through al.scratch) when its level
 * rises. Divisors are found by trial division up to AL_TRIAL_MAX.
 */
#include "pool/autolayout_sizes.h"

#include <stdlib.h>
#include <string.h>

struct al_state al = { .lock = PTHREAD_MUTEX_INITIALIZER };

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

/* ---- fingerprint tables ------------------------------------------------- */

/* Returns the entry of id, or NULL and in *hole the empty slot where it would go. */
struct al_entry *al_find(struct al_table *t, uint32_t id, struct al_entry **hole)
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
void al_insert(struct al_table *t, uint32_t id, unsigned lz, int origin, struct al_entry *hole)
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
 * Chooses the candidates of s (see autolayout_sizes.h) and their classes (one
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
struct al_size *al_size_get(uint64_t n)
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

void al_sizes_clear(int holder_gone)
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
}

void al_size_sort(struct al_size **by, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && by[j]->bytes > by[j - 1]->bytes; j--) {
			struct al_size *t = by[j];

			by[j] = by[j - 1];
			by[j - 1] = t;
		}
}
