/*
 * gather_check: the real-GPU check of the gather kernel (tests/gpu/check.sh
 * runs it; it cannot prove anything on the emulated device, which
 * implements the kernel by name).
 *
 * It loads the PTX embedded in the library exactly as the pool does
 * (shim/device/module.c: cuModuleLoadData in the primary context, then the
 * self-test), then compares the kernel with cuMemcpyDtoDAsync on random
 * work: two identical copies of a slab buffer and a destination buffer;
 * each round draws a row size (1 byte to 4 MiB, odd and even), a
 * destination offset, entries of 1..4 rows with random slab offsets and
 * directions, shuffled, and a stream (created, legacy, per-thread); the
 * kernel runs on one copy, one cuMemcpyDtoDAsync per entry on the other;
 * after every round both copies are read back whole and compared (up to
 * 3000 entries: tables inline and mapped, entries of one unit and of
 * many). Last, it times an all-hit gather of 147 KiB rows (aligned and
 * not) and of 3 KiB rows (one launch for every row of the buffer, its
 * table mapped) against one copy per row, for information.
 *
 * Prints "gather kernel: ok (N entries, M bytes)" and exits 0, or says what
 * differed and exits 1 (2: no GPU or no driver).
 *
 * Usage: gather_check [ROUNDS] [SEED]
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/device.h"
#include "core/log.h"
#include "core/stats.h"

extern const char vrampool_gather_ptx[] __attribute__((visibility("hidden")));

#define HALF (48ULL << 20)      /* bytes of each buffer */
#define MAX_ENTRIES 3000

static __typeof__(cuDevicePrimaryCtxRetain) *g_retain;
static __typeof__(cuCtxSetCurrent) *g_setctx;
static __typeof__(cuMemcpyHtoD_v2) *g_htod;
static __typeof__(cuMemcpyDtoH_v2) *g_dtoh;
static __typeof__(cuMemcpyDtoD_v2) *g_dtod;
static __typeof__(cuMemcpyDtoDAsync_v2) *g_dtod_async;
static __typeof__(cuStreamCreate) *g_stream_create;
static __typeof__(cuStreamSynchronize) *g_sync;
static __typeof__(cuCtxSynchronize) *g_ctx_sync;

static uint64_t g_seed = 88172645463325252ULL;

static uint64_t rnd(void)
{
	g_seed ^= g_seed << 13;
	g_seed ^= g_seed >> 7;
	g_seed ^= g_seed << 17;
	return g_seed;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int open_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CUcontext ctx;

	if (!h)
		return -1;
	*(void **)&g_retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&g_setctx = dlsym(h, "cuCtxSetCurrent");
	*(void **)&g_htod = dlsym(h, "cuMemcpyHtoD_v2");
	*(void **)&g_dtoh = dlsym(h, "cuMemcpyDtoH_v2");
	*(void **)&g_dtod = dlsym(h, "cuMemcpyDtoD_v2");
	*(void **)&g_dtod_async = dlsym(h, "cuMemcpyDtoDAsync_v2");
	*(void **)&g_stream_create = dlsym(h, "cuStreamCreate");
	*(void **)&g_sync = dlsym(h, "cuStreamSynchronize");
	*(void **)&g_ctx_sync = dlsym(h, "cuCtxSynchronize");
	if (!g_retain || !g_setctx || !g_htod || !g_dtoh || !g_dtod || !g_dtod_async || !g_stream_create ||
	    !g_sync || !g_ctx_sync)
		return -1;
	if (device_open())
		return -1;
	if (g_retain(&ctx, 0) != CUDA_SUCCESS || g_setctx(ctx) != CUDA_SUCCESS)
		return -1;
	return 0;
}

/* Draws a row size: small and odd ones often, large ones sometimes. */
static uint64_t draw_row(void)
{
	static const uint64_t rows[] = { 1, 2, 3, 4, 5, 7, 8, 12, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 256,
					 1000, 1029, 3072, 4099, 12288, 150528, 150529, 150531, 1048576 + 5,
					 4194304 };

	return rows[rnd() % (sizeof(rows) / sizeof(rows[0]))];
}

