/*
 * autolayout: finds the row size of a program's host-to-device copies from
 * their content (autolayout.h is the contract; this comment says how the
 * room is cut and what it costs).
 *
 * The room, calls running one way (down):
 *   autolayout.c        this file: the public calls; which copies are
 *                       observed, the observation of one copy step by step,
 *                       the result, set-up and reset;
 *   autolayout_pass.c   hashing a copy's rows for every candidate row size
 *                       and counting repeats (the hot loop);
 *   autolayout_judge.c  verdicts per copy size, the settling, the decision
 *                       and the evidence text;
 *   autolayout_sizes.c  the state, copy sizes, candidate rows and the
 *                       tables of sampled rows.
 * autolayout_impl.h holds the state and types they share; each file's own
 * header states its rules.
 *
 * Observing a copy: the copy's size record (made with its candidates when
 * new), one pass per hashing unit over the start of the copy, the evidence
 * of each candidate pushed into the size's ring of the last AL_RING copies,
 * the size's verdict, then the module's decision.
 *
 * Bounds.
 *  - Bytes hashed per observed copy: at most AL_PASSES * AL_WINDOW (2 x
 *    16 MiB); one pass over min(n, AL_WINDOW) for most sizes.
 *  - Row fingerprints per observed copy: min(n, AL_WINDOW) / c per
 *    candidate c (a multiply and a mix each), of which about AL_SAMPLE_ROWS
 *    or fewer are looked up in the table.
 *  - Memory: the table slots, at most AL_SLOT_BUDGET of 8 bytes (2 MiB; a
 *    recurring size takes room from sizes with fewer bytes, else a table
 *    that may not grow samples fewer rows), the size records, AL_MAX_SIZES
 *    of about 13 KiB, and 50 KiB of static table headers and scratch
 *    (autolayout_result reports the bytes allocated).
 *  - POOL mode observes every copy until a decision and none after FOUND;
 *    after NOTHING, and always in SUGGEST mode, it observes a copy only while
 *    the bytes of the copies observed stay under 1/AL_SHARE of the bytes
 *    offered (SUGGEST mode: plus AL_SUGGEST_FREE, so that short runs are
 *    seen whole).
 *
 * Locking: one mutex, taken with trylock by observers (a busy module skips
 * the copy); the state is read without it on the fast path.
 */
#include "pool/autolayout.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "pool/autolayout_impl.h"
#include "pool/autolayout_judge.h"
#include "pool/autolayout_pass.h"
#include "pool/autolayout_sizes.h"

/* Returns 1 when the share rule lets a copy be observed now. */
static int al_wanted(void)
{
	uint64_t seen, offered;

	if (!atomic_load_explicit(&al.share_on, memory_order_relaxed))
		return 1;
	seen = atomic_load_explicit(&al.seen, memory_order_relaxed) -
	       atomic_load_explicit(&al.base_seen, memory_order_relaxed);
	offered = atomic_load_explicit(&al.offered, memory_order_relaxed) -
		  atomic_load_explicit(&al.base_offered, memory_order_relaxed);
	return seen * AL_SHARE <= offered + atomic_load_explicit(&al.free_bytes, memory_order_relaxed) * AL_SHARE;
}

int autolayout_observe(const void *src, uint64_t n)
{
	struct al_size *s;
	uint64_t hashed = 0;
	int decided;

	if (!src || n < AUTOLAYOUT_MIN_ROW ||
	    atomic_load_explicit(&al.state, memory_order_acquire) == AUTOLAYOUT_FOUND)
		return 0;
	atomic_fetch_add_explicit(&al.offered, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&al.calls, 1, memory_order_relaxed);
	if (!al_wanted() || pthread_mutex_trylock(&al.lock) != 0)
		return 0;
	if (atomic_load(&al.state) == AUTOLAYOUT_FOUND) {
		pthread_mutex_unlock(&al.lock);
		return 0;
	}
	s = al_size_get(n);
	if (!s) {
		pthread_mutex_unlock(&al.lock);
		return 0;
	}
	al.cur = s;
	al.seq++;
	if (al.seq == 0)
		al.seq = 1;
	for (int i = 0; i < s->ncands; i++)
		s->cand[i].cur_n = s->cand[i].cur_k = 0;
	for (int cls = 0; cls < s->nclasses; cls++)
		hashed += al_pass(s, cls, src, n);
	al.cur = NULL;
	for (int i = 0; i < s->ncands; i++) {
		s->cand[i].ring_n[s->ring_pos] = s->cand[i].cur_n;
		s->cand[i].ring_k[s->ring_pos] = s->cand[i].cur_k;
	}
	s->ring_pos = (s->ring_pos + 1) % AL_RING;
	if (s->ring_len < AL_RING)
		s->ring_len++;
	s->bytes += n;
	s->copies++;
	s->last_seq = al.seq;
	al.observed_bytes += n;
	al.observed_copies++;
	al.hashed_bytes += hashed;
	atomic_fetch_add_explicit(&al.seen, n, memory_order_relaxed);
	al_size_verdict(s);
	decided = al_decide();
	pthread_mutex_unlock(&al.lock);
	return decided;
}

