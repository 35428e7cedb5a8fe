/*
 * Benchmark of shim/index at pool scale.
 *
 * Usage: bench_index [ROWS] (default 1000000). Prints `name value unit`
 * lines; lines starting with # are comments. Lookups go through the keys in
 * random order (every one a cache miss at this size), 5 passes each; a
 * figure's _median variant is the median pass, the plain name the best:
 *   index_bytes_per_row         host bytes of the table per pooled row (target <= 48)
 *   index_insert_ns             mean insert into a table grown from empty (growth included)
 *   index_insert_reserved_ns    the same into a table reserved for 48 million entries (an H200's
 *                               budget of 3 KiB rows: index_reserve), growing in place
 *   index_insert_presized_ns    the same into a table sized for ROWS at once (no growth)
 *   index_insert_cpu_{grown,reserved,presized}_ns  the three in thread CPU time, which counts
 *                               the page faults of first touches too
 *   index_reserved_bytes_per_row  host bytes in use per row of the reserved table
 *   index_lookup_hit_ns         index_lookup of a present key, one at a time
 *   index_lookup_miss_ns        index_lookup of an absent key, one at a time
 *   index_lookup_many_hit_ns    index_lookup_many in batches of 256 present keys, per key
 *   index_lookup_many_miss_ns   the same with absent keys
 *   index_lookup_many_per_single  batch / one-at-a-time time, present keys (median passes)
 *   index_remove_if_ns_per_slot one eviction scan removing a 64-slab value range, per table slot
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define H200_ROWS 48000000ull      /* 141 GiB of 3 KiB rows */

#define PASSES 5
#define BATCH 256

#include "pool/index.h"

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A xorshift64 generator. */
static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Mean nanoseconds per lookup of each of PASSES passes over keys, sorted:
 * one at a time, or in batches of BATCH with index_lookup_many when batch
 * is set. *found counts hits of the last pass.
 */
static void bench_lookup(const struct index *ix, const struct fp *keys, size_t n, int batch,
			 double per[PASSES], size_t *found)
{
	uint64_t vals[BATCH];
	uint8_t hit[BATCH];

	for (int pass = 0; pass < PASSES; pass++) {
		uint64_t t0 = now_ns(), sum = 0;
		size_t hits = 0;

		for (size_t i = 0; i < n; i += BATCH) {
			size_t m = n - i < BATCH ? n - i : BATCH;

			if (batch) {
				index_lookup_many(ix, keys + i, m, vals, hit);
			} else {
				for (size_t j = 0; j < m; j++)
					hit[j] = index_lookup(ix, &keys[i + j], &vals[j]) == 0;
			}
			for (size_t j = 0; j < m; j++)
				if (hit[j]) {
					hits++;
					sum += vals[j];
				}
		}
		per[pass] = (double)(now_ns() - t0) / (double)n;
		__asm__ __volatile__("" : : "r"(sum));
		*found = hits;
	}
	qsort(per, PASSES, sizeof(double), cmp_double);
}

/* The calling thread's CPU time in nanoseconds. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Inserts the n keys into an index made by how (0: from empty, 1: reserved
 * for H200_ROWS, 2: sized for n); returns the mean wall and CPU time per
 * insert and the host bytes per row. Released afterwards.
 */
static void bench_insert(const struct fp *keys, size_t n, int how, double *wall, double *cpu,
			 double *bytes)
{
	struct index ix;
	uint64_t t0, c0;

	index_init(&ix, how == 2 ? n : 0);
	if (how == 1 && index_reserve(&ix, H200_ROWS))
		printf("# index_reserve refused: the reserved figures are for a table grown by moving\n");
	t0 = now_ns();
	c0 = cpu_ns();
	for (size_t i = 0; i < n; i++)
		index_insert(&ix, &keys[i], (uint64_t)i);
	*cpu = (double)(cpu_ns() - c0) / (double)n;
	*wall = (double)(now_ns() - t0) / (double)n;
	*bytes = (double)index_bytes(&ix) / (double)n;
	index_release(&ix);
}

