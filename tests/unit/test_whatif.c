/*
 * Unit tests of shim/whatif: the what-if curve against brute-force truth
 * (a simulation of fill-until-full admission in first-seen order), under
 * reshuffle and under skewed reuse, fed by misses (whatif_observe) and by
 * pool hits (whatif_repeat), exact below the memory cap and sampled past
 * it, from several threads at once; and the sampled curve against the
 * exact one on traces of 10^6 rows (reshuffled epochs, Zipf, a scan).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "cunit_main.h"
#include "pool/whatif.h"

#define ROW 3072ULL
#define BATCH 64

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Stands for the process's secret key: another salt, other fingerprints for the same rows. */
static uint64_t fp_salt;

/* The fingerprint of row id: what the shim's keyed hash would give, random-looking. */
static struct fp row_fp(uint64_t id)
{
	uint64_t s = id * 2 + 1 + fp_salt;
	struct fp f;

	f.lo = splitmix64(&s);
	f.hi = splitmix64(&s);
	return f;
}

/* Fills ids with 0..n-1 in a seeded random order. */
static void shuffle(uint64_t *ids, uint64_t n, uint64_t *seed)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		ids[i] = i;
	for (i = n - 1; i > 0; i--) {
		uint64_t j = splitmix64(seed) % (i + 1), t = ids[i];

		ids[i] = ids[j];
		ids[j] = t;
	}
}

/* Observes the rows ids[0..n) in batches of BATCH, as the pool's misses would come. */
static void observe_ids(const uint64_t *ids, uint64_t n, uint64_t *pos_out)
{
	struct fp fps[BATCH];
	uint64_t i, k, m;

	for (i = 0; i < n; i += m) {
		m = n - i < BATCH ? n - i : BATCH;
		for (k = 0; k < m; k++)
			fps[k] = row_fp(ids[i + k]);
		whatif_observe(fps, NULL, m, ROW, pos_out ? pos_out + i : NULL);
	}
}

/*
 * Brute force: the bytes a pool of budget b would have served for the
 * sighting sequence ids[0..n) of rows with ids below nids.
 */
static uint64_t truth_served(const uint64_t *ids, uint64_t n, uint64_t nids, uint64_t b)
{
	uint64_t *pos = calloc(nids, sizeof(*pos));
	uint64_t u = 0, served = 0, i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(pos);
	for (i = 0; i < n; i++) {
		if (pos[ids[i]] == 0) {
			u += ROW;
			pos[ids[i]] = u;
		} else if (pos[ids[i]] <= b) {
			served += ROW;
		}
	}
	free(pos);
	return served;
}

/* Checks the shape every snapshot has: 0 first, U last, increasing budgets, non-decreasing served. */
static void check_shape(const struct whatif_snapshot *s)
{
	int i;

	CU_ASSERT(s->npoints >= 16);
	CU_ASSERT_EQUAL(s->budget[0], 0);
	CU_ASSERT_EQUAL(s->served[0], 0);
	CU_ASSERT_EQUAL(s->budget[s->npoints - 1], s->unique_bytes);
	for (i = 1; i < s->npoints; i++) {
		CU_ASSERT(s->budget[i] > s->budget[i - 1]);
		CU_ASSERT(s->served[i] >= s->served[i - 1]);
	}
}

/* |a - b| <= tol * scale */
static int near(double a, double b, double tol, double scale)
{
	double d = a > b ? a - b : b - a;

	return d <= tol * scale;
}

/* N distinct rows seen in E reshuffled epochs; returns the sighting sequence (caller frees). */
static uint64_t *epochs(uint64_t n, unsigned e, uint64_t seed)
{
	uint64_t *ids = malloc(n * e * sizeof(*ids));
	unsigned k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
	for (k = 0; k < e; k++)
		shuffle(ids + (uint64_t)k * n, n, &seed);
	return ids;
}

static void test_reshuffle_exact(void)
{
	const uint64_t n = 10000;
	const unsigned e = 4;
	uint64_t *ids = epochs(n, e, 42);
	uint64_t matched = n * e * ROW, half;
	struct whatif_snapshot s;

	whatif_setup(0);
	observe_ids(ids, n * e, NULL);
	whatif_snapshot(&s, 0);
	check_shape(&s);
	CU_ASSERT_FALSE(s.sampled);
	CU_ASSERT_EQUAL(s.tracked_rows, n);
	CU_ASSERT_EQUAL(s.unique_bytes, n * ROW);
	CU_ASSERT_EQUAL(s.repeat_bytes, (e - 1) * n * ROW);
	CU_ASSERT_EQUAL(s.unique_bytes + s.repeat_bytes, matched);
	/* the whole unique set serves (E-1)/E of the matched bytes */
	CU_ASSERT_EQUAL(s.served[s.npoints - 1], matched / e * (e - 1));
	CU_ASSERT_EQUAL(whatif_served_at(s.unique_bytes), matched / e * (e - 1));
	/* half of it about half that */
	half = whatif_served_at(s.unique_bytes / 2);
	CU_ASSERT(near((double)half, (double)s.repeat_bytes / 2, 0.01, (double)s.repeat_bytes));
	CU_ASSERT_EQUAL(whatif_served_at(0), 0);
	CU_ASSERT_EQUAL(whatif_served_at(UINT64_MAX), s.repeat_bytes);
	free(ids);
}

