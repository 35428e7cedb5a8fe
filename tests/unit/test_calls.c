/*
 * Unit tests of pool/calls: what the pool layer makes of each copy a hook
 * describes, below the interception layer. VRAMPOOL=off forwards every
 * copy untouched: nothing served, fingerprinted or allocated, nothing
 * given back on out-of-memory, the counters say pass-through (and the same
 * copies are pooled when the shim is on). Every host-to-device copy that
 * succeeded is counted once, whatever its route: runtime or driver, pooled
 * or passed through, however many deliveries the pool made for it; one
 * that failed is not counted, nor is another direction. Over the emulated
 * device (scripts/test.sh sets LD_LIBRARY_PATH=build/fakecuda); the hooks'
 * callbacks call it directly. An allocation out of memory is tried again
 * once the pool gave its slabs back.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cunit_main.h"
#include "core/config.h"
#include "core/stats.h"
#include "device/device.h"
#include "pool/autolayout.h"
#include "pool/calls.h"
#include "pool/fingerprint.h"
#include "pool/pool.h"

#define ROW 3072
#define ROWS 8

/* The emulated device's entry points and test hooks. */
static struct {
	__typeof__(cuInit) *init;
	__typeof__(cuDevicePrimaryCtxRetain) *retain;
	__typeof__(cuCtxSetCurrent) *set_current;
	__typeof__(cuMemAlloc_v2) *alloc;
	__typeof__(cuMemFree_v2) *free;
	__typeof__(cuMemcpyHtoDAsync_v2) *htod;
	__typeof__(cuMemcpyDtoH_v2) *dtoh;
	__typeof__(cuMemsetD8_v2) *memset;
	__typeof__(cuCtxSynchronize) *sync;
	unsigned long long (*counter)(const char *name);
	int (*fail)(const char *spec);
} c_fc;

static void *c_lib;

/* The configuration calls_setup keeps (it must outlive every call), and its variables' text. */
static struct config c_cfg;
static char c_vars[256];

/* A variable of c_vars ("NAME=VALUE NAME=VALUE ..."; words end in a blank or the end), or NULL. */
static const char *c_getenv(const char *name)
{
	static char value[64];
	size_t len = strlen(name);

	for (const char *w = c_vars; *w; w += strcspn(w, " "), w += *w == ' ') {
		if (strncmp(w, name, len) != 0 || w[len] != '=')
			continue;
		snprintf(value, sizeof(value), "%.*s", (int)strcspn(w + len + 1, " "), w + len + 1);
		return value;
	}
	return NULL;
}

/* Starts the pool layer afresh with the variables vars (NAME=VALUE words): what a load of the shim does. */
static void c_setup(const char *vars)
{
	snprintf(c_vars, sizeof(c_vars), "%s", vars);
	CU_ASSERT_FATAL(config_load(&c_cfg, c_getenv) == 0);
	pool_shutdown();
	calls_setup(&c_cfg);
}

/* The pool on; its cost ledger forced to pool, so that no check depends on how fast this machine hashes. */
#define C_ON "VRAMPOOL_LAYOUT=3072 VRAMPOOL_BUDGET=64M VRAMPOOL_SLAB=1M VRAMPOOL_LEDGER=force"

/* One program copy as a hook hands it down, with what its callbacks did. */
struct c_copy {
	struct copy_call cc;
	int forward_err;        /* what the program's own call answers (0: it works) */
	int h2d_err;            /* what the pool's deliveries answer */
	unsigned forwards, deliveries;
	uint64_t delivered;     /* bytes the deliveries moved */
};

/* The program's call as it made it: a host-to-device copy on the legacy stream, or an error. */
static int c_forward(void *arg)
{
	struct c_copy *c = arg;

	c->forwards++;
	if (c->forward_err)
		return c->forward_err;
	return c_fc.htod((CUdeviceptr)(uintptr_t)c->cc.dst, c->cc.src, c->cc.n, NULL) == CUDA_SUCCESS ? 0 : 98;
}

