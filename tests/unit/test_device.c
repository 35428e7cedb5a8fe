/*
 * Unit tests of device: the gather kernel's source (run on the host over
 * simulated threads), its host side on the emulated device (load, self-test,
 * retry, launches on every kind of stream), the legacy-stream bridge's
 * retry, and fault counting.
 *
 * The emulated device reads its FAKECUDA_* variables at its first call, and
 * device.c keeps per-process state, so every device case runs in a fork()ed
 * child (tests/fakecuda/check/harness.h) that exits with the line of its
 * first failed check; the parent never touches CUDA.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fakecuda/check/harness.h"
#include "cunit_main.h"
#include "device/device.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/stats.h"
#include "report/reason.h"

/* The kernel's body as plain C: gather_warp and what it calls. */
#define GATHER_HOST 1
#include "../../shim/device/gather.cu"

/* ---- the kernel source on the host ------------------------------------------ */

/*
 * Runs the kernel over a simulated launch: every lane of every warp of the
 * grid device_gather_shape sized, one after another, reading the table t.
 * The kernel has no shared memory or barriers, so any order of threads is
 * a valid schedule.
 */
static void t_host_kernel(const struct dev_gather_params *p, const struct dev_gather_shape *sh,
			  const unsigned char *t)
{
	for (uint64_t w = 0; w < sh->blocks * (DEV_GATHER_THREADS / 32); w++)
		for (uint64_t lane = 0; lane < 32; lane++)
			gather_warp(p, t, w, lane);
}

static void t_random(unsigned char *p, size_t n, unsigned *seed)
{
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(*seed >> 16);
	}
}

/*
 * Every source and destination offset modulo 16 and lengths around every
 * word size, with 1, 5 and 64 threads: exactly the len bytes change, to
 * the source's values. Under UBSan a misaligned word access fails too
 * (the host's word types carry the device's alignment).
 */
static void test_host_entry_alignments(void)
{
	static const uint64_t lens[] = { 0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 257 };
	static const uint64_t strides[] = { 1, 5, 64 };
	enum { CAP = 512 };
	_Alignas(16) unsigned char src[CAP], dst[CAP], want[CAP];
	unsigned seed = 1;
	int bad = 0;

	for (int so = 0; so < 16; so++)
		for (int dof = 0; dof < 16; dof++)
			for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
				for (size_t st = 0; st < sizeof(strides) / sizeof(strides[0]); st++) {
					uint64_t len = lens[l];

					t_random(src, CAP, &seed);
					t_random(dst, CAP, &seed);
					memcpy(want, dst, CAP);
					memcpy(want + 32 + dof, src + 32 + so, len);
					for (uint64_t t = 0; t < strides[st]; t++)
						gather_entry(dst + 32 + dof, src + 32 + so, len, t, strides[st]);
					bad += memcmp(dst, want, CAP) != 0;
				}
	CU_ASSERT_EQUAL(bad, 0);
}

/*
 * Whole launches, shaped and laid out by device/table.c: odd and even row
 * sizes, hits and captures mixed, empty entries, entries of one unit and
 * of many, slab addresses at every offset, for devices of 1, 3 and 132
 * multiprocessors (one unit per warp, several, warp starts or none).
 */
static void test_host_params(void)
{
	static const uint64_t rows[] = { 1, 3, 4, 8, 16, 37, 1029, 4101 };
	static const uint32_t sms[] = { 1, 3, 132 };
	struct dev_gather_params *p = malloc(sizeof(*p));
	unsigned seed = 7;
	int bad = 0;

	CU_ASSERT_FATAL(p != NULL);
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
		for (size_t g = 0; g < sizeof(sms) / sizeof(sms[0]); g++) {
			uint64_t row = rows[r], dsize = 0, ssize = 0;
			uint32_t n = 60, next = 0;
			struct dev_gather_entry e[60];
			struct dev_gather_shape sh;
			unsigned char *dst, *slab, *wd, *ws, *t;

			/* Plan: each entry its own destination rows and slab space. */
			for (uint32_t i = 0; i < n; i++) {
				uint32_t nr = i % 9 == 4 ? 0 : i % 13 == 7 ? 11 : 1 + i % 4;

				ssize = ((ssize + 15) & ~(uint64_t)15) + i % 16 + nr * row;
				next += nr;
			}
			dsize = 5 + (uint64_t)next * row + 16;
			ssize += 16;
			dst = malloc(dsize);
			slab = malloc(ssize);
			wd = malloc(dsize);
			ws = malloc(ssize);
			CU_ASSERT_FATAL(dst && slab && wd && ws);
			t_random(dst, dsize, &seed);
			t_random(slab, ssize, &seed);
			memcpy(wd, dst, dsize);
			memcpy(ws, slab, ssize);
			next = 0;
			ssize = 0;
			for (uint32_t i = 0; i < n; i++) {
				uint32_t nr = i % 9 == 4 ? 0 : i % 13 == 7 ? 11 : 1 + i % 4;
				uint64_t at = ((ssize + 15) & ~(uint64_t)15) + i % 16, doff = 5 + (uint64_t)next * row;
				int cap = (i * 7 + (unsigned)r) % 3 == 0;

				e[i] = (struct dev_gather_entry){ .slab = (dev_ptr)(uintptr_t)(slab + at), .dst_row = next,
								  .nrows_dir = nr | (cap ? DEV_GATHER_CAPTURE : 0) };
				if (cap)
					memcpy(ws + at, wd + doff, nr * row);
				else
					memcpy(wd + doff, ws + at, nr * row);
				ssize = at + nr * row;
				next += nr;
			}
			CU_ASSERT_FATAL(device_gather_shape(&sh, e, n, row, sms[g]) == 0);
			t = malloc(sh.table_bytes);
			CU_ASSERT_FATAL(t != NULL);
			device_gather_table(&sh, e, n, row, t);
			memset(p, 0, sizeof(*p));
			*p = (struct dev_gather_params){ .dst = (dev_ptr)(uintptr_t)(dst + 5), .row = row,
							 .units = sh.units, .count = n,
							 .per_warp = (uint32_t)sh.per_warp,
							 .warps = (uint32_t)sh.warps };
			t_host_kernel(p, &sh, t);
			bad += memcmp(dst, wd, dsize) != 0 || memcmp(slab, ws, ssize + 16) != 0;
			free(t);
			free(dst);
			free(slab);
			free(wd);
			free(ws);
		}
	CU_ASSERT_EQUAL(bad, 0);
	free(p);
}

