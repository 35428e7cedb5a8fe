/*
 * Unit tests of the pool: capture at delivery, gather of hits, the budget
 * and its arithmetic, eviction. They run the real pool over the emulated
 * device (scripts/test.sh sets LD_LIBRARY_PATH=build/fakecuda), with the
 * driver API standing in for the program's own host-to-device copies.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "device.h"
#include "fingerprint.h"
#include "pool.h"
#include "stats.h"

#define ROW 3072
#define MIB (1024ULL * 1024ULL)

static __typeof__(cuMemcpyHtoDAsync_v2) *t_htod;
static __typeof__(cuMemcpyDtoH_v2) *t_dtoh;
static __typeof__(cuMemAlloc_v2) *t_alloc;
static __typeof__(cuMemFree_v2) *t_free;
static __typeof__(cuStreamSynchronize) *t_sync;
static __typeof__(cuDevicePrimaryCtxRetain) *t_retain;
static __typeof__(cuCtxSetCurrent) *t_setctx;
static __typeof__(cuInit) *t_init;

static struct config t_cfg;
static const char *t_env[16][2];

static const char *t_getenv(const char *name)
{
	for (int i = 0; i < 16 && t_env[i][0]; i++)
		if (strcmp(t_env[i][0], name) == 0)
			return t_env[i][1];
	return NULL;
}

/* Loads a configuration from NAME=VALUE pairs (NULL-terminated). */
static void t_config(const char *const *kv)
{
	memset(t_env, 0, sizeof(t_env));
	for (int i = 0; kv[2 * i]; i++) {
		t_env[i][0] = kv[2 * i];
		t_env[i][1] = kv[2 * i + 1];
	}
	CU_ASSERT_EQUAL_FATAL(config_load(&t_cfg, t_getenv), 0);
	pool_shutdown();
	pool_setup(&t_cfg);
	stats_reset(1, t_cfg.layout.text);
}

struct t_h2d {
	dev_ptr dst;
	const unsigned char *src;
	uint64_t calls, bytes;
};

static int t_h2d_cb(void *arg, uint64_t off, uint64_t len)
{
	struct t_h2d *h = arg;

	h->calls++;
	h->bytes += len;
	return t_htod(h->dst + off, h->src + off, len, NULL) == CUDA_SUCCESS ? 0 : 999;
}

/* Fills row i of a synthetic dataset: distinct content per sample id. */
static void t_fill_row(unsigned char *row, uint32_t id)
{
	for (int b = 0; b < ROW; b++)
		row[b] = (unsigned char)(id * 131u + (uint32_t)b * 7u + (uint32_t)(b >> 8));
	memcpy(row, &id, sizeof(id));
}

/*
 * Copies the samples ids[0..n) as one request and checks every byte on the
 * device afterwards. Returns the number of host-to-device bytes it took.
 */
static int t_verify;    /* pool_request.verify for the next copies */

static uint64_t t_copy(const uint32_t *ids, uint64_t n)
{
	unsigned char *src = malloc(n * ROW), *back = malloc(n * ROW);
	struct t_h2d h = { 0 };
	struct pool_request r;
	CUdeviceptr dst;
	int err;

	CU_ASSERT_FATAL(src && back);
	for (uint64_t i = 0; i < n; i++)
		t_fill_row(src + i * ROW, ids[i]);
	CU_ASSERT_FATAL(t_alloc(&dst, n * ROW) == CUDA_SUCCESS);
	h.dst = dst;
	h.src = src;
	r = (struct pool_request){ .dst = dst, .src = src, .n = n * ROW, .row = ROW,
				   .stream = NULL, .h2d = t_h2d_cb, .arg = &h, .verify = t_verify };
	err = pool_copy(pool_get(0, 0), &r);
	CU_ASSERT_EQUAL(err, 0);
	CU_ASSERT_EQUAL(t_sync(NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(t_dtoh(back, dst, n * ROW), CUDA_SUCCESS);
	CU_ASSERT(memcmp(src, back, n * ROW) == 0);
	t_free(dst);
	free(src);
	free(back);
	return h.bytes;
}

static void t_ids(uint32_t *ids, uint64_t n, uint32_t first, uint32_t stride)
{
	for (uint64_t i = 0; i < n; i++)
		ids[i] = first + (uint32_t)((i * stride) % n);
}

static void test_repeat_hits(void)
{
	uint32_t ids[200], again[200];

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, 200, 1000, 1);
	CU_ASSERT_EQUAL(t_copy(ids, 100), 100 * ROW);
	CU_ASSERT_EQUAL(t_copy(ids + 100, 100), 100 * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 200);
	CU_ASSERT_EQUAL(stats_get(ST_BYTES_CAPTURED), 200 * ROW);
	/* the same samples reshuffled: every row from the pool */
	t_ids(again, 200, 1000, 7);
	CU_ASSERT_EQUAL(t_copy(again, 200), 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), 200);
	CU_ASSERT_EQUAL(stats_get(ST_BYTES_SERVED), 200 * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_BYTES_H2D), 200 * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_POOLED), 200);
	CU_ASSERT_EQUAL(stats_state(), POOL_ACTIVE);
}

static void test_repeat_within_copy(void)
{
	uint32_t ids[8] = { 5, 6, 5, 5, 7, 6, 8, 5 };

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	CU_ASSERT_EQUAL(t_copy(ids, 8), 8 * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 4);
	CU_ASSERT_EQUAL(t_copy(ids, 8), 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), 8);
}

