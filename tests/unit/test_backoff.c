/*
 * Unit tests of the back-off (backoff.h): when pooling stands down and
 * when it comes back. Pure: no device.
 */
#include <CUnit/Basic.h>
#include <string.h>

#include "cunit_main.h"
#include "pool/backoff.h"

/* Feeds n full-path copies of 100 bytes with hit bytes each. Returns stand-downs seen. */
static int t_full(struct backoff *b, int can_admit, int n, uint64_t hit)
{
	int events = 0;

	for (int i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(backoff_route(b, can_admit), BACKOFF_FULL);
		events += backoff_full(b, can_admit, 100, hit);
	}
	return events;
}

static void test_stands_down(void)
{
	struct backoff b;

	memset(&b, 0, sizeof(b));
	/* while the pool can admit, nothing repeating does not matter: it fills */
	CU_ASSERT_EQUAL(t_full(&b, 1, 100, 0), 0);
	/* full: a window of copies without hits stands down once */
	CU_ASSERT_EQUAL(t_full(&b, 0, BACKOFF_WINDOW - 1, 0), 0);
	CU_ASSERT_EQUAL(backoff_route(&b, 0), BACKOFF_FULL);
	CU_ASSERT_EQUAL(backoff_full(&b, 0, 100, 0), 1);
	CU_ASSERT_TRUE(b.down);
	CU_ASSERT_EQUAL(b.stand_downs, 1);
}

/* Big rows come few per epoch: a window of bytes judges them sooner. */
static void test_big_rows_judged_by_bytes(void)
{
	struct backoff b;
	int events = 0;

	memset(&b, 0, sizeof(b));
	for (int i = 0; i < BACKOFF_WINDOW_MIN; i++) {
		CU_ASSERT_EQUAL(backoff_route(&b, 0), BACKOFF_FULL);
		events += backoff_full(&b, 0, 64ULL << 20, 0);
	}
	CU_ASSERT_EQUAL(events, 1);
	CU_ASSERT_TRUE(b.down);
}

static void test_hits_keep_pooling(void)
{
	struct backoff b;

	memset(&b, 0, sizeof(b));
	/* 2% of bytes from the pool: keep pooling */
	CU_ASSERT_EQUAL(t_full(&b, 0, 10 * BACKOFF_WINDOW, 2), 0);
	CU_ASSERT_FALSE(b.down);
}

static void test_samples_and_resumes(void)
{
	struct backoff b;
	int samples = 0, passes = 0;

	memset(&b, 0, sizeof(b));
	t_full(&b, 0, BACKOFF_WINDOW, 0);
	CU_ASSERT_TRUE_FATAL(b.down);
	for (int i = 0; i < 10 * BACKOFF_SAMPLE_EVERY; i++) {
		enum backoff_route r = backoff_route(&b, 0);

		samples += r == BACKOFF_SAMPLE;
		passes += r == BACKOFF_PASS;
		if (r == BACKOFF_SAMPLE)
			CU_ASSERT_EQUAL(backoff_sample(&b, BACKOFF_SAMPLE_ROWS, 0, 0), BACKOFF_STAY);
	}
	CU_ASSERT_EQUAL(samples, 10);
	CU_ASSERT_EQUAL(passes, 10 * BACKOFF_SAMPLE_EVERY - 10);
	CU_ASSERT_TRUE(b.down);
	/* the rows come back: enough sampled hits resume pooling */
	for (int i = 0; b.down && i < 100 * BACKOFF_SAMPLE_EVERY; i++)
		if (backoff_route(&b, 0) == BACKOFF_SAMPLE)
			backoff_sample(&b, BACKOFF_SAMPLE_ROWS, 1, 0);
	CU_ASSERT_FALSE(b.down);
	CU_ASSERT_EQUAL(backoff_route(&b, 0), BACKOFF_FULL);
}

static void test_stale_pool_refreshes(void)
{
	struct backoff b;
	int refreshes = 0;

	memset(&b, 0, sizeof(b));
	t_full(&b, 0, BACKOFF_WINDOW, 0);
	CU_ASSERT_TRUE_FATAL(b.down);
	/* samples repeat among themselves but never hit: the pool holds the wrong rows */
	CU_ASSERT_EQUAL(backoff_sample(&b, BACKOFF_SAMPLE_ROWS, 0, BACKOFF_STALE_REPEATS - 1), BACKOFF_STAY);
	CU_ASSERT_EQUAL(backoff_sample(&b, BACKOFF_SAMPLE_ROWS, 0, 1), BACKOFF_REFRESH);
	CU_ASSERT_FALSE(b.down);
	/* the next refresh needs twice the evidence */
	t_full(&b, 0, BACKOFF_WINDOW, 0);
	CU_ASSERT_TRUE_FATAL(b.down);
	for (int i = 0; i < 2 * BACKOFF_STALE_REPEATS; i++)
		refreshes += backoff_sample(&b, 1, 0, 1) == BACKOFF_REFRESH;
	CU_ASSERT_EQUAL(refreshes, 1);
	CU_ASSERT_EQUAL(b.refreshes, 2);
}

