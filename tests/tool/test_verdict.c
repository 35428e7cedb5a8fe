/*
 * test_verdict.c: CUnit suites of the A/B verdict (verdict.c) and of the
 * dump keys it reads (dump.c: "pace", "device", "mode" of format 2),
 * linked directly: the ratio convention (off/on), the steady time per copy
 * before wall time, the band of no measurable difference, one pair's
 * limit, and the budgets of different devices.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit/cunit_main.h"
#include "dump.h"
#include "verdict.h"
#include "vrampool.h"

/* An off/on pair with the same bytes asked, a quarter of them sent with the pool. */
static void pair(struct dump *off, struct dump *on)
{
	memset(off, 0, sizeof(*off));
	snprintf(off->mode, sizeof(off->mode), "off");
	off->h2d_calls = 100;
	off->requested = off->h2d = 1 << 20;
	*on = *off;
	snprintf(on->mode, sizeof(on->mode), "on");
	on->matched_calls = 100;
	on->h2d = 1 << 18;
	on->served = (1 << 20) - (1 << 18);
	off->has_elapsed = on->has_elapsed = true;
	off->elapsed_s = 10.0;
	on->elapsed_s = 8.0;
}

/* Gives D a steady pace of NS nanoseconds per copy. */
static void steady(struct dump *d, double ns)
{
	d->has_pace = d->has_steady = true;
	d->steady_copies = 100;
	d->steady_ns = (uint64_t)(ns * 100);
	d->steady_ns_per_copy = ns;
}

static void test_steady_before_wall(void)
{
	struct dump off, on;
	struct verdict v;
	double r;

	pair(&off, &on);
	steady(&off, 1000);
	steady(&on, 2000);
	r = verdict_time_ratio(&off, &on);
	CU_ASSERT_DOUBLE_EQUAL(r, 0.5, 1e-9);
	verdict_judge(&v, &off, &on, &r, 1);
	CU_ASSERT_TRUE(v.figure.steady);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_SLOWER);
	CU_ASSERT_EQUAL(v.bytes, VERDICT_BYTES_FEWER);
	CU_ASSERT_DOUBLE_EQUAL(v.bytes_ratio, 4.0, 1e-9);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.time_text, "slower with the pool: off/on 0.50"));
	CU_ASSERT_PTR_NULL(strstr(v.time_text, "faster"));
}

static void test_wall_time_fallback(void)
{
	struct dump off, on;
	struct verdict v;
	double r;

	pair(&off, &on);
	on.elapsed_s = 5.0;
	r = verdict_time_ratio(&off, &on);
	CU_ASSERT_DOUBLE_EQUAL(r, 2.0, 1e-9);
	verdict_judge(&v, &off, &on, &r, 1);
	CU_ASSERT_FALSE(v.figure.steady);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_FASTER);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.time_text, "wall time"));
	CU_ASSERT_PTR_NOT_NULL(strstr(v.time_text, "no pace"));
	/* only one side with a pace: wall time for both, never mixed */
	steady(&off, 1000);
	CU_ASSERT_DOUBLE_EQUAL(verdict_time_ratio(&off, &on), 2.0, 1e-9);
}

static void test_one_pair_band(void)
{
	struct dump off, on;
	struct verdict v;
	double r;

	pair(&off, &on);
	steady(&off, 1000);
	steady(&on, 1200);	/* 0.83: within 25% either way */
	r = verdict_time_ratio(&off, &on);
	verdict_judge(&v, &off, &on, &r, 1);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_ONE_PAIR);
	steady(&on, 1300);	/* 0.77: beyond it */
	r = verdict_time_ratio(&off, &on);
	verdict_judge(&v, &off, &on, &r, 1);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_SLOWER);
}

static void test_pairs_band(void)
{
	struct dump off, on;
	struct verdict v;
	double straddle[4] = { 1.51, 1.03, 1.19, 0.95 };	/* issue 19's four pairs */
	double close[3] = { 1.02, 1.01, 1.02 };
	double clear[3] = { 1.30, 1.25, 1.28 };
	double wide[3] = { 1.05, 1.30, 1.10 };
	double touch[3] = { 1.02, 1.30, 1.10 };
	double slower[3] = { 0.80, 0.95, 0.90 };
	double demo[3] = { 1.36, 2.98, 1.92 };	/* make demo: every pair faster, widely spread */

	pair(&off, &on);
	verdict_judge(&v, &off, &on, straddle, 4);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_SAME);
	CU_ASSERT_DOUBLE_EQUAL(v.median, 1.11, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(v.min, 0.95, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(v.max, 1.51, 1e-9);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.time_text, "no measurable difference in time"));
	verdict_judge(&v, &off, &on, close, 3);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_SAME);	/* within the 3% floor */
	CU_ASSERT_DOUBLE_EQUAL(v.band, VERDICT_BAND_MIN, 1e-9);
	verdict_judge(&v, &off, &on, clear, 3);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_FASTER);
	verdict_judge(&v, &off, &on, wide, 3);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_FASTER);	/* every pair beyond the 3% band */
	verdict_judge(&v, &off, &on, demo, 3);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_FASTER);	/* a wide spread all on one side is a verdict */
	verdict_judge(&v, &off, &on, touch, 3);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_SAME);	/* one pair within the band */
	verdict_judge(&v, &off, &on, slower, 3);
	CU_ASSERT_EQUAL(v.time, VERDICT_TIME_SLOWER);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.time_text, "slower with the pool"));
}