/* A delivery of bytes [off, off + len) by the program's own entry point. */
static int c_h2d(void *arg, uint64_t off, uint64_t len)
{
	struct c_copy *c = arg;

	c->deliveries++;
	c->delivered += len;
	if (c->h2d_err)
		return c->h2d_err;
	return c_fc.htod((CUdeviceptr)(uintptr_t)c->cc.dst + off, (const char *)c->cc.src + off, len, NULL) ==
	       CUDA_SUCCESS ? 0 : 99;
}

/* A copy of n bytes from src to dst through the runtime (driver 0) or the driver (1). */
static void c_describe(struct c_copy *c, CUdeviceptr dst, const void *src, uint64_t n, int driver)
{
	memset(c, 0, sizeof(*c));
	c->cc = (struct copy_call){ .dst = (void *)(uintptr_t)dst, .src = src, .n = n, .dir = CL_DIR_H2D,
				    .driver = driver, .forward = c_forward, .h2d = c_h2d, .h2d_sync = c_h2d,
				    .arg = c };
}

/* ROWS rows of distinct content (seed picks which). */
static void c_fill(unsigned char *rows, uint32_t seed)
{
	for (uint32_t i = 0; i < ROWS * ROW; i++)
		rows[i] = (unsigned char)((i / ROW + seed) * 131u + i * 7u + (i >> 9));
}

/* Whether the n bytes at dst equal src, once everything queued has run. */
static int c_landed(CUdeviceptr dst, const void *src, uint64_t n)
{
	unsigned char *back = malloc(n);
	int same;

	CU_ASSERT_FATAL(back != NULL);
	same = c_fc.sync() == CUDA_SUCCESS && c_fc.dtoh(back, dst, n) == CUDA_SUCCESS && memcmp(back, src, n) == 0;
	free(back);
	return same;
}

/* The counters a copy moves, read before and after it. */
static const enum stat_id c_counted[] = {
	ST_H2D_CALLS, ST_DRIVER_CALLS, ST_MATCHED_CALLS, ST_PASSTHROUGH_CALLS, ST_PASS_OFF, ST_PASS_NO_MATCH,
	ST_BYTES_REQUESTED, ST_BYTES_H2D, ST_BYTES_SERVED, ST_ROWS_SEEN, ST_FALLBACKS, ST_BATCH_CALLS,
};
#define C_NCOUNTED (sizeof(c_counted) / sizeof(c_counted[0]))

struct c_snap {
	uint64_t v[C_NCOUNTED];
};

static struct c_snap c_snap(void)
{
	struct c_snap s;

	for (size_t i = 0; i < C_NCOUNTED; i++)
		s.v[i] = stats_get(c_counted[i]);
	return s;
}

/* How much counter id moved since s. */
static uint64_t c_moved(const struct c_snap *s, enum stat_id id)
{
	for (size_t i = 0; i < C_NCOUNTED; i++)
		if (c_counted[i] == id)
			return stats_get(id) - s->v[i];
	CU_FAIL_FATAL("a counter the test does not snapshot");
	return 0;
}

/* A counter and how much it should have moved. */
struct c_want {
	enum stat_id id;
	uint64_t moved;
};

/* Checks that each counter of want[0..n) moved as much as it says since s (line: the caller's). */
static void c_expect_at(int line, const struct c_snap *s, const struct c_want *want, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t got = c_moved(s, want[i].id);

		if (got != want[i].moved)
			fprintf(stderr, "line %d: counter %d moved %llu, expected %llu\n", line, (int)want[i].id,
				(unsigned long long)got, (unsigned long long)want[i].moved);
		CU_ASSERT_EQUAL(got, want[i].moved);
	}
}

/* C_EXPECT(&snap, { ST_..., moved }, ...): c_expect_at of the pairs. */
#define C_EXPECT(s, ...)                                                                                  \
	c_expect_at(__LINE__, s, (const struct c_want[]){ __VA_ARGS__ },                                  \
		    sizeof((const struct c_want[]){ __VA_ARGS__ }) / sizeof(struct c_want))

