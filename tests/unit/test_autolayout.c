/*
 * Unit tests of shim/autolayout: synthetic streams of host-to-device copies
 * that mimic a data loader (a dataset reshuffled every epoch, batches of
 * rows assembled into a staging buffer, one copy of the rows and one of the
 * 8-byte labels per batch), offloaded weights, two families of copies,
 * random augmentation and adversarial data. Each test says when the
 * decision must come: a pool filled from that copy on must hold every
 * sample by the third epoch, so for a reshuffled dataset the first copy of
 * the second epoch (the lead's e2e tests allow 5% of an epoch).
 */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cunit_main.h"
#include "pool/autolayout.h"

#define MiB (1ull << 20)

/* A synthetic dataset and its loader. */
struct loader {
	/* Set by the test. */
	size_t samples;
	size_t row;
	size_t batch;
	size_t row2;            /* a second family: one more copy per batch of row2-byte rows */
	int labels;             /* one copy of the batch's 8-byte labels per batch */
	unsigned dup_pct;       /* share of samples that are byte-copies of others */
	int zero;               /* all-zero samples */
	size_t border;          /* bytes of zeros at the start of every sample */
	int augment;            /* every copy new: host-side random augmentation */
	uint64_t seed;

	/* Made by loader_init. */
	unsigned char *data, *data2, *lab;
	unsigned char *stage, *stage2, *stage_lab;
	size_t *order;
	uint64_t rng;

	/* Filled by loader_run. */
	unsigned decided_epoch;         /* epoch of the first decision (1-based), 0: none */
	size_t decided_copy;            /* its batch within that epoch (1-based) */
	unsigned decisions;             /* calls that returned 1 */
	size_t batches_per_epoch;
	uint64_t offered;               /* bytes passed to autolayout_observe */
	uint64_t eligible;              /* copies of at least AUTOLAYOUT_MIN_ROW bytes */
};

/* Returns the next xorshift64 value of *x. */
static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Fills n bytes at p with pseudo-random bytes from *x. */
static void fill_random(unsigned char *p, size_t n, uint64_t *x)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t v = rng_next(x);

		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = (unsigned char)rng_next(x);
}

/* Makes the dataset and the staging buffers of l. */
static void loader_init(struct loader *l)
{
	size_t n = l->samples;

	l->rng = l->seed * 0x9E3779B97F4A7C15ull + 12345;
	l->data = malloc(n * l->row);
	l->data2 = l->row2 ? malloc(n * l->row2) : NULL;
	l->lab = malloc(n * 8);
	l->stage = malloc(l->batch * l->row);
	l->stage2 = l->row2 ? malloc(l->batch * l->row2) : NULL;
	l->stage_lab = malloc(l->batch * 8);
	l->order = malloc(n * sizeof(*l->order));
	CU_ASSERT_FATAL(l->data && l->lab && l->stage && l->stage_lab && l->order);
	CU_ASSERT_FATAL(!l->row2 || (l->data2 && l->stage2));
	if (l->zero)
		memset(l->data, 0, n * l->row);
	else
		fill_random(l->data, n * l->row, &l->rng);
	if (l->row2)
		fill_random(l->data2, n * l->row2, &l->rng);
	fill_random(l->lab, n * 8, &l->rng);
	for (size_t i = 0; i < n && l->border; i++)
		memset(l->data + i * l->row, 0, l->border);
	for (size_t i = 0; i < n; i++) {
		size_t src;

		l->order[i] = i;
		if (l->dup_pct == 0 || rng_next(&l->rng) % 100 >= l->dup_pct || i == 0)
			continue;
		src = (size_t)(rng_next(&l->rng) % i);
		memcpy(l->data + i * l->row, l->data + src * l->row, l->row);
	}
	l->batches_per_epoch = (n + l->batch - 1) / l->batch;
}

static void loader_free(struct loader *l)
{
	free(l->data);
	free(l->data2);
	free(l->lab);
	free(l->stage);
	free(l->stage2);
	free(l->stage_lab);
	free(l->order);
}

/* Observes one copy and records a decision at (epoch, batch). */
static void loader_observe(struct loader *l, const void *p, size_t n, unsigned epoch, size_t batch)
{
	l->offered += n;
	l->eligible += n >= AUTOLAYOUT_MIN_ROW;
	if (autolayout_observe(p, n) != 1)
		return;
	l->decisions++;
	if (!l->decided_epoch) {
		l->decided_epoch = epoch;
		l->decided_copy = batch;
	}
}

