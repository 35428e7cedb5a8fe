/*
 * Unit tests of the link meter (pool/link.h): when it measures (pure), and
 * what it measures on the emulated device with a simulated link
 * (FAKECUDA_H2D_GBPS): a copy's time between two timed events, read later
 * without waiting, never faster than the simulated link, failures dropped
 * and counted.
 *
 * The emulated device reads its FAKECUDA_* variables at its first call, so
 * every device case runs in a fork()ed child (tests/fakecuda/check/
 * harness.h) that exits with the line of its first failed check.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../fakecuda/check/harness.h"
#include "cunit_main.h"
#include "core/stats.h"
#include "device/device.h"
#include "pool/link.h"

/* ---- when it measures (no device) ------------------------------------------- */

static void test_due_rules(void)
{
	struct link_meter m;
	struct ledger_link l;
	int due = 0;

	memset(&m, 0, sizeof(m));
	/* small copies are never measured: their time is mostly a copy's fixed cost */
	CU_ASSERT_FALSE(link_plain_due(&m, 0, LINK_MIN_BYTES - 1));
	CU_ASSERT_TRUE(link_plain_due(&m, 0, LINK_MIN_BYTES));
	/* a stated link: nothing is measured, and it is the link */
	CU_ASSERT_FALSE(link_plain_due(&m, 16, 1 << 30));
	CU_ASSERT_FALSE(link_pool_due(&m, 16, 1 << 30, 0));
	link_get(&m, NULL, 16, &l);
	CU_ASSERT_EQUAL(l.source, LEDGER_LINK_STATED);
	CU_ASSERT_DOUBLE_EQUAL(l.gbps, 16, 1e-9);
	link_get(&m, NULL, 0, &l);
	CU_ASSERT_EQUAL(l.source, LEDGER_LINK_NONE);
	/* a pooling spec sends one copy plain after LINK_GAP copies without a measurement */
	memset(&m, 0, sizeof(m));
	for (int i = 1; i <= LINK_GAP && !due; i++)
		if ((due = link_pool_due(&m, 0, 1 << 20, 0)))
			CU_ASSERT_EQUAL(i, LINK_GAP);
	CU_ASSERT_TRUE(due);
	/* one that pools clearly on the link measured so far waits LINK_POOL_REFRESH copies, full set or not */
	memset(&m, 0, sizeof(m));
	for (int i = 1; i < LINK_POOL_REFRESH; i++)
		CU_ASSERT_FALSE(link_pool_due(&m, 0, 1 << 20, 1));
	CU_ASSERT_TRUE(link_pool_due(&m, 0, 1 << 20, 1));
	/* once LINK_FIRST measurements are in: one plain copy in LINK_REFRESH */
	m.n = LINK_FIRST;
	m.plain = 0;
	for (int i = 1; i < LINK_REFRESH; i++)
		CU_ASSERT_FALSE(link_plain_due(&m, 0, 1 << 20));
	CU_ASSERT_TRUE(link_plain_due(&m, 0, 1 << 20));
	/* the estimate is the fastest of the last measurements */
	m.n = 3;
	m.rate[0] = 1.0;
	m.rate[1] = 3.5;
	m.rate[2] = 2.0;
	link_get(&m, NULL, 0, &l);
	CU_ASSERT_EQUAL(l.source, LEDGER_LINK_MEASURED);
	CU_ASSERT_DOUBLE_EQUAL(l.gbps, 3.5, 1e-9);
	/* after LINK_FAIL_MAX failures it stops measuring */
	m.fails = LINK_FAIL_MAX;
	CU_ASSERT_FALSE(link_plain_due(&m, 0, 1 << 30));
}

/*
 * The serve meter: the gather of hits is timed while fewer than LINK_FIRST
 * measurements are in, then one in LINK_REFRESH, never with a stated link; a
 * short time counts (a fast serving is the point); its speed comes with
 * the link's.
 */
