/*
 * index: fingerprint -> 64-bit value (the pool's row slot), open addressing.
 *
 * Ordered linear probing (Amble and Knuth's ordered hash table, which is
 * Robin Hood order when the home slot grows with the key): one array of
 * 24-byte slots, each key next to its value; a key's home slot is the high
 * half of key.lo * cap (multiply-shift, any capacity), and every run of
 * occupied slots is sorted by key, so a probe stops at the first larger key
 * or empty slot. Probes never wrap around: a run may pass the last home
 * slot into a tail of cap / 64 slots, lengthened when a run reaches its
 * end. The table grows by 1.45x when one more entry would pass a load of
 * 3/4; index_remove_if shrinks it to a load of 3/5 when its load falls
 * under 1/2. Values are the caller's 64-bit handles (the pool packs slab
 * and offset). Not thread-safe: the pool serialises.
 *
 * Sizing from the budget (index_reserve). Once the pool's probe has
 * decided a budget, the most rows the pool can ever hold is known
 * (budget / the smallest row). index_reserve reserves address space for a
 * table of that many entries (a MAP_NORESERVE mapping, at most
 * IX_RESERVE_MAX_SLOTS slots) and gives the table its first capacity from
 * it, at most IX_PRESIZE_ENTRIES entries. From then on the table grows in
 * place inside the reservation: no allocation, no copy into new memory and
 * no fresh memory faulted but the slots the larger table adds; the entries
 * move within the array in two sequential passes (sorted order makes that
 * possible), about 6.4 slot moves per entry over all growths. Host memory
 * in use (what index_bytes reports, and at most what is resident) follows
 * the entries, never the reservation.
 *
 * Why not a table of the budget's size at once: its keys are spread evenly
 * over it, so each of the first entries lands on a page of its own and
 * faults it in. Measured on this project's 2-core guest, a table presized
 * for 2 million entries took 2.5 us per insert for the first 20,000
 * entries (a page fault each), against 80 ns in a table of their own size;
 * an H200's budget of 3 KiB rows (48 million rows) would want 1.3 GB of
 * slots for a job whose dataset may be 20,000 rows. A budget change after
 * the probe (eviction, a latched budget) leaves the reservation's address
 * space in place, which costs no memory; the slots in use shrink with the
 * entries (index_remove_if), and the pages beyond them are given back
 * (MADV_DONTNEED). Where address space is limited (RLIMIT_AS set) or
 * memory is not overcommitted (vm.overcommit_memory = 2), index_reserve
 * reserves nothing and the table grows by moving into a new allocation.
 *
 * Memory bound: at most 48 bytes per entry at every count of an index
 * grown from empty, reserved or not (about 47 right after a growth, 32.5
 * just before the next), and again after index_remove_if; an index_init
 * hint or index_reserve may hold more on purpose (the first
 * IX_PRESIZE_ENTRIES). Tables of 2 MiB or more are 2 MiB-aligned mappings
 * with transparent huge pages requested (MADV_HUGEPAGE); smaller ones come
 * from calloc.
 */
#ifndef VRAMPOOL_INDEX_H
#define VRAMPOOL_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "pool/fingerprint.h"

#define IX_PRESIZE_ENTRIES (1u << 16)   /* index_reserve's first capacity, at most (about 1.8 MiB) */
#define IX_RESERVE_MAX_SLOTS (1ull << 28) /* the largest reservation (6 GiB of address space) */

/* The fields are private to index.c (their layout may change); tests read them. */
struct index {
	void *slots;
	size_t cap;        /* home slots (any integer >= 2), or 0 before the first insert */
	size_t len;        /* slots in use: cap and the tail runs may pass into */
	size_t room;       /* slots the allocation holds (len, or more in a reservation) */
	size_t count;      /* entries */
	size_t bytes;      /* bytes of the slots in use (page-rounded when mapped) */
	size_t alloc;      /* bytes of the allocation (the whole reservation) */
	int mapped;        /* the table is an mmap with huge pages requested */
	int reserved;      /* the mapping is a reservation the table grows in */
	int has_zero;      /* the all-zero key is present; it is kept out of */
	uint64_t zero_val; /* the table (a zero key marks an empty slot there) */
};

/* Initialises an empty index sized for about hint entries (0: small). Returns 0 or -ENOMEM. */
int index_init(struct index *ix, size_t hint);

/*
 * Reserves address space for a table of max_entries entries (capped at
 * IX_RESERVE_MAX_SLOTS slots) and moves the table into it, sized for its
 * entries and at least min(max_entries, IX_PRESIZE_ENTRIES); the table then
 * grows in place. Called again, it keeps a reservation that is large
 * enough. Returns 0, or -ENOMEM (nothing reserved: address space limited,
 * memory not overcommitted, or the mapping refused; the index is unchanged
 * and works as before).
 */
int index_reserve(struct index *ix, size_t max_entries);

/* Returns 0 and *val, or -ENOENT. */
int index_lookup(const struct index *ix, const struct fp *key, uint64_t *val);

/*
 * Looks up n keys as one batch: the home slots of the keys are prefetched
 * ahead of the probes (16 keys ahead), so the cache misses of a copy's rows
 * overlap. found[i] is 1 with vals[i] set when keys[i] is present, else 0
 * (vals[i] untouched). Keys may repeat and may be the zero key.
 */
void index_lookup_many(const struct index *ix, const struct fp *keys, size_t n, uint64_t *vals,
		       uint8_t *found);

/*
 * Starts loading, for writing, the slots an insert of key walks and shifts
 * past the two lines index_lookup_many loaded (to the next empty slot: a
 * few lines at the loads the table keeps). No effect on contents.
 */
void index_prefetch_insert(const struct index *ix, const struct fp *key);

/* Inserts key -> val. Returns 0, -EEXIST (the existing value is kept), or -ENOMEM. */
int index_insert(struct index *ix, const struct fp *key, uint64_t val);

/* Removes key. Returns 0 or -ENOENT. */
int index_remove(struct index *ix, const struct fp *key);

/*
 * Removes every entry for which pred(key, val, arg) is true (slab
 * eviction). Returns the number removed.
 */
size_t index_remove_if(struct index *ix, int (*pred)(const struct fp *key, uint64_t val, void *arg),
		       void *arg);

/* Calls fn(key, val, arg) for every entry, in no particular order; fn must not change the index. */
void index_for_each(const struct index *ix, void (*fn)(const struct fp *key, uint64_t val, void *arg),
		    void *arg);

/* Host bytes held by the table's slots in use. */
size_t index_bytes(const struct index *ix);

/* Frees the table and any reservation; ix is empty and reusable afterwards. */
void index_release(struct index *ix);

#endif