/* Runs epochs first..last (1-based) of the loader. */
static void loader_run(struct loader *l, unsigned first, unsigned last)
{
	for (unsigned e = first; e <= last; e++) {
		for (size_t i = l->samples; i > 1; i--) {      /* Fisher-Yates */
			size_t j = (size_t)(rng_next(&l->rng) % i), t = l->order[i - 1];

			l->order[i - 1] = l->order[j];
			l->order[j] = t;
		}
		for (size_t b = 0; b * l->batch < l->samples; b++) {
			size_t count = l->samples - b * l->batch < l->batch ? l->samples - b * l->batch : l->batch;

			for (size_t k = 0; k < count; k++) {
				size_t s = l->order[b * l->batch + k];

				memcpy(l->stage + k * l->row, l->data + s * l->row, l->row);
				if (l->row2)
					memcpy(l->stage2 + k * l->row2, l->data2 + s * l->row2, l->row2);
				memcpy(l->stage_lab + k * 8, l->lab + s * 8, 8);
			}
			if (l->augment) {
				uint64_t m = rng_next(&l->rng) | 1;

				for (size_t k = 0; k + 8 <= count * l->row; k += 8) {
					uint64_t v;

					memcpy(&v, l->stage + k, 8);
					v ^= m;
					memcpy(l->stage + k, &v, 8);
				}
			}
			loader_observe(l, l->stage, count * l->row, e, b + 1);
			if (l->row2)
				loader_observe(l, l->stage2, count * l->row2, e, b + 1);
			if (l->labels)
				loader_observe(l, l->stage_lab, count * 8, e, b + 1);
		}
	}
}

/* Returns 1 when the layout has a fixed row of row bytes. */
static int layout_has(const struct layout *l, uint64_t row)
{
	for (int i = 0; i < l->nrows; i++)
		if (l->rows[i] == row)
			return 1;
	return 0;
}

/* Prints the result when a test is about to fail on it. */
static void show(const char *what, const struct autolayout_result *r, const struct loader *l)
{
	fprintf(stderr, "\n  %s: state %d layout '%s' decided epoch %u batch %zu of %zu\n  evidence: %s\n",
		what, r->state, r->layout.text, l ? l->decided_epoch : 0, l ? l->decided_copy : 0,
		l ? l->batches_per_epoch : 0, r->evidence);
}

/*
 * Runs a reshuffled dataset in POOL mode for three epochs and asserts that
 * the layout found is exactly row (and row2 when set), decided at the first
 * batch of the second epoch, or by batch max_batch.
 */
static void expect_found_early(struct loader *l, size_t max_batch)
{
	struct autolayout_result r;

	autolayout_setup(AUTOLAYOUT_POOL);
	loader_init(l);
	loader_run(l, 1, 3);
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_FOUND || !layout_has(&r.layout, l->row) ||
	    (l->row2 && !layout_has(&r.layout, l->row2)) || r.layout.nrows != (l->row2 ? 2 : 1) ||
	    l->decided_epoch != 2 || l->decided_copy > max_batch)
		show("expected the row early in epoch 2", &r, l);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_FOUND);
	CU_ASSERT(layout_has(&r.layout, l->row));
	if (l->row2)
		CU_ASSERT(layout_has(&r.layout, l->row2));
	CU_ASSERT_EQUAL(r.layout.nrows, l->row2 ? 2 : 1);
	CU_ASSERT_EQUAL(l->decided_epoch, 2);
	CU_ASSERT(l->decided_copy >= 1 && l->decided_copy <= max_batch);
	CU_ASSERT_EQUAL(l->decisions, 1);
	loader_free(l);
	autolayout_reset();
}

