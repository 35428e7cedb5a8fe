/*
 * Unit tests of the budget arithmetic (budget.h): the probe's decision and
 * its explanation, and slab sizing. Pure: no device.
 */
#include <CUnit/Basic.h>
#include <string.h>

#include "cunit_main.h"
#include "pool/budget.h"
#include "core/config.h"

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)

static struct config t_auto(void)
{
	struct config c;

	memset(&c, 0, sizeof(c));
	c.budget_kind = BUDGET_AUTO;
	c.reserve_batches = 16;
	c.margin = 512 * MIB;
	c.slab = 64 * MIB;
	return c;
}

static uint64_t t_decide(const struct config *c, uint64_t free, uint64_t largest, uint64_t min_row,
			 struct budget_probe *out)
{
	*out = (struct budget_probe){ .free = free, .total = 2 * GIB, .largest_copy = largest,
				      .min_row = min_row };
	return budget_decide(c, out);
}

static void test_auto(void)
{
	struct config c = t_auto();
	struct budget_probe p;

	CU_ASSERT_EQUAL(t_decide(&c, 8 * GIB, 64 * MIB, 3072, &p), 8 * GIB - 16 * 64 * MIB - 512 * MIB);
	CU_ASSERT_EQUAL(p.reserve, 16 * 64 * MIB);
	CU_ASSERT_EQUAL(p.margin, 512 * MIB);
	CU_ASSERT_EQUAL(p.limit, BUDGET_LIMIT_NONE);
	/* a budget under the slab size is a budget all the same */
	CU_ASSERT_EQUAL(t_decide(&c, 600 * MIB, 1 * MIB, 3072, &p), 72 * MIB);
	CU_ASSERT_EQUAL(t_decide(&c, 530 * MIB, 1 * MIB, 3072, &p), 2 * MIB);
	/* the reserve takes everything */
	CU_ASSERT_EQUAL(t_decide(&c, 100 * MIB, 64 * MIB, 3072, &p), 0);
	CU_ASSERT_EQUAL(p.limit, BUDGET_LIMIT_RESERVE);
	/* the margin takes what the reserve left */
	CU_ASSERT_EQUAL(t_decide(&c, 520 * MIB, 1 * MIB, 3072, &p), 0);
	CU_ASSERT_EQUAL(p.limit, BUDGET_LIMIT_MARGIN);
	/* nothing free: the program holds the device */
	CU_ASSERT_EQUAL(t_decide(&c, 0, 1 * MIB, 3072, &p), 0);
	CU_ASSERT_EQUAL(p.limit, BUDGET_LIMIT_PROGRAM);
	/* a reserve that overflows leaves nothing, without wrapping */
	c.reserve_batches = UINT64_MAX / 2;
	CU_ASSERT_EQUAL(t_decide(&c, 8 * GIB, 64 * MIB, 3072, &p), 0);
	CU_ASSERT_EQUAL(p.limit, BUDGET_LIMIT_RESERVE);
}

static void test_sizes_and_shares(void)
{
	struct config c = t_auto();
	struct budget_probe p;

	c.budget_kind = BUDGET_SHARE;
	c.budget_share = 0.5;
	CU_ASSERT_EQUAL(t_decide(&c, 1 * GIB, 64 * MIB, 3072, &p), 512 * MIB);
	c.budget_kind = BUDGET_BYTES;
	c.budget_bytes = 20 * MIB;
	CU_ASSERT_EQUAL(t_decide(&c, 1 * GIB, 64 * MIB, 1 * MIB, &p), 20 * MIB);
	CU_ASSERT_EQUAL(p.limit, BUDGET_LIMIT_ASKED);
	/* a size larger than free memory is capped at free memory */
	c.budget_bytes = 4 * GIB;
	CU_ASSERT_EQUAL(t_decide(&c, 128 * MIB, 64 * MIB, 3072, &p), 128 * MIB);
	CU_ASSERT_EQUAL(p.limit, BUDGET_LIMIT_FREE);
	/* dormant only below one row */
	c.budget_bytes = 3072;
	CU_ASSERT_EQUAL(t_decide(&c, 1 * GIB, 64 * MIB, 3072, &p), 3072);
	c.budget_bytes = 3071;
	CU_ASSERT_EQUAL(t_decide(&c, 1 * GIB, 64 * MIB, 3072, &p), 0);
	CU_ASSERT_EQUAL(p.limit, BUDGET_LIMIT_ROW);
}