static void test_curve_matches_brute_force(void)
{
	const uint64_t nids = 5000, n = 60000;
	uint64_t *ids = malloc(n * sizeof(*ids)), seed = 7, i;
	struct whatif_snapshot s;
	int k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
	/* skewed reuse: small ids come back far more often than large ones */
	for (i = 0; i < n; i++) {
		uint64_t r = splitmix64(&seed) % nids;

		ids[i] = r * (splitmix64(&seed) % nids) / nids;
	}
	whatif_setup(0);
	observe_ids(ids, n, NULL);
	whatif_snapshot(&s, 0);
	check_shape(&s);
	CU_ASSERT_EQUAL(s.unique_bytes + s.repeat_bytes, n * ROW);
	for (k = 0; k < s.npoints; k++) {
		uint64_t t = truth_served(ids, n, nids, s.budget[k]);

		if (!near((double)s.served[k], (double)t, 0.01, (double)s.repeat_bytes))
			fprintf(stdout, "\n  budget %llu: curve %llu, truth %llu\n",
				(unsigned long long)s.budget[k], (unsigned long long)s.served[k],
				(unsigned long long)t);
		CU_ASSERT(near((double)s.served[k], (double)t, 0.01, (double)s.repeat_bytes));
	}
	CU_ASSERT_EQUAL(s.served[s.npoints - 1], truth_served(ids, n, nids, s.unique_bytes));
	free(ids);
}

/*
 * A pool holding the rows of the first half of the positions serves them
 * (whatif_repeat with the positions observe handed out); the rest come as
 * misses. The figures equal those of a run where every row was observed.
 */
static void test_hits_and_misses_agree(void)
{
	const uint64_t n = 4000;
	const unsigned e = 3;
	uint64_t *ids = epochs(n, e, 99), *pos = calloc(n, sizeof(*pos)), *first = calloc(n, sizeof(*first));
	struct whatif_snapshot all, mixed;
	struct fp f;
	uint64_t i, budget;
	int k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(pos);
	CU_ASSERT_PTR_NOT_NULL_FATAL(first);
	whatif_setup(0);
	observe_ids(ids, n * e, NULL);
	whatif_snapshot(&all, 0);

	whatif_reset();
	observe_ids(ids, n, first);	/* epoch 1: all new; the pool keeps their positions */
	for (i = 0; i < n; i++)
		pos[ids[i]] = first[i];
	budget = n * ROW / 2;
	for (i = n; i < n * e; i++) {
		if (pos[ids[i]] <= budget) {
			whatif_repeat(pos[ids[i]], ROW);	/* a hit */
		} else {
			f = row_fp(ids[i]);
			whatif_observe(&f, NULL, 1, ROW, NULL);
		}
	}
	whatif_snapshot(&mixed, budget);
	CU_ASSERT_EQUAL(mixed.unique_bytes, all.unique_bytes);
	CU_ASSERT_EQUAL(mixed.repeat_bytes, all.repeat_bytes);
	CU_ASSERT(mixed.npoints == all.npoints + 1 || mixed.npoints == all.npoints);  /* U/2 may be a point already */
	for (k = 0; k < mixed.npoints; k++)
		CU_ASSERT_EQUAL(mixed.served[k], whatif_served_at(mixed.budget[k]));
	/* the point at the actual budget is what the pool served: every repeat of its rows */
	for (k = 0; k < mixed.npoints && mixed.budget[k] != budget; k++)
		;
	CU_ASSERT_FATAL(k < mixed.npoints);
	CU_ASSERT(near((double)mixed.served[k], (double)((e - 1) * budget), 0.002, (double)all.repeat_bytes));
	free(ids);
	free(pos);
	free(first);
}

/*
 * whatif_repeat_many gives the figures of one whatif_repeat per repeat:
 * runs in one bucket, in neighbouring buckets, position 0 and bytes 0.
 */