static void test_pairs_summed(void)
{
	struct dump off[2], on[2], soff, son;
	double r[2];

	pair(&off[0], &on[0]);
	pair(&off[1], &on[1]);
	off[1].elapsed_s = 20.0;
	on[1].elapsed_s = 16.0;
	verdict_add_pair(&soff, &son, &off[0], &on[0], 0, r);
	verdict_add_pair(&soff, &son, &off[1], &on[1], 1, r);
	CU_ASSERT_DOUBLE_EQUAL(r[0], 1.25, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r[1], 1.25, 1e-9);
	/* runs one after the other: the mean wall time, not the longest */
	CU_ASSERT_DOUBLE_EQUAL(soff.elapsed_s, 15.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(son.elapsed_s, 12.0, 1e-9);
	CU_ASSERT_EQUAL(son.requested, 2u << 20);
}

static void test_dump_reads_pace_and_device(void)
{
	char path[] = "/tmp/vrampool-test-verdict.XXXXXX", msg[512];
	struct dump d, e;
	FILE *f;
	int fd = mkstemp(path);

	CU_ASSERT_FATAL(fd >= 0);
	f = fdopen(fd, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("{\"vrampool\": 1, \"format\": 2, \"version\": \"0.2.0\", \"mode\": \"dry\", \"host\": \"h\","
	      " \"command\": [\"python\", \"train.py\"], \"device\": {\"name\": \"NVIDIA H200\", \"ordinal\": 3},"
	      " \"pace\": {\"window_copies\": 4, \"copies\": 16, \"bytes\": 1024, \"ns\": 16000,"
	      " \"windows\": [[4, 256, 4000]], \"steady\": {\"from_window\": 2, \"copies\": 8, \"ns\": 10000,"
	      " \"ns_per_copy\": 1250.0}}, \"bytes\": {}}", f);
	fclose(f);
	CU_ASSERT_EQUAL_FATAL(dump_load(&d, path, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(d.format, 2);
	CU_ASSERT_STRING_EQUAL(d.version, "0.2.0");
	CU_ASSERT_STRING_EQUAL(d.command, "python train.py");
	CU_ASSERT_TRUE(d.has_device && d.device_ordinal == 3);
	CU_ASSERT_STRING_EQUAL(d.device_name, "NVIDIA H200");
	CU_ASSERT_TRUE(d.has_pace && d.has_steady && d.pace_copies == 16);
	CU_ASSERT_DOUBLE_EQUAL(d.steady_ns_per_copy, 1250.0, 1e-9);
	CU_ASSERT_TRUE(dump_is_dry(&d));
	CU_ASSERT_FALSE(dump_is_on(&d) || dump_is_off(&d));
	/* the same device sums; another ordinal does not */
	e = d;
	CU_ASSERT_TRUE(dump_same_device(&d, &e));
	e.device_ordinal = 2;
	CU_ASSERT_FALSE(dump_same_device(&d, &e));
	dump_add(&d, &e);
	CU_ASSERT_FALSE(d.has_device);
	CU_ASSERT_EQUAL(d.steady_copies, 16);
	CU_ASSERT_DOUBLE_EQUAL(d.steady_ns_per_copy, 1250.0, 1e-9);
	unlink(path);
}

static const CU_TestInfo tests[] = {
	{ "the steady time per copy judges time before wall time, off/on", test_steady_before_wall },
	{ "without a pace in both dumps, wall time is the figure, and says so", test_wall_time_fallback },
	{ "one pair carries a time verdict only beyond 25% either way", test_one_pair_band },
	{ "N pairs: faster or slower only when every pair is beyond the 3% band on that side",
	  test_pairs_band },
	{ "pairs are summed with each pair's ratio, the runs' wall times averaged", test_pairs_summed },
	{ "a dump's pace, device, command and dry mode are read, and summed", test_dump_reads_pace_and_device },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "the A/B verdict",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