/*
 * The launch shape: units from the bytes, the grid from the units and the
 * multiprocessor count, warp starts only when an entry has several units.
 */
static void test_host_shape(void)
{
	struct dev_gather_entry e[3] = { { 0x1000, 0, 1 }, { 0x2000, 1, 1 }, { 0x3000, 2, 1 } };
	struct dev_gather_start st[1];
	struct dev_gather_shape sh;

	/* Three rows of 64 bytes: three units, three warps, one block, no starts. */
	CU_ASSERT_EQUAL(device_gather_shape(&sh, e, 3, 64, 132), 0);
	CU_ASSERT(sh.units == 3 && sh.per_warp == 1 && sh.warps == 0 && sh.blocks == 1);
	CU_ASSERT_EQUAL(sh.table_bytes, 3 * sizeof(e[0]));
	/* One 64 MiB row on 132 SMs: 32768 units over at most 132 x 32 warps. */
	CU_ASSERT_EQUAL(device_gather_shape(&sh, e, 1, 64 << 20, 132), 0);
	CU_ASSERT(sh.units == 32768 && sh.per_warp == 8 && sh.warps == 4096 && sh.blocks == 512);
	CU_ASSERT_EQUAL(sh.table_bytes, sizeof(e[0]) + 4096 * sizeof(st[0]));
	/* The same row on 1 SM: 32 warps of 1024 units. */
	CU_ASSERT_EQUAL(device_gather_shape(&sh, e, 1, 64 << 20, 1), 0);
	CU_ASSERT(sh.per_warp == 1024 && sh.warps == 32 && sh.blocks == 4);
	/* 5000-byte rows (3 units each), 2 entries of 2 rows, one of 1, on 1 SM:
	 * 5 + 5 + 3 = 13 units, one a warp; each warp starts where it should. */
	e[0].nrows_dir = 2;
	e[1].nrows_dir = 2 | DEV_GATHER_CAPTURE;
	CU_ASSERT_EQUAL(device_gather_shape(&sh, e, 3, 5000, 1), 0);
	CU_ASSERT(sh.units == 13 && sh.per_warp == 1 && sh.warps == 13 && sh.blocks == 2);
	CU_ASSERT_EQUAL(sh.table_bytes, 3 * sizeof(e[0]) + 13 * sizeof(st[0]));
	{
		unsigned char big[3 * sizeof(e[0]) + 13 * sizeof(st[0])];
		const struct dev_gather_start *s = (const struct dev_gather_start *)(const void *)(big + 3 * sizeof(e[0]));

		device_gather_table(&sh, e, 3, 5000, big);
		CU_ASSERT(memcmp(big, e, sizeof(e)) == 0);
		CU_ASSERT(s[0].entry == 0 && s[0].unit == 0 && s[4].entry == 0 && s[4].unit == 4);
		CU_ASSERT(s[5].entry == 1 && s[5].unit == 0 && s[9].entry == 1 && s[9].unit == 4);
		CU_ASSERT(s[10].entry == 2 && s[10].unit == 0 && s[12].entry == 2 && s[12].unit == 2);
	}
	/* Nothing to launch, or a row too large to count in units: refused. */
	CU_ASSERT_EQUAL(device_gather_shape(&sh, e, 0, 64, 1), -E2BIG);
	CU_ASSERT_EQUAL(device_gather_shape(&sh, e, 1, 0, 1), -E2BIG);
	CU_ASSERT_EQUAL(device_gather_shape(&sh, e, 1, UINT64_MAX / 2, 1), -E2BIG);
}

/* ---- the host side on the emulated device ------------------------------------ */

static __typeof__(cuInit) *t_init;
static __typeof__(cuDevicePrimaryCtxRetain) *t_retain;
static __typeof__(cuCtxSetCurrent) *t_setctx;
static __typeof__(cuMemcpyHtoD_v2) *t_htod;
static __typeof__(cuMemcpyHtoDAsync_v2) *t_htod_async;
static __typeof__(cuMemcpyDtoH_v2) *t_dtoh;
static __typeof__(cuStreamCreate) *t_stream_create;
static __typeof__(cuStreamSynchronize) *t_sync;
static __typeof__(cuLaunchHostFunc) *t_host_func;
static __typeof__(cuMemHostAlloc) *t_host_alloc;
static int (*t_device_reset)(void);     /* cudaDeviceReset */

/* In a child: binds device 0's primary context and opens the driver for device.c. */
static void t_open(void)
{
	/* Global, so that the harness finds fakecuda_counter. */
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	CUcontext ctx;

	CHK(h != NULL);
	*(void **)&t_init = dlsym(h, "cuInit");
	*(void **)&t_retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&t_setctx = dlsym(h, "cuCtxSetCurrent");
	*(void **)&t_htod = dlsym(h, "cuMemcpyHtoD_v2");
	*(void **)&t_htod_async = dlsym(h, "cuMemcpyHtoDAsync_v2");
	*(void **)&t_dtoh = dlsym(h, "cuMemcpyDtoH_v2");
	*(void **)&t_stream_create = dlsym(h, "cuStreamCreate");
	*(void **)&t_sync = dlsym(h, "cuStreamSynchronize");
	*(void **)&t_host_func = dlsym(h, "cuLaunchHostFunc");
	*(void **)&t_host_alloc = dlsym(h, "cuMemHostAlloc");
	*(void **)&t_device_reset = dlsym(h, "cudaDeviceReset");
	CHK(t_init && t_retain && t_setctx && t_htod && t_htod_async && t_dtoh && t_stream_create && t_sync &&
	    t_host_func && t_host_alloc && t_device_reset);
	CHK(t_init(0) == CUDA_SUCCESS && t_retain(&ctx, 0) == CUDA_SUCCESS && t_setctx(ctx) == CUDA_SUCCESS);
	CHK(device_open() == 0);
	stats_reset(1, "");
}