static void test_serve_due_rules(void)
{
	struct link_meter link, serve;
	struct ledger_link l;
	int i;

	memset(&link, 0, sizeof(link));
	memset(&serve, 0, sizeof(serve));
	CU_ASSERT_FALSE(link_serve_due(&serve, 0, LINK_MIN_BYTES - 1));
	CU_ASSERT_TRUE(link_serve_due(&serve, 0, LINK_MIN_BYTES));
	serve.n = LINK_FIRST - 1;
	CU_ASSERT_TRUE(link_serve_due(&serve, 0, 1 << 20));
	serve.n = LINK_FIRST;
	serve.plain = 0;
	for (i = 1; i < LINK_REFRESH; i++)
		CU_ASSERT_FALSE(link_serve_due(&serve, 0, 1 << 20));
	CU_ASSERT_TRUE(link_serve_due(&serve, 0, 1 << 20));
	/* nothing measured: serving is taken as free */
	serve.n = 0;
	link_get(&link, &serve, 0, &l);
	CU_ASSERT_EQUAL(l.source, LEDGER_LINK_NONE);
	CU_ASSERT_DOUBLE_EQUAL(l.serve_gbps, 0, 1e-12);
	/* it counts once LINK_FIRST gathers were timed, beside a measured link */
	serve.n = LINK_FIRST - 1;
	for (i = 0; i < LINK_KEEP; i++)
		serve.rate[i] = 300.0;
	serve.rate[1] = 450.0;
	link.n = 1;
	link.rate[0] = 12.0;
	link_get(&link, &serve, 0, &l);
	CU_ASSERT_DOUBLE_EQUAL(l.serve_gbps, 0, 1e-12);
	serve.n = LINK_FIRST;
	link_get(&link, &serve, 0, &l);
	CU_ASSERT_EQUAL(l.source, LEDGER_LINK_MEASURED);
	CU_ASSERT_DOUBLE_EQUAL(l.gbps, 12.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(l.serve_gbps, 450.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(link_rate(&serve), 450.0, 1e-9);
	/* a stated link is the whole saving: serving is neither timed nor weighed */
	link_get(&link, &serve, 16, &l);
	CU_ASSERT_DOUBLE_EQUAL(l.gbps, 16, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(l.serve_gbps, 0, 1e-12);
	serve.n = 0;
	CU_ASSERT_FALSE(link_serve_due(&serve, 16, 1 << 20));
}

/* ---- on the emulated device ---------------------------------------------------- */

static __typeof__(cuMemAlloc_v2) *t_alloc;
static __typeof__(cuMemcpyHtoDAsync_v2) *t_htod_async;
static __typeof__(cuStreamCreate) *t_stream_create;
static __typeof__(cuStreamSynchronize) *t_sync;

/* In a child: binds device 0's primary context and opens the driver for device.c. */
static void t_open(void)
{
	__typeof__(cuInit) *init;
	__typeof__(cuDevicePrimaryCtxRetain) *retain;
	__typeof__(cuCtxSetCurrent) *setctx;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	CUcontext ctx;

	CHK(h != NULL);
	*(void **)&init = dlsym(h, "cuInit");
	*(void **)&retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&setctx = dlsym(h, "cuCtxSetCurrent");
	*(void **)&t_alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&t_htod_async = dlsym(h, "cuMemcpyHtoDAsync_v2");
	*(void **)&t_stream_create = dlsym(h, "cuStreamCreate");
	*(void **)&t_sync = dlsym(h, "cuStreamSynchronize");
	CHK(init && retain && setctx && t_alloc && t_htod_async && t_stream_create && t_sync);
	CHK(init(0) == CUDA_SUCCESS && retain(&ctx, 0) == CUDA_SUCCESS && setctx(ctx) == CUDA_SUCCESS);
	CHK(device_open() == 0);
	stats_reset(1, "");
}

static uint64_t t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Measures one copy of n bytes on stream s as the pool does (link_begin,
 * the send, link_end), then polls until the measurement is read in.
 * busy: a copy of as many bytes goes first, so the stream is busy.
 */
static void t_measure(struct link_meter *m, CUstream s, CUdeviceptr dst, const void *src, size_t n, int busy)
{
	unsigned before = m->n;
	uint64_t w0;
	int ok;

	if (busy)
		CHK(t_htod_async(dst, src, n, s) == CUDA_SUCCESS);
	CHK(link_begin(m, (dev_stream)s) == 0);
	w0 = t_now();
	ok = t_htod_async(dst, src, n, s) == CUDA_SUCCESS;
	link_end(m, (dev_stream)s, n, t_now() - w0, 0, ok);
	CHK(m->phase == LINK_INFLIGHT);
	/* read without waiting: in flight until the stream reaches the second event */
	for (int i = 0; i < 100000 && m->phase == LINK_INFLIGHT; i++) {
		link_poll(m, LINK_MIN_NS);
		if (m->phase == LINK_INFLIGHT)
			usleep(100);
	}
	CHK(m->phase == LINK_IDLE && m->n == before + 1);
	CHK(t_sync(s) == CUDA_SUCCESS);
}

/*
 * A 1 GB/s link: 128 KiB copies take 131 us each, on an idle stream and on
 * a busy one. That is less than the emulated device lets its link fall
 * behind before its worker sleeps: the events' times must follow the
 * simulated link, not the worker's memcpy.
 */
static void child_measures_link(void)
{
	size_t n = 128 << 10;
	char *src = calloc(1, n);
	struct link_meter m;
	struct ledger_link l;
	CUdeviceptr dst;
	CUstream s;

	t_open();
	CHK(src && t_alloc(&dst, n) == CUDA_SUCCESS && t_stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	memset(&m, 0, sizeof(m));
	for (int i = 0; i < LINK_KEEP; i++)
		t_measure(&m, s, dst, src, n, i % 2);
	link_get(&m, NULL, 0, &l);
	CHK(l.source == LEDGER_LINK_MEASURED);
	/* never faster than the link itself (the events' times follow the simulated link) */
	CHK(l.gbps <= 1.0 * 1.02);
	/* and not absurdly slower (a generous bound: the machine may be busy) */
	CHK(l.gbps > 0.05);
	link_release(&m);
	CHK(m.a == NULL && m.b == NULL);
	free(src);
}

/* No timed events (FAKECUDA_FAIL on cuEventCreate): no measurement, a failure counted, the link unknown. */
static void child_fails_counted(void)
{
	struct link_meter m;
	struct ledger_link l;
	CUstream s;

	t_open();
	CHK(t_stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	memset(&m, 0, sizeof(m));
	CHK(link_begin(&m, (dev_stream)s) != 0);
	CHK(m.fails == 1 && m.phase == LINK_IDLE);
	link_get(&m, NULL, 0, &l);
	CHK(l.source == LEDGER_LINK_NONE && l.gbps == 0);
	link_release(&m);
}

/* A send that failed drops the measurement, uncounted as a failure of the meter. */
static void child_failed_send_dropped(void)
{
	struct link_meter m;
	CUstream s;

	t_open();
	CHK(t_stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	memset(&m, 0, sizeof(m));
	CHK(link_begin(&m, (dev_stream)s) == 0);
	link_end(&m, (dev_stream)s, 1 << 20, 0, 0, 0);
	CHK(m.phase == LINK_IDLE && m.fails == 0 && m.n == 0);
	link_release(&m);
}

static void test_measures_link(void)
{
	static const char *const env[] = { "FAKECUDA_H2D_GBPS", "1", NULL };

	CU_ASSERT_TRUE(child_ok(in_child(child_measures_link, env)));
}

static void test_fails_counted(void)
{
	static const char *const env[] = { "FAKECUDA_FAIL", "cuEventCreate", NULL };

	CU_ASSERT_TRUE(child_ok(in_child(child_fails_counted, env)));
}

static void test_failed_send_dropped(void)
{
	CU_ASSERT_TRUE(child_ok(in_child(child_failed_send_dropped, NULL)));
}

static const CU_TestInfo tests[] = {
	{ "the serve meter times a gather of hits first often, then now and then, and comes with the link",
	  test_serve_due_rules },
	{ "the meter measures copies big enough, a stated link never, a pooling spec after a gap",
	  test_due_rules },
	{ "a copy on the simulated link is measured from timed events, never faster than the link",
	  test_measures_link },
	{ "without timed events nothing is measured and the failure is counted", test_fails_counted },
	{ "a send that failed drops its measurement", test_failed_send_dropped },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "link",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
