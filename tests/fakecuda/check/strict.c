/*
 * strict.c: proves that the emulated CUDA device is strict enough to catch
 * the bugs vrampool could have. Built against the real toolkit and run with
 * LD_LIBRARY_PATH=build/fakecuda, so the emulation replaces libcudart and
 * libcuda exactly as for a user's program.
 *
 * Each case runs in a fork()ed child that sets its FAKECUDA_* variables
 * before its first CUDA call (the emulation reads them then); the child
 * exits with the line number of the first failed check, or 0. An alarm
 * turns a hang into a failure.
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

#define MB (1024 * 1024)

#include "harness.h"

/* ---- stale data without a cross-stream wait ---- */

static int with_wait;

/* Twenty trials: stream 1 uploads fresh bytes, stream 2 reads them back.
 * Without the event wait some trial must see stale bytes; with it, none. */
static void child_cross_stream(void)
{
	cudaStream_t s1, s2;
	cudaEvent_t e;
	unsigned char *h, *out, *d;
	int trial, stale = 0;

	CHK(cudaMalloc((void **)&d, MB) == cudaSuccess);
	CHK(cudaMallocHost((void **)&h, MB) == cudaSuccess);
	CHK(cudaMallocHost((void **)&out, MB) == cudaSuccess);
	CHK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
	CHK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
	CHK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
	for (trial = 1; trial <= 20; trial++) {
		CHK(cudaMemset(d, 0, MB) == cudaSuccess);
		memset(h, trial, MB);
		CHK(cudaMemcpyAsync(d, h, MB, cudaMemcpyHostToDevice, s1) == cudaSuccess);
		if (with_wait) {
			CHK(cudaEventRecord(e, s1) == cudaSuccess);
			CHK(cudaStreamWaitEvent(s2, e, 0) == cudaSuccess);
		}
		CHK(cudaMemcpyAsync(out, d, MB, cudaMemcpyDeviceToHost, s2) == cudaSuccess);
		CHK(cudaStreamSynchronize(s2) == cudaSuccess);
		CHK(cudaStreamSynchronize(s1) == cudaSuccess);
		stale += out[0] != trial || out[MB - 1] != trial;
	}
	if (with_wait)
		CHK(stale == 0);
	else
		CHK(stale > 0);
}

static void test_missing_wait_reads_stale(void)
{
	const char *env[] = { "FAKECUDA_JITTER_US", "1000", NULL };

	with_wait = 0;
	CU_ASSERT(child_ok(in_child(child_cross_stream, env)));
	with_wait = 1;
	CU_ASSERT(child_ok(in_child(child_cross_stream, env)));
}

/* ---- no host access to device memory ---- */

static void child_host_read(void)
{
	volatile char *d;

	CHK(cudaMalloc((void **)&d, 4096) == cudaSuccess);
	fprintf(stderr, "reading device memory from the host (a SIGSEGV is expected)\n");
	(void)d[0];
}

