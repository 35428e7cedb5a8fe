/*
 * Benchmark of shim/index at pool scale.
 *
 * Usage: bench_index [ROWS] (default 1000000). Prints `name value unit`
 * lines; lines starting with # are comments:
 *   index_bytes_per_row   host bytes of the table per pooled row (target <= 48)
 *   index_insert_ns       mean insert into a table grown from empty (growth included)
 *   index_lookup_hit_ns   mean lookup of a present key (best of 3 passes)
 *   index_lookup_miss_ns  mean lookup of an absent key (best of 3 passes)
 *   index_remove_if_ns    one eviction scan removing a 64-slab value range, per table slot
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "index.h"

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

/* Best mean nanoseconds per lookup over 3 passes; *found counts hits. */
static double bench_lookup(const struct index *ix, const struct fp *keys, size_t n,
			   size_t *found)
{
	double best = 1e30;

	for (int pass = 0; pass < 3; pass++) {
		uint64_t t0 = now_ns(), sum = 0;
		size_t hits = 0;
		uint64_t v;

		for (size_t i = 0; i < n; i++)
			if (index_lookup(ix, &keys[i], &v) == 0) {
				hits++;
				sum += v;
			}
		double ns = (double)(now_ns() - t0) / (double)n;

		__asm__ __volatile__("" : : "r"(sum));
		if (ns < best)
			best = ns;
		*found = hits;
	}
	return best;
}

/* Whether a value (a pool row number) lies in the first 64 slabs' worth of rows. */
static int first_slabs(uint64_t val, void *arg)
{
	return val < *(uint64_t *)arg;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	struct fp *keys = malloc(n * sizeof(*keys)), *absent = malloc(n * sizeof(*absent));
	struct index ix;
	uint64_t x = 0x2545F4914F6CDD1Dull, t0;
	size_t hits = 0, misses = 0, removed;
	uint64_t bound;
	double ins, hit, miss;

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
	index_init(&ix, 0);
	t0 = now_ns();
	for (size_t i = 0; i < n; i++)
		index_insert(&ix, &keys[i], (uint64_t)i);
	ins = (double)(now_ns() - t0) / (double)n;
	hit = bench_lookup(&ix, keys, n, &hits);
	miss = bench_lookup(&ix, absent, n, &misses);

	printf("# bench_index: %zu rows, table of %zu slots (load %.3f)\n", n, ix.cap,
	       (double)ix.count / (double)ix.cap);
	printf("index_bytes_per_row %.1f B\n", (double)index_bytes(&ix) / (double)ix.count);
	printf("index_insert_ns %.1f ns\n", ins);
	printf("index_lookup_hit_ns %.1f ns\n", hit);
	printf("index_lookup_miss_ns %.1f ns\n", miss);
	if (hits != n || misses != 0)
		printf("# WRONG: %zu of %zu hits, %zu false hits\n", hits, n, misses);

	bound = (uint64_t)(n / 16);   /* a 64 MiB slab holds ~445 rows of 150528 B */
	t0 = now_ns();
	removed = index_remove_if(&ix, first_slabs, &bound);
	printf("index_remove_if_ns_per_slot %.2f ns\n",
	       (double)(now_ns() - t0) / (double)(ix.cap ? ix.cap : 1));
	if (removed != bound)
		printf("# WRONG: remove_if removed %zu, expected %llu\n", removed, (unsigned long long)bound);
	index_release(&ix);
	free(absent);
	free(keys);
	return hits == n && misses == 0 && removed == bound ? 0 : 1;
}