static void test_repeat_many(void)
{
	uint64_t pos[] = { 0, 5, 5, 64, 65, 1000, 1001, 1000, 1ULL << 40, 7, 0 };
	uint64_t bytes[] = { 3, 64, 64, 128, 1, 0, 64, 64, 4096, 64, 9 };
	const uint64_t n = sizeof(pos) / sizeof(pos[0]);
	const uint64_t at[] = { 1, 5, 6, 64, 66, 1000, 1002, 4096, 1ULL << 40, (1ULL << 40) + 1 };
	const uint64_t nat = sizeof(at) / sizeof(at[0]);
	uint64_t served[sizeof(at) / sizeof(at[0])];
	struct whatif_snapshot one, many;
	struct fp f = row_fp(1);
	int k;

	whatif_setup(0);
	whatif_observe(&f, NULL, 1, 1ULL << 41, NULL);	/* a curve that spans every position */
	for (uint64_t i = 0; i < n; i++)
		whatif_repeat(pos[i], bytes[i]);
	whatif_snapshot(&one, 0);
	for (uint64_t i = 0; i < nat; i++)
		served[i] = whatif_served_at(at[i]);
	whatif_setup(0);
	whatif_observe(&f, NULL, 1, 1ULL << 41, NULL);
	whatif_repeat_many(pos, bytes, n);
	whatif_repeat_many(pos, bytes, 0);
	whatif_snapshot(&many, 0);
	CU_ASSERT_EQUAL(many.repeat_bytes, one.repeat_bytes);
	CU_ASSERT_EQUAL(many.npoints, one.npoints);
	for (k = 0; k < one.npoints; k++)
		CU_ASSERT_EQUAL(many.served[k], one.served[k]);
	for (uint64_t i = 0; i < nat; i++)
		CU_ASSERT_EQUAL(whatif_served_at(at[i]), served[i]);
}

static void test_sampled_past_the_cap(void)
{
	const uint64_t n = 100000;
	const unsigned e = 3;
	uint64_t *ids = epochs(n, e, 5);
	double matched = (double)(n * e * ROW), want = matched * (e - 1) / e;
	struct whatif_snapshot s;

	whatif_setup(64 << 10);		/* 4096 entries: past 2048 rows the rate halves */
	observe_ids(ids, n * e, NULL);
	whatif_snapshot(&s, 0);
	check_shape(&s);
	CU_ASSERT_TRUE(s.sampled);
	CU_ASSERT(s.tracked_rows <= 2048);
	CU_ASSERT(s.tracked_rows >= 512);
	CU_ASSERT(near((double)s.unique_bytes, (double)(n * ROW), 0.05, (double)(n * ROW)));
	CU_ASSERT(near((double)s.served[s.npoints - 1], want, 0.05, want));
	CU_ASSERT(near((double)whatif_served_at(s.unique_bytes / 2), want / 2, 0.05, want));
	/* the matched bytes estimate holds too */
	CU_ASSERT(near((double)(s.unique_bytes + s.repeat_bytes), matched, 0.05, matched));
	free(ids);
}

/* A row is tracked by its content: its repeats are counted, sampled or not. */
static void test_sampling_is_consistent(void)
{
	const uint64_t n = 20000;
	uint64_t *ids = epochs(n, 1, 3), *pos1 = calloc(n, sizeof(*pos1)), *pos2 = calloc(n, sizeof(*pos2));
	uint64_t i, same = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(pos1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pos2);
	whatif_setup(WHATIF_MIN_MEM);
	observe_ids(ids, n, pos1);
	observe_ids(ids, n, pos2);
	for (i = 0; i < n; i++)
		same += pos1[i] == pos2[i];
	/* the rows still tracked at the end get the same position the second time */
	CU_ASSERT(same >= 100);
	free(ids);
	free(pos1);
	free(pos2);
}

static void test_extra_point(void)
{
	uint64_t *ids = epochs(1000, 2, 11);
	struct whatif_snapshot s;
	uint64_t u;
	int k, n0, found = 0;

	whatif_setup(0);
	observe_ids(ids, 2000, NULL);
	whatif_snapshot(&s, 0);
	u = s.unique_bytes;
	n0 = s.npoints;
	CU_ASSERT(n0 >= WHATIF_POINTS && n0 < WHATIF_MAX_POINTS);
	whatif_snapshot(&s, u / 3 + 1);
	check_shape(&s);
	CU_ASSERT_EQUAL(s.npoints, n0 + 1);
	for (k = 0; k < s.npoints; k++)
		found += s.budget[k] == u / 3 + 1;
	CU_ASSERT_EQUAL(found, 1);
	whatif_snapshot(&s, u * 2);	/* past U: the curve ends at U */
	CU_ASSERT_EQUAL(s.npoints, n0);
	whatif_snapshot(&s, u);
	CU_ASSERT_EQUAL(s.npoints, n0);
	free(ids);
}

/* The curve's value at b read from the snapshot's points, as a reader does: linear between two. */
static uint64_t snapshot_read(const struct whatif_snapshot *s, uint64_t b)
{
	for (int k = 1; k < s->npoints; k++)
		if (b <= s->budget[k])
			return s->served[k - 1] + (uint64_t)((long double)(s->served[k] - s->served[k - 1]) *
							     (long double)(b - s->budget[k - 1]) /
							     (long double)(s->budget[k] - s->budget[k - 1]));
	return s->served[s->npoints - 1];
}