static void test_explain(void)
{
	struct config c = t_auto();
	struct budget_probe p;
	char why[256];

	t_decide(&c, 100 * MIB, 64 * MIB, 3072, &p);
	budget_explain(&c, &p, why, sizeof(why));
	CU_ASSERT(strstr(why, "reserve") != NULL);
	CU_ASSERT(strstr(why, "VRAMPOOL_RESERVE_BATCHES") != NULL);
	t_decide(&c, 520 * MIB, 1 * MIB, 3072, &p);
	budget_explain(&c, &p, why, sizeof(why));
	CU_ASSERT(strstr(why, "VRAMPOOL_MARGIN") != NULL);
	c.budget_kind = BUDGET_BYTES;
	c.budget_bytes = 1000;
	t_decide(&c, 1 * GIB, 64 * MIB, 3072, &p);
	budget_explain(&c, &p, why, sizeof(why));
	CU_ASSERT(strstr(why, "below one row") != NULL);
	t_decide(&c, 0, 64 * MIB, 3072, &p);
	budget_explain(&c, &p, why, sizeof(why));
	CU_ASSERT(strstr(why, "the program holds") != NULL);
}

/*
 * A budget below one row is said as asked (a size, a share) or as auto
 * gave it, never as the 0 the pool is left with, with why no row fits.
 */
static void test_explain_below_one_row(void)
{
	struct config c = t_auto();
	struct budget_probe p;
	char why[512];

	c.budget_kind = BUDGET_BYTES;
	c.budget_bytes = 1000;
	CU_ASSERT_EQUAL(t_decide(&c, 1 * GIB, 64 * MIB, 3072, &p), 0);
	budget_explain(&c, &p, why, sizeof(why));
	CU_ASSERT(strstr(why, "asked for, 1000 B, is below one row (3.0 KiB)") != NULL);
	CU_ASSERT(strstr(why, "nothing is pooled") != NULL);
	CU_ASSERT(strstr(why, "(0 B)") == NULL);
	/* a size above what is free, and what is free below one row */
	c.budget_bytes = 8 * GIB;
	CU_ASSERT_EQUAL(t_decide(&c, 2048, 64 * MIB, 3072, &p), 0);
	budget_explain(&c, &p, why, sizeof(why));
	CU_ASSERT(strstr(why, "asked for 8.0 GiB, more than the 2.0 KiB free") != NULL);
	CU_ASSERT(strstr(why, "below one row (3.0 KiB)") != NULL);
	CU_ASSERT(strstr(why, "(0 B)") == NULL);
	c.budget_kind = BUDGET_SHARE;
	c.budget_share = 0.000001;
	CU_ASSERT_EQUAL(t_decide(&c, 1 * GIB, 64 * MIB, 3072, &p), 0);
	budget_explain(&c, &p, why, sizeof(why));
	CU_ASSERT(strstr(why, "0.0001% of the 1.0 GiB free at the probe (1.0 KiB), is below one row") != NULL);
	c = t_auto();
	c.reserve_batches = 0;
	CU_ASSERT_EQUAL(t_decide(&c, 512 * MIB + 2048, 64 * MIB, 3072, &p), 0);
	CU_ASSERT_EQUAL(p.limit, BUDGET_LIMIT_ROW);
	budget_explain(&c, &p, why, sizeof(why));
	CU_ASSERT(strstr(why, "the budget auto gives, 2.0 KiB (") != NULL);
	CU_ASSERT(strstr(why, "is below one row (3.0 KiB)") != NULL);
}

static void test_slab_size(void)
{
	/* a slab is at most the slab size and at most what the budget still allows */
	CU_ASSERT_EQUAL(budget_slab_size(64 * MIB, 20 * MIB, 3072), 20 * MIB);
	CU_ASSERT_EQUAL(budget_slab_size(64 * MIB, 200 * MIB, 3072), 64 * MIB);
	/* a row larger than a slab gets a slab of its own size when the budget allows */
	CU_ASSERT_EQUAL(budget_slab_size(64 * MIB, 200 * MIB, 100 * MIB), 100 * MIB);
	CU_ASSERT_EQUAL(budget_slab_size(64 * MIB, 90 * MIB, 100 * MIB), 0);
	/* a row that does not fit what remains: nothing */
	CU_ASSERT_EQUAL(budget_slab_size(64 * MIB, 3071, 3072), 0);
	CU_ASSERT_EQUAL(budget_slab_size(64 * MIB, 3072, 3072), 3072);
}

static const CU_TestInfo tests[] = {
	{ "auto is free memory less the reserve and the margin, and says which took it",
	  test_auto },
	{ "sizes and shares are honoured down to one row, capped at free memory",
	  test_sizes_and_shares },
	{ "a dormant budget is explained with the variable to set", test_explain },
	{ "a budget below one row is explained as asked, not as 0 B", test_explain_below_one_row },
	{ "a slab is at most the slab size and what the budget still allows", test_slab_size },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "budget",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