/* Prints the best and median pass of a lookup figure. */
static void print_passes(const char *name, const double per[PASSES])
{
	printf("%s %.1f ns\n", name, per[0]);
	printf("%s_median %.1f ns\n", name, per[PASSES / 2]);
}

/* Whether a value (a pool row number) lies in the first 64 slabs' worth of rows. */
static int first_slabs(const struct fp *key, uint64_t val, void *arg)
{
	(void)key;
	return val < *(uint64_t *)arg;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	struct fp *keys = malloc(n * sizeof(*keys)), *absent = malloc(n * sizeof(*absent));
	struct index ix;
	uint64_t x = 0x2545F4914F6CDD1Dull, t0;
	size_t hits = 0, misses = 0, bhits = 0, bmisses = 0, removed;
	uint64_t bound;
	double ins, hit[PASSES], miss[PASSES], bhit[PASSES], bmiss[PASSES];
	double w[3], c[3], by[3];

	if (!keys || !absent || n == 0 || n > UINT32_MAX) {
		fprintf(stderr, "bench_index: bad size or out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		keys[i].lo = rng_next(&x);
		keys[i].hi = rng_next(&x);
		absent[i].lo = rng_next(&x);
		absent[i].hi = rng_next(&x);
	}
	for (int how = 0; how < 3; how++)
		bench_insert(keys, n, how, &w[how], &c[how], &by[how]);
	index_init(&ix, 0);
	t0 = now_ns();
	for (size_t i = 0; i < n; i++)
		index_insert(&ix, &keys[i], (uint64_t)i);
	ins = (double)(now_ns() - t0) / (double)n;
	/* Look the keys up in another order than inserted (as a shuffled epoch does). */
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = rng_next(&x) % (i + 1);
		struct fp t = keys[i];

		keys[i] = keys[j];
		keys[j] = t;
	}
	bench_lookup(&ix, keys, n, 0, hit, &hits);
	bench_lookup(&ix, absent, n, 0, miss, &misses);
	bench_lookup(&ix, keys, n, 1, bhit, &bhits);
	bench_lookup(&ix, absent, n, 1, bmiss, &bmisses);

	printf("# bench_index: %zu rows, table of %zu slots (load %.3f)\n", n, ix.cap,
	       (double)ix.count / (double)ix.cap);
	printf("index_bytes_per_row %.1f B\n", (double)index_bytes(&ix) / (double)ix.count);
	printf("index_insert_ns %.1f ns\n", ins);
	printf("index_insert_reserved_ns %.1f ns\n", w[1]);
	printf("index_insert_presized_ns %.1f ns\n", w[2]);
	printf("index_insert_cpu_grown_ns %.1f ns\n", c[0]);
	printf("index_insert_cpu_reserved_ns %.1f ns\n", c[1]);
	printf("index_insert_cpu_presized_ns %.1f ns\n", c[2]);
	printf("index_reserved_bytes_per_row %.1f B\n", by[1]);
	print_passes("index_lookup_hit_ns", hit);
	print_passes("index_lookup_miss_ns", miss);
	print_passes("index_lookup_many_hit_ns", bhit);
	print_passes("index_lookup_many_miss_ns", bmiss);
	printf("index_lookup_many_per_single %.2f x\n", bhit[PASSES / 2] / hit[PASSES / 2]);
	if (hits != n || misses != 0 || bhits != n || bmisses != 0)
		printf("# WRONG: %zu and %zu of %zu hits, %zu and %zu false hits\n", hits, bhits, n,
		       misses, bmisses);

	bound = (uint64_t)(n / 16);   /* values are insertion order: the first 1/16 of rows */
	t0 = now_ns();
	removed = index_remove_if(&ix, first_slabs, &bound);
	printf("index_remove_if_ns_per_slot %.2f ns\n",
	       (double)(now_ns() - t0) / (double)(ix.cap ? ix.cap : 1));
	if (removed != bound)
		printf("# WRONG: remove_if removed %zu, expected %llu\n", removed, (unsigned long long)bound);
	index_release(&ix);
	free(absent);
	free(keys);
	return hits == n && misses == 0 && bhits == n && bmisses == 0 && removed == bound ? 0 : 1;
}