static void test_host_read_faults(void)
{
	int st = in_child(child_host_read, NULL);

	CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

/* ---- capacity ---- */

static void child_oom(void)
{
	size_t f, t;
	void *p, *q;
	CUdeviceptr dp;

	CHK(cudaMalloc(&p, 32 * MB) == cudaSuccess);
	CHK(cudaMemGetInfo(&f, &t) == cudaSuccess);
	CHK(t == 64 * MB && f == 32 * MB);
	CHK(cudaMalloc(&q, 33 * MB) == cudaErrorMemoryAllocation);
	CHK(cudaGetLastError() == cudaErrorMemoryAllocation);
	CHK(cudaGetLastError() == cudaSuccess);
	CHK(cuInit(0) == CUDA_SUCCESS);
	CHK(cuMemAlloc(&dp, 33 * MB) == CUDA_ERROR_OUT_OF_MEMORY);
	CHK(cudaGetLastError() == cudaSuccess); /* the driver leaves it alone */
	CHK(counter("oom_errors") == 2);
	CHK(cudaFree(p) == cudaSuccess);
	CHK(cudaMalloc(&q, 64 * MB) == cudaSuccess);
	CHK(counter("peak_alloc") == 64 * MB);
}

static void test_allocation_past_capacity_fails(void)
{
	const char *env[] = { "FAKECUDA_MEM", "64M", NULL };

	CU_ASSERT(child_ok(in_child(child_oom, env)));
}

/* ---- ground-truth counters ---- */

static void child_never_uses_cuda(void)
{
}

static void child_counts(void)
{
	char host[1000], back[1000];
	void *a, *b;
	cudaStream_t s;

	memset(host, 7, sizeof(host));
	CHK(cudaMalloc(&a, 1000) == cudaSuccess);
	CHK(cudaMalloc(&b, 1000) == cudaSuccess);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaMemcpy(a, host, 1000, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cudaMemcpyAsync(a, host, 1000, cudaMemcpyDefault, s) == cudaSuccess);
	CHK(cuMemcpyHtoDAsync((CUdeviceptr)a, host, 1000, s) == CUDA_SUCCESS);
	CHK(cuMemcpyDtoD((CUdeviceptr)b, (CUdeviceptr)a, 500) == CUDA_SUCCESS);
	CHK(cudaMemcpy(back, b, 200, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(cudaMemcpyAsync(back, a, 200, cudaMemcpyDefault, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(back[0] == 7 && back[199] == 7);
	CHK(counter("h2d_calls") == 3 && counter("h2d_bytes") == 3000);
	CHK(counter("d2d_calls") == 1 && counter("d2d_bytes") == 500);
	CHK(counter("d2h_calls") == 2 && counter("d2h_bytes") == 400);
	CHK(counter("alloc_bytes") == 2048 && counter("cudaMalloc") == 2);
	/* A grandchild that never calls CUDA writes no report and exits. */
	CHK(child_ok(in_child(child_never_uses_cuda, NULL)));
}

static void test_counters_match_copies(void)
{
	char path[128], pattern[128], cmd[256], want[64], buf[8192];
	const char *env[] = { "FAKECUDA_REPORT", pattern, NULL };
	int st, n;
	FILE *f;

	snprintf(pattern, sizeof(pattern), "/tmp/fakecuda-strict-%d-%%p.json", (int)getpid());
	st = in_child(child_counts, env);
	CU_ASSERT(child_ok(st));
	/* The child's pid is not returned by in_child: list this run's reports. */
	snprintf(cmd, sizeof(cmd), "ls /tmp/fakecuda-strict-%d-*.json 2>/dev/null", (int)getpid());
	f = popen(cmd, "r");
	CU_ASSERT_FATAL(f != NULL);
	n = fscanf(f, "%127s", path);
	CU_ASSERT(fscanf(f, "%127s", buf) != 1); /* none from the grandchild */
	pclose(f);
	CU_ASSERT_FATAL(n == 1);
	f = fopen(path, "r");
	CU_ASSERT_FATAL(f != NULL);
	n = (int)fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	snprintf(want, sizeof(want), "\"h2d_bytes\": 3000");
	CU_ASSERT(strstr(buf, want) != NULL);
	CU_ASSERT(strstr(buf, "\"d2h_calls\": 2") != NULL);
	CU_ASSERT(strstr(buf, "\"cudaMemcpyAsync\": 2") != NULL);
	unlink(path);
}

/* ---- pinned sources are read when the copy runs, pageable at call time ---- */

static void child_pinned_vs_pageable(void)
{
	unsigned char *pinned, pageable[4096], out[4096];
	void *a, *b;
	cudaStream_t s;

	CHK(cudaHostAlloc((void **)&pinned, 4096, 0) == cudaSuccess);
	CHK(cudaMalloc(&a, 4096) == cudaSuccess);
	CHK(cudaMalloc(&b, 4096) == cudaSuccess);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	memset(pinned, 'a', 4096);
	memset(pageable, 'a', 4096);
	CHK(cudaLaunchHostFunc(s, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpyAsync(a, pinned, 4096, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(cudaMemcpyAsync(b, pageable, 4096, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(cudaStreamQuery(s) == cudaErrorNotReady);
	memset(pinned, 'b', 4096);
	memset(pageable, 'b', 4096);
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy(out, a, 4096, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(out[0] == 'b' && out[4095] == 'b');
	CHK(cudaMemcpy(out, b, 4096, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(out[0] == 'a' && out[4095] == 'a');
	/* A registered range counts as pinned too. */
	atomic_store(&gate, 0);
	memset(pageable, 'c', 4096);
	CHK(cudaHostRegister(pageable, 4096, 0) == cudaSuccess);
	CHK(cudaLaunchHostFunc(s, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpyAsync(b, pageable, 4096, cudaMemcpyHostToDevice, s) == cudaSuccess);
	memset(pageable, 'd', 4096);
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy(out, b, 4096, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(out[0] == 'd');
	CHK(cudaHostUnregister(pageable) == cudaSuccess);
	CHK(cudaHostUnregister(pageable) == cudaErrorHostMemoryNotRegistered);
}

static void test_pinned_read_late_pageable_early(void)
{
	CU_ASSERT(child_ok(in_child(child_pinned_vs_pageable, NULL)));
}

/* ---- legacy and per-thread default streams ---- */

static void *other_thread(void *arg)
{
	(void)arg;
	/* This thread's per-thread stream is not the main thread's (held). */
	if (cudaStreamSynchronize(cudaStreamPerThread) != cudaSuccess)
		return (void *)1;
	return NULL;
}

static void child_legacy(void)
{
	cudaStream_t blocking, nonblocking;
	pthread_t th;
	void *ret = (void *)1;
	void *d;
	char host[64] = { 0 };

	CHK(cudaMalloc(&d, 64) == cudaSuccess);
	CHK(cudaStreamCreate(&blocking) == cudaSuccess);
	CHK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking) == cudaSuccess);

	/* Legacy work waits for a held non-blocking stream? No. */
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(nonblocking, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpyAsync(d, host, 64, cudaMemcpyHostToDevice, 0) == cudaSuccess);
	CHK(cudaStreamSynchronize(0) == cudaSuccess);
	CHK(cudaStreamQuery(nonblocking) == cudaErrorNotReady);
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(nonblocking) == cudaSuccess);

	/* Legacy work waits for a held blocking stream. */
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(blocking, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpyAsync(d, host, 64, cudaMemcpyHostToDevice, cudaStreamLegacy) == cudaSuccess);
	sleep_ms(30);
	CHK(cudaStreamQuery(0) == cudaErrorNotReady);
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(0) == cudaSuccess);

	/* Blocking streams wait for earlier legacy work; non-blocking do not. */
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(0, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpyAsync(d, host, 64, cudaMemcpyHostToDevice, blocking) == cudaSuccess);
	CHK(cudaMemcpyAsync(d, host, 64, cudaMemcpyHostToDevice, nonblocking) == cudaSuccess);
	CHK(cudaStreamSynchronize(nonblocking) == cudaSuccess);
	sleep_ms(30);
	CHK(cudaStreamQuery(blocking) == cudaErrorNotReady);
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(blocking) == cudaSuccess);

	/* The per-thread stream is per thread, and it is a blocking stream. */
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(cudaStreamPerThread, hold_stream, NULL) == cudaSuccess);
	CHK(pthread_create(&th, NULL, other_thread, NULL) == 0);
	CHK(pthread_join(th, &ret) == 0 && ret == NULL);
	CHK(cudaStreamQuery(cudaStreamPerThread) == cudaErrorNotReady);
	CHK(cudaMemcpyAsync(d, host, 64, cudaMemcpyHostToDevice, 0) == cudaSuccess);
	sleep_ms(30);
	CHK(cudaStreamQuery(0) == cudaErrorNotReady);
	atomic_store(&gate, 1);
	CHK(cudaDeviceSynchronize() == cudaSuccess);
	CHK(cudaStreamQuery(0) == cudaSuccess);
}

static void test_legacy_and_per_thread_streams(void)
{
	CU_ASSERT(child_ok(in_child(child_legacy, NULL)));
}

/* ---- events ---- */

static void child_events(void)
{
	cudaStream_t s1, s2;
	cudaEvent_t a, b, notiming;
	unsigned char *h, *out;
	void *d;
	float ms = -1;

	CHK(cudaMalloc(&d, 8 * MB) == cudaSuccess);
	CHK(cudaMallocHost((void **)&h, 8 * MB) == cudaSuccess);
	CHK(cudaMallocHost((void **)&out, 8 * MB) == cudaSuccess);
	CHK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
	CHK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
	CHK(cudaEventCreate(&a) == cudaSuccess);
	CHK(cudaEventCreate(&b) == cudaSuccess);
	CHK(cudaEventCreateWithFlags(&notiming, cudaEventDisableTiming) == cudaSuccess);
	CHK(cudaEventQuery(a) == cudaSuccess); /* never recorded */
	CHK(cudaStreamWaitEvent(s2, b, 0) == cudaSuccess); /* a no-op */

	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(s1, hold_stream, NULL) == cudaSuccess);
	CHK(cudaEventRecord(a, s1) == cudaSuccess);
	memset(h, 9, 8 * MB);
	CHK(cudaMemcpyAsync(d, h, 8 * MB, cudaMemcpyHostToDevice, s1) == cudaSuccess);
	CHK(cudaEventRecord(b, s1) == cudaSuccess);
	CHK(cudaEventRecord(notiming, s1) == cudaSuccess);
	CHK(cudaStreamWaitEvent(s2, b, 0) == cudaSuccess);
	CHK(cudaMemcpyAsync(out, d, 8 * MB, cudaMemcpyDeviceToHost, s2) == cudaSuccess);
	sleep_ms(20);
	CHK(cudaEventQuery(b) == cudaErrorNotReady);
	CHK(cudaEventElapsedTime(&ms, a, b) == cudaErrorNotReady);
	CHK(cudaStreamQuery(s2) == cudaErrorNotReady);
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(s2) == cudaSuccess);
	CHK(out[0] == 9 && out[8 * MB - 1] == 9);
	CHK(cudaEventSynchronize(b) == cudaSuccess);
	CHK(cudaEventQuery(b) == cudaSuccess);
	CHK(cudaEventElapsedTime(&ms, a, b) == cudaSuccess && ms > 0);
	CHK(cudaEventElapsedTime(&ms, a, notiming) == cudaErrorInvalidResourceHandle);
	CHK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
	CHK(cudaEventDestroy(a) == cudaSuccess);
	CHK(cudaEventQuery(a) == cudaErrorInvalidResourceHandle);
}

static void test_events(void)
{
	const char *env[] = { "FAKECUDA_JITTER_US", "300", NULL };

	CU_ASSERT(child_ok(in_child(child_events, env)));
}

/* ---- stream capture ---- */

static void child_capture(void)
{
	enum cudaStreamCaptureStatus st;
	unsigned long long id = 0;
	unsigned char *pinned, out[256];
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;
	void *d;
	CUstreamCaptureStatus cst;

	CHK(cudaMalloc(&d, 256) == cudaSuccess);
	CHK(cudaMemset(d, 0, 256) == cudaSuccess);
	CHK(cudaMallocHost((void **)&pinned, 256) == cudaSuccess);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported);
	CHK(cudaGetLastError() == cudaErrorStreamCaptureUnsupported);
	CHK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
	CHK(cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive);
	CHK(cudaStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL) == cudaSuccess && id != 0);
	CHK(cuStreamGetCaptureInfo(s, &cst, NULL, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
	    cst == CU_STREAM_CAPTURE_STATUS_ACTIVE);
	memset(pinned, 'x', 256);
	CHK(cudaMemcpyAsync(d, pinned, 256, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(counter("h2d_calls") == 0);
	CHK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported);
	CHK(cudaStreamEndCapture(s, &g) == cudaSuccess);
	CHK(cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusNone);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy(out, d, 256, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(out[0] == 0 && out[255] == 0); /* captured, not run */
	memset(pinned, 'y', 256);
	CHK(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
	CHK(cudaGraphLaunch(x, s) == cudaSuccess);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy(out, d, 256, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(out[0] == 'y' && out[255] == 'y'); /* replayed, source read at replay */
	CHK(counter("h2d_calls") == 1);
	CHK(cudaGraphExecDestroy(x) == cudaSuccess);
	CHK(cudaGraphDestroy(g) == cudaSuccess);
}

static void test_capture_records_and_replays(void)
{
	CU_ASSERT(child_ok(in_child(child_capture, NULL)));
}

/* ---- the driver API through dlopen and cuGetProcAddress ---- */

static void child_driver(void)
{
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	CUresult (*init)(unsigned), (*alloc)(CUdeviceptr *, size_t), (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*getctx)(CUcontext *);
	void *h, *fp, *fp_ptsz, *sym;
	CUdriverProcAddressQueryResult qr;
	CUdeviceptr dp;
	CUcontext ctx = NULL;
	char in[100], out[100];

	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHK(h != NULL);
	*(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
	CHK(gpa != NULL);
	CHK(gpa("cuInit", (void **)&init, 13000, 0, &qr) == CUDA_SUCCESS && qr == CU_GET_PROC_ADDRESS_SUCCESS);
	CHK(gpa("cuMemAlloc", (void **)&alloc, 13000, 0, &qr) == CUDA_SUCCESS);
	CHK(gpa("cuMemcpyDtoH", (void **)&dtoh, 13000, 0, &qr) == CUDA_SUCCESS);
	CHK(gpa("cuCtxGetCurrent", (void **)&getctx, 13000, 0, &qr) == CUDA_SUCCESS);
	sym = dlsym(h, "cuMemAlloc_v2");
	CHK(sym != NULL && sym == *(void **)&alloc);
	CHK(gpa("cuMemcpyHtoDAsync", &fp, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &qr) == CUDA_SUCCESS);
	CHK(gpa("cuMemcpyHtoDAsync", &fp_ptsz, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &qr) == CUDA_SUCCESS);
	CHK(fp == dlsym(h, "cuMemcpyHtoDAsync_v2") && fp_ptsz == dlsym(h, "cuMemcpyHtoDAsync_v2_ptsz"));
	CHK(gpa("cuStreamGetCaptureInfo", &fp, 12000, 0, &qr) == CUDA_ERROR_NOT_FOUND &&
	    qr == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHK(gpa("cuNoSuchThing", &fp, 13000, 0, &qr) == CUDA_ERROR_NOT_FOUND &&
	    qr == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CHK(alloc(&dp, 100) == CUDA_ERROR_NOT_INITIALIZED);
	CHK(init(0) == CUDA_SUCCESS);
	CHK(getctx(&ctx) == CUDA_SUCCESS && ctx == NULL);
	CHK(alloc(&dp, 100) == CUDA_ERROR_INVALID_CONTEXT);
	CHK(cudaFree(0) == cudaSuccess); /* the runtime binds the primary context */
	CHK(getctx(&ctx) == CUDA_SUCCESS && ctx != NULL);
	CHK(alloc(&dp, 100) == CUDA_SUCCESS);
	memset(in, 42, sizeof(in));
	CHK(cudaMemcpy((void *)dp, in, 100, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(dtoh(out, dp, 100) == CUDA_SUCCESS && memcmp(in, out, 100) == 0);
	CHK(counter("h2d_calls") == 1 && counter("d2h_calls") == 1);
	CHK(cudaFree((void *)dp) == cudaSuccess);
}

static void test_driver_through_dlopen(void)
{
	CU_ASSERT(child_ok(in_child(child_driver, NULL)));
}

/* ---- fault injection and bad arguments ---- */

static void child_faults(void)
{
	void *a, *b;
	char host[16];
	cudaStream_t s;
	cudaEvent_t e;

	CHK(cudaMalloc(&a, 16) == cudaSuccess);
	CHK(cudaMalloc(&b, 16) == cudaErrorMemoryAllocation);
	CHK(cudaGetLastError() == cudaErrorMemoryAllocation);
	CHK(cudaMalloc(&b, 16) == cudaErrorMemoryAllocation);
	CHK(cudaEventCreate(&e) == cudaSuccess);
	CHK(cuEventRecord(e, 0) == CUDA_ERROR_UNKNOWN);
	CHK(counter("injected_faults") == 3);
	CHK(counter("oom_errors") == 0);
	/* Bad arguments give the real codes. */
	CHK(cudaFree(host) == cudaErrorInvalidValue);
	CHK(cudaMemcpy(a, host, 32, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cudaMemcpy(host, a, 16, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaStreamDestroy(s) == cudaSuccess);
	CHK(cudaStreamQuery(s) == cudaErrorInvalidResourceHandle);
	CHK(cudaSetDevice(1) == cudaErrorInvalidDevice);
}

static void test_fault_injection(void)
{
	const char *env[] = { "FAKECUDA_FAIL", "cudaMalloc@2,cuEventRecord", NULL };

	CU_ASSERT(child_ok(in_child(child_faults, env)));
}

/* Whether the report written now contains TEXT after its "injected" key. */
static int fault_report_has(const char *text)
{
	int (*write_report)(const char *path);
	char path[64], buf[8192];
	const char *inj;
	size_t n;
	FILE *f;

	*(void **)&write_report = dlsym(RTLD_DEFAULT, "fakecuda_write_report");
	snprintf(path, sizeof(path), "/tmp/fakecuda-faults-%d.json", (int)getpid());
	if (!write_report || write_report(path) != 0 || !(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	inj = strstr(buf, "\"injected\": {");
	return inj && strstr(inj, text) != NULL;
}

/* Only the 2nd and 4th cudaMalloc fail (out of memory), the 3rd
 * cuMemsetD8 only, cudaStreamCreate from the 2nd on: '#' items repeat and
 * mix with '@' items in one list. */
static void child_fault_once(void)
{
	void *a[6];
	cudaStream_t s;
	int i;

	CHK(cudaMalloc(&a[0], 16) == cudaSuccess);
	CHK(cudaMalloc(&a[1], 16) == cudaErrorMemoryAllocation);
	CHK(cudaGetLastError() == cudaErrorMemoryAllocation);
	CHK(cudaMalloc(&a[1], 16) == cudaSuccess);
	CHK(cudaMalloc(&a[2], 16) == cudaErrorMemoryAllocation);
	for (i = 2; i < 6; i++)
		CHK(cudaMalloc(&a[i], 16) == cudaSuccess);
	CHK(cuMemsetD8((CUdeviceptr)a[0], 1, 16) == CUDA_SUCCESS);
	CHK(cuMemsetD8((CUdeviceptr)a[0], 1, 16) == CUDA_SUCCESS);
	CHK(cuMemsetD8((CUdeviceptr)a[0], 1, 16) == CUDA_ERROR_UNKNOWN);
	CHK(cuMemsetD8((CUdeviceptr)a[0], 1, 16) == CUDA_SUCCESS);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaStreamCreate(&s) == cudaErrorUnknown);
	CHK(cudaStreamCreate(&s) == cudaErrorUnknown);
	CHK(counter("injected_faults") == 5);
	CHK(counter("oom_errors") == 0);
	CHK(counter("cudaMalloc") == 8 && counter("memset_calls") == 3);
	/* Per entry point too, mid-run and in the report's "injected". */
	CHK(counter("injected:cudaMalloc") == 2 && counter("injected:cuMemsetD8_v2") == 1);
	CHK(counter("injected:cudaStreamCreate") == 2 && counter("injected:cudaFree") == 0);
	CHK(fault_report_has("\"injected\": {") &&
	    fault_report_has("\"cudaMalloc\": 2") && fault_report_has("\"cuMemsetD8_v2\": 1"));
}

static void test_fault_once(void)
{
	const char *env[] = { "FAKECUDA_FAIL",
			      "cudaMalloc#2,cuMemsetD8_v2#3,cudaStreamCreate@2,cudaMalloc#4", NULL };

	CU_ASSERT(child_ok(in_child(child_fault_once, env)));
}

/* ---- several devices ---- */

static void child_devices(void)
{
	void *a, *b, *c;
	int n = 0, dev = -1;
	size_t f, t;

	CHK(cudaGetDeviceCount(&n) == cudaSuccess && n == 2);
	CHK(cudaMalloc(&a, 3 * MB) == cudaSuccess);
	CHK(cudaSetDevice(1) == cudaSuccess);
	CHK(cudaGetDevice(&dev) == cudaSuccess && dev == 1);
	CHK(cudaMalloc(&b, 3 * MB) == cudaSuccess); /* device 0's use does not count */
	CHK(cudaMalloc(&c, 2 * MB) == cudaErrorMemoryAllocation);
	CHK(cudaMemGetInfo(&f, &t) == cudaSuccess && f == 1 * MB && t == 4 * MB);
	CHK(cudaSetDevice(0) == cudaSuccess);
	CHK(cudaMemcpy(b, a, MB, cudaMemcpyDeviceToDevice) == cudaSuccess);
}

static void test_devices_have_own_arenas(void)
{
	const char *env[] = { "FAKECUDA_DEVICES", "2", "FAKECUDA_MEM", "4M", NULL };

	CU_ASSERT(child_ok(in_child(child_devices, env)));
}

/* ---- a batch: one operation, sources read as their access order says ---- */

/*
 * cudaMemcpyBatchAsync of three host sources behind a held stream: ONE
 * stream operation (three counted copies). A source read during the call
 * lands as it was then; a pageable or pinned one read in stream order
 * lands as it is when the batch runs. The legacy stream is refused.
 */
static void child_batch(void)
{
	static unsigned char page_early[64], page_late[64];
	unsigned char *pin, back[3 * 64];
	void *dsts[3];
	const void *srcs[3] = { page_early, page_late, NULL };
	size_t sizes[3] = { 64, 64, 64 }, idxs[2] = { 0, 1 };
	struct cudaMemcpyAttributes attrs[2] = { { .srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall },
						 { .srcAccessOrder = cudaMemcpySrcAccessOrderStream } };
	unsigned char *d;
	cudaStream_t s;

	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaMallocHost((void **)&pin, 64) == cudaSuccess);
	CHK(cudaMalloc((void **)&d, 3 * 64) == cudaSuccess);
	srcs[2] = pin;
	for (int i = 0; i < 3; i++)
		dsts[i] = d + i * 64;
	memset(page_early, 1, 64);
	memset(page_late, 2, 64);
	memset(pin, 3, 64);
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(s, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 2, s) == cudaSuccess);
	CHK(counter("ops_batch") == 1 && counter("ops_copy") == 0 && counter("h2d_calls") == 3);
	memset(page_early, 4, 64);      /* read during the call: too late */
	memset(page_late, 5, 64);       /* read in stream order: in time */
	memset(pin, 6, 64);
	atomic_store(&gate, 1);
	CHK(cudaStreamSynchronize(s) == cudaSuccess);
	CHK(cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(back[0] == 1 && back[63] == 1 && back[64] == 5 && back[127] == 5 && back[128] == 6 && back[191] == 6);
	CHK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 2, 0) == cudaErrorInvalidValue);
	CHK(counter("ops_batch") == 1 && counter("h2d_bytes") == 3 * 64);
}

static void test_batch(void)
{
	const char *env[] = { "FAKECUDA_JITTER_US", "200", NULL };

	CU_ASSERT(child_ok(in_child(child_batch, env)));
}

/* A query of the legacy stream answers as its synchronisation waits: for held blocking streams too. */
static void child_legacy_query(void)
{
	cudaStream_t blocking, nonblocking;

	CHK(cudaStreamCreate(&blocking) == cudaSuccess);
	CHK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking) == cudaSuccess);
	CHK(cudaStreamQuery(0) == cudaSuccess);
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(nonblocking, hold_stream, NULL) == cudaSuccess);
	CHK(cudaStreamQuery(0) == cudaSuccess);
	CHK(cudaLaunchHostFunc(blocking, hold_stream, NULL) == cudaSuccess);
	CHK(cudaStreamQuery(0) == cudaErrorNotReady && cudaStreamQuery(nonblocking) == cudaErrorNotReady);
	atomic_store(&gate, 1);
	CHK(cudaDeviceSynchronize() == cudaSuccess);
	CHK(cudaStreamQuery(0) == cudaSuccess);
}

static void test_legacy_query(void)
{
	CU_ASSERT(child_ok(in_child(child_legacy_query, NULL)));
}

/* ---- the deterministic test hooks: a held stream, settling, faults set mid-run ---- */

/* A FAKECUDA test hook by name. */
static void *fc_hook(const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);

	CHK(f != NULL);
	return f;
}

/*
 * Stream a is held: an upload and an event record wait on it; stream b
 * waits for the event, then sets memory. Settling says what waits (two
 * operations each) without any sleep; nothing has landed; released, a
 * has still to run before b can (b settles at 2 again), then both settle
 * to 0. A fault list set mid-run fails the call it names (counting from
 * the start) and "" clears it.
 */
static void child_test_hooks(void)
{
	int (*hold)(void *, int);
	long long (*settle)(void *);
	int (*fail)(const char *);
	unsigned char src[64], back[128];
	unsigned char *d;
	cudaStream_t a, b;
	cudaEvent_t e;
	char spec[64];

	*(void **)&hold = fc_hook("fakecuda_stream_hold");
	*(void **)&settle = fc_hook("fakecuda_stream_settle");
	*(void **)&fail = fc_hook("fakecuda_fail");
	memset(src, 7, sizeof(src));
	CHK(cudaMalloc((void **)&d, 128) == cudaSuccess);
	CHK(cudaMemset(d, 0, 128) == cudaSuccess);
	CHK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
	CHK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
	CHK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
	CHK(hold((void *)0x1234, 1) == -EBADF && settle((void *)0x1234) == -EBADF);
	CHK(hold(a, 1) == 0);
	CHK(cudaMemcpyAsync(d, src, 64, cudaMemcpyHostToDevice, a) == cudaSuccess);
	CHK(cudaEventRecord(e, a) == cudaSuccess);
	CHK(cudaStreamWaitEvent(b, e, 0) == cudaSuccess);
	CHK(cudaMemsetAsync(d + 64, 9, 64, b) == cudaSuccess);
	CHK(settle(a) == 2 && settle(b) == 2);
	CHK(cudaStreamQuery(a) == cudaErrorNotReady && cudaEventQuery(e) == cudaErrorNotReady);
	CHK(cudaMemcpy(back, d, 128, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(back[0] == 0 && back[64] == 0);
	CHK(hold(a, 0) == 0);
	CHK(settle(b) == 2);            /* still waiting: a has not run yet */
	CHK(settle(a) == 0 && settle(b) == 0);
	CHK(cudaMemcpy(back, d, 128, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(back[0] == 7 && back[63] == 7 && back[64] == 9 && back[127] == 9);
	snprintf(spec, sizeof(spec), "cudaMemsetAsync#%llu", counter("cudaMemsetAsync") + 2);
	CHK(fail(spec) == 1);
	CHK(cudaMemsetAsync(d, 1, 8, b) == cudaSuccess);
	CHK(cudaMemsetAsync(d, 2, 8, b) == cudaErrorUnknown);
	CHK(cudaMemsetAsync(d, 3, 8, b) == cudaSuccess);
	CHK(counter("injected:cudaMemsetAsync") == 1);
	CHK(fail("") == 0 && fail(NULL) == 0);
}

static void test_test_hooks(void)
{
	const char *env[] = { "FAKECUDA_JITTER_US", "200", NULL };

	CU_ASSERT(child_ok(in_child(child_test_hooks, env)));
}

static const CU_TestInfo tests[] = {
	{ "a program that omits a cross-stream wait reads stale data under jitter",
	  test_missing_wait_reads_stale },
	{ "a host read of device memory faults", test_host_read_faults },
	{ "an allocation past capacity fails with the real codes and sets the last error",
	  test_allocation_past_capacity_fails },
	{ "the counters and the exit report match what was copied", test_counters_match_copies },
	{ "pinned sources are read when the copy runs, pageable ones at call time",
	  test_pinned_read_late_pageable_early },
	{ "the legacy stream waits for blocking streams only, the per-thread stream is per thread",
	  test_legacy_and_per_thread_streams },
	{ "events report completion, time, and order two streams", test_events },
	{ "copies on a capturing stream are recorded, not run, and a launch replays them",
	  test_capture_records_and_replays },
	{ "the driver API works through dlopen and cuGetProcAddress and shares memory with the runtime",
	  test_driver_through_dlopen },
	{ "injected faults and bad arguments give natural error codes", test_fault_injection },
	{ "a NAME#N fault fails only the Nth call and mixes with NAME@N", test_fault_once },
	{ "each device has its own arena and capacity", test_devices_have_own_arenas },
	{ "a batch is one operation and reads each source as its access order says", test_batch },
	{ "a query of the legacy stream covers the blocking streams it waits for", test_legacy_query },
	{ "a held stream runs nothing until released, settling says what waits, faults are set mid-run",
	  test_test_hooks },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "emulated device strictness",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
