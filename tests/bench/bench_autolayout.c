/*
 * Benchmark of shim/autolayout: what observing copies costs, against XXH3
 * of the same bytes measured in the same run.
 *
 * Streams of copies like a loader's (random samples reshuffled per epoch,
 * one copy per batch) go through autolayout_observe in POOL mode before a
 * decision (every copy observed), and the same copies through
 * XXH3_64bits. Prints `name value unit` lines; lines starting with # are
 * comments. Figures (best of 3 runs each):
 *   observe_ROWxBATCH_ns_per_byte   autolayout_observe, per observed byte
 *   xxh3_ROWxBATCH_ns_per_byte      XXH3-64 of each copy, per byte
 *   observe_ROWxBATCH_per_xxh3      the ratio of the two
 *   observe_ROWxBATCH_hashed_per_byte  bytes read to hash per observed byte
 * for 3072x64 (one pass), 150528x64, 2352x64 (two passes: two atom sizes)
 * and weights (one 8 MiB buffer). Then:
 *   suggest_ns_per_offered_byte  SUGGEST mode over 1 GiB of unique copies
 *                                (observes 16 MiB plus 1/16), per byte offered
 *   suggest_observed_share       observed bytes / offered bytes there
 *   found_ns_per_call            autolayout_observe after FOUND (the fast path)
 *   memory_3072_bytes            bytes the module holds after the 3072x64 epochs
 *   memory_bound_bytes           the stated bound (tables and size records)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "pool/autolayout.h"

#define RUNS 3

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Fills n bytes with xorshift64 output. */
static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	for (size_t i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

/* A stream of copies: batches of rows drawn from a dataset in a shuffled order. */
struct stream {
	size_t row, batch, samples, copies;
	unsigned char *data;
	unsigned char **copy;           /* the staged batches, built once */
	size_t *bytes;
};

/* Builds one epoch of batches (the dataset reshuffled) of s. */
static int stream_init(struct stream *s, size_t row, size_t batch, size_t samples, uint64_t seed)
{
	size_t *order = malloc(samples * sizeof(*order));
	uint64_t x = seed | 1;

	s->row = row;
	s->batch = batch;
	s->samples = samples;
	s->copies = (samples + batch - 1) / batch;
	s->data = malloc(samples * row);
	s->copy = calloc(s->copies, sizeof(*s->copy));
	s->bytes = calloc(s->copies, sizeof(*s->bytes));
	if (!order || !s->data || !s->copy || !s->bytes)
		return -1;
	fill_random(s->data, samples * row, seed);
	for (size_t i = 0; i < samples; i++)
		order[i] = i;
	for (size_t i = samples; i > 1; i--) {
		size_t j, t;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		j = (size_t)(x % i);
		t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	for (size_t b = 0; b < s->copies; b++) {
		size_t count = samples - b * batch < batch ? samples - b * batch : batch;

		s->bytes[b] = count * row;
		s->copy[b] = malloc(s->bytes[b]);
		if (!s->copy[b])
			return -1;
		for (size_t k = 0; k < count; k++)
			memcpy(s->copy[b] + k * row, s->data + order[b * batch + k] * row, row);
	}
	free(order);
	return 0;
}

static void stream_free(struct stream *s)
{
	for (size_t b = 0; b < s->copies; b++)
		free(s->copy[b]);
	free(s->copy);
	free(s->bytes);
	free(s->data);
}

/* Best time of RUNS observations of one epoch of s in a fresh POOL-mode module. */
static uint64_t time_observe(const struct stream *s, struct autolayout_result *r)
{
	uint64_t best = UINT64_MAX;

	for (int run = 0; run < RUNS; run++) {
		uint64_t t0, dt;

		autolayout_setup(AUTOLAYOUT_POOL);
		t0 = now_ns();
		for (size_t b = 0; b < s->copies; b++)
			autolayout_observe(s->copy[b], s->bytes[b]);
		dt = now_ns() - t0;
		if (dt < best)
			best = dt;
		autolayout_result(r);
	}
	autolayout_reset();
	return best;
}

/* Best time of RUNS passes of XXH3-64 over each copy of s. */
static uint64_t time_xxh3(const struct stream *s)
{
	uint64_t best = UINT64_MAX, sink = 0;

	for (int run = 0; run < RUNS; run++) {
		uint64_t t0 = now_ns(), dt;

		for (size_t b = 0; b < s->copies; b++)
			sink += XXH3_64bits(s->copy[b], s->bytes[b]);
		dt = now_ns() - t0;
		if (dt < best)
			best = dt;
	}
	__asm__ __volatile__("" : : "r"(sink) : "memory");
	return best;
}

/* Measures one stream and prints its lines. Returns 0 or -1. */
static int bench_stream(const char *name, size_t row, size_t batch, size_t samples,
			struct autolayout_result *r)
{
	struct stream s;
	uint64_t t_obs, t_xxh, bytes = 0;

	if (stream_init(&s, row, batch, samples, 7) != 0)
		return -1;
	for (size_t b = 0; b < s.copies; b++)
		bytes += s.bytes[b];
	t_obs = time_observe(&s, r);
	t_xxh = time_xxh3(&s);
	printf("observe_%s_ns_per_byte %.4f ns\n", name, (double)t_obs / (double)bytes);
	printf("xxh3_%s_ns_per_byte %.4f ns\n", name, (double)t_xxh / (double)bytes);
	printf("observe_%s_per_xxh3 %.2f x\n", name, (double)t_obs / (double)t_xxh);
	printf("observe_%s_hashed_per_byte %.2f x\n", name,
	       r->observed_bytes ? (double)r->hashed_bytes / (double)r->observed_bytes : 0.0);
	stream_free(&s);
	return 0;
}

/* SUGGEST mode over 1 GiB of unique copies (one buffer, a new word per copy). */
static int bench_suggest(void)
{
	size_t n = 4u << 20, copies = 256;
	unsigned char *buf = malloc(n);
	struct autolayout_result r;
	uint64_t best = UINT64_MAX;

	if (!buf)
		return -1;
	fill_random(buf, n, 11);
	for (int run = 0; run < RUNS; run++) {
		uint64_t dt = 0;

		autolayout_setup(AUTOLAYOUT_SUGGEST);
		for (size_t c = 0; c < copies; c++) {
			uint64_t t0;

			for (size_t i = 0; i < n; i += 64)      /* every 64 bytes change: all rows new */
				buf[i] = (unsigned char)(buf[i] + 1);
			t0 = now_ns();
			autolayout_observe(buf, n);
			dt += now_ns() - t0;
		}
		if (dt < best)
			best = dt;
		autolayout_result(&r);
	}
	printf("suggest_ns_per_offered_byte %.4f ns\n", (double)best / (double)(n * copies));
	printf("suggest_observed_share %.3f x\n", (double)r.observed_bytes / (double)(n * copies));
	autolayout_reset();
	free(buf);
	return 0;
}

/* The fast path after FOUND. */
static int bench_found(void)
{
	struct stream s;
	struct autolayout_result r;
	uint64_t t0, dt;
	size_t calls = 1000000;

	if (stream_init(&s, 3072, 64, 512, 13) != 0)
		return -1;
	autolayout_setup(AUTOLAYOUT_POOL);
	for (int e = 0; e < 3; e++)        /* the same order every epoch: whole copies repeat */
		for (size_t b = 0; b < s.copies; b++)
			autolayout_observe(s.copy[b], s.bytes[b]);
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_FOUND) {
		fprintf(stderr, "bench_autolayout: no row found (%s)\n", r.evidence);
		return -1;
	}
	t0 = now_ns();
	for (size_t i = 0; i < calls; i++)
		autolayout_observe(s.copy[i % s.copies], s.bytes[i % s.copies]);
	dt = now_ns() - t0;
	printf("found_ns_per_call %.2f ns\n", (double)dt / (double)calls);
	autolayout_reset();
	stream_free(&s);
	return 0;
}

int main(void)
{
	struct autolayout_result r;

	printf("# bench_autolayout: one epoch per stream, POOL mode before a decision, best of %d\n", RUNS);
	if (bench_stream("3072x64", 3072, 64, 2000, &r) != 0)
		goto oom;
	printf("memory_3072_bytes %llu B\n", (unsigned long long)r.memory);
	if (bench_stream("150528x64", 150528, 64, 256, &r) != 0 ||
	    bench_stream("2352x64", 2352, 64, 4096, &r) != 0 ||
	    bench_stream("weights8M", 8u << 20, 1, 16, &r) != 0)
		goto oom;
	if (bench_suggest() != 0 || bench_found() != 0)
		goto oom;
	printf("memory_bound_bytes %llu B\n", (256ull << 10) * 8 + 16ull * 13 * 1024 + 50 * 1024);
	return 0;
oom:
	fprintf(stderr, "bench_autolayout: out of memory\n");
	return 1;
}
