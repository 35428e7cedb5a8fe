/*
 * hazard: the program's stream work that may write host memory after its
 * call returned: host functions and stream callbacks, graph launches (a
 * graph may hold either), and asynchronous copies into page-locked host
 * memory. A pinned source is read when its copy runs, so such work queued
 * ahead of a copy may change the source first, or hold the stream while
 * the program does (a host function that waits for it). The pool serves
 * no row of a pinned source on a stream with work queued while noted work
 * that may write the source may still be pending (pool_impl.h, x->queued),
 * and checks the rows it captures then (pincheck.h). A copy writes only
 * its destination; a host function or a graph may write anything.
 *
 * Invariants:
 * - Each piece of noted work keeps the bytes it may write (a copy its
 *   destination; anything else all memory) and an event recorded behind
 *   it on its stream; where the event cannot be recorded, the stream
 *   itself is asked (idle or not). The per-thread default stream is one
 *   stream per thread.
 * - Noted work is pending until its event says done; one that can no
 *   longer be asked (destroyed, or its device reset) twice in a row is
 *   taken as done, and done work leaves the table when it is next asked
 *   about (its event kept for the next). A stream keeps at most 16
 *   pending entries apart, the table 256: past that, the stream's newest
 *   entry takes its next work too (its range grows to cover both, its
 *   event is recorded again behind both); a stream with none is asked
 *   itself, for any bytes, until it is idle (64 such streams); past that,
 *   every later question answers "pending" (logged).
 * - Nothing here waits: every question is a query.
 * - The events are recorded without being counted in pool.device_ops:
 *   they order nothing.
 */
#ifndef VRAMPOOL_HAZARD_H
#define VRAMPOOL_HAZARD_H

#include <stdint.h>

#include "device/device.h"

/*
 * Notes work just queued on stream s (the handle the driver sees:
 * DEV_STREAM_PER_THREAD for the calling thread's per-thread stream) that
 * may write host memory: bytes [dst, dst + n), or any (dst NULL). Never
 * fails the program: whatever cannot be recorded is remembered as the
 * stream itself.
 */
void hazard_note(dev_stream s, const void *dst, uint64_t n);

/* Returns 1 when noted work that may write [src, src + n) may not have run yet, else 0. */
int hazard_pending(const void *src, uint64_t n);

/* In a forked child: forgets the parent's streams and events (unused, unfreed). */
void hazard_atfork_child(void);

#endif
