/*
 * Unit tests of classify: which copies are host-to-device, which the pool
 * takes, and the reason for each that passes through. They run over the
 * emulated device (two devices: FAKECUDA_DEVICES is set before the first
 * call), with the driver API making the memory each case needs.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "pool/classify.h"
#include "device/device.h"
#include "core/layout.h"

#define ROW 3072

static __typeof__(cuInit) *t_init;
static __typeof__(cuDevicePrimaryCtxRetain) *t_retain;
static __typeof__(cuCtxSetCurrent) *t_setctx;
static __typeof__(cuMemAlloc_v2) *t_alloc;
static __typeof__(cuMemAllocManaged) *t_managed;
static __typeof__(cuMemHostAlloc) *t_hostalloc;
static __typeof__(cuStreamCreate) *t_stream_create;
static __typeof__(cuStreamBeginCapture_v2) *t_begin_capture;
static __typeof__(cuStreamEndCapture) *t_end_capture;
static __typeof__(cuLaunchHostFunc) *t_host_func;
static __typeof__(cuStreamSynchronize) *t_stream_sync;
static unsigned long long (*t_counter)(const char *name);
static int (*t_fail)(const char *spec);
static __typeof__(cuCtxCreate_v4) *t_ctx_create;
static __typeof__(cuCtxDestroy_v2) *t_ctx_destroy;

static CUcontext t_ctx[2];
static struct layout t_layout;
static CUdeviceptr t_dev, t_dev1, t_man;
static void *t_pinned;
static unsigned char t_pageable[8 * ROW];

static struct classify_in t_in(const void *dst, const void *src, uint64_t n, enum classify_dir dir)
{
	return (struct classify_in){ .dst = dst, .src = src, .n = n, .dir = dir, .layout = &t_layout,
				     .off_reason = CL_OFF };
}

#define T_PTR(d) ((void *)(uintptr_t)(d))

static void test_pooled(void)
{
	struct classify_in in = t_in(T_PTR(t_dev), t_pageable, 4 * ROW, CL_DIR_H2D);
	struct classify_out out;

	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_POOL);
	CU_ASSERT_EQUAL(out.hit.row, ROW);
	CU_ASSERT_EQUAL(out.dev, 0);
	CU_ASSERT_EQUAL(out.src_pinned, 0);
	CU_ASSERT_EQUAL(out.verify, 0);         /* pageable: staged at the call */
	CU_ASSERT(out.ds == NULL);
	/* a pinned source on the legacy stream is checked when the copy runs */
	in.src = t_pinned;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_POOL);
	CU_ASSERT_EQUAL(out.src_pinned, 1);
	CU_ASSERT_EQUAL(out.verify, 1);
	/* cudaMemcpyDefault from pinned memory into device memory is host-to-device */
	in.dir = CL_DIR_INFER;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_POOL);
	CU_ASSERT_EQUAL(out.src_pinned, 1);
	/* the last rows of the pinned range are pinned; a source that runs past
	 * its end is staged at the call, as pageable memory (both directions) */
	in.dir = CL_DIR_H2D;
	in.src = (unsigned char *)t_pinned + 4 * ROW;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.src_pinned, 1);
	in.src = (unsigned char *)t_pinned + 6 * ROW;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_POOL);
	CU_ASSERT_EQUAL(out.src_pinned, 0);
	CU_ASSERT_EQUAL(out.verify, 0);
	in.dir = CL_DIR_INFER;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.src_pinned, 0);
}

