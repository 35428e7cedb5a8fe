/*
 * Unit tests of the pool: capture at delivery, gather of hits, the budget
 * and its arithmetic, eviction, admission on evidence (the doorkeeper); a
 * hit on another stream waiting for its capture (the emulated device
 * holds the capturing stream back), the re-send of hits after a failed
 * gather launch, rows whose fingerprints collide in 64 bits (a
 * fingerprint test hook). They run the real pool over the emulated
 * device (scripts/test.sh sets LD_LIBRARY_PATH=build/fakecuda), with the
 * driver API standing in for the program's own host-to-device copies.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cunit_main.h"
#include "core/config.h"
#include "device/device.h"
#include "pool/fingerprint.h"
#include "pool/backoff.h"
#include "pool/doorkeeper.h"
#include "pool/pool.h"
#include "pool/whatif.h"
#include "report/reason.h"
#include "core/stats.h"

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
static void *t_lib;     /* the emulated device */
static const char *t_env[16][2];

/*
 * The tests' environment. Tests that expect hits must not depend on how
 * fast this machine hashes: the cost ledger is forced to pool unless a
 * test names VRAMPOOL_LEDGER itself.
 */
static const char *t_getenv(const char *name)
{
	for (int i = 0; i < 16 && t_env[i][0]; i++)
		if (strcmp(t_env[i][0], name) == 0)
			return t_env[i][1];
	return strcmp(name, "VRAMPOOL_LEDGER") == 0 ? "force" : NULL;
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
	CUstream stream;        /* the program's stream (NULL: legacy) */
};

static int t_h2d_cb(void *arg, uint64_t off, uint64_t len)
{
	struct t_h2d *h = arg;

	h->calls++;
	h->bytes += len;
	return t_htod(h->dst + off, h->src + off, len, h->stream) == CUDA_SUCCESS ? 0 : 999;
}

/* Fills a row of len bytes of a synthetic dataset: distinct content per sample id. */
static void t_fill(unsigned char *row, uint64_t len, uint32_t id)
{
	for (uint64_t b = 0; b < len; b++)
		row[b] = (unsigned char)(id * 131u + (uint32_t)b * 7u + (uint32_t)(b >> 8));
	memcpy(row, &id, len < sizeof(id) ? len : sizeof(id));
}

static void t_fill_row(unsigned char *row, uint32_t id)
{
	t_fill(row, ROW, id);
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

static int t_sync_copy;  /* pool_request.sync for the next copies */

/*
 * Copies samples ids[0..n) of row bytes and priority prio as one request,
 * checks every byte on the device, returns the host-to-device bytes.
 */
static uint64_t t_copy_rows(const uint32_t *ids, uint64_t n, uint64_t row, unsigned prio)
{
	unsigned char *src = malloc(n * row), *back = malloc(n * row);
	struct t_h2d h = { 0 };
	struct pool_request r;
	CUdeviceptr dst;

	CU_ASSERT_FATAL(src && back);
	for (uint64_t i = 0; i < n; i++)
		t_fill(src + i * row, row, ids[i]);
	CU_ASSERT_FATAL(t_alloc(&dst, n * row) == CUDA_SUCCESS);
	h.dst = dst;
	h.src = src;
	r = (struct pool_request){ .dst = dst, .src = src, .n = n * row, .row = row, .prio = prio,
				   .stream = NULL, .h2d = t_h2d_cb, .h2d_sync = t_h2d_cb, .arg = &h,
				   .sync = t_sync_copy };
	CU_ASSERT_EQUAL(pool_copy(pool_get(0, 0), &r), 0);
	CU_ASSERT_EQUAL(t_sync(NULL), CUDA_SUCCESS);
	CU_ASSERT_EQUAL(t_dtoh(back, dst, n * row), CUDA_SUCCESS);
	CU_ASSERT(memcmp(src, back, n * row) == 0);
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

/* Each copy's requested bytes are counted with its bytes sent and served, by pool_copy. */
static void test_requested_beside_bytes(void)
{
	uint32_t ids[200];

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "8M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, 200, 70000, 1);
	for (int epoch = 0; epoch < 3; epoch++) {
		t_copy(ids, 200);
		CU_ASSERT_EQUAL(stats_get(ST_BYTES_REQUESTED), (uint64_t)(epoch + 1) * 200 * ROW);
		CU_ASSERT_EQUAL(stats_get(ST_BYTES_REQUESTED),
				stats_get(ST_BYTES_H2D) + stats_get(ST_BYTES_SERVED));
	}
	CU_ASSERT(stats_get(ST_BYTES_SERVED) > 0);
}

static void test_eviction(void)
{
	uint32_t ids[1000];
	uint64_t per_slab = MIB / ROW;
	char why[256];
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
	CU_ASSERT(strstr(report_reason(NULL, why, sizeof(why)), "1 slab given back") != NULL);
	/* the newest slab went: the last 1000 - 2 x 341 rows miss, nothing is re-admitted */
	CU_ASSERT_EQUAL(t_copy(ids, 1000), (1000 - 2 * per_slab) * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), 1000);
	CU_ASSERT_EQUAL(t_copy(ids, 1000), (1000 - 2 * per_slab) * ROW);
	/* asking for more than the device has empties the pool */
	evicted = pool_reclaim(0, 1ULL << 50);
	CU_ASSERT_EQUAL(evicted, 2);
	/* the latched line counts what the dump counts: every slab given back */
	CU_ASSERT(strstr(report_reason(NULL, why, sizeof(why)), "3 slabs given back") != NULL);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_BYTES), 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_POOLED), 0);
	CU_ASSERT_EQUAL(pool_reclaim(0, 1), 0);
	CU_ASSERT_EQUAL(t_copy(ids, 1000), 1000 * ROW);
}