/* Whether nothing counted moved since s. */
static int c_still(const struct c_snap *s)
{
	for (size_t i = 0; i < C_NCOUNTED; i++)
		if (stats_get(c_counted[i]) != s->v[i])
			return 0;
	return 1;
}

/*
 * Copies the same ROWS rows three times through the runtime and once
 * through the driver, each checked on the device. Returns the forwards
 * the four copies made; *deliveries the pool's deliveries.
 */
static unsigned c_four_copies(CUdeviceptr dst, const unsigned char *rows, unsigned *deliveries)
{
	struct c_copy c;
	unsigned forwards = 0;

	*deliveries = 0;
	for (int k = 0; k < 4; k++) {
		c_describe(&c, dst, rows, ROWS * ROW, k == 3);
		CU_ASSERT_EQUAL(calls_copy(&c.cc), 0);
		CU_ASSERT(c_landed(dst, rows, ROWS * ROW));
		forwards += c.forwards;
		*deliveries += c.deliveries;
	}
	return forwards;
}

/*
 * VRAMPOOL=off with a layout that matches: each copy is the program's own
 * call, once, and counted as a pass-through; the pool never delivers,
 * fingerprints, allocates, moves device bytes or launches, and an
 * out-of-memory allocation is not retried. The same copies with the shim
 * on are pooled (so it is off that kept them out).
 */
static void test_off_forwards_every_copy_untouched(void)
{
	const uint64_t n = ROWS * ROW;
	unsigned char *rows = malloc(n);
	unsigned long long allocs, d2d, launches, kernel_bytes;
	struct alloc_call a = { .oom = 2, .dev = 0, .need = 1 };
	unsigned deliveries;
	struct c_snap s;
	CUdeviceptr dst;

	CU_ASSERT_FATAL(rows != NULL);
	c_fill(rows, 1);
	CU_ASSERT_FATAL(c_fc.alloc(&dst, n) == CUDA_SUCCESS);
	c_setup("VRAMPOOL=off " C_ON);
	CU_ASSERT_EQUAL(stats_state(), POOL_OFF);
	allocs = c_fc.counter("alloc_calls");
	d2d = c_fc.counter("d2d_bytes");
	launches = c_fc.counter("kernel_launches");
	kernel_bytes = c_fc.counter("kernel_bytes");
	s = c_snap();
	CU_ASSERT_EQUAL(c_four_copies(dst, rows, &deliveries), 4);
	CU_ASSERT_EQUAL(deliveries, 0);
	C_EXPECT(&s, { ST_H2D_CALLS, 4 }, { ST_DRIVER_CALLS, 1 }, { ST_PASSTHROUGH_CALLS, 4 },
		 { ST_PASS_OFF, 4 }, { ST_BYTES_REQUESTED, 4 * n }, { ST_BYTES_H2D, 4 * n },
		 { ST_MATCHED_CALLS, 0 }, { ST_BYTES_SERVED, 0 }, { ST_ROWS_SEEN, 0 });
	CU_ASSERT_EQUAL(stats_get(ST_TIME_FINGERPRINT_NS), 0);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_BYTES), 0);
	CU_ASSERT_EQUAL(stats_get(ST_DEVICE_OPS), 0);
	CU_ASSERT_EQUAL(stats_state(), POOL_OFF);
	CU_ASSERT_EQUAL(c_fc.counter("alloc_calls"), allocs);
	CU_ASSERT_EQUAL(c_fc.counter("d2d_bytes"), d2d);
	CU_ASSERT_EQUAL(c_fc.counter("kernel_launches"), launches);
	CU_ASSERT_EQUAL(c_fc.counter("kernel_bytes"), kernel_bytes);
	calls_alloc_begin(&a);
	CU_ASSERT_EQUAL(calls_alloc_again(&a, 2), 0);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_OOM_RETRIES), 0);

	/* the control: the same copies with the shim on are pooled and served */
	c_setup(C_ON);
	s = c_snap();
	CU_ASSERT_EQUAL(c_four_copies(dst, rows, &deliveries), 0);
	CU_ASSERT_EQUAL(deliveries, 1);                 /* the first copy's rows, then hits */
	C_EXPECT(&s, { ST_MATCHED_CALLS, 4 }, { ST_BYTES_SERVED, 3 * n }, { ST_H2D_CALLS, 4 },
		 { ST_PASSTHROUGH_CALLS, 0 });
	c_fc.free(dst);
	free(rows);
}

