/*
 * Unit tests of shim/layout: the VRAMPOOL_LAYOUT grammar, the matching
 * rules (k*row, largest row wins, whole:MIN) and the error messages.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "cunit_main.h"
#include "core/layout.h"

/* Parses text and asserts success; returns the parse result for chaining. */
static int parse_ok(struct layout *l, const char *text)
{
	char err[256];
	int rc = layout_parse(l, text, err, sizeof(err));

	if (rc != 0)
		fprintf(stderr, "unexpected failure for '%s': %s\n", text, err);
	CU_ASSERT_EQUAL(rc, 0);
	return rc;
}

/*
 * Parses text and asserts it fails with a one-line message that contains
 * want (what was expected, or the offending part).
 */
static void parse_bad(const char *text, const char *want)
{
	struct layout l;
	char err[256];
	int rc;

	memset(err, 'Z', sizeof(err));
	rc = layout_parse(&l, text, err, sizeof(err));
	CU_ASSERT_EQUAL(rc, -EINVAL);
	CU_ASSERT(memchr(err, '\0', sizeof(err)) != NULL);
	CU_ASSERT(strlen(err) > 0);
	CU_ASSERT(strchr(err, '\n') == NULL);
	if (strstr(err, want) == NULL)
		fprintf(stderr, "message for '%s' lacks '%s': %s\n", text, want, err);
	CU_ASSERT(strstr(err, want) != NULL);
	CU_ASSERT_EQUAL(l.nrows, 0);
	CU_ASSERT_EQUAL(l.has_whole, 0);
}

static void test_plain_bytes(void)
{
	struct layout l;

	if (parse_ok(&l, "150528") != 0)
		return;
	CU_ASSERT_EQUAL(l.nrows, 1);
	CU_ASSERT_EQUAL(l.rows[0], 150528);
	CU_ASSERT_EQUAL(l.has_whole, 0);
	CU_ASSERT_STRING_EQUAL(l.text, "150528");
}

static void test_suffixes(void)
{
	struct layout l;

	if (parse_ok(&l, "147K") == 0)
		CU_ASSERT_EQUAL(l.rows[0], 147 * 1024);
	if (parse_ok(&l, "2M") == 0)
		CU_ASSERT_EQUAL(l.rows[0], 2 * 1024 * 1024);
	if (parse_ok(&l, "1G") == 0)
		CU_ASSERT_EQUAL(l.rows[0], 1024ULL * 1024 * 1024);
	if (parse_ok(&l, "4KiB") == 0)
		CU_ASSERT_EQUAL(l.rows[0], 4096);
}