/*
 * Runs epochs of the rows ids[0..n) reshuffled (a stride each epoch), the
 * pool's slabs all given back after evict_after of them (never, past the
 * epochs), and takes the what-if curve's snapshot.
 */
static void t_whatif_run(const char *mode, unsigned epochs, unsigned evict_after, struct whatif_snapshot *s)
{
	uint32_t ids[600];

	t_config((const char *[]){ "VRAMPOOL", mode, "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "8M",
				   "VRAMPOOL_SLAB", "1M", "VRAMPOOL_PROBE_AFTER", "0", NULL });
	whatif_setup(0);
	for (unsigned e = 0; e < epochs; e++) {
		if (e == evict_after)
			CU_ASSERT_EQUAL(pool_reclaim(0, 1ULL << 50), 2);
		t_ids(ids, 600, 70000, 1 + 2 * e);
		t_copy(ids, 600);
	}
	whatif_snapshot(s, 0);
}

/*
 * The pool hands its captures to the what-if curve without its table
 * (keep.h): the curve of a pooled run, slabs evicted in the middle, counts
 * the dry run's unique and repeated bytes exactly, and within the slabs'
 * position estimates at every budget.
 */
static void test_whatif_of_kept_rows(void)
{
	struct whatif_snapshot dry, pooled;

	t_whatif_run("dry", 4, 4, &dry);
	t_whatif_run("on", 4, 2, &pooled);
	CU_ASSERT(stats_get(ST_BYTES_SERVED) > 0);
	CU_ASSERT_EQUAL(pooled.unique_bytes, dry.unique_bytes);
	CU_ASSERT_EQUAL(pooled.repeat_bytes, dry.repeat_bytes);
	CU_ASSERT_EQUAL(pooled.tracked_rows, 600);      /* kept out, then handed over on eviction */
	for (int k = 0; k < dry.npoints; k++) {
		double got = (double)whatif_served_at(dry.budget[k]), want = (double)dry.served[k];

		CU_ASSERT(got <= want + 0.02 * (double)dry.repeat_bytes && got >= want - 0.02 * (double)dry.repeat_bytes);
	}
}

/*
 * A copy whose rows all hit is one device operation, the gather, whether
 * the serve meter times it (two events around it: its first eight, then
 * one in 64) or not; now and then one goes plain for the link meter
 * instead, and is none of the pool's.
 */
static void test_all_hit_copy_is_one_operation(void)
{
	uint32_t ids[64];
	unsigned long long (*fc)(const char *), ev0;
	int served = 0;

	*(void **)&fc = dlsym(t_lib, "fakecuda_counter");
	CU_ASSERT_FATAL(fc != NULL);
	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "8M", "VRAMPOOL_PROBE_AFTER", "0",
				   NULL });
	t_ids(ids, 64, 42000, 1);
	t_copy(ids, 64);
	ev0 = fc("ops_event");
	for (int c = 0; c < 24; c++) {
		uint64_t ops = stats_get(ST_DEVICE_OPS), sent = t_copy(ids, 64);

		CU_ASSERT(sent == 0 || sent == 64 * ROW);
		CU_ASSERT_EQUAL(stats_get(ST_DEVICE_OPS) - ops, sent ? 0 : 1);
		served += sent == 0;
	}
	CU_ASSERT(served >= 20);
	CU_ASSERT(fc("ops_event") - ev0 >= 2 * 8);     /* the serve meter timed its first eight gathers */
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

/* Offloaded weights: 20 layers of 2 MiB, whole:1M, a 20M budget under the 64M slab. */
static void test_budget_under_a_slab(void)
{
	uint32_t layers[20];
	uint64_t sent = 0;

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "whole:1M", "VRAMPOOL_BUDGET", "20M", NULL });
	t_ids(layers, 20, 700, 1);
	for (int i = 0; i < 20; i++)
		t_copy_rows(&layers[i], 1, 2 * MIB, 0);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_BYTES), 20 * MIB);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_POOLED), 10);
	for (int i = 0; i < 20; i++)
		sent += t_copy_rows(&layers[i], 1, 2 * MIB, 0);
	CU_ASSERT_EQUAL(sent, 10 * 2 * MIB);     /* half of step 2 from the pool */
	CU_ASSERT_EQUAL(stats_state(), POOL_FULL);
}

