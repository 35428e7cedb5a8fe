/*
 * kernel.c: proves the emulated device's one kernel, vrampool_gather,
 * behaves as shim/device/device.h documents it: module loading by PTX text, both
 * directions at any alignment, stream order (legacy stream included) and
 * capture like a copy, parameters copied at call time, counters, and a loud
 * refusal of any launch that would touch memory outside its allocations.
 * Built against the real toolkit and run with LD_LIBRARY_PATH=build/fakecuda.
 *
 * Each case runs in a fork()ed child with its own FAKECUDA_* settings; the
 * child exits with (the low byte of) the line of the first failed check.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* The kernel's parameter, as shim/device/device.h lays it out. */
#define CAPTURE 0x80000000u
#define UNIT 2048
#define INLINE 16384
#define GMAX (INLINE / 16)

struct gentry {
	uint64_t slab;
	uint32_t dst_row;
	uint32_t nrows_dir;
};

struct gstart {
	uint32_t entry;
	uint32_t unit;
};

struct gparams {
	uint64_t dst;
	uint64_t row;
	uint64_t table;
	uint64_t units;
	uint32_t count;
	uint32_t per_warp;
	uint32_t warps;
	uint32_t pad;
	union {
		struct gentry e[GMAX];
		unsigned char bytes[INLINE];
	};
};

/* What nvcc -ptx writes for the kernel, trimmed: the emulation reads only
 * the entry directive. */
static const char ptx[] =
	".version 8.1\n.target sm_75\n.address_size 64\n\n"
	".visible .entry vrampool_gather(\n"
	"\t.param .align 8 .b8 vrampool_gather_param_0[16432]\n)\n{\n\tret;\n}\n";

static struct gparams prm;

/* Binds the primary context (through the runtime) and loads the kernel. */
static CUfunction load_gather(void)
{
	CUmodule m;
	CUfunction f;

	CHK(cudaFree(0) == cudaSuccess);
	CHK(cuInit(0) == CUDA_SUCCESS);
	CHK(cuModuleLoadData(&m, ptx) == CUDA_SUCCESS);
	CHK(cuModuleGetFunction(&f, m, "vrampool_gather") == CUDA_SUCCESS);
	return f;
}

/* The units of an entry, as the kernel counts them: one when empty. */
static uint64_t units_of(const struct gentry *e, uint64_t row)
{
	uint64_t len = (e->nrows_dir & ~CAPTURE) * row;

	return len ? (len + UNIT - 1) / UNIT : 1;
}

/*
 * Shapes prm for its count entries in table t (prm's own inline table when
 * t is NULL) with per_warp units a warp: the units, and the warps' starts
 * after the entries when an entry has several units. Returns the warps.
 */
static uint64_t shape(unsigned char *t, uint32_t per_warp)
{
	struct gentry *e = (struct gentry *)(void *)(t ? t : prm.bytes);
	struct gstart *st = (struct gstart *)(void *)((unsigned char *)e + prm.count * sizeof(*e));
	uint64_t units = 0, first = 0, w = 0, working;
	int one_each = 1;

	for (uint32_t i = 0; i < prm.count; i++) {
		units += units_of(&e[i], prm.row);
		one_each &= units_of(&e[i], prm.row) == 1;
	}
	working = (units + per_warp - 1) / per_warp;
	prm.units = units;
	prm.per_warp = per_warp;
	prm.warps = one_each ? 0 : (uint32_t)working;
	prm.table = (uint64_t)(uintptr_t)t;
	for (uint32_t i = 0; i < prm.count && w < prm.warps; i++) {
		uint64_t u = units_of(&e[i], prm.row);

		for (; w < prm.warps && w * per_warp < first + u; w++) {
			if (!t && (uint64_t)prm.count * sizeof(*e) + (w + 1) * sizeof(*st) > INLINE)
				return working;         /* does not fit: left to the launch to fault */
			st[w] = (struct gstart){ i, (uint32_t)(w * per_warp - first) };
		}
		first += u;
	}
	return working;
}

/* Launches prm (one unit a warp) on a 1-D grid that covers its warps. */
static CUresult launch(CUfunction f, CUstream s)
{
	void *args[] = { &prm };
	uint64_t warps = shape(NULL, 1);

	return cuLaunchKernel(f, (unsigned)((warps + 7) / 8), 1, 1, 256, 1, 1, 0, s, args, NULL);
}