/*
 * Each copy that succeeded is counted once: a pooled runtime copy, a
 * pooled driver copy (a driver call too), a driver copy that matches no
 * spec (a pass-through); a copy in another direction, and one whose own
 * call or delivery failed, are not counted, and the program gets its own
 * error back.
 */
static void test_each_copy_is_counted_once_by_its_route(void)
{
	const uint64_t n = ROWS * ROW;
	unsigned char *rows = malloc(n);
	struct c_copy c;
	struct c_snap s;
	CUdeviceptr dst;

	CU_ASSERT_FATAL(rows != NULL);
	CU_ASSERT_FATAL(c_fc.alloc(&dst, n) == CUDA_SUCCESS);
	c_setup(C_ON);
	for (int driver = 0; driver < 2; driver++) {
		c_fill(rows, 10 + (uint32_t)driver);
		s = c_snap();
		c_describe(&c, dst, rows, n, driver);
		CU_ASSERT_EQUAL(calls_copy(&c.cc), 0);
		CU_ASSERT(c_landed(dst, rows, n));
		CU_ASSERT(c.forwards == 0 && c.deliveries == 1);
		C_EXPECT(&s, { ST_H2D_CALLS, 1 }, { ST_DRIVER_CALLS, (uint64_t)driver },
			 { ST_MATCHED_CALLS, 1 }, { ST_PASSTHROUGH_CALLS, 0 }, { ST_BYTES_REQUESTED, n },
			 { ST_BYTES_H2D, n });
	}
	/* a driver copy of a size no spec matches */
	s = c_snap();
	c_describe(&c, dst, rows, 1000, 1);
	CU_ASSERT_EQUAL(calls_copy(&c.cc), 0);
	CU_ASSERT(c_landed(dst, rows, 1000));
	CU_ASSERT(c.forwards == 1 && c.deliveries == 0);
	C_EXPECT(&s, { ST_H2D_CALLS, 1 }, { ST_DRIVER_CALLS, 1 }, { ST_PASSTHROUGH_CALLS, 1 },
		 { ST_PASS_NO_MATCH, 1 }, { ST_BYTES_H2D, 1000 }, { ST_MATCHED_CALLS, 0 });
	/* another direction: forwarded, not counted */
	s = c_snap();
	c_describe(&c, dst, rows, n, 0);
	c.cc.dir = CL_DIR_OTHER;
	CU_ASSERT_EQUAL(calls_copy(&c.cc), 0);
	CU_ASSERT(c.forwards == 1 && c_still(&s));
	/* the program's own call fails: its error, nothing counted */
	c_describe(&c, dst, rows, 1000, 1);
	c.forward_err = 77;
	CU_ASSERT_EQUAL(calls_copy(&c.cc), 77);
	CU_ASSERT(c.forwards == 1 && c_still(&s));
	/* a pooled copy whose delivery fails: the delivery's error, not counted as a copy (the pool
	 * handled it: matched_calls counts it) */
	c_fill(rows, 12);
	c_describe(&c, dst, rows, n, 0);
	c.h2d_err = 55;
	CU_ASSERT_EQUAL(calls_copy(&c.cc), 55);
	CU_ASSERT_EQUAL(c.deliveries, 1);
	C_EXPECT(&s, { ST_H2D_CALLS, 0 }, { ST_BYTES_REQUESTED, 0 }, { ST_BYTES_H2D, 0 },
		 { ST_ROWS_SEEN, 0 }, { ST_MATCHED_CALLS, 1 });
	c_fc.free(dst);
	free(rows);
}