/* Images of 32768 bytes and masks of 8192 share one budget. */
static void test_row_sizes_share(void)
{
	uint32_t ids[40];
	uint64_t sent = 0;

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "32768,8192", "VRAMPOOL_BUDGET", "2M",
				   "VRAMPOOL_SLAB", "64M", NULL });
	t_ids(ids, 40, 1, 1);
	for (int b = 0; b < 4; b++) {
		t_copy_rows(ids + 10 * b, 10, 32768, 0);
		t_copy_rows(ids + 10 * b, 10, 8192, 0);
	}
	CU_ASSERT_EQUAL(stats_get(ST_POOL_SLABS), 1);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_POOLED), 80);
	CU_ASSERT_EQUAL(stats_state(), POOL_ACTIVE);
	for (int b = 0; b < 4; b++) {
		sent += t_copy_rows(ids + 10 * b, 10, 32768, 0);
		sent += t_copy_rows(ids + 10 * b, 10, 8192, 0);
	}
	CU_ASSERT_EQUAL(sent, 0);
}

/*
 * Priorities: high rows (32768@1) need more than the budget holds, low
 * rows (8192) came first; the high rows take the whole budget, the low
 * rows are displaced and no longer admitted.
 */
static void test_priorities_displace(void)
{
	uint32_t ids[128];
	uint64_t hi_sent = 0, lo_sent = 0;

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "32768@1,8192", "VRAMPOOL_BUDGET", "2M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, 128, 1, 1);
	for (int e = 0; e < 3; e++)
		for (int b = 0; b < 8; b++) {
			t_copy_rows(ids + 16 * b, 16, 8192, 0);
			t_copy_rows(ids + 16 * b, 16, 32768, 1);
		}
	for (int b = 0; b < 8; b++) {
		lo_sent += t_copy_rows(ids + 16 * b, 16, 8192, 0);
		hi_sent += t_copy_rows(ids + 16 * b, 16, 32768, 1);
	}
	/* 2M holds 64 of the 128 high rows: they have all of it; no low row is served */
	CU_ASSERT_EQUAL(lo_sent, 128 * 8192);
	CU_ASSERT_EQUAL(hi_sent, 64 * 32768);
	CU_ASSERT(stats_get(ST_POOL_DISPLACED_BYTES) > 0);
	CU_ASSERT(stats_get(ST_POOL_DISPLACED_SLABS) > 0);
}

/* With one priority nothing is displaced (everything behaves as before). */
static void test_one_priority_no_displacement(void)
{
	uint32_t ids[128];

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "32768,8192", "VRAMPOOL_BUDGET", "2M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, 128, 1, 1);
	for (int e = 0; e < 2; e++)
		for (int b = 0; b < 8; b++) {
			t_copy_rows(ids + 16 * b, 16, 8192, 0);
			t_copy_rows(ids + 16 * b, 16, 32768, 0);
		}
	CU_ASSERT_EQUAL(stats_get(ST_POOL_DISPLACED_BYTES), 0);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_EVICTIONS), 0);
	CU_ASSERT_EQUAL(stats_state(), POOL_FULL);
}

/* Rows that never repeat with a full pool: pooling stands down, then comes back. */
static void test_backoff_and_return(void)
{
	uint32_t ids[16];
	uint64_t before;

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64K",
				   "VRAMPOOL_SLAB", "1M", NULL });
	/* fresh rows every copy (random augmentation): the pool fills, then stands down */
	for (uint32_t c = 0; c < 60; c++) {
		t_ids(ids, 16, 100000 + 16 * c, 1);
		t_copy_rows(ids, 16, ROW, 0);
	}
	CU_ASSERT_EQUAL(stats_state(), POOL_FULL);
	CU_ASSERT(stats_get(ST_BACKOFF_EVENTS) == 1);
	CU_ASSERT(atomic_load(&stats_global.stood_down));
	before = stats_get(ST_TIME_FINGERPRINT_NS);
	CU_ASSERT(stats_get(ST_STOOD_DOWN_CALLS) > 0);
	/* the pooled rows come back: sampling sees them and pooling resumes */
	t_ids(ids, 16, 100000, 1);
	for (int c = 0; c < 40 * BACKOFF_SAMPLE_EVERY && atomic_load(&stats_global.stood_down); c++)
		t_copy_rows(ids, 16, ROW, 0);
	CU_ASSERT_FALSE(atomic_load(&stats_global.stood_down));
	CU_ASSERT_EQUAL(t_copy_rows(ids, 16, ROW, 0), 0);
	CU_ASSERT(stats_get(ST_TIME_FINGERPRINT_NS) > before);
}

/* Copies the rows first..first+n-1 in copies of 64 rows. */
static void t_stream(uint32_t first, uint32_t n)
{
	uint32_t ids[64];

	for (uint32_t c = 0; c < n; c += 64) {
		uint32_t m = n - c < 64 ? n - c : 64;

		t_ids(ids, m, first + c, 1);
		t_copy_rows(ids, m, ROW, 0);
	}
}

#define T_FIRST_PASS (4 * MIB)   /* the doorkeeper's first pass in these tests */

/*
 * Augmented rows (never repeating) with room in the pool: after a first
 * pass without a hit the doorkeeper engages and no new row is captured
 * while the pool still has room; the pool admits only rows seen twice, so
 * the back-off judges it as a full one and, rows still not hitting,
 * pooling stands down (no hash but the sample's). When the rows come back
 * the samples see them: pooling resumes, without emptying the pool, the
 * doorkeeper disengages and the rows are captured, then served.
 */
