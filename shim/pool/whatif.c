/*
 * whatif: the what-if curve (whatif.h is the contract).
 *
 * Two structures. The histogram: repeat bytes per first-seen position, in
 * log-linear buckets (positions below 64 exact, then 64 buckets per power
 * of two), relaxed atomics that any thread adds to without a lock. The
 * table: open addressing with linear probing over 16-byte entries (64 bits
 * of the row's fingerprint, 0 meaning empty, and its position), guarded by
 * one mutex, kept at most half full, its pages made at once (MAP_POPULATE:
 * one system call rather than a fault per page); it starts at 64K entries
 * (the default cap) and doubles up to the memory cap, then the sampling
 * rate halves instead (an entry stays tracked while the top k bits of its
 * key are zero), in one pass that clears the entries no longer tracked and
 * puts the others back; a bitmap beside it marks the occupied slots (a row
 * whose home slot's bit is clear is new without a read of the table).
 * The slot of a key comes from its low bits, the sampling test from its
 * high bits, so the two are independent.
 *
 * Spatial sampling (SHARDS, Waldspurger et al., FAST 2015, in its
 * fixed-size form): a row is tracked when the top `shift` bits of its key
 * are zero, so each tracked row stands for 2^shift rows, and its unique
 * and repeat bytes are counted 2^shift times. A row that is not tracked
 * costs one compare of its key with the largest tracked key, no memory
 * access beyond its fingerprint.
 * The total of every sighting (T) is counted exactly; the difference
 * between T and what the sample accounts for (U + R) is added to the
 * repeats at the smallest budget when the curve is read (SHARDS-adj): the
 * rows that make most of that difference are the frequent ones, which
 * come first, so the difference belongs at the start of the curve (a
 * frequent row sampled or not moves the sample's total by its whole
 * weight). Exact, the difference is zero.
 *
 * Everything the snapshot reads (unique bytes, the total, tracked rows,
 * the sampling shift, the histogram) is atomic, so a snapshot takes no
 * lock.
 */
#include "pool/whatif_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define WHATIF_FIRST_SLOTS 65536ULL     /* the table's first size, in entries (1 MiB, the default cap) */

_Atomic uint64_t whatif_hist[WHATIF_BUCKETS];

struct whatif_state whatif = { .lock = PTHREAD_MUTEX_INITIALIZER,
			       .max_slots = WHATIF_DEFAULT_MEM / sizeof(struct whatif_entry) };

/* The bucket of position p. */
static unsigned whatif_bucket(uint64_t p)
{
	unsigned e;

	if (p < WHATIF_SUB)
		return (unsigned)p;
	e = 63U - (unsigned)__builtin_clzll(p);
	return (e - WHATIF_SUB_BITS) * WHATIF_SUB + (unsigned)(p >> (e - WHATIF_SUB_BITS));
}

/* Counts bytes of repeat at position pos in the histogram only. */
static void whatif_hist_add(uint64_t pos, uint64_t bytes)
{
	atomic_fetch_add_explicit(&whatif_hist[whatif_bucket(pos ? pos : 1)], bytes, memory_order_relaxed);
}

void whatif_repeat(uint64_t pos, uint64_t bytes)
{
	whatif_hist_add(pos, bytes);
	atomic_fetch_add_explicit(&whatif.total, bytes, memory_order_relaxed);
}

void whatif_repeat_many(const uint64_t *pos, const uint64_t *bytes, uint64_t n)
{
	uint64_t total = 0, run = 0;
	unsigned b = 0;

	for (uint64_t i = 0; i < n; i++) {
		unsigned k = whatif_bucket(pos[i] ? pos[i] : 1);

		if (run && k != b) {
			atomic_fetch_add_explicit(&whatif_hist[b], run, memory_order_relaxed);
			run = 0;
		}
		b = k;
		run += bytes[i];
		total += bytes[i];
	}
	if (run)
		atomic_fetch_add_explicit(&whatif_hist[b], run, memory_order_relaxed);
	if (total)
		atomic_fetch_add_explicit(&whatif.total, total, memory_order_relaxed);
}

void whatif_set_unobserved(void)
{
	atomic_store_explicit(&whatif.unobserved, 1, memory_order_relaxed);
	atomic_store_explicit(&whatif.estimate, 1, memory_order_relaxed);
}

void whatif_set_estimate(int on)
{
	if (on)
		atomic_store_explicit(&whatif.estimate, 1, memory_order_relaxed);
}

/* The table key of a fingerprint: 64 of its bits, never 0. */
static inline uint64_t whatif_key(const struct fp *f)
{
	return f->lo ? f->lo : 1;
}