/*
 * A pooled copy whose gather launch fails after its new rows went: the
 * pool delivers twice (the new rows, then the hits again), and the copy is
 * still one call of the program's, counted once, with one fallback.
 */
static void test_a_copy_delivered_twice_is_counted_once(void)
{
	const uint64_t n = ROWS * ROW;
	unsigned char *rows = malloc(2 * n);
	struct c_copy c;
	struct c_snap s;
	CUdeviceptr dst;
	char spec[64];

	CU_ASSERT_FATAL(rows != NULL);
	CU_ASSERT_FATAL(c_fc.alloc(&dst, 2 * n) == CUDA_SUCCESS);
	c_fill(rows, 20);
	c_fill(rows + n, 20 + ROWS);
	c_setup(C_ON);
	c_describe(&c, dst, rows, n, 1);
	CU_ASSERT_EQUAL_FATAL(calls_copy(&c.cc), 0);    /* the first half captured */
	CU_ASSERT_FATAL(stats_get(ST_GATHER_LAUNCHES) >= 1);
	snprintf(spec, sizeof(spec), "cuLaunchKernel#%llu", c_fc.counter("cuLaunchKernel") + 1);
	CU_ASSERT_FATAL(c_fc.fail(spec) == 1);
	CU_ASSERT_FATAL(c_fc.memset(dst, 0xA5, 2 * n) == CUDA_SUCCESS);
	s = c_snap();
	c_describe(&c, dst, rows, 2 * n, 1);
	CU_ASSERT_EQUAL(calls_copy(&c.cc), 0);
	CU_ASSERT_EQUAL(c_fc.fail(""), 0);
	CU_ASSERT_EQUAL(c_fc.counter("injected:cuLaunchKernel"), 1);
	CU_ASSERT(c_landed(dst, rows, 2 * n));
	CU_ASSERT(c.forwards == 0 && c.deliveries == 2 && c.delivered == 2 * n);
	C_EXPECT(&s, { ST_H2D_CALLS, 1 }, { ST_DRIVER_CALLS, 1 }, { ST_MATCHED_CALLS, 1 },
		 { ST_BYTES_REQUESTED, 2 * n }, { ST_BYTES_H2D, 2 * n }, { ST_BYTES_SERVED, 0 },
		 { ST_FALLBACKS, 1 }, { ST_PASSTHROUGH_CALLS, 0 });
	c_fc.free(dst);
	free(rows);
}

/*
 * An allocation that failed out of memory while the pool holds slabs is
 * tried again once the pool gave them back, counted as one retry; another
 * out-of-memory with nothing left to give back is the program's, and an
 * allocation that works ends it.
 */
static void test_out_of_memory_is_retried_once_the_pool_gave_back(void)
{
	const uint64_t n = ROWS * ROW;
	unsigned char *rows = malloc(n);
	struct alloc_call a = { .oom = 2, .dev = 0, .need = 1 };
	unsigned deliveries;
	CUdeviceptr dst;

	CU_ASSERT_FATAL(rows != NULL);
	CU_ASSERT_FATAL(c_fc.alloc(&dst, n) == CUDA_SUCCESS);
	c_fill(rows, 30);
	c_setup(C_ON);
	c_four_copies(dst, rows, &deliveries);
	CU_ASSERT_FATAL(stats_get(ST_POOL_SLABS) == 1);
	calls_alloc_begin(&a);
	CU_ASSERT_EQUAL(calls_alloc_again(&a, 2), 1);   /* the slab given back: try again */
	CU_ASSERT_EQUAL(stats_get(ST_POOL_SLABS), 0);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_OOM_RETRIES), 1);
	CU_ASSERT_EQUAL(calls_alloc_again(&a, 2), 0);   /* nothing left to give back */
	CU_ASSERT_EQUAL(stats_get(ST_POOL_OOM_RETRIES), 1);
	calls_alloc_begin(&a);
	CU_ASSERT_EQUAL(calls_alloc_again(&a, 0), 0);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_OOM_RETRIES), 1);
	c_fc.free(dst);
	free(rows);
}