static void test_doorkeeper_keeps_augmented_rows_out(void)
{
	uint64_t captured, refused, evictions, hits, rows = T_FIRST_PASS / ROW + 64;
	char reason[256];
	int pass;

	doorkeeper_set_first_pass_for_tests(T_FIRST_PASS);
	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_stream(1000000, (uint32_t)rows);
	CU_ASSERT_EQUAL_FATAL(stats_get(ST_ADMIT_ENGAGEMENTS), 1);
	captured = stats_get(ST_ROWS_CAPTURED);
	refused = stats_get(ST_ROWS_REFUSED);
	CU_ASSERT(captured >= T_FIRST_PASS / ROW && captured <= rows);
	/* 5000 more fresh rows: none captured; refused for one back-off window, then passed through */
	t_stream(2000000, 5000);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), captured);
	CU_ASSERT(stats_get(ST_ROWS_REFUSED) > refused);
	CU_ASSERT(stats_get(ST_ROWS_REFUSED) - refused <= BACKOFF_WINDOW * 64);
	CU_ASSERT_EQUAL(stats_get(ST_BACKOFF_EVENTS), 1);
	CU_ASSERT(atomic_load(&stats_global.stood_down));
	CU_ASSERT(stats_get(ST_STOOD_DOWN_CALLS) >= (5000 - BACKOFF_WINDOW * 64) / 64);
	CU_ASSERT_EQUAL(stats_state(), POOL_ACTIVE);
	CU_ASSERT(stats_get(ST_POOL_BYTES) < 64 * MIB);
	CU_ASSERT_EQUAL(stats_get(ST_ADMIT_DISENGAGEMENTS), 0);
	report_get_text(STATS_REASON, reason, sizeof(reason));
	CU_ASSERT_PTR_NOT_NULL(strstr(reason, "admits only rows seen twice"));
	/* the same rows again, until the samples see them: pooling resumes with the pool kept */
	evictions = stats_get(ST_POOL_EVICTIONS);
	for (pass = 0; pass < 16 && atomic_load(&stats_global.stood_down); pass++)
		t_stream(2000000, 5000);
	CU_ASSERT_FALSE(atomic_load(&stats_global.stood_down));
	CU_ASSERT(stats_get(ST_ADMIT_DISENGAGEMENTS) >= 1);
	CU_ASSERT_EQUAL(stats_get(ST_ADMIT_DISENGAGEMENTS), stats_get(ST_ADMIT_ENGAGEMENTS));
	CU_ASSERT_EQUAL(stats_get(ST_POOL_EVICTIONS), evictions);
	CU_ASSERT(stats_get(ST_ROWS_CAPTURED) > captured);
	/* captured on first sight now: the next pass takes the rest, the one after is served */
	t_stream(2000000, 5000);
	hits = stats_get(ST_ROWS_HITS);
	t_stream(2000000, 5000);
	CU_ASSERT(stats_get(ST_ROWS_HITS) - hits >= 5000 * 99 / 100);
	/* and a fresh row is captured on first sight */
	captured = stats_get(ST_ROWS_CAPTURED);
	t_stream(3000000, 64);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), captured + 64);
	doorkeeper_set_first_pass_for_tests(0);
}

/*
 * The doorkeeper engaged and pooling stood down with room in the pool;
 * then the rows the pool captured before the engagement come back: the
 * samples find them in the pool (hits, not repeats among the samples),
 * pooling resumes, and the doorkeeper disengages, so a row never seen
 * before is captured on first sight again.
 */
static void test_doorkeeper_disengages_when_pooled_rows_come_back(void)
{
	uint64_t captured, rows = T_FIRST_PASS / ROW + 64;
	int pass;

	doorkeeper_set_first_pass_for_tests(T_FIRST_PASS);
	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_stream(1000000, (uint32_t)rows);
	t_stream(2000000, 5000);
	CU_ASSERT_EQUAL_FATAL(stats_get(ST_ADMIT_ENGAGEMENTS), 1);
	CU_ASSERT_FATAL(atomic_load(&stats_global.stood_down));
	/* the first pass's rows again: they are in the pool */
	for (pass = 0; pass < 4 && atomic_load(&stats_global.stood_down); pass++)
		t_stream(1000000, (uint32_t)rows);
	CU_ASSERT_FALSE(atomic_load(&stats_global.stood_down));
	CU_ASSERT_EQUAL(stats_get(ST_ADMIT_DISENGAGEMENTS), 1);
	captured = stats_get(ST_ROWS_CAPTURED);
	t_stream(3000000, 64);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), captured + 64);
	doorkeeper_set_first_pass_for_tests(0);
}

/*
 * Copies epoch e of the samples 1..n (reshuffled: strides 1, 17, 19) in
 * copies of 64 rows; returns the host-to-device bytes.
 */
static uint64_t t_epoch(uint32_t *ids, uint32_t n, uint32_t e)
{
	uint64_t sent = 0;

	t_ids(ids, n, 1, e ? 15 + 2 * e : 1);
	for (uint32_t c = 0; c < n; c += 64)
		sent += t_copy_rows(ids + c, n - c < 64 ? n - c : 64, ROW, 0);
	return sent;
}

