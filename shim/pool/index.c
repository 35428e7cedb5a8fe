/*
 * index: fingerprint -> 64-bit value, ordered linear probing without
 * wraparound, growing in place inside a reservation (index.h is the
 * contract).
 *
 * Slots. The table is one array of 24-byte slots, each a key (16 bytes)
 * with its value (8 bytes) right after it, so a hit reads one slot and
 * usually one cache line (two when the slot straddles a line, as 2 slots in
 * 8 do). An all-zero key marks an empty slot, so the all-zero fingerprint
 * (probability 2^-128, but legal) lives outside the table in ix->zero_val.
 *
 * Home slot. The capacity is any integer (not a power of two) and a key's
 * home slot is the high half of lo * cap (multiply-shift, "fastrange"):
 * fingerprints are keyed, uniformly random hashes, so this spreads them
 * evenly without further mixing. The home never decreases as the key
 * grows, which everything below relies on.
 *
 * Order. Every run of occupied slots is sorted by key (lo, then hi). With
 * homes that grow with the key, this is Robin Hood order, and the layout
 * of a set of keys is canonical whatever the order they came in: in key
 * order, each entry sits at max(its home, the slot after the entry before
 * it). A probe walks from the home and stops at the key, at an empty slot
 * or at a larger key, so misses cost about as much as hits even at high
 * load; an insert shifts the rest of its run one slot up; a removal shifts
 * the entries after it down while they are away from their homes. Runs
 * never wrap around: they may pass the last home slot into the tail, which
 * is lengthened (by 1/64) when a run would pass its end.
 *
 * Resizing moves the entries in key order, each to max(its new home, the
 * slot after the last one placed). Into a new allocation that is one
 * sequential pass. In place (inside a reservation), the entries first move
 * to the top of the new length (a backward pass, clearing the slots they
 * leave), then down to their new slots (a forward pass): no entry is
 * written over before it is read, since the i-th of n entries lands at or
 * below the slot it was compacted to. Shrinking in place is the forward
 * pass alone (new homes are no higher than the old ones).
 *
 * Load and memory bound. The table grows by 1.45x (reserved too) past a
 * load of 3/4: after a growth 24 / 0.517 * (1 + 1/64) = 47.1 bytes an entry
 * (within 48). At 3/4 a probe reads 2.5 slots (4.5 at 7/8): a hit is mostly
 * in the two lines prefetched. index_remove_if shrinks to 3/5 under 1/2.
 *
 * Memory. The slot arrays, the reservation and the pages given back are
 * index_room.c's (index_room.h).
 */
#include "pool/index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/index_room.h"

#define IX_MIN_CAP 2
#define IX_LOAD_NUM 3                   /* the load bound: entries <= 3/4 of the home slots */
#define IX_LOAD_DEN 4
#define IX_GROW_NUM 9                   /* a growth adds 9/20 of the home slots (1.45x) */
#define IX_GROW_DEN 20
#define IX_LOOKAHEAD 16                 /* keys prefetched ahead in index_lookup_many */

static const struct fp ix_zero_key;     /* the key kept outside the table (ix->zero_val) */

/* The slot array. */
static struct ix_slot *ix_slots(const struct index *ix)
{
	return ix->slots;
}

/* Whether a slot is empty (its key is all zero). */
static int ix_empty(const struct ix_slot *s)
{
	return (s->lo | s->hi) == 0;
}

/* Whether the key in slot s is greater than (lo, hi). */
static int ix_after(const struct ix_slot *s, uint64_t lo, uint64_t hi)
{
	return s->lo > lo || (s->lo == lo && s->hi > hi);
}

/* The high 64 bits of the 128-bit product a * b. */
static uint64_t ix_mulhi(uint64_t a, uint64_t b)
{
#ifdef __SIZEOF_INT128__
	__extension__ typedef unsigned __int128 u128;

	return (uint64_t)(((u128)a * b) >> 64);
#else
	uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
	uint64_t mid = (al * bl >> 32) + (uint32_t)(ah * bl) + (uint32_t)(al * bh);

	return ah * bh + (ah * bl >> 32) + (al * bh >> 32) + (mid >> 32);
#endif
}

/* The home slot of a key whose low word is lo in a table of cap home slots. */
static size_t ix_home(uint64_t lo, size_t cap)
{
	return (size_t)ix_mulhi(lo, cap);
}

