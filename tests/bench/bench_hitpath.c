/*
 * Benchmark of the shim's host hit path for small rows: fingerprint a copy's
 * rows, then look them all up in an index of pool size, as the pool does for
 * every layout-matched copy.
 *
 * A dataset of distinct rows (at most 64 MiB) is fingerprinted and indexed;
 * random keys fill the index up to ENTRIES. Each simulated copy hashes a
 * batch of BATCH dataset rows gathered beforehand (warm in cache, as a
 * freshly collated batch is), and looks up the fingerprints of BATCH random
 * dataset rows (every one a hit, the index met cold as over an epoch).
 * Figures are per row, for each repetition of REPS x COPIES copies: min and
 * median over the repetitions.
 *
 * Usage: bench_hitpath [ROW ENTRIES BATCH [SECONDS]]
 *   no arguments: the matrix ROW in {64, 3072} x ENTRIES in {10^5, 10^6} x
 *   BATCH in {64, 256}; with arguments, one configuration, repeated for about
 *   SECONDS (default 5; for perf record), every copy with index_lookup_many,
 *   printing hit_hash_ns and hit_lookup_ns (means per row).
 * Prints `name value unit` lines (# lines are comments):
 *   hit_R_nE_bB_hash_ns_{min,median}      fingerprint_rows per row
 *   hit_R_nE_bB_lookup_ns_{min,median}    index_lookup_many per row
 *   hit_R_nE_bB_single_ns_{min,median}    index_lookup one row at a time, per row
 *   hit_R_nE_bB_lookup_per_hash_median    lookup / hash (the lookup's share)
 * where R is the row size, E the entries (1e5, 1e6) and B the batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool/fingerprint.h"
#include "pool/index.h"

#define DATA_MAX (64ull << 20)
#define REPS 9
#define COPIES 64

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

/* The state of one configuration. */
struct hitpath {
	size_t row, entries, batch, nrows, nbatches;
	unsigned char *data, *batches;
	struct index ix;
	struct fp *all;                 /* the fingerprint of every dataset row */
	struct fp *fps, *keys;
	uint64_t *vals;
	uint8_t *found;
	uint64_t rng;
	size_t wrong;
	int batch_only;                 /* every copy uses index_lookup_many */
};

/*
 * Builds the dataset, its index and BATCHES pre-gathered batches (about
 * 8 MiB in all, so that they stay in the last-level cache as a freshly
 * collated batch would). Returns 0 or -1.
 */
static int hitpath_init(struct hitpath *h, size_t row, size_t entries, size_t batch)
{
	uint64_t x = 0x9E3779B97F4A7C15ull;

	memset(h, 0, sizeof(*h));
	h->row = row;
	h->entries = entries;
	h->batch = batch;
	h->nrows = DATA_MAX / row < entries ? DATA_MAX / row : entries;
	h->nbatches = (8ull << 20) / (batch * row);
	if (h->nbatches < 2)
		h->nbatches = 2;
	h->rng = 12345;
	h->data = malloc(h->nrows * row);
	h->batches = malloc(h->nbatches * batch * row);
	h->all = malloc(h->nrows * sizeof(*h->all));
	h->fps = malloc(batch * sizeof(*h->fps));
	h->keys = malloc(batch * sizeof(*h->keys));
	h->vals = malloc(batch * sizeof(*h->vals));
	h->found = malloc(batch);
	if (!h->data || !h->batches || !h->all || !h->fps || !h->keys || !h->vals || !h->found)
		return -1;
	for (size_t i = 0; i < h->nrows * row; i += 8) {
		uint64_t v = rng_next(&x);

		memcpy(h->data + i, &v, row - i % row < 8 ? row - i % row : 8);
	}
	fingerprint_rows(h->data, row, h->nrows, h->all);
	if (index_init(&h->ix, 0))
		return -1;
	for (size_t i = 0; i < h->nrows; i++)
		index_insert(&h->ix, &h->all[i], i);
	for (size_t i = h->nrows; i < entries; i++) {
		struct fp k = { rng_next(&x), rng_next(&x) };

		index_insert(&h->ix, &k, i);
	}
	for (size_t i = 0; i < h->nbatches * batch; i++)
		memcpy(h->batches + i * row, h->data + rng_next(&h->rng) % h->nrows * row, row);
	for (size_t b = 0; b < h->nbatches; b++) {
		fingerprint_rows(h->batches + b * batch * row, row, batch, h->fps);
		index_lookup_many(&h->ix, h->fps, batch, h->vals, h->found);
		for (size_t i = 0; i < batch; i++)
			h->wrong += !h->found[i];
	}
	return 0;
}

static void hitpath_release(struct hitpath *h)
{
	index_release(&h->ix);
	free(h->found);
	free(h->vals);
	free(h->keys);
	free(h->fps);
	free(h->all);
	free(h->batches);
	free(h->data);
}