/*
 * Epoch 2 keeps its hits: a dataset smaller than the first pass, seen in
 * reshuffled epochs, is served from epoch 2 and engages nothing; one
 * larger than the first pass engages in epoch 1, has the rest of epoch 1
 * captured in epoch 2 and is served whole from epoch 3.
 */
static void test_doorkeeper_spares_epoch_two(void)
{
	uint32_t ids[2 * T_FIRST_PASS / ROW];
	uint64_t sent;
	uint32_t n = T_FIRST_PASS / ROW / 2;

	doorkeeper_set_first_pass_for_tests(T_FIRST_PASS);
	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	for (uint32_t e = 0; e < 3; e++) {
		sent = t_epoch(ids, n, e);
		CU_ASSERT_EQUAL(sent, e ? 0 : (uint64_t)n * ROW);
	}
	CU_ASSERT_EQUAL(stats_get(ST_ADMIT_ENGAGEMENTS), 0);

	n = 2 * T_FIRST_PASS / ROW;
	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	for (uint32_t e = 0; e < 3; e++) {
		sent = t_epoch(ids, n, e);
		if (e == 1)     /* the rows of epoch 1 after the first pass cross again */
			CU_ASSERT(sent >= (uint64_t)(n - T_FIRST_PASS / ROW - 64) * ROW && sent < (uint64_t)n * ROW);
		if (e == 2)
			CU_ASSERT(sent <= (uint64_t)n * ROW / 100);
	}
	CU_ASSERT_EQUAL(stats_get(ST_ADMIT_ENGAGEMENTS), 1);
	CU_ASSERT_EQUAL(stats_get(ST_ADMIT_DISENGAGEMENTS), 1);
	doorkeeper_set_first_pass_for_tests(0);
}

/* A dry run: fingerprints only, no device memory, no device work of its own. */
static void test_dry_run(void)
{
	uint32_t ids[100];
	unsigned long long (*fc)(const char *);
	unsigned long long d2d, allocs, ops;

	*(void **)&fc = dlsym(t_lib, "fakecuda_counter");
	CU_ASSERT_FATAL(fc != NULL);
	t_config((const char *[]){ "VRAMPOOL", "dry", "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_PROBE_AFTER", "0",
				   NULL });
	d2d = fc("d2d_bytes");
	allocs = fc("alloc_calls");
	ops = stats_get(ST_DEVICE_OPS);
	t_ids(ids, 100, 5000, 1);
	for (int e = 0; e < 3; e++)
		CU_ASSERT_EQUAL(t_copy(ids, 100), 100 * ROW);
	CU_ASSERT_EQUAL(fc("d2d_bytes"), d2d);
	CU_ASSERT_EQUAL(fc("alloc_calls"), allocs + 3);        /* the test's own three buffers */
	CU_ASSERT_EQUAL(stats_get(ST_DEVICE_OPS), ops);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_BYTES), 0);
	CU_ASSERT_EQUAL(stats_get(ST_BYTES_SERVED), 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_SEEN), 300);
	CU_ASSERT(stats_get(ST_TIME_FINGERPRINT_NS) > 0);
}

/* A synchronous copy is on the device when pool_copy returns, hits included. */
static void test_sync_copy(void)
{
	uint32_t ids[50];

	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_sync_copy = 1;
	t_ids(ids, 50, 321, 1);
	CU_ASSERT_EQUAL(t_copy_rows(ids, 50, ROW, 0), 50 * ROW);
	t_ids(ids, 50, 321, 3);
	CU_ASSERT_EQUAL(t_copy_rows(ids, 50, ROW, 0), 0);
	t_sync_copy = 0;
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), 50);
}

/* ---- deterministic tests of what one mutation sweep found unguarded (issue 17) ---- */

/* The emulated device's entry points and test hooks these tests use besides the suite's own. */
static struct {
	__typeof__(cuStreamCreate) *stream_create;
	__typeof__(cuStreamDestroy_v2) *stream_destroy;
	__typeof__(cuStreamQuery) *stream_query;
	__typeof__(cuMemsetD8_v2) *memset;
	unsigned long long (*counter)(const char *name);
	int (*fail)(const char *spec);
	int (*hold)(void *stream, int on);
	long long (*settle)(void *stream);
} t_fc;

/* Resolves t_fc from the emulated device; 0 or -1. */
static int t_fc_open(void)
{
	static const char *const names[] = {
		"cuStreamCreate", "cuStreamDestroy_v2", "cuStreamQuery", "cuMemsetD8_v2",
		"fakecuda_counter", "fakecuda_fail", "fakecuda_stream_hold", "fakecuda_stream_settle",
	};
	void **slot = (void **)&t_fc;

	_Static_assert(sizeof(t_fc) == sizeof(names) / sizeof(names[0]) * sizeof(void *), "a name a slot");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!(slot[i] = dlsym(t_lib, names[i])))
			return -1;
	return 0;
}

/* A device buffer of n bytes, every byte 0xA5 (a row the pool forgets to deliver keeps it). */
static CUdeviceptr t_alloc_marked(uint64_t n)
{
	CUdeviceptr d;

	CU_ASSERT_FATAL(t_alloc(&d, n) == CUDA_SUCCESS);
	CU_ASSERT_FATAL(t_fc.memset(d, 0xA5, n) == CUDA_SUCCESS);
	return d;
}