static void test_probe_waits(void)
{
	uint32_t ids[10];

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_PROBE_AFTER", "2",
				   "VRAMPOOL_MARGIN", "0", "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, 10, 1, 1);
	t_copy(ids, 10);
	t_copy(ids, 10);
	CU_ASSERT_EQUAL(stats_state(), POOL_DORMANT);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 0);
	CU_ASSERT_FALSE(atomic_load(&stats_global.probe_decided));
	t_copy(ids, 10);        /* the third matched copy decides */
	CU_ASSERT_TRUE(atomic_load(&stats_global.probe_decided));
	CU_ASSERT_EQUAL(stats_state(), POOL_ACTIVE);
	CU_ASSERT(stats_get(ST_PROBE_FREE) > 0);
	CU_ASSERT_EQUAL(stats_get(ST_PROBE_RESERVE), 16 * 10 * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 10);
	CU_ASSERT_EQUAL(t_copy(ids, 10), 0);
}

static void test_budget_limits_admission(void)
{
	uint32_t ids[1000];
	uint64_t per_slab = MIB / ROW;

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "2M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, 1000, 50000, 1);
	t_copy(ids, 1000);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_SLABS), 2);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 2 * per_slab);
	CU_ASSERT_EQUAL(stats_state(), POOL_FULL);
	/* the admitted rows hit, the rest cross again */
	CU_ASSERT_EQUAL(t_copy(ids, 1000), (1000 - 2 * per_slab) * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 2 * per_slab);
}

static void test_eviction(void)
{
	uint32_t ids[1000];
	uint64_t per_slab = MIB / ROW;
	int evicted;

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "8M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, 1000, 90000, 1);
	t_copy(ids, 1000);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_SLABS), 3);   /* 341 rows per slab */
	/* one slab is enough when the device already has room */
	evicted = pool_reclaim(0, 1);
	CU_ASSERT_EQUAL(evicted, 1);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_EVICTIONS), 1);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_EVICTED_BYTES), MIB);
	CU_ASSERT_EQUAL(stats_state(), POOL_LATCHED);
	/* the newest slab went: the last 1000 - 2 x 341 rows miss, nothing is re-admitted */
	CU_ASSERT_EQUAL(t_copy(ids, 1000), (1000 - 2 * per_slab) * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 1000);
	CU_ASSERT_EQUAL(t_copy(ids, 1000), (1000 - 2 * per_slab) * ROW);
	/* asking for more than the device has empties the pool */
	evicted = pool_reclaim(0, 1ULL << 50);
	CU_ASSERT_EQUAL(evicted, 2);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_BYTES), 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_POOLED), 0);
	CU_ASSERT_EQUAL(pool_reclaim(0, 1), 0);
	CU_ASSERT_EQUAL(t_copy(ids, 1000), 1000 * ROW);
}

static void test_checked_capture(void)
{
	uint32_t ids[100];

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, 100, 4000, 1);
	t_verify = 1;
	CU_ASSERT_EQUAL(t_copy(ids, 100), 100 * ROW);
	t_verify = 0;
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 100);
	/* the check ran behind the capture and found the source unchanged */
	CU_ASSERT_EQUAL(t_copy(ids, 100), 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), 100);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_POOLED), 100);
}

static void test_dormant_for_good(void)
{
	uint32_t ids[10];

	/* a margin larger than the device: the probe leaves less than one slab */
	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_PROBE_AFTER", "1",
				   "VRAMPOOL_MARGIN", "1T", NULL });
	t_ids(ids, 10, 7, 1);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(t_copy(ids, 10), 10 * ROW);
	CU_ASSERT_TRUE(atomic_load(&stats_global.probe_decided));
	CU_ASSERT_EQUAL(stats_state(), POOL_DORMANT);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_BUDGET), 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 0);
}

static int t_suite_init(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CUcontext ctx;

	if (!h)
		return -1;
	*(void **)&t_htod = dlsym(h, "cuMemcpyHtoDAsync_v2");
	*(void **)&t_dtoh = dlsym(h, "cuMemcpyDtoH_v2");
	*(void **)&t_alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&t_free = dlsym(h, "cuMemFree_v2");
	*(void **)&t_sync = dlsym(h, "cuStreamSynchronize");
	*(void **)&t_retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&t_setctx = dlsym(h, "cuCtxSetCurrent");
	*(void **)&t_init = dlsym(h, "cuInit");
	if (!t_htod || !t_dtoh || !t_alloc || !t_free || !t_sync || !t_retain || !t_setctx || !t_init)
		return -1;
	if (t_init(0) || t_retain(&ctx, 0) || t_setctx(ctx) || device_open())
		return -1;
	fingerprint_init(1);
	return 0;
}

static int t_suite_clean(void)
{
	pool_shutdown();
	fingerprint_shutdown();
	return 0;
}

int main(void)
{
	CU_pSuite s;
	int failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("pool", t_suite_init, t_suite_clean);
	CU_add_test(s, "a repeated row is served from the pool, reshuffled", test_repeat_hits);
	CU_add_test(s, "a row repeated within one copy is captured once", test_repeat_within_copy);
	CU_add_test(s, "the pool stays dormant until the probe point, then decides once", test_probe_waits);
	CU_add_test(s, "admission stops at the budget and the rest keeps crossing", test_budget_limits_admission);
	CU_add_test(s, "eviction frees the newest slabs first and latches the budget", test_eviction);
	CU_add_test(s, "a probe that leaves less than one slab keeps the pool dormant", test_dormant_for_good);
	CU_add_test(s, "rows captured under a run-time check are served once it found the source unchanged", test_checked_capture);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = (int)CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