/* The slots past the last home slot that runs may use before the tail is lengthened. */
static size_t ix_tail(size_t cap)
{
	return cap / 64;
}

/* Entries held in the table itself (the zero key is not). */
static size_t ix_table_count(const struct index *ix)
{
	return ix->count - (ix->has_zero ? 1 : 0);
}

/* Whether n table entries fit cap home slots under the load bound. */
static int ix_fits(size_t n, size_t cap)
{
	return n <= cap / IX_LOAD_DEN * IX_LOAD_NUM + cap % IX_LOAD_DEN * IX_LOAD_NUM / IX_LOAD_DEN;
}

/* The smallest capacity that holds n entries under the load bound. */
static size_t ix_cap_min(size_t n)
{
	size_t cap = n + n / IX_LOAD_NUM + 1;

	while (cap > IX_MIN_CAP && ix_fits(n, cap - 1))
		cap--;
	while (!ix_fits(n, cap))
		cap++;
	return cap < IX_MIN_CAP ? IX_MIN_CAP : cap;
}

/* Frees the index's allocation. */
static void ix_free(struct index *ix)
{
	index_room_free(&(struct index_room){ .slots = ix->slots, .alloc = ix->alloc, .mapped = ix->mapped });
}

/* Sets the length in use and what it costs in host bytes. */
static void ix_set_len(struct index *ix, size_t len)
{
	ix->len = len;
	ix->bytes = ix->reserved ? index_room_bytes(len) : ix->alloc;
}

/*
 * Gives back the pages of a reservation past the first len slots (they
 * are all empty: zero when touched again).
 */
static void ix_trim(struct index *ix, size_t len)
{
	if (ix->reserved)
		index_room_trim(ix->slots, len, ix->len);
}

/* Takes the allocation b as the table's, with newcap home slots and len slots in use. */
static void ix_adopt(struct index *ix, const struct index_room *b, size_t newcap, size_t len)
{
	ix->slots = b->slots;
	ix->room = b->room;
	ix->alloc = b->alloc;
	ix->mapped = b->mapped;
	ix->reserved = b->reserved;
	ix->cap = newcap;
	ix_set_len(ix, len);
}

/*
 * The length the canonical layout of the table's entries needs with cap
 * home slots: the slot after the last entry.
 */
static size_t ix_layout_end(const struct index *ix, size_t cap)
{
	const struct ix_slot *s = ix_slots(ix);
	size_t end = 0;

	for (size_t i = 0; i < ix->len; i++) {
		size_t h;

		if (ix_empty(&s[i]))
			continue;
		h = ix_home(s[i].lo, cap);
		end = (h > end ? h : end) + 1;
	}
	return end;
}

/*
 * Places the entries of src[from, to) in key order (empty slots skipped)
 * into dst with cap home slots, each at max(its home, the slot after the
 * last one placed). dst may be src when no entry lands above its source
 * slot; a source slot an entry left is cleared then. Returns the slot
 * after the last entry placed.
 */
static size_t ix_place_sorted(struct ix_slot *dst, size_t cap, struct ix_slot *src, size_t from,
			      size_t to)
{
	size_t end = 0;

	for (size_t r = from; r < to; r++) {
		size_t h, w;

		if (ix_empty(&src[r]))
			continue;
		h = ix_home(src[r].lo, cap);
		w = h > end ? h : end;
		if (dst != src || w != r) {
			dst[w] = src[r];
			if (dst == src)
				memset(&src[r], 0, sizeof(src[r]));
		}
		end = w + 1;
	}
	return end;
}

/*
 * Grows the table in place inside its reservation to newcap home slots
 * and at least newlen slots: the entries move to the top of the new length
 * in a backward pass that also finds where the canonical layout ends (the
 * largest new home plus the entries from there on), then down to their
 * slots in a forward pass (ix_place_sorted). Returns 0, or -ENOSPC when the
 * layout would pass the reservation (the table is put back as it was).
 */