static void test_trainer_3072(void)
{
	struct loader l = { .samples = 2000, .row = 3072, .batch = 64, .labels = 1, .seed = 1 };
	struct autolayout_result r;

	expect_found_early(&l, 1);
	/* The text, and the evidence naming the row, its rate and the next size. */
	autolayout_setup(AUTOLAYOUT_POOL);
	l = (struct loader){ .samples = 2000, .row = 3072, .batch = 64, .labels = 1, .seed = 2 };
	loader_init(&l);
	loader_run(&l, 1, 2);
	autolayout_result(&r);
	CU_ASSERT_STRING_EQUAL(r.layout.text, "3072");
	CU_ASSERT(strstr(r.evidence, "rows of 3072 bytes repeated in 100%") != NULL);
	CU_ASSERT(strstr(r.evidence, "196608-byte copies") != NULL);
	CU_ASSERT(strstr(r.evidence, "(6144: 0%") != NULL);
	if (!strstr(r.evidence, "(6144: 0%"))
		show("evidence", &r, &l);
	CU_ASSERT(r.nsizes >= 2);
	CU_ASSERT_EQUAL(r.sizes[0].size, 196608);
	CU_ASSERT_EQUAL(r.sizes[0].row, 3072);
	loader_free(&l);
	autolayout_reset();
}

static void test_trainer_150528(void)
{
	struct loader a = { .samples = 300, .row = 150528, .batch = 64, .labels = 1, .seed = 3 };
	struct loader b = { .samples = 200, .row = 150528, .batch = 32, .labels = 1, .seed = 4 };

	expect_found_early(&a, 1);
	expect_found_early(&b, 1);
}

static void test_duplicates(void)
{
	struct loader l = { .samples = 2000, .row = 3072, .batch = 64, .labels = 1,
			    .dup_pct = 30, .seed = 5 };
	struct autolayout_result r;

	autolayout_setup(AUTOLAYOUT_POOL);
	loader_init(&l);
	loader_run(&l, 1, 3);
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_FOUND || strcmp(r.layout.text, "3072") != 0)
		show("duplicates", &r, &l);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_FOUND);
	CU_ASSERT_STRING_EQUAL(r.layout.text, "3072");
	/* Duplicates repeat inside the first epoch: deciding there is fine. */
	CU_ASSERT(l.decided_epoch == 1 || (l.decided_epoch == 2 && l.decided_copy <= 1));
	loader_free(&l);
	autolayout_reset();
}

static void test_smaller_than_a_batch(void)
{
	struct loader l = { .samples = 40, .row = 3072, .batch = 64, .labels = 1, .seed = 6 };

	expect_found_early(&l, 1);
}

static void test_batch_of_one(void)
{
	struct loader l = { .samples = 600, .row = 3072, .batch = 1, .labels = 1, .seed = 7 };

	/* One sample per copy: 5% of the epoch is 30 copies. */
	expect_found_early(&l, 30);
}

static void test_many_divisors(void)
{
	/* 5040 = 7! has 60 divisors; copies of 48 rows have 144. */
	struct loader l = { .samples = 1000, .row = 5040, .batch = 48, .labels = 1, .seed = 8 };

	expect_found_early(&l, 1);
}

static void test_prime_row(void)
{
	struct loader l = { .samples = 1000, .row = 3079, .batch = 64, .labels = 1, .seed = 9 };

	expect_found_early(&l, 1);
}

static void test_odd_image_row(void)
{
	/* u8:3x28x28 = 2352 = 16 * 147: its copies need a second atom class. */
	struct loader l = { .samples = 1000, .row = 2352, .batch = 64, .labels = 1, .seed = 10 };

	expect_found_early(&l, 1);
}

static void test_two_families(void)
{
	struct loader l = { .samples = 500, .row = 32768, .row2 = 8192, .batch = 64,
			    .labels = 1, .seed = 11 };

	struct autolayout_result r;
	int masks = 0;

	/* Images then masks: the masks' first copy of epoch 2 completes it. */
	expect_found_early(&l, 1);
	/*
	 * The layout alone would cut the masks' copies (16 rows of 32768 bytes)
	 * at 32768; the table of sizes says which row each size has.
	 */
	autolayout_setup(AUTOLAYOUT_POOL);
	l = (struct loader){ .samples = 500, .row = 32768, .row2 = 8192, .batch = 64, .seed = 21 };
	loader_init(&l);
	loader_run(&l, 1, 2);
	autolayout_result(&r);
	for (int i = 0; i < r.nsizes; i++) {
		if (r.sizes[i].size == 64 * 8192) {
			CU_ASSERT_EQUAL(r.sizes[i].row, 8192);
			masks = 1;
		}
		if (r.sizes[i].size == 64 * 32768)
			CU_ASSERT_EQUAL(r.sizes[i].row, 32768);
	}
	CU_ASSERT(masks);
	CU_ASSERT_EQUAL(layout_match(&r.layout, 64 * 8192), 32768);
	loader_free(&l);
	autolayout_reset();
}

