/*
 * autolayout_sizes: the records of auto-layout, the copy sizes observed,
 * their candidate rows and the fingerprint tables of sampled rows. INTERNAL
 * to the auto-layout room (autolayout_impl.h lists its files); the bottom
 * of it: it calls no other file of the room, and defines the state al.
 *
 * Candidates. Each copy size n seen (at most AL_MAX_SIZES at a time; when
 * all are taken, the one with the fewest bytes and no row gives way, at
 * most once per AL_RECENT copies) gets its candidate rows: the divisors of
 * n of at least AUTOLAYOUT_MIN_ROW bytes, n itself included. When there
 * are more than AL_SIZE_CANDS, the ones kept are those whose batch
 * (n / row) is at most 64, then those whose batch is a power of two, then
 * a multiple of 8, then the rest, by batch ascending. Each candidate gets a
 * class, the hashing unit of its pass (autolayout_pass.h says why): at
 * most AL_PASSES per size, a candidate whose unit finds no pass sharing
 * the pass whose unit has the largest common divisor with it (at least
 * AL_MIN_UNIT bytes), or dropped; a second pass is not made for a single
 * candidate or for candidates that only make batches of more than
 * AL_PLAUSIBLE_BATCH rows.
 *
 * Sampling. Per row size, a table keeps the rows seen whose mixed key has
 * at least `level` leading zeros; a new table starts at the level where
 * about AL_SAMPLE_ROWS rows of one copy are sampled, and when it holds
 * AL_CAP rows the level rises (the share sampled halves) and the rows no
 * longer sampled go. A row is sampled or not by its whole content, and the
 * level only rises, so a sampled row that comes back was kept when first
 * seen: its repeat is always noticed. No row is selected by its first
 * bytes. Tables are shared by row size across copy sizes, counted by
 * references, and their slots stay within AL_SLOT_BUDGET: a table that
 * must grow takes room from the sizes with fewer bytes than the size being
 * observed that have no row (they are evicted), else it samples fewer rows.
 *
 * Every function runs under al.lock.
 */
#ifndef VRAMPOOL_AUTOLAYOUT_SIZES_H
#define VRAMPOOL_AUTOLAYOUT_SIZES_H

#include "pool/autolayout_impl.h"

/*
 * Returns the entry of id in t, or NULL and in *hole the empty slot where
 * it would go (NULL too when t has no slots yet).
 */
struct al_entry *al_find(struct al_table *t, uint32_t id, struct al_entry **hole);

/*
 * Keeps a row first seen in this copy (al.seq), with key id, lz leading
 * zeros, first seen in the size of slot origin; at hole (from al_find)
 * when the table stays as it is. When t holds AL_CAP rows, or holds half
 * its slots and may not grow (AL_SLOTS_MAX, the slot budget), the share
 * sampled halves: the row is then kept only if still sampled.
 */
void al_insert(struct al_table *t, uint32_t id, unsigned lz, int origin, struct al_entry *hole);

/*
 * Returns the record of copy size n, made with its candidates and their
 * tables when new (the size with the fewest bytes that has no row gives
 * way when all slots are taken, at most once per AL_RECENT copies), or
 * NULL (no slot, no memory, no candidate).
 */
struct al_size *al_size_get(uint64_t n);

/*
 * Frees every size record and table, or forgets them unfreed when
 * holder_gone (a forked child whose lock holder is gone: the records may be
 * half-changed). The counters of al are the caller's to reset.
 */
void al_sizes_clear(int holder_gone);

/* Sorts the n sizes of by, most bytes first (stable: ties keep their order). */
void al_size_sort(struct al_size **by, int n);

#endif