/* Sends this child's stderr to a fresh file and turns VRAMPOOL_VERBOSE on. */
static void t_verbose_to(char *path)
{
	int fd = mkstemp(path);

	CHK(fd >= 0 && dup2(fd, 2) == 2);
	close(fd);
	log_set_verbose(1);
}

/* Returns how many lines of the file at path contain every one of the strings (NULL-terminated). */
static int t_lines_with(const char *path, ...)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int n = 0;

	CHK(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		const char *want;
		va_list ap;
		int all = 1;

		va_start(ap, path);
		while ((want = va_arg(ap, const char *)))
			all &= strstr(line, want) != NULL;
		va_end(ap);
		n += all;
	}
	fclose(f);
	unlink(path);
	return n;
}

static int t_gather_text_is(const char *want)
{
	char buf[64];

	stats_get_text(STATS_GATHER, buf, sizeof(buf));
	return strcmp(buf, want) == 0;
}

/*
 * One gather of n random entries (rows of row bytes, hits and captures,
 * slab offsets 0..15, destination at dst_off) on stream s, checked byte by
 * byte on both sides, including that nothing else changed.
 */
static void t_gather_case(uint64_t row, uint32_t dst_off, uint32_t n, unsigned seed, dev_stream s)
{
	struct dev_gather_entry *e = malloc(n * sizeof(*e));
	uint64_t dsize, ssize = 0, next = 0, launches = stats_get(ST_GATHER_LAUNCHES);
	unsigned char *hd, *hs, *wd, *ws;
	dev_ptr dst, slab;

	CHK(e != NULL);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t nr = 1 + (seed + i) % 3;

		e[i].dst_row = (uint32_t)next;
		e[i].nrows_dir = nr | ((seed + i * 5) % 2 ? DEV_GATHER_CAPTURE : 0);
		e[i].slab = ((ssize + 15) & ~(uint64_t)15) + (seed * 3 + i) % 16;     /* an offset for now */
		ssize = e[i].slab + nr * row;
		next += nr;
	}
	dsize = dst_off + next * row;
	hd = malloc(dsize);
	wd = malloc(dsize);
	hs = malloc(ssize);
	ws = malloc(ssize);
	CHK(hd && wd && hs && ws);
	t_random(hd, dsize, &seed);
	t_random(hs, ssize, &seed);
	memcpy(wd, hd, dsize);
	memcpy(ws, hs, ssize);
	CHK(device_mem_alloc(0, dsize, &dst) == 0 && device_mem_alloc(0, ssize, &slab) == 0);
	CHK(t_htod(dst, hd, dsize) == CUDA_SUCCESS && t_htod(slab, hs, ssize) == CUDA_SUCCESS);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t len = (e[i].nrows_dir & ~DEV_GATHER_CAPTURE) * row, at = e[i].slab;
		uint64_t doff = dst_off + (uint64_t)e[i].dst_row * row;

		if (e[i].nrows_dir & DEV_GATHER_CAPTURE)
			memcpy(ws + at, wd + doff, len);
		else
			memcpy(wd + doff, ws + at, len);
		e[i].slab += slab;
	}
	CHK(device_gather(0, dst + dst_off, row, e, n, s) == 0);
	CHK(stats_get(ST_GATHER_LAUNCHES) - launches == 1);
	CHK(t_sync((CUstream)s) == CUDA_SUCCESS);
	CHK(t_dtoh(hd, dst, dsize) == CUDA_SUCCESS && t_dtoh(hs, slab, ssize) == CUDA_SUCCESS);
	CHK(memcmp(hd, wd, dsize) == 0);
	CHK(memcmp(hs, ws, ssize) == 0);
	CHK(device_mem_free(0, dst) == 0 && device_mem_free(0, slab) == 0);
	free(hd);
	free(wd);
	free(hs);
	free(ws);
	free(e);
}

static void c_self_test_passes(void)
{
	char log[] = "/tmp/vrampool-test-device-XXXXXX";

	t_open();
	t_verbose_to(log);
	CHK(device_gather_ready(0) == 1);
	CHK(t_gather_text_is("kernel"));
	CHK(counter("cuModuleLoadData") == 1);
	/* The pattern came from memsets, not from the host. */
	CHK(counter("h2d_bytes") == 0 && counter("memset_calls") > 0);
	CHK(counter("kernel_launches") >= 1 && stats_get(ST_DEVICE_OPS) > 0);
	CHK(stats_get(ST_POOL_FAULTS) == 0 && stats_get(ST_GATHER_LAUNCHES) == 0);
	/* Its memory is given back; later calls neither load nor test again. */
	CHK(counter("alloc_bytes") == 0);
	for (int i = 0; i < 50; i++)
		CHK(device_gather_ready(0) == 1);
	CHK(counter("cuModuleLoadData") == 1 && counter("cuMemAlloc_v2") == 1);
	CHK(t_lines_with(log, "vrampool: device 0: the gather kernel loaded and passed its self-test", NULL) == 1);
}

static void test_self_test_passes(void)
{
	CU_ASSERT(child_ok(in_child(c_self_test_passes, NULL)));
}