static int ix_grow_in_place(struct index *ix, size_t newcap, size_t newlen)
{
	struct ix_slot *s = ix_slots(ix);
	size_t top = newlen > ix->len ? newlen : ix->len, dst = top, cnt = 0, end = 0;

	if (top > ix->room)
		return -ENOSPC;
	for (size_t i = ix->len; i-- > 0;) {
		size_t h;

		if (ix_empty(&s[i]))
			continue;
		h = ix_home(s[i].lo, newcap) + ++cnt;
		end = h > end ? h : end;
		if (--dst != i) {
			s[dst] = s[i];
			memset(&s[i], 0, sizeof(s[i]));
		}
	}
	if (end > ix->room) {
		ix_place_sorted(s, ix->cap, s, dst, top);
		return -ENOSPC;
	}
	if (end > top) {
		memmove(&s[dst + (end - top)], &s[dst], (top - dst) * sizeof(*s));
		memset(&s[dst], 0, (end - top) * sizeof(*s));
		dst += end - top;
		top = end;
	}
	ix_place_sorted(s, newcap, s, dst, top);
	ix->cap = newcap;
	ix_set_len(ix, top > newlen ? top : newlen);
	return 0;
}

/*
 * Gives the table newcap home slots and at least minlen slots in all: in
 * place inside a reservation that holds it, else moved into a new
 * allocation. Returns 0 or -ENOMEM (the old table is kept then).
 */
static int ix_resize(struct index *ix, size_t newcap, size_t minlen)
{
	size_t newlen = newcap + ix_tail(newcap), end;
	struct index_room b;

	if (newlen < minlen)
		newlen = minlen;
	if (ix->reserved && newcap >= ix->cap && ix_grow_in_place(ix, newcap, newlen) == 0)
		return 0;
	end = ix_layout_end(ix, newcap);
	if (newlen < end)
		newlen = end;
	if (ix->reserved && newcap < ix->cap && newlen <= ix->room) {
		ix_place_sorted(ix_slots(ix), newcap, ix_slots(ix), 0, ix->len);
		if (newlen < ix->len)
			ix_trim(ix, newlen);
		ix->cap = newcap;
		ix_set_len(ix, newlen);
		return 0;
	}
	if (index_room_alloc(newlen, &b))
		return -ENOMEM;
	if (ix->slots) {
		ix_place_sorted(b.slots, newcap, ix_slots(ix), 0, ix->len);
		ix_free(ix);
	}
	ix_adopt(ix, &b, newcap, b.room);       /* a mapping's last page is tail too */
	return 0;
}

/*
 * Returns the slot holding key (lo, hi), not the zero key, in a table of
 * cap home slots and len slots, or SIZE_MAX.
 */
static inline size_t ix_probe(const struct ix_slot *slots, size_t cap, size_t len, uint64_t lo, uint64_t hi)
{
	for (size_t pos = ix_home(lo, cap); pos < len; pos++) {
		const struct ix_slot *s = &slots[pos];

		if (s->lo == lo && s->hi == hi)
			return pos;
		if (ix_empty(s) || ix_after(s, lo, hi))
			return SIZE_MAX;
	}
	return SIZE_MAX;
}

/* Returns the slot holding key (not the zero key), or SIZE_MAX. */
static size_t ix_find(const struct index *ix, const struct fp *key)
{
	if (ix->cap == 0)
		return SIZE_MAX;
	return ix_probe(ix_slots(ix), ix->cap, ix->len, key->lo, key->hi);
}

/* Removes the entry at slot i, shifting down the entries after it that are away from home. */
static void ix_delete_at(struct index *ix, size_t i)
{
	struct ix_slot *slots = ix_slots(ix);
	size_t j = i + 1;

	while (j < ix->len && !ix_empty(&slots[j]) && ix_home(slots[j].lo, ix->cap) < j)
		j++;
	memmove(&slots[i], &slots[i + 1], (j - i - 1) * sizeof(*slots));
	memset(&slots[j - 1], 0, sizeof(*slots));
}

int index_init(struct index *ix, size_t hint)
{
	memset(ix, 0, sizeof(*ix));
	if (hint == 0)
		return 0;
	return ix_resize(ix, ix_cap_min(hint), 0);
}