/* ---- results and set-up ------------------------------------------------- */

void autolayout_result(struct autolayout_result *r)
{
	struct al_size *by[AL_MAX_SIZES];
	int nby = 0;

	memset(r, 0, sizeof(*r));
	pthread_mutex_lock(&al.lock);
	r->state = (enum autolayout_state)atomic_load(&al.state);
	r->observed_copies = al.observed_copies;
	r->observed_bytes = al.observed_bytes;
	r->hashed_bytes = al.hashed_bytes;
	r->memory = al.memory;
	for (int i = 0; i < AL_MAX_SIZES; i++)
		if (al.size[i])
			by[nby++] = al.size[i];
	al_size_sort(by, nby);
	for (int i = 0; i < nby && i < AUTOLAYOUT_MAX_SIZES; i++) {
		r->sizes[i].size = by[i]->size;
		r->sizes[i].bytes = by[i]->bytes;
		r->sizes[i].row = by[i]->found.kind == AL_FOUND ? by[i]->found.row : 0;
		r->nsizes++;
	}
	if (r->state == AUTOLAYOUT_FOUND) {
		r->layout = al.found;
		memcpy(r->evidence, al.found_evidence, sizeof(r->evidence));
	} else {
		al_evidence_so_far(r->evidence, sizeof(r->evidence), r->state);
	}
	pthread_mutex_unlock(&al.lock);
}

/* Frees the state under the lock (held), or forgets it when holder_gone. */
static void al_clear(int holder_gone)
{
	al_sizes_clear(holder_gone);
	atomic_store(&al.state, AUTOLAYOUT_LOOKING);
	atomic_store(&al.offered, 0);
	atomic_store(&al.seen, 0);
	atomic_store(&al.calls, 0);
	atomic_store(&al.base_offered, 0);
	atomic_store(&al.base_seen, 0);
	atomic_store(&al.free_bytes, 0);
	atomic_store(&al.share_on, 0);
	al.observed_bytes = al.observed_copies = al.hashed_bytes = 0;
	al.seq = 0;
	al.settle_seq = 0;
	al.evict_calls = 0;
	al.slots_used = 0;
	al.cur = NULL;
	al.memory = 0;
	memset(&al.found, 0, sizeof(al.found));
	al.found_evidence[0] = '\0';
}

void autolayout_reset(void)
{
	if (pthread_mutex_trylock(&al.lock) == 0) {
		al_clear(0);
		pthread_mutex_unlock(&al.lock);
		return;
	}
	/* Held by a thread that did not survive fork: forget, and start a new lock. */
	al_clear(1);
	pthread_mutex_init(&al.lock, NULL);
}

void autolayout_lock_for_tests(int hold)
{
	if (hold)
		pthread_mutex_lock(&al.lock);
	else
		pthread_mutex_unlock(&al.lock);
}

void autolayout_setup(enum autolayout_mode mode)
{
	autolayout_reset();
	pthread_mutex_lock(&al.lock);
	al.mode = mode;
	if (mode == AUTOLAYOUT_SUGGEST) {
		atomic_store(&al.free_bytes, AL_SUGGEST_FREE);
		atomic_store(&al.share_on, 1);
	}
	pthread_mutex_unlock(&al.lock);
}
