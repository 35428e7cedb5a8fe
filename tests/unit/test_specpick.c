/*
 * Unit tests of specpick: copies whose size several specs divide are cut
 * by the spec whose rows repeat, decided at the first copy that shows it.
 */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "pool/fingerprint.h"
#include "core/layout.h"
#include "pool/specpick.h"

#define IMG 32768
#define MASK 8192

/* Sample id's bytes of len: pseudo-random, seeded by id and kind (no part repeats). */
static void t_fill(unsigned char *p, uint64_t len, uint32_t id, unsigned kind)
{
	uint64_t x = 0x9E3779B97F4A7C15ULL * (id + 1) ^ (0xD1B54A32D192ED03ULL * (kind + 1));

	for (uint64_t b = 0; b < len; b++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[b] = (unsigned char)(x >> 24);
	}
}

/* A batch of samples ids of row bytes each. */
static unsigned char *t_batch(const uint32_t *ids, int n, uint64_t row, unsigned kind)
{
	unsigned char *p = malloc((size_t)n * row);

	CU_ASSERT_FATAL(p != NULL);
	for (int i = 0; i < n; i++)
		t_fill(p + (uint64_t)i * row, row, ids[i], kind);
	return p;
}

static enum specpick_result t_choose(const struct layout *l, const unsigned char *src, uint64_t n,
				     struct layout_hit *hit)
{
	CU_ASSERT_FATAL(layout_match_hit(l, n, hit));
	return specpick_choose(l, n, src, hit);
}

static void test_images_and_masks(void)
{
	struct layout l;
	struct layout_hit hit;
	uint32_t ids[256];
	char err[128];
	int undecided = 0;

	specpick_reset();
	CU_ASSERT_FATAL(layout_parse(&l, "32768@1,8192", err, sizeof(err)) == 0);
	for (int i = 0; i < 256; i++)
		ids[i] = (uint32_t)i;
	/* epoch 1: batches of 32 images (1 MiB) and 32 masks (256 KiB): both sizes
	 * are divided by both specs; nothing repeats yet */
	for (int b = 0; b < 8; b++) {
		unsigned char *img = t_batch(ids + 32 * b, 32, IMG, 0);
		unsigned char *mask = t_batch(ids + 32 * b, 32, MASK, 1);

		undecided += t_choose(&l, img, 32 * IMG, &hit) == SPECPICK_UNDECIDED;
		CU_ASSERT_EQUAL(hit.row, IMG);         /* the largest, for hits only */
		undecided += t_choose(&l, mask, 32 * MASK, &hit) == SPECPICK_UNDECIDED;
		free(img);
		free(mask);
	}
	CU_ASSERT_EQUAL(undecided, 16);
	/* epoch 2, reshuffled: the first copy of each size decides */
	for (int i = 0; i < 256; i++)
		ids[i] = (uint32_t)((i * 37) % 256);
	{
		unsigned char *img = t_batch(ids, 32, IMG, 0);
		unsigned char *mask = t_batch(ids, 32, MASK, 1);

		CU_ASSERT_EQUAL(t_choose(&l, img, 32 * IMG, &hit), SPECPICK_DECIDED);
		CU_ASSERT_EQUAL(hit.row, IMG);
		CU_ASSERT_EQUAL(hit.prio, 1);
		CU_ASSERT_EQUAL(t_choose(&l, mask, 32 * MASK, &hit), SPECPICK_DECIDED);
		CU_ASSERT_EQUAL(hit.row, MASK);
		CU_ASSERT_EQUAL(hit.prio, 0);
		free(img);
		free(mask);
	}
	/* later copies: the decision stands, without looking */
	{
		unsigned char *mask = t_batch(ids + 64, 32, MASK, 1);

		CU_ASSERT_EQUAL(t_choose(&l, mask, 32 * MASK, &hit), SPECPICK_DECIDED);
		CU_ASSERT_EQUAL(hit.row, MASK);
		free(mask);
	}
}

static void test_one_spec_untouched(void)
{
	struct layout l;
	struct layout_hit hit;
	unsigned char buf[3 * 3072];
	char err[128];

	specpick_reset();
	CU_ASSERT_FATAL(layout_parse(&l, "3072,4096", err, sizeof(err)) == 0);
	memset(buf, 7, sizeof(buf));
	CU_ASSERT_EQUAL(t_choose(&l, buf, sizeof(buf), &hit), SPECPICK_ONE);
	CU_ASSERT_EQUAL(hit.row, 3072);
}

/*
 * Rows that repeat inside one copy, and black borders (a constant chunk
 * in every image), decide nothing: only distinct rows seen in earlier
 * copies count.
 */
static void test_repeats_inside_a_copy_do_not_count(void)
{
	struct layout l;
	struct layout_hit hit;
	unsigned char *p = calloc(32, MASK);
	uint32_t ids[32];
	char err[128];

	specpick_reset();
	CU_ASSERT_FATAL(p != NULL);
	CU_ASSERT_FATAL(layout_parse(&l, "32768,8192", err, sizeof(err)) == 0);
	CU_ASSERT_EQUAL(t_choose(&l, p, 32 * MASK, &hit), SPECPICK_UNDECIDED);
	free(p);
	/* letterboxed images: the first quarter of each is black */
	for (int b = 0; b < 4; b++) {
		for (int i = 0; i < 32; i++)
			ids[i] = (uint32_t)(1000 + 32 * b + i);
		p = t_batch(ids, 32, IMG, 0);
		for (int i = 0; i < 32; i++)
			memset(p + (uint64_t)i * IMG, 0, MASK);
		CU_ASSERT_EQUAL(t_choose(&l, p, 32 * IMG, &hit), SPECPICK_UNDECIDED);
		free(p);
	}
}

/* The tests fingerprint on one thread, set up before the registry. */
static void t_before(void)
{
	fingerprint_init(1);
}

/* Forgets the tests' observations and stops the fingerprint threads. */
static void t_after(void)
{
	specpick_reset();
	fingerprint_shutdown();
}

static const CU_TestInfo tests[] = {
	{ "images and masks of sizes both specs divide are told apart at the first copy of epoch 2",
	  test_images_and_masks },
	{ "a size only one spec divides is left to the layout", test_one_spec_untouched },
	{ "rows repeated inside one copy decide nothing", test_repeats_inside_a_copy_do_not_count },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "specpick",
	.tests = tests,
	.before = t_before,
	.after = t_after,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