int index_reserve(struct index *ix, size_t max_entries)
{
	size_t n = ix_table_count(ix), capmax, room, first, newcap;
	struct index_room b;

	if (max_entries < n)
		max_entries = n;
	if (max_entries == 0)
		return 0;
	capmax = ix_cap_min(max_entries);
	room = capmax + capmax / 2 + ix_tail(capmax + capmax / 2) + 1024;   /* the last growth fits */
	if (room > IX_RESERVE_MAX_SLOTS)
		room = IX_RESERVE_MAX_SLOTS;
	first = ix_cap_min(max_entries < IX_PRESIZE_ENTRIES ? max_entries : IX_PRESIZE_ENTRIES);
	newcap = ix->cap > first ? ix->cap : first;
	if (ix->reserved && ix->room >= capmax + ix_tail(capmax))
		return 0;
	if (newcap + ix_tail(newcap) > room || index_room_reserve(room, &b))
		return -ENOMEM;
	if (ix->slots) {
		ix_place_sorted(b.slots, newcap, ix_slots(ix), 0, ix->len);    /* fits: room >= 2 * newcap */
		ix_free(ix);
	}
	ix_adopt(ix, &b, newcap, newcap + ix_tail(newcap));
	return 0;
}

/* Looks up a key that is not the zero key. */
static int ix_lookup_table(const struct index *ix, const struct fp *key, uint64_t *val)
{
	size_t pos = ix_find(ix, key);

	if (pos == SIZE_MAX)
		return -ENOENT;
	*val = ix_slots(ix)[pos].val;
	return 0;
}

int index_lookup(const struct index *ix, const struct fp *key, uint64_t *val)
{
	if ((key->lo | key->hi) == 0) {
		if (!ix->has_zero)
			return -ENOENT;
		*val = ix->zero_val;
		return 0;
	}
	return ix_lookup_table(ix, key, val);
}

/*
 * Prefetches the cache lines of a key's home slot and of what follows it up
 * to the end of the line after (a hit is found within the next slot or two
 * at the usual loads). The last line prefetched starts at most 63 bytes
 * past the home slot, which is harmless for a prefetch even past the end.
 */
static void ix_prefetch_home(const struct ix_slot *slots, size_t cap, uint64_t lo)
{
	const char *p = (const char *)&slots[ix_home(lo, cap)];

	__builtin_prefetch(p);
	__builtin_prefetch(p + 63);
}

void index_prefetch_insert(const struct index *ix, const struct fp *key)
{
	const char *p;

	if (ix->cap == 0)
		return;
	p = (const char *)&ix_slots(ix)[ix_home(key->lo, ix->cap)];
	__builtin_prefetch(p + 128, 1);
	__builtin_prefetch(p + 192, 1);
	__builtin_prefetch(p + 256, 1);
}

/*
 * Prefetches the first IX_LOOKAHEAD keys' home slots, then probes key i
 * while prefetching key i + IX_LOOKAHEAD: the misses of that many keys are
 * in flight at once, and a large batch does not evict its own early
 * prefetches before it probes them.
 */
void index_lookup_many(const struct index *ix, const struct fp *keys, size_t n, uint64_t *vals,
		       uint8_t *found)
{
	const struct ix_slot *slots = ix_slots(ix);
	size_t cap = ix->cap;

	if (cap == 0) {
		for (size_t i = 0; i < n; i++)
			found[i] = index_lookup(ix, &keys[i], &vals[i]) == 0;
		return;
	}
	for (size_t i = 0; i < n && i < IX_LOOKAHEAD; i++)
		ix_prefetch_home(slots, cap, keys[i].lo);
	for (size_t i = 0; i < n; i++) {
		uint64_t lo = keys[i].lo, hi = keys[i].hi;
		size_t pos;

		if (i + IX_LOOKAHEAD < n)
			ix_prefetch_home(slots, cap, keys[i + IX_LOOKAHEAD].lo);
		if ((lo | hi) == 0) {
			found[i] = index_lookup(ix, &keys[i], &vals[i]) == 0;
			continue;
		}
		pos = ix_probe(slots, cap, ix->len, lo, hi);
		found[i] = pos != SIZE_MAX;
		if (pos != SIZE_MAX)
			vals[i] = slots[pos].val;
	}
}

/*
 * Grows first, and only for a new key (a rejected duplicate never grows
 * the table). Then walks the run from the key's home to its place (the
 * first empty slot or larger key), and shifts what follows up to the run's
 * first empty slot one slot up. A run that would pass the table's end
 * lengthens the tail first.
 */
