/*
 * Unit tests of shim/doorkeeper: the evidence that engages it (a pass of
 * the unique rows seen without a hit, never rare repeats, never within
 * the first pass), the filter (a row is refused once, then admitted, even
 * twice in one copy; it forgets after two generations), and what
 * disengages it.
 */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <string.h>

#include "cunit_main.h"
#include "pool/doorkeeper.h"

#define ROW 1024ULL
#define MIB (1ULL << 20)

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* The fingerprint of row id. */
static struct fp row_fp(uint64_t id)
{
	uint64_t s = id * 2 + 1;
	struct fp f;

	f.lo = splitmix64(&s);
	f.hi = splitmix64(&s);
	return f;
}

/*
 * Feeds copies of 64 new rows (all captured, hits of them hit) until
 * bytes have been seen; returns the first event other than DK_NONE.
 */
static enum dk_event feed(struct doorkeeper *dk, uint64_t budget, uint64_t bytes, uint64_t hits_per_copy)
{
	enum dk_event ev = DK_NONE;

	for (uint64_t seen = 0; seen < bytes && ev == DK_NONE; seen += 64 * ROW)
		ev = doorkeeper_judge(dk, budget, ROW, 64 * ROW, hits_per_copy * ROW,
				      (64 - hits_per_copy) * ROW);
	return ev;
}

/*
 * No hit over the first pass engages, while half the budget is free; the
 * first pass is the budget, capped.
 */
static void test_a_pass_without_hits_engages(void)
{
	struct doorkeeper dk;

	memset(&dk, 0, sizeof(dk));
	doorkeeper_set_first_pass_for_tests(8 * MIB);
	CU_ASSERT_FALSE(dk.engaged);
	CU_ASSERT_EQUAL(doorkeeper_bytes(&dk), 0);
	CU_ASSERT_EQUAL(feed(&dk, 64 * MIB, 8 * MIB - 64 * ROW, 0), DK_NONE);
	CU_ASSERT_EQUAL(dk.first_pass, 8 * MIB);
	CU_ASSERT_EQUAL(feed(&dk, 64 * MIB, 64 * ROW, 0), DK_ENGAGED);
	CU_ASSERT_TRUE(dk.engaged);
	CU_ASSERT_EQUAL(dk.engagements, 1);
	CU_ASSERT(doorkeeper_bytes(&dk) >= DK_MIN_ROWS * DK_BITS_PER_ROW / 8 * 2);
	doorkeeper_release(&dk);
	CU_ASSERT_FALSE(dk.engaged);
	CU_ASSERT_EQUAL(doorkeeper_bytes(&dk), 0);

	/* a budget of the first pass is more than half full when it closes: the back-off's turn */
	CU_ASSERT_EQUAL(feed(&dk, 8 * MIB, 64 * MIB, 0), DK_NONE);
	CU_ASSERT_EQUAL(dk.first_pass, 8 * MIB);
	doorkeeper_release(&dk);
	doorkeeper_set_first_pass_for_tests(0);

	/* a large budget: the first pass is DK_FIRST_PASS_ROWS rows of small rows */
	CU_ASSERT_EQUAL(doorkeeper_judge(&dk, 1ULL << 40, 64, 64, 0, 64), DK_NONE);
	CU_ASSERT_EQUAL(dk.first_pass, DK_FIRST_PASS_ROWS * 64);
	doorkeeper_release(&dk);
	CU_ASSERT_EQUAL(doorkeeper_judge(&dk, 1ULL << 40, 1 << 20, 1 << 20, 0, 1 << 20), DK_NONE);
	CU_ASSERT_EQUAL(dk.first_pass, DK_FIRST_PASS_BYTES);
	doorkeeper_release(&dk);
}

/* Rare repeats are not evidence; a window with hits opens the next, one pass long. */
static void test_rare_repeats_do_not_engage(void)
{
	struct doorkeeper dk;

	memset(&dk, 0, sizeof(dk));
	doorkeeper_set_first_pass_for_tests(4 * MIB);
	/* one row in 64 hits: far more than one byte in DK_HIT_SHARE */
	CU_ASSERT_EQUAL(feed(&dk, 1024 * MIB, 64 * MIB, 1), DK_NONE);
	CU_ASSERT_FALSE(dk.engaged);
	/* the windows grew with the unique rows seen: one pass of them each */
	CU_ASSERT(dk.win_len >= dk.unique - 64 * MIB / 4);
	CU_ASSERT(dk.win_len > 4 * MIB);
	/* then a whole pass of the unique rows seen without a hit engages */
	CU_ASSERT_EQUAL(feed(&dk, 1024 * MIB, 2 * dk.win_len, 0), DK_ENGAGED);
	doorkeeper_release(&dk);
	doorkeeper_set_first_pass_for_tests(0);
}

