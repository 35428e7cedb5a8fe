/*
 * pincheck: the run-time check of rows captured from a pinned source.
 *
 * CUDA reads a pinned source when the copy runs, not when it is issued, so
 * a program may still change it in stream order after the call (a host
 * function queued before the copy). Rows the pool captured from such a
 * copy were fingerprinted at the call; a host function queued behind the
 * copy's captures fingerprints each source row again when the stream gets
 * there, and sets the result. The pool serves none of those rows until
 * the result is known, and drops them if any source row changed.
 *
 * The record is shared by the segments of the copy (refs) and freed with
 * the last of them, under the pool's lock; the host function only reads
 * the record and stores the result, takes no lock and makes no CUDA call.
 */
#ifndef VRAMPOOL_PINCHECK_H
#define VRAMPOOL_PINCHECK_H

#include <stdatomic.h>
#include <stdint.h>

#include "pool/fingerprint.h"

struct pincheck {
	uint64_t row;
	uint64_t n;
	const unsigned char **src;      /* the source of each captured row */
	struct fp *fps;                 /* its fingerprint at the call */
	uint32_t *slab;                 /* where it was captured */
	uint64_t *off;
	_Atomic int result;             /* 0 not yet run, 1 unchanged, -1 changed */
	int refs;
};

/* Allocates a record for n rows of row bytes (refs 0, result 0), or NULL. */
struct pincheck *pincheck_new(uint64_t n, uint64_t row);

/* The host function: fingerprints every source row again and sets result. */
void pincheck_run(void *arg);

/* Returns the result: 0 not yet run, 1 unchanged, -1 changed. */
int pincheck_result(struct pincheck *c);

/* Drops one reference; frees the record with the last. */
void pincheck_put(struct pincheck *c);

#endif