/* A batch forwards as it is: one batch call, each host-to-device entry one copy (driver ones as such). */
static void test_a_batch_counts_each_host_to_device_entry(void)
{
	unsigned char *rows = malloc(ROWS * ROW);
	CUdeviceptr dst;
	struct c_copy fwd;
	struct c_snap s;
	void *dsts[3];
	const void *srcs[3];
	size_t sizes[3] = { 1000, 2000, 3000 };
	struct copy_batch b = { .dsts = dsts, .srcs = srcs, .sizes = sizes, .count = 3, .driver = 1,
				.forward = c_forward, .arg = &fwd };

	CU_ASSERT_FATAL(rows != NULL);
	CU_ASSERT_FATAL(c_fc.alloc(&dst, 8192) == CUDA_SUCCESS);
	c_setup(C_ON);
	memset(&fwd, 0, sizeof(fwd));
	fwd.cc = (struct copy_call){ .dst = (void *)(uintptr_t)dst, .src = rows, .n = 64 };
	dsts[0] = (void *)(uintptr_t)dst;
	srcs[0] = rows;
	dsts[1] = (void *)(uintptr_t)(dst + 4096);
	srcs[1] = rows;
	dsts[2] = rows;                                 /* device-to-host: not counted */
	srcs[2] = (void *)(uintptr_t)dst;
	s = c_snap();
	CU_ASSERT_EQUAL(calls_copy_batch(&b), 0);
	CU_ASSERT_EQUAL(fwd.forwards, 1);
	C_EXPECT(&s, { ST_BATCH_CALLS, 1 }, { ST_H2D_CALLS, 2 }, { ST_DRIVER_CALLS, 2 },
		 { ST_BYTES_REQUESTED, 3000 }, { ST_PASS_NO_MATCH, 2 });
	c_fc.free(dst);
	free(rows);
}

/* Fills a fresh pool with the slab of ROWS rows (four copies of them: a capture, then hits). */
static void c_fill_pool(CUdeviceptr dst, unsigned char *rows)
{
	unsigned deliveries;

	c_setup(C_ON);
	c_fill(rows, 40);
	c_four_copies(dst, rows, &deliveries);
	CU_ASSERT_FATAL(stats_get(ST_POOL_BYTES) > 0);
}

/* The program's allocation on its current device (dev -1) ran out of memory: the answer of calls_alloc_again. */
static int c_oom_again(void)
{
	struct alloc_call a = { .oom = CUDA_ERROR_OUT_OF_MEMORY, .dev = -1, .need = 1 };

	calls_alloc_begin(&a);
	return calls_alloc_again(&a, CUDA_ERROR_OUT_OF_MEMORY);
}

/*
 * Issue 17, item A: the program runs out of memory while its current
 * device cannot be read (cuCtxGetDevice fails): every pool gives its
 * slabs back and the allocation is tried again. A slab free that fails
 * once is tried again after the device is synchronised. When even the
 * thread's context cannot be read, the device's is pushed and popped.
 */
