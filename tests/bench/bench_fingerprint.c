/*
 * Benchmark of shim/fingerprint: throughput of fingerprint_rows over a
 * 256 MiB buffer, against memcpy of the same buffer measured in the same run.
 *
 * Usage: bench_fingerprint [THREADS] (default: $VRAMPOOL_THREADS, else the
 * online CPU count). Prints `name value unit` lines; lines starting with #
 * are comments. Figures (best of 5 runs each):
 *   memcpy_gbps           one thread copying the buffer into another
 *   fp_ROW_t1_gbps        fingerprint, ROW-byte rows, caller alone
 *   fp_ROW_tN_gbps        fingerprint, ROW-byte rows, N threads in all
 *   fp_ROW_t1_per_memcpy  fp_ROW_t1_gbps / memcpy_gbps (target >= 1.5)
 *   fp_ROW_tN_per_memcpy  fp_ROW_tN_gbps / memcpy_gbps
 * ROW is 150528 (u8:3x224x224), 3072 (f32:3x16x16 or u8:3x32x32) and
 * whole (the buffer as one row: the two-level tree).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fingerprint.h"

#define BUF_BYTES (256ull << 20)
#define RUNS 5

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Best memcpy bandwidth of RUNS runs, in GB/s (1e9 bytes per second). */
static double bench_memcpy(unsigned char *dst, const unsigned char *src, size_t n)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < RUNS; i++) {
		uint64_t t0 = now_ns();

		memcpy(dst, src, n);
		__asm__ __volatile__("" : : "r"(dst) : "memory");
		uint64_t dt = now_ns() - t0;

		if (dt < best)
			best = dt;
	}
	return (double)n / (double)best;
}

/* Best fingerprint throughput of RUNS runs with threads threads, in GB/s. */
static double bench_fp(const unsigned char *buf, uint64_t row, uint64_t nrows,
		       unsigned threads, struct fp *out)
{
	uint64_t best = UINT64_MAX;

	fingerprint_init(threads);
	fingerprint_rows(buf, row, nrows, out);    /* warm up: starts the workers */
	for (int i = 0; i < RUNS; i++) {
		uint64_t t0 = now_ns();

		fingerprint_rows(buf, row, nrows, out);
		uint64_t dt = now_ns() - t0;

		if (dt < best)
			best = dt;
	}
	return (double)(row * nrows) / (double)best;
}

int main(int argc, char **argv)
{
	uint64_t rows[] = { 150528, 3072, BUF_BYTES };
	const char *names[] = { "150528", "3072", "whole" };
	unsigned char *src = malloc(BUF_BYTES), *dst = malloc(BUF_BYTES);
	struct fp *out = calloc(BUF_BYTES / 3072, sizeof(*out));
	const char *env = getenv("VRAMPOOL_THREADS");
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t x = 88172645463325252ull;
	double mc;

	if (argc > 1)
		threads = strtol(argv[1], NULL, 10);
	else if (env && *env)
		threads = strtol(env, NULL, 10);
	if (threads < 1)
		threads = 1;
	if (!src || !dst || !out) {
		fprintf(stderr, "bench_fingerprint: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < BUF_BYTES; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(src + i, &x, 8);
	}
	memset(dst, 1, BUF_BYTES);
	printf("# bench_fingerprint: %llu MiB buffer, best of %d, tN = %ld threads\n",
	       BUF_BYTES >> 20, RUNS, threads);
	mc = bench_memcpy(dst, src, BUF_BYTES);
	printf("memcpy_gbps %.2f GB/s\n", mc);
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		uint64_t nrows = BUF_BYTES / rows[r];
		double one = bench_fp(src, rows[r], nrows, 1, out);

		printf("fp_%s_t1_gbps %.2f GB/s\n", names[r], one);
		printf("fp_%s_t1_per_memcpy %.2f x\n", names[r], one / mc);
		if (threads > 1) {
			double all = bench_fp(src, rows[r], nrows, (unsigned)threads, out);

			printf("fp_%s_t%ld_gbps %.2f GB/s\n", names[r], threads, all);
			printf("fp_%s_t%ld_per_memcpy %.2f x\n", names[r], threads, all / mc);
		}
	}
	fingerprint_shutdown();
	free(out);
	free(dst);
	free(src);
	return 0;
}