/*
 * A curve that rises steeply at small budgets (a hot set of 60 rows read
 * in every batch, among 20,000 rows read once) is read from the
 * snapshot's points within 3% of the bytes served at any budget (issue
 * 19: 24 even points read it 40% off between 0 and U/23).
 */
static void test_points_read_within_percent(void)
{
	enum { HOT = 60, COLD = 20000, PER = 4 };
	uint64_t n = COLD + COLD / PER * HOT / 8, i, k = 0, cold = HOT;
	uint64_t *ids = malloc(n * sizeof(*ids));
	struct whatif_snapshot s;
	double worst = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
	for (i = 0; k < n; i++) {
		if (i % (PER + HOT / 8) < PER || cold >= HOT + COLD)
			ids[k++] = cold < HOT + COLD ? cold++ : i % HOT;
		else
			ids[k++] = i % HOT;
	}
	whatif_setup(0);
	observe_ids(ids, n, NULL);
	whatif_snapshot(&s, 0);
	check_shape(&s);
	CU_ASSERT(s.npoints <= WHATIF_MAX_POINTS);
	for (uint64_t b = ROW; b < s.unique_bytes; b += s.unique_bytes / 997 + 1) {
		double d = fabs((double)snapshot_read(&s, b) - (double)whatif_served_at(b)) / (double)s.repeat_bytes;

		if (d > worst)
			worst = d;
	}
	CU_ASSERT(worst < 0.03);
	if (worst >= 0.03)
		printf("\n  the snapshot's points read the curve %.1f%% off\n", 100 * worst);
	free(ids);
}

/*
 * Issue 19: copies that go straight through (pooling stood down) feed the
 * curve through whatif_observe_sparse, a content sample of their rows, so
 * the curve stays true: one epoch fingerprinted, three more sampled, its
 * shares of the matched bytes within 3 points of the exact curve of all
 * four, at the top and at half (a sample of 400 rows: about 2 points off).
 */
static void test_sparse_keeps_the_curve_true(void)
{
	enum { N = 12800, E = 4, SROW = 4096, SBATCH = 32 };
	unsigned char *data = malloc((size_t)N * SROW), *batch = malloc((size_t)SBATCH * SROW);
	uint64_t *ids = malloc(N * sizeof(*ids)), seed = 19, exact_u, exact_top, exact_half, total;
	struct fp fps[SBATCH];
	struct whatif_snapshot s;

	CU_ASSERT_FATAL(data && batch && ids);
	for (uint64_t i = 0; i < (uint64_t)N * SROW / 8; i++) {
		uint64_t v = splitmix64(&seed);

		memcpy(data + i * 8, &v, 8);
	}
	for (int pass = 0; pass < 2; pass++) {
		whatif_setup(0);
		seed = 7;
		for (int e = 0; e < E; e++) {
			shuffle(ids, N, &seed);
			for (uint64_t i = 0; i < N; i += SBATCH) {
				for (uint64_t k = 0; k < SBATCH; k++)
					memcpy(batch + k * SROW, data + ids[i + k] * SROW, SROW);
				if (pass == 1 && e > 0) {
					whatif_observe_sparse(batch, SBATCH, SROW);
					continue;
				}
				for (uint64_t k = 0; k < SBATCH; k++)
					fps[k] = fingerprint_one(batch + k * SROW, SROW);
				whatif_observe(fps, NULL, SBATCH, SROW, NULL);
			}
		}
		whatif_snapshot(&s, 0);
		if (pass == 0) {
			CU_ASSERT_FALSE(s.estimate);
			exact_u = s.unique_bytes;
			exact_top = s.served[s.npoints - 1];
			exact_half = whatif_served_at(exact_u / 2);
			continue;
		}
		/* the shares of the matched bytes the summary gives, the estimate's own total */
		total = s.unique_bytes + s.repeat_bytes;
		CU_ASSERT(s.estimate);
		CU_ASSERT_FALSE(s.unobserved);
		CU_ASSERT_EQUAL(exact_u, (uint64_t)N * SROW);
		CU_ASSERT(near((double)s.served[s.npoints - 1] / (double)total,
			       (double)exact_top / (double)(N * SROW * E), 0.03, 1));
		CU_ASSERT(near((double)whatif_served_at(exact_u / 2) / (double)total,
			       (double)exact_half / (double)(N * SROW * E), 0.03, 1));
		CU_ASSERT(near((double)s.unique_bytes, (double)exact_u, 0.05, (double)exact_u));
	}
	whatif_reset();
	free(data);
	free(batch);
	free(ids);
}

