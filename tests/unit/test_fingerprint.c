/*
 * Unit tests of shim/fingerprint: stability, sensitivity to every byte and
 * to the length, keying, agreement of the parallel and serial paths (rows
 * and the two-level tree of huge rows) for every size and thread count,
 * workers that cannot start or are held back, the caller waiting for a
 * task a worker runs, the thread-count chooser, concurrent callers, and a
 * forked child that fingerprints with its own workers.
 *
 * Most tests install test hooks that make every large copy use exactly the
 * configured thread count (the chooser would hash some copies alone).
 */
#include <CUnit/Basic.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cunit_main.h"
#include "pool/fingerprint.h"

#define MiB (1ull << 20)

/* Large copies split with exactly the configured count, from 1 MiB. */
static const struct fp_test_hooks exact = { .exact_threads = 1 };
/* The same, splitting copies of any size. */
static const struct fp_test_hooks exact_all = { .exact_threads = 1, .parallel_min = 1 };

/* Fills buf with a deterministic pseudo-random pattern (xorshift64). */
static void fill_random(unsigned char *buf, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)(x >> 32);
	}
}

/* Allocates n pseudo-random bytes or fails the test. */
static unsigned char *random_buffer(size_t n, uint64_t seed)
{
	unsigned char *buf = malloc(n);

	CU_ASSERT_FATAL(buf != NULL);
	fill_random(buf, n, seed);
	return buf;
}

/* Whether two fingerprints are equal (a function, for CU_ASSERT). */
static int same(struct fp a, struct fp b)
{
	return fp_equal(&a, &b);
}

static void test_stable_within_process(void)
{
	unsigned char *buf = random_buffer(4096, 1);
	struct fp a = fingerprint_one(buf, 4096), b = fingerprint_one(buf, 4096), r;

	CU_ASSERT(same(a, b));
	fingerprint_rows(buf, 4096, 1, &r);
	CU_ASSERT(same(a, r));
	free(buf);
}

/* Flips one bit at each of a few positions of a len-byte buffer. */
static void check_bit_flips(size_t len)
{
	unsigned char *buf = random_buffer(len, 2);
	struct fp base = fingerprint_one(buf, len);
	size_t pos[] = { 0, len / 2, len - 1, len > 5 * MiB ? 4 * MiB : len / 3 };

	for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]); i++) {
		for (int bit = 0; bit < 8; bit += 7) {
			buf[pos[i]] ^= (unsigned char)(1u << bit);
			CU_ASSERT(!same(base, fingerprint_one(buf, len)));
			buf[pos[i]] ^= (unsigned char)(1u << bit);
		}
	}
	CU_ASSERT(same(base, fingerprint_one(buf, len)));
	free(buf);
}

static void test_one_flipped_bit_changes_it(void)
{
	check_bit_flips(1);
	check_bit_flips(17);
	check_bit_flips(3072);
	check_bit_flips(150528);
	check_bit_flips(9 * MiB + 5);       /* a tree row: three chunks */
}

static void test_it_depends_on_length(void)
{
	unsigned char *zeros = calloc(1, 256);
	unsigned char *big = random_buffer(8 * MiB + 1, 3);
	struct fp seen[257];

	CU_ASSERT_FATAL(zeros != NULL);
	for (size_t n = 0; n <= 256; n++) {
		seen[n] = fingerprint_one(zeros, n);
		for (size_t m = 0; m < n; m++)
			CU_ASSERT(!same(seen[m], seen[n]));
	}
	/* Tree rows: a shorter last chunk, and exactly two full chunks. */
	CU_ASSERT(!same(fingerprint_one(big, 8 * MiB + 1), fingerprint_one(big, 8 * MiB)));
	CU_ASSERT(!same(fingerprint_one(big, 8 * MiB), fingerprint_one(big, 8 * MiB - 1)));
	CU_ASSERT(!same(fingerprint_one(big, 4 * MiB + 1), fingerprint_one(big, 4 * MiB)));
	free(zeros);
	free(big);
}

static void test_different_secrets_give_different_fingerprints(void)
{
	size_t len = 6 * MiB;
	unsigned char *buf = random_buffer(len, 4);
	struct fp a, b, a_again, ta, tb;

	fingerprint_set_seed_for_tests(1);
	a = fingerprint_one(buf, 3072);
	ta = fingerprint_one(buf, len);
	fingerprint_set_seed_for_tests(2);
	b = fingerprint_one(buf, 3072);
	tb = fingerprint_one(buf, len);
	fingerprint_set_seed_for_tests(1);
	a_again = fingerprint_one(buf, 3072);
	CU_ASSERT(!same(a, b));
	CU_ASSERT(!same(ta, tb));
	CU_ASSERT(same(a, a_again));
	CU_ASSERT(same(ta, fingerprint_one(buf, len)));
	free(buf);
}

