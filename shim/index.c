/*
 * index: fingerprint -> 32-bit value, open addressing with Robin Hood linear
 * probing and backward-shift deletion.
 *
 * The table is one allocation: cap keys (16 bytes each) followed by cap
 * values (8 bytes each), 24 bytes per slot with no padding. An all-zero key
 * marks an empty slot, so the all-zero fingerprint (probability 2^-128, but
 * legal) lives outside the table in ix->zero_val.
 *
 * Fingerprints are keyed, uniformly random hashes, so a key's home slot is
 * its low bits (lo & (cap - 1)); no further mixing is needed.
 *
 * Robin Hood order: along a probe run, entries are kept so that one never
 * sits farther from its home than the entries it passed would allow; a
 * lookup stops at the first entry closer to its home than the probe is, so
 * misses cost about as much as hits even at high load.
 *
 * Load bound: the table grows by doubling when one more entry would pass 7/8
 * of the slots. Right after a growth the load is just over 7/16, so host
 * memory per entry is at most 20 / (7/16) = 45.7 bytes at any count of an
 * index grown from empty (a tiny table is never below 40 B: 2 slots for 1
 * entry). index_remove_if, which drops whole slabs, shrinks the table when
 * its load falls under 7/16, restoring the bound; single removals do not
 * shrink (an index_init hint also preallocates beyond it on purpose).
 */
#include "index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define IX_MIN_CAP 2
#define IX_SLOT_BYTES (sizeof(struct fp) + sizeof(uint64_t))

/* The key array at the start of the table. */
static struct fp *ix_keys(const struct index *ix)
{
	return ix->slots;
}

/* The value array after the keys. */
static uint64_t *ix_vals(const struct index *ix)
{
	return (uint64_t *)((struct fp *)ix->slots + ix->cap);
}

/* Whether a key is all zero (an empty slot). */
static int ix_is_zero(const struct fp *k)
{
	return (k->lo | k->hi) == 0;
}

/* The home slot of a key. */
static size_t ix_home(const struct fp *k, size_t mask)
{
	return (size_t)k->lo & mask;
}

/* Entries held in the table itself (the zero key is not). */
static size_t ix_table_count(const struct index *ix)
{
	return ix->count - (ix->has_zero ? 1 : 0);
}

/* Whether n table entries fit cap slots under the 7/8 load bound. */
static int ix_fits(size_t n, size_t cap)
{
	return n <= cap / 8 * 7 + cap % 8 * 7 / 8;
}

/* The smallest power-of-two capacity that holds n entries under the bound. */
static size_t ix_cap_for(size_t n)
{
	size_t cap = IX_MIN_CAP;

	while (!ix_fits(n, cap))
		cap *= 2;
	return cap;
}

/*
 * Places key -> val starting the probe at pos with distance dist, displacing
 * richer entries (Robin Hood). The key must not be in the table and a free
 * slot must exist.
 */
static void ix_place_from(struct fp *keys, uint64_t *vals, size_t mask,
			  struct fp key, uint64_t val, size_t pos, size_t dist)
{
	for (;;) {
		if (ix_is_zero(&keys[pos])) {
			keys[pos] = key;
			vals[pos] = val;
			return;
		}
		size_t d = (pos - ix_home(&keys[pos], mask)) & mask;

		if (d < dist) {
			struct fp tk = keys[pos];
			uint64_t tv = vals[pos];

			keys[pos] = key;
			vals[pos] = val;
			key = tk;
			val = tv;
			dist = d;
		}
		pos = (pos + 1) & mask;
		dist++;
	}
}

/* Moves every entry into a fresh table of newcap slots. Returns 0 or -ENOMEM. */
static int ix_resize(struct index *ix, size_t newcap)
{
	struct fp *okeys = ix->slots, *nkeys;
	uint64_t *ovals, *nvals;
	size_t ocap = ix->cap, mask = newcap - 1;

	if (newcap > SIZE_MAX / IX_SLOT_BYTES)
		return -ENOMEM;
	nkeys = calloc(newcap, IX_SLOT_BYTES);
	if (!nkeys)
		return -ENOMEM;
	nvals = (uint64_t *)(nkeys + newcap);
	if (okeys) {
		ovals = ix_vals(ix);
		for (size_t i = 0; i < ocap; i++)
			if (!ix_is_zero(&okeys[i]))
				ix_place_from(nkeys, nvals, mask, okeys[i], ovals[i],
					      ix_home(&okeys[i], mask), 0);
	}
	free(ix->slots);
	ix->slots = nkeys;
	ix->cap = newcap;
	return 0;
}

/* Returns the slot holding key (not the zero key), or SIZE_MAX. */
static size_t ix_find(const struct index *ix, const struct fp *key)
{
	const struct fp *keys;
	size_t mask, pos, dist;

	if (ix->cap == 0)
		return SIZE_MAX;
	keys = ix_keys(ix);
	mask = ix->cap - 1;
	pos = ix_home(key, mask);
	for (dist = 0;; dist++, pos = (pos + 1) & mask) {
		const struct fp *k = &keys[pos];

		if (k->lo == key->lo && k->hi == key->hi)
			return pos;
		if (ix_is_zero(k) || ((pos - ix_home(k, mask)) & mask) < dist)
			return SIZE_MAX;
	}
}

