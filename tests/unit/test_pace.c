/*
 * Unit tests of core/pace (issue 19): the window table of the program's
 * host-to-device copies (windows of W copies, neighbours merged and W
 * doubled when the 64 are full, each window's time from its first call to
 * the next window's, the last to its last return), the steady part (the
 * windows from the middle on), the per-thread copy clock the cost ledger
 * shares, and notes from several threads while a reader takes snapshots.
 * Times are given explicitly (pace_note_at): nothing here is timed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <CUnit/Basic.h>

#include "cunit_main.h"
#include "core/pace.h"

/* Notes n copies: copy k called at 1000 * (start + k), returning 10 ns later, of k + 1 bytes. */
static void note_copies(uint64_t start, uint64_t n)
{
	for (uint64_t k = 0; k < n; k++)
		pace_note_at(1000 * (start + k), 1000 * (start + k) + 10, start + k + 1);
}

/* A fresh table after note_copies(0, n), into *s. */
static void table_of(uint64_t n, struct pace_snapshot *s)
{
	pace_reset();
	note_copies(0, n);
	pace_snapshot(s);
}

static void test_empty(void)
{
	struct pace_snapshot s;

	table_of(0, &s);
	CU_ASSERT(s.window_copies == 1 && s.nwindows == 0);
	CU_ASSERT(s.copies == 0 && s.ns == 0 && s.steady_copies == 0 && s.steady_ns_per_copy == 0);
}

static void test_one_copy_a_window_until_full(void)
{
	struct pace_snapshot s;

	table_of(PACE_WINDOWS, &s);
	CU_ASSERT_EQUAL(s.window_copies, 1);
	CU_ASSERT_EQUAL(s.nwindows, PACE_WINDOWS);
	CU_ASSERT_EQUAL(s.copies, PACE_WINDOWS);
	/* each window: from its call to the next window's call; the last, to its return */
	CU_ASSERT_EQUAL(s.w_ns[0], 1000);
	CU_ASSERT_EQUAL(s.w_ns[PACE_WINDOWS - 2], 1000);
	CU_ASSERT_EQUAL(s.w_ns[PACE_WINDOWS - 1], 10);
	CU_ASSERT_EQUAL(s.w_bytes[5], 6);
	CU_ASSERT_EQUAL(s.ns, 1000 * (PACE_WINDOWS - 1) + 10);
	CU_ASSERT_EQUAL(s.bytes, (uint64_t)PACE_WINDOWS * (PACE_WINDOWS + 1) / 2);
}

static void test_full_table_merges_neighbours_and_doubles_w(void)
{
	struct pace_snapshot s;

	table_of(PACE_WINDOWS + 1, &s);
	CU_ASSERT_EQUAL(s.window_copies, 2);
	CU_ASSERT_EQUAL(s.nwindows, PACE_WINDOWS / 2 + 1);
	CU_ASSERT_EQUAL(s.copies, PACE_WINDOWS + 1);
	/* window 0 is copies 0 and 1: bytes 1 + 2, from call 0 to call 2000 */
	CU_ASSERT_EQUAL(s.w_copies[0], 2);
	CU_ASSERT_EQUAL(s.w_bytes[0], 3);
	CU_ASSERT_EQUAL(s.w_ns[0], 2000);
	/* the new copy opened window 32, alone, to its own return */
	CU_ASSERT_EQUAL(s.w_copies[PACE_WINDOWS / 2], 1);
	CU_ASSERT_EQUAL(s.w_bytes[PACE_WINDOWS / 2], PACE_WINDOWS + 1);
	CU_ASSERT_EQUAL(s.w_ns[PACE_WINDOWS / 2], 10);
	CU_ASSERT_EQUAL(s.w_ns[PACE_WINDOWS / 2 - 1], 2000);
	CU_ASSERT_EQUAL(s.ns, 1000 * PACE_WINDOWS + 10);
}

static void test_long_run_stays_bounded_and_whole(void)
{
	const uint64_t n = 100000;
	struct pace_snapshot s;
	uint64_t copies = 0, bytes = 0;

	table_of(n, &s);
	CU_ASSERT(s.nwindows <= PACE_WINDOWS && s.nwindows > PACE_WINDOWS / 2);
	CU_ASSERT_EQUAL(s.window_copies & (s.window_copies - 1), 0);	/* a power of two */
	CU_ASSERT(s.window_copies * PACE_WINDOWS >= n && s.window_copies * PACE_WINDOWS / 2 < n);
	for (int i = 0; i < s.nwindows; i++) {
		if (i + 1 < s.nwindows)
			CU_ASSERT_EQUAL(s.w_copies[i], s.window_copies);	/* full, but the last */
		copies += s.w_copies[i];
		bytes += s.w_bytes[i];
	}
	CU_ASSERT_EQUAL(copies, n);
	CU_ASSERT_EQUAL(s.copies, n);
	CU_ASSERT_EQUAL(bytes, n * (n + 1) / 2);
	CU_ASSERT_EQUAL(s.ns, 1000 * (n - 1) + 10);
}