int index_insert(struct index *ix, const struct fp *key, uint64_t val)
{
	uint64_t lo = key->lo, hi = key->hi;
	struct ix_slot *slots;
	size_t pos, end;
	int err;

	if ((lo | hi) == 0) {
		if (ix->has_zero)
			return -EEXIST;
		ix->has_zero = 1;
		ix->zero_val = val;
		ix->count++;
		return 0;
	}
	if (ix->cap == 0 || !ix_fits(ix_table_count(ix) + 1, ix->cap)) {
		size_t grown = ix->cap + ix->cap * IX_GROW_NUM / IX_GROW_DEN;
		size_t need = ix_cap_min(ix_table_count(ix) + 1);

		if (ix_find(ix, key) != SIZE_MAX)
			return -EEXIST;
		err = ix_resize(ix, grown > need ? grown : need, 0);
		if (err)
			return err;
	}
	for (;;) {
		slots = ix_slots(ix);
		for (pos = ix_home(lo, ix->cap); pos < ix->len; pos++) {
			const struct ix_slot *s = &slots[pos];

			if (s->lo == lo && s->hi == hi)
				return -EEXIST;
			if (ix_empty(s) || ix_after(s, lo, hi))
				break;
		}
		for (end = pos; end < ix->len && !ix_empty(&slots[end]); end++)
			;
		if (end < ix->len)
			break;
		err = ix_resize(ix, ix->cap, ix->len + 1 + ix->len / 64);
		if (err)
			return err;
	}
	for (size_t j = end; j > pos; j--)     /* runs are short: a loop beats a call */
		slots[j] = slots[j - 1];
	slots[pos] = (struct ix_slot){ lo, hi, val };
	ix->count++;
	return 0;
}

int index_remove(struct index *ix, const struct fp *key)
{
	size_t pos;

	if ((key->lo | key->hi) == 0) {
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
 * Scans the table once from its first slot: a removal shifts later
 * entries down into the slot being examined (which is examined again),
 * never across the scan, so no entry is skipped. Afterwards the table
 * shrinks to a load of 3/4 if its load fell under 1/2 (a failed shrink
 * keeps the larger table); an emptied table is freed, or, in a
 * reservation, given back to the system.
 */
size_t index_remove_if(struct index *ix, int (*pred)(const struct fp *key, uint64_t val, void *arg),
		       void *arg)
{
	size_t removed = 0, n;
	struct ix_slot *slots = ix_slots(ix);

	if (ix->has_zero && pred(&ix_zero_key, ix->zero_val, arg)) {
		ix->has_zero = 0;
		ix->zero_val = 0;
		ix->count--;
		removed++;
	}
	if (ix->cap == 0)
		return removed;
	for (size_t pos = 0; pos < ix->len;) {
		if (!ix_empty(&slots[pos]) &&
		    pred(&(struct fp){ .lo = slots[pos].lo, .hi = slots[pos].hi }, slots[pos].val, arg)) {
			ix_delete_at(ix, pos);
			ix->count--;
			removed++;
			continue;
		}
		pos++;
	}
	n = ix_table_count(ix);
	if (n == 0 && ix->reserved) {
		ix_trim(ix, 0);
		ix->cap = 0;
		ix_set_len(ix, 0);
	} else if (n == 0) {
		ix_free(ix);
		ix->slots = NULL;
		ix->cap = ix->len = ix->room = ix->bytes = ix->alloc = 0;
		ix->mapped = 0;
	} else if (n * 2 < ix->cap) {
		size_t want = n + n * 2 / 3 + 1;       /* a load of 3/5 */

		ix_resize(ix, want < ix->cap ? want : ix->cap, 0);
	}
	return removed;
}

void index_for_each(const struct index *ix, void (*fn)(const struct fp *key, uint64_t val, void *arg),
		    void *arg)
{
	const struct ix_slot *slots = ix_slots(ix);

	if (ix->has_zero)
		fn(&ix_zero_key, ix->zero_val, arg);
	for (size_t pos = 0; ix->cap && pos < ix->len; pos++)
		if (!ix_empty(&slots[pos]))
			fn(&(struct fp){ .lo = slots[pos].lo, .hi = slots[pos].hi }, slots[pos].val, arg);
}

size_t index_bytes(const struct index *ix)
{
	return ix->bytes;
}

void index_release(struct index *ix)
{
	if (ix->slots)
		ix_free(ix);
	memset(ix, 0, sizeof(*ix));
}