static void test_black_borders(void)
{
	/* Every sample starts with 1 KiB of zeros: rows of 256..1024 there repeat all the time. */
	struct loader l = { .samples = 2000, .row = 3072, .batch = 64, .labels = 1,
			    .border = 1024, .seed = 12 };

	expect_found_early(&l, 1);
}

static void test_all_zero_samples(void)
{
	struct loader l = { .samples = 2000, .row = 3072, .batch = 64, .labels = 1,
			    .zero = 1, .seed = 13 };
	struct autolayout_result r;

	/*
	 * Content cannot tell the sample size of identical samples; whatever is
	 * found must cut the full batches into rows that repeat.
	 */
	autolayout_setup(AUTOLAYOUT_POOL);
	loader_init(&l);
	loader_run(&l, 1, 2);
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_FOUND)
		show("all-zero", &r, &l);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_FOUND);
	CU_ASSERT(layout_match(&r.layout, 64 * 3072) != 0);
	CU_ASSERT_EQUAL(l.decided_epoch, 1);
	loader_free(&l);
	autolayout_reset();
}

static void test_weights(void)
{
	size_t sizes[] = { 4 * MiB, 2 * MiB, 1 * MiB + 4096 };
	unsigned char *w[3];
	uint64_t x = 99;
	unsigned decided = 0, decisions = 0;
	struct autolayout_result r;

	autolayout_setup(AUTOLAYOUT_POOL);
	for (int i = 0; i < 3; i++) {
		w[i] = malloc(sizes[i]);
		CU_ASSERT_FATAL(w[i] != NULL);
		fill_random(w[i], sizes[i], &x);
	}
	for (unsigned step = 1; step <= 20; step++)
		for (int i = 0; i < 3; i++)
			if (autolayout_observe(w[i], sizes[i]) == 1) {
				decisions++;
				if (!decided)
					decided = step;
			}
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_FOUND || r.layout.nrows != 3)
		show("weights", &r, NULL);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_FOUND);
	CU_ASSERT_EQUAL(r.layout.nrows, 3);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT(layout_has(&r.layout, sizes[i]));
		CU_ASSERT_EQUAL(layout_match(&r.layout, sizes[i]), sizes[i]);
		free(w[i]);
	}
	CU_ASSERT(decided >= 2 && decided <= 8);
	CU_ASSERT_EQUAL(decisions, 1);
	autolayout_reset();
}

static void test_random_augmentation(void)
{
	/* 2.4 MB copies, every one new: NOTHING after 256 MiB and 64 copies. */
	struct loader l = { .samples = 160, .row = 150528, .batch = 16, .labels = 1,
			    .augment = 1, .seed = 14 };
	struct autolayout_result r;

	autolayout_setup(AUTOLAYOUT_POOL);
	loader_init(&l);
	loader_run(&l, 1, 12);
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_NOTHING)
		show("augmentation", &r, &l);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_NOTHING);
	CU_ASSERT_EQUAL(r.layout.nrows, 0);
	CU_ASSERT(strstr(r.evidence, "no row size repeated") != NULL);
	CU_ASSERT(strstr(r.evidence, "random augmentation") != NULL);
	CU_ASSERT_EQUAL(l.decisions, 1);
	/* Bounded: decided within the epoch after 256 MiB went by. */
	CU_ASSERT(l.decided_epoch >= 2 && (l.decided_epoch - 1) * 160ull * 150528 < 256 * MiB + 24 * MiB);
	/* After NOTHING it observes a sixteenth of the bytes. */
	CU_ASSERT(r.observed_bytes < 300 * MiB + l.offered / 16);
	loader_free(&l);
	autolayout_reset();
}

static void test_nothing_is_not_final(void)
{
	struct loader l = { .samples = 160, .row = 150528, .batch = 16, .augment = 1, .seed = 15 };
	size_t wsize = 1 * MiB;
	unsigned char *w = malloc(wsize);
	uint64_t x = 5;
	unsigned decisions = 0;
	struct autolayout_result r;

	CU_ASSERT_FATAL(w != NULL);
	fill_random(w, wsize, &x);
	autolayout_setup(AUTOLAYOUT_POOL);
	loader_init(&l);
	loader_run(&l, 1, 12);
	autolayout_result(&r);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_NOTHING);
	/* Weights start coming back: observed a sixteenth of the time, still found. */
	for (int step = 0; step < 4000 && decisions == 0; step++)
		decisions += (unsigned)autolayout_observe(w, wsize);
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_FOUND)
		show("after nothing", &r, &l);
	CU_ASSERT_EQUAL(decisions, 1);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_FOUND);
	CU_ASSERT(layout_has(&r.layout, wsize));
	loader_free(&l);
	free(w);
	autolayout_reset();
}