static void test_streams(void)
{
	struct classify_in in = t_in(T_PTR(t_dev), t_pinned, 4 * ROW, CL_DIR_H2D);
	struct classify_out out;
	CUstream s;

	CU_ASSERT_FATAL(t_stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
	/* a pinned source on any stream: whether work is queued ahead is asked when rows are captured */
	in.stream = s;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT(out.ds == s);
	CU_ASSERT_EQUAL(out.verify, 1);
	/* _ptsz with stream 0 is the per-thread stream, and so is a synchronous _ptds */
	in.stream = NULL;
	in.per_thread = 1;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT(out.ds == DEV_STREAM_PER_THREAD);
	in.sync = 1;
	in.stream = s;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT(out.ds == DEV_STREAM_PER_THREAD);
	in.per_thread = 0;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT(out.ds == NULL);
	/* a stream being captured into a graph: stand aside */
	in.sync = 0;
	in.stream = s;
	CU_ASSERT_FATAL(t_begin_capture(s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_CAPTURING);
	{
		CUgraph g;

		CU_ASSERT(t_end_capture(s, &g) == CUDA_SUCCESS);
	}
}

static void test_passthrough_reasons(void)
{
	struct classify_in in;
	struct classify_out out;

	/* no spec matches the size: no pointer query needed */
	in = t_in(T_PTR(t_dev), t_pageable, ROW + 1, CL_DIR_H2D);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_NO_MATCH);
	/* no layout: the caller's reason */
	in = t_in(T_PTR(t_dev), t_pageable, ROW, CL_DIR_H2D);
	in.layout = NULL;
	in.off_reason = CL_NO_LAYOUT;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_NO_LAYOUT);
	/* managed memory is counted, not pooled */
	in = t_in(T_PTR(t_man), t_pageable, ROW, CL_DIR_H2D);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_DST_NOT_DEVICE);
	/* host memory as a destination with an H2D kind: not device memory */
	in = t_in(t_pinned, t_pageable, ROW, CL_DIR_H2D);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_DST_NOT_DEVICE);
	/* running past the destination's allocation */
	in = t_in(T_PTR(t_dev + 6 * ROW), t_pageable, 4 * ROW, CL_DIR_H2D);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_DST_EXTENT);
	/* memory of another device than the current one */
	in = t_in(T_PTR(t_dev1), t_pageable, ROW, CL_DIR_H2D);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_NO_CONTEXT);
	/* a device source with an H2D kind is the runtime's to refuse */
	in = t_in(T_PTR(t_dev), T_PTR(t_dev + 4 * ROW), ROW, CL_DIR_H2D);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_SRC_NOT_HOST);
	/* names for the stats */
	CU_ASSERT_STRING_EQUAL(classify_reason_name(CL_NO_MATCH), "no_match");
	CU_ASSERT_STRING_EQUAL(classify_reason_name(CL_CAPTURING), "graph_capture");
}

static void test_not_host_to_device(void)
{
	struct classify_in in;
	struct classify_out out = { .reason = CL__COUNT };

	/* device to device through cudaMemcpyDefault: not ours */
	in = t_in(T_PTR(t_dev), T_PTR(t_dev + 4 * ROW), ROW, CL_DIR_INFER);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 0);
	/* device to host */
	in = t_in(t_pageable, T_PTR(t_dev), ROW, CL_DIR_INFER);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 0);
	in = t_in(T_PTR(t_dev), t_pageable, ROW, CL_DIR_OTHER);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 0);
	CU_ASSERT_EQUAL(out.reason, CL__COUNT); /* untouched */
	/* into managed memory through Default: host-to-device as CUDA counts it, not pooled */
	in = t_in(T_PTR(t_man), t_pageable, ROW, CL_DIR_INFER);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_DST_NOT_DEVICE);
}

static void *t_no_context_thread(void *arg)
{
	struct classify_in in = t_in(T_PTR(t_dev), t_pageable, ROW, CL_DIR_H2D);
	struct classify_out out;

	(void)arg;
	if (classify_copy(&in, &out) != 1 || out.reason != CL_NO_CONTEXT)
		return (void *)1;
	return NULL;
}

static void test_no_context(void)
{
	pthread_t t;
	void *r = (void *)2;

	CU_ASSERT_FATAL(pthread_create(&t, NULL, t_no_context_thread, NULL) == 0);
	pthread_join(t, &r);
	CU_ASSERT(r == NULL);
}

/* Fails the driver's pointer query at its next calls number first and first + 1 (0: none). */
static void t_fail_queries(int first, int second)
{
	unsigned long long c = t_counter("cuPointerGetAttributes");
	char spec[128] = "";

	if (first)
		snprintf(spec, sizeof(spec), "cuPointerGetAttributes#%llu", c + (unsigned)first);
	if (second)
		snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec), ",cuPointerGetAttributes#%llu",
			 c + (unsigned)second);
	CU_ASSERT_FATAL(t_fail(spec) >= 0);
}

/* A pointer query that fails once does not lose a cudaMemcpyDefault copy. */
static void test_query_fails_once(void)
{
	struct classify_in in = t_in(T_PTR(t_dev), t_pinned, 4 * ROW, CL_DIR_INFER);
	struct classify_out out;
	unsigned long long injected = t_counter("injected:cuPointerGetAttributes");

	t_fail_queries(1, 0);   /* the destination's query */
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_POOL);
	in.n = 3000;            /* the source's query, on a copy that matches no spec */
	t_fail_queries(2, 0);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_NO_MATCH);
	CU_ASSERT_EQUAL(t_counter("injected:cuPointerGetAttributes"), injected + 2);
	/* one that fails again cannot tell the direction: left to the driver */
	t_fail_queries(1, 2);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 0);
	CU_ASSERT_EQUAL(t_counter("injected:cuPointerGetAttributes"), injected + 4);
	t_fail_queries(0, 0);
}

