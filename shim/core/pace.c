/*
 * pace: the window table of the program's host-to-device copies and the
 * per-thread copy clock (pace.h is the contract).
 *
 * The table is written under pace_lock and read under a sequence count
 * (pace_seq odd while a note writes): each field is a relaxed atomic, so a
 * reader that gives up waiting reads whole numbers, never torn ones.
 */
#include "core/pace.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "core/clock.h"

static pthread_mutex_t pace_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned pace_seq;
static _Atomic uint64_t pace_w = 1;     /* copies per window */
static _Atomic uint64_t pace_copies;    /* copies noted */
static _Atomic int pace_n;              /* windows in use */
static _Atomic uint64_t pace_c[PACE_WINDOWS], pace_b[PACE_WINDOWS];
static _Atomic uint64_t pace_first[PACE_WINDOWS], pace_last[PACE_WINDOWS];

/* This thread's open copy: its call time and the latest clock reading since (0: none). */
static __thread uint64_t pace_t_call, pace_t_last;
static __thread int pace_open;

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define ST(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

uint64_t pace_begin(void)
{
	pace_t_call = clock_now_ns();
	pace_t_last = 0;
	pace_open = 1;
	return pace_t_call;
}

uint64_t pace_call_ns(void)
{
	return pace_open ? pace_t_call : clock_now_ns();
}

uint64_t pace_clock_ns(void)
{
	pace_t_last = clock_now_ns();
	return pace_t_last;
}

void pace_note(uint64_t bytes)
{
	uint64_t now;

	if (!pace_open) {
		now = clock_now_ns();
		pace_note_at(now, now, bytes);
		return;
	}
	if (pace_t_last < pace_t_call)
		pace_t_last = clock_now_ns();
	pace_note_at(pace_t_call, pace_t_last, bytes);
}

static uint64_t pace_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t pace_max(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* Empties windows from on. */
static void pace_clear(int from)
{
	for (int j = from; j < PACE_WINDOWS; j++) {
		ST(pace_c[j], 0);
		ST(pace_b[j], 0);
		ST(pace_first[j], 0);
		ST(pace_last[j], 0);
	}
}

/* Under pace_lock, inside a write: merges neighbours into the first half and doubles W. */
static void pace_merge(void)
{
	for (int j = 0; j < PACE_WINDOWS / 2; j++) {
		ST(pace_c[j], LD(pace_c[2 * j]) + LD(pace_c[2 * j + 1]));
		ST(pace_b[j], LD(pace_b[2 * j]) + LD(pace_b[2 * j + 1]));
		ST(pace_first[j], pace_min(LD(pace_first[2 * j]), LD(pace_first[2 * j + 1])));
		ST(pace_last[j], pace_max(LD(pace_last[2 * j]), LD(pace_last[2 * j + 1])));
	}
	pace_clear(PACE_WINDOWS / 2);
	ST(pace_n, PACE_WINDOWS / 2);
	ST(pace_w, LD(pace_w) * 2);
}

void pace_note_at(uint64_t call_ns, uint64_t return_ns, uint64_t bytes)
{
	uint64_t k, i;
	unsigned seq;

	if (return_ns < call_ns)
		return_ns = call_ns;
	pthread_mutex_lock(&pace_lock);
	seq = LD(pace_seq);
	ST(pace_seq, seq + 1);
	atomic_thread_fence(memory_order_release);
	k = LD(pace_copies);
	i = k / LD(pace_w);
	if (i >= PACE_WINDOWS) {
		pace_merge();
		i = k / LD(pace_w);
	}
	if (LD(pace_c[i]) == 0) {
		ST(pace_first[i], call_ns);
		ST(pace_last[i], return_ns);
		ST(pace_n, (int)i + 1);
	} else {
		ST(pace_first[i], pace_min(LD(pace_first[i]), call_ns));
		ST(pace_last[i], pace_max(LD(pace_last[i]), return_ns));
	}
	ST(pace_c[i], LD(pace_c[i]) + 1);
	ST(pace_b[i], LD(pace_b[i]) + bytes);
	ST(pace_copies, k + 1);
	atomic_store_explicit(&pace_seq, seq + 2, memory_order_release);
	pthread_mutex_unlock(&pace_lock);
}

/* Copies the raw table; first and last into the caller's arrays. */
static void pace_copy_out(struct pace_snapshot *s, uint64_t *first, uint64_t *last)
{
	s->window_copies = LD(pace_w);
	s->nwindows = LD(pace_n);
	if (s->nwindows < 0 || s->nwindows > PACE_WINDOWS)
		s->nwindows = 0;
	for (int i = 0; i < PACE_WINDOWS; i++) {
		s->w_copies[i] = LD(pace_c[i]);
		s->w_bytes[i] = LD(pace_b[i]);
		first[i] = LD(pace_first[i]);
		last[i] = LD(pace_last[i]);
	}
}

void pace_snapshot(struct pace_snapshot *s)
{
	uint64_t first[PACE_WINDOWS], last[PACE_WINDOWS];
	unsigned s1, s2;
	int n;

	memset(s, 0, sizeof(*s));
	for (int tries = 0;; tries++) {
		s1 = atomic_load_explicit(&pace_seq, memory_order_acquire);
		if ((s1 & 1) && tries < PACE_TRIES) {
			sched_yield();
			continue;
		}
		pace_copy_out(s, first, last);
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&pace_seq, memory_order_relaxed);
		if (s1 == s2 && !(s1 & 1))
			break;
		if (tries >= PACE_TRIES) {
			/* notes kept coming: a consistent copy under their mutex, if it comes free */
			for (int t = 0; t < PACE_LOCK_TRIES; t++) {
				if (pthread_mutex_trylock(&pace_lock) == 0) {
					pace_copy_out(s, first, last);
					pthread_mutex_unlock(&pace_lock);
					break;
				}
				sched_yield();
			}
			break;
		}
	}
	n = s->nwindows;
	for (int i = 0; i < n; i++) {
		uint64_t end = i + 1 < n ? first[i + 1] : last[i];

		s->w_ns[i] = end > first[i] ? end - first[i] : 0;
		s->copies += s->w_copies[i];
		s->bytes += s->w_bytes[i];
		s->ns += s->w_ns[i];
	}
	s->steady_from = n / 2;
	for (int i = s->steady_from; i < n; i++) {
		s->steady_copies += s->w_copies[i];
		s->steady_ns += s->w_ns[i];
	}
	if (s->steady_copies)
		s->steady_ns_per_copy = (double)s->steady_ns / (double)s->steady_copies;
}

void pace_reset(void)
{
	pthread_mutex_init(&pace_lock, NULL);
	ST(pace_seq, 0);
	ST(pace_w, 1);
	ST(pace_copies, 0);
	ST(pace_n, 0);
	pace_clear(0);
	pace_open = 0;
}