/* Removes the entry at slot i, shifting its followers back one slot. */
static void ix_delete_at(struct index *ix, size_t i)
{
	struct fp *keys = ix_keys(ix);
	uint64_t *vals = ix_vals(ix);
	size_t mask = ix->cap - 1;

	for (;;) {
		size_t j = (i + 1) & mask;

		if (ix_is_zero(&keys[j]) || ix_home(&keys[j], mask) == j)
			break;
		keys[i] = keys[j];
		vals[i] = vals[j];
		i = j;
	}
	memset(&keys[i], 0, sizeof(keys[i]));
	vals[i] = 0;
}

int index_init(struct index *ix, size_t hint)
{
	memset(ix, 0, sizeof(*ix));
	if (hint == 0)
		return 0;
	return ix_resize(ix, ix_cap_for(hint));
}

int index_lookup(const struct index *ix, const struct fp *key, uint64_t *val)
{
	size_t pos;

	if (ix_is_zero(key)) {
		if (!ix->has_zero)
			return -ENOENT;
		*val = ix->zero_val;
		return 0;
	}
	pos = ix_find(ix, key);
	if (pos == SIZE_MAX)
		return -ENOENT;
	*val = ix_vals(ix)[pos];
	return 0;
}

void index_prefetch(const struct index *ix, const struct fp *key)
{
	if (ix->cap)
		__builtin_prefetch(&ix_keys(ix)[ix_home(key, ix->cap - 1)]);
}

void index_lookup_many(const struct index *ix, const struct fp *keys, size_t n, uint64_t *vals,
		       uint8_t *found)
{
	for (size_t i = 0; i < n; i++)
		index_prefetch(ix, &keys[i]);
	for (size_t i = 0; i < n; i++)
		found[i] = index_lookup(ix, &keys[i], &vals[i]) == 0;
}

/*
 * Probes once: an equal key means -EEXIST; otherwise the new entry goes to
 * the first free slot or displaces the first richer entry, which then
 * continues the probe. Growth happens first, and only for a new key, so a
 * rejected duplicate never grows the table.
 */
int index_insert(struct index *ix, const struct fp *key, uint64_t val)
{
	struct fp *keys;
	size_t n, mask, pos, dist;
	int err;

	if (ix_is_zero(key)) {
		if (ix->has_zero)
			return -EEXIST;
		ix->has_zero = 1;
		ix->zero_val = val;
		ix->count++;
		return 0;
	}
	n = ix_table_count(ix);
	if (ix->cap == 0 || !ix_fits(n + 1, ix->cap)) {
		if (ix_find(ix, key) != SIZE_MAX)
			return -EEXIST;
		err = ix_resize(ix, ix_cap_for(n + 1));
		if (err)
			return err;
	}
	keys = ix_keys(ix);
	mask = ix->cap - 1;
	pos = ix_home(key, mask);
	for (dist = 0;; dist++, pos = (pos + 1) & mask) {
		const struct fp *k = &keys[pos];

		if (ix_is_zero(k) || ((pos - ix_home(k, mask)) & mask) < dist)
			break;
		if (k->lo == key->lo && k->hi == key->hi)
			return -EEXIST;
	}
	ix_place_from(keys, ix_vals(ix), mask, *key, val, pos, dist);
	ix->count++;
	return 0;
}

int index_remove(struct index *ix, const struct fp *key)
{
	size_t pos;

	if (ix_is_zero(key)) {
		if (!ix->has_zero)
			return -ENOENT;
		ix->has_zero = 0;
		ix->zero_val = 0;
		ix->count--;
		return 0;
	}
	pos = ix_find(ix, key);
	if (pos == SIZE_MAX)
		return -ENOENT;
	ix_delete_at(ix, pos);
	ix->count--;
	return 0;
}

/*
 * Scans the table once, starting just after an empty slot: a backward shift
 * only moves entries from later slots into the slot being examined (which is
 * then examined again), never across that empty slot, so no entry is skipped
 * and none is seen past the end of the scan. Afterwards the table shrinks if
 * its load fell under 7/16 (a failed shrink keeps the larger table).
 */
size_t index_remove_if(struct index *ix, int (*pred)(uint64_t val, void *arg), void *arg)
{
	size_t removed = 0, start = 0, mask, pos, seen, n;
	struct fp *keys;
	uint64_t *vals;

	if (ix->has_zero && pred(ix->zero_val, arg)) {
		ix->has_zero = 0;
		ix->zero_val = 0;
		ix->count--;
		removed++;
	}
	if (ix->cap == 0)
		return removed;
	keys = ix_keys(ix);
	vals = ix_vals(ix);
	mask = ix->cap - 1;
	while (!ix_is_zero(&keys[start]))
		start++;
	pos = (start + 1) & mask;
	for (seen = 1; seen < ix->cap;) {
		if (!ix_is_zero(&keys[pos]) && pred(vals[pos], arg)) {
			ix_delete_at(ix, pos);
			ix->count--;
			removed++;
			continue;
		}
		pos = (pos + 1) & mask;
		seen++;
	}
	n = ix_table_count(ix);
	if (n == 0) {
		free(ix->slots);
		ix->slots = NULL;
		ix->cap = 0;
	} else if (n * 16 < ix->cap * 7 && ix_cap_for(n) < ix->cap) {
		ix_resize(ix, ix_cap_for(n));
	}
	return removed;
}

size_t index_bytes(const struct index *ix)
{
	return ix->cap * IX_SLOT_BYTES;
}

void index_release(struct index *ix)
{
	free(ix->slots);
	ix->slots = NULL;
	ix->cap = 0;
	ix->count = 0;
	ix->has_zero = 0;
	ix->zero_val = 0;
}