/* The kernel is off for the context, for good: later calls try nothing. */
static void t_off_for_good(unsigned long long loads)
{
	CHK(device_gather_ready(0) == 0);
	CHK(t_gather_text_is("batched copy"));
	for (int i = 0; i < 400; i++)
		CHK(device_gather_ready(0) == 0);
	CHK(counter("cuModuleLoadData") == loads);
	CHK(device_gather(0, 0x1000, 1, &(struct dev_gather_entry){ 0x2000, 0, 1 }, 1, NULL) == -ENOSYS);
}

static void c_broken_kernel(void)
{
	char log[] = "/tmp/vrampool-test-device-XXXXXX";

	t_open();
	t_verbose_to(log);
	t_off_for_good(1);
	CHK(stats_get(ST_POOL_FAULTS) == 1);
	CHK(counter("alloc_bytes") == 0);
	/* Said once, with why and what is used instead. */
	CHK(t_lines_with(log, "vrampool: device 0: the gather kernel failed its self-test (byte ",
			 "use batched copies instead", NULL) == 1);
}

static void c_no_module(void)
{
	char log[] = "/tmp/vrampool-test-device-XXXXXX";

	t_open();
	t_verbose_to(log);
	t_off_for_good(1);
	CHK(counter("cuLaunchKernel") == 0 && counter("cuMemAlloc_v2") == 0);
	CHK(t_lines_with(log, "vrampool: device 0: the gather kernel did not load (cuModuleLoadData: CUDA_ERROR_",
			 ".version 8.1, .target sm_75", "use batched copies instead", NULL) == 1);
}

static void test_self_test_fails_on_a_wrong_kernel(void)
{
	static const char *const broken[] = { "FAKECUDA_KERNEL", "broken", NULL };
	static const char *const none[] = { "FAKECUDA_KERNEL", "none", NULL };
	static const char *const fail_load[] = { "FAKECUDA_FAIL", "cuModuleLoadData", NULL };

	CU_ASSERT(child_ok(in_child(c_broken_kernel, broken)));
	CU_ASSERT(child_ok(in_child(c_no_module, none)));
	CU_ASSERT(child_ok(in_child(c_no_module, fail_load)));
}

/* Every launch fails: retried with back-off, then given up; never blocks. */
static void c_launch_always_fails(void)
{
	int calls = 0;

	t_open();
	while (counter("cuLaunchKernel") < 5 && calls < 1000) {
		CHK(device_gather_ready(0) == 0);
		CHK(t_gather_text_is("batched copy"));
		calls++;
	}
	CHK(counter("cuLaunchKernel") == 5);
	/* 1 + 4 + 16 + 64 + 256 calls: the back-off between the attempts. */
	CHK(calls == 1 + 4 + 1 + 16 + 1 + 64 + 1 + 256 + 1);
	for (int i = 0; i < 2000; i++)
		CHK(device_gather_ready(0) == 0);
	CHK(counter("cuLaunchKernel") == 5 && counter("cuModuleLoadData") == 1);
	CHK(stats_get(ST_POOL_FAULTS) == 5);
	/* Each failed attempt freed its memory. */
	CHK(counter("alloc_bytes") == 0);
}

static void test_launch_failure_is_retried_then_given_up(void)
{
	static const char *const env[] = { "FAKECUDA_FAIL", "cuLaunchKernel", NULL };

	CU_ASSERT(child_ok(in_child(c_launch_always_fails, env)));
}

/* One failure that passes: the next attempt (after the back-off) succeeds. */
static void c_transient(void)
{
	int calls = 1;

	t_open();
	CHK(device_gather_ready(0) == 0);
	CHK(t_gather_text_is("batched copy"));
	CHK(stats_get(ST_POOL_FAULTS) == 1);
	while (device_gather_ready(0) == 0 && calls < 100)
		calls++;
	CHK(calls == 1 + 4);
	CHK(device_gather_ready(0) == 1);
	CHK(t_gather_text_is("kernel"));
	CHK(counter("cuModuleLoadData") == 1);
	t_gather_case(37, 3, 9, 5, NULL);
}

static void test_transient_self_test_failure_is_retried(void)
{
	static const char *const alloc[] = { "FAKECUDA_FAIL", "cuMemAlloc_v2#1", NULL };
	static const char *const launch[] = { "FAKECUDA_FAIL", "cuLaunchKernel#2", NULL };
	static const char *const readback[] = { "FAKECUDA_FAIL", "cuMemcpyDtoHAsync_v2#1", NULL };

	CU_ASSERT(child_ok(in_child(c_transient, alloc)));
	CU_ASSERT(child_ok(in_child(c_transient, launch)));
	CU_ASSERT(child_ok(in_child(c_transient, readback)));
}