/*
 * Whether the upper halves of the YMM registers are in use (XGETBV with
 * ECX = 1, the XINUSE bitmap, bit 2), or -1 where the CPU cannot say.
 */
static int avx_upper_in_use(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d, lo, hi;

	if (!__get_cpuid_count(0xD, 1, &a, &b, &c, &d) || !(a & 4))
		return -1;
	__asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
	(void)hi;
	return (lo >> 2) & 1;
#else
	return -1;
#endif
}

static void test_hashing_leaves_the_avx_state_clean(void)
{
	unsigned char *buf = random_buffer(MiB, 13);
	struct fp out[64];
	struct fp one;
	int dirty_one, dirty_rows;

	/* The AVX2 kernel runs for rows over 240 bytes; SSE code after it
	 * (the shim's and the host program's) is slow while its upper state
	 * stays dirty. Checked right after each call, where the CPU tells. */
	one = fingerprint_one(buf, 3072);
	dirty_one = avx_upper_in_use();
	fingerprint_rows(buf, 3072, 64, out);
	dirty_rows = avx_upper_in_use();
	CU_ASSERT(dirty_one != 1);
	CU_ASSERT(dirty_rows != 1);
	CU_ASSERT(same(one, out[0]));
	free(buf);
}

/* Hashes nrows rows with threads threads and compares with fingerprint_one. */
static void check_parallel_matches_serial(unsigned threads, const unsigned char *buf,
					  uint64_t row, uint64_t nrows)
{
	struct fp *out = calloc(nrows, sizeof(*out));
	uint64_t bad = 0;

	CU_ASSERT_FATAL(out != NULL);
	CU_ASSERT_FATAL(fingerprint_init(threads) == 0);
	fingerprint_rows(buf, row, nrows, out);
	for (uint64_t r = 0; r < nrows; r++)
		if (!same(out[r], fingerprint_one(buf + r * row, row)))
			bad++;
	CU_ASSERT_EQUAL(bad, 0);
	free(out);
}

static void test_parallel_path_matches_serial_path(void)
{
	unsigned char *buf = random_buffer(64 * MiB, 5);
	uint64_t row = 3072, nrows = 16 * MiB / row;

	fingerprint_set_test_hooks(&exact);
	check_parallel_matches_serial(1, buf, row, nrows);
	check_parallel_matches_serial(4, buf, row, nrows);
	check_parallel_matches_serial(1, buf, 64 * MiB, 1);
	check_parallel_matches_serial(4, buf, 64 * MiB, 1);
	check_parallel_matches_serial(3, buf, 5 * MiB + 7, 3);     /* tree rows, partial chunk */
	check_parallel_matches_serial(2, buf, 150528, 64 * MiB / 150528);
	check_parallel_matches_serial(2, buf, 1 * MiB + 1, 2);      /* one row per task */
	fingerprint_shutdown();
	fingerprint_set_test_hooks(NULL);
	free(buf);
}

static void test_every_size_and_thread_count_matches_serial(void)
{
	static const uint64_t rows[] = { 1, 17, 64, 3072, 150528, MiB + 1, 5 * MiB + 7 };
	static const uint64_t counts[] = { 2, 3, 7, 64, 1000 };
	static const unsigned threads[] = { 2, 3, 4, 8 };
	unsigned char *buf = random_buffer(24 * MiB, 8);
	struct fp_stats before, after;

	fingerprint_set_test_hooks(&exact_all);
	fingerprint_get_stats(&before);
	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++)
		for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
				if (rows[r] * counts[c] <= 24 * MiB)
					check_parallel_matches_serial(threads[t], buf, rows[r],
								      counts[c]);
	check_parallel_matches_serial(3, buf, 5 * MiB + 7, 1);     /* one tree row */
	fingerprint_get_stats(&after);
	CU_ASSERT(after.parallel_jobs > before.parallel_jobs);
	CU_ASSERT(after.caller_tasks > before.caller_tasks);
	fingerprint_shutdown();
	fingerprint_set_test_hooks(NULL);
	free(buf);
}

