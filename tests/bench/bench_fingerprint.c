/*
 * Benchmark of shim/fingerprint: throughput of fingerprint_rows on batches
 * of the sizes a training job copies, against baselines measured in the
 * same run on the same buffer: memcpy of the batch, and XXH3-128 of the
 * whole batch in one call on one thread (the same AVX2 kernel the shim
 * picks, unkeyed).
 *
 * Each repetition runs every operation once, in an order that rotates from
 * one repetition to the next, on a batch freshly written just before it
 * (copied from a 128 MiB ring, untimed), as a program's collate leaves it;
 * with --cold the batch is read straight from the ring instead (not in any
 * cache). Ratios are taken per repetition (paired), then their minimum and
 * median are printed; rates are medians.
 *
 * Usage: bench_fingerprint [--cold] [THREADS] (default: $VRAMPOOL_THREADS,
 * else 2). Prints `name value unit` lines; # lines are comments. For each
 * case C (150528: 64 rows of u8:3x224x224, 9.2 MiB; 3072: 3072 rows of
 * 3 KiB; 64: 147456 rows of 64 B; 1M: 9 rows of 1 MiB; whole16M and whole:
 * one row of 16 MiB and of 64 MiB, the two-level tree):
 *   fp_C_memcpy_gbps, fp_C_xxh3_gbps     the baselines
 *   fp_C_t1_gbps                         fingerprint_rows, caller alone
 *   fp_C_t1_per_xxh3_{min,median}        t1 / single-thread XXH3 (target >= 0.8)
 *   fp_C_t1_per_memcpy_{min,median}
 *   fp_C_tN_gbps                         fingerprint_init(N), as VRAMPOOL_THREADS=N runs:
 *                                        split N ways or hashed alone, as measured faster
 *   fp_C_tN_per_t1_{min,median}          paired: never below 1; >= 1.6 on an idle 2-core machine
 *   fp_C_tN_per_xxh3_{min,median}, fp_C_tN_per_memcpy_{min,median} (target >= 1.5)
 *   fp_C_tNsplit_*                       every copy split N ways (the chooser bypassed)
 *   fp_C_auto_gbps                       the count chosen by fingerprint_init(0)
 *   fp_C_auto_per_t1_{min,median}
 *   fp_C_auto_threads                    the chooser's count after the case
 * and memcpy_gbps (the 150528 case's, for scripts/bench.sh), and
 *   fp_avx_upper_clean   1 when the upper AVX state is clean right after
 *                        fingerprint_rows (0: dirty, a bug that halves the speed
 *                        of SSE code after it; -1: the CPU cannot tell). The
 *                        unit test of it cannot see it under the sanitizers.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool/fingerprint.h"

/* The baseline: XXH3-128 with the best kernel this CPU has, as the shim does. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)
#define BENCH_DISPATCH_AVX2 1
#define XXH_X86DISPATCH
#define XXH_DISPATCH_AVX2 1
#define XXH_TARGET_AVX2 __attribute__((__target__("avx2")))
#include <immintrin.h>
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

#define MiB (1ull << 20)
#define RING (128 * MiB)
#define BATCH_MAX (64 * MiB)
#define REPS 11

enum { OP_MEMCPY, OP_XXH3, OP_T1, OP_TN, OP_SPLIT, OP_AUTO, NOPS };

/* One case: rows of row bytes, nrows of them. */
struct bcase {
	const char *name;
	uint64_t row, nrows;
};

static unsigned char *ring, *batch, *dst;
static struct fp *out;
static size_t ring_off;
static int cold, use_avx2;

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef BENCH_DISPATCH_AVX2
static XXH_TARGET_AVX2 XXH128_hash_t long_avx2(const void *XXH_RESTRICT p, size_t len,
					       XXH64_hash_t seed, const void *XXH_RESTRICT secret,
					       size_t secret_len)
{
	XXH128_hash_t h;

	(void)seed;
	h = XXH3_hashLong_128b_internal(p, len, secret, secret_len,
					XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2);
	/* Leave the upper halves of the YMM registers clean: GCC does not
	 * here, and SSE code after a dirty AVX state runs up to twice as slow
	 * (measured: 3 KiB rows at half speed when the result was stored
	 * with an SSE move), in this module and in the host program alike. */
	_mm256_zeroupper();
	return h;
}
#endif

