/*
 * Benchmark of the crossover of shim/fingerprint's parallel path: from
 * which copy size splitting across 2 threads beats the caller alone. The
 * split threshold is lowered to nothing and every large copy is split (test
 * hooks), and copies of each
 * size are hashed with 1 thread and with 2, in pairs that alternate their
 * order, each on a batch freshly written just before (as a program's
 * collate leaves it). FINGERPRINT_PARALLEL_MIN is set from these figures.
 *
 * Usage: bench_fp_split [REPS] (default 31). Prints `name value unit`
 * lines (# lines are comments):
 *   split_ROW_SIZE_t1_us                 median microseconds, caller alone
 *   split_ROW_SIZE_t2_per_t1_{min,median} paired throughput ratio
 * for ROW 3072 and 150528 and SIZE from 128K to 9M, and
 *   split_parallel_min                    the threshold the shim uses, KiB
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool/fingerprint.h"

#define KiB 1024ull
#define RING (64ull << 20)
#define MAXREPS 201

static unsigned char *ring, *batch;
static size_t ring_off;

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Hashes a freshly written batch of nrows rows with threads threads; returns ns. */
static uint64_t run(uint64_t row, uint64_t nrows, unsigned threads, struct fp *out)
{
	uint64_t n = row * nrows, t0, dt;

	if (ring_off + n > RING)
		ring_off = 0;
	memcpy(batch, ring + ring_off, n);
	ring_off += n;
	fingerprint_init(threads);
	t0 = now_ns();
	fingerprint_rows(batch, row, nrows, out);
	dt = now_ns() - t0;
	return dt ? dt : 1;
}

int main(int argc, char **argv)
{
	static const uint64_t rows[] = { 3072, 150528 };
	static const uint64_t sizes[] = { 128 * KiB, 256 * KiB, 512 * KiB, 768 * KiB, 1024 * KiB,
					  2048 * KiB, 4096 * KiB, 9216 * KiB };
	static struct fp_test_hooks split_all = { .parallel_min = 1, .exact_threads = 1 };
	int reps = argc > 1 ? atoi(argv[1]) : 31;
	struct fp *out = calloc(9216 * KiB / 3072, sizeof(*out));
	uint64_t x = 88172645463325252ull;

	if (reps < 1 || reps > MAXREPS)
		reps = 31;
	ring = malloc(RING);
	batch = malloc(9216 * KiB);
	if (!ring || !batch || !out) {
		fprintf(stderr, "bench_fp_split: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < RING; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(ring + i, &x, 8);
	}
	fingerprint_set_test_hooks(&split_all);
	printf("# bench_fp_split: %d pairs per size, threshold lowered to 1 byte\n", reps);
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			uint64_t nrows = sizes[s] / rows[r];
			double t1[MAXREPS], ratio[MAXREPS];

			if (nrows < 2)
				continue;
			run(rows[r], nrows, 2, out);        /* workers started and warm */
			for (int i = 0; i < reps; i++) {
				uint64_t a, b;

				if (i % 2) {
					a = run(rows[r], nrows, 1, out);
					b = run(rows[r], nrows, 2, out);
				} else {
					b = run(rows[r], nrows, 2, out);
					a = run(rows[r], nrows, 1, out);
				}
				t1[i] = (double)a / 1000.0;
				ratio[i] = (double)a / (double)b;
			}
			qsort(t1, (size_t)reps, sizeof(double), cmp_double);
			qsort(ratio, (size_t)reps, sizeof(double), cmp_double);
			printf("split_%llu_%lluK_t1_us %.1f us\n", (unsigned long long)rows[r],
			       (unsigned long long)(sizes[s] / KiB), t1[reps / 2]);
			printf("split_%llu_%lluK_t2_per_t1_min %.2f x\n", (unsigned long long)rows[r],
			       (unsigned long long)(sizes[s] / KiB), ratio[0]);
			printf("split_%llu_%lluK_t2_per_t1_median %.2f x\n", (unsigned long long)rows[r],
			       (unsigned long long)(sizes[s] / KiB), ratio[reps / 2]);
		}
	fingerprint_set_test_hooks(NULL);
	printf("split_parallel_min %llu KiB\n", FINGERPRINT_PARALLEL_MIN / KiB);
	fingerprint_shutdown();
	free(batch);
	free(ring);
	free(out);
	return 0;
}