static void test_no_deadlock_when_no_worker_can_start(void)
{
	static const struct fp_test_hooks none = { .exact_threads = 1, .parallel_min = 1,
						   .no_workers = 1 };
	unsigned char *buf = random_buffer(4 * MiB, 9);
	struct fp_stats before, st;

	fingerprint_shutdown();
	fingerprint_set_test_hooks(&none);
	fingerprint_get_stats(&before);
	check_parallel_matches_serial(4, buf, 3072, 4 * MiB / 3072);
	check_parallel_matches_serial(4, buf, 150528, 4 * MiB / 150528);
	fingerprint_get_stats(&st);
	CU_ASSERT_EQUAL(st.workers, 0);
	CU_ASSERT_EQUAL(st.worker_tasks, before.worker_tasks);
	CU_ASSERT_EQUAL(st.parallel_jobs, before.parallel_jobs);
	fingerprint_init(0);                       /* the chooser, with no workers either */
	check_parallel_matches_serial(0, buf, 3072, 4 * MiB / 3072);
	fingerprint_shutdown();
	fingerprint_set_test_hooks(NULL);
	free(buf);
}

/* A gate that holds workers back as they join a copy, until it opens. */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cv = PTHREAD_COND_INITIALIZER;
static int held_open;
static atomic_int held_count;

static void hold_worker(void)
{
	atomic_fetch_add(&held_count, 1);
	pthread_mutex_lock(&held_lock);
	while (!held_open)
		pthread_cond_wait(&held_cv, &held_lock);
	pthread_mutex_unlock(&held_lock);
}

static void test_a_held_back_worker_never_makes_the_caller_wait(void)
{
	static const struct fp_test_hooks held = { .exact_threads = 1, .worker_joined = hold_worker };
	uint64_t row = 3072, nrows = 8 * MiB / 3072;
	unsigned char *buf = random_buffer(row * nrows, 10);
	struct fp_stats before, after;

	fingerprint_shutdown();
	fingerprint_set_test_hooks(&held);
	fingerprint_get_stats(&before);
	/* The worker is invited to every copy but stays held: each copy is
	 * done by the caller alone, which never waits for it. */
	for (int i = 0; i < 5; i++)
		check_parallel_matches_serial(2, buf, row, nrows);
	fingerprint_get_stats(&after);
	CU_ASSERT_EQUAL(after.worker_tasks, before.worker_tasks);
	CU_ASSERT_EQUAL(after.waits, before.waits);
	CU_ASSERT_EQUAL(after.parallel_jobs, before.parallel_jobs + 5);
	CU_ASSERT_EQUAL(after.caller_tasks - before.caller_tasks,
			5 * ((nrows + 42 - 1) / 42));      /* 42 rows of 3 KiB: a 128 KiB task */
	/* Released, it finds nothing left to take and the next copies work. */
	pthread_mutex_lock(&held_lock);
	held_open = 1;
	pthread_cond_broadcast(&held_cv);
	pthread_mutex_unlock(&held_lock);
	check_parallel_matches_serial(2, buf, row, nrows);
	fingerprint_shutdown();                   /* joins the worker: it got through */
	fingerprint_set_test_hooks(NULL);
	free(buf);
}

/*
 * The first task a worker takes is delayed 20 ms; the caller, at its first
 * task, waits (up to 5 s) until a worker has taken one. So the caller ends
 * its own tasks long before the worker's, and must wait for it.
 */
static atomic_int slow_tasks, caller_held;

static void slow_worker_task(int by_worker)
{
	if (by_worker) {
		if (atomic_fetch_add(&slow_tasks, 1) == 0)
			usleep(20000);
		return;
	}
	if (atomic_fetch_add(&caller_held, 1) == 0)
		for (int i = 0; i < 5000 && atomic_load(&slow_tasks) == 0; i++)
			usleep(1000);
}

static void test_the_caller_waits_for_a_task_a_worker_runs(void)
{
	static const struct fp_test_hooks slow = { .exact_threads = 1, .workers_anywhere = 1,
						   .task_claimed = slow_worker_task };
	uint64_t row = 150528, nrows = 32;
	unsigned char *buf = random_buffer(row * nrows, 11);
	struct fp_stats before, after;

	fingerprint_shutdown();
	fingerprint_set_test_hooks(&slow);
	fingerprint_get_stats(&before);
	/* Every row must be there when fingerprint_rows returns, the rows of
	 * the delayed task included. */
	check_parallel_matches_serial(2, buf, row, nrows);
	fingerprint_get_stats(&after);
	CU_ASSERT(atomic_load(&slow_tasks) >= 1);
	CU_ASSERT(after.worker_tasks > before.worker_tasks);
	CU_ASSERT(after.waits > before.waits);
	CU_ASSERT(after.wait_ns > before.wait_ns);
	fingerprint_shutdown();
	fingerprint_set_test_hooks(NULL);
	free(buf);
}