static void entry(uint32_t i, const void *slab, uint32_t dst_row, uint32_t nrows, int capture)
{
	prm.e[i].slab = (uint64_t)(uintptr_t)slab;
	prm.e[i].dst_row = dst_row;
	prm.e[i].nrows_dir = nrows | (capture ? CAPTURE : 0);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}

/* ---- both directions, odd alignments, several entries ---- */

#define ROW 13
#define NR 40

/*
 * One launch of four entries on 13-byte rows at odd addresses: two hits
 * (slab -> destination rows), two captures (destination rows -> slab), one
 * empty entry; then 1024 single-row hits in reverse order. The host
 * computes the expected bytes. The parameters are overwritten right after
 * each launch, before the jittered worker runs it.
 */
static void child_directions(void)
{
	static unsigned char hd[NR * ROW], hs[NR * ROW + 64], wd[NR * ROW], ws[NR * ROW + 64];
	static unsigned char back[NR * ROW + 64];
	unsigned char *dbase, *sbase, *dst, *slab;
	CUfunction f = load_gather();
	cudaStream_t s;
	int i;

	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaMalloc((void **)&dbase, 5 + NR * ROW) == cudaSuccess);
	CHK(cudaMalloc((void **)&sbase, 7 + NR * ROW + 64) == cudaSuccess);
	dst = dbase + 5;
	slab = sbase + 7;
	fill(hd, sizeof(hd), 1);
	fill(hs, sizeof(hs), 2);
	CHK(cudaMemcpy(dst, hd, sizeof(hd), cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cudaMemcpy(slab, hs, sizeof(hs), cudaMemcpyHostToDevice) == cudaSuccess);
	memcpy(wd, hd, sizeof(hd));
	memcpy(ws, hs, sizeof(hs));

	prm.dst = (uint64_t)(uintptr_t)dst;
	prm.row = ROW;
	prm.count = 5;
	entry(0, slab, 0, 3, 0);                    /* hit: slab rows 0..2 -> rows 0..2 */
	memcpy(wd, ws, 3 * ROW);
	entry(1, slab + 20 * ROW, 10, 4, 1);        /* capture: rows 10..13 -> slab rows 20..23 */
	memcpy(ws + 20 * ROW, wd + 10 * ROW, 4 * ROW);
	entry(2, slab + 5 * ROW + 1, 30, 1, 0);     /* hit from an odd slab offset */
	memcpy(wd + 30 * ROW, ws + 5 * ROW + 1, ROW);
	entry(3, slab + 30 * ROW + 3, 35, 5, 1);    /* capture to an odd slab offset */
	memcpy(ws + 30 * ROW + 3, wd + 35 * ROW, 5 * ROW);
	entry(4, slab, 39, 0, 0);                   /* empty: moves nothing */
	CHK(launch(f, s) == CUDA_SUCCESS);
	memset(&prm, 0xA5, sizeof(prm));            /* the caller reuses its memory at once */
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy(back, dst, sizeof(hd), cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(back, wd, sizeof(hd)) == 0);
	CHK(cudaMemcpy(back, slab, sizeof(hs), cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(back, ws, sizeof(hs)) == 0);
	CHK(counter("kernel_launches") == 1 && counter("kernel_bytes") == 13 * ROW);
	CHK(counter("d2d_calls") == 1 && counter("d2d_bytes") == 13 * ROW);
	CHK(counter("d2d_ns") > 0);     /* the gather's time on the worker */
	CHK(counter("h2d_calls") == 2 && counter("kernel_faults") == 0);

	/* The most entries a launch takes: 3-byte rows, reversed. */
	prm.row = 3;
	prm.count = GMAX;
	CHK(cudaFree(dbase) == cudaSuccess && cudaFree(sbase) == cudaSuccess);
	CHK(cudaMalloc((void **)&dbase, 3 * GMAX) == cudaSuccess);
	CHK(cudaMalloc((void **)&sbase, 3 * GMAX + 1) == cudaSuccess);
	prm.dst = (uint64_t)(uintptr_t)dbase;
	for (i = 0; i < GMAX; i++)
		entry((uint32_t)i, sbase + 1 + 3 * (GMAX - 1 - i), (uint32_t)i, 1, 0);
	{
		static unsigned char src[3 * GMAX + 1], out[3 * GMAX];

		fill(src, sizeof(src), 3);
		CHK(cudaMemcpy(sbase, src, sizeof(src), cudaMemcpyHostToDevice) == cudaSuccess);
		CHK(launch(f, s) == CUDA_SUCCESS);
		CHK(cudaMemcpyAsync(out, dbase, sizeof(out), cudaMemcpyDeviceToHost, s) == cudaSuccess);
		CHK(cudaStreamSynchronize(s) == cudaSuccess);
		for (i = 0; i < GMAX; i++)
			CHK(memcmp(out + 3 * i, src + 1 + 3 * (GMAX - 1 - i), 3) == 0);
	}
	CHK(counter("kernel_launches") == 2 && counter("kernel_bytes") == 13 * ROW + 3 * GMAX);
	CHK(counter("cuLaunchKernel") == 2);
}

static void test_directions(void)
{
	const char *env[] = { "FAKECUDA_JITTER_US", "2000", NULL };

	CU_ASSERT(child_ok(in_child(child_directions, env)));
}

/* ---- stream order: the legacy stream, a nonblocking stream ---- */

static int nonblocking;

/*
 * A copy into destination rows waits on another stream behind a held host
 * function; a capture launched on the legacy stream must wait for it when
 * that stream is blocking (the slab gets the delivered bytes), and must
 * not when it is nonblocking (the launch completes while the copy is held,
 * so the slab gets the old bytes).
 */
static void child_legacy_order(void)
{
	unsigned char *pin, back[4 * ROW], old[4 * ROW];
	unsigned char *dst, *slab;
	CUfunction f = load_gather();
	cudaStream_t s1;

	CHK(cudaStreamCreateWithFlags(&s1, nonblocking ? cudaStreamNonBlocking : 0) == cudaSuccess);
	CHK(cudaMallocHost((void **)&pin, 4 * ROW) == cudaSuccess);
	CHK(cudaMalloc((void **)&dst, 4 * ROW) == cudaSuccess);
	CHK(cudaMalloc((void **)&slab, 4 * ROW) == cudaSuccess);
	CHK(cudaMemset(dst, 0x11, 4 * ROW) == cudaSuccess);
	CHK(cudaMemset(slab, 0, 4 * ROW) == cudaSuccess);
	memset(old, 0x11, sizeof(old));
	fill(pin, 4 * ROW, 9);
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(s1, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpyAsync(dst, pin, 4 * ROW, cudaMemcpyHostToDevice, s1) == cudaSuccess);
	prm.dst = (uint64_t)(uintptr_t)dst;
	prm.row = ROW;
	prm.count = 1;
	entry(0, slab, 0, 4, 1);
	CHK(launch(f, 0) == CUDA_SUCCESS);
	if (nonblocking) {
		CHK(cuStreamSynchronize(0) == CUDA_SUCCESS); /* does not wait for s1 */
		CHK(cudaMemcpy(back, slab, sizeof(back), cudaMemcpyDeviceToHost) == cudaSuccess);
		CHK(memcmp(back, old, sizeof(back)) == 0);
		atomic_store(&gate, 1);
		CHK(cudaStreamSynchronize(s1) == cudaSuccess);
		return;
	}
	sleep_ms(20);
	CHK(cuStreamQuery(0) == CUDA_ERROR_NOT_READY);
	atomic_store(&gate, 1);
	CHK(cuStreamSynchronize(0) == CUDA_SUCCESS);
	CHK(cudaMemcpy(back, slab, sizeof(back), cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(back, pin, sizeof(back)) == 0);
}

static void test_legacy_order(void)
{
	nonblocking = 0;
	CU_ASSERT(child_ok(in_child(child_legacy_order, NULL)));
	nonblocking = 1;
	CU_ASSERT(child_ok(in_child(child_legacy_order, NULL)));
}

/* ---- capture of a just-delivered row; stream capture into a graph ---- */

/*
 * Twenty trials under jitter: a pageable upload into one destination row,
 * then a capture of that row on the same stream; the slab must hold the
 * uploaded bytes every time. Then the same two operations under stream
 * capture become a copy node and a kernel node, counted at replay, and a
 * replay reads the pinned source of its time.
 */
static void child_capture_fresh_row(void)
{
	unsigned char up[ROW], back[ROW], *pin, *dst, *slab;
	CUfunction f = load_gather();
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;
	cudaGraphNode_t nodes[2];
	enum cudaGraphNodeType t0, t1;
	size_t nn = 2;
	int trial;

	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaMalloc((void **)&dst, 8 * ROW) == cudaSuccess);
	CHK(cudaMalloc((void **)&slab, ROW) == cudaSuccess);
	prm.dst = (uint64_t)(uintptr_t)dst;
	prm.row = ROW;
	prm.count = 1;
	for (trial = 1; trial <= 20; trial++) {
		memset(up, trial, sizeof(up));
		entry(0, slab, (uint32_t)(trial % 8), 1, 1);
		CHK(cudaMemcpyAsync(dst + (trial % 8) * ROW, up, ROW, cudaMemcpyHostToDevice, s) == cudaSuccess);
		CHK(launch(f, s) == CUDA_SUCCESS);
		CHK(cudaMemcpyAsync(back, slab, ROW, cudaMemcpyDeviceToHost, s) == cudaSuccess);
		CHK(cudaStreamSynchronize(s) == cudaSuccess);
		CHK(memcmp(back, up, ROW) == 0);
	}
	CHK(counter("kernel_launches") == 20);

	CHK(cudaMallocHost((void **)&pin, ROW) == cudaSuccess);
	memset(pin, 0x77, ROW);
	entry(0, slab, 3, 1, 1);
	CHK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
	CHK(cudaMemcpyAsync(dst + 3 * ROW, pin, ROW, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(launch(f, s) == CUDA_SUCCESS);
	memset(&prm, 0, sizeof(prm)); /* captured at call time too */
	CHK(cudaStreamEndCapture(s, &g) == cudaSuccess);
	CHK(counter("kernel_launches") == 20 && counter("graph_nodes_captured") == 2);
	CHK(cudaGraphGetNodes(g, nodes, &nn) == cudaSuccess && nn == 2);
	CHK(cudaGraphNodeGetType(nodes[0], &t0) == cudaSuccess && t0 == cudaGraphNodeTypeMemcpy);
	CHK(cudaGraphNodeGetType(nodes[1], &t1) == cudaSuccess && t1 == cudaGraphNodeTypeKernel);
	CHK(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
	CHK(cudaGraphDestroy(g) == cudaSuccess); /* the executable keeps its own */
	memset(pin, 0x78, ROW);
	CHK(cudaGraphLaunch(x, s) == cudaSuccess);
	CHK(cudaMemcpyAsync(back, slab, ROW, cudaMemcpyDeviceToHost, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(back[0] == 0x78 && back[ROW - 1] == 0x78);
	CHK(counter("kernel_launches") == 21 && counter("kernel_bytes") == 21 * ROW);
	memset(pin, 0x79, ROW);
	CHK(cudaGraphLaunch(x, s) == cudaSuccess);
	CHK(cudaMemcpy(back, slab, ROW, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(back[0] == 0x79 && counter("kernel_launches") == 22);
	CHK(cudaGraphExecDestroy(x) == cudaSuccess);
}

static void test_capture_fresh_row(void)
{
	const char *env[] = { "FAKECUDA_JITTER_US", "500", NULL };

	CU_ASSERT(child_ok(in_child(child_capture_fresh_row, env)));
}

/* ---- FAKECUDA_KERNEL=broken and =none ---- */

/* A broken kernel gets exactly one byte wrong, in the last row it writes. */
static void child_broken(void)
{
	unsigned char src[6 * ROW], back[6 * ROW], *dst, *slab;
	CUfunction f = load_gather();
	int i, wrong = 0, where = -1;

	CHK(cudaMalloc((void **)&dst, 6 * ROW) == cudaSuccess);
	CHK(cudaMalloc((void **)&slab, 6 * ROW) == cudaSuccess);
	CHK(cudaMemset(dst, 0, 6 * ROW) == cudaSuccess);
	fill(src, sizeof(src), 5);
	CHK(cudaMemcpy(slab, src, sizeof(src), cudaMemcpyHostToDevice) == cudaSuccess);
	prm.dst = (uint64_t)(uintptr_t)dst;
	prm.row = ROW;
	prm.count = 2;
	entry(0, slab, 0, 3, 0);
	entry(1, slab + 3 * ROW, 3, 3, 0);
	CHK(launch(f, 0) == CUDA_SUCCESS);
	CHK(cudaMemcpy(back, dst, sizeof(back), cudaMemcpyDeviceToHost) == cudaSuccess);
	for (i = 0; i < 6 * ROW; i++) {
		if (back[i] != src[i]) {
			wrong++;
			where = i;
		}
	}
	CHK(wrong == 1 && where >= 5 * ROW);
}

static void test_broken(void)
{
	const char *env[] = { "FAKECUDA_KERNEL", "broken", NULL };

	CU_ASSERT(child_ok(in_child(child_broken, env)));
}

static void child_none(void)
{
	CUmodule m;

	CHK(cudaFree(0) == cudaSuccess);
	CHK(cuInit(0) == CUDA_SUCCESS);
	CHK(cuModuleLoadData(&m, ptx) == CUDA_ERROR_NO_BINARY_FOR_GPU);
	CHK(cuModuleLoadDataEx(&m, ptx, 0, NULL, NULL) == CUDA_ERROR_NO_BINARY_FOR_GPU);
	CHK(cudaGetLastError() == cudaSuccess);
}

static void test_none(void)
{
	const char *env[] = { "FAKECUDA_KERNEL", "none", NULL };

	CU_ASSERT(child_ok(in_child(child_none, env)));
}

/* ---- refusals ---- */

/* Reads back what this process wrote on stderr since it was redirected. */
static int count_lines(int fd, const char *prefix)
{
	char buf[16384], *p;
	ssize_t n;
	int lines = 0;

	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	for (p = buf; (p = strstr(p, prefix)); p++)
		lines++;
	return lines;
}

/*
 * What a driver checks is refused at the call with CUDA_ERROR_INVALID_VALUE
 * (no parameters, an impossible grid or block, too much shared memory),
 * one line on stderr each, counted in kernel_faults, nothing enqueued.
 */
static void child_refusals(void)
{
	char path[] = "/tmp/fakecuda-kernel-XXXXXX";
	unsigned char *dst, *slab;
	CUfunction f = load_gather();
	void *args[] = { &prm };
	int fd = mkstemp(path), saved = dup(2);

	CHK(fd >= 0 && saved >= 0);
	unlink(path);
	CHK(cudaMalloc((void **)&dst, 10 * ROW) == cudaSuccess);
	CHK(cudaMalloc((void **)&slab, 10 * ROW) == cudaSuccess);
	prm.dst = (uint64_t)(uintptr_t)dst;
	prm.row = ROW;
	prm.count = 1;
	entry(0, slab, 0, 10, 0);
	shape(NULL, 1);
	dup2(fd, 2);
	CHK(cuLaunchKernel(f, 0, 1, 1, 128, 1, 1, 0, 0, args, NULL) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, 0, args, NULL) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, 0, NULL, NULL) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 64 * 1024, 0, args, NULL) == CUDA_ERROR_INVALID_VALUE);
	dup2(saved, 2);
	CHK(counter("kernel_faults") == 4 && count_lines(fd, "fakecuda: vrampool_gather launch refused") == 4);
	CHK(counter("kernel_launches") == 0 && counter("ops_kernel") == 0);
	/* The same parameters on a valid grid run. */
	CHK(launch(f, 0) == CUDA_SUCCESS);
	CHK(cuCtxSynchronize() == CUDA_SUCCESS);
	CHK(counter("kernel_launches") == 1 && counter("kernel_bytes") == 10 * ROW);
}

static void test_refusals(void)
{
	CU_ASSERT(child_ok(in_child(child_refusals, NULL)));
}

/*
 * What the kernel itself would trip on is found when the launch runs, as
 * on a device: the launch call succeeds, then the worker says why on
 * stderr, counts a kernel fault and moves nothing. Bytes outside one
 * allocation of the device, entries against the no-overlap contract,
 * nonsense counts, units or warp starts that do not match the entries, a
 * grid too small for the warps, a table outside mapped page-locked memory.
 */
static void child_faults(void)
{
	char path[] = "/tmp/fakecuda-kernel-XXXXXX";
	unsigned char *dst, *slab, *other, *pin, page[64], zero[10 * ROW] = { 0 }, back[10 * ROW];
	CUfunction f = load_gather();
	void *args[] = { &prm };
	int fd = mkstemp(path), saved = dup(2), faults = 0;

	CHK(fd >= 0 && saved >= 0);
	unlink(path);
	CHK(cudaMalloc((void **)&dst, 10 * ROW) == cudaSuccess);
	CHK(cudaMalloc((void **)&slab, 10 * ROW) == cudaSuccess);
	CHK(cudaMemset(dst, 0, 10 * ROW) == cudaSuccess && cudaMemset(slab, 0x33, 10 * ROW) == cudaSuccess);
	CHK(cudaMallocHost((void **)&pin, 4096) == cudaSuccess);
	CHK(cudaSetDevice(1) == cudaSuccess);
	CHK(cudaMalloc((void **)&other, 10 * ROW) == cudaSuccess);
	CHK(cudaSetDevice(0) == cudaSuccess);
	dup2(fd, 2);
#define FAULTS(call) do { CHK((call) == CUDA_SUCCESS); CHK(cuCtxSynchronize() == CUDA_SUCCESS); \
	CHK(counter("kernel_faults") == (unsigned long long)++faults); } while (0)
	prm.dst = (uint64_t)(uintptr_t)dst;
	prm.row = ROW;
	prm.count = 1;
	entry(0, slab + 1, 0, 10, 0);        /* slab range one byte past its allocation */
	FAULTS(launch(f, 0));
	entry(0, slab, 1, 10, 1);            /* destination rows past the allocation */
	FAULTS(launch(f, 0));
	entry(0, other, 0, 1, 0);            /* memory of another device */
	FAULTS(launch(f, 0));
	entry(0, page, 0, 1, 0);             /* host memory */
	FAULTS(launch(f, 0));
	prm.row = 1ULL << 40;
	entry(0, slab, 0, 0x7fffffffu, 0);   /* rows whose bytes overflow 64 bits */
	prm.units = 1;
	prm.per_warp = 1;
	prm.warps = 0;
	FAULTS(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, args, NULL));
	prm.row = ROW;
	prm.count = 2;
	entry(0, slab, 0, 2, 0);
	entry(1, slab + 2 * ROW, 1, 2, 0);   /* two hits write row 1 */
	FAULTS(launch(f, 0));
	entry(1, slab + ROW, 5, 1, 1);       /* a capture writes slab bytes a hit reads */
	FAULTS(launch(f, 0));
	entry(1, slab + 5 * ROW, 1, 1, 1);   /* a capture reads a row a hit writes */
	FAULTS(launch(f, 0));
	entry(0, dst + 4 * ROW, 0, 1, 0);    /* a hit reading a row another hit writes */
	entry(1, slab, 4, 1, 0);
	FAULTS(launch(f, 0));
	entry(0, slab, 0, 1, 0);
	entry(1, slab + ROW, 1, 1, 0);       /* a valid pair, and what breaks it: */
	shape(NULL, 1);
	prm.count = 0;                       /* no entry */
	FAULTS(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, args, NULL));
	prm.count = 2;
	prm.row = 0;                         /* rows of nothing */
	FAULTS(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, args, NULL));
	prm.row = ROW;
	prm.units = 3;                       /* units the entries do not make */
	FAULTS(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, args, NULL));
	prm.units = 2;
	FAULTS(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, args, NULL));        /* one warp for two */
	FAULTS(cuLaunchKernel(f, 1, 2, 1, 64, 1, 1, 0, 0, args, NULL));        /* not a 1-D grid */
	prm.table = (uint64_t)(uintptr_t)page;                                  /* a pageable table */
	FAULTS(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, args, NULL));
	prm.table = (uint64_t)(uintptr_t)(pin + 4096 - 16);                     /* past its range */
	FAULTS(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, args, NULL));
	prm.table = 0;
	prm.count = 1;
	prm.row = 3000;                      /* two units, no warp starts */
	entry(0, slab, 0, 1, 0);
	prm.units = 2;
	FAULTS(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, args, NULL));