static void test_oom_with_unknown_device_reclaims_every_pool(void)
{
	unsigned char *rows = malloc(ROWS * ROW);
	unsigned long long syncs, frees;
	uint64_t evictions, retries;
	char spec[64];
	CUdeviceptr dst;

	CU_ASSERT_FATAL(rows != NULL);
	CU_ASSERT_FATAL(c_fc.alloc(&dst, ROWS * ROW) == CUDA_SUCCESS);
	c_fill_pool(dst, rows);
	evictions = stats_get(ST_POOL_EVICTIONS);
	retries = stats_get(ST_POOL_OOM_RETRIES);
	CU_ASSERT_FATAL(c_fc.fail("cuCtxGetDevice") == 1);
	CU_ASSERT_EQUAL(c_oom_again(), 1);
	CU_ASSERT_FATAL(c_fc.fail("") == 0);
	CU_ASSERT(c_fc.counter("injected:cuCtxGetDevice") >= 1);
	CU_ASSERT(stats_get(ST_POOL_EVICTIONS) > evictions);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_OOM_RETRIES), retries + 1);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_BYTES), 0);

	/* the next slab free fails once: freed after a device sync (the reclaim's own sync, then one more) */
	c_fill_pool(dst, rows);
	frees = c_fc.counter("cuMemFree_v2");
	syncs = c_fc.counter("cuCtxSynchronize");
	evictions = stats_get(ST_POOL_EVICTIONS);
	snprintf(spec, sizeof(spec), "cuMemFree_v2#%llu", frees + 1);
	CU_ASSERT_FATAL(c_fc.fail(spec) == 1);
	CU_ASSERT_EQUAL(c_oom_again(), 1);
	CU_ASSERT_FATAL(c_fc.fail("") == 0);
	CU_ASSERT_EQUAL(c_fc.counter("injected:cuMemFree_v2"), 1);
	CU_ASSERT_EQUAL(c_fc.counter("cuMemFree_v2"), frees + 2);
	CU_ASSERT_EQUAL(c_fc.counter("cuCtxSynchronize"), syncs + 2);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_EVICTIONS), evictions + 1);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_BYTES), 0);

	/* the calling thread's context cannot be read at all: the reclaim pushes the device's, then pops it */
	c_fill_pool(dst, rows);
	frees = c_fc.counter("cuCtxPushCurrent_v2");
	CU_ASSERT_FATAL(c_fc.fail("cuCtxGetCurrent") == 1);
	CU_ASSERT_EQUAL(c_oom_again(), 1);
	CU_ASSERT_FATAL(c_fc.fail("") == 0);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_BYTES), 0);
	CU_ASSERT(c_fc.counter("cuCtxPushCurrent_v2") > frees);
	CU_ASSERT_EQUAL(c_fc.counter("cuCtxPushCurrent_v2"), c_fc.counter("cuCtxPopCurrent_v2"));
	c_fc.free(dst);
	free(rows);
}

/* ---- fork while another thread holds the locks (issue 17, item F) ------------- */

#define F_SAMPLES 256
#define F_BATCH 32

static sem_t f_held, f_forked;

/* Holds the device layer's context lock and the layout finder's lock until the fork is done. */
static void *f_hold_locks(void *arg)
{
	(void)arg;
	device_ctx_lock_for_tests(1);
	autolayout_lock_for_tests(1);
	sem_post(&f_held);
	while (sem_wait(&f_forked) != 0)
		;
	autolayout_lock_for_tests(0);
	device_ctx_lock_for_tests(0);
	return NULL;
}

/*
 * In the forked child, as life.c's handler would: forgets the parent's
 * state, starts its own context, then copies reshuffled batches of 3072-byte
 * samples until the automatic layout is found and its rows are served.
 * Returns 0, or the step that failed (a hang is ended by the alarm).
 */