/* A row is refused on first sight and admitted on the second, within one copy too. */
static void test_second_sighting_is_admitted(void)
{
	struct doorkeeper dk;
	struct fp fps[4] = { row_fp(1), row_fp(2), row_fp(1), row_fp(3) };
	uint8_t found[4] = { 0, 0, 0, 1 };

	memset(&dk, 0, sizeof(dk));
	CU_ASSERT_EQUAL(doorkeeper_filter(&dk, fps, 4, found), 0);     /* disengaged: no-op */
	CU_ASSERT_EQUAL(found[0] + found[1] + found[2], 0);
	doorkeeper_set_first_pass_for_tests(1 * MIB);
	CU_ASSERT_EQUAL(feed(&dk, 64 * MIB, 64 * MIB, 0), DK_ENGAGED);
	doorkeeper_set_first_pass_for_tests(0);
	CU_ASSERT_EQUAL(doorkeeper_filter(&dk, fps, 4, found), 2);
	CU_ASSERT_EQUAL(found[0], DK_REFUSED);
	CU_ASSERT_EQUAL(found[1], DK_REFUSED);
	CU_ASSERT_EQUAL(found[2], 0);           /* the same row again in the copy: admitted */
	CU_ASSERT_EQUAL(found[3], 1);           /* in the index: untouched */
	memset(found, 0, sizeof(found));
	CU_ASSERT_EQUAL(doorkeeper_filter(&dk, fps, 3, found), 0);
	CU_ASSERT_EQUAL(found[0] + found[1] + found[2], 0);
	CU_ASSERT_EQUAL(dk.refused, 2);
	doorkeeper_release(&dk);
}

/* The filter remembers one to two generations of first sightings, then forgets. */
static void test_filter_forgets_after_two_generations(void)
{
	struct doorkeeper dk;
	uint64_t id, passed = 0, cap;
	uint8_t found;
	struct fp f;

	memset(&dk, 0, sizeof(dk));
	doorkeeper_set_first_pass_for_tests(1 * MIB);
	CU_ASSERT_EQUAL(feed(&dk, 64 * MIB, 64 * MIB, 0), DK_ENGAGED);
	doorkeeper_set_first_pass_for_tests(0);
	cap = dk.gen_cap;
	CU_ASSERT_EQUAL(cap, DK_MIN_ROWS);
	for (id = 0; id < cap; id++) {
		f = row_fp(id);
		found = 0;
		doorkeeper_filter(&dk, &f, 1, &found);
	}
	/* a generation later the first rows are still known ... */
	for (id = cap; id < 2 * cap; id++) {
		f = row_fp(id);
		found = 0;
		doorkeeper_filter(&dk, &f, 1, &found);
	}
	for (id = 0; id < 1000; id++) {
		f = row_fp(id);
		found = 0;
		doorkeeper_filter(&dk, &f, 1, &found);
		passed += found == 0;
	}
	CU_ASSERT_EQUAL(passed, 1000);
	/* ... two generations later they are forgotten (bar false positives, about 1%) */
	for (id = 2 * cap; id < 4 * cap; id++) {
		f = row_fp(id);
		found = 0;
		doorkeeper_filter(&dk, &f, 1, &found);
	}
	passed = 0;
	for (id = 1000; id < 2000; id++) {
		f = row_fp(id);
		found = 0;
		doorkeeper_filter(&dk, &f, 1, &found);
		passed += found == 0;
	}
	CU_ASSERT(passed <= 50);
	/* rows never seen pass as seen in about 1% of cases */
	passed = 0;
	for (id = 10 * cap; id < 10 * cap + 10000; id++) {
		f = row_fp(id);
		found = 0;
		doorkeeper_filter(&dk, &f, 1, &found);
		passed += found == 0;
	}
	CU_ASSERT(passed <= 300);
	doorkeeper_release(&dk);
}

/*
 * Rows that hit or come back disengage it; the next engagement needs a
 * first pass twice as long; rows that do not come back keep it engaged.
 */
static void test_repeats_disengage(void)
{
	struct doorkeeper dk;
	uint64_t first;

	memset(&dk, 0, sizeof(dk));
	doorkeeper_set_first_pass_for_tests(1 * MIB);
	CU_ASSERT_EQUAL(feed(&dk, 64 * MIB, 64 * MIB, 0), DK_ENGAGED);
	doorkeeper_set_first_pass_for_tests(0);
	first = dk.first_pass;
	/* rows that never come back: engaged, judgement after judgement */
	CU_ASSERT_EQUAL(feed(&dk, 64 * MIB, 4 * DK_JUDGE_ROWS * ROW, 0), DK_NONE);
	CU_ASSERT_TRUE(dk.engaged);
	/* one in 4 rows hits: disengaged */
	CU_ASSERT_EQUAL(feed(&dk, 64 * MIB, 2 * DK_JUDGE_ROWS * ROW, 16), DK_DISENGAGED);
	CU_ASSERT_FALSE(dk.engaged);
	CU_ASSERT_EQUAL(dk.disengagements, 1);
	CU_ASSERT_EQUAL(dk.first_pass, 2 * first);
	CU_ASSERT_EQUAL(doorkeeper_bytes(&dk), 0);
	doorkeeper_release(&dk);
}

static const CU_TestInfo tests[] = {
	{ "a first pass without a hit engages it; the first pass is the budget, capped",
	  test_a_pass_without_hits_engages },
	{ "rare repeats do not engage it; a whole pass of the unique rows seen without a hit does",
	  test_rare_repeats_do_not_engage },
	{ "a row is refused on first sight and admitted on the second, within one copy too",
	  test_second_sighting_is_admitted },
	{ "the filter remembers one to two generations of rows, then forgets",
	  test_filter_forgets_after_two_generations },
	{ "rows that hit again disengage it and the next first pass doubles", test_repeats_disengage },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "doorkeeper",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