/*
 * Runs copies copies. Each hashes the next pre-gathered batch (its
 * nanoseconds go to t[0]), then looks up the fingerprints of a fresh random
 * batch of dataset rows, so that the index is met cold as in an epoch over
 * a large dataset: with index_lookup_many on even copies (t[1]), with
 * index_lookup row by row on odd ones (t[2]).
 */
static void hitpath_run(struct hitpath *h, size_t copies, uint64_t t[3])
{
	for (size_t c = 0; c < copies; c++) {
		const unsigned char *b = h->batches + (h->rng % h->nbatches) * h->batch * h->row;
		uint64_t t0, t1, t2, sum = 0;

		for (size_t i = 0; i < h->batch; i++)
			h->keys[i] = h->all[rng_next(&h->rng) % h->nrows];
		t0 = now_ns();
		fingerprint_rows(b, h->row, h->batch, h->fps);
		t1 = now_ns();
		if (c % 2 == 0 || h->batch_only) {
			index_lookup_many(&h->ix, h->keys, h->batch, h->vals, h->found);
		} else {
			for (size_t i = 0; i < h->batch; i++)
				h->found[i] = index_lookup(&h->ix, &h->keys[i], &h->vals[i]) == 0;
		}
		t2 = now_ns();
		for (size_t i = 0; i < h->batch; i++) {
			h->wrong += !h->found[i];
			sum += h->vals[i] + h->fps[i].lo;
		}
		__asm__ __volatile__("" : : "r"(sum));
		t[0] += t1 - t0;
		t[h->batch_only ? 1 : 1 + c % 2] += t2 - t1;
	}
}

/* Prints the figures of one configuration. Returns the wrong lookups. */
static size_t hitpath_report(size_t row, size_t entries, size_t batch)
{
	static const char *what[3] = { "hash", "lookup", "single" };
	double per[3][REPS];
	struct hitpath h;
	char name[64];
	size_t wrong;

	if (hitpath_init(&h, row, entries, batch)) {
		fprintf(stderr, "bench_hitpath: out of memory\n");
		exit(1);
	}
	hitpath_run(&h, COPIES / 4, (uint64_t[3]){ 0 });     /* warm up */
	for (int r = 0; r < REPS; r++) {
		uint64_t t[3] = { 0 };

		hitpath_run(&h, COPIES, t);
		for (int k = 0; k < 3; k++)
			per[k][r] = (double)t[k] / (double)((k ? COPIES / 2 : COPIES) * batch);
	}
	snprintf(name, sizeof(name), "hit_%zu_n%s_b%zu", row,
		 entries >= 1000000 ? "1e6" : entries >= 100000 ? "1e5" : "small", batch);
	printf("# %s: %zu distinct rows of %zu B, index of %zu entries (%zu B), batch %zu\n",
	       name, h.nrows, row, h.ix.count, index_bytes(&h.ix), batch);
	for (int k = 0; k < 3; k++) {
		qsort(per[k], REPS, sizeof(double), cmp_double);
		printf("%s_%s_ns_min %.1f ns\n", name, what[k], per[k][0]);
		printf("%s_%s_ns_median %.1f ns\n", name, what[k], per[k][REPS / 2]);
	}
	printf("%s_lookup_per_hash_median %.2f x\n", name, per[1][REPS / 2] / per[0][REPS / 2]);
	wrong = h.wrong;
	if (wrong)
		printf("# WRONG: %zu lookups missed\n", wrong);
	hitpath_release(&h);
	return wrong;
}

int main(int argc, char **argv)
{
	size_t rows[] = { 64, 3072 }, entries[] = { 100000, 1000000 }, batches[] = { 64, 256 };
	size_t wrong = 0;

	fingerprint_init(1);
	if (argc >= 4) {
		struct hitpath h;
		double seconds = argc > 4 ? strtod(argv[4], NULL) : 5;
		uint64_t t[3] = { 0 }, copies = 0, end;

		if (hitpath_init(&h, strtoull(argv[1], NULL, 10), strtoull(argv[2], NULL, 10),
				 strtoull(argv[3], NULL, 10)) || h.row == 0 || h.batch == 0) {
			fprintf(stderr, "bench_hitpath: bad arguments or out of memory\n");
			return 1;
		}
		h.batch_only = 1;
		end = now_ns() + (uint64_t)(seconds * 1e9);
		while (now_ns() < end) {
			hitpath_run(&h, COPIES, t);
			copies += COPIES;
		}
		printf("hit_hash_ns %.1f ns\nhit_lookup_ns %.1f ns\n",
		       (double)t[0] / (double)(copies * h.batch),
		       (double)t[1] / (double)(copies * h.batch));
		wrong = h.wrong;
		hitpath_release(&h);
		return wrong ? 1 : 0;
	}
	for (size_t r = 0; r < 2; r++)
		for (size_t e = 0; e < 2; e++)
			for (size_t b = 0; b < 2; b++)
				wrong += hitpath_report(rows[r], entries[e], batches[b]);
	fingerprint_shutdown();
	return wrong ? 1 : 0;
}