static int f_child(void)
{
	static unsigned char data[F_SAMPLES * ROW], stage[F_BATCH * ROW];
	unsigned order[F_SAMPLES], rng = 7;
	char layout[64];
	CUdeviceptr dst;
	CUcontext ctx;
	struct c_copy c;

	calls_atfork_child();
	if (c_fc.init(0) || c_fc.retain(&ctx, 0) || c_fc.set_current(ctx) || c_fc.alloc(&dst, sizeof(stage)))
		return 2;
	for (unsigned i = 0; i < sizeof(data); i++) {
		rng = rng * 1103515245u + 12345u;
		data[i] = (unsigned char)(rng >> 16);
	}
	for (unsigned i = 0; i < F_SAMPLES; i++)
		order[i] = i;
	for (int epoch = 0; epoch < 6 && stats_get(ST_BYTES_SERVED) == 0; epoch++) {
		for (unsigned i = F_SAMPLES - 1; i > 0; i--) {
			unsigned j, t;

			rng = rng * 1103515245u + 12345u;
			j = (rng >> 8) % (i + 1);
			t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		for (unsigned b = 0; b < F_SAMPLES / F_BATCH; b++) {
			for (unsigned k = 0; k < F_BATCH; k++)
				memcpy(stage + k * ROW, data + order[b * F_BATCH + k] * ROW, ROW);
			c_describe(&c, dst, stage, sizeof(stage), 0);
			if (calls_copy(&c.cc) || !c_landed(dst, stage, sizeof(stage)))
				return 3;
		}
	}
	stats_get_text(STATS_LAYOUT, layout, sizeof(layout));
	if (strcmp(layout, "3072") != 0)
		return 4;       /* the layout finder never decided */
	if (stats_get(ST_BYTES_SERVED) == 0 || stats_get(ST_POOL_SLABS) == 0)
		return 5;
	if (device_sync(0) != 0)
		return 6;
	return 0;
}

/*
 * A fork while another thread holds the device layer's context lock and
 * the layout finder's lock: in the child, the automatic layout is found
 * and the first probe, slab allocation and sync complete (an alarm turns
 * a hang into a failure).
 */
static void test_fork_while_another_thread_holds_the_locks(void)
{
	pthread_t t;
	int status = -1;
	pid_t pid;

	c_setup("VRAMPOOL_LAYOUT=auto VRAMPOOL_BUDGET=64M VRAMPOOL_SLAB=1M VRAMPOOL_LEDGER=force");
	CU_ASSERT_FATAL(sem_init(&f_held, 0, 0) == 0 && sem_init(&f_forked, 0, 0) == 0);
	CU_ASSERT_FATAL(pthread_create(&t, NULL, f_hold_locks, NULL) == 0);
	while (sem_wait(&f_held) != 0)
		;
	pid = fork();
	if (pid == 0) {
		alarm(20);
		_exit(f_child());
	}
	sem_post(&f_forked);
	pthread_join(t, NULL);
	CU_ASSERT_FATAL(pid > 0);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fprintf(stderr, "child: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	sem_destroy(&f_held);
	sem_destroy(&f_forked);
}

static int c_suite_init(void)
{
	static const char *const names[] = {
		"cuInit", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuMemAlloc_v2", "cuMemFree_v2",
		"cuMemcpyHtoDAsync_v2", "cuMemcpyDtoH_v2", "cuMemsetD8_v2", "cuCtxSynchronize",
		"fakecuda_counter", "fakecuda_fail",
	};
	void **slot = (void **)&c_fc;
	CUcontext ctx;

	_Static_assert(sizeof(c_fc) == sizeof(names) / sizeof(names[0]) * sizeof(void *), "a name a slot");
	c_lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!c_lib)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!(slot[i] = dlsym(c_lib, names[i])))
			return -1;
	if (c_fc.init(0) || c_fc.retain(&ctx, 0) || c_fc.set_current(ctx) || device_open())
		return -1;
	return 0;
}

static int c_suite_clean(void)
{
	pool_shutdown();
	fingerprint_shutdown();
	return 0;
}

static const CU_TestInfo tests[] = {
	{ "VRAMPOOL=off forwards every copy untouched: nothing served, fingerprinted or allocated, "
	  "counted as pass-through", test_off_forwards_every_copy_untouched },
	{ "each copy that succeeded is counted once by its route; a failed one or another direction "
	  "is not", test_each_copy_is_counted_once_by_its_route },
	{ "a pooled copy the pool delivered twice (a failed gather launch) is counted once",
	  test_a_copy_delivered_twice_is_counted_once },
	{ "an allocation out of memory is tried again once the pool gave its slabs back, and only then",
	  test_out_of_memory_is_retried_once_the_pool_gave_back },
	{ "a batch is one batch call and one copy per host-to-device entry",
	  test_a_batch_counts_each_host_to_device_entry },
	{ "out of memory while the current device cannot be read: every pool gives back, and a free "
	  "that fails once is retried after a sync", test_oom_with_unknown_device_reclaims_every_pool },
	{ "a fork while another thread holds the context and layout locks: the child decides its layout, "
	  "probes, allocates slabs and syncs", test_fork_while_another_thread_holds_the_locks },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "calls",
	.init = c_suite_init,
	.clean = c_suite_clean,
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