#undef FAULTS
	dup2(saved, 2);
	CHK(count_lines(fd, "fakecuda: vrampool_gather launch faulted") == faults);
	CHK(counter("kernel_launches") == (unsigned long long)faults && counter("kernel_bytes") == 0);
	CHK(cudaMemcpy(back, dst, sizeof(back), cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(back, zero, sizeof(back)) == 0);
}

static void test_faults(void)
{
	const char *env[] = { "FAKECUDA_DEVICES", "2", NULL };

	CU_ASSERT(child_ok(in_child(child_faults, env)));
}

/* ---- a mapped table, warp starts ---- */

/*
 * 3000 single-row hits, more than the parameter holds, in ONE launch whose
 * table lies in mapped page-locked memory. The kernel reads that table
 * when it runs, not at the call: rewritten behind a held stream, the
 * rewritten entries are the ones moved. Then rows of several units with a
 * warp start for each of 3 units a warp, and a wrong start, which faults.
 */
static void child_mapped_table(void)
{
	enum { N = 3000, R = 5, SIZE = 32768 };
	static unsigned char src[SIZE], back[SIZE];
	unsigned char *dst, *slab, *t;
	struct gentry *e;
	CUfunction f = load_gather();
	void *args[] = { &prm };
	cudaStream_t s;
	uint64_t warps;
	uint32_t i;

	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaMalloc((void **)&dst, SIZE) == cudaSuccess);
	CHK(cudaMalloc((void **)&slab, SIZE) == cudaSuccess);
	CHK(cudaHostAlloc((void **)&t, N * sizeof(*e) + 4096, cudaHostAllocMapped) == cudaSuccess);
	e = (struct gentry *)(void *)t;
	fill(src, sizeof(src), 11);
	CHK(cudaMemcpy(slab, src, sizeof(src), cudaMemcpyHostToDevice) == cudaSuccess);
	prm.dst = (uint64_t)(uintptr_t)dst;
	prm.row = R;
	prm.count = N;
	for (i = 0; i < N; i++)
		e[i] = (struct gentry){ (uint64_t)(uintptr_t)(slab + (uint64_t)(N - 1 - i) * R), i, 1 };
	warps = shape(t, 1);
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(s, hold_stream, NULL) == cudaSuccess);
	CHK(cuLaunchKernel(f, (unsigned)((warps + 7) / 8), 1, 1, 256, 1, 1, 0, (CUstream)s, args, NULL) ==
	    CUDA_SUCCESS);
	for (i = 0; i < N; i++)             /* the kernel has not run: it will read these */
		e[i].slab = (uint64_t)(uintptr_t)(slab + (uint64_t)((i * 7) % N) * R);
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy(back, dst, N * R, cudaMemcpyDeviceToHost) == cudaSuccess);
	for (i = 0; i < N; i++)
		CHK(memcmp(back + i * R, src + ((i * 7) % N) * R, R) == 0);
	CHK(counter("kernel_launches") == 1 && counter("kernel_bytes") == N * R && counter("ops_kernel") == 1);

	/* 5 entries of 4 rows of 1500 bytes: 3 units each, 15 units, 3 a warp. */
	prm.row = 1500;
	prm.count = 5;
	for (i = 0; i < 5; i++)
		e[i] = (struct gentry){ (uint64_t)(uintptr_t)(slab + (uint64_t)(4 - i) * 4 * 1500), 4 * i, 4 };
	warps = shape(t, 3);
	CHK(warps == 5 && prm.warps == 5);
	CHK(cuLaunchKernel(f, 1, 1, 1, 160, 1, 1, 0, (CUstream)s, args, NULL) == CUDA_SUCCESS);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy(back, dst, 20 * 1500, cudaMemcpyDeviceToHost) == cudaSuccess);
	for (i = 0; i < 5; i++)
		CHK(memcmp(back + i * 4 * 1500, src + (4 - i) * 4 * 1500, 4 * 1500) == 0);
	((struct gstart *)(void *)(t + 5 * sizeof(*e)))[2].unit = 1;    /* warp 2 starts at entry 2 unit 0 */
	CHK(cuLaunchKernel(f, 1, 1, 1, 160, 1, 1, 0, (CUstream)s, args, NULL) == CUDA_SUCCESS);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(counter("kernel_faults") == 1);
}