static void test_steady_is_the_windows_from_the_middle(void)
{
	struct pace_snapshot s;

	pace_reset();
	/* ten copies: the first five slow (1 ms apart), the last five fast (1 us apart) */
	for (uint64_t k = 0; k < 5; k++)
		pace_note_at(1000000 * k, 1000000 * k + 10, 100);
	for (uint64_t k = 0; k < 5; k++)
		pace_note_at(5000000 + 1000 * k, 5000000 + 1000 * k + 10, 100);
	pace_snapshot(&s);
	CU_ASSERT_EQUAL(s.nwindows, 10);
	CU_ASSERT_EQUAL(s.steady_from, 5);
	CU_ASSERT_EQUAL(s.steady_copies, 5);
	CU_ASSERT_EQUAL(s.steady_ns, 4 * 1000 + 10);
	CU_ASSERT_DOUBLE_EQUAL(s.steady_ns_per_copy, 4010.0 / 5, 1e-9);
	/* an odd count: from n / 2 */
	pace_note_at(5005000, 5005010, 100);
	pace_snapshot(&s);
	CU_ASSERT_EQUAL(s.steady_from, 5);
	CU_ASSERT_EQUAL(s.steady_copies, 6);
}

static void test_window_keeps_earliest_call_and_latest_return(void)
{
	struct pace_snapshot s;

	table_of(PACE_WINDOWS, &s);
	/* two more copies: the table merges (W 2); they share window 32, noted out of order */
	pace_note_at(900000, 900500, 1);
	pace_note_at(800000, 800100, 1);
	pace_snapshot(&s);
	CU_ASSERT_EQUAL(s.nwindows, PACE_WINDOWS / 2 + 1);
	CU_ASSERT_EQUAL(s.w_copies[PACE_WINDOWS / 2], 2);
	CU_ASSERT_EQUAL(s.w_ns[PACE_WINDOWS / 2], 900500 - 800000);
	/* a return before its call counts as no time */
	pace_reset();
	pace_note_at(500, 100, 1);
	pace_snapshot(&s);
	CU_ASSERT_EQUAL(s.ns, 0);
}

static void test_thread_clock_is_shared_with_the_ledger(void)
{
	struct pace_snapshot s;
	uint64_t call, stamp, end;

	pace_reset();
	call = pace_begin();
	stamp = pace_call_ns();         /* the ledger's stamp: the call, not a new reading */
	CU_ASSERT_EQUAL(stamp, call);
	end = pace_clock_ns();          /* the ledger's end reading */
	pace_note(64);                  /* takes that reading as the return */
	pace_note(32);                  /* a batch's next entry: the same call and return */
	pace_snapshot(&s);
	CU_ASSERT_EQUAL(s.copies, 2);
	CU_ASSERT_EQUAL(s.w_ns[1], end - call);
	CU_ASSERT_EQUAL(s.w_ns[0], 0);	/* both were called at once */
	CU_ASSERT_EQUAL(s.bytes, 96);
}

#define PACE_THREADS 4
#define PACE_PER_THREAD 20000

static atomic_int pace_writers_done;

static void *pace_writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < PACE_PER_THREAD; i++) {
		pace_begin();
		pace_note(8);
	}
	atomic_fetch_add(&pace_writers_done, 1);
	return NULL;
}

static void test_threads_note_while_a_reader_snapshots(void)
{
	pthread_t t[PACE_THREADS];
	struct pace_snapshot s;
	uint64_t copies;
	int bad = 0;

	pace_reset();
	atomic_store(&pace_writers_done, 0);
	for (int i = 0; i < PACE_THREADS; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, pace_writer, NULL), 0);
	while (atomic_load(&pace_writers_done) < PACE_THREADS) {
		pace_snapshot(&s);
		copies = 0;
		for (int i = 0; i < s.nwindows; i++)
			copies += s.w_copies[i];
		/* a consistent table: its windows hold what it counts, 8 bytes each, at most W each */
		bad += copies != s.copies || s.bytes != 8 * s.copies || s.nwindows > PACE_WINDOWS;
		for (int i = 0; i < s.nwindows; i++)
			bad += s.w_copies[i] > s.window_copies;
	}
	for (int i = 0; i < PACE_THREADS; i++)
		pthread_join(t[i], NULL);
	CU_ASSERT_EQUAL(bad, 0);
	pace_snapshot(&s);
	CU_ASSERT_EQUAL(s.copies, (uint64_t)PACE_THREADS * PACE_PER_THREAD);
	CU_ASSERT_EQUAL(s.bytes, 8ull * PACE_THREADS * PACE_PER_THREAD);
}

static const CU_TestInfo tests[] = {
	{ "an empty table has no window, W 1 and no steady pace", test_empty },
	{ "each of the first 64 copies is a window, timed to the next window's call", test_one_copy_a_window_until_full },
	{ "a full table merges neighbours and doubles W", test_full_table_merges_neighbours_and_doubles_w },
	{ "a long run stays in 64 windows, each full but the last, and loses no copy",
	  test_long_run_stays_bounded_and_whole },
	{ "the steady pace is the windows from the middle on", test_steady_is_the_windows_from_the_middle },
	{ "a window keeps its earliest call and latest return", test_window_keeps_earliest_call_and_latest_return },
	{ "the copy's clock is read at the call and the return, shared with the ledger",
	  test_thread_clock_is_shared_with_the_ledger },
	{ "threads note copies while a reader takes consistent snapshots",
	  test_threads_note_while_a_reader_snapshots },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "pace",
	.tests = tests,
	.alarm_seconds = 60,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