static void test_admit_again_resumes(void)
{
	struct backoff b;

	memset(&b, 0, sizeof(b));
	t_full(&b, 0, BACKOFF_WINDOW, 0);
	CU_ASSERT_TRUE_FATAL(b.down);
	CU_ASSERT_EQUAL(backoff_route(&b, 1), BACKOFF_FULL);
	CU_ASSERT_FALSE(b.down);
}

/*
 * One copy of a job that alternates two kinds (data rows of spec 0, labels
 * of spec 1) through the pool's table: routed, then judged as the pool
 * would. Rows of kind A are in the pool (a sample finds them all); labels
 * never are. Returns the route.
 */
static enum backoff_route t_alternate(struct backoff_kinds *t, int i)
{
	int a = i % 2 == 0;
	struct backoff *b = a ? backoff_kind(t, 0, 65536) : backoff_kind(t, 1, 512);
	enum backoff_route r = backoff_route(b, 0);

	if (r == BACKOFF_FULL)
		backoff_full(b, 0, a ? 65536 : 512, 0);
	else if (r == BACKOFF_SAMPLE)
		backoff_sample(b, BACKOFF_SAMPLE_ROWS, a ? BACKOFF_SAMPLE_ROWS : 0, 0);
	return r;
}

static void test_alternating_kinds_resume(void)
{
	static struct backoff_kinds t;
	int i;

	memset(&t, 0, sizeof(t));
	/* the pool is full of other rows: both kinds stand down */
	for (i = 0; i < 2 * BACKOFF_WINDOW; i++)
		t_alternate(&t, i);
	CU_ASSERT_TRUE_FATAL(backoff_kind(&t, 0, 65536)->down);
	CU_ASSERT_TRUE_FATAL(backoff_kind(&t, 1, 512)->down);
	/* the data rows come back: their own samples see it; the labels stay down */
	for (; i < 2 * BACKOFF_WINDOW + 100 * BACKOFF_SAMPLE_EVERY && backoff_kind(&t, 0, 65536)->down; i++)
		t_alternate(&t, i);
	CU_ASSERT_FALSE(backoff_kind(&t, 0, 65536)->down);
	CU_ASSERT_TRUE(backoff_kind(&t, 1, 512)->down);
	CU_ASSERT_TRUE(backoff_any_down(&t));
}

static void test_kinds_bounded(void)
{
	static struct backoff_kinds t;
	struct backoff *down;

	memset(&t, 0, sizeof(t));
	down = backoff_kind(&t, 0, 1);
	t_full(down, 0, BACKOFF_WINDOW, 0);
	CU_ASSERT_TRUE_FATAL(down->down);
	/* many more kinds than slots: the stood-down kind keeps its state, others take turns */
	for (uint64_t size = 2; size < 10 * BACKOFF_KINDS; size++)
		backoff_kind(&t, 0, size)->win_copies = 1;
	CU_ASSERT_TRUE(backoff_kind(&t, 0, 1)->down);
	/* a kind seen again gets its own state back */
	CU_ASSERT_EQUAL(backoff_kind(&t, 0, 10 * BACKOFF_KINDS - 1)->win_copies, 1);
	/* a new kind starts fresh */
	CU_ASSERT_EQUAL(backoff_kind(&t, 7, 1)->win_copies, 0);
	CU_ASSERT_FALSE(backoff_kind(&t, 7, 1)->down);
}

static const CU_TestInfo tests[] = {
	{ "copies alternating two kinds are each sampled, and the kind whose rows repeat resumes",
	  test_alternating_kinds_resume },
	{ "the kinds are bounded, a stood-down kind is kept, a new one starts fresh", test_kinds_bounded },
	{ "a full pool whose rows never hit stands down after one window", test_stands_down },
	{ "a full pool that serves 2% of bytes keeps pooling", test_hits_keep_pooling },
	{ "a few copies of big rows that never hit are judged by their bytes", test_big_rows_judged_by_bytes },
	{ "a stood-down pool samples one copy in N and resumes when rows repeat",
	  test_samples_and_resumes },
	{ "a pool that can admit again resumes at once", test_admit_again_resumes },
	{ "rows that repeat but never hit refresh the pool, with growing evidence",
	  test_stale_pool_refreshes },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "backoff",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