static void test_mapped_table(void)
{
	const char *env[] = { "FAKECUDA_JITTER_US", "300", NULL };

	CU_ASSERT(child_ok(in_child(child_mapped_table, env)));
}

/* ---- modules, functions, entry points, injected faults ---- */

static void child_modules(void)
{
	static const unsigned char elf[] = { 0x7f, 'E', 'L', 'F', 2, 1, 1, 0 };
	CUresult (*load)(CUmodule *, const void *);
	CUresult (*lk)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		       unsigned, CUstream, void **, void **);
	CUdriverProcAddressQueryResult q;
	CUmodule m, m2;
	CUfunction f, g;
	unsigned char *dst, *slab;

	CHK(cuModuleLoadData(&m, ptx) == CUDA_ERROR_NOT_INITIALIZED);
	CHK(cuInit(0) == CUDA_SUCCESS);
	CHK(cuModuleLoadData(&m, ptx) == CUDA_ERROR_INVALID_CONTEXT);
	CHK(cudaFree(0) == cudaSuccess);
	/* The third load is an injected fault (FAKECUDA_FAIL=cuModuleLoadData#3). */
	CHK(cuModuleLoadData(&m, ptx) == CUDA_ERROR_UNKNOWN);
	CHK(counter("injected_faults") == 1);
	CHK(cuModuleLoadData(&m, elf) == CUDA_ERROR_INVALID_IMAGE);
	CHK(cuModuleLoadData(&m, ".version 8.0\n.visible .entry vrampool_gathers(\n)") ==
	    CUDA_ERROR_INVALID_IMAGE);
	CHK(cuModuleLoadData(&m, NULL) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuModuleLoadData(&m, ptx) == CUDA_SUCCESS);
	CHK(cuModuleGetFunction(&f, m, "vrampool_scatter") == CUDA_ERROR_NOT_FOUND);
	CHK(cuModuleGetFunction(&f, m, "vrampool_gather") == CUDA_SUCCESS);

	/* Through cuGetProcAddress, as the shim reaches the driver. */
	CHK(cuGetProcAddress_v2("cuModuleLoadData", (void **)&load, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(q == CU_GET_PROC_ADDRESS_SUCCESS && load == cuModuleLoadData);
	CHK(load(&m2, ptx) == CUDA_SUCCESS);
	CHK(cuModuleGetFunction(&g, m2, "vrampool_gather") == CUDA_SUCCESS && g != f);
	CHK(cuGetProcAddress_v2("cuLaunchKernel", (void **)&lk, 12000,
				CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q) == CUDA_SUCCESS);
	{
		void *ptsz = dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz");

		CHK(lk != NULL && ptsz != NULL && memcmp(&lk, &ptsz, sizeof(ptsz)) == 0);
	}
	CHK(cuGetProcAddress_v2("cuModuleUnload", (void **)&load, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(cuGetProcAddress_v2("cuModuleGetFunction", (void **)&load, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(cuGetProcAddress_v2("cuModuleLoadDataEx", (void **)&load, 12000, 0, &q) == CUDA_SUCCESS);

	CHK(cudaMalloc((void **)&dst, ROW) == cudaSuccess);
	CHK(cudaMalloc((void **)&slab, ROW) == cudaSuccess);
	prm.dst = (uint64_t)(uintptr_t)dst;
	prm.row = ROW;
	prm.count = 1;
	entry(0, slab, 0, 1, 0);
	shape(NULL, 1);
	{
		void *args[] = { &prm };

		CHK(lk(g, 1, 1, 1, 32, 1, 1, 0, 0, args, NULL) == CUDA_SUCCESS);
		/* The second cuLaunchKernel is an injected fault (cuLaunchKernel#2). */
		CHK(launch(f, 0) == CUDA_SUCCESS);
		CHK(launch(f, 0) == CUDA_ERROR_UNKNOWN);
		CHK(launch(f, 0) == CUDA_SUCCESS);
		CHK(counter("injected_faults") == 2 && counter("kernel_launches") == 3);
		CHK(counter("cuLaunchKernel_ptsz") == 1);
	}

	/* Unloading kills the module and its function. */
	CHK(cuModuleUnload(m2) == CUDA_SUCCESS);
	CHK(cuModuleUnload(m2) == CUDA_ERROR_INVALID_HANDLE);
	CHK(cuModuleGetFunction(&g, m2, "vrampool_gather") == CUDA_ERROR_INVALID_HANDLE);
	CHK(launch(g, 0) == CUDA_ERROR_INVALID_HANDLE);
	CHK(launch((CUfunction)&prm, 0) == CUDA_ERROR_INVALID_HANDLE);
	/* A device reset ends the context: its modules die with it. */
	CHK(cudaDeviceReset() == cudaSuccess);
	CHK(cudaFree(0) == cudaSuccess);
	CHK(cuModuleGetFunction(&g, m, "vrampool_gather") == CUDA_ERROR_INVALID_HANDLE);
	CHK(launch(f, 0) == CUDA_ERROR_INVALID_HANDLE);
	CHK(counter("kernel_faults") == 0);
	CHK(cuModuleLoadData(&m, ptx) == CUDA_SUCCESS);
}

static void test_modules(void)
{
	const char *env[] = { "FAKECUDA_FAIL", "cuModuleLoadData#3,cuLaunchKernel#2", NULL };

	CU_ASSERT(child_ok(in_child(child_modules, env)));
}

static const CU_TestInfo tests[] = {
	{ "a launch moves rows both ways at odd alignments, from parameters copied at call time",
	  test_directions },
	{ "a launch on the legacy stream waits for blocking streams only", test_legacy_order },
	{ "a capture sees a just-delivered row, and stream capture makes a kernel node",
	  test_capture_fresh_row },
	{ "a broken kernel gets one byte of its last row wrong", test_broken },
	{ "without a kernel binary the module load fails", test_none },
	{ "a launch a driver would refuse is refused at the call, loudly", test_refusals },
	{ "a launch outside its allocations or against the contract faults on the worker, loudly",
	  test_faults },
	{ "one launch reads a table of any size from mapped memory when it runs; warps start where told",
	  test_mapped_table },
	{ "modules load from PTX text, live in their context, and fail on demand", test_modules },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "the emulated gather kernel",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
