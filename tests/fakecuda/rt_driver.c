/*
 * rt_driver.c: the runtime through the driver (FAKECUDA_RT_VIA_DRIVER=1).
 *
 * NVIDIA's runtime reaches the driver with dlopen("libcuda.so.1"), dlsym of
 * cuGetProcAddress_v2, then cuGetProcAddress_v2 for every entry point. With
 * FAKECUDA_RT_VIA_DRIVER=1 the runtime's copy and allocation entry points
 * (rt_copy.c, rt_memory.c) do the same: dlsym is an ordinary call, so a
 * preloaded library that interposes dlsym sees it and may hand back
 * wrappers. The runtime checks its arguments exactly as without it (same
 * results, same last error), then lets the driver entry point do the work
 * and count it.
 */
#include "fakecuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* [0] legacy, [1] per-thread. */
static struct fc_rt_driver rt_drv[2];
static int rt_drv_ok;
static pthread_once_t rt_drv_once = PTHREAD_ONCE_INIT;

/* Finds the driver as NVIDIA's runtime does; says so once if it cannot. */
static void rt_driver_load(void)
{
	static const char *const names[] = {
		"cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemcpy",
		"cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemcpyAsync",
		"cuMemcpy2D", "cuMemcpy2DAsync", "cuMemAlloc", "cuMemAllocAsync",
		"cuMemAllocManaged", "cuMemAllocPitch",
	};
	__typeof__(cuGetProcAddress_v2) *gpa;
	CUdriverProcAddressQueryResult q;
	void *h, **slot;
	size_t i;
	int pt;

	_Static_assert(sizeof(struct fc_rt_driver) == sizeof(names) / sizeof(names[0]) * sizeof(void *),
		       "one name per entry point");
	h = dlopen("libcuda.so.1", RTLD_NOW);
	*(void **)&gpa = h ? dlsym(h, "cuGetProcAddress_v2") : NULL;
	if (!gpa) {
		fprintf(stderr, "fakecuda: FAKECUDA_RT_VIA_DRIVER: no cuGetProcAddress_v2 in libcuda.so.1 (%s); "
			"the runtime works directly\n", dlerror());
		return;
	}
	for (pt = 0; pt < 2; pt++) {
		slot = (void **)&rt_drv[pt];
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			if (gpa(names[i], &slot[i], CUDA_VERSION,
				pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
				   : CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q) != CUDA_SUCCESS || !slot[i]) {
				fprintf(stderr, "fakecuda: FAKECUDA_RT_VIA_DRIVER: cuGetProcAddress_v2(%s) "
					"failed; the runtime works directly\n", names[i]);
				return;
			}
		}
	}
	rt_drv_ok = 1;
}

const struct fc_rt_driver *fc_rt_driver(int ptsz)
{
	if (!fc.cfg.rt_via_driver || !fc_have_device())
		return NULL;
	pthread_once(&rt_drv_once, rt_driver_load);
	return rt_drv_ok ? &rt_drv[ptsz ? 1 : 0] : NULL;
}

cudaError_t fc_rt_ret_drv(CUresult r)
{
	switch (r) {
	case CUDA_SUCCESS: return cudaSuccess;
	case CUDA_ERROR_INVALID_VALUE: return fc_rt_ret(cudaErrorInvalidValue);
	case CUDA_ERROR_OUT_OF_MEMORY: return fc_rt_ret(cudaErrorMemoryAllocation);
	case CUDA_ERROR_INVALID_HANDLE: return fc_rt_ret(cudaErrorInvalidResourceHandle);
	case CUDA_ERROR_NOT_READY: return fc_rt_ret(cudaErrorNotReady);
	case CUDA_ERROR_INVALID_DEVICE: return fc_rt_ret(cudaErrorInvalidDevice);
	case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return fc_rt_ret(cudaErrorStreamCaptureUnsupported);
	case CUDA_ERROR_NOT_SUPPORTED: return fc_rt_ret(cudaErrorNotSupported);
	case CUDA_ERROR_NOT_INITIALIZED: return fc_rt_ret(cudaErrorInitializationError);
	case CUDA_ERROR_INVALID_CONTEXT: return fc_rt_ret(cudaErrorDeviceUninitialized);
	default: return fc_rt_ret(cudaErrorUnknown);
	}
}

static CUdeviceptr rt_dptr(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

cudaError_t fc_rt_driver_copy(const struct fc_rt_driver *d, int sync, void *dst, const void *src,
				  size_t n, enum cudaMemcpyKind kind, cudaStream_t h)
{
	int err = fc_copy2d_check(dst, n, src, n, n, 1, (int)kind);

	if (err)
		return fc_rt_reti(err);
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return fc_rt_ret_drv(sync ? d->htod(rt_dptr(dst), src, n)
				  : d->htod_async(rt_dptr(dst), src, n, h));
	case cudaMemcpyDeviceToHost:
		return fc_rt_ret_drv(sync ? d->dtoh(dst, rt_dptr(src), n)
				  : d->dtoh_async(dst, rt_dptr(src), n, h));
	case cudaMemcpyDeviceToDevice:
		return fc_rt_ret_drv(sync ? d->dtod(rt_dptr(dst), rt_dptr(src), n)
				  : d->dtod_async(rt_dptr(dst), rt_dptr(src), n, h));
	default: /* default and host-to-host: unified addressing decides */
		return fc_rt_ret_drv(sync ? d->any(rt_dptr(dst), rt_dptr(src), n)
				  : d->any_async(rt_dptr(dst), rt_dptr(src), n, h));
	}
}

cudaError_t fc_rt_driver_copy2d(const struct fc_rt_driver *d, int sync, void *dst, size_t dpitch,
				    const void *src, size_t spitch, size_t width, size_t height,
				    enum cudaMemcpyKind kind, cudaStream_t h)
{
	CUDA_MEMCPY2D m;
	int err = fc_copy2d_check(dst, dpitch, src, spitch, width, height, (int)kind);

	if (err)
		return fc_rt_reti(err);
	if (!width || !height)
		return cudaSuccess;
	memset(&m, 0, sizeof(m));
	m.srcMemoryType = kind == cudaMemcpyDefault ? CU_MEMORYTYPE_UNIFIED
			  : kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost
			  ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
	m.dstMemoryType = kind == cudaMemcpyDefault ? CU_MEMORYTYPE_UNIFIED
			  : kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost
			  ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
	m.srcHost = src;
	m.srcDevice = rt_dptr(src);
	m.srcPitch = spitch;
	m.dstHost = dst;
	m.dstDevice = rt_dptr(dst);
	m.dstPitch = dpitch;
	m.WidthInBytes = width;
	m.Height = height;
	return fc_rt_ret_drv(sync ? d->copy2d(&m) : d->copy2d_async(&m, h));
}