static void test_every_dtype(void)
{
	static const struct { const char *spec; uint64_t row; } cases[] = {
		{ "u8:3x224x224", 150528 }, { "i8:10", 10 }, { "u16:10", 20 },
		{ "i16:10", 20 }, { "f16:10", 20 }, { "bf16:4096", 8192 },
		{ "u32:10", 40 }, { "i32:10", 40 }, { "f32:3x32x32", 12288 },
		{ "u64:10", 80 }, { "i64:10", 80 }, { "f64:2x5", 80 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct layout l;

		if (parse_ok(&l, cases[i].spec) != 0)
			continue;
		CU_ASSERT_EQUAL(l.nrows, 1);
		CU_ASSERT_EQUAL(l.rows[0], cases[i].row);
		CU_ASSERT_STRING_EQUAL(l.text, cases[i].spec);
	}
}

static void test_several_specs(void)
{
	struct layout l;

	if (parse_ok(&l, " u8:3x32x32 , 512,\tf32:1024 ") != 0)
		return;
	CU_ASSERT_EQUAL(l.nrows, 3);
	CU_ASSERT_EQUAL(l.rows[0], 4096);
	CU_ASSERT_EQUAL(l.rows[1], 3072);
	CU_ASSERT_EQUAL(l.rows[2], 512);
	CU_ASSERT_STRING_EQUAL(l.text, "u8:3x32x32,512,f32:1024");
	CU_ASSERT_EQUAL(layout_max_row(&l), 4096);
}

static void test_duplicates(void)
{
	struct layout l;

	if (parse_ok(&l, "3072,u8:3x32x32,3K") != 0)
		return;
	CU_ASSERT_EQUAL(l.nrows, 1);
	CU_ASSERT_EQUAL(l.rows[0], 3072);
}

static void test_match_multiples(void)
{
	struct layout l;

	if (parse_ok(&l, "u8:3x32x32") != 0)
		return;
	CU_ASSERT_EQUAL(layout_match(&l, 3072), 3072);
	CU_ASSERT_EQUAL(layout_match(&l, 64 * 3072), 3072);
	CU_ASSERT_EQUAL(layout_match(&l, 40 * 3072), 3072);
	CU_ASSERT_EQUAL(layout_match(&l, 3071), 0);
	CU_ASSERT_EQUAL(layout_match(&l, 3073), 0);
	CU_ASSERT_EQUAL(layout_match(&l, 1536), 0);
	CU_ASSERT_EQUAL(layout_match(&l, 0), 0);
}

static void test_largest_row_wins(void)
{
	struct layout l;

	if (parse_ok(&l, "512,1024,3072") != 0)
		return;
	CU_ASSERT_EQUAL(layout_match(&l, 3072 * 1024), 3072);	/* all three divide */
	CU_ASSERT_EQUAL(layout_match(&l, 2048), 1024);
	CU_ASSERT_EQUAL(layout_match(&l, 1536), 512);
	CU_ASSERT_EQUAL(layout_match(&l, 100), 0);
}

static void test_whole(void)
{
	struct layout l;

	if (parse_ok(&l, "whole:1M") != 0)
		return;
	CU_ASSERT_EQUAL(l.nrows, 0);
	CU_ASSERT_EQUAL(l.has_whole, 1);
	CU_ASSERT_EQUAL(l.whole_min, 1 << 20);
	CU_ASSERT_EQUAL(layout_match(&l, 1 << 20), 1 << 20);
	CU_ASSERT_EQUAL(layout_match(&l, 12345678), 12345678);
	CU_ASSERT_EQUAL(layout_match(&l, (1 << 20) - 1), 0);
	CU_ASSERT_EQUAL(layout_max_row(&l), 1 << 20);
}

static void test_whole_with_rows(void)
{
	struct layout l;

	if (parse_ok(&l, "whole:4K,3072") != 0)
		return;
	CU_ASSERT_EQUAL(layout_match(&l, 6144), 3072);	/* the row spec matches first */
	CU_ASSERT_EQUAL(layout_match(&l, 5000), 5000);	/* then whole: */
	CU_ASSERT_EQUAL(layout_match(&l, 2000), 0);
	CU_ASSERT_EQUAL(layout_max_row(&l), 4096);
	CU_ASSERT_STRING_EQUAL(l.text, "whole:4K,3072");
}

static void test_max_specs(void)
{
	char text[512];
	struct layout l;
	size_t used = 0;
	int i;

	for (i = 1; i <= LAYOUT_MAX_SPECS; i++)
		used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%d", i > 1 ? "," : "", i * 100);
	if (parse_ok(&l, text) == 0)
		CU_ASSERT_EQUAL(l.nrows, LAYOUT_MAX_SPECS);
	snprintf(text + used, sizeof(text) - used, ",99");
	parse_bad(text, "at most 16");
}

static void test_bad_specs(void)
{
	parse_bad("", "empty");
	parse_bad("   ", "empty");
	parse_bad("150528,", "empty spec");
	parse_bad(",150528", "empty spec");
	parse_bad("0", "size >= 1");
	parse_bad("0K", "size >= 1");
	parse_bad("12Q", "'12Q'");
	parse_bad("12Q", "expected");
	parse_bad("-5", "expected");
	parse_bad("f8:3x3", "bad dtype 'f8'");
	parse_bad("f8:3x3", "expected u8, i8");
	parse_bad("u8:", "expected dims");
	parse_bad("u8:3x0x2", "expected dims");
	parse_bad("u8:3xx2", "expected dims");
	parse_bad("u8:3x2x", "expected dims");
	parse_bad("u8:3x2y", "expected dims");
	parse_bad("u8:3 x 2", "expected dims");
	parse_bad("u64:4294967296x4294967296", "overflows");
	parse_bad("99999999999999999999", "overflows");
	parse_bad("16777216T", "overflows");
	parse_bad("whole:0", "whole:MIN");
	parse_bad("whole:", "whole:MIN");
	parse_bad("whole:1M,whole:2M", "at most one whole:MIN");
	parse_bad("150528 147K", "expected");
}

static void test_messages_are_one_printable_line(void)
{
	struct layout l;
	char err[256];

	CU_ASSERT_EQUAL(layout_parse(&l, "u8:3\nx4", err, sizeof(err)), -EINVAL);
	CU_ASSERT(strchr(err, '\n') == NULL);
	CU_ASSERT(strstr(err, "u8:3?x4") != NULL);
	/* A tiny buffer is filled safely. */
	CU_ASSERT_EQUAL(layout_parse(&l, "f8:3", err, 8), -EINVAL);
	CU_ASSERT_EQUAL(strlen(err), 7);
}

static void test_empty_layout_matches_nothing(void)
{
	struct layout l;

	memset(&l, 0, sizeof(l));
	CU_ASSERT_EQUAL(layout_match(&l, 4096), 0);
	CU_ASSERT_EQUAL(layout_max_row(&l), 0);
}

/*
 * Matching goes largest row first, but a spec's index in the layout is
 * where the user wrote it (the dump's specs[].index): whole:MIN counts in
 * the positions, a duplicate keeps its first one, a layout built in code
 * has its matching order.
 */
static void test_positions_as_written(void)
{
	struct layout l;
	struct layout_hit h;

	if (parse_ok(&l, "3072, whole:1M ,8192@1,147K,3072@2") != 0)
		return;
	CU_ASSERT_EQUAL(l.nrows, 3);
	CU_ASSERT_EQUAL(l.rows[0], 150528);
	CU_ASSERT_EQUAL(l.rows[1], 8192);
	CU_ASSERT_EQUAL(l.rows[2], 3072);
	CU_ASSERT_EQUAL(layout_position(&l, 0), 3);
	CU_ASSERT_EQUAL(layout_position(&l, 1), 2);
	CU_ASSERT_EQUAL(layout_position(&l, 2), 0);
	CU_ASSERT_EQUAL(l.prio[2], 2);
	CU_ASSERT_EQUAL(layout_position(&l, -1), -1);
	/* matching order is unchanged: the largest dividing row, its sorted index */
	CU_ASSERT_EQUAL(layout_match_hit(&l, 2 * 150528, &h), 1);
	CU_ASSERT_EQUAL(h.spec, 0);
	CU_ASSERT_EQUAL(layout_match_hit(&l, 3 * 8192, &h), 1);
	CU_ASSERT_EQUAL(h.spec, 1);
	CU_ASSERT_EQUAL(layout_position(&l, h.spec), 2);
	CU_ASSERT_EQUAL(layout_position(NULL, 1), 1);
	/* a layout built in code (the automatic one) has no other order */
	memset(&l, 0, sizeof(l));
	l.nrows = 2;
	l.rows[0] = 8192;
	l.rows[1] = 3072;
	layout_format(&l);
	CU_ASSERT_EQUAL(layout_position(&l, 1), 1);
}

static const CU_TestInfo tests[] = {
	{ "a plain byte count is one row size", test_plain_bytes },
	{ "K, M, G and KiB suffixes are binary multiples", test_suffixes },
	{ "every dtype gives its element size times the shape", test_every_dtype },
	{ "several specs are sorted largest first and normalised", test_several_specs },
	{ "duplicate row sizes are kept once", test_duplicates },
	{ "a copy matches when it is k rows, and only then", test_match_multiples },
	{ "the largest matching row wins", test_largest_row_wins },
	{ "whole:MIN makes every large copy one row", test_whole },
	{ "row specs match before whole:MIN", test_whole_with_rows },
	{ "sixteen specs are accepted and seventeen refused", test_max_specs },
	{ "bad specs are refused with a message saying what was expected", test_bad_specs },
	{ "error messages are one printable line that fits the buffer",
	  test_messages_are_one_printable_line },
	{ "an empty layout matches nothing", test_empty_layout_matches_nothing },
	{ "a spec's index is where the user wrote it, whatever the matching order",
	  test_positions_as_written },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "layout",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