static void c_gather_alignments(void)
{
	static const uint64_t rows[] = { 1, 2, 3, 5, 16, 37, 64, 1029, 4101 };
	static const uint32_t offs[] = { 0, 1, 3, 8 };
	CUstream s;

	t_open();
	CHK(device_gather_ready(0) == 1);
	CHK(t_stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
		for (size_t o = 0; o < sizeof(offs) / sizeof(offs[0]); o++)
			t_gather_case(rows[r], offs[o], 1 + (uint32_t)(r * 4 + o) % 17, (unsigned)(r * 31 + o), s);
	CHK(counter("cuMemHostAlloc") == 1);  /* the self-test's mapped table */
	/* More entries than the parameter holds: still one launch, its table mapped. */
	t_gather_case(3, 1, 2 * DEV_GATHER_INLINE / 16 + 5, 99, s);
	t_gather_case(4101, 3, 700, 98, s);
	CHK(counter("kernel_faults") == 0 && stats_get(ST_POOL_FAULTS) == 0);
}

static void test_gather_alignments(void)
{
	CU_ASSERT(child_ok(in_child(c_gather_alignments, NULL)));
}

static void *t_per_thread(void *arg)
{
	CUcontext ctx;

	(void)arg;
	CHK(t_retain(&ctx, 0) == CUDA_SUCCESS && t_setctx(ctx) == CUDA_SUCCESS);
	t_gather_case(37, 5, 7, 3, DEV_STREAM_PER_THREAD);
	return NULL;
}

/*
 * The legacy stream, both its handles, and per-thread streams; and the
 * legacy stream's order: a capture enqueued on it reads the rows a blocking
 * stream's earlier (held) copy writes, never what was there before.
 */
static void c_streams(void)
{
	enum { ROW = 41, ROWS = 6 };
	unsigned char fresh[ROW * ROWS], back[ROW * ROWS];
	struct dev_gather_entry e[2];
	dev_stream legacy[2] = { NULL, DEV_STREAM_LEGACY };
	unsigned seed = 11;
	dev_ptr dst, slab;
	pthread_t th;
	CUstream x;

	t_open();
	CHK(device_gather_ready(0) == 1);
	t_gather_case(37, 1, 10, 1, NULL);
	t_gather_case(37, 2, 10, 2, DEV_STREAM_LEGACY);
	t_gather_case(37, 3, 10, 3, DEV_STREAM_PER_THREAD);
	CHK(pthread_create(&th, NULL, t_per_thread, NULL) == 0);
	CHK(pthread_join(th, NULL) == 0);

	CHK(t_stream_create(&x, CU_STREAM_DEFAULT) == CUDA_SUCCESS);
	CHK(device_mem_alloc(0, ROW * ROWS, &dst) == 0 && device_mem_alloc(0, ROW * ROWS + 16, &slab) == 0);
	for (int l = 0; l < 2; l++) {
		t_random(back, sizeof(back), &seed);
		CHK(t_htod(dst, back, sizeof(back)) == CUDA_SUCCESS);
		t_random(fresh, sizeof(fresh), &seed);
		atomic_store(&gate, 0);
		CHK(t_host_func(x, hold_stream, NULL) == CUDA_SUCCESS);
		CHK(t_htod_async(dst, fresh, sizeof(fresh), x) == CUDA_SUCCESS);
		e[0] = (struct dev_gather_entry){ slab + 3, 0, 2 | DEV_GATHER_CAPTURE };
		e[1] = (struct dev_gather_entry){ slab + 3 + 2 * ROW, 2, (ROWS - 2) | DEV_GATHER_CAPTURE };
		CHK(device_gather(0, dst, ROW, e, 2, legacy[l]) == 0);
		atomic_store(&gate, 1);
		CHK(t_sync(NULL) == CUDA_SUCCESS);
		CHK(t_dtoh(back, slab + 3, sizeof(back)) == CUDA_SUCCESS);
		CHK(memcmp(back, fresh, sizeof(fresh)) == 0);
	}
	/* A thread whose current context is not the primary one: nothing enqueued. */
	CHK(t_setctx(NULL) == CUDA_SUCCESS);
	CHK(device_gather(0, dst, ROW, e, 2, NULL) == -EXDEV);
}

static void test_streams(void)
{
	CU_ASSERT(child_ok(in_child(c_streams, NULL)));
}

/* A launch that fails: -EIO, a fault, no launch counted. */
static void c_failed_launch(void)
{
	struct dev_gather_entry e = { 0, 0, 1 };
	dev_ptr buf;

	t_open();
	CHK(device_gather_ready(0) == 1);
	CHK(device_mem_alloc(0, 256, &buf) == 0);
	e.slab = buf + 128;
	CHK(device_gather(0, buf, 64, &e, 1, NULL) == -EIO);
	CHK(stats_get(ST_POOL_FAULTS) == 1 && stats_get(ST_GATHER_LAUNCHES) == 0);
	/* Still the same context: the kernel stays ready. */
	CHK(device_gather_ready(0) == 1 && counter("cuModuleLoadData") == 1);
}

static void test_failed_launch(void)
{
	static const char *const env[] = { "FAKECUDA_FAIL", "cuLaunchKernel@3", NULL };

	CU_ASSERT(child_ok(in_child(c_failed_launch, env)));
}

/*
 * After a device reset the module is gone: a launch fails once and the
 * kernel is loaded and tested again in the new context; device_forget
 * (what pool_get calls on a new context id) does the same without a failure.
 */
static void c_reset(void)
{
	struct dev_gather_entry e = { 0, 0, 1 };
	dev_ptr buf;

	t_open();
	CHK(device_gather_ready(0) == 1);
	CHK(t_device_reset() == 0);
	CHK(device_mem_alloc(0, 256, &buf) == 0);
	e.slab = buf + 128;
	CHK(device_gather(0, buf, 64, &e, 1, NULL) == -EIO);
	CHK(device_gather_ready(0) == 1);
	CHK(counter("cuModuleLoadData") == 2);
	t_gather_case(37, 1, 6, 8, NULL);

	CHK(t_device_reset() == 0);
	device_forget(0);
	CHK(device_gather_ready(0) == 1);
	CHK(counter("cuModuleLoadData") == 3);
	t_gather_case(37, 1, 6, 9, NULL);
}

static void test_reset(void)
{
	CU_ASSERT(child_ok(in_child(c_reset, NULL)));
}

/*
 * The bridge of the legacy stream: its first creation fails; the batch goes
 * as single copies (bytes right), and a later call makes the bridge.
 */
static void c_bridge_retry(void)
{
	enum { N = 4, LEN = 300 };
	unsigned char h[N * LEN], back[N * LEN];
	dev_ptr src, dst, dsts[N], srcs[N];
	uint64_t sizes[N];
	unsigned seed = 3;
	int calls = 0;

	t_open();
	CHK(device_mem_alloc(0, sizeof(h), &src) == 0 && device_mem_alloc(0, sizeof(h), &dst) == 0);
	for (int i = 0; i < N; i++) {
		srcs[i] = src + (uint64_t)i * LEN;
		dsts[i] = dst + (uint64_t)(N - 1 - i) * LEN;
		sizes[i] = LEN;
	}
	do {
		t_random(h, sizeof(h), &seed);
		CHK(t_htod(src, h, sizeof(h)) == CUDA_SUCCESS);
		CHK(device_copy_dtod_many(0, dsts, srcs, sizes, N, calls % 2 ? DEV_STREAM_LEGACY : NULL) == 0);
		CHK(t_sync(NULL) == CUDA_SUCCESS);
		CHK(t_dtoh(back, dst, sizeof(back)) == CUDA_SUCCESS);
		for (int i = 0; i < N; i++)
			CHK(memcmp(back + (N - 1 - i) * LEN, h + i * LEN, LEN) == 0);
		if (++calls == 1)
			CHK(counter("cuMemcpyBatchAsync_v2") == 0 && counter("cuMemcpyDtoDAsync_v2") == N);
	} while (counter("cuMemcpyBatchAsync_v2") == 0 && calls < 100);
	CHK(calls == 1 + 4 + 1);
	CHK(counter("cuStreamCreate") == 2);
	CHK(stats_get(ST_POOL_FAULTS) == 1);
}

static void test_bridge_retry(void)
{
	static const char *const env[] = { "FAKECUDA_FAIL", "cuStreamCreate#1", NULL };

	CU_ASSERT(child_ok(in_child(c_bridge_retry, env)));
}

static atomic_int t_done;

static void t_slow_done(void *arg)
{
	(void)arg;
	sleep_ms(20);
	atomic_store(&t_done, 1);
}

static void c_stream_sync(void)
{
	t_open();
	CHK(t_host_func(NULL, t_slow_done, NULL) == CUDA_SUCCESS);
	CHK(device_stream_sync(NULL) == 0);
	CHK(atomic_load(&t_done) == 1);
	CHK(stats_get(ST_POOL_FAULTS) == 0);
}

static void c_stream_sync_fails(void)
{
	t_open();
	CHK(device_stream_sync(NULL) == -EIO);
	CHK(stats_get(ST_POOL_FAULTS) == 1);
}

static void test_stream_sync(void)
{
	static const char *const env[] = { "FAKECUDA_FAIL", "cuStreamSynchronize", NULL };

	CU_ASSERT(child_ok(in_child(c_stream_sync, NULL)));
	CU_ASSERT(child_ok(in_child(c_stream_sync_fails, env)));
}

/*
 * One batched host-to-device call is one stream operation (each copy
 * counted as its own); it reads a pinned source when it runs (rewritten
 * behind a held stream: the new bytes land) and a pageable one during the
 * call (rewritten after it: the old bytes land), as the program's own
 * copies would; the legacy stream, which the call refuses, is reached
 * through the bridge, and without it the batch is refused, nothing
 * enqueued.
 */
static void c_h2d_batch(void)
{
	enum { N = 5, LEN = 333 };
	static unsigned char page[N * LEN];
	unsigned char *pin, want[N * LEN], back[N * LEN];
	dev_ptr dst, dsts[N], srcs[N];
	uint64_t sizes[N];
	CUstream s;

	t_open();
	CHK(t_stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	CHK(t_host_alloc((void **)&pin, N * LEN, 0) == CUDA_SUCCESS);
	CHK(device_mem_alloc(0, N * LEN, &dst) == 0);
	for (int pinned = 0; pinned < 2; pinned++) {
		unsigned char *src = pinned ? pin : page;
		unsigned long long ops = counter("ops_batch"), calls = counter("h2d_calls");

		for (int i = 0; i < N; i++) {
			memset(src + i * LEN, 0x10 + i, LEN);
			dsts[i] = dst + (uint64_t)(N - 1 - i) * LEN;    /* reversed */
			srcs[i] = (dev_ptr)(uintptr_t)(src + i * LEN);
			sizes[i] = LEN;
		}
		atomic_store(&gate, 0);
		CHK(t_host_func(s, hold_stream, NULL) == CUDA_SUCCESS);
		CHK(device_copy_h2d_many(0, dsts, srcs, sizes, N, pinned, s) == 0);
		CHK(counter("ops_batch") == ops + 1 && counter("h2d_calls") == calls + N);
		for (int i = 0; i < N; i++) {
			memset(want + (N - 1 - i) * LEN, pinned ? 0x20 + i : 0x10 + i, LEN);
			memset(src + i * LEN, 0x20 + i, LEN);   /* after the call, before the copy runs */
		}
		atomic_store(&gate, 1);
		CHK(t_sync(s) == CUDA_SUCCESS);
		CHK(t_dtoh(back, dst, sizeof(back)) == CUDA_SUCCESS);
		CHK(memcmp(back, want, sizeof(want)) == 0);
	}
	CHK(device_h2d_batch_ready() == 1);
	/* The legacy stream, which the call refuses, through the bridge: still one batch. */
	memset(page, 0x30, sizeof(page));
	for (int i = 0; i < N; i++)
		srcs[i] = (dev_ptr)(uintptr_t)(page + i * LEN);
	CHK(device_copy_h2d_many(0, dsts, srcs, sizes, N, 0, NULL) == 0);
	CHK(t_sync(NULL) == CUDA_SUCCESS && t_dtoh(back, dst, sizeof(back)) == CUDA_SUCCESS);
	CHK(back[0] == 0x30 && back[N * LEN - 1] == 0x30);
	CHK(counter("ops_batch") == 3 && counter("cuMemcpyBatchAsync_v2") == 3);
	CHK(stats_get(ST_DEVICE_OPS) == 2 + 1 + 4 && stats_get(ST_POOL_FAULTS) == 0);
}

/* Without the bridge the legacy stream's batch is refused, nothing enqueued. */
static void c_h2d_batch_no_bridge(void)
{
	unsigned char h[64] = { 0 };
	dev_ptr srcs[2] = { (dev_ptr)(uintptr_t)h, (dev_ptr)(uintptr_t)(h + 32) };
	uint64_t sizes[2] = { 32, 32 };
	dev_ptr dst, dsts[2];

	t_open();
	CHK(device_mem_alloc(0, 64, &dst) == 0);
	dsts[0] = dst;
	dsts[1] = dst + 32;
	CHK(device_copy_h2d_many(0, dsts, srcs, sizes, 2, 0, DEV_STREAM_LEGACY) == -ENOTSUP);
	CHK(counter("cuMemcpyBatchAsync_v2") == 0 && counter("h2d_calls") == 0 && counter("ops_batch") == 0);
}

static void test_h2d_batch(void)
{
	static const char *const no_bridge[] = { "FAKECUDA_FAIL", "cuStreamCreate", NULL };

	CU_ASSERT(child_ok(in_child(c_h2d_batch, NULL)));
	CU_ASSERT(child_ok(in_child(c_h2d_batch_no_bridge, no_bridge)));
}

/*
 * A stream is idle when an operation put on it now would wait for nothing:
 * its own work, and the implicit waits between the legacy stream and
 * blocking streams (the per-thread stream is one); non-blocking streams
 * wait for no other. Queries only: nothing is enqueued.
 */
static void c_stream_idle(void)
{
	dev_stream all[4] = { NULL, DEV_STREAM_LEGACY, DEV_STREAM_PER_THREAD, NULL };
	CUstream blocking, nonblocking;

	t_open();
	CHK(t_stream_create(&blocking, CU_STREAM_DEFAULT) == CUDA_SUCCESS);
	CHK(t_stream_create(&nonblocking, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	all[3] = nonblocking;
	for (int i = 0; i < 4; i++)
		CHK(device_stream_idle(0, all[i]) == 1);
	CHK(device_stream_idle(0, blocking) == 1);
	/* Work on a non-blocking stream holds only that stream. */
	atomic_store(&gate, 0);
	CHK(t_host_func(nonblocking, hold_stream, NULL) == CUDA_SUCCESS);
	CHK(device_stream_idle(0, nonblocking) == 0);
	CHK(device_stream_idle(0, NULL) == 1 && device_stream_idle(0, blocking) == 1);
	atomic_store(&gate, 1);
	CHK(t_sync(nonblocking) == CUDA_SUCCESS);
	/* A held blocking stream holds the legacy stream, not a non-blocking one.
	 * (Other blocking streams are asked through the legacy stream's query,
	 * which answers for it too: they may be called busy, never idle.) */
	atomic_store(&gate, 0);
	CHK(t_host_func(blocking, hold_stream, NULL) == CUDA_SUCCESS);
	CHK(device_stream_idle(0, blocking) == 0);
	CHK(device_stream_idle(0, NULL) == 0 && device_stream_idle(0, DEV_STREAM_LEGACY) == 0);
	CHK(device_stream_idle(0, nonblocking) == 1);
	atomic_store(&gate, 1);
	CHK(t_sync(blocking) == CUDA_SUCCESS);
	/* A held legacy stream holds every blocking stream. */
	atomic_store(&gate, 0);
	CHK(t_host_func(NULL, hold_stream, NULL) == CUDA_SUCCESS);
	CHK(device_stream_idle(0, NULL) == 0 && device_stream_idle(0, blocking) == 0);
	CHK(device_stream_idle(0, DEV_STREAM_PER_THREAD) == 0 && device_stream_idle(0, nonblocking) == 1);
	atomic_store(&gate, 1);
	CHK(t_sync(NULL) == CUDA_SUCCESS);
	for (int i = 0; i < 4; i++)
		CHK(device_stream_idle(0, all[i]) == 1);
	CHK(stats_get(ST_DEVICE_OPS) == 0 && stats_get(ST_POOL_FAULTS) == 0);
}

static void test_stream_idle(void)
{
	CU_ASSERT(child_ok(in_child(c_stream_idle, NULL)));
}

/*
 * A mapped table is written only when no launch reads it any more. With
 * the stream held, 16 gathers too large for the parameter take the 16
 * tables of the device; the next finds none (-EAGAIN, nothing enqueued).
 * Once the stream has run them, every byte of the 16 is right and the
 * tables are taken again, without new ones.
 */
static void c_tables_in_flight(void)
{
	enum { N = 1100, ROW = 3, K = 17 };
	static struct dev_gather_entry e[N];
	static unsigned char src[N * ROW], back[N * ROW];
	dev_ptr dst, slab;
	unsigned seed = 5;
	CUstream s;

	t_open();
	CHK(device_gather_ready(0) == 1);
	CHK(t_stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	CHK(device_mem_alloc(0, (uint64_t)K * N * ROW, &dst) == 0 && device_mem_alloc(0, N * ROW, &slab) == 0);
	t_random(src, sizeof(src), &seed);
	CHK(t_htod(slab, src, sizeof(src)) == CUDA_SUCCESS);
	atomic_store(&gate, 0);
	CHK(t_host_func(s, hold_stream, NULL) == CUDA_SUCCESS);
	for (int k = 0; k < K; k++) {
		for (uint32_t i = 0; i < N; i++)
			e[i] = (struct dev_gather_entry){ slab + (uint64_t)((i * 7 + (unsigned)k) % N) * ROW, i, 1 };
		CHK(device_gather(0, dst + (uint64_t)k * N * ROW, ROW, e, N, s) == (k < 16 ? 0 : -EAGAIN));
	}
	CHK(counter("cuMemHostAlloc") == 16);
	atomic_store(&gate, 1);
	CHK(t_sync(s) == CUDA_SUCCESS);
	for (int k = 0; k < 16; k++) {
		CHK(t_dtoh(back, dst + (uint64_t)k * N * ROW, sizeof(back)) == CUDA_SUCCESS);
		for (uint32_t i = 0; i < N; i++)
			CHK(memcmp(back + i * ROW, src + ((i * 7 + (unsigned)k) % N) * ROW, ROW) == 0);
	}
	CHK(device_gather(0, dst, ROW, e, N, s) == 0);
	CHK(t_sync(s) == CUDA_SUCCESS && counter("cuMemHostAlloc") == 16);
	CHK(counter("kernel_launches") - 2 == 17 && counter("kernel_faults") == 0);
}

static void test_tables_in_flight(void)
{
	CU_ASSERT(child_ok(in_child(c_tables_in_flight, NULL)));
}

/* ---- the driver's start-up (issue 17, item C) ------------------------------- */

/* In a child: makes the emulated driver's hooks global (for counter) without starting it. */
static void t_lib(void)
{
	CHK(dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) != NULL);
}

/* Whether the dump's reason for a dormant pool with a layout now contains want. */
static int t_reason_has(const char *want)
{
	char buf[256];
	const char *r;

	stats_reset(1, "3072");
	stats_set_state(POOL_DORMANT);
	r = report_reason(NULL, buf, sizeof(buf));
	return r && strstr(r, want) != NULL;
}

/* Calls device_open every 100 us until it answers 0 or the driver is given up (at most 8 s). */
static int t_open_until_settled(unsigned long *calls)
{
	uint64_t t0 = clock_now_ns();
	int tries, given_up = 0, err, r;

	*calls = 0;
	do {
		r = device_open();
		++*calls;
		if (r == 0 || (device_start_failed(&tries, &given_up, &err) && given_up))
			break;
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
	} while (clock_now_ns() - t0 < 8000000000ull);
	return r;
}

/* cuInit fails once: the next call past the back-off starts the driver; the reason blames no probe. */
static void c_start_fails_once(void)
{
	int tries = 0, given_up = 1, err = 0;
	unsigned long calls;

	t_lib();
	CHK(device_open() == -ENOSYS);
	CHK(counter("cuInit") == 1);
	CHK(device_start_failed(&tries, &given_up, &err));
	CHK(tries == 1 && !given_up && err == CUDA_ERROR_UNKNOWN);
	CHK(t_reason_has("the CUDA driver did not start: cuInit failed 1 time"));
	CHK(!t_reason_has("probe"));
	CHK(t_open_until_settled(&calls) == 0);
	CHK(counter("cuInit") == 2);
	CHK(!device_start_failed(&tries, &given_up, &err));
	CHK(!t_reason_has("driver"));
	CHK(device_open() == 0 && counter("cuInit") == 2);
}

/* cuInit fails every time: 12 tries, far fewer than the calls, then never again. */
static void c_start_always_fails(void)
{
	int tries = 0, given_up = 0, err = 0;
	unsigned long calls;

	t_lib();
	CHK(t_open_until_settled(&calls) == -ENOSYS);
	CHK(counter("cuInit") == 12);
	CHK(calls > 2 * 12);            /* most calls found the back-off running and tried nothing */
	CHK(device_start_failed(&tries, &given_up, &err) && tries == 12 && given_up);
	CHK(t_reason_has("cuInit failed 12 times"));
	CHK(!t_reason_has("tried again"));
	sleep_ms(50);
	CHK(device_open() == -ENOSYS && counter("cuInit") == 12);
}

/* No device: given up at once. */
static void c_start_no_device(void)
{
	int tries = 0, given_up = 0, err = 0;

	t_lib();
	CHK(device_open() == -ENOSYS);
	sleep_ms(5);
	CHK(device_open() == -ENOSYS);
	CHK(counter("cuInit") == 1);
	CHK(device_start_failed(&tries, &given_up, &err) && tries == 1 && given_up && err == CUDA_ERROR_NO_DEVICE);
}

static void test_start_is_retried(void)
{
	const char *once[] = { "FAKECUDA_FAIL", "cuInit#1", NULL };
	const char *always[] = { "FAKECUDA_FAIL", "cuInit", NULL };
	const char *none[] = { "FAKECUDA_DEVICES", "0", NULL };

	CU_ASSERT(child_ok(in_child(c_start_fails_once, once)));
	CU_ASSERT(child_ok(in_child(c_start_always_fails, always)));
	CU_ASSERT(child_ok(in_child(c_start_no_device, none)));
}

static const CU_TestInfo tests[] = {
	{ "the kernel source copies every alignment and length exactly, on simulated threads",
	  test_host_entry_alignments },
	{ "the kernel source moves hits and captures of whole launches on any device size",
	  test_host_params },
	{ "the grid is sized from the bytes and the multiprocessors, warps start where they should",
	  test_host_shape },
	{ "the self-test passes on a correct kernel, from memsets alone, once per context",
	  test_self_test_passes },
	{ "a kernel that corrupts a byte, a module that does not load, or a failing load "
	  "leaves batched copies for good",
	  test_self_test_fails_on_a_wrong_kernel },
	{ "a self-test whose launches always fail is retried with back-off, then given up",
	  test_launch_failure_is_retried_then_given_up },
	{ "a self-test that fails once (allocation, launch, readback) is retried and then used",
	  test_transient_self_test_failure_is_retried },
	{ "gathers of many row sizes and alignments, both directions, are exact byte for byte",
	  test_gather_alignments },
	{ "gathers run on the legacy and per-thread streams, in the legacy stream's order",
	  test_streams },
	{ "a failed launch returns -EIO and counts a fault", test_failed_launch },
	{ "after a device reset the kernel is loaded and tested again", test_reset },
	{ "a failed bridge creation is retried and its batches go one copy at a time meanwhile",
	  test_bridge_retry },
	{ "device_stream_sync waits for the stream and counts its failure", test_stream_sync },
	{ "one batched host-to-device call reads pinned sources in stream order, pageable ones at the call",
	  test_h2d_batch },
	{ "a stream is idle only when nothing it would wait for is queued", test_stream_idle },
	{ "mapped tables are reused only after the launches that read them ran", test_tables_in_flight },
	{ "a driver start-up that fails is retried with back-off, 12 times at most; no device is final",
	  test_start_is_retried },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "device",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