static void test_pool_mode_stops_after_found(void)
{
	struct loader l = { .samples = 500, .row = 3072, .batch = 64, .labels = 1, .seed = 16 };
	struct autolayout_result a, b;

	autolayout_setup(AUTOLAYOUT_POOL);
	loader_init(&l);
	loader_run(&l, 1, 2);
	autolayout_result(&a);
	CU_ASSERT_EQUAL(a.state, AUTOLAYOUT_FOUND);
	loader_run(&l, 3, 5);
	autolayout_result(&b);
	CU_ASSERT_EQUAL(b.observed_copies, a.observed_copies);
	CU_ASSERT_EQUAL(b.observed_bytes, a.observed_bytes);
	CU_ASSERT_STRING_EQUAL(b.layout.text, a.layout.text);
	CU_ASSERT_EQUAL(l.decisions, 1);
	loader_free(&l);
	autolayout_reset();
}

static void test_suggest_finds_the_row(void)
{
	struct loader l = { .samples = 2000, .row = 3072, .batch = 64, .labels = 1, .seed = 17 };
	struct autolayout_result r;

	autolayout_setup(AUTOLAYOUT_SUGGEST);
	loader_init(&l);
	loader_run(&l, 1, 3);
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_FOUND)
		show("suggest", &r, &l);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_FOUND);
	CU_ASSERT_STRING_EQUAL(r.layout.text, "3072");
	loader_free(&l);
	autolayout_reset();
}

static void test_suggest_share_is_bounded(void)
{
	/* A long run of unique copies: SUGGEST observes 16 MiB, then 1/16 of the bytes. */
	struct loader l = { .samples = 160, .row = 150528, .batch = 16, .augment = 1, .seed = 18 };
	struct autolayout_result r;

	autolayout_setup(AUTOLAYOUT_SUGGEST);
	loader_init(&l);
	loader_run(&l, 1, 6);
	autolayout_result(&r);
	CU_ASSERT(r.observed_bytes <= 16 * MiB + l.offered / 16 + 16 * 150528);
	CU_ASSERT(r.observed_bytes > 0);
	CU_ASSERT(r.hashed_bytes <= 2 * r.observed_bytes);
	CU_ASSERT_NOT_EQUAL(r.state, AUTOLAYOUT_FOUND);
	loader_free(&l);
	autolayout_reset();
}

static void test_looking_before_the_second_epoch(void)
{
	struct loader l = { .samples = 2000, .row = 3072, .batch = 64, .labels = 1, .seed = 19 };
	struct autolayout_result r;

	autolayout_setup(AUTOLAYOUT_POOL);
	loader_init(&l);
	loader_run(&l, 1, 1);
	autolayout_result(&r);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_LOOKING);
	CU_ASSERT_EQUAL(r.layout.nrows, 0);
	CU_ASSERT(strstr(r.evidence, "no row repeated yet") != NULL);
	CU_ASSERT_EQUAL(r.observed_copies, l.eligible);   /* the last 16 labels are under the smallest row */
	CU_ASSERT_EQUAL(l.eligible, 2 * l.batches_per_epoch - 1);
	CU_ASSERT(r.memory > 0 && r.memory <= 5 * MiB);
	loader_free(&l);
	autolayout_reset();
}

static void test_small_copies_are_ignored(void)
{
	unsigned char buf[AUTOLAYOUT_MIN_ROW] = { 0 };
	struct autolayout_result r;

	autolayout_setup(AUTOLAYOUT_POOL);
	for (int i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(autolayout_observe(buf, AUTOLAYOUT_MIN_ROW - 1), 0);
	CU_ASSERT_EQUAL(autolayout_observe(NULL, 4096), 0);
	autolayout_result(&r);
	CU_ASSERT_EQUAL(r.observed_copies, 0);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_LOOKING);
	autolayout_reset();
}