/* Single-thread XXH3-128 of a buffer. */
static XXH128_hash_t xxh3(const void *p, size_t len)
{
#ifdef BENCH_DISPATCH_AVX2
	if (use_avx2)
		return XXH3_128bits_internal(p, len, 0, XXH3_kSecret, sizeof(XXH3_kSecret), long_avx2);
#endif
	return XXH3_128bits(p, len);
}

/* Whether the upper halves of the YMM registers are in use (XINUSE bit 2), or -1. */
static int avx_upper_in_use(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d, lo, hi;

	if (!__get_cpuid_count(0xD, 1, &a, &b, &c, &d) || !(a & 4))
		return -1;
	__asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
	(void)hi;
	return (lo >> 2) & 1;
#else
	return -1;
#endif
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The next n bytes of the ring (wrapping to its start when they do not fit). */
static const unsigned char *ring_next(size_t n)
{
	const unsigned char *p;

	if (ring_off + n > RING)
		ring_off = 0;
	p = ring + ring_off;
	ring_off += n;
	return p;
}

/* Runs op once on a fresh n-byte batch; returns its nanoseconds. */
static uint64_t run_op(int op, const struct bcase *c, unsigned threads)
{
	uint64_t n = c->row * c->nrows, t0, dt;
	const unsigned char *src;
	XXH128_hash_t h;

	if (cold) {
		src = ring_next(n);
	} else {
		memcpy(batch, ring_next(n), n);
		src = batch;
	}
	static const struct fp_test_hooks exact = { .exact_threads = 1 };

	fingerprint_set_test_hooks(op == OP_SPLIT ? &exact : NULL);
	if (op == OP_T1)
		fingerprint_init(1);
	else if (op == OP_TN || op == OP_SPLIT)
		fingerprint_init(threads);
	else if (op == OP_AUTO)
		fingerprint_init(0);
	t0 = now_ns();
	switch (op) {
	case OP_MEMCPY:
		memcpy(dst, src, n);
		__asm__ __volatile__("" : : "r"(dst) : "memory");
		break;
	case OP_XXH3:
		h = xxh3(src, n);
		__asm__ __volatile__("" : : "r"(h.low64));
		break;
	default:
		fingerprint_rows(src, c->row, c->nrows, out);
		break;
	}
	dt = now_ns() - t0;
	return dt ? dt : 1;
}

/* Prints the minimum and median of a ratio over the repetitions. */
static void print_ratio(const char *c, const char *what, double *r)
{
	qsort(r, REPS, sizeof(double), cmp_double);
	printf("fp_%s_%s_min %.2f x\n", c, what, r[0]);
	printf("fp_%s_%s_median %.2f x\n", c, what, r[REPS / 2]);
}

/* Measures one case and prints its figures. Returns the median memcpy GB/s. */
static double bench_case(const struct bcase *c, unsigned threads)
{
	uint64_t t[REPS][NOPS];
	double gbps[NOPS][REPS], r[REPS], n = (double)(c->row * c->nrows), mc;
	const char *names[NOPS] = { "memcpy", "xxh3", "t1", "tN", "tNsplit", "auto" };
	/* The ratios printed: operation over baseline. */
	static const int pairs[][2] = {
		{ OP_T1, OP_XXH3 }, { OP_TN, OP_XXH3 }, { OP_SPLIT, OP_XXH3 },
		{ OP_T1, OP_MEMCPY }, { OP_TN, OP_MEMCPY }, { OP_SPLIT, OP_MEMCPY },
		{ OP_TN, OP_T1 }, { OP_SPLIT, OP_T1 }, { OP_AUTO, OP_T1 },
	};
	char tn[16], tns[24], what[48];
	struct fp_stats st;

	for (int i = 0; i < 6; i++)
		run_op(OP_AUTO, c, threads);      /* the chooser calibrates, workers start */
	run_op(OP_TN, c, threads);
	for (int rep = 0; rep < REPS; rep++)
		for (int k = 0; k < NOPS; k++) {
			int op = (k + rep) % NOPS;

			t[rep][op] = run_op(op, c, threads);
		}
	for (int op = 0; op < NOPS; op++) {
		for (int rep = 0; rep < REPS; rep++)
			gbps[op][rep] = n / (double)t[rep][op];
		qsort(gbps[op], REPS, sizeof(double), cmp_double);
	}
	snprintf(tn, sizeof(tn), "t%u", threads);
	snprintf(tns, sizeof(tns), "t%usplit", threads);
	names[OP_TN] = tn;
	names[OP_SPLIT] = tns;
	printf("# case %s: %llu rows of %llu B (%.1f MiB), %s batch\n", c->name,
	       (unsigned long long)c->nrows, (unsigned long long)c->row, n / MiB,
	       cold ? "cold" : "freshly written");
	for (int op = 0; op < NOPS; op++)
		printf("fp_%s_%s_gbps %.2f GB/s\n", c->name, names[op], gbps[op][REPS / 2]);
	mc = gbps[OP_MEMCPY][REPS / 2];
	for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
		int op = pairs[p][0], base = pairs[p][1];

		for (int rep = 0; rep < REPS; rep++)
			r[rep] = (double)t[rep][base] / (double)t[rep][op];
		snprintf(what, sizeof(what), "%s_per_%s", names[op], names[base]);
		print_ratio(c->name, what, r);
	}
	fingerprint_set_test_hooks(NULL);
	fingerprint_init(0);
	fingerprint_get_stats(&st);
	printf("fp_%s_auto_threads %u threads\n", c->name, st.threads);
	return mc;
}

