/*
 * pace: the program's pace of host-to-device copies, in windows of copies
 * (issue 19, item 1), for the dump's "pace" (report/json.h).
 *
 * Every host-to-device copy the program makes (matched or not, in every
 * mode, off and dry included) is one copy here, counted once when it has
 * succeeded (pool/calls.c: pace_begin at the call, pace_note where the
 * copy is counted). Copies fall in windows of W copies each, in the order
 * they are noted: copy k goes to window k / W. The table holds at most
 * PACE_WINDOWS windows; when a copy would open one more, neighbours merge
 * (0 and 1, 2 and 3, ...) and W doubles, so the table always covers the
 * whole run, each window full but the last. W starts at 1.
 *
 * Time. A window remembers its first copy's call and its last copy's
 * return (the earliest call and the latest return of its copies). Its
 * time ("ns") is the wall time from its first call to the next window's
 * first call; the last window's, to its last return. "steady" is the
 * windows from the middle on (from_window = n / 2 of n windows): the same
 * rule in every mode, so the two runs of an A/B pair compare like with
 * like, and the first epoch's start-up is left out.
 *
 * The clock (CLOCK_MONOTONIC) is read once at the call (pace_begin) and
 * once at the return; the cost ledger shares both readings (pool/ledger.c:
 * its stamp is pace_call_ns, its end reading pace_clock_ns, which this
 * thread's pace_note then takes for the return instead of reading again).
 * The per-copy clock is per thread: pace_begin opens the thread's copy,
 * which stays open until its next pace_begin (the entries of one batched
 * call share its call and return; a copy never counted, not
 * host-to-device or failed, is simply never noted).
 *
 * Threads. pace_note takes a mutex of its own (a few dozen nanoseconds of
 * work under it; no other lock is taken inside, none of the shim's is held
 * around it but what its caller holds). Readers (pace_snapshot) take no
 * lock and allocate nothing: they copy the table under a sequence count
 * and retry while a note is under way, at most PACE_TRIES times; then (the
 * notes keep coming, on a loaded machine) they try the mutex, at most
 * PACE_LOCK_TRIES times, and copy under it; only then do they take what they
 * read (a note stopped by a signal for good cannot stall the final dump).
 * Makes no CUDA call. Core layer: calls nothing above core/.
 */
#ifndef VRAMPOOL_PACE_H
#define VRAMPOOL_PACE_H

#include <stdint.h>

#define PACE_WINDOWS 64
#define PACE_TRIES 1000
#define PACE_LOCK_TRIES 1000

/* Opens this thread's copy: reads the clock, remembered as its call time. Returns it. */
uint64_t pace_begin(void);

/*
 * The ledger's stamp at the start of a copy: this thread's open copy's
 * call time, or (no copy open: a unit test calling the pool directly)
 * the clock.
 */
uint64_t pace_call_ns(void);

/* Reads the clock; remembered as this thread's latest reading (the return of its open copy). */
uint64_t pace_clock_ns(void);

/*
 * Records one copy of bytes on this thread's open copy: its call time,
 * and as its return the latest pace_clock_ns after the call, else the
 * clock read now (and remembered, for the next entry of a batch).
 * Without an open copy, the call is the return (the clock read now).
 */
void pace_note(uint64_t bytes);

/* Records one copy with explicit times (tests; pace_note's work). */
void pace_note_at(uint64_t call_ns, uint64_t return_ns, uint64_t bytes);

/* The table as the dump shows it. */
struct pace_snapshot {
	uint64_t window_copies;         /* W */
	uint64_t copies, bytes, ns;     /* totals; ns from the first call to the last window's end */
	int nwindows;
	uint64_t w_copies[PACE_WINDOWS], w_bytes[PACE_WINDOWS], w_ns[PACE_WINDOWS];
	int steady_from;                /* n / 2 */
	uint64_t steady_copies, steady_ns;
	double steady_ns_per_copy;      /* steady_ns / steady_copies; 0 when no copy */
};

/* Copies the table into *s and computes the windows' times and the steady part. Lock-free. */
void pace_snapshot(struct pace_snapshot *s);

/* Forgets every copy (W back to 1) and makes the lock anew: a forked child, tests. */
void pace_reset(void);

#endif