static void test_reset_forgets(void)
{
	struct loader l = { .samples = 300, .row = 3072, .batch = 64, .labels = 1, .seed = 20 };
	struct autolayout_result r;

	autolayout_setup(AUTOLAYOUT_POOL);
	loader_init(&l);
	loader_run(&l, 1, 2);
	autolayout_reset();
	autolayout_result(&r);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_LOOKING);
	CU_ASSERT_EQUAL(r.observed_copies, 0);
	CU_ASSERT_EQUAL(r.memory, 0);
	CU_ASSERT_EQUAL(r.nsizes, 0);
	loader_free(&l);
}

static void test_changing_sizes(void)
{
	struct loader l = { .samples = 2000, .row = 3072, .batch = 64, .labels = 1, .seed = 22 };
	unsigned char *junk = malloc(200000);
	uint64_t x = 77;
	struct autolayout_result r;

	/*
	 * Copies of a new size each time (dynamic shapes) before and between the
	 * batches: sizes give way at most once per 32 copies, memory stays
	 * bounded, and the trainer's row is still found early in epoch 2.
	 */
	CU_ASSERT_FATAL(junk != NULL);
	autolayout_setup(AUTOLAYOUT_POOL);
	for (int i = 0; i < 300; i++) {
		size_t n = 1000 + (size_t)(rng_next(&x) % 199000);

		fill_random(junk, n, &x);
		CU_ASSERT_EQUAL(autolayout_observe(junk, n), 0);
	}
	autolayout_result(&r);
	CU_ASSERT(r.nsizes <= AUTOLAYOUT_MAX_SIZES);
	CU_ASSERT(r.observed_copies < 16 + 300 / 32 + 2);
	CU_ASSERT(r.memory <= 3 * MiB);
	loader_init(&l);
	for (unsigned e = 1; e <= 3; e++) {
		loader_run(&l, e, e);
		for (int i = 0; i < 40; i++) {
			size_t n = 1000 + (size_t)(rng_next(&x) % 199000);

			fill_random(junk, n, &x);
			autolayout_observe(junk, n);
		}
	}
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_FOUND || strcmp(r.layout.text, "3072") != 0) {
		show("changing sizes", &r, &l);
		for (int i = 0; i < r.nsizes; i++)
			fprintf(stderr, "  size %llu row %llu bytes %llu\n", (unsigned long long)r.sizes[i].size,
				(unsigned long long)r.sizes[i].row, (unsigned long long)r.sizes[i].bytes);
	}
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_FOUND);
	CU_ASSERT_STRING_EQUAL(r.layout.text, "3072");
	CU_ASSERT_EQUAL(l.decided_epoch, 2);
	CU_ASSERT(l.decided_copy <= 2);
	CU_ASSERT(r.memory <= 3 * MiB);
	loader_free(&l);
	free(junk);
	autolayout_reset();
}

/* One thread's loader for the concurrency test. */
static void *concurrent_loader(void *arg)
{
	struct loader *l = arg;

	loader_run(l, 1, 4);
	return NULL;
}

static atomic_int reader_stop;

/* Asks for the result until told to stop; checks what must always hold. */
static void *concurrent_reader(void *arg)
{
	struct autolayout_result r;
	int *bad = arg;

	while (!atomic_load(&reader_stop)) {
		autolayout_result(&r);
		if (!memchr(r.evidence, '\0', sizeof(r.evidence)) || r.nsizes > AUTOLAYOUT_MAX_SIZES ||
		    (r.state == AUTOLAYOUT_FOUND) != (r.layout.nrows > 0))
			*bad = 1;
	}
	return NULL;
}

