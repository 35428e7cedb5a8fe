/*
 * Unit tests of hazard: the streams whose queued work may write host
 * memory, over the emulated device. A host function holds a stream while
 * work is noted behind it; the questions must answer "pending" for the
 * bytes that work may write, and "done" once the stream ran.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "cunit_main.h"
#include "pool/hazard.h"

static __typeof__(cuInit) *t_init;
static __typeof__(cuDevicePrimaryCtxRetain) *t_retain;
static __typeof__(cuCtxSetCurrent) *t_setctx;
static __typeof__(cuStreamCreate) *t_stream_create;
static __typeof__(cuLaunchHostFunc) *t_host_func;
static __typeof__(cuStreamSynchronize) *t_stream_sync;
static int (*t_fail)(const char *spec);

static CUcontext t_ctx;
static CUstream t_s, t_t;
static atomic_int t_gate;
static unsigned char t_buf[64 * 4096];

static void t_hold(void *arg)
{
	struct timespec ts = { 0, 1000000 };

	(void)arg;
	while (!atomic_load(&t_gate))
		nanosleep(&ts, NULL);
}

/* Holds stream s until t_release. */
static void t_close(CUstream s)
{
	atomic_store(&t_gate, 0);
	CU_ASSERT_EQUAL_FATAL(t_host_func(s, t_hold, NULL), CUDA_SUCCESS);
}

static void t_release(CUstream s)
{
	atomic_store(&t_gate, 1);
	CU_ASSERT_EQUAL(t_stream_sync(s), CUDA_SUCCESS);
}

/* Whether noted work that may write [p, p + n) is done within a second (the device runs on its own threads). */
static int t_settles(const void *p, uint64_t n)
{
	struct timespec ts = { 0, 1000000 };

	for (int ms = 0; ms < 1000; ms++) {
		if (!hazard_pending(p, n))
			return 1;
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* A host function may write anything: every range is pending until its stream ran. */
static void test_any(void)
{
	CU_ASSERT_EQUAL(hazard_pending(t_buf, 4096), 0);
	t_close(t_s);
	hazard_note(t_s, NULL, 0);
	CU_ASSERT_EQUAL(hazard_pending(t_buf, 4096), 1);
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 32 * 4096, 1), 1);
	t_release(t_s);
	CU_ASSERT_EQUAL(hazard_pending(t_buf, 4096), 0);
}

/* A copy to the host writes its destination only; when the table is full a stream's work merges. */
static void test_ranges(void)
{
	t_close(t_s);
	hazard_note(t_s, t_buf, 4096);
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 4096, 4096), 0);         /* right after it */
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 4095, 2), 1);            /* its last byte */
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 2 * 4096, 4096), 0);
	/* each copy keeps its own bytes, gaps stay free */
	for (int i = 4; i < 20; i += 2)
		hazard_note(t_s, t_buf + i * 4096, 4096);
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 3 * 4096, 4096), 0);
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 4 * 4096, 4096), 1);
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 40 * 4096, 4096), 0);
	/* a table full of pending work: the stream's newest entry grows to cover the next */
	for (int i = 0; i < 300; i++)
		hazard_note(t_s, t_buf + 20 * 4096 + (i % 2) * 8 * 4096, 4096);
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 24 * 4096, 4096), 1);    /* between the two */
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 40 * 4096, 4096), 0);
	/* another stream's work is another stream's */
	hazard_note(t_t, t_buf + 40 * 4096, 4096);
	CU_ASSERT(t_settles(t_buf + 40 * 4096, 4096));                  /* t is idle: its work runs */
	t_release(t_s);
	CU_ASSERT_EQUAL(hazard_pending(t_buf, sizeof(t_buf)), 0);
	/* a stream whose work ran starts its ranges afresh */
	t_close(t_s);
	hazard_note(t_s, t_buf + 50 * 4096, 4096);
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 3 * 4096, 4096), 0);
	CU_ASSERT_EQUAL(hazard_pending(t_buf + 50 * 4096, 4096), 1);
	t_release(t_s);
}

/* An event that cannot be made or recorded leaves the stream itself to be asked. */
static void test_no_event(void)
{
	CU_ASSERT_EQUAL_FATAL(t_fail("cuEventRecord@1"), 1);
	t_close(t_t);
	hazard_note(t_t, NULL, 0);
	CU_ASSERT_EQUAL(hazard_pending(t_buf, 1), 1);
	t_release(t_t);
	CU_ASSERT_EQUAL(hazard_pending(t_buf, 1), 0);
	CU_ASSERT_EQUAL(t_fail(""), 0);
}

static int t_suite_init(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);

	if (!h)
		return -1;
	*(void **)&t_init = dlsym(h, "cuInit");
	*(void **)&t_retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&t_setctx = dlsym(h, "cuCtxSetCurrent");
	*(void **)&t_stream_create = dlsym(h, "cuStreamCreate");
	*(void **)&t_host_func = dlsym(h, "cuLaunchHostFunc");
	*(void **)&t_stream_sync = dlsym(h, "cuStreamSynchronize");
	*(void **)&t_fail = dlsym(h, "fakecuda_fail");
	if (!t_init || !t_retain || !t_setctx || !t_stream_create || !t_host_func || !t_stream_sync || !t_fail)
		return -1;
	if (t_init(0) || t_retain(&t_ctx, 0) || t_setctx(t_ctx))
		return -1;
	if (t_stream_create(&t_s, CU_STREAM_NON_BLOCKING) || t_stream_create(&t_t, CU_STREAM_NON_BLOCKING))
		return -1;
	return device_open() ? -1 : 0;
}

static const CU_TestInfo tests[] = {
	{ "a host function makes every range pending until its stream ran", test_any },
	{ "a copy to the host makes its own bytes pending; a full table merges a stream's work", test_ranges },
	{ "without an event the stream itself is asked", test_no_event },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "hazard",
	.init = t_suite_init,
	.tests = tests,
	.alarm_seconds = 60,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
