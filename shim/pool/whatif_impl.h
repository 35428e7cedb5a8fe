/*
 * whatif_impl: the what-if curve's state, shared by the files of the
 * module. INTERNAL: only whatif.c (the table, observing, the histogram's
 * additions, set-up) and whatif_curve.c (reading the curve: evaluation and
 * snapshots) include it; whatif.h is the module's contract, and whatif.c's
 * opening comment says how the table and the sampling work.
 *
 * Locking: whatif.lock guards the table (slots, occ, cap, max_slots, used,
 * failed); everything a reader needs (the histogram, unique, total,
 * tracked, shift, the flags, table_bytes) is a relaxed atomic, so
 * whatif_curve.c takes no lock.
 */
#ifndef VRAMPOOL_WHATIF_IMPL_H
#define VRAMPOOL_WHATIF_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "pool/whatif.h"

#define WHATIF_SUB_BITS 6
#define WHATIF_SUB (1U << WHATIF_SUB_BITS)
#define WHATIF_BUCKETS ((64 - WHATIF_SUB_BITS + 1) * WHATIF_SUB)

struct whatif_entry {
	uint64_t key;   /* 0: empty */
	uint64_t pos;
};

struct whatif_state {
	pthread_mutex_t lock;
	struct whatif_entry *slots;     /* cap entries, or NULL before the first row */
	uint64_t *occ;                  /* a bit per slot, set while it holds an entry (after slots) */
	uint64_t cap;                   /* a power of two */
	uint64_t max_slots;             /* the cap in entries (a power of two) */
	uint64_t used;
	int failed;                     /* an allocation failed: observe nothing more */
	_Atomic unsigned shift;         /* sampling: a row is tracked when key >> (64 - shift) == 0 */
	_Atomic uint64_t unique;        /* U, scaled */
	_Atomic uint64_t total;         /* T: bytes of every sighting, exact */
	_Atomic uint64_t tracked;       /* entries in the table */
	_Atomic int estimate;           /* whatif_set_estimate: copies went unobserved */
	_Atomic int unobserved;         /* whatif_set_unobserved: copies not even sampled */
	_Atomic int sparse;             /* whatif_observe_sparse ran: some rows stand for 2^WHATIF_SPARSE_SHIFT */
	_Atomic uint64_t table_bytes;   /* bytes of the table */
};

extern _Atomic uint64_t whatif_hist[WHATIF_BUCKETS];   /* repeat bytes per bucket of first-seen position */
extern struct whatif_state whatif;

#endif