/* The throughput the chooser sees, scripted: which count is faster. */
static atomic_uint faster;

static double scripted_rate(unsigned threads, double measured)
{
	(void)measured;
	return threads == atomic_load(&faster) ? 2.0 : 1.0;
}

/* Hashes n small copies (split, since the threshold is 1 byte); returns the count chosen. */
static unsigned chosen_after(int n, const unsigned char *buf)
{
	struct fp out[4];
	struct fp_stats st;

	for (int i = 0; i < n; i++)
		fingerprint_rows(buf, 1024, 4, out);
	fingerprint_get_stats(&st);
	return st.threads;
}

static void test_the_thread_count_follows_measured_throughput(void)
{
	static const struct fp_test_hooks scripted = { .parallel_min = 1, .rate = scripted_rate };
	unsigned char *buf = random_buffer(4096, 12);
	struct fp_stats a, b;

	fingerprint_shutdown();
	fingerprint_set_test_hooks(&scripted);
	/* A forced count of 2: the chooser picks between 2 and the caller alone. */
	fingerprint_init(2);
	atomic_store(&faster, 2);
	CU_ASSERT_EQUAL(chosen_after(10, buf), 2);
	atomic_store(&faster, 1);                  /* the machine got busy */
	CU_ASSERT_EQUAL(chosen_after(100, buf), 1);
	atomic_store(&faster, 2);                  /* and idle again */
	CU_ASSERT_EQUAL(chosen_after(100, buf), 2);
	fingerprint_get_stats(&a);
	CU_ASSERT(!a.adaptive && a.threads_max == 2);
	/* The default: the first large copy alone, the second with 2 threads. */
	if (sysconf(_SC_NPROCESSORS_ONLN) >= 2) {
		fingerprint_shutdown();
		fingerprint_init(0);
		fingerprint_get_stats(&a);
		chosen_after(1, buf);
		fingerprint_get_stats(&b);
		CU_ASSERT(b.adaptive && b.threads_max >= 2);
		CU_ASSERT_EQUAL(b.parallel_jobs, a.parallel_jobs);
		chosen_after(1, buf);
		fingerprint_get_stats(&b);
		CU_ASSERT_EQUAL(b.parallel_jobs, a.parallel_jobs + 1);
		atomic_store(&faster, 1);
		CU_ASSERT_EQUAL(chosen_after(100, buf), 1);
	}
	fingerprint_shutdown();
	fingerprint_set_test_hooks(NULL);
	fingerprint_init(0);
	free(buf);
}

/* What one concurrent caller hashes and what it must get. */
struct caller {
	const unsigned char *buf;
	uint64_t row, nrows;
	const struct fp *expect;
	int bad;
};

/* A concurrent caller: hashes its rows many times, counts wrong results. */
static void *caller_main(void *arg)
{
	struct caller *c = arg;
	struct fp *out = calloc(c->nrows, sizeof(*out));

	if (!out) {
		c->bad = 1;
		return NULL;
	}
	for (int it = 0; it < 20; it++) {
		fingerprint_rows(c->buf, c->row, c->nrows, out);
		for (uint64_t r = 0; r < c->nrows; r++)
			if (!same(out[r], c->expect[r]))
				c->bad++;
	}
	free(out);
	return NULL;
}