static void test_empty_and_skipped(void)
{
	struct whatif_snapshot s;
	struct fp f[3] = { row_fp(1), row_fp(2), row_fp(1) };
	uint8_t skip[3] = { 0, 1, 0 };
	uint64_t pos[3] = { 9, 9, 9 };

	whatif_setup(0);
	whatif_snapshot(&s, 1000);
	CU_ASSERT_EQUAL(s.npoints, 1);
	CU_ASSERT_EQUAL(s.budget[0], 0);
	CU_ASSERT_EQUAL(s.unique_bytes, 0);
	CU_ASSERT_EQUAL(s.repeat_bytes, 0);

	whatif_observe(f, skip, 3, 100, pos);
	CU_ASSERT_EQUAL(pos[0], 100);
	CU_ASSERT_EQUAL(pos[1], 0);
	CU_ASSERT_EQUAL(pos[2], 100);	/* the same row, seen again in the same copy */
	whatif_snapshot(&s, 0);
	CU_ASSERT_EQUAL(s.unique_bytes, 100);
	CU_ASSERT_EQUAL(s.repeat_bytes, 100);
	CU_ASSERT_EQUAL(s.tracked_rows, 1);

	/* an unknown position counts from one byte up */
	whatif_repeat(0, 50);
	CU_ASSERT_EQUAL(whatif_served_at(0), 0);
	CU_ASSERT_EQUAL(whatif_served_at(1), 50);
	CU_ASSERT_EQUAL(whatif_served_at(100), 150);

	whatif_reset();
	whatif_snapshot(&s, 0);
	CU_ASSERT_EQUAL(s.unique_bytes, 0);
	CU_ASSERT_EQUAL(s.repeat_bytes, 0);
	CU_ASSERT_EQUAL(s.tracked_rows, 0);
	CU_ASSERT_EQUAL(whatif_served_at(UINT64_MAX), 0);
}

static void test_huge_positions(void)
{
	struct fp f = row_fp(77);

	whatif_setup(0);
	whatif_observe(&f, NULL, 1, 1ULL << 62, NULL);
	whatif_observe(&f, NULL, 1, 1ULL << 62, NULL);
	CU_ASSERT_EQUAL(whatif_served_at((1ULL << 62) - 1), 0);
	/* the last position handed out bounds its bucket */
	CU_ASSERT_EQUAL(whatif_served_at(1ULL << 62), 1ULL << 62);
	whatif_repeat(UINT64_MAX, 1);
	CU_ASSERT_EQUAL(whatif_served_at(UINT64_MAX), (1ULL << 62) + 1);
}

/*
 * The exact curve of a trace: each sighting's first-seen position (unique
 * bytes up to and including it), the repeats' positions sorted, so that
 * served(B) is the repeats at positions up to B.
 */
struct exact_curve {
	uint64_t *rep;          /* positions of the repeat sightings, sorted */
	uint64_t nrep, unique;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static void exact_build(struct exact_curve *c, const uint64_t *ids, uint64_t n, uint64_t nids)
{
	uint64_t *pos = calloc(nids, sizeof(*pos)), i;

	c->rep = malloc(n * sizeof(*c->rep));
	CU_ASSERT_PTR_NOT_NULL_FATAL(pos);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c->rep);
	c->nrep = c->unique = 0;
	for (i = 0; i < n; i++) {
		if (pos[ids[i]] == 0) {
			c->unique += ROW;
			pos[ids[i]] = c->unique;
		} else {
			c->rep[c->nrep++] = pos[ids[i]];
		}
	}
	qsort(c->rep, c->nrep, sizeof(*c->rep), cmp_u64);
	free(pos);
}

