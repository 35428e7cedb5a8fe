/*
 * index: fingerprint -> 64-bit value, open addressing with Robin Hood linear
 * probing and backward-shift deletion.
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
 * evenly without further mixing, and it lets the table grow by 1.5x.
 *
 * Robin Hood order: along a probe run, entries are kept so that one never
 * sits farther from its home than the entries it passed would allow; a
 * lookup stops at the first entry closer to its home than the probe is, so
 * misses cost about as much as hits even at high load.
 *
 * Load and memory bound. The table grows by 1.5x when one more entry would
 * pass 7/8 of the slots; right after a growth the load is just over
 * 7/8 / 1.5 = 7/12, so host memory per entry is at most 24 / (7/12) = 41.2
 * bytes at any count of an index grown from empty (small tables round
 * their capacity, but never pass 48 bytes: 2 slots for 1 entry is the
 * worst). Mean probe lengths stay short at these loads (a hit looks at
 * about 1.4 to 4.5 slots). index_remove_if, which drops whole slabs, shrinks
 * the table to a load of 3/4 when its load falls under 1/2, so 48 bytes per
 * entry holds after it too; single removals do not shrink (an index_init
 * hint also preallocates beyond the bound on purpose).
 *
 * Huge pages. A table of IX_HUGE_MIN (2 MiB) or more is an anonymous mmap
 * aligned to 2 MiB, with madvise(MADV_HUGEPAGE): at 10^6 entries (about
 * 40 MiB) a lookup then needs no page walk. Its length is rounded up to a
 * whole page and the capacity fills it. Smaller tables come from calloc.
 * Whether the kernel grants huge pages is its business; either way the
 * table works the same.
 */
#include "pool/index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define IX_MIN_CAP 2
#define IX_HUGE_MIN (2ull << 20)        /* tables this large are mmapped for huge pages */
#define IX_HUGE_ALIGN (2ull << 20)
#define IX_LOOKAHEAD 16                 /* keys prefetched ahead in index_lookup_many */

/* One slot: a key and its value together. */
struct ix_slot {
	uint64_t lo, hi;
	uint64_t val;
};

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

/* The home slot of a key whose low word is lo in a table of cap slots. */
static size_t ix_home(uint64_t lo, size_t cap)
{
	return (size_t)ix_mulhi(lo, cap);
}