static void test_concurrent_callers_get_correct_results(void)
{
	enum { CALLERS = 6 };
	size_t len = 4 * MiB;
	unsigned char *buf = random_buffer(len, 6);
	uint64_t rows[CALLERS] = { 3072, 4096, 150528, 3072, 1000, 65536 };
	uint64_t nrows[CALLERS] = { 1024, 8, 20, 16, 4000, 60 };
	struct caller c[CALLERS];
	struct fp *expect[CALLERS];
	pthread_t tid[CALLERS];

	fingerprint_set_test_hooks(&exact);
	fingerprint_init(3);
	for (int i = 0; i < CALLERS; i++) {
		expect[i] = calloc(nrows[i], sizeof(struct fp));
		CU_ASSERT_FATAL(expect[i] != NULL);
		for (uint64_t r = 0; r < nrows[i]; r++)
			expect[i][r] = fingerprint_one(buf + r * rows[i], rows[i]);
		c[i] = (struct caller){ buf, rows[i], nrows[i], expect[i], 0 };
	}
	for (int i = 0; i < CALLERS; i++)
		CU_ASSERT_FATAL(pthread_create(&tid[i], NULL, caller_main, &c[i]) == 0);
	for (int i = 0; i < CALLERS; i++) {
		pthread_join(tid[i], NULL);
		CU_ASSERT_EQUAL(c[i].bad, 0);
		free(expect[i]);
	}
	fingerprint_shutdown();
	fingerprint_set_test_hooks(NULL);
	free(buf);
}

static void test_forked_child_fingerprints_correctly(void)
{
	uint64_t row = 3072, nrows = 2 * MiB / 3072;
	unsigned char *buf = random_buffer(row * nrows, 7);
	struct fp *expect = calloc(nrows, sizeof(*expect));
	struct fp got[2];
	int fds[2], status = 0;
	pid_t pid;

	CU_ASSERT_FATAL(expect != NULL);
	fingerprint_set_test_hooks(&exact);
	fingerprint_init(3);
	fingerprint_rows(buf, row, nrows, expect);     /* parent's workers now exist */
	CU_ASSERT_FATAL(pipe(fds) == 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		struct fp *out = calloc(nrows, sizeof(*out));
		int code = 0;

		close(fds[0]);
		alarm(30);                /* a hung child fails the test, not the suite */
		fingerprint_atfork_child();
		if (!out)
			_exit(3);
		fingerprint_rows(buf, row, nrows, out);          /* starts the child's workers */
		for (uint64_t r = 0; r < nrows; r++)
			if (!same(out[r], expect[r]))
				code = 2;
		got[0] = out[0];
		got[1] = out[nrows - 1];
		if (write(fds[1], got, sizeof(got)) != (ssize_t)sizeof(got))
			code = 4;
		fingerprint_shutdown();
		_exit(code);
	}
	close(fds[1]);
	CU_ASSERT(read(fds[0], got, sizeof(got)) == (ssize_t)sizeof(got));
	close(fds[0]);
	CU_ASSERT(waitpid(pid, &status, 0) == pid);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CU_ASSERT(same(got[0], expect[0]));
	CU_ASSERT(same(got[1], expect[nrows - 1]));
	/* The parent's workers still serve it. */
	fingerprint_rows(buf, row, nrows, expect);
	CU_ASSERT(same(got[1], expect[nrows - 1]));
	fingerprint_shutdown();
	fingerprint_set_test_hooks(NULL);
	free(expect);
	free(buf);
}

static const CU_TestInfo tests[] = {
	{ "the fingerprint of the same bytes is stable within a process",
	  test_stable_within_process },
	{ "one flipped bit in the first, middle or last byte changes it",
	  test_one_flipped_bit_changes_it },
	{ "the fingerprint depends on the length", test_it_depends_on_length },
	{ "different secrets give different fingerprints of the same bytes",
	  test_different_secrets_give_different_fingerprints },
	{ "hashing leaves the upper AVX state clean for the SSE code after it",
	  test_hashing_leaves_the_avx_state_clean },
	{ "the parallel path gives exactly the per-row results of the serial path",
	  test_parallel_path_matches_serial_path },
	{ "every row size, row count and thread count gives the serial results",
	  test_every_size_and_thread_count_matches_serial },
	{ "when no worker can start, the caller hashes everything without deadlock",
	  test_no_deadlock_when_no_worker_can_start },
	{ "a worker held back before its first task never makes the caller wait",
	  test_a_held_back_worker_never_makes_the_caller_wait },
	{ "the caller waits for a task a worker has taken and returns every row",
	  test_the_caller_waits_for_a_task_a_worker_runs },
	{ "the thread count follows measured throughput, both ways",
	  test_the_thread_count_follows_measured_throughput },
	{ "concurrent callers from several threads get correct results",
	  test_concurrent_callers_get_correct_results },
	{ "a forked child fingerprints correctly with its own workers",
	  test_forked_child_fingerprints_correctly },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "fingerprint",
	.tests = tests,
	.alarm_seconds = 120,	/* a deadlock kills the suite (a failure), not the test run */
};

int main(void)
{
	return cunit_suite_main(&suite);
}
