/*
 * api.c: proves the wider API of the emulated CUDA device (pitched copies,
 * stream callbacks and queries, module variables, peers, explicit graphs,
 * pools, limits and the rest) behaves as CUDA documents it, without giving
 * up strictness: device bytes are only ever read back through copies, and
 * copies run on stream workers. Built against the real toolkit and run with
 * LD_LIBRARY_PATH=build/fakecuda, like strict.c.
 *
 * Each case runs in a fork()ed child with its own FAKECUDA_* settings; the
 * child exits with (the low byte of) the line of the first failed check.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What nvcc's registration code calls; no public header declares them. */
extern void **__cudaRegisterFatBinary(void *fatCubin);
extern void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress,
			      const char *deviceName, int ext, size_t size, int constant, int global);

#include "harness.h"

/* ---- pitched copies ---- */

#define W 40
#define H 6
#define SP 64   /* host pitch */

static void child_copy2d(void)
{
	unsigned char src[SP * H], back[4096], *pinned, *pout;
	void *d, *d2;
	size_t dp = 0, r, c;
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;
	CUDA_MEMCPY2D m;

	CHK(cudaMallocPitch(&d, &dp, W, H) == cudaSuccess && dp >= W && dp * H <= sizeof(back));
	CHK(cudaMalloc(&d2, dp * H) == cudaSuccess);
	CHK(cudaMemset(d, 0xEE, dp * H) == cudaSuccess);
	for (r = 0; r < SP * H; r++)
		src[r] = (unsigned char)(r * 7 + 1);

	/* Host to device from pageable memory: one call, W*H bytes. */
	CHK(cudaMemcpy2D(d, dp, src, SP, W, H, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(counter("h2d_calls") == 1 && counter("h2d_bytes") == W * H);
	CHK(counter("cudaMemcpy2D") == 1);
	/* Read the whole pitched block back: rows carry data, padding is untouched. */
	CHK(cudaMemcpy(back, d, dp * H, cudaMemcpyDeviceToHost) == cudaSuccess);
	for (r = 0; r < H; r++)
		for (c = 0; c < dp; c++)
			CHK(back[r * dp + c] == (c < W ? src[r * SP + c] : 0xEE));

	/* Device to device, then device to host with cudaMemcpyDefault; only
	 * the device-to-device copy takes device-to-device time. */
	CHK(counter("d2d_ns") == 0);
	CHK(cudaMemcpy2D(d2, dp, d, dp, W, H, cudaMemcpyDeviceToDevice) == cudaSuccess);
	CHK(counter("d2d_ns") > 0);
	memset(back, 0, sizeof(back));
	CHK(cudaMemcpy2D(back, SP, d2, dp, W, H, cudaMemcpyDefault) == cudaSuccess);
	for (r = 0; r < H; r++)
		CHK(memcmp(back + r * SP, src + r * SP, W) == 0 && back[r * SP + W] == 0);
	CHK(counter("d2d_calls") == 1 && counter("d2d_bytes") == W * H);
	CHK(counter("d2h_bytes") == (unsigned long long)dp * H + W * H);

	/* Validation. */
	CHK(cudaMemcpy2D(d, dp, src, W - 1, W, H, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cudaGetLastError() == cudaErrorInvalidValue);
	CHK(cudaMemcpy2D(d, dp, src, SP, W, H + 1, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cudaMemcpy2D(d, dp, src, SP, W, H, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
	CHK(cudaMemcpy2D(d, (size_t)1 << 40, src, SP, W, 2, cudaMemcpyHostToDevice) == cudaErrorInvalidPitchValue);
	CHK(cudaMemcpy2D(d, dp, src, SP, 0, H, cudaMemcpyHostToDevice) == cudaSuccess);

	/* Pinned sources are read when the copy runs, pageable ones at the call. */
	CHK(cudaMallocHost((void **)&pinned, SP * H) == cudaSuccess);
	CHK(cudaMallocHost((void **)&pout, SP * H) == cudaSuccess);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	memset(pinned, 'a', SP * H);
	memset(src, 'a', sizeof(src));
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(s, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpy2DAsync(d, dp, pinned, SP, W, H, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(cudaMemcpy2DAsync(d2, dp, src, SP, W, H, cudaMemcpyHostToDevice, s) == cudaSuccess);
	memset(pinned, 'b', SP * H);
	memset(src, 'b', sizeof(src));
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy2D(pout, SP, d, dp, W, H, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(pout[0] == 'b' && pout[(H - 1) * SP + W - 1] == 'b');
	CHK(cudaMemcpy2D(pout, SP, d2, dp, W, H, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(pout[0] == 'a' && pout[(H - 1) * SP + W - 1] == 'a');

	/* A pitched memset touches only the rows' first W bytes. */
	CHK(cudaMemset(d, 0, dp * H) == cudaSuccess);
	CHK(cudaMemset2D(d, dp, 0x5A, W, H) == cudaSuccess);
	CHK(cudaMemcpy(back, d, dp * H, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(back[0] == 0x5A && back[W - 1] == 0x5A && back[W] == 0 && back[(H - 1) * dp + W - 1] == 0x5A);
	CHK(counter("memset_bytes") == 2 * (unsigned long long)dp * H + W * H);

	/* The driver form, and a captured 2D copy replayed from pinned memory. */
	memset(&m, 0, sizeof(m));
	m.srcMemoryType = CU_MEMORYTYPE_HOST;
	m.srcHost = pinned;
	m.srcPitch = SP;
	m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	m.dstDevice = (CUdeviceptr)d;
	m.dstPitch = dp;
	m.WidthInBytes = W;
	m.Height = H;
	memset(pinned, 'c', SP * H);
	CHK(cuMemcpy2D(&m) == CUDA_SUCCESS);
	CHK(cudaMemcpy2D(pout, SP, d, dp, W, H, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(pout[0] == 'c' && pout[(H - 1) * SP + W - 1] == 'c');
	CHK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
	CHK(cudaMemcpy2DAsync(d, dp, pinned, SP, W, H, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(cudaStreamEndCapture(s, &g) == cudaSuccess);
	CHK(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
	memset(pinned, 'd', SP * H);
	CHK(cudaGraphLaunch(x, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy2D(pout, SP, d, dp, W, H, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(pout[0] == 'd' && pout[(H - 1) * SP + W - 1] == 'd');
}

static void test_pitched_copies(void)
{
	const char *env[] = { "FAKECUDA_JITTER_US", "200", NULL };

	CU_ASSERT(child_ok(in_child(child_copy2d, env)));
}

/* ---- stream callbacks and queries ---- */

static unsigned char *cb_buf;
static atomic_int cb_seen, cb_order;
static pthread_t main_thread;
static cudaStream_t cb_expect;

static void stream_cb(cudaStream_t s, cudaError_t status, void *arg)
{
	/* Runs after the earlier copy landed, on a worker, with its stream. */
	int ok = status == cudaSuccess && s == cb_expect && cb_buf[0] == 'z' &&
		 !pthread_equal(pthread_self(), main_thread) && atomic_load(&cb_order) == 0;

	atomic_store(&cb_order, (int)(intptr_t)arg);
	atomic_store(&cb_seen, ok ? 1 : -1);
}

static void after_cb(void *arg)
{
	(void)arg;
	if (atomic_load(&cb_order) != 7)
		atomic_store(&cb_seen, -2);
}

static void child_callbacks(void)
{
	cudaStream_t s, lo, hi;
	unsigned char src[256];
	void *d;
	int prio = 99, least = 1, greatest = 1;
	unsigned long long id1 = 0, id2 = 0;
	unsigned flags = 9;

	main_thread = pthread_self();
	CHK(cudaMalloc(&d, 256) == cudaSuccess);
	CHK(cudaMallocHost((void **)&cb_buf, 256) == cudaSuccess);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	memset(src, 'z', sizeof(src));
	CHK(cudaMemcpy(d, src, 256, cudaMemcpyHostToDevice) == cudaSuccess);
	cb_expect = s;
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(s, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpyAsync(cb_buf, d, 256, cudaMemcpyDeviceToHost, s) == cudaSuccess);
	CHK(cudaStreamAddCallback(s, stream_cb, (void *)7, 0) == cudaSuccess);
	CHK(cuLaunchHostFunc(s, after_cb, NULL) == CUDA_SUCCESS);
	sleep_ms(20);
	CHK(atomic_load(&cb_seen) == 0); /* held behind the gate */
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(atomic_load(&cb_seen) == 1 && atomic_load(&cb_order) == 7);
	CHK(cudaStreamAddCallback(s, stream_cb, NULL, 1) == cudaErrorInvalidValue);
	CHK(counter("cudaStreamAddCallback") == 2);

	/* Priorities are clamped to the advertised range; ids are distinct. */
	CHK(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
	CHK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest - 10) == cudaSuccess);
	CHK(cudaStreamCreateWithPriority(&lo, 0, least) == cudaSuccess);
	CHK(cudaStreamGetPriority(hi, &prio) == cudaSuccess && prio == greatest);
	CHK(cudaStreamGetPriority(lo, &prio) == cudaSuccess && prio == least);
	CHK(cudaStreamGetFlags(hi, &flags) == cudaSuccess && flags == cudaStreamNonBlocking);
	CHK(cudaStreamGetId(hi, &id1) == cudaSuccess && cudaStreamGetId(lo, &id2) == cudaSuccess);
	CHK(id1 != id2 && id1 && id2);
	CHK(cudaStreamGetId(0, &id1) == cudaSuccess);
	CHK(cudaStreamDestroy(lo) == cudaSuccess);
	CHK(cudaStreamGetPriority(lo, &prio) == cudaErrorInvalidResourceHandle);
}

static void test_callbacks_run_in_order(void)
{
	CU_ASSERT(child_ok(in_child(child_callbacks, NULL)));
}

/* ---- module variables ---- */

static char shadow_var[64];   /* the host shadow nvcc would register */
static char not_a_symbol[64];

static void child_symbols(void)
{
	unsigned char in[64], out[64];
	struct cudaPointerAttributes a;
	void *addr = NULL;
	size_t size = 0;
	cudaStream_t s;
	int i;

	for (i = 0; i < 64; i++)
		in[i] = (unsigned char)(i + 100);
	CHK(cudaMemcpyToSymbol(shadow_var, in, 64, 0, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(shadow_var[0] == 0); /* the host shadow is not the variable */
	memset(out, 0, sizeof(out));
	CHK(cudaMemcpyFromSymbol(out, shadow_var, 32, 16, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(out, in + 16, 32) == 0);
	CHK(counter("h2d_bytes") == 64 && counter("d2h_bytes") == 32);

	CHK(cudaGetSymbolSize(&size, shadow_var) == cudaSuccess && size == 64);
	CHK(cudaGetSymbolAddress(&addr, shadow_var) == cudaSuccess && addr != NULL);
	CHK(cudaPointerGetAttributes(&a, addr) == cudaSuccess && a.type == cudaMemoryTypeDevice);
	memset(out, 0, sizeof(out));
	CHK(cudaMemcpy(out, addr, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(out, in, 64) == 0);
	CHK(cudaFree(addr) == cudaErrorInvalidValue);
	CHK(counter("alloc_bytes") == 0); /* module memory is not an allocation */

	CHK(cudaStreamCreate(&s) == cudaSuccess);
	in[0] = 1;
	CHK(cudaMemcpyToSymbolAsync(shadow_var, in, 1, 63, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(cudaMemcpyFromSymbolAsync(out, shadow_var, 1, 63, cudaMemcpyDeviceToHost, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess && out[0] == 1);

	CHK(cudaMemcpyToSymbol(not_a_symbol, in, 4, 0, cudaMemcpyHostToDevice) == cudaErrorInvalidSymbol);
	CHK(cudaGetLastError() == cudaErrorInvalidSymbol);
	CHK(cudaGetSymbolAddress(&addr, not_a_symbol) == cudaErrorInvalidSymbol);
	CHK(cudaMemcpyToSymbol(shadow_var, in, 8, 60, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cudaMemcpyToSymbol(shadow_var, in, 8, 0, cudaMemcpyDeviceToHost) == cudaErrorInvalidMemcpyDirection);
}

static void test_symbols_round_trip(void)
{
	CU_ASSERT(child_ok(in_child(child_symbols, NULL)));
}

/* ---- peers ---- */

static void child_peers(void)
{
	unsigned char in[4096], out[4096];
	void *a, *b;
	int can = -1;
	cudaStream_t s;

	CHK(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess && can == 1);
	CHK(cudaDeviceCanAccessPeer(&can, 1, 1) == cudaSuccess && can == 0);
	CHK(cudaDeviceCanAccessPeer(&can, 0, 2) == cudaErrorInvalidDevice);
	CHK(cudaDeviceEnablePeerAccess(1, 0) == cudaSuccess);
	CHK(cudaDeviceEnablePeerAccess(1, 0) == cudaErrorPeerAccessAlreadyEnabled);
	CHK(cudaGetLastError() == cudaErrorPeerAccessAlreadyEnabled);
	CHK(cudaDeviceEnablePeerAccess(0, 0) == cudaErrorInvalidDevice);
	CHK(cudaDeviceDisablePeerAccess(1) == cudaSuccess);
	CHK(cudaDeviceDisablePeerAccess(1) == cudaErrorPeerAccessNotEnabled);

	memset(in, 0x3C, sizeof(in));
	CHK(cudaMalloc(&a, sizeof(in)) == cudaSuccess);
	CHK(cudaMemcpy(a, in, sizeof(in), cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cudaSetDevice(1) == cudaSuccess);
	CHK(cudaMalloc(&b, sizeof(in)) == cudaSuccess);
	CHK(cudaMemcpyPeer(b, 1, a, 0, sizeof(in)) == cudaSuccess);
	CHK(cudaMemcpy(out, b, sizeof(out), cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(in, out, sizeof(in)) == 0);
	CHK(counter("d2d_calls") == 1 && counter("d2d_bytes") == sizeof(in));
	CHK(cudaMemcpyPeer(b, 0, a, 0, sizeof(in)) == cudaErrorInvalidValue);
	CHK(cudaMemcpyPeer(b, 1, a, 5, sizeof(in)) == cudaErrorInvalidDevice);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaMemcpyPeerAsync(a, 0, b, 1, 100, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(counter("d2d_calls") == 2);
}

static void test_peers(void)
{
	const char *env[] = { "FAKECUDA_DEVICES", "2", "FAKECUDA_MEM", "16M", NULL };

	CU_ASSERT(child_ok(in_child(child_peers, env)));
}

/* ---- explicit graphs ---- */

static void child_graphs(void)
{
	cudaGraph_t g, g2, g3;
	cudaGraphExec_t x;
	cudaGraphNode_t ms, cp, back, nodes[4];
	cudaGraphExecUpdateResultInfo info;
	struct cudaMemsetParams mp;
	enum cudaGraphNodeType type;
	enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
	unsigned char *pin, *pin2, *out;
	size_t n = 0;
	void *d;
	cudaStream_t s;

	CHK(cudaMalloc(&d, 256) == cudaSuccess);
	CHK(cudaMallocHost((void **)&pin, 128) == cudaSuccess);
	CHK(cudaMallocHost((void **)&pin2, 128) == cudaSuccess);
	CHK(cudaMallocHost((void **)&out, 256) == cudaSuccess);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaGraphCreate(&g, 0) == cudaSuccess);
	memset(&mp, 0, sizeof(mp));
	mp.dst = d;
	mp.value = 0x04030201;
	mp.elementSize = 4;
	mp.width = 64;
	mp.height = 1;
	CHK(cudaGraphAddMemsetNode(&ms, g, NULL, 0, &mp) == cudaSuccess);
	CHK(cudaGraphAddMemcpyNode1D(&cp, g, &ms, 1, d, pin, 128, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cudaGraphAddMemcpyNode1D(&back, g, &cp, 1, out, d, 256, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(cudaGraphAddMemcpyNode1D(&back, g, NULL, 0, out, d, 512, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
	CHK(cudaGraphGetNodes(g, NULL, &n) == cudaSuccess && n == 3);
	n = 4;
	CHK(cudaGraphGetNodes(g, nodes, &n) == cudaSuccess && n == 3 && nodes[0] == ms && nodes[3] == NULL);
	CHK(cudaGraphNodeGetType(ms, &type) == cudaSuccess && type == cudaGraphNodeTypeMemset);
	CHK(cudaGraphNodeGetType(cp, &type) == cudaSuccess && type == cudaGraphNodeTypeMemcpy);
	CHK(counter("h2d_calls") == 0); /* adding nodes runs nothing */

	CHK(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
	memset(pin, 'p', 128);   /* written after instantiation: read at launch */
	CHK(cudaGraphUpload(x, s) == cudaSuccess);
	CHK(cudaGraphLaunch(x, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(out[0] == 'p' && out[127] == 'p');
	CHK(out[128] == 1 && out[129] == 2 && out[130] == 3 && out[131] == 4 && out[255] == 4);
	CHK(counter("h2d_calls") == 1 && counter("d2h_bytes") == 256 && counter("memset_bytes") == 256);

	/* Same topology, new source: the update takes it. */
	CHK(cudaGraphCreate(&g2, 0) == cudaSuccess);
	CHK(cudaGraphAddMemsetNode(&ms, g2, NULL, 0, &mp) == cudaSuccess);
	CHK(cudaGraphAddMemcpyNode1D(&cp, g2, &ms, 1, d, pin2, 128, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cudaGraphAddMemcpyNode1D(&back, g2, &cp, 1, out, d, 256, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(cudaGraphExecUpdate(x, g2, &info) == cudaSuccess && info.result == cudaGraphExecUpdateSuccess);
	memset(pin2, 'q', 128);
	CHK(cudaGraphLaunch(x, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(out[0] == 'q' && out[127] == 'q');
	/* A different topology is refused. */
	CHK(cudaGraphCreate(&g3, 0) == cudaSuccess);
	CHK(cudaGraphAddMemsetNode(&ms, g3, NULL, 0, &mp) == cudaSuccess);
	CHK(cudaGraphExecUpdate(x, g3, &info) == cudaErrorGraphExecUpdateFailure);
	CHK(info.result == cudaGraphExecUpdateErrorTopologyChanged);
	CHK(cudaGraphAddMemcpyNode1D(&cp, g3, &back, 1, d, pin, 16, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);

	/* Capture appends to an existing graph. */
	CHK(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess && mode == cudaStreamCaptureModeGlobal);
	CHK(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess && mode == cudaStreamCaptureModeRelaxed);
	{
		/* The driver's form exchanges the same per-thread mode. */
		CUstreamCaptureMode cm = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;

		CHK(cuThreadExchangeStreamCaptureMode(&cm) == CUDA_SUCCESS && cm == CU_STREAM_CAPTURE_MODE_GLOBAL);
		CHK(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess &&
		    mode == cudaStreamCaptureModeThreadLocal);
		cm = (CUstreamCaptureMode)7;
		CHK(cuThreadExchangeStreamCaptureMode(&cm) == CUDA_ERROR_INVALID_VALUE);
	}
	CHK(cudaStreamBeginCaptureToGraph(s, g3, NULL, NULL, 0, cudaStreamCaptureModeGlobal) == cudaSuccess);
	CHK(cudaMemcpyAsync(d, pin, 16, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(cudaStreamEndCapture(s, &g) == cudaSuccess && g == g3);
	CHK(cudaGraphGetNodes(g3, NULL, &n) == cudaSuccess && n == 2);
	CHK(cudaGraphExecDestroy(x) == cudaSuccess);
	CHK(cudaGraphUpload(x, s) == cudaErrorInvalidValue);
	CHK(cudaGraphDestroy(g2) == cudaSuccess && cudaGraphDestroy(g3) == cudaSuccess);
}

static void test_explicit_graphs(void)
{
	const char *env[] = { "FAKECUDA_JITTER_US", "200", NULL };

	CU_ASSERT(child_ok(in_child(child_graphs, env)));
}

/* ---- pools, limits, host flags, prefetch and the rest ---- */

static char kernel_stub[1]; /* stands for a kernel's host stub */

static void child_misc(void)
{
	cudaMemPool_t pool, pool2;
	cudaStream_t s;
	unsigned long long v = 0;
	size_t lim = 0;
	char bus[32];
	int dev = -1, n = -1;
	unsigned flags = 0;
	void *p, *mp, *dp, *hp;
	char pageable[16];
	struct cudaMemLocation loc = { cudaMemLocationTypeDevice, 0 };
	struct cudaFuncAttributes fa;
	struct cudaDeviceProp prop;
	cudaIpcMemHandle_t ih;

	CHK(cudaInitDevice(0, 0, 0) == cudaSuccess);
	CHK(cudaInitDevice(3, 0, 0) == cudaErrorInvalidDevice);
	memset(&prop, 0, sizeof(prop));
	CHK(cudaChooseDevice(&dev, &prop) == cudaSuccess && dev == 0);
	CHK(cudaStreamCreate(&s) == cudaSuccess);

	CHK(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
	CHK(cudaDeviceGetMemPool(&pool2, 0) == cudaSuccess && pool == pool2);
	CHK(cudaDeviceSetMemPool(0, pool) == cudaSuccess);
	CHK(cudaMallocFromPoolAsync(&p, 1000, pool, s) == cudaSuccess);
	CHK(counter("alloc_bytes") == 1024);
	CHK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v) == cudaSuccess && v == 1024);
	v = 1 << 20;
	CHK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &v) == cudaSuccess);
	v = 0;
	CHK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &v) == cudaSuccess && v == 1 << 20);
	CHK(cudaFreeAsync(p, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess && counter("alloc_bytes") == 0);
	CHK(cudaMemPoolTrimTo(pool, 0) == cudaSuccess);
	CHK(cudaMallocFromPoolAsync(&p, 10, (cudaMemPool_t)&v, s) == cudaErrorInvalidValue);

	CHK(cudaDeviceGetLimit(&lim, cudaLimitStackSize) == cudaSuccess && lim > 0);
	CHK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 123456) == cudaSuccess);
	CHK(cudaDeviceGetLimit(&lim, cudaLimitMallocHeapSize) == cudaSuccess && lim == 123456);
	CHK(cudaDeviceGetLimit(&lim, (enum cudaLimit)99) == cudaErrorUnsupportedLimit);
	CHK(cudaDeviceGetPCIBusId(bus, sizeof(bus), 0) == cudaSuccess);
	CHK(cudaDeviceGetByPCIBusId(&dev, bus) == cudaSuccess && dev == 0);
	CHK(cudaDeviceGetPCIBusId(bus, 4, 0) == cudaErrorInvalidValue);
	CHK(cudaDeviceGetAttribute(&n, cudaDevAttrMaxPitch, 0) == cudaSuccess && n > 0);

	CHK(cudaHostAlloc(&hp, 4096, cudaHostAllocMapped) == cudaSuccess);
	CHK(cudaHostGetFlags(&flags, hp) == cudaSuccess && flags == cudaHostAllocMapped);
	CHK(cudaHostGetDevicePointer(&dp, hp, 0) == cudaSuccess && dp == hp);
	CHK(cudaHostGetFlags(&flags, pageable) == cudaErrorInvalidValue);
	CHK(cudaHostAlloc(&p, 64, 0x80) == cudaErrorInvalidValue);

	CHK(cudaMallocManaged(&mp, 4096, cudaMemAttachGlobal) == cudaSuccess);
	CHK(cudaMemPrefetchAsync(mp, 4096, loc, 0, s) == cudaSuccess);
	CHK(cudaMemAdvise(mp, 4096, cudaMemAdviseSetPreferredLocation, loc) == cudaSuccess);
	CHK(cudaMalloc(&p, 64) == cudaSuccess);
	CHK(cudaMemPrefetchAsync(p, 64, loc, 0, s) == cudaErrorInvalidValue);
	loc.id = 5;
	CHK(cudaMemPrefetchAsync(mp, 4096, loc, 0, s) == cudaErrorInvalidDevice);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);

	CHK(cudaFuncGetAttributes(&fa, kernel_stub) == cudaSuccess && fa.maxThreadsPerBlock > 0);
	CHK(cudaFuncGetAttributes(&fa, NULL) == cudaErrorInvalidDeviceFunction);
	CHK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel_stub, 256, 0) == cudaSuccess && n > 0);
	CHK(cudaIpcGetMemHandle(&ih, p) == cudaErrorNotSupported);
	CHK(strcmp(cudaGetErrorName(cudaErrorInvalidSymbol), "cudaErrorInvalidSymbol") == 0);
	CHK(counter("cudaMemPrefetchAsync") == 3 && counter("cudaHostGetFlags") == 2);
}

static void test_misc(void)
{
	CU_ASSERT(child_ok(in_child(child_misc, NULL)));
}

static void child_reset(void)
{
	unsigned long long id0 = 0, id1 = 0;
	size_t free0, free1, total;
	void *a, *b;
	CUcontext ctx;

	CHK(cudaMalloc(&a, 8u << 20) == cudaSuccess && cudaMalloc(&b, 8u << 20) == cudaSuccess);
	CHK(cudaMemGetInfo(&free0, &total) == cudaSuccess);
	CHK(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && cuCtxGetId(ctx, &id0) == CUDA_SUCCESS);
	CHK(cudaDeviceReset() == cudaSuccess);
	CHK(cudaMemGetInfo(&free1, &total) == cudaSuccess);
	CHK(free1 >= free0 + (16u << 20));
	CHK(cuCtxGetId(NULL, &id1) == CUDA_SUCCESS && id1 != id0);
	/* the memory is free again: the next allocation may reuse it */
	CHK(cudaMalloc(&a, 8u << 20) == cudaSuccess);
}

static void test_reset(void)
{
	CU_ASSERT(child_ok(in_child(child_reset, NULL)));
}

/* ---- the driver's allocation, context-stack and lookup entry points ---- */

static void child_driver_alloc(void)
{
	CUresult (*gpa_old)(const char *, void **, int, cuuint64_t);
	CUresult (*alloc_ptsz)(CUdeviceptr *, size_t, CUstream);
	CUresult (*free_ptsz)(CUdeviceptr, CUstream);
	CUresult (*pool_ptsz)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
	CUdriverProcAddressQueryResult q;
	void *fn;
	CUdeviceptr p, m, pp;
	CUcontext c0, c1, cur, popped;
	cudaMemPool_t pool;
	cudaStream_t s;
	size_t pitch = 0;
	unsigned flags = 9, ver = 0;
	int active = -1, ord = -1;
	void *v;

	CHK(cuInit(0) == CUDA_SUCCESS);
	CHK(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_SUCCESS && active == 0 && flags == 0);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_SUCCESS && active == 1);
	CHK(cuDevicePrimaryCtxGetState(1, &flags, &active) == CUDA_SUCCESS && active == 0);

	/* Stream-ordered allocations: on the stream's device, freed in order. */
	CHK(cuMemAllocAsync(&p, 1000, s) == CUDA_SUCCESS && counter("alloc_bytes") == 1024);
	CHK(cuMemAllocAsync(&pp, 0, s) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuMemFreeAsync(p, s) == CUDA_SUCCESS);
	CHK(cuMemFreeAsync(p + 1, s) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuStreamSynchronize(s) == CUDA_SUCCESS && counter("alloc_bytes") == 0);
	*(void **)&alloc_ptsz = dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz");
	*(void **)&free_ptsz = dlsym(RTLD_DEFAULT, "cuMemFreeAsync_ptsz");
	*(void **)&pool_ptsz = dlsym(RTLD_DEFAULT, "cuMemAllocFromPoolAsync_ptsz");
	CHK(alloc_ptsz && free_ptsz && pool_ptsz);
	CHK(alloc_ptsz(&p, 10, 0) == CUDA_SUCCESS);
	CHK(free_ptsz(p, 0) == CUDA_SUCCESS);
	CHK(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
	CHK(cuMemAllocFromPoolAsync(&p, 300, pool, s) == CUDA_SUCCESS);
	CHK(cuMemAllocFromPoolAsync(&pp, 300, NULL, s) == CUDA_ERROR_INVALID_VALUE);
	CHK(pool_ptsz(&pp, 300, pool, 0) == CUDA_SUCCESS);
	CHK(counter("alloc_calls") == 4 && counter("free_calls") == 3);

	/* Managed and pitched memory. */
	CHK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
	((volatile char *)(uintptr_t)m)[4095] = 1; /* host-visible */
	CHK(cuMemAllocManaged(&pp, 4096, 0) == CUDA_ERROR_INVALID_VALUE);
	CHK(cudaMallocManaged(&v, 4096, 0) == cudaErrorInvalidValue);
	CHK(cuMemAllocPitch(&pp, &pitch, 100, 3, 4) == CUDA_SUCCESS && pitch == 512);
	CHK(cuMemAllocPitch(&pp, &pitch, 100, 3, 3) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuMemAllocPitch(&pp, &pitch, SIZE_MAX / 2, 4, 4) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuMemAllocPitch(&pp, &pitch, 100, 3, 4) == CUDA_SUCCESS);
	CHK(cuMemsetD2D8(pp, pitch, 7, 100, 3) == CUDA_SUCCESS);
	CHK(cuMemsetD2D8(pp, pitch, 7, 100, 4) == CUDA_ERROR_INVALID_VALUE);

	/* The context stack. */
	CHK(cuCtxGetCurrent(&c0) == CUDA_SUCCESS && c0 != NULL);
	CHK(cuDevicePrimaryCtxRetain(&c1, 1) == CUDA_SUCCESS && c1 != c0);
	CHK(cuDevicePrimaryCtxGetState(1, &flags, &active) == CUDA_SUCCESS && active == 1);
	CHK(cuCtxPushCurrent(c1) == CUDA_SUCCESS);
	CHK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c1);
	CHK(cuMemAlloc(&pp, 64) == CUDA_SUCCESS);
	CHK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pp) == CUDA_SUCCESS && ord == 1);
	CHK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS && popped == c1);
	CHK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c0);
	CHK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS && popped == c0);
	CHK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL);
	CHK(cuCtxPopCurrent(&popped) == CUDA_ERROR_INVALID_CONTEXT);
	CHK(cuCtxPushCurrent(NULL) == CUDA_ERROR_INVALID_CONTEXT);
	CHK(cuCtxPushCurrent(c0) == CUDA_SUCCESS && cuCtxPushCurrent(c1) == CUDA_SUCCESS);
	CHK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS); /* pops the top */
	CHK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c0);
	CHK(cuCtxGetApiVersion(NULL, &ver) == CUDA_SUCCESS && ver == 3020);
	CHK(cuCtxGetApiVersion((CUcontext)&ver, &ver) == CUDA_ERROR_INVALID_CONTEXT);

	/* Lookups: versioned and per-thread entries, and the CUDA 11 form. */
	CHK(cuGetProcAddress_v2("cuMemAllocPitch", &fn, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(fn == dlsym(RTLD_DEFAULT, "cuMemAllocPitch_v2"));
	CHK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11000, 0, &q) == CUDA_ERROR_NOT_FOUND);
	CHK(q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 12000,
				CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q) == CUDA_SUCCESS);
	CHK(fn == dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
	CHK(cuGetProcAddress_v2("cuMemFreeAsync", &fn, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(cuGetProcAddress_v2("cuMemAllocFromPoolAsync", &fn, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(cuGetProcAddress_v2("cuMemAllocManaged", &fn, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(cuGetProcAddress_v2("cuCtxPushCurrent", &fn, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(fn == dlsym(RTLD_DEFAULT, "cuCtxPushCurrent_v2"));
	CHK(cuGetProcAddress_v2("cuCtxPopCurrent", &fn, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(cuGetProcAddress_v2("cuCtxGetApiVersion", &fn, 12000, 0, &q) == CUDA_SUCCESS);
	CHK(cuGetProcAddress_v2("cuDevicePrimaryCtxGetState", &fn, 12000, 0, &q) == CUDA_SUCCESS);
	*(void **)&gpa_old = dlsym(RTLD_DEFAULT, "cuGetProcAddress");
	CHK(gpa_old != NULL);
	CHK(gpa_old("cuMemAllocManaged", &fn, 11040, 0) == CUDA_SUCCESS);
	CHK(fn == dlsym(RTLD_DEFAULT, "cuMemAllocManaged"));
	CHK(gpa_old("cuNoSuchThing", &fn, 11040, 0) == CUDA_ERROR_NOT_FOUND && fn == NULL);
	CHK(gpa_old("cuGetProcAddress", &fn, 11040, 0) == CUDA_SUCCESS);
	CHK(fn == dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
	CHK(gpa_old("cuGetProcAddress", &fn, 12000, 0) == CUDA_SUCCESS);
	CHK(fn == dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));
	CHK(counter("cuGetProcAddress") == 4);
}

static void test_driver_alloc(void)
{
	const char *env[] = { "FAKECUDA_DEVICES", "2", NULL };

	CU_ASSERT(child_ok(in_child(child_driver_alloc, env)));
}

/* ---- private export tables ---- */

/* What this process wrote on fd since it was redirected there. */
static void read_back(int fd, char *buf, size_t size)
{
	ssize_t n = pread(fd, buf, size - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
}

/*
 * cuGetExportTable, found with dlsym and cuGetProcAddress as a statically
 * linked runtime finds it, hands out no table: every id is not found with
 * a NULL table, the first request of each id is named on stderr once, and
 * missing arguments are invalid values.
 */
static void child_export_table(void)
{
	static const CUuuid cudart = { { 0x6b, (char)0xd5, (char)0xfb, 0x6c, 0x5b, (char)0xf4, (char)0xe7,
					 0x4a, (char)0x89, (char)0x87, (char)0xd9, 0x39, 0x12, (char)0xfd,
					 (char)0x9d, (char)0xf9 } };
	static const CUuuid other = { { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 } };
	CUresult (*get)(const void **, const CUuuid *);
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	CUdriverProcAddressQueryResult q;
	char path[] = "/tmp/fakecuda-export-XXXXXX", text[4096];
	const void *table = &q;
	void *h, *fn = NULL;
	int fd = mkstemp(path), saved = dup(2);

	CHK(fd >= 0 && saved >= 0);
	unlink(path);
	h = dlopen("libcuda.so.1", RTLD_NOW);
	CHK(h != NULL);
	*(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
	*(void **)&get = dlsym(h, "cuGetExportTable");
	CHK(gpa != NULL && get != NULL);
	CHK(cuInit(0) == CUDA_SUCCESS);
	CHK(gpa("cuGetExportTable", &fn, 3000, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS);
	CHK(q == CU_GET_PROC_ADDRESS_SUCCESS && fn == *(void **)&get);

	dup2(fd, 2);
	CHK(get(&table, &cudart) == CUDA_ERROR_NOT_FOUND && table == NULL);
	table = &q;
	CHK(get(&table, &cudart) == CUDA_ERROR_NOT_FOUND && table == NULL);
	CHK(get(&table, &other) == CUDA_ERROR_NOT_FOUND);
	CHK(get(NULL, &other) == CUDA_ERROR_INVALID_VALUE);
	CHK(get(&table, NULL) == CUDA_ERROR_INVALID_VALUE);
	fflush(stderr);
	dup2(saved, 2);
	read_back(fd, text, sizeof(text));
	CHK(strstr(text, "fakecuda: cuGetExportTable {6bd5fb6c-5bf4-e74a-8987-d93912fd9df9}: "
			 "NVIDIA's private export tables are not emulated") != NULL);
	CHK(strstr(text, "{01020304-0506-0708-090a-0b0c0d0e0f10}") != NULL);
	CHK(strstr(strstr(text, "6bd5fb6c") + 1, "6bd5fb6c") == NULL); /* named once */
	CHK(counter("cuGetExportTable") == 5);
	dlclose(h);
}

static void test_export_table(void)
{
	CU_ASSERT(child_ok(in_child(child_export_table, NULL)));
}

/* ---- cuCtxSynchronize at CUDA 13 ---- */

static void *open_gate_later(void *arg)
{
	(void)arg;
	sleep_ms(20);
	atomic_store(&gate, 1);
	return NULL;
}

/*
 * cuGetProcAddress("cuCtxSynchronize") gives the CUDA 13.0 form from
 * version 13000 on (CuPy's runtime asks for both): it waits for the
 * context it names, which need not be current, and NULL means the current
 * one; an unknown context is refused.
 */
static void child_ctx_sync_v2(void)
{
	CUresult (*v1)(void), (*v2)(CUcontext);
	CUcontext c0, c1;
	cudaStream_t s1;
	pthread_t th;
	void *fn;
	int junk;

	CHK(cuInit(0) == CUDA_SUCCESS);
	CHK(cuGetProcAddress_v2("cuCtxSynchronize", &fn, 12080, 0, NULL) == CUDA_SUCCESS);
	*(void **)&v1 = fn;
	CHK(cuGetProcAddress_v2("cuCtxSynchronize", &fn, 13000, 0, NULL) == CUDA_SUCCESS);
	*(void **)&v2 = fn;
	CHK(v1 == cuCtxSynchronize && v2 == cuCtxSynchronize_v2);
	CHK(cuDevicePrimaryCtxRetain(&c0, 0) == CUDA_SUCCESS);
	CHK(cuDevicePrimaryCtxRetain(&c1, 1) == CUDA_SUCCESS);
	CHK(cudaSetDevice(1) == cudaSuccess && cudaStreamCreate(&s1) == cudaSuccess);
	CHK(cudaLaunchHostFunc(s1, hold_stream, NULL) == cudaSuccess);
	CHK(cuCtxSetCurrent(c0) == CUDA_SUCCESS);
	/* Device 1 is held: waiting for it here would never return (alarm). */
	CHK(v2(NULL) == CUDA_SUCCESS && v2(c0) == CUDA_SUCCESS);
	CHK(cudaStreamQuery(s1) == cudaErrorNotReady);
	CHK(pthread_create(&th, NULL, open_gate_later, NULL) == 0);
	CHK(v2(c1) == CUDA_SUCCESS);
	CHK(cudaStreamQuery(s1) == cudaSuccess);
	pthread_join(th, NULL);
	CHK(v2((CUcontext)&junk) == CUDA_ERROR_INVALID_CONTEXT);
	CHK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
	CHK(v2(NULL) == CUDA_ERROR_INVALID_CONTEXT);
}

static void test_ctx_sync_v2(void)
{
	const char *env[] = { "FAKECUDA_DEVICES", "2", NULL };

	CU_ASSERT(child_ok(in_child(child_ctx_sync_v2, env)));
}

/* ---- the runtime through the driver ---- */

static unsigned via_driver;

/*
 * The same copies and allocations, with and without
 * FAKECUDA_RT_VIA_DRIVER=1: the same results, last errors and counters;
 * only the calls table differs, showing cuGetProcAddress_v2 and the driver
 * entry points in use. FAKECUDA_FAIL=cuMemAlloc_v2#3 in both runs: only
 * the run through the driver reaches cuMemAlloc_v2.
 */
static void child_rt_via_driver(void)
{
	cudaError_t (*copy_ptsz)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
	static unsigned char host[4096], host2[4096], back[4096];
	unsigned char *pin, *a, *b, *m, *pt, *z = (unsigned char *)1;
	size_t pitch = 0, r;
	cudaStream_t s, dead;

	*(void **)&copy_ptsz = dlsym(RTLD_DEFAULT, "cudaMemcpyAsync_ptsz");
	CHK(copy_ptsz != NULL);
	memset(host, 3, sizeof(host));
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaMallocHost((void **)&pin, 4096) == cudaSuccess);
	memset(pin, 4, 4096);

	/* Allocations. */
	CHK(cudaMalloc((void **)&a, 1000) == cudaSuccess);
	CHK(cudaMalloc((void **)&z, 0) == cudaSuccess && z == NULL);
	CHK(cudaMalloc(NULL, 10) == cudaErrorInvalidValue);
	CHK(cudaGetLastError() == cudaErrorInvalidValue);
	CHK(cudaMalloc((void **)&b, 100u << 20) == cudaErrorMemoryAllocation);
	CHK(cudaGetLastError() == cudaErrorMemoryAllocation && counter("oom_errors") == 1);
	if (via_driver) {
		CHK(cudaMalloc((void **)&b, 1000) == cudaErrorMemoryAllocation); /* cuMemAlloc_v2#3 */
		CHK(cudaGetLastError() == cudaErrorMemoryAllocation);
		CHK(counter("injected_faults") == 1);
	}
	CHK(cudaMalloc((void **)&b, 1000) == cudaSuccess);
	CHK(cudaMallocAsync((void **)&z, 10, s) == cudaSuccess && z != NULL);
	CHK(cudaMallocManaged((void **)&m, 4096, cudaMemAttachGlobal) == cudaSuccess);
	CHK(cudaMallocManaged((void **)&m, 4096, 0) == cudaErrorInvalidValue);
	CHK(cudaMallocManaged((void **)&m, 4096, cudaMemAttachHost) == cudaSuccess);
	CHK(cudaMallocPitch((void **)&pt, &pitch, 100, 4) == cudaSuccess && pitch == 512);
	CHK(counter("alloc_calls") == 7); /* an injected fault is no attempt */
	CHK(counter("alloc_bytes") == 1024 + 1024 + 256 + 4096 + 4096 + 2048);

	/* Copies of every kind, checked back. */
	CHK(cudaMemcpy(a, host, 1000, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cudaMemcpyAsync(b, pin, 1000, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy(b, a, 500, cudaMemcpyDeviceToDevice) == cudaSuccess);
	CHK(cudaMemcpyAsync(back, b, 1000, cudaMemcpyDefault, s) == cudaSuccess);
	CHK(back[0] == 3 && back[499] == 3 && back[500] == 4 && back[999] == 4);
	CHK(cudaMemcpy(host2, host, 64, cudaMemcpyHostToHost) == cudaSuccess && host2[63] == 3);
	CHK(copy_ptsz(a, pin, 1000, cudaMemcpyHostToDevice, 0) == cudaSuccess);
	CHK(cudaMemcpy(back, a, 1000, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(back[0] == 4 && back[999] == 4);
	CHK(cudaMemcpy(m, a, 1000, cudaMemcpyDefault) == cudaSuccess && m[999] == 4);
	CHK(cudaMemcpy2D(pt, pitch, host, 100, 100, 4, cudaMemcpyHostToDevice) == cudaSuccess);
	memset(back, 0, sizeof(back));
	CHK(cudaMemcpy2DAsync(back, 128, pt, pitch, 100, 4, cudaMemcpyDeviceToHost, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	for (r = 0; r < 4; r++)
		CHK(back[r * 128] == 3 && back[r * 128 + 99] == 3 && back[r * 128 + 100] == 0);

	/* Refusals: the same codes and last errors. */
	CHK(cudaMemcpy(a, host, 2000, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cudaGetLastError() == cudaErrorInvalidValue);
	CHK(cudaMemcpy(host, a, 16, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cudaMemcpy(host, a, 16, (enum cudaMemcpyKind)9) == cudaErrorInvalidValue);
	CHK(cudaMemcpy2D(pt, (size_t)1 << 40, host, 100, 100, 2, cudaMemcpyHostToDevice) ==
	    cudaErrorInvalidPitchValue);
	CHK(cudaGetLastError() == cudaErrorInvalidPitchValue);
	CHK(cudaStreamCreate(&dead) == cudaSuccess && cudaStreamDestroy(dead) == cudaSuccess);
	CHK(cudaMemcpyAsync(a, host, 10, cudaMemcpyHostToDevice, dead) == cudaErrorInvalidResourceHandle);
	CHK(cudaMallocAsync((void **)&z, 10, dead) == cudaErrorInvalidResourceHandle);
	CHK(cudaMemcpy(a, host, 0, cudaMemcpyHostToDevice) == cudaSuccess);

	CHK(counter("h2d_calls") == 4 && counter("h2d_bytes") == 3400);
	CHK(counter("d2h_calls") == 3 && counter("d2h_bytes") == 2400);
	CHK(counter("d2d_calls") == 2 && counter("d2d_bytes") == 1500);
	CHK(counter("h2h_calls") == 1 && counter("h2h_bytes") == 64);
	CHK(counter("cudaMemcpy") == 9 && counter("cudaMalloc") == 5 + via_driver);

	if (!via_driver) {
		CHK(counter("cuGetProcAddress_v2") == 0 && counter("cuMemAlloc_v2") == 0);
		CHK(counter("cuMemcpyHtoD_v2") == 0 && counter("cuMemcpy2D_v2") == 0);
		return;
	}
	CHK(counter("cuGetProcAddress_v2") == 28);
	CHK(counter("cuMemAlloc_v2") == 4 && counter("cuMemAllocAsync") == 1);
	CHK(counter("cuMemAllocManaged") == 2 && counter("cuMemAllocPitch_v2") == 1);
	CHK(counter("cuMemcpyHtoD_v2") == 2 && counter("cuMemcpyHtoDAsync_v2") == 1); /* one empty */
	CHK(counter("cuMemcpyHtoDAsync_v2_ptsz") == 1 && counter("cuMemcpyDtoD_v2") == 1);
	CHK(counter("cuMemcpyAsync") == 1 && counter("cuMemcpy") == 2);
	CHK(counter("cuMemcpyDtoH_v2") == 1 && counter("cuMemcpy2D_v2") == 1);
	CHK(counter("cuMemcpy2DAsync_v2") == 1);
}

static void test_rt_via_driver(void)
{
	const char *direct[] = { "FAKECUDA_MEM", "64M", "FAKECUDA_FAIL", "cuMemAlloc_v2#3", NULL };
	const char *through[] = { "FAKECUDA_MEM", "64M", "FAKECUDA_FAIL", "cuMemAlloc_v2#3",
				  "FAKECUDA_RT_VIA_DRIVER", "1", NULL };

	via_driver = 0;
	CU_ASSERT(child_ok(in_child(child_rt_via_driver, direct)));
	via_driver = 1;
	CU_ASSERT(child_ok(in_child(child_rt_via_driver, through)));
}

/* Registers a module variable before main's work, as nvcc's static
 * constructors do; the children inherit the registration. */
static void register_shadow_var(void)
{
	void **h = __cudaRegisterFatBinary(NULL);

	__cudaRegisterVar(h, shadow_var, shadow_var, "shadow_var", 0, sizeof(shadow_var), 0, 0);
}

/* ---- what the real clients reach (issue 18) ---- */

#include "../linked.h"

#define LINKED_NAME(n) #n,
static const char *const linked_names[] = { FC_LINKED_UNEMULATED(LINKED_NAME) };

/*
 * numba-cuda's and PyCUDA's reach: both UUID forms (equal, stable, per
 * device), the compute capability, the usage count; every stub of
 * linked.h is exported, refuses with CUDA_ERROR_NOT_SUPPORTED, is counted
 * and named once on stderr, and is "not found" to cuGetProcAddress under
 * its base name and its own.
 */
static void child_clients_reach(void)
{
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	CUresult (*uuid1)(CUuuid *, CUdevice), (*uuid2)(CUuuid *, CUdevice);
	CUresult (*cc)(int *, int *, CUdevice), (*attach)(CUcontext *, unsigned int);
	CUresult (*detach)(CUcontext), (*stub)(void *, void *);
	CUdriverProcAddressQueryResult q;
	CUuuid a, b, c;
	CUcontext ctx, got;
	char path[] = "/tmp/fakecuda-linked-XXXXXX", text[8192], base[64], *v;
	void *h, *fn;
	int major = 0, minor = 0, fd = mkstemp(path), saved = dup(2);
	size_t i;

	CHK(fd >= 0 && saved >= 0);
	unlink(path);
	h = dlopen("libcuda.so.1", RTLD_NOW);
	CHK(h != NULL);
	*(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
	*(void **)&uuid1 = dlsym(h, "cuDeviceGetUuid");
	*(void **)&uuid2 = dlsym(h, "cuDeviceGetUuid_v2");
	*(void **)&cc = dlsym(h, "cuDeviceComputeCapability");
	*(void **)&attach = dlsym(h, "cuCtxAttach");
	*(void **)&detach = dlsym(h, "cuCtxDetach");
	CHK(gpa && uuid1 && uuid2 && cc && attach && detach);
	CHK(cuInit(0) == CUDA_SUCCESS);
	CHK(uuid2(&a, 0) == CUDA_SUCCESS && uuid1(&b, 0) == CUDA_SUCCESS && uuid2(&c, 0) == CUDA_SUCCESS);
	CHK(memcmp(a.bytes, b.bytes, 16) == 0 && memcmp(a.bytes, c.bytes, 16) == 0);
	CHK(memcmp(a.bytes, "fakecuda", 8) == 0 && a.bytes[15] == 1);
	CHK(uuid2(&a, 1) == CUDA_ERROR_INVALID_DEVICE && uuid2(NULL, 0) == CUDA_ERROR_INVALID_VALUE);
	CHK(gpa("cuDeviceGetUuid", &fn, 13000, 0, &q) == CUDA_SUCCESS && fn == *(void **)&uuid2);
	CHK(gpa("cuDeviceGetUuid", &fn, 11000, 0, &q) == CUDA_SUCCESS && fn == *(void **)&uuid1);
	CHK(cc(&major, &minor, 0) == CUDA_SUCCESS && major == 9 && minor == 0);

	CHK(attach(&got, 0) == CUDA_ERROR_INVALID_CONTEXT);     /* none current */
	CHK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
	CHK(attach(&got, 0) == CUDA_SUCCESS && got == ctx);
	CHK(detach(ctx) == CUDA_SUCCESS && cuCtxGetCurrent(&got) == CUDA_SUCCESS && got == ctx);
	CHK(detach(NULL) == CUDA_ERROR_INVALID_CONTEXT);

	dup2(fd, 2);
	for (i = 0; i < sizeof(linked_names) / sizeof(linked_names[0]); i++) {
		*(void **)&stub = dlsym(h, linked_names[i]);
		CHK(stub != NULL);
		CHK(stub(NULL, NULL) == CUDA_ERROR_NOT_SUPPORTED && stub(NULL, NULL) == CUDA_ERROR_NOT_SUPPORTED);
		CHK(counter(linked_names[i]) == 2);
		fn = &q;
		CHK(gpa(linked_names[i], &fn, 13000, 0, &q) == CUDA_ERROR_NOT_FOUND && fn == NULL &&
		    q == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
		snprintf(base, sizeof(base), "%s", linked_names[i]);
		v = strstr(base, "_v");
		if (v)
			*v = '\0';
		CHK(gpa(base, &fn, 13000, 0, &q) == CUDA_ERROR_NOT_FOUND &&
		    q == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	}
	fflush(stderr);
	dup2(saved, 2);
	read_back(fd, text, sizeof(text));
	CHK(strstr(text, "fakecuda: cuArrayCreate_v2 is not emulated (CUDA_ERROR_NOT_SUPPORTED)\n") != NULL);
	CHK(strstr(strstr(text, "cuArrayCreate_v2 ") + 1, "cuArrayCreate_v2 ") == NULL); /* named once */
	CHK(strstr(text, "cuArray3DCreate_v2 is not emulated") != NULL);
	dlclose(h);
}

static void test_clients_reach(void)
{
	CU_ASSERT(child_ok(in_child(child_clients_reach, NULL)));
}

/*
 * A context of its own (cuCtxCreate) is separate: a distinct id, its
 * allocations refused to copies and memsets made in the primary context
 * and the other way round (ctx_refusals counts each), its own copies
 * working; cuCtxDestroy frees its memory, pops it, and its handle is then
 * invalid.
 */
static void child_contexts(void)
{
	CUcontext prim, own, cur;
	CUdeviceptr dp, dq;
	unsigned long long id_p, id_o;
	unsigned long long before;
	char buf[256] = { 1 }, back[256];

	CHK(cuInit(0) == CUDA_SUCCESS);
	CHK(cuDevicePrimaryCtxRetain(&prim, 0) == CUDA_SUCCESS && cuCtxSetCurrent(prim) == CUDA_SUCCESS);
	CHK(cuMemAlloc(&dp, sizeof(buf)) == CUDA_SUCCESS);
	CHK(cuCtxCreate(&own, NULL, 0, 0) == CUDA_SUCCESS && own != prim);
	CHK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == own);
	CHK(cuCtxGetId(prim, &id_p) == CUDA_SUCCESS && cuCtxGetId(own, &id_o) == CUDA_SUCCESS && id_p != id_o);
	CHK(cuMemAlloc(&dq, sizeof(buf)) == CUDA_SUCCESS);
	before = counter("alloc_bytes");
	CHK(cuMemcpyHtoD(dq, buf, sizeof(buf)) == CUDA_SUCCESS);
	CHK(cuMemcpyDtoH(back, dq, sizeof(back)) == CUDA_SUCCESS && memcmp(back, buf, sizeof(buf)) == 0);
	CHK(cuMemcpyHtoD(dp, buf, sizeof(buf)) == CUDA_ERROR_INVALID_VALUE);     /* the primary's memory */
	CHK(cuMemsetD8(dp, 0, sizeof(buf)) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuMemcpyDtoD(dq, dp, sizeof(buf)) == CUDA_ERROR_INVALID_VALUE);
	CHK(counter("ctx_refusals") == 3);
	CHK(cuCtxSetCurrent(prim) == CUDA_SUCCESS);
	CHK(cuMemcpyHtoD(dq, buf, sizeof(buf)) == CUDA_ERROR_INVALID_VALUE);     /* and the other way */
	CHK(cuMemcpyHtoD(dp, buf, sizeof(buf)) == CUDA_SUCCESS);
	CHK(counter("ctx_refusals") == 4);
	CHK(cuCtxPushCurrent(own) == CUDA_SUCCESS && cuCtxDestroy(own) == CUDA_SUCCESS);
	CHK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == prim);              /* popped */
	CHK(counter("alloc_bytes") == before - 256);                            /* its memory freed */
	CHK(cuCtxSetCurrent(own) == CUDA_ERROR_INVALID_CONTEXT);
	CHK(cuCtxDestroy(own) == CUDA_ERROR_INVALID_CONTEXT && cuCtxDestroy(prim) == CUDA_ERROR_INVALID_CONTEXT);
	CHK(cuMemFree(dp) == CUDA_SUCCESS);
}

static void test_contexts(void)
{
	CU_ASSERT(child_ok(in_child(child_contexts, NULL)));
}

/* The kilobytes of shared memory this process has resident (RssShmem). */
static unsigned long long rss_shmem_kb(void)
{
	char line[256];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssShmem: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/*
 * FAKECUDA_PREFAULT (set by the caller, with a 64 MiB device): 1 makes the
 * whole arena resident after the first call, before anything touched it;
 * alloc makes an allocation's memory resident when it is made (whole
 * 2 MiB chunks, so 8 MiB asked is 8 to 10 MiB) and no more, its contents
 * intact; unset, an allocation is not resident.
 */
static void child_prefault(void)
{
	const char *mode = getenv("FAKECUDA_PREFAULT");
	unsigned char *d, *e, back[4096], want[4096];

	CHK(cudaMalloc((void **)&d, 8 << 20) == cudaSuccess);
	if (!mode)
		CHK(rss_shmem_kb() < 4 * 1024);
	else if (strcmp(mode, "1") == 0)
		CHK(rss_shmem_kb() >= 64 * 1024);
	else
		CHK(rss_shmem_kb() >= 8 * 1024 && rss_shmem_kb() < 16 * 1024);
	/* bytes written stay when memory next to them is allocated and made resident */
	memset(want, 0x5a, sizeof(want));
	CHK(cudaMemcpy(d + (8 << 20) - sizeof(want), want, sizeof(want), cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cudaMalloc((void **)&e, 4 << 20) == cudaSuccess);
	CHK(cudaMemcpy(back, d + (8 << 20) - sizeof(back), sizeof(back), cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(back, want, sizeof(want)) == 0);
	if (mode && strcmp(mode, "alloc") == 0)
		CHK(rss_shmem_kb() >= 12 * 1024 && rss_shmem_kb() < 20 * 1024);
	CHK(cudaFree(e) == cudaSuccess && cudaFree(d) == cudaSuccess);
}

static void test_prefault(void)
{
	static const char *const arena[] = { "FAKECUDA_MEM", "64M", "FAKECUDA_PREFAULT", "1", NULL };
	static const char *const alloc[] = { "FAKECUDA_MEM", "64M", "FAKECUDA_PREFAULT", "alloc", NULL };
	static const char *const off[] = { "FAKECUDA_MEM", "64M", NULL };

	CU_ASSERT(child_ok(in_child(child_prefault, arena)));
	CU_ASSERT(child_ok(in_child(child_prefault, alloc)));
	CU_ASSERT(child_ok(in_child(child_prefault, off)));
}

static const CU_TestInfo tests[] = {
	{ "a pitched copy moves exactly the pitched bytes, once, with pinned and pageable timing",
	  test_pitched_copies },
	{ "a stream callback runs on the worker after earlier work, and stream queries answer",
	  test_callbacks_run_in_order },
	{ "a registered variable round-trips through the symbol copies", test_symbols_round_trip },
	{ "peer access is tracked and peer copies move bytes between devices", test_peers },
	{ "an explicit graph replays its nodes in order and reads pinned sources at launch",
	  test_explicit_graphs },
	{ "pools, limits, host flags, prefetch and kernel queries answer as documented",
	  test_misc },
	{ "a device reset frees every allocation and starts a context with a new id", test_reset },
	{ "the runtime through the driver gives the same results and counts, using the driver's entry points",
	  test_rt_via_driver },
	{ "the driver allocates stream-ordered, managed and pitched memory, keeps a context stack, and finds every entry",
	  test_driver_alloc },
	{ "no private export table is handed out: each id is not found and named once on stderr",
	  test_export_table },
	{ "cuCtxSynchronize at CUDA 13 waits for the context it names, the current one for NULL",
	  test_ctx_sync_v2 },
	{ "a created context is separate: its own id and memory, access across contexts refused, destroyed with its memory",
	  test_contexts },
	{ "the clients' reach: UUIDs, compute capability, attach/detach; each linked stub refuses, is named once, is not found",
	  test_clients_reach },
	{ "FAKECUDA_PREFAULT=1 makes the arena resident at the first call, alloc each allocation when made; unset, memory is touched lazily",
	  test_prefault },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "emulated device API",
	.tests = tests,
	.before = register_shadow_var,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