/* Whether the n bytes at device address d equal want (the legacy stream reads them now). */
static int t_device_equals(CUdeviceptr d, const unsigned char *want, uint64_t n)
{
	unsigned char *back = malloc(n);
	int same;

	CU_ASSERT_FATAL(back != NULL);
	same = t_dtoh(back, d, n) == CUDA_SUCCESS && memcmp(back, want, n) == 0;
	free(back);
	return same;
}

/* Hands the rows of src (n rows) for device buffer dst to the pool on h's stream; pool_copy's result. */
static int t_request(struct t_h2d *h, CUdeviceptr dst, const unsigned char *src, uint64_t n)
{
	struct pool_request r = { .dst = dst, .src = src, .n = n * ROW, .row = ROW, .stream = h->stream,
				  .h2d = t_h2d_cb, .arg = h };

	h->dst = dst;
	h->src = src;
	return pool_copy(pool_get(0, 0), &r);
}

/* The rows of the samples ids[0..n), in a new buffer. */
static unsigned char *t_rows(const uint32_t *ids, uint64_t n)
{
	unsigned char *src = malloc(n * ROW);

	CU_ASSERT_FATAL(src != NULL);
	for (uint64_t i = 0; i < n; i++)
		t_fill_row(src + i * ROW, ids[i]);
	return src;
}

/*
 * A row captured on stream a is copied on stream b before a ran: the
 * emulated device holds a back, so the capture stays queued while b's
 * copy is planned. Serving it would make b wait for a, which the program
 * never ordered b after (and which may wait for the program): b's rows
 * are misses, sent host-to-device, with no stream wait issued, and b
 * completes while a is still held. Once a ran, b hits them.
 */
static void test_cross_stream_copy_never_waits_for_a_capture(void)
{
	enum { N = 16 };
	uint32_t ids[N];
	unsigned char *src, *marked = malloc(N * ROW);
	struct t_h2d ha = { 0 }, hb = { 0 };
	CUstream a, b;
	CUdeviceptr da, db;
	unsigned long long waits;

	CU_ASSERT_FATAL(marked != NULL && t_fc_open() == 0);
	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, N, 70000, 1);
	src = t_rows(ids, N);
	memset(marked, 0xA5, N * ROW);
	CU_ASSERT_FATAL(t_fc.stream_create(&a, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	CU_ASSERT_FATAL(t_fc.stream_create(&b, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	da = t_alloc_marked(N * ROW);
	db = t_alloc_marked(N * ROW);
	ha.stream = a;
	hb.stream = b;
	CU_ASSERT_FATAL(t_fc.hold(a, 1) == 0);
	CU_ASSERT_EQUAL(t_request(&ha, da, src, N), 0);
	CU_ASSERT_EQUAL(ha.bytes, N * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), N);
	waits = t_fc.counter("cuStreamWaitEvent");
	CU_ASSERT_EQUAL(t_request(&hb, db, src, N), 0);
	CU_ASSERT_EQUAL(hb.bytes, N * ROW);             /* every row sent: the capture is queued elsewhere */
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), 0);
	CU_ASSERT_EQUAL(t_fc.counter("cuStreamWaitEvent"), waits);      /* no wait on the capture's event */
	/* a is held, b is not: b's copy ran, a's has not */
	CU_ASSERT_EQUAL(t_sync(b), CUDA_SUCCESS);
	CU_ASSERT(t_device_equals(db, src, N * ROW));
	CU_ASSERT(t_device_equals(da, marked, N * ROW));
	CU_ASSERT_FATAL(t_fc.hold(a, 0) == 0);
	CU_ASSERT_EQUAL(t_sync(a), CUDA_SUCCESS);
	CU_ASSERT(t_device_equals(da, src, N * ROW));
	/* the capture ran: b's next copy is served */
	hb.bytes = 0;
	CU_ASSERT_EQUAL(t_request(&hb, db, src, N), 0);
	CU_ASSERT_EQUAL(hb.bytes, 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), N);
	CU_ASSERT_EQUAL(t_sync(b), CUDA_SUCCESS);
	CU_ASSERT(t_device_equals(db, src, N * ROW));
	t_fc.stream_destroy(a);
	t_fc.stream_destroy(b);
	t_free(da);
	t_free(db);
	free(src);
	free(marked);
}

/*
 * The gather launch of a copy fails after its misses were sent: its hits
 * are delivered host-to-device again (every byte right), counted as
 * misses with one fallback, and its captures dropped (captured again by
 * a later copy, then served). The launch is failed with the device's
 * fault hook, one call exactly.
 */