/* How far slot pos is from home, going forward with wraparound. */
static size_t ix_dist(size_t pos, size_t home, size_t cap)
{
	return pos >= home ? pos - home : pos + cap - home;
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

/* The smallest capacity that holds n entries under the load bound. */
static size_t ix_cap_min(size_t n)
{
	size_t cap = n + n / 7 + 1;

	while (cap > IX_MIN_CAP && ix_fits(n, cap - 1))
		cap--;
	while (!ix_fits(n, cap))
		cap++;
	return cap < IX_MIN_CAP ? IX_MIN_CAP : cap;
}

/*
 * Allocates a zeroed table of at least *cap slots: calloc below IX_HUGE_MIN
 * bytes, else a 2 MiB-aligned anonymous mapping with MADV_HUGEPAGE whose
 * capacity fills its last page. Sets *cap, *bytes and *mapped. Returns the
 * table or NULL.
 */
static void *ix_alloc(size_t *cap, size_t *bytes, int *mapped)
{
	size_t want, page, len, lead;
	unsigned char *p, *aligned;

	if (*cap > SIZE_MAX / sizeof(struct ix_slot) / 2)
		return NULL;
	want = *cap * sizeof(struct ix_slot);
	if (want < IX_HUGE_MIN) {
		*bytes = want;
		*mapped = 0;
		return calloc(*cap, sizeof(struct ix_slot));
	}
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (page == 0 || page > IX_HUGE_ALIGN || (page & (page - 1)))
		page = 4096;
	len = (want + page - 1) / page * page;
	p = mmap(NULL, len + IX_HUGE_ALIGN, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	aligned = (unsigned char *)(((uintptr_t)p + IX_HUGE_ALIGN - 1) & ~(uintptr_t)(IX_HUGE_ALIGN - 1));
	lead = (size_t)(aligned - p);
	if (lead)
		munmap(p, lead);
	munmap(aligned + len, IX_HUGE_ALIGN - lead);
#ifdef MADV_HUGEPAGE
	madvise(aligned, len, MADV_HUGEPAGE);   /* a refusal is fine: small pages then */
#endif
	*cap = len / sizeof(struct ix_slot);
	*bytes = len;
	*mapped = 1;
	return aligned;
}

/* Frees a table from ix_alloc. */
static void ix_free(void *slots, size_t bytes, int mapped)
{
	if (mapped)
		munmap(slots, bytes);
	else
		free(slots);
}

/*
 * Places key -> val starting the probe at pos with distance dist, displacing
 * richer entries (Robin Hood). The key must not be in the table and a free
 * slot must exist.
 */
static void ix_place_from(struct ix_slot *slots, size_t cap, struct ix_slot e, size_t pos,
			  size_t dist)
{
	for (;;) {
		struct ix_slot *s = &slots[pos];

		if (ix_empty(s)) {
			*s = e;
			return;
		}
		size_t d = ix_dist(pos, ix_home(s->lo, cap), cap);

		if (d < dist) {
			struct ix_slot t = *s;

			*s = e;
			e = t;
			dist = d;
		}
		if (++pos == cap)
			pos = 0;
		dist++;
	}
}

/*
 * Moves every entry into a fresh table of at least newcap slots. Returns 0
 * or -ENOMEM (the old table is kept then).
 */
static int ix_resize(struct index *ix, size_t newcap)
{
	struct ix_slot *old = ix->slots, *nslots;
	size_t ocap = ix->cap, bytes;
	int mapped;

	nslots = ix_alloc(&newcap, &bytes, &mapped);
	if (!nslots)
		return -ENOMEM;
	for (size_t i = 0; old && i < ocap; i++)
		if (!ix_empty(&old[i]))
			ix_place_from(nslots, newcap, old[i], ix_home(old[i].lo, newcap), 0);
	if (old)
		ix_free(old, ix->bytes, ix->mapped);
	ix->slots = nslots;
	ix->cap = newcap;
	ix->bytes = bytes;
	ix->mapped = mapped;
	return 0;
}

/* Returns the slot holding key (not the zero key), or SIZE_MAX. */
static size_t ix_find(const struct index *ix, const struct fp *key)
{
	const struct ix_slot *slots = ix_slots(ix);
	size_t cap = ix->cap, pos, dist;

	if (cap == 0)
		return SIZE_MAX;
	pos = ix_home(key->lo, cap);
	for (dist = 0;; dist++) {
		const struct ix_slot *s = &slots[pos];

		if (s->lo == key->lo && s->hi == key->hi)
			return pos;
		if (ix_empty(s) || ix_dist(pos, ix_home(s->lo, cap), cap) < dist)
			return SIZE_MAX;
		if (++pos == cap)
			pos = 0;
	}
}

/* Removes the entry at slot i, shifting its followers back one slot. */
static void ix_delete_at(struct index *ix, size_t i)
{
	struct ix_slot *slots = ix_slots(ix);
	size_t cap = ix->cap;

	for (;;) {
		size_t j = i + 1 == cap ? 0 : i + 1;

		if (ix_empty(&slots[j]) || ix_home(slots[j].lo, cap) == j)
			break;
		slots[i] = slots[j];
		i = j;
	}
	memset(&slots[i], 0, sizeof(slots[i]));
}

int index_init(struct index *ix, size_t hint)
{
	memset(ix, 0, sizeof(*ix));
	if (hint == 0)
		return 0;
	return ix_resize(ix, ix_cap_min(hint));
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
 * at the usual loads). The lines are within the table: a slot is 24 bytes
 * and the last line prefetched starts at most 63 bytes past the home slot,
 * which is harmless for a prefetch even past the end.
 */
static void ix_prefetch_home(const struct ix_slot *slots, size_t cap, uint64_t lo)
{
	const char *p = (const char *)&slots[ix_home(lo, cap)];

	__builtin_prefetch(p);
	__builtin_prefetch(p + 63);
}

void index_prefetch(const struct index *ix, const struct fp *key)
{
	if (ix->cap)
		ix_prefetch_home(ix_slots(ix), ix->cap, key->lo);
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
		if (i + IX_LOOKAHEAD < n)
			ix_prefetch_home(slots, cap, keys[i + IX_LOOKAHEAD].lo);
		found[i] = index_lookup(ix, &keys[i], &vals[i]) == 0;
	}
}

/*
 * Probes once: an equal key means -EEXIST; otherwise the new entry goes to
 * the first free slot or displaces the first richer entry, which then
 * continues the probe. Growth happens first, and only for a new key, so a
 * rejected duplicate never grows the table.
 */
int index_insert(struct index *ix, const struct fp *key, uint64_t val)
{
	struct ix_slot *slots, e = { key->lo, key->hi, val };
	size_t n, cap, pos, dist;
	int err;

	if ((key->lo | key->hi) == 0) {
		if (ix->has_zero)
			return -EEXIST;
		ix->has_zero = 1;
		ix->zero_val = val;
		ix->count++;
		return 0;
	}
	n = ix_table_count(ix);
	if (ix->cap == 0 || !ix_fits(n + 1, ix->cap)) {
		size_t grown = ix->cap + ix->cap / 2, need = ix_cap_min(n + 1);

		if (ix_find(ix, key) != SIZE_MAX)
			return -EEXIST;
		err = ix_resize(ix, grown > need ? grown : need);
		if (err)
			return err;
	}
	slots = ix_slots(ix);
	cap = ix->cap;
	pos = ix_home(key->lo, cap);
	for (dist = 0;; dist++) {
		const struct ix_slot *s = &slots[pos];

		if (ix_empty(s) || ix_dist(pos, ix_home(s->lo, cap), cap) < dist)
			break;
		if (s->lo == key->lo && s->hi == key->hi)
			return -EEXIST;
		if (++pos == cap)
			pos = 0;
	}
	ix_place_from(slots, cap, e, pos, dist);
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
 * Scans the table once, starting just after an empty slot: a backward shift
 * only moves entries from later slots into the slot being examined (which is
 * then examined again), never across that empty slot, so no entry is skipped
 * and none is seen past the end of the scan. Afterwards the table shrinks to
 * a load of 3/4 if its load fell under 1/2 (a failed shrink keeps the
 * larger table).
 */
size_t index_remove_if(struct index *ix, int (*pred)(uint64_t val, void *arg), void *arg)
{
	size_t removed = 0, start = 0, cap, pos, seen, n;
	struct ix_slot *slots;

	if (ix->has_zero && pred(ix->zero_val, arg)) {
		ix->has_zero = 0;
		ix->zero_val = 0;
		ix->count--;
		removed++;
	}
	if (ix->cap == 0)
		return removed;
	slots = ix_slots(ix);
	cap = ix->cap;
	while (!ix_empty(&slots[start]))
		start++;
	pos = start + 1 == cap ? 0 : start + 1;
	for (seen = 1; seen < cap;) {
		if (!ix_empty(&slots[pos]) && pred(slots[pos].val, arg)) {
			ix_delete_at(ix, pos);
			ix->count--;
			removed++;
			continue;
		}
		if (++pos == cap)
			pos = 0;
		seen++;
	}
	n = ix_table_count(ix);
	if (n == 0) {
		ix_free(ix->slots, ix->bytes, ix->mapped);
		ix->slots = NULL;
		ix->cap = 0;
		ix->bytes = 0;
		ix->mapped = 0;
	} else if (n * 2 < cap) {
		size_t want = n + n / 3 + 1;

		ix_resize(ix, want < cap ? want : cap);
	}
	return removed;
}

size_t index_bytes(const struct index *ix)
{
	return ix->bytes;
}

void index_release(struct index *ix)
{
	if (ix->slots)
		ix_free(ix->slots, ix->bytes, ix->mapped);
	memset(ix, 0, sizeof(*ix));
}
