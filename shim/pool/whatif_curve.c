/*
 * whatif_curve: reading the what-if curve (whatif.h): the histogram of
 * repeat bytes by first-seen position evaluated at budgets, and the
 * snapshot of its points. Lock-free: it reads the module's atomics only
 * (whatif_impl.h), so a reporter may call it while a thread stopped by a
 * signal holds the table's lock.
 */
#include "pool/whatif_impl.h"

#include <string.h>

#define WHATIF_LOG_RATIO 1.18920711500272106672L /* 2^(1/4): WHATIF_LOG_POINTS points cover U down to U/2^9.5 */

/* The first position of bucket b and its width. */
static uint64_t whatif_bucket_lo(unsigned b, uint64_t *width)
{
	unsigned e, shift;
	uint64_t m;

	if (b < 2 * WHATIF_SUB) {
		*width = 1;
		return b;
	}
	e = b / WHATIF_SUB + WHATIF_SUB_BITS - 1;
	shift = e - WHATIF_SUB_BITS;
	m = b - (uint64_t)shift * WHATIF_SUB;
	*width = 1ULL << shift;
	return m << shift;
}

/*
 * Evaluates the histogram at the n budgets b[] (increasing) in one pass, so
 * the served figures of one snapshot are consistent with each other.
 * Inside a bucket the repeats are taken as spread evenly over its
 * positions, up to the last position handed out (U), which no repeat can
 * lie beyond. The difference between the total sightings and what the
 * histogram and U account for (zero unless sampled) is added at every
 * budget from one byte up, no figure going below zero. Returns the
 * repeats so adjusted (R).
 */
static uint64_t whatif_eval(const uint64_t *b, uint64_t *served, int n)
{
	uint64_t top = atomic_load_explicit(&whatif.unique, memory_order_relaxed);
	uint64_t cum = 0, lo, width, hi, c, total;
	int64_t adj;
	unsigned k;
	int j = 0;

	for (k = 0; k < WHATIF_BUCKETS; k++) {
		c = atomic_load_explicit(&whatif_hist[k], memory_order_relaxed);
		lo = whatif_bucket_lo(k, &width);
		hi = lo + (width - 1);
		if (lo <= top && top < hi)
			width = top - lo + 1;
		while (j < n && b[j] < lo)
			served[j++] = cum;
		while (j < n && b[j] <= hi) {
			uint64_t in = b[j] - lo + 1;

			served[j] = cum + (in >= width ? c : (uint64_t)((long double)c * (long double)in /
									  (long double)width));
			j++;
		}
		cum += c;
	}
	while (j < n)
		served[j++] = cum;
	total = atomic_load_explicit(&whatif.total, memory_order_relaxed);
	adj = (int64_t)(total - top - cum);
	/* not for a sparse observation's sample (whatif_observe_sparse): rows that
	 * never repeat would show its sampling error as repeats */
	if (adj == 0 || atomic_load_explicit(&whatif.shift, memory_order_relaxed) == 0)
		return cum;
	for (j = 0; j < n; j++)
		if (b[j] > 0)
			served[j] = adj < 0 && (uint64_t)-adj > served[j] ? 0 : served[j] + (uint64_t)adj;
	return adj < 0 && (uint64_t)-adj > cum ? 0 : cum + (uint64_t)adj;
}

uint64_t whatif_served_at(uint64_t b)
{
	uint64_t served;

	if (b == 0)
		return 0;
	whatif_eval(&b, &served, 1);
	return served;
}

/* Inserts b into the increasing budgets of s (no duplicate), when there is room. */
static void whatif_add_point(struct whatif_snapshot *s, uint64_t b)
{
	int i = s->npoints;

	if (i >= WHATIF_MAX_POINTS)
		return;
	while (i > 0 && s->budget[i - 1] > b)
		i--;
	if (i > 0 && s->budget[i - 1] == b)
		return;
	memmove(&s->budget[i + 1], &s->budget[i], (size_t)(s->npoints - i) * sizeof(s->budget[0]));
	s->budget[i] = b;
	s->npoints++;
}

void whatif_snapshot(struct whatif_snapshot *s, uint64_t extra_budget)
{
	uint64_t u = atomic_load_explicit(&whatif.unique, memory_order_relaxed);
	uint64_t step = u / (WHATIF_POINTS - 1), rem = u % (WHATIF_POINTS - 1);
	long double b = (long double)u;
	int i;

	memset(s, 0, sizeof(*s));
	s->unique_bytes = u;
	s->tracked_rows = atomic_load_explicit(&whatif.tracked, memory_order_relaxed);
	s->sampled = atomic_load_explicit(&whatif.shift, memory_order_relaxed) > 0;
	s->sample_one_in = 1ULL << atomic_load_explicit(&whatif.shift, memory_order_relaxed);
	s->estimate = atomic_load_explicit(&whatif.estimate, memory_order_relaxed);
	s->unobserved = atomic_load_explicit(&whatif.unobserved, memory_order_relaxed);
	s->table_bytes = atomic_load_explicit(&whatif.table_bytes, memory_order_relaxed) + sizeof(whatif_hist);
	/* evenly from 0 to U, U itself exact */
	for (i = 0; i < WHATIF_POINTS && (u > 0 || i == 0); i++)
		whatif_add_point(s, step * (uint64_t)i + rem * (uint64_t)i / (WHATIF_POINTS - 1));
	/* below U, WHATIF_LOG_STEPS a power of two, for the small budgets */
	for (i = 0; i < WHATIF_LOG_POINTS && u > 0; i++) {
		b /= WHATIF_LOG_RATIO;
		if (b < 1)
			break;
		whatif_add_point(s, (uint64_t)b);
	}
	if (extra_budget > 0 && extra_budget < u)
		whatif_add_point(s, extra_budget);
	s->repeat_bytes = whatif_eval(s->budget, s->served, s->npoints);
	s->served[0] = 0;	/* budget 0 holds nothing */
}
