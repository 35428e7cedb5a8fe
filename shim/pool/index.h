/*
 * index: fingerprint -> 64-bit value (the pool's row slot), open addressing.
 *
 * Robin Hood linear probing with backward-shift deletion over one array of
 * 24-byte slots, each key next to its value. A key's home slot is the high
 * half of key.lo * cap (multiply-shift), so the capacity need not be a power
 * of two: the table grows by 1.5x when one more entry would pass a load of
 * 7/8. Host memory is at most 48 bytes per entry at every count of an index
 * grown from empty (41.2 once past a few entries), and again after
 * index_remove_if. Tables of 2 MiB or more are 2 MiB-aligned mappings with
 * transparent huge pages requested (MADV_HUGEPAGE); smaller ones come from
 * calloc. Values are the caller's 64-bit handles (the pool packs slab and
 * offset). Not thread-safe: the pool serialises.
 */
#ifndef VRAMPOOL_INDEX_H
#define VRAMPOOL_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "pool/fingerprint.h"

/* The fields are private to index.c (their layout may change); tests read them. */
struct index {
	void *slots;
	size_t cap;        /* slots (any integer >= 2), or 0 before the first insert */
	size_t count;      /* entries */
	size_t bytes;      /* bytes of the table's allocation */
	int mapped;        /* the table is an mmap with huge pages requested */
	int has_zero;      /* the all-zero key is present; it is kept out of */
	uint64_t zero_val; /* the table (a zero key marks an empty slot there) */
};

/* Initialises an empty index sized for about hint entries (0: small). Returns 0 or -ENOMEM. */
int index_init(struct index *ix, size_t hint);

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

/* Starts loading the home slot of key into the cache (no effect on contents). */
void index_prefetch(const struct index *ix, const struct fp *key);

/* Inserts key -> val. Returns 0, -EEXIST (the existing value is kept), or -ENOMEM. */
int index_insert(struct index *ix, const struct fp *key, uint64_t val);

/* Removes key. Returns 0 or -ENOENT. */
int index_remove(struct index *ix, const struct fp *key);

/*
 * Removes every entry whose value satisfies pred(val, arg) (slab eviction).
 * Returns the number removed.
 */
size_t index_remove_if(struct index *ix, int (*pred)(uint64_t val, void *arg), void *arg);

/* Host bytes held by the table. */
size_t index_bytes(const struct index *ix);

/* Frees the table; ix is empty and reusable afterwards. */
void index_release(struct index *ix);

#endif