/* Bytes the exact curve serves with budget b. */
static uint64_t exact_served(const struct exact_curve *c, uint64_t b)
{
	uint64_t lo = 0, hi = c->nrep;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (c->rep[mid] <= b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo * ROW;
}

/*
 * Feeds the trace to the module at its default memory and checks every
 * point of the sampled curve against the exact curve at the same budget:
 * within 2 percentage points of the matched bytes. Returns the largest
 * deviation (in points).
 */
static double check_sampled_trace(const char *name, const uint64_t *ids, uint64_t n, uint64_t nids)
{
	struct exact_curve c;
	struct whatif_snapshot s;
	double worst = 0, matched = (double)(n * ROW);
	int k;

	exact_build(&c, ids, n, nids);
	whatif_setup(0);
	observe_ids(ids, n, NULL);
	whatif_snapshot(&s, 0);
	check_shape(&s);
	CU_ASSERT_TRUE(s.sampled);
	CU_ASSERT(s.sample_one_in > 1);
	CU_ASSERT(s.table_bytes <= 2 * n);      /* at most 2 bytes per row */
	CU_ASSERT(near((double)s.unique_bytes, (double)c.unique, 0.02, matched));
	CU_ASSERT(near((double)(s.unique_bytes + s.repeat_bytes), matched, 0.02, matched));
	for (k = 0; k < s.npoints; k++) {
		double d = fabs((double)s.served[k] - (double)exact_served(&c, s.budget[k])) / matched;

		worst = d > worst ? d : worst;
	}
	fprintf(stdout, "\n  %s: %llu rows, one in %llu tracked, %llu table bytes, worst %.2f points ",
		name, (unsigned long long)n, (unsigned long long)s.sample_one_in,
		(unsigned long long)s.table_bytes, 100 * worst);
	CU_ASSERT(worst <= 0.02);
	free(c.rep);
	return worst;
}

/*
 * A pool with room for the first half of the rows first seen: it captures
 * them (one call per row, WHATIF_KEPT, as a copy of captures alone) and
 * serves their later sightings (whatif_repeat at the position they got);
 * the other rows are observed. mem is the what-if's memory (0: default).
 * Afterwards the kept rows leave the pool (whatif_adopt) and every row is
 * observed for evict_epochs more epochs. At the budgets of the curve of
 * the same sightings all observed: the same figures (tol 0), or sampled,
 * within tol of the sightings of the truth; *kept_tracked gets the
 * table's entries before the adoption.
 */
static void check_kept(uint64_t n, unsigned e, unsigned evict_epochs, uint64_t mem, double tol,
		       uint64_t *kept_tracked)
{
	const unsigned all_e = e + evict_epochs;
	uint64_t *ids = epochs(n, all_e, 41), *pos = calloc(n, sizeof(*pos)), i, nkept = 0;
	uint8_t *kept = calloc(n, 1), kind = WHATIF_KEPT;
	struct fp *kfps = malloc(n * sizeof(*kfps));
	uint64_t *kpos = malloc(n * sizeof(*kpos));
	struct whatif_snapshot all, mixed;
	double matched = (double)(n * all_e * ROW);
	int k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(pos);
	CU_ASSERT_PTR_NOT_NULL_FATAL(kept);
	CU_ASSERT_PTR_NOT_NULL_FATAL(kfps);
	CU_ASSERT_PTR_NOT_NULL_FATAL(kpos);
	whatif_setup(mem);
	observe_ids(ids, n * all_e, NULL);
	whatif_snapshot(&all, 0);

	whatif_setup(mem);
	for (i = 0; i < n * e; i++) {
		struct fp f = row_fp(ids[i]);
		uint64_t id = ids[i];

		if (kept[id]) {
			whatif_repeat(pos[id], ROW);            /* a hit */
		} else if (i < n && id % 2 == 0) {
			whatif_observe(&f, &kind, 1, ROW, &pos[id]);    /* a capture: kept */
			kept[id] = 1;
			kfps[nkept] = f;
			kpos[nkept++] = pos[id];
		} else {
			whatif_observe(&f, NULL, 1, ROW, NULL);
		}
	}
	whatif_snapshot(&mixed, 0);
	*kept_tracked = mixed.tracked_rows;
	whatif_adopt(kfps, kpos, nkept);        /* they leave the pool */
	observe_ids(ids + n * e, n * evict_epochs, NULL);
	whatif_snapshot(&mixed, 0);
	check_shape(&mixed);
	if (tol == 0) {
		CU_ASSERT_EQUAL(mixed.unique_bytes, all.unique_bytes);
		CU_ASSERT_EQUAL(mixed.repeat_bytes, all.repeat_bytes);
		CU_ASSERT_EQUAL(mixed.npoints, all.npoints);
	}
	/* at the budgets of the observed curve: the same figure, or sampled, near the truth */
	for (k = 0; k < all.npoints; k++) {
		double got = (double)whatif_served_at(all.budget[k]);

		double want = tol == 0 ? (double)all.served[k]
				       : (double)truth_served(ids, n * all_e, n, all.budget[k]);

		CU_ASSERT(near(got, want, tol, matched));
	}
	free(ids);
	free(pos);
	free(kept);
	free(kfps);
	free(kpos);
}

/* Rows the pool keeps stay out of the table, and the curve is exactly the one of observed rows. */
static void test_kept_rows_exact(void)
{
	const uint64_t n = 4000;
	uint64_t tracked;

	check_kept(n, 3, 0, 0, 0, &tracked);
	CU_ASSERT_EQUAL(tracked, n / 2);        /* the kept half never entered the table */
	check_kept(n, 2, 2, 0, 0, &tracked);    /* and once they leave the pool, they are known */
	CU_ASSERT_EQUAL(tracked, n / 2);
}

/*
 * Sampled (the table's rate halves while rows are kept and adopted): the
 * curve stays within 2 points of the truth, and a kept row
 * that the table holds is found through its bitmap after the halvings.
 */
static void test_kept_rows_sampled(void)
{
	uint8_t kind = WHATIF_KEPT;
	uint64_t p1 = 0, p2 = 0, tracked, id = 1000000;
	struct whatif_snapshot s;
	struct fp f;

	check_kept(100000, 2, 2, 0, 0.02, &tracked);

	do
		f = row_fp(++id);
	while (f.lo >> 56);                     /* a row tracked down to one in 256 */
	whatif_setup(WHATIF_MIN_MEM);
	whatif_observe(&f, NULL, 1, ROW, &p1);
	for (uint64_t i = 0; i < 20000; i++) {  /* the rate halves several times */
		struct fp g = row_fp(i);

		whatif_observe(&g, NULL, 1, ROW, NULL);
	}
	whatif_snapshot(&s, 0);
	CU_ASSERT(s.sample_one_in >= 16 && s.sample_one_in <= 256);
	whatif_observe(&f, &kind, 1, ROW, &p2);
	CU_ASSERT_EQUAL(p2, p1);        /* found: a repeat at its position, not a new row */
	whatif_snapshot(&s, 0);
	CU_ASSERT_EQUAL(s.unique_bytes, p1 > s.unique_bytes ? p1 : s.unique_bytes);
}

/*
 * The halving pass starts after the first empty slot and wraps: entries of
 * a cluster that runs past the table's end into slots 0.. are settled last,
 * and must move back to their homes when the entries before them go. A
 * table of 1024 slots: four keys homed at 1022 (the first two dropped by
 * the halving) fill 1022, 1023, 0 and 1, two more fill 2 and 3, and 507
 * keys homed from 8 on bring the table past half full. Every key the
 * halving keeps is found again at its first position.
 */
static void test_halving_wrapped_cluster(void)
{
	enum { CAP = 1024, FILL = 507 };
	struct fp f[6 + FILL];
	uint64_t pos[6 + FILL], again, seed = 99, n = 0;
	struct whatif_snapshot s;

	whatif_setup(WHATIF_MIN_MEM);
	for (int i = 0; i < 4; i++)     /* the cluster at the end, the first two above the halved rate */
		f[n++] = (struct fp){ .lo = (uint64_t)(i < 2) << 63 | (splitmix64(&seed) >> 11 << 10) | (CAP - 2) };
	for (int i = 0; i < 2; i++)
		f[n++] = (struct fp){ .lo = (splitmix64(&seed) >> 11 << 10) | (uint64_t)(2 + i) };
	for (int i = 0; i < FILL; i++)
		f[n++] = (struct fp){ .lo = (splitmix64(&seed) & (1ULL << 63)) | (splitmix64(&seed) >> 11 << 10) |
					    (uint64_t)(8 + i) };
	for (uint64_t i = 0; i < n; i++) {
		whatif_observe(&f[i], NULL, 1, ROW, &pos[i]);
		CU_ASSERT_EQUAL(pos[i], (i + 1) * ROW);
	}
	whatif_snapshot(&s, 0);
	CU_ASSERT_EQUAL_FATAL(s.sample_one_in, 2);      /* the one halving */
	for (uint64_t i = 2; i < n; i++) {
		if (f[i].lo >> 63)
			continue;
		whatif_observe(&f[i], NULL, 1, ROW, &again);
		CU_ASSERT_EQUAL(again, pos[i]);
	}
}

#define TRACE_ROWS 1000000ULL

/* 250,000 rows seen in 4 reshuffled epochs. */
static void test_sampled_reshuffled_epochs(void)
{
	uint64_t *ids = epochs(TRACE_ROWS / 4, 4, 2024);

	check_sampled_trace("reshuffled epochs", ids, TRACE_ROWS, TRACE_ROWS / 4);
	free(ids);
}

/*
 * 10^6 sightings of rows drawn from a Zipf law (s = 1) over 10^6 rows, with
 * three secrets: the most frequent row is 7% of the sightings, so whether
 * it is tracked moves the sample's total by up to half of it; the total
 * counted exactly puts that right.
 */
static void test_sampled_zipf(void)
{
	const uint64_t nids = TRACE_ROWS;
	double *cdf = malloc(nids * sizeof(*cdf)), sum = 0;
	uint64_t *ids = malloc(TRACE_ROWS * sizeof(*ids)), seed = 77, i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cdf);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
	for (i = 0; i < nids; i++)
		cdf[i] = sum += 1.0 / (double)(i + 1);
	for (i = 0; i < TRACE_ROWS; i++) {
		double u = (double)(splitmix64(&seed) >> 11) / 9007199254740992.0 * sum;
		uint64_t lo = 0, hi = nids - 1;

		while (lo < hi) {
			uint64_t mid = lo + (hi - lo) / 2;

			if (cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		ids[i] = lo;
	}
	for (fp_salt = 0; fp_salt < 3ULL << 40; fp_salt += 1ULL << 40)
		check_sampled_trace("zipf", ids, TRACE_ROWS, nids);
	fp_salt = 0;
	free(cdf);
	free(ids);
}

/*
 * A loop of 200,000 rows read three times in the same order, with a scan
 * of 400,000 rows seen once between its first and second pass.
 */
static void test_sampled_scan(void)
{
	const uint64_t loop = 200000, scan = 400000;
	uint64_t *ids = malloc(TRACE_ROWS * sizeof(*ids)), n = 0, i;
	int pass;

	CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
	for (pass = 0; pass < 3; pass++) {
		for (i = 0; i < loop; i++)
			ids[n++] = i;
		for (i = 0; pass == 0 && i < scan; i++)
			ids[n++] = loop + i;
	}
	CU_ASSERT_EQUAL_FATAL(n, TRACE_ROWS);
	check_sampled_trace("scan", ids, TRACE_ROWS, loop + scan);
	free(ids);
}

/* A spec that stands aside marks the curve an estimate until reset. */
static void test_estimate_mark(void)
{
	struct whatif_snapshot s;
	struct fp f = row_fp(5);

	whatif_setup(0);
	whatif_observe(&f, NULL, 1, ROW, NULL);
	whatif_snapshot(&s, 0);
	CU_ASSERT_FALSE(s.estimate);
	CU_ASSERT_FALSE(s.sampled);
	CU_ASSERT_EQUAL(s.sample_one_in, 1);
	whatif_set_estimate(0);
	whatif_snapshot(&s, 0);
	CU_ASSERT_FALSE(s.estimate);
	whatif_set_estimate(1);
	whatif_set_estimate(0);         /* the mark stays: the curve is cumulative */
	whatif_snapshot(&s, 0);
	CU_ASSERT_TRUE(s.estimate);
	whatif_reset();
	whatif_snapshot(&s, 0);
	CU_ASSERT_FALSE(s.estimate);
}

#define OBS_THREADS 4
#define OBS_ROWS 20000

static void *observer(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg, *ids = malloc(OBS_ROWS * sizeof(*ids)), i;

	if (!ids)
		return NULL;
	shuffle(ids, OBS_ROWS, &seed);
	observe_ids(ids, OBS_ROWS, NULL);
	for (i = 0; i < OBS_ROWS; i++)
		whatif_repeat(i * ROW + ROW, 1);
	free(ids);
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[OBS_THREADS];
	struct whatif_snapshot s;
	int i;

	whatif_setup(0);
	for (i = 0; i < OBS_THREADS; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, observer, (void *)(uintptr_t)(i + 1)), 0);
	for (i = 0; i < OBS_THREADS; i++)
		pthread_join(t[i], NULL);
	whatif_snapshot(&s, 0);
	CU_ASSERT_EQUAL(s.tracked_rows, OBS_ROWS);
	CU_ASSERT_EQUAL(s.unique_bytes, OBS_ROWS * ROW);
	CU_ASSERT_EQUAL(s.repeat_bytes, (OBS_THREADS - 1) * OBS_ROWS * ROW + OBS_THREADS * OBS_ROWS);
	CU_ASSERT_EQUAL(s.served[s.npoints - 1], s.repeat_bytes);
}

static const CU_TestInfo tests[] = {
	{ "under reshuffle the unique set serves (E-1)/E and half of it about half that",
	  test_reshuffle_exact },
	{ "every point of the curve agrees with a brute-force simulation",
	  test_curve_matches_brute_force },
	{ "pool hits at their kept positions count as observed repeats would",
	  test_hits_and_misses_agree },
	{ "past the memory cap rows are sampled and the figures stay within a few percent",
	  test_sampled_past_the_cap },
	{ "a sampled row keeps its position when it comes back", test_sampling_is_consistent },
	{ "the actual budget is an extra point only inside (0, U)", test_extra_point },
	{ "copies sent without their hashes keep the curve true through a content sample of their rows",
	  test_sparse_keeps_the_curve_true },
	{ "a curve steep at small budgets is read from the points within 3% at any budget",
	  test_points_read_within_percent },
	{ "an empty module has one point, skipped rows count nothing", test_empty_and_skipped },
	{ "positions near 2^64 fall in the top buckets", test_huge_positions },
	{ "threads observing the same rows count each once as unique", test_threads },
	{ "sampled, 10^6 rows in reshuffled epochs stay within 2 points of the exact curve",
	  test_sampled_reshuffled_epochs },
	{ "sampled, 10^6 Zipf rows stay within 2 points of the exact curve", test_sampled_zipf },
	{ "sampled, a loop with a scan of 10^6 rows stays within 2 points of the exact curve",
	  test_sampled_scan },
	{ "a spec standing aside marks the curve an estimate until reset", test_estimate_mark },
	{ "rows the pool keeps stay out of the table; the curve is the observed one, after they leave too",
	  test_kept_rows_exact },
	{ "kept rows, sampled: within 2 points of the truth; a tracked row is found after halvings",
	  test_kept_rows_sampled },
	{ "whatif_repeat_many gives the figures of one whatif_repeat per repeat", test_repeat_many },
	{ "a halving moves a cluster that wraps the table's end back to its homes",
	  test_halving_wrapped_cluster },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "whatif",
	.tests = tests,
	.after = whatif_reset,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