/* Reports the first differing byte of two host images, or returns 0. */
static int compare(const unsigned char *a, const unsigned char *b, const char *what, int round)
{
	if (memcmp(a, b, HALF) == 0)
		return 0;
	for (uint64_t i = 0; i < HALF; i++) {
		if (a[i] != b[i]) {
			printf("gather kernel: DIFFERS in round %d: %s byte %llu is 0x%02x, cuMemcpyDtoD gives 0x%02x\n",
			       round, what, (unsigned long long)i, a[i], b[i]);
			break;
		}
	}
	return 1;
}

/*
 * One round: entries over (slab k, dst k) for the kernel and the same over
 * (slab r, dst r) as single copies. Returns 0, 1 (differs) or -1 (a call failed).
 */
static int round_once(int round, dev_ptr ks, dev_ptr kd, dev_ptr rs, dev_ptr rd, dev_stream s,
		      struct dev_gather_entry *e, unsigned char *ha, unsigned char *hb, uint64_t *entries,
		      uint64_t *bytes)
{
	uint64_t row = draw_row(), doff = rnd() % 256, next = 0, slab_at = 0, n, total = 0;

	n = 1 + rnd() % (row > 65536 ? 8 : row > 1024 ? 200 : MAX_ENTRIES);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t nr = 1 + rnd() % 4, at = ((slab_at + 15) & ~15ULL) + rnd() % 16;

		if (doff + (next + nr) * row > HALF || at + nr * row > HALF) {
			n = i;
			break;
		}
		e[i].slab = at;
		e[i].dst_row = (uint32_t)next;
		e[i].nrows_dir = (uint32_t)nr | (rnd() % 2 ? DEV_GATHER_CAPTURE : 0);
		slab_at = at + nr * row;
		next += nr;
		total += nr * row;
	}
	if (n == 0)
		return 0;
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = rnd() % (i + 1);
		struct dev_gather_entry t = e[i];

		e[i] = e[j];
		e[j] = t;
	}
	/* The reference: one copy per entry on the other pair. */
	for (uint64_t i = 0; i < n; i++) {
		uint64_t len = (e[i].nrows_dir & ~DEV_GATHER_CAPTURE) * row;
		dev_ptr slab = rs + e[i].slab, dst = rd + doff + e[i].dst_row * row;
		CUresult r = e[i].nrows_dir & DEV_GATHER_CAPTURE ? g_dtod_async(slab, dst, len, (CUstream)s)
								 : g_dtod_async(dst, slab, len, (CUstream)s);

		if (r != CUDA_SUCCESS) {
			printf("gather kernel: cuMemcpyDtoDAsync failed (%d) in round %d\n", (int)r, round);
			return -1;
		}
	}
	for (uint64_t i = 0; i < n; i++)
		e[i].slab += ks;
	if (device_gather(0, kd + doff, row, e, (uint32_t)n, s)) {
		printf("gather kernel: device_gather failed in round %d (row %llu, %llu entries)\n", round,
		       (unsigned long long)row, (unsigned long long)n);
		return -1;
	}
	if (g_ctx_sync() != CUDA_SUCCESS) {
		printf("gather kernel: the device failed in round %d (row %llu, %llu entries)\n", round,
		       (unsigned long long)row, (unsigned long long)n);
		return -1;
	}
	if (g_dtoh(ha, kd, HALF) != CUDA_SUCCESS || g_dtoh(hb, rd, HALF) != CUDA_SUCCESS)
		return -1;
	if (compare(ha, hb, "destination", round))
		goto differs;
	if (g_dtoh(ha, ks, HALF) != CUDA_SUCCESS || g_dtoh(hb, rs, HALF) != CUDA_SUCCESS)
		return -1;
	if (compare(ha, hb, "slab", round))
		goto differs;
	*entries += n;
	*bytes += total;
	return 0;
differs:
	printf("gather kernel: round %d had row %llu, destination offset %llu, %llu entries\n", round,
	       (unsigned long long)row, (unsigned long long)doff, (unsigned long long)n);
	return 1;
}