static void test_failed_gather_launch_resends_the_hits(void)
{
	enum { N = 32, OLD = 16 };
	uint32_t ids[N];
	unsigned char *src;
	struct t_h2d h = { 0 };
	CUdeviceptr d;
	char spec[64];
	uint64_t launches, hits, served, h2d, misses, fallbacks, captured;

	CU_ASSERT_FATAL(t_fc_open() == 0);
	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, N, 80000, 1);
	src = t_rows(ids, N);
	t_copy(ids, OLD);                               /* captured by a gather launch */
	CU_ASSERT_FATAL(stats_get(ST_GATHER_LAUNCHES) >= 1 && stats_get(ST_ROWS_CAPTURED) == OLD);
	hits = stats_get(ST_ROWS_HITS);
	served = stats_get(ST_BYTES_SERVED);
	h2d = stats_get(ST_BYTES_H2D);
	misses = stats_get(ST_ROWS_MISSES);
	fallbacks = stats_get(ST_FALLBACKS);
	captured = stats_get(ST_ROWS_CAPTURED);
	launches = t_fc.counter("cuLaunchKernel");
	snprintf(spec, sizeof(spec), "cuLaunchKernel#%llu", (unsigned long long)launches + 1);
	CU_ASSERT_FATAL(t_fc.fail(spec) == 1);
	/* OLD hits, then N - OLD new rows in one run: sent first, then the launch fails */
	d = t_alloc_marked(N * ROW);
	CU_ASSERT_EQUAL(t_request(&h, d, src, N), 0);
	CU_ASSERT_EQUAL(t_fc.fail(""), 0);
	CU_ASSERT_EQUAL(t_fc.counter("injected:cuLaunchKernel"), 1);
	CU_ASSERT_EQUAL(t_sync(NULL), CUDA_SUCCESS);
	CU_ASSERT(t_device_equals(d, src, N * ROW));
	CU_ASSERT_EQUAL(h.calls, 2);                    /* the new rows, then the hits again */
	CU_ASSERT_EQUAL(h.bytes, N * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), hits);
	CU_ASSERT_EQUAL(stats_get(ST_BYTES_SERVED), served);
	CU_ASSERT_EQUAL(stats_get(ST_BYTES_H2D), h2d + N * ROW);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_MISSES), misses + N);
	CU_ASSERT_EQUAL(stats_get(ST_FALLBACKS), fallbacks + 1);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), captured);
	t_free(d);
	/* the lost captures are captured again, then every row is served */
	CU_ASSERT_EQUAL(t_copy(ids, N), (N - OLD) * ROW);
	CU_ASSERT_EQUAL(t_copy(ids, N), 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), N);
	free(src);
}

/* Which half the fingerprints of a sample pair share (t_collide). */
static int t_share_lo;

/*
 * Rewrites each row's fingerprint from its sample id (the id t_fill
 * writes first): samples 2k and 2k + 1 share one 64-bit half, and their
 * other halves differ by one (so that both keys have one home slot
 * whichever half the index hashes).
 */
static void t_collide(const void *src, uint64_t row, uint64_t nrows, struct fp *out)
{
	for (uint64_t i = 0; i < nrows; i++) {
		uint32_t id;
		uint64_t same, near;

		memcpy(&id, (const unsigned char *)src + i * row, sizeof(id));
		same = 0x9E3779B97F4A7C15ull * ((id >> 1) + 1);
		near = 0xD1B54A32D192ED03ull * ((id >> 1) + 1) + (id & 1);
		out[i] = t_share_lo ? (struct fp){ same, near } : (struct fp){ near, same };
	}
}

/*
 * Rows whose fingerprints share their low (then their high) 64 bits with
 * a pooled row's are not that row: the odd samples, each the partner of a
 * pooled even one, cross and are captured; then every row is served its
 * own bytes.
 */
static void test_rows_colliding_in_64_bits_get_their_own_bytes(void)
{
	static const struct fp_test_hooks hooks = { .rows_hashed = t_collide };
	enum { N = 64 };
	uint32_t even[N / 2], odd[N / 2], all[N];

	fingerprint_set_test_hooks(&hooks);
	for (t_share_lo = 0; t_share_lo < 2; t_share_lo++) {
		t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
					   "VRAMPOOL_SLAB", "1M", NULL });
		for (uint32_t k = 0; k < N / 2; k++) {
			even[k] = 90000 + 2 * k;
			odd[k] = even[k] + 1;
		}
		CU_ASSERT_EQUAL(t_copy(even, N / 2), N / 2 * ROW);
		CU_ASSERT_EQUAL(t_copy(odd, N / 2), N / 2 * ROW);
		CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), 0);
		CU_ASSERT_EQUAL(stats_get(ST_ROWS_CAPTURED), N);
		t_ids(all, N, 90000, 7);
		CU_ASSERT_EQUAL(t_copy(all, N), 0);     /* t_copy checks every byte */
		CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), N);
	}
	fingerprint_set_test_hooks(NULL);
}

/* A thread that lets a held stream go when told to, or after T_RELEASE_MS at the latest. */
#define T_RELEASE_MS 300
struct t_release {
	CUstream stream;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int told;
};

static void *t_release_main(void *arg)
{
	struct t_release *r = arg;
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += T_RELEASE_MS * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&r->mu);
	while (!r->told && pthread_cond_timedwait(&r->cv, &r->mu, &until) == 0)
		;
	pthread_mutex_unlock(&r->mu);
	t_fc.hold(r->stream, 0);
	return NULL;
}

/*
 * Memory pressure while hits are still queued: the emulated device holds
 * the stream that serves them, so their gather has not read the slab yet.
 * The reclaim must wait for that work before it frees the slab: it
 * returns only once a thread let the stream go (after T_RELEASE_MS), and
 * the hits land. A reclaim that frees the slab at once returns with the
 * stream still held; told then, the thread lets it go, and the gather
 * reads freed memory: the emulated device faults it, the rows never land.
 */
