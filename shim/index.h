/*
 * index: fingerprint -> 32-bit value (the pool's row slot), open addressing.
 *
 * Linear probing with backward-shift deletion; the table doubles when full
 * past its load bound (index.c says which). Slots are packed (key and value
 * in 20 bytes), so host memory per entry stays at or under 48 bytes at every
 * load the table can have. Not thread-safe: the pool serialises.
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
	uint32_t zero_val; /* the value of the all-zero key, kept out of the */
	int has_zero;      /* table (a zero key marks an empty slot there) */
};

/* Initialises an empty index sized for about hint entries (0: small). Returns 0 or -ENOMEM. */
int index_init(struct index *ix, size_t hint);

/* Returns 0 and *val, or -ENOENT. */
int index_lookup(const struct index *ix, const struct fp *key, uint32_t *val);

/* Inserts key -> val. Returns 0, -EEXIST (the existing value is kept), or -ENOMEM. */
int index_insert(struct index *ix, const struct fp *key, uint32_t val);

/* Removes key. Returns 0 or -ENOENT. */
int index_remove(struct index *ix, const struct fp *key);

/*
 * Removes every entry whose value satisfies pred(val, arg) (slab eviction).
 * Returns the number removed.
 */
size_t index_remove_if(struct index *ix, int (*pred)(uint32_t val, void *arg), void *arg);

/* Host bytes held by the table. */
size_t index_bytes(const struct index *ix);

/* Frees the table; ix is empty and reusable afterwards. */
void index_release(struct index *ix);

#endif