static void test_concurrent_observers(void)
{
	struct loader l[4];
	pthread_t t[4], reader;
	struct autolayout_result r;
	uint64_t eligible = 0;
	unsigned decisions = 0;
	int bad = 0;

	/*
	 * Four loaders at once: a copy that finds the module busy is skipped,
	 * so how many are observed depends on the timing; what holds always is
	 * checked, then the module goes on, consistent, with one loader.
	 */
	autolayout_setup(AUTOLAYOUT_POOL);
	for (int i = 0; i < 4; i++) {
		l[i] = (struct loader){ .samples = 500, .row = 3072, .batch = 64, .labels = 1,
					.seed = 30 + (uint64_t)i };
		loader_init(&l[i]);
	}
	atomic_store(&reader_stop, 0);
	CU_ASSERT_FATAL(pthread_create(&reader, NULL, concurrent_reader, &bad) == 0);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_FATAL(pthread_create(&t[i], NULL, concurrent_loader, &l[i]) == 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		eligible += l[i].eligible;
		decisions += l[i].decisions;
	}
	atomic_store(&reader_stop, 1);
	pthread_join(reader, NULL);
	CU_ASSERT_EQUAL(bad, 0);
	autolayout_result(&r);
	CU_ASSERT(r.observed_copies <= eligible);   /* a tight reader can keep it busy throughout */
	CU_ASSERT(decisions <= 1);
	CU_ASSERT(r.state != AUTOLAYOUT_NOTHING);
	if (r.state == AUTOLAYOUT_FOUND)
		CU_ASSERT_STRING_EQUAL(r.layout.text, "3072");
	loader_run(&l[0], 5, 8);
	autolayout_result(&r);
	if (r.state != AUTOLAYOUT_FOUND)
		show("after concurrent", &r, &l[0]);
	CU_ASSERT_EQUAL(r.state, AUTOLAYOUT_FOUND);
	CU_ASSERT_STRING_EQUAL(r.layout.text, "3072");
	decisions = 0;
	for (int i = 0; i < 4; i++) {
		decisions += l[i].decisions;
		loader_free(&l[i]);
	}
	CU_ASSERT_EQUAL(decisions, 1);
	autolayout_reset();
}

static void test_forked_child(void)
{
	struct loader l = { .samples = 500, .row = 3072, .batch = 64, .labels = 1, .seed = 23 };
	int status = 0;
	pid_t pid;

	/* The parent saw an epoch; the child forgets it and finds the row on its own. */
	autolayout_setup(AUTOLAYOUT_POOL);
	loader_init(&l);
	loader_run(&l, 1, 1);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		struct autolayout_result r;

		autolayout_reset();
		autolayout_result(&r);
		if (r.observed_copies != 0 || r.memory != 0)
			_exit(1);
		autolayout_setup(AUTOLAYOUT_POOL);
		loader_run(&l, 2, 3);
		autolayout_result(&r);
		_exit(r.state == AUTOLAYOUT_FOUND && strcmp(r.layout.text, "3072") == 0 &&
		      l.decided_epoch == 3 ? 0 : 2);
	}
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	loader_free(&l);
	autolayout_reset();
}

static const CU_TestInfo tests[] = {
	{ "3072-byte samples in batches of 64 are found at the first copy of epoch 2",
	  test_trainer_3072 },
	{ "150528-byte samples in batches of 32 and 64 are found at the first copy of epoch 2",
	  test_trainer_150528 },
	{ "duplicate samples inside the first epoch do not change the row found", test_duplicates },
	{ "a dataset smaller than one batch is found from its second copy",
	  test_smaller_than_a_batch },
	{ "with batches of one sample the copy size is the row", test_batch_of_one },
	{ "a row among many divisors of the copy size is found", test_many_divisors },
	{ "a prime row size is found", test_prime_row },
	{ "a row of 16 times an odd number of bytes is found", test_odd_image_row },
	{ "two families in separate copies are both found", test_two_families },
	{ "samples with identical first bytes (black borders) are found at their size",
	  test_black_borders },
	{ "all-zero samples give a layout whose rows repeat", test_all_zero_samples },
	{ "offloaded weights re-uploaded every step are found as whole copies", test_weights },
	{ "random augmentation is stated as NOTHING after a bounded observation",
	  test_random_augmentation },
	{ "NOTHING is not final: rows that start repeating later are found",
	  test_nothing_is_not_final },
	{ "POOL mode stops observing after FOUND", test_pool_mode_stops_after_found },
	{ "SUGGEST mode finds the row of a three-epoch run", test_suggest_finds_the_row },
	{ "SUGGEST mode observes a bounded share of the bytes", test_suggest_share_is_bounded },
	{ "nothing is decided during the first epoch", test_looking_before_the_second_epoch },
	{ "copies under the smallest row are ignored", test_small_copies_are_ignored },
	{ "reset forgets everything", test_reset_forgets },
	{ "copies of ever-changing sizes neither hold up the decision nor grow memory",
	  test_changing_sizes },
	{ "concurrent observers skip a busy module and leave it consistent",
	  test_concurrent_observers },
	{ "a forked child forgets the parent's observations and finds the row itself",
	  test_forked_child },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "autolayout",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
