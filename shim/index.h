/*
 * index: fingerprint -> 64-bit value (the pool's row slot), open addressing.
 *
 * Linear probing with backward-shift deletion; the table doubles when full
 * past its load bound (index.c says which). Each key is kept next to its
 * value (index.c states the slot layout and the host bytes per entry).
 * Values are the caller's 64-bit handles (the pool packs slab and offset).
 * Not thread-safe: the pool serialises.
 */
#ifndef VRAMPOOL_INDEX_H
#define VRAMPOOL_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "fingerprint.h"

/* The fields are private to index.c (their layout may change). */
struct index {
	void *slots;
	size_t cap;       /* slots, a power of two, or 0 before first insert */
	size_t count;     /* entries */
	uint64_t zero_val; /* the value of the all-zero key, kept out of the */
	int has_zero;      /* table (a zero key marks an empty slot there) */
};

/* Initialises an empty index sized for about hint entries (0: small). Returns 0 or -ENOMEM. */
int index_init(struct index *ix, size_t hint);

/* Returns 0 and *val, or -ENOENT. */
int index_lookup(const struct index *ix, const struct fp *key, uint64_t *val);

/*
 * Looks up n keys as one batch: the home slot of every key is prefetched
 * before the first probe, so the cache misses of a copy's rows overlap.
 * found[i] is 1 with vals[i] set when keys[i] is present, else 0.
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