/* Times one all-hit gather of rows of row bytes against one copy per row (information only). */
static void timing(dev_ptr slab, dev_ptr dst, uint64_t row, uint64_t slab_shift, CUstream s)
{
	uint32_t n = (uint32_t)((HALF - 64) / row);
	struct dev_gather_entry *e = calloc(n, sizeof(*e));
	double t0, t1, t2;

	if (!e)
		return;
	for (uint32_t i = 0; i < n; i++)
		e[i] = (struct dev_gather_entry){ slab + slab_shift + (uint64_t)((i * 7919u) % n) * row, i, 1 };
	device_gather(0, dst, row, e, n, s);    /* warm */
	g_sync(s);
	t0 = now();
	for (int k = 0; k < 10; k++)
		device_gather(0, dst, row, e, n, s);
	g_sync(s);
	t1 = now();
	for (int k = 0; k < 10; k++)
		for (uint32_t i = 0; i < n; i++)
			g_dtod_async(dst + (uint64_t)i * row, e[i].slab, row, s);
	g_sync(s);
	t2 = now();
	printf("gather kernel: %u rows of %llu bytes (slab +%llu): kernel %.1f GB/s, one cuMemcpyDtoDAsync per row "
	       "%.1f GB/s\n", n, (unsigned long long)row, (unsigned long long)slab_shift,
	       10.0 * n * row / (t1 - t0) / 1e9, 10.0 * n * row / (t2 - t1) / 1e9);
	free(e);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 300;
	unsigned char *ha = malloc(HALF), *hb = malloc(HALF);
	struct dev_gather_entry *e = malloc(MAX_ENTRIES * sizeof(*e));
	dev_stream streams[3] = { NULL, NULL, DEV_STREAM_PER_THREAD };
	uint64_t entries = 0, bytes = 0;
	dev_ptr ks, kd, rs, rd;
	const char *v;
	CUstream s;
	int err = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);       /* in order with the shim's lines on stderr */
	if (argc > 2)
		g_seed = strtoull(argv[2], NULL, 0) | 1;
	log_set_verbose(1);
	stats_reset(1, "");
	if (!ha || !hb || !e)
		return 2;
	if (open_driver()) {
		printf("gather kernel: no CUDA driver or device here\n");
		return 2;
	}
	v = strstr(vrampool_gather_ptx, "\n.version ");
	printf("gather kernel: embedded PTX %.12s, %zu bytes\n", v ? v + 1 : "(no .version)",
	       strlen(vrampool_gather_ptx));
	if (!device_gather_ready(0)) {
		printf("gather kernel: FAILED its load or self-test (the line above says why)\n");
		return 1;
	}
	printf("gather kernel: loaded, self-test passed\n");
	if (g_stream_create(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
		return 2;
	streams[1] = (dev_stream)s;
	if (device_mem_alloc(0, HALF, &ks) || device_mem_alloc(0, HALF, &kd) || device_mem_alloc(0, HALF, &rs) ||
	    device_mem_alloc(0, HALF, &rd)) {
		printf("gather kernel: cannot allocate 4 x %llu bytes\n", (unsigned long long)HALF);
		return 2;
	}
	for (uint64_t i = 0; i < HALF; i++) {
		ha[i] = (unsigned char)rnd();
		hb[i] = (unsigned char)rnd();
	}
	if (g_htod(ks, ha, HALF) || g_htod(rs, ha, HALF) || g_htod(kd, hb, HALF) || g_htod(rd, hb, HALF))
		return 2;
	for (int r = 0; r < rounds && !err; r++)
		err = round_once(r, ks, kd, rs, rd, streams[r % 3], e, ha, hb, &entries, &bytes);
	if (err) {
		if (err < 0)
			printf("gather kernel: a driver call failed; no verdict\n");
		return err < 0 ? 2 : 1;
	}
	timing(ks, kd, 150528, 0, s);
	timing(ks, kd, 150528, 1, s);
	timing(ks, kd, 3072, 0, s);
	printf("gather kernel: ok (%llu entries, %llu bytes)\n", (unsigned long long)entries,
	       (unsigned long long)bytes);
	return 0;
}