int main(int argc, char **argv)
{
	static const struct bcase cases[] = {
		{ "150528", 150528, 64 },
		{ "3072", 3072, 3072 },
		{ "64", 64, 147456 },
		{ "1M", MiB, 9 },
		{ "whole16M", 16 * MiB, 1 },
		{ "whole", 64 * MiB, 1 },
	};
	const char *env = getenv("VRAMPOOL_THREADS");
	long threads = env && *env ? strtol(env, NULL, 10) : 2;
	uint64_t x = 88172645463325252ull;
	int dirty, wrong = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--cold") == 0)
			cold = 1;
		else
			threads = strtol(argv[i], NULL, 10);
	}
	if (threads < 1 || threads > 64)
		threads = 2;
	ring = malloc(RING);
	batch = malloc(BATCH_MAX);
	dst = malloc(BATCH_MAX);
	out = calloc(147456, sizeof(*out));
	if (!ring || !batch || !dst || !out) {
		fprintf(stderr, "bench_fingerprint: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < RING; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(ring + i, &x, 8);
	}
	memset(batch, 1, BATCH_MAX);
	memset(dst, 1, BATCH_MAX);
#ifdef BENCH_DISPATCH_AVX2
	__builtin_cpu_init();
	use_avx2 = __builtin_cpu_supports("avx2");
#endif
	printf("# bench_fingerprint: %d paired repetitions, tN = t%ld, XXH3 baseline %s\n", REPS,
	       threads, use_avx2 ? "AVX2" : "default kernel");
	fingerprint_init(1);
	fingerprint_rows(ring, 3072, 64, out);
	dirty = avx_upper_in_use();
	printf("fp_avx_upper_clean %d flag\n", dirty < 0 ? -1 : !dirty);
	if (dirty == 1) {
		printf("# WRONG: fingerprint_rows left the upper AVX state dirty\n");
		wrong = 1;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double mc = bench_case(&cases[i], (unsigned)threads);

		if (i == 0)
			printf("memcpy_gbps %.2f GB/s\n", mc);
	}
	fingerprint_shutdown();
	free(out);
	free(dst);
	free(batch);
	free(ring);
	return wrong;
}