static inline int whatif_tracked(uint64_t key, unsigned shift)
{
	return shift == 0 || (key >> (64 - shift)) == 0;
}

/* The largest key tracked at the current rate: the keys whose top shift bits are zero. */
static inline uint64_t whatif_limit(void)
{
	unsigned shift = atomic_load_explicit(&whatif.shift, memory_order_relaxed);

	return shift ? (1ULL << (64 - shift)) - 1 : UINT64_MAX;
}

/* Returns the slot holding key, or the empty slot where it belongs. */
static struct whatif_entry *whatif_find(uint64_t key)
{
	uint64_t mask = whatif.cap - 1, i = key & mask;

	while (whatif.slots[i].key != 0 && whatif.slots[i].key != key)
		i = (i + 1) & mask;
	return &whatif.slots[i];
}

/* The bytes of a table of cap entries: the entries, then a bit per entry (cap >= 64). */
static uint64_t whatif_table_size(uint64_t cap)
{
	return cap * sizeof(struct whatif_entry) + cap / 8;
}

/*
 * A zeroed table of cap entries and its bitmap: a mapping with its pages
 * made at once (MAP_POPULATE: one call instead of a fault for each page as
 * the first rows land on them all), or NULL.
 */
static struct whatif_entry *whatif_table_new(uint64_t cap)
{
	void *p = mmap(NULL, whatif_table_size(cap), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Frees a table of cap entries. */
static void whatif_table_free(struct whatif_entry *t, uint64_t cap)
{
	if (t)
		munmap(t, whatif_table_size(cap));
}

/* Writes an entry into the empty slot e and marks it occupied; empties slot i. */
static void whatif_put(struct whatif_entry *e, uint64_t key, uint64_t pos)
{
	*e = (struct whatif_entry){ key, pos };
	whatif.occ[(e - whatif.slots) >> 6] |= 1ULL << ((e - whatif.slots) & 63);
}

static void whatif_clear(uint64_t i)
{
	whatif.slots[i].key = 0;
	whatif.occ[i >> 6] &= ~(1ULL << (i & 63));
}

/*
 * Whether key may be in the table: its home slot holds an entry. Linear
 * probing puts a key at its home slot or after it, every slot between
 * occupied, so a key whose home slot is empty is not there. One bit of a
 * bitmap a core's cache holds, where the slot itself would be a miss.
 */
static inline int whatif_may_hold(uint64_t key)
{
	uint64_t i = key & (whatif.cap - 1);

	return whatif.slots && (whatif.occ[i >> 6] >> (i & 63)) & 1;
}

/* Moves every entry into a table of cap entries. Returns 0 or -1 (no memory). */
static int whatif_rehash(uint64_t cap)
{
	struct whatif_entry *old = whatif.slots, *s;
	uint64_t i, oldcap = whatif.cap;

	s = whatif_table_new(cap);
	if (!s)
		return -1;
	whatif.slots = s;
	whatif.occ = (uint64_t *)(s + cap);
	whatif.cap = cap;
	atomic_store_explicit(&whatif.table_bytes, whatif_table_size(cap), memory_order_relaxed);
	for (i = 0; old && i < oldcap; i++)
		if (old[i].key != 0)
			whatif_put(whatif_find(old[i].key), old[i].key, old[i].pos);
	whatif_table_free(old, oldcap);
	return 0;
}

/*
 * The entries of slots [from, to) of the halving pass: those whose key is
 * above lim are cleared; one that stays and is not at its home slot is put
 * back from there, which lands it at its own slot or an earlier one the
 * pass cleared (every slot before it in the pass has settled). The slots
 * are found a bitmap word at a time, each word read once when the pass
 * reaches it: an entry only ever moves to a slot the pass has passed, so
 * the bits of the word still ahead are the ones read. Returns the entries
 * dropped.
 */
static uint64_t whatif_halve_range(uint64_t from, uint64_t to, uint64_t lim)
{
	const struct whatif_entry *slots = whatif.slots;
	uint64_t mask = whatif.cap - 1, dropped = 0;

	for (uint64_t w = from >> 6; w << 6 < to; w++) {
		uint64_t bits = whatif.occ[w];

		if (w == from >> 6)
			bits &= ~0ULL << (from & 63);
		if ((w + 1) << 6 > to)
			bits &= ~0ULL >> (64 - (to & 63));
		while (bits) {
			uint64_t i = (w << 6) | (uint64_t)__builtin_ctzll(bits);
			struct whatif_entry e = slots[i];

			bits &= bits - 1;
			if (e.key > lim) {
				whatif_clear(i);
				dropped++;
			} else if ((e.key & mask) != i) {
				whatif_clear(i);
				whatif_put(whatif_find(e.key), e.key, e.pos);
			}
		}
	}
	return dropped;
}

/*
 * Halves the sampling rate and drops the entries that no longer qualify,
 * in one pass over the table that starts after an empty slot (there is
 * one: the table is at most half full), so that no cluster is entered in
 * its middle (whatif_halve_range). No entry moves past one not yet
 * examined.
 */
static void whatif_halve_rate(void)
{
	unsigned shift = atomic_load_explicit(&whatif.shift, memory_order_relaxed) + 1;
	uint64_t start = 0, lim;

	if (shift > 63)
		return;
	atomic_store_explicit(&whatif.shift, shift, memory_order_relaxed);
	lim = whatif_limit();
	while (whatif.slots[start].key != 0)
		start++;
	whatif.used -= whatif_halve_range(start + 1, whatif.cap, lim);
	whatif.used -= whatif_halve_range(0, start, lim);
	atomic_store_explicit(&whatif.tracked, whatif.used, memory_order_relaxed);
}

/* Keeps the table at most half full: doubles it, or past the cap halves the rate. */
static void whatif_make_room(void)
{
	while (whatif.used * 2 > whatif.cap) {
		if (whatif.cap < whatif.max_slots && whatif_rehash(whatif.cap * 2) == 0)
			continue;
		if (atomic_load_explicit(&whatif.shift, memory_order_relaxed) >= 63)
			return;
		whatif_halve_rate();
	}
}

/*
 * Observes one row under the lock, standing for 2^wshift rows (a row of a
 * sparse observation); returns its position. A kept row (WHATIF_KEPT) that
 * is new gets its position and stays out of the table.
 */
static inline __attribute__((always_inline)) uint64_t
whatif_observe_one(uint64_t key, uint64_t row, unsigned wshift, int kept)
{
	unsigned shift = atomic_load_explicit(&whatif.shift, memory_order_relaxed);
	uint64_t scaled = row << (shift + wshift);
	uint64_t u = atomic_load_explicit(&whatif.unique, memory_order_relaxed);
	struct whatif_entry *e = NULL;

	if (!whatif_tracked(key, shift))
		return u;
	if (whatif_may_hold(key)) {
		e = whatif_find(key);
		if (e->key == key) {
			whatif_hist_add(e->pos, scaled);
			return e->pos;
		}
	} else if (!kept) {
		e = &whatif.slots[key & (whatif.cap - 1)];      /* empty: the key's home */
	}
	u += scaled;
	atomic_store_explicit(&whatif.unique, u, memory_order_relaxed);
	if (kept)
		return u;
	whatif_put(e, key, u);
	whatif.used++;
	whatif_make_room();
	return u;
}

/*
 * The rows of whatif_observe, under the lock: a row not tracked at the
 * current rate costs a compare (its position is the unique bytes so far);
 * a tracked one is looked up (whatif_observe_one, which may halve the
 * rate). has_kind and has_pos say whether kind and pos are given; the
 * function is inlined with them constant, so that the loop of untracked
 * rows tests neither. Returns the rows skipped.
 */
static inline __attribute__((always_inline)) uint64_t
whatif_observe_rows(const struct fp *fps, const uint8_t *kind, uint64_t nrows, uint64_t row, uint64_t *pos,
		    int has_kind, int has_pos)
{
	uint64_t i, p, lim = whatif_limit(), u = atomic_load_explicit(&whatif.unique, memory_order_relaxed);
	uint64_t skipped = 0;

	for (i = 0; i < nrows; i++) {
		if (has_kind && kind[i] == WHATIF_SKIP) {
			skipped++;
			continue;
		}
		if (fps[i].lo > lim) {  /* not tracked (a zero lo is tracked, as key 1) */
			if (has_pos)
				pos[i] = u;
			continue;
		}
		p = whatif_observe_one(whatif_key(&fps[i]), row, 0, has_kind && kind[i] == WHATIF_KEPT);
		lim = whatif_limit();
		u = atomic_load_explicit(&whatif.unique, memory_order_relaxed);
		if (has_pos)
			pos[i] = p;
	}
	return skipped;
}

/* Makes the table when there is none. Returns 0, or -1 (no table: observe nothing). */
static int whatif_table_ready(void)
{
	if (!whatif.slots && !whatif.failed) {
		uint64_t first = WHATIF_FIRST_SLOTS < whatif.max_slots ? WHATIF_FIRST_SLOTS : whatif.max_slots;

		whatif.failed = whatif_rehash(first) != 0;
	}
	return whatif.failed ? -1 : 0;
}

/* Whether some row of kind[] would enter the table (kept rows and hits never do). */
static int whatif_needs_table(const uint8_t *kind, uint64_t nrows)
{
	return !kind || memchr(kind, WHATIF_OBSERVE, nrows) != NULL;
}

/*
 * Rows are counted in the total of sightings all at once. A copy of kept
 * rows and hits alone makes no table: kept rows new to it stay out.
 */
void whatif_observe(const struct fp *fps, const uint8_t *kind, uint64_t nrows, uint64_t row,
		    uint64_t *pos)
{
	uint64_t skipped;

	if (nrows == 0 || row == 0) {
		if (pos)
			memset(pos, 0, nrows * sizeof(*pos));
		return;
	}
	pthread_mutex_lock(&whatif.lock);
	if (whatif_needs_table(kind, nrows))
		(void)whatif_table_ready();
	if (pos && (kind || whatif.failed))
		memset(pos, 0, nrows * sizeof(*pos));   /* skipped rows' positions are 0 */
	if (whatif.failed)
		goto out_unlock;
	if (kind)
		skipped = pos ? whatif_observe_rows(fps, kind, nrows, row, pos, 1, 1) :
				whatif_observe_rows(fps, kind, nrows, row, NULL, 1, 0);
	else
		skipped = pos ? whatif_observe_rows(fps, NULL, nrows, row, pos, 0, 1) :
				whatif_observe_rows(fps, NULL, nrows, row, NULL, 0, 0);
	atomic_fetch_add_explicit(&whatif.total, (nrows - skipped) * row, memory_order_relaxed);
	atomic_store_explicit(&whatif.tracked, whatif.used, memory_order_relaxed);
out_unlock:
	pthread_mutex_unlock(&whatif.lock);
}

void whatif_adopt(const struct fp *fps, const uint64_t *pos, uint64_t n)
{
	if (n == 0)
		return;
	pthread_mutex_lock(&whatif.lock);
	for (uint64_t i = 0; i < n && whatif_table_ready() == 0; i++) {
		uint64_t key = whatif_key(&fps[i]);
		struct whatif_entry *e;

		if (!whatif_tracked(key, atomic_load_explicit(&whatif.shift, memory_order_relaxed)))
			continue;
		e = whatif_find(key);
		if (e->key == key)
			continue;
		whatif_put(e, key, pos[i]);
		whatif.used++;
		whatif_make_room();
	}
	atomic_store_explicit(&whatif.tracked, whatif.used, memory_order_relaxed);
	pthread_mutex_unlock(&whatif.lock);
}

void whatif_observe_weighted(const struct fp *fps, uint64_t n, uint64_t row)
{
	pthread_mutex_lock(&whatif.lock);
	(void)whatif_table_ready();
	for (uint64_t i = 0; i < n && !whatif.failed; i++)
		if (fps[i].lo <= whatif_limit())
			whatif_observe_one(whatif_key(&fps[i]), row, WHATIF_SPARSE_SHIFT, 0);
	atomic_store_explicit(&whatif.tracked, whatif.used, memory_order_relaxed);
	pthread_mutex_unlock(&whatif.lock);
}

void whatif_count_sparse(uint64_t bytes)
{
	atomic_store_explicit(&whatif.sparse, 1, memory_order_relaxed);
	atomic_store_explicit(&whatif.estimate, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&whatif.total, bytes, memory_order_relaxed);
}

void whatif_setup(uint64_t max_bytes)
{
	uint64_t slots;

	if (max_bytes == 0)
		max_bytes = WHATIF_DEFAULT_MEM;
	if (max_bytes < WHATIF_MIN_MEM)
		max_bytes = WHATIF_MIN_MEM;
	slots = max_bytes / sizeof(struct whatif_entry);
	whatif_reset();
	/* the largest power of two that fits */
	whatif.max_slots = 1ULL << (63 - __builtin_clzll(slots));
}

void whatif_reset(void)
{
	unsigned k;

	pthread_mutex_init(&whatif.lock, NULL);
	whatif_table_free(whatif.slots, whatif.cap);
	whatif.slots = NULL;
	whatif.occ = NULL;
	whatif.cap = 0;
	whatif.used = 0;
	whatif.failed = 0;
	atomic_store(&whatif.shift, 0);
	atomic_store(&whatif.unique, 0);
	atomic_store(&whatif.total, 0);
	atomic_store(&whatif.tracked, 0);
	atomic_store(&whatif.estimate, 0);
	atomic_store(&whatif.sparse, 0);
	atomic_store(&whatif.unobserved, 0);
	atomic_store(&whatif.table_bytes, 0);
	for (k = 0; k < WHATIF_BUCKETS; k++)
		atomic_store_explicit(&whatif_hist[k], 0, memory_order_relaxed);
}