static void test_reclaim_waits_for_queued_hits(void)
{
	enum { N = 16 };
	uint32_t ids[N];
	unsigned char *src;
	struct t_h2d h = { 0 };
	struct t_release rel = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	unsigned long long faults;
	pthread_t th;
	CUdeviceptr d;

	CU_ASSERT_FATAL(t_fc_open() == 0);
	t_config((const char *[]){ "VRAMPOOL_LAYOUT", "3072", "VRAMPOOL_BUDGET", "64M",
				   "VRAMPOOL_SLAB", "1M", NULL });
	t_ids(ids, N, 90000, 1);
	src = t_rows(ids, N);
	CU_ASSERT_FATAL(t_fc.stream_create(&h.stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	d = t_alloc_marked(N * ROW);
	CU_ASSERT_EQUAL(t_request(&h, d, src, N), 0);   /* captured */
	CU_ASSERT_EQUAL(t_sync(h.stream), CUDA_SUCCESS);
	CU_ASSERT_FATAL(stats_get(ST_ROWS_CAPTURED) == N && t_fc.memset(d, 0xA5, N * ROW) == CUDA_SUCCESS);
	CU_ASSERT_FATAL(t_fc.hold(h.stream, 1) == 0);
	CU_ASSERT_EQUAL(t_request(&h, d, src, N), 0);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_HITS), N);    /* queued, not run */
	faults = t_fc.counter("kernel_faults");
	rel.stream = h.stream;
	CU_ASSERT_FATAL(pthread_create(&th, NULL, t_release_main, &rel) == 0);
	CU_ASSERT(pool_reclaim(0, 1ULL << 50) >= 1);   /* every slab */
	CU_ASSERT_EQUAL(stats_get(ST_POOL_SLABS), 0);
	pthread_mutex_lock(&rel.mu);
	rel.told = 1;
	pthread_cond_signal(&rel.cv);
	pthread_mutex_unlock(&rel.mu);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(t_sync(h.stream), CUDA_SUCCESS);
	CU_ASSERT(t_device_equals(d, src, N * ROW));
	CU_ASSERT_EQUAL(t_fc.counter("kernel_faults"), faults);
	t_fc.stream_destroy(h.stream);
	t_free(d);
	free(src);
}

static int t_suite_init(void)
{
	void *h = t_lib = dlopen("libcuda.so.1", RTLD_NOW);
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

static const CU_TestInfo tests[] = {
	{ "a repeated row is served from the pool, reshuffled", test_repeat_hits },
	{ "a row repeated within one copy is captured once", test_repeat_within_copy },
	{ "the pool stays dormant until the probe point, then decides once", test_probe_waits },
	{ "admission stops at the budget and the rest keeps crossing",
	  test_budget_limits_admission },
	{ "a copy's requested bytes are counted beside its bytes sent and served",
	  test_requested_beside_bytes },
	{ "eviction frees the newest slabs first and latches the budget", test_eviction },
	{ "the what-if curve of kept rows, slabs evicted, counts what a dry run counts", test_whatif_of_kept_rows },
	{ "an all-hit copy is one device operation, its serve meter's events not counted",
	  test_all_hit_copy_is_one_operation },
	{ "a probe that leaves less than one slab keeps the pool dormant", test_dormant_for_good },
	{ "rows captured under a run-time check are served once it found the source unchanged",
	  test_checked_capture },
	{ "a budget under one slab pools that much: offloaded weights send half from step 2",
	  test_budget_under_a_slab },
	{ "rows of two sizes share one budget and one slab", test_row_sizes_share },
	{ "rows of a higher priority displace lower ones and take the whole budget",
	  test_priorities_displace },
	{ "with one priority a full pool displaces nothing", test_one_priority_no_displacement },
	{ "rows that never repeat make a full pool stand down, and repeats bring it back",
	  test_backoff_and_return },
	{ "augmented rows with room in the pool are never captured after the doorkeeper engages, pooling "
	  "stands down, and comes back capturing on first sight when rows repeat",
	  test_doorkeeper_keeps_augmented_rows_out },
	{ "the doorkeeper disengages when the samples find the pooled rows back",
	  test_doorkeeper_disengages_when_pooled_rows_come_back },
	{ "a dataset within the first pass keeps epoch 2's hits; a larger one is served from epoch 3",
	  test_doorkeeper_spares_epoch_two },
	{ "a dry run allocates nothing and issues no device work of its own", test_dry_run },
	{ "a synchronous copy is complete when the pool returns, hits included", test_sync_copy },
	{ "a row captured on a held stream is a miss on another, which never waits for it; then a hit",
	  test_cross_stream_copy_never_waits_for_a_capture },
	{ "a gather launch that fails after the misses went sends the hits again and drops the captures",
	  test_failed_gather_launch_resends_the_hits },
	{ "a reclaim under memory pressure waits for the hits still queued on its slabs before it frees them",
	  test_reclaim_waits_for_queued_hits },
	{ "rows whose fingerprints share their low or high 64 bits with a pooled row get their own bytes",
	  test_rows_colliding_in_64_bits_get_their_own_bytes },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "pool",
	.init = t_suite_init,
	.clean = t_suite_clean,
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