/* A context of the program's own (cuCtxCreate), not the primary one the pool serves (issue 18). */
static void test_created_context(void)
{
	struct classify_in in;
	struct classify_out out;
	CUcontext c;
	CUdeviceptr own = 0;

	CU_ASSERT_FATAL(t_ctx_create(&c, NULL, 0, 0) == CUDA_SUCCESS);
	CU_ASSERT_FATAL(t_alloc(&own, 8 * ROW) == CUDA_SUCCESS);
	/* into its own memory, on the same device as the primary context */
	in = t_in(T_PTR(own), t_pageable, 4 * ROW, CL_DIR_H2D);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_NO_CONTEXT);
	in.dir = CL_DIR_INFER;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_NO_CONTEXT);
	/* asked twice: the answer holds once the primary handle is known */
	in.dir = CL_DIR_H2D;
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_NO_CONTEXT);
	CU_ASSERT(t_ctx_destroy(c) == CUDA_SUCCESS);
	/* back in the primary context: pooled again */
	CU_ASSERT_FATAL(t_setctx(t_ctx[0]) == CUDA_SUCCESS);
	in = t_in(T_PTR(t_dev), t_pageable, 4 * ROW, CL_DIR_H2D);
	CU_ASSERT_EQUAL(classify_copy(&in, &out), 1);
	CU_ASSERT_EQUAL(out.reason, CL_POOL);
}

static int t_suite_init(void)
{
	void *h;
	char err[128];

	setenv("FAKECUDA_DEVICES", "2", 1);
	h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return -1;
	*(void **)&t_init = dlsym(h, "cuInit");
	*(void **)&t_retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&t_setctx = dlsym(h, "cuCtxSetCurrent");
	*(void **)&t_alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&t_managed = dlsym(h, "cuMemAllocManaged");
	*(void **)&t_hostalloc = dlsym(h, "cuMemHostAlloc");
	*(void **)&t_stream_create = dlsym(h, "cuStreamCreate");
	*(void **)&t_begin_capture = dlsym(h, "cuStreamBeginCapture_v2");
	*(void **)&t_end_capture = dlsym(h, "cuStreamEndCapture");
	*(void **)&t_host_func = dlsym(h, "cuLaunchHostFunc");
	*(void **)&t_stream_sync = dlsym(h, "cuStreamSynchronize");
	*(void **)&t_ctx_create = dlsym(h, "cuCtxCreate_v4");
	*(void **)&t_ctx_destroy = dlsym(h, "cuCtxDestroy_v2");
	*(void **)&t_counter = dlsym(h, "fakecuda_counter");
	*(void **)&t_fail = dlsym(h, "fakecuda_fail");
	if (!t_init || !t_retain || !t_setctx || !t_alloc || !t_managed || !t_hostalloc ||
	    !t_stream_create || !t_begin_capture || !t_end_capture || !t_host_func || !t_stream_sync ||
	    !t_counter || !t_fail || !t_ctx_create || !t_ctx_destroy)
		return -1;
	if (t_init(0) || t_retain(&t_ctx[0], 0) || t_retain(&t_ctx[1], 1))
		return -1;
	if (t_setctx(t_ctx[1]) || t_alloc(&t_dev1, 8 * ROW))
		return -1;
	if (t_setctx(t_ctx[0]) || t_alloc(&t_dev, 8 * ROW) || t_managed(&t_man, 8 * ROW, CU_MEM_ATTACH_GLOBAL) ||
	    t_hostalloc(&t_pinned, 8 * ROW, 0))
		return -1;
	if (device_open() || layout_parse(&t_layout, "3072", err, sizeof(err)))
		return -1;
	return 0;
}

static const CU_TestInfo tests[] = {
	{ "a matched copy from host memory into device memory goes to the pool; pinned only when pinned to its end",
	  test_pooled },
	{ "streams map to the driver's handles and a capturing stream is left alone",
	  test_streams },
	{ "every copy that passes through says why", test_passthrough_reasons },
	{ "copies that are not host-to-device are none of the shim's business",
	  test_not_host_to_device },
	{ "a thread without a context passes its copies through", test_no_context },
	{ "a pointer query that fails once is asked again: no cudaMemcpyDefault copy is lost",
	  test_query_fails_once },
	{ "a context of the program's own (cuCtxCreate) passes its copies through", test_created_context },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "classify",
	.init = t_suite_init,
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
