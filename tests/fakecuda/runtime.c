/*
 * runtime.c: the cuda* entry points of the emulated device.
 *
 * Each entry point counts itself (fc_api_enter, which also applies
 * FAKECUDA_FAIL), binds the thread to its device's primary context as the
 * real runtime does on first use, does its work through core.c / stream.c,
 * and converts the internal negative errno to a cudaError_t. A failing call
 * sets the calling thread's last error (cudaGetLastError returns and clears
 * it; cudaPeekAtLastError only returns it). cudaErrorNotReady is not an
 * error and is not recorded. Names ending _ptsz / _ptds are the entry points
 * of programs built with per-thread default streams: there, stream 0 is the
 * per-thread stream.
 */
#include "fakecuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static cudaError_t fc_rt_err(int e)
{
	switch (e) {
	case 0: return cudaSuccess;
	case -ENOMEM: return cudaErrorMemoryAllocation;
	case -EINVAL: return cudaErrorInvalidValue;
	case -EBADF: return cudaErrorInvalidResourceHandle;
	case -EAGAIN: return cudaErrorNotReady;
	case -ENODEV: return cudaErrorInvalidDevice;
	case -EPERM: return cudaErrorStreamCaptureUnsupported;
	case -ENOTSUP: return cudaErrorNotSupported;
	case -EEXIST: return cudaErrorHostMemoryAlreadyRegistered;
	case -ENOENT: return cudaErrorHostMemoryNotRegistered;
	case -ERANGE: return cudaErrorInvalidPitchValue;
	case -EXDEV: return cudaErrorGraphExecUpdateFailure;
	default: return cudaErrorUnknown;
	}
}

/* Records a failure as the thread's last error and returns it. */
static cudaError_t rt_ret(cudaError_t e)
{
	if (e != cudaSuccess && e != cudaErrorNotReady)
		fc_tls_get()->last_error = e;
	return e;
}

static cudaError_t rt_reti(int e)
{
	return rt_ret(fc_rt_err(e));
}

/* Counts the call and binds the thread to a context; 1 = inject a fault. */
static int rt_enter(const char *name)
{
	int inject = fc_api_enter(name);
	struct fc_tls *t = fc_tls_get();

	if (!t->ctx && t->dev < fc.cfg.devices)
		t->ctx = &fc.dev[t->dev].ctx;
	if (t->ctx)
		t->ctx->active = 1;
	fc.driver_inited = 1;
	return inject;
}

#define RT_ENTER(name) do { if (rt_enter(name)) return rt_ret(cudaErrorUnknown); } while (0)
#define RT_ENTER_ALLOC(name) do { if (rt_enter(name)) return rt_ret(cudaErrorMemoryAllocation); } while (0)

/* Resolves a stream handle or returns its error from the caller. */
#define RT_STREAM(h, ptsz, s) do { int e_ = fc_stream_resolve((void *)(h), ptsz, &(s)); \
	if (e_) return rt_reti(e_); } while (0)

static int have_device(void)
{
	int d = fc_cur_dev();

	return d >= 0 && d < fc.cfg.devices;
}

/* ---- errors ---- */

FC_API cudaError_t cudaGetLastError(void)
{
	struct fc_tls *t;
	cudaError_t e;

	fc_api_enter("cudaGetLastError");
	t = fc_tls_get();
	e = t->last_error;
	t->last_error = cudaSuccess;
	return e;
}

FC_API cudaError_t cudaPeekAtLastError(void)
{
	fc_api_enter("cudaPeekAtLastError");
	return fc_tls_get()->last_error;
}

#define RT_ERRORS(X) \
	X(cudaSuccess, "no error") \
	X(cudaErrorInvalidValue, "invalid argument") \
	X(cudaErrorMemoryAllocation, "out of memory") \
	X(cudaErrorInitializationError, "initialization error") \
	X(cudaErrorInvalidDevice, "invalid device ordinal") \
	X(cudaErrorInvalidDevicePointer, "invalid device pointer") \
	X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy") \
	X(cudaErrorInvalidResourceHandle, "invalid resource handle") \
	X(cudaErrorNotReady, "device not ready") \
	X(cudaErrorNoDevice, "no CUDA-capable device is detected") \
	X(cudaErrorNotSupported, "operation not supported") \
	X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing") \
	X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture") \
	X(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped") \
	X(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region") \
	X(cudaErrorInvalidPitchValue, "invalid pitch argument") \
	X(cudaErrorInvalidSymbol, "invalid device symbol") \
	X(cudaErrorInvalidDeviceFunction, "invalid device function") \
	X(cudaErrorUnsupportedLimit, "limit is not supported on this architecture") \
	X(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled") \
	X(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled") \
	X(cudaErrorIllegalState, "the operation cannot be performed in the present state") \
	X(cudaErrorGraphExecUpdateFailure, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update") \
	X(cudaErrorUnknown, "unknown error")

FC_API const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
#define X(c, s) case c: return s;
	RT_ERRORS(X)
#undef X
	default: return "unrecognized error code";
	}
}

FC_API const char *cudaGetErrorName(cudaError_t error)
{
	switch (error) {
#define X(c, s) case c: return #c;
	RT_ERRORS(X)
#undef X
	default: return "cudaErrorUnknown";
	}
}

/* ---- devices ---- */

FC_API cudaError_t cudaGetDeviceCount(int *count)
{
	RT_ENTER("cudaGetDeviceCount");
	if (!count)
		return rt_ret(cudaErrorInvalidValue);
	*count = fc.cfg.devices;
	return rt_ret(fc.cfg.devices ? cudaSuccess : cudaErrorNoDevice);
}

FC_API cudaError_t cudaSetDevice(int device)
{
	struct fc_tls *t;

	RT_ENTER("cudaSetDevice");
	if (device < 0 || device >= fc.cfg.devices)
		return rt_ret(cudaErrorInvalidDevice);
	t = fc_tls_get();
	t->dev = device;
	t->ctx = &fc.dev[device].ctx;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDevice(int *device)
{
	RT_ENTER("cudaGetDevice");
	if (!device)
		return rt_ret(cudaErrorInvalidValue);
	*device = fc_cur_dev();
	return cudaSuccess;
}

FC_API cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
	RT_ENTER("cudaSetDeviceFlags");
	(void)flags;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
	RT_ENTER("cudaGetDeviceFlags");
	if (!flags)
		return rt_ret(cudaErrorInvalidValue);
	*flags = 0;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	RT_ENTER("cudaGetDeviceProperties");
	if (!prop)
		return rt_ret(cudaErrorInvalidValue);
	if (device < 0 || device >= fc.cfg.devices)
		return rt_ret(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	strcpy(prop->name, "fakecuda emulated device");
	prop->totalGlobalMem = fc.dev[device].cap;
	prop->sharedMemPerBlock = 48 << 10;
	prop->regsPerBlock = 65536;
	prop->warpSize = 32;
	prop->memPitch = (size_t)1 << 31;
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 0x7fffffff;
	prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
	prop->totalConstMem = 64 << 10;
	prop->major = 9;
	prop->minor = 0;
	prop->textureAlignment = 512;
	prop->multiProcessorCount = 4;
	prop->canMapHostMemory = 1;
	prop->concurrentKernels = 1;
	prop->pciBusID = device + 1;
	prop->asyncEngineCount = 2;
	prop->unifiedAddressing = 1;
	prop->memoryBusWidth = 5120;
	prop->l2CacheSize = 50 << 20;
	prop->maxThreadsPerMultiProcessor = 2048;
	prop->streamPrioritiesSupported = 1;
	prop->managedMemory = 1;
	prop->concurrentManagedAccess = 1;
	prop->hostRegisterSupported = 1;
	prop->memoryPoolsSupported = 1;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	RT_ENTER("cudaDeviceGetAttribute");
	if (!value)
		return rt_ret(cudaErrorInvalidValue);
	if (device < 0 || device >= fc.cfg.devices)
		return rt_ret(cudaErrorInvalidDevice);
	switch (attr) {
	case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
	case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
	case cudaDevAttrMultiProcessorCount: *value = 4; break;
	case cudaDevAttrWarpSize: *value = 32; break;
	case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
	case cudaDevAttrUnifiedAddressing:
	case cudaDevAttrManagedMemory:
	case cudaDevAttrConcurrentManagedAccess:
	case cudaDevAttrCanMapHostMemory:
	case cudaDevAttrMemoryPoolsSupported:
	case cudaDevAttrHostRegisterSupported: *value = 1; break;
	case cudaDevAttrPciBusId: *value = device + 1; break;
	case cudaDevAttrMaxBlockDimX:
	case cudaDevAttrMaxBlockDimY: *value = 1024; break;
	case cudaDevAttrMaxBlockDimZ: *value = 64; break;
	case cudaDevAttrMaxGridDimX: *value = 0x7fffffff; break;
	case cudaDevAttrMaxGridDimY:
	case cudaDevAttrMaxGridDimZ: *value = 65535; break;
	case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 << 10; break;
	case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 << 10; break;
	case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 228 << 10; break;
	case cudaDevAttrMaxRegistersPerBlock:
	case cudaDevAttrMaxRegistersPerMultiprocessor: *value = 65536; break;
	case cudaDevAttrTotalConstantMemory: *value = 64 << 10; break;
	case cudaDevAttrMaxPitch: *value = 0x7fffffff; break;
	case cudaDevAttrTextureAlignment: *value = 512; break;
	case cudaDevAttrTexturePitchAlignment: *value = 32; break;
	case cudaDevAttrClockRate: *value = 1980000; break;
	case cudaDevAttrMemoryClockRate: *value = 2619000; break;
	case cudaDevAttrGlobalMemoryBusWidth: *value = 5120; break;
	case cudaDevAttrL2CacheSize: *value = 50 << 20; break;
	case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; break;
	case cudaDevAttrMaxBlocksPerMultiprocessor: *value = 32; break;
	case cudaDevAttrAsyncEngineCount: *value = 2; break;
	case cudaDevAttrConcurrentKernels:
	case cudaDevAttrStreamPrioritiesSupported:
	case cudaDevAttrGlobalL1CacheSupported:
	case cudaDevAttrLocalL1CacheSupported:
	case cudaDevAttrPageableMemoryAccessUsesHostPageTables:
	case cudaDevAttrCooperativeLaunch:
	case cudaDevAttrDirectManagedMemAccessFromHost:
	case cudaDevAttrComputePreemptionSupported: *value = 1; break;
	case cudaDevAttrPciDomainId:
	case cudaDevAttrPciDeviceId:
	case cudaDevAttrIntegrated:
	case cudaDevAttrComputeMode:
	case cudaDevAttrKernelExecTimeout:
	case cudaDevAttrEccEnabled:
	case cudaDevAttrTccDriver:
	case cudaDevAttrPageableMemoryAccess: *value = 0; break;
	default: *value = 0; break;
	}
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceSynchronize(void)
{
	RT_ENTER("cudaDeviceSynchronize");
	if (!have_device())
		return rt_ret(cudaErrorNoDevice);
	return rt_reti(fc_device_sync(fc_cur_dev()));
}

FC_API cudaError_t cudaDeviceReset(void)
{
	int err;

	RT_ENTER("cudaDeviceReset");
	if (!have_device())
		return rt_ret(cudaErrorNoDevice);
	/* As CUDA does: every allocation of the device is gone afterwards
	 * (whoever made it); the context that follows is a new one. Streams
	 * and events stay usable here, which is more lenient than CUDA. */
	err = fc_device_sync(fc_cur_dev());
	if (!err)
		fc_dev_reset(fc_cur_dev());
	return rt_reti(err);
}

FC_API cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	size_t f, t;

	RT_ENTER("cudaMemGetInfo");
	if (!have_device())
		return rt_ret(cudaErrorNoDevice);
	fc_dev_meminfo(fc_cur_dev(), &f, &t);
	if (free_b)
		*free_b = f;
	if (total)
		*total = t;
	return cudaSuccess;
}

FC_API cudaError_t cudaDriverGetVersion(int *v)
{
	RT_ENTER("cudaDriverGetVersion");
	if (!v)
		return rt_ret(cudaErrorInvalidValue);
	*v = 13000;
	return cudaSuccess;
}

FC_API cudaError_t cudaRuntimeGetVersion(int *v)
{
	RT_ENTER("cudaRuntimeGetVersion");
	if (!v)
		return rt_ret(cudaErrorInvalidValue);
	*v = 13000;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
	RT_ENTER("cudaDeviceGetStreamPriorityRange");
	if (least)
		*least = 0;
	if (greatest)
		*greatest = -5;
	return cudaSuccess;
}

/* ---- the runtime through the driver (FAKECUDA_RT_VIA_DRIVER=1) ----
 *
 * NVIDIA's runtime reaches the driver with dlopen("libcuda.so.1"), dlsym of
 * cuGetProcAddress_v2, then cuGetProcAddress_v2 for every entry point. With
 * FAKECUDA_RT_VIA_DRIVER=1 the runtime's copy and allocation entry points
 * do the same: dlsym is an ordinary call, so a preloaded library that
 * interposes dlsym sees it and may hand back wrappers. The runtime checks
 * its arguments exactly as without it (same results, same last error),
 * then lets the driver entry point do the work and count it.
 */

/* The driver entry points the runtime uses; [0] legacy, [1] per-thread. */
struct rt_driver {
	__typeof__(cuMemcpyHtoD_v2) *htod;
	__typeof__(cuMemcpyDtoH_v2) *dtoh;
	__typeof__(cuMemcpyDtoD_v2) *dtod;
	__typeof__(cuMemcpy) *any;
	__typeof__(cuMemcpyHtoDAsync_v2) *htod_async;
	__typeof__(cuMemcpyDtoHAsync_v2) *dtoh_async;
	__typeof__(cuMemcpyDtoDAsync_v2) *dtod_async;
	__typeof__(cuMemcpyAsync) *any_async;
	__typeof__(cuMemcpy2D_v2) *copy2d;
	__typeof__(cuMemcpy2DAsync_v2) *copy2d_async;
	__typeof__(cuMemAlloc_v2) *alloc;
	__typeof__(cuMemAllocAsync) *alloc_async;
	__typeof__(cuMemAllocManaged) *alloc_managed;
	__typeof__(cuMemAllocPitch_v2) *alloc_pitch;
};

static struct rt_driver rt_drv[2];
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

	_Static_assert(sizeof(struct rt_driver) == sizeof(names) / sizeof(names[0]) * sizeof(void *),
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

/* The driver table for a call (PTSZ: the per-thread form), or NULL when
 * the runtime works directly: not asked for, no driver found, or no device
 * (the direct path gives the runtime's own answer then). */
static const struct rt_driver *rt_driver(int ptsz)
{
	if (!fc.cfg.rt_via_driver || !have_device())
		return NULL;
	pthread_once(&rt_drv_once, rt_driver_load);
	return rt_drv_ok ? &rt_drv[ptsz ? 1 : 0] : NULL;
}

/* A driver result as the runtime reports it (sets the last error). */
static cudaError_t rt_ret_drv(CUresult r)
{
	switch (r) {
	case CUDA_SUCCESS: return cudaSuccess;
	case CUDA_ERROR_INVALID_VALUE: return rt_ret(cudaErrorInvalidValue);
	case CUDA_ERROR_OUT_OF_MEMORY: return rt_ret(cudaErrorMemoryAllocation);
	case CUDA_ERROR_INVALID_HANDLE: return rt_ret(cudaErrorInvalidResourceHandle);
	case CUDA_ERROR_NOT_READY: return rt_ret(cudaErrorNotReady);
	case CUDA_ERROR_INVALID_DEVICE: return rt_ret(cudaErrorInvalidDevice);
	case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return rt_ret(cudaErrorStreamCaptureUnsupported);
	case CUDA_ERROR_NOT_SUPPORTED: return rt_ret(cudaErrorNotSupported);
	case CUDA_ERROR_NOT_INITIALIZED: return rt_ret(cudaErrorInitializationError);
	case CUDA_ERROR_INVALID_CONTEXT: return rt_ret(cudaErrorDeviceUninitialized);
	default: return rt_ret(cudaErrorUnknown);
	}
}

static CUdeviceptr rt_dptr(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

/* A linear copy through the driver entry point its kind names. */
static cudaError_t rt_driver_copy(const struct rt_driver *d, int sync, void *dst, const void *src,
				  size_t n, enum cudaMemcpyKind kind, cudaStream_t h)
{
	int err = fc_copy2d_check(dst, n, src, n, n, 1, (int)kind);

	if (err)
		return rt_reti(err);
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return rt_ret_drv(sync ? d->htod(rt_dptr(dst), src, n)
				  : d->htod_async(rt_dptr(dst), src, n, h));
	case cudaMemcpyDeviceToHost:
		return rt_ret_drv(sync ? d->dtoh(dst, rt_dptr(src), n)
				  : d->dtoh_async(dst, rt_dptr(src), n, h));
	case cudaMemcpyDeviceToDevice:
		return rt_ret_drv(sync ? d->dtod(rt_dptr(dst), rt_dptr(src), n)
				  : d->dtod_async(rt_dptr(dst), rt_dptr(src), n, h));
	default: /* default and host-to-host: unified addressing decides */
		return rt_ret_drv(sync ? d->any(rt_dptr(dst), rt_dptr(src), n)
				  : d->any_async(rt_dptr(dst), rt_dptr(src), n, h));
	}
}

/* A pitched copy through cuMemcpy2D[Async]: the kind gives the memory types. */
static cudaError_t rt_driver_copy2d(const struct rt_driver *d, int sync, void *dst, size_t dpitch,
				    const void *src, size_t spitch, size_t width, size_t height,
				    enum cudaMemcpyKind kind, cudaStream_t h)
{
	CUDA_MEMCPY2D m;
	int err = fc_copy2d_check(dst, dpitch, src, spitch, width, height, (int)kind);

	if (err)
		return rt_reti(err);
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
	return rt_ret_drv(sync ? d->copy2d(&m) : d->copy2d_async(&m, h));
}

/* ---- memory ---- */

FC_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	const struct rt_driver *d;
	CUdeviceptr p = 0;
	CUresult r;
	int err;

	RT_ENTER_ALLOC("cudaMalloc");
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	if (!size) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	if ((d = rt_driver(0))) {
		r = d->alloc(&p, size);
		if (r == CUDA_SUCCESS)
			*devPtr = (void *)(uintptr_t)p;
		return rt_ret_drv(r);
	}
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	err = fc_dev_alloc(fc_cur_dev(), size, devPtr);
	return rt_reti(err);
}

FC_API cudaError_t cudaFree(void *devPtr)
{
	RT_ENTER("cudaFree");
	if (!devPtr)
		return cudaSuccess; /* cudaFree(0): initialise the context */
	atomic_fetch_add(&fc_cnt.free_calls, 1);
	return rt_reti(fc_dev_free(devPtr));
}

static cudaError_t malloc_async(const char *name, int ptsz, void **p, size_t size, cudaStream_t h)
{
	struct CUstream_st *s;

	const struct rt_driver *d;
	CUdeviceptr dp = 0;
	CUresult r;

	RT_ENTER_ALLOC(name);
	RT_STREAM(h, ptsz, s);
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	if ((d = rt_driver(ptsz))) {
		r = d->alloc_async(&dp, size ? size : 1, h);
		if (r == CUDA_SUCCESS)
			*p = (void *)(uintptr_t)dp;
		return rt_ret_drv(r);
	}
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return rt_reti(fc_dev_alloc(fc_stream_flags(s, &(unsigned){0}), size ? size : 1, p));
}

FC_API cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t h)
{
	return malloc_async("cudaMallocAsync", 0, p, size, h);
}

FC_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t h)
{
	return malloc_async("cudaMallocAsync_ptsz", 1, p, size, h);
}

static cudaError_t free_async(const char *name, int ptsz, void *p, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	atomic_fetch_add(&fc_cnt.free_calls, 1);
	return rt_reti(fc_free_async(p, s));
}

FC_API cudaError_t cudaFreeAsync(void *p, cudaStream_t h)
{
	return free_async("cudaFreeAsync", 0, p, h);
}

FC_API cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t h)
{
	return free_async("cudaFreeAsync_ptsz", 1, p, h);
}

FC_API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	const struct rt_driver *d;
	CUdeviceptr p = 0;
	CUresult r;

	RT_ENTER_ALLOC("cudaMallocManaged");
	if (!devPtr || !size || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
		return rt_ret(cudaErrorInvalidValue);
	if ((d = rt_driver(0))) {
		r = d->alloc_managed(&p, size, flags);
		if (r == CUDA_SUCCESS)
			*devPtr = (void *)(uintptr_t)p;
		return rt_ret_drv(r);
	}
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return rt_reti(fc_managed_alloc(fc_cur_dev(), size, devPtr));
}

FC_API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	const struct rt_driver *d;
	CUdeviceptr dp = 0;
	size_t p, n;
	CUresult r;

	RT_ENTER_ALLOC("cudaMallocPitch");
	if (!devPtr || !pitch || fc_pitch_size(width, height, &p, &n))
		return rt_ret(cudaErrorInvalidValue);
	*pitch = p;
	if ((d = rt_driver(0))) {
		r = d->alloc_pitch(&dp, pitch, width, height, 16);
		if (r == CUDA_SUCCESS)
			*devPtr = (void *)(uintptr_t)dp;
		return rt_ret_drv(r);
	}
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return rt_reti(fc_dev_alloc(fc_cur_dev(), n, devPtr));
}

FC_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	RT_ENTER_ALLOC("cudaMallocHost");
	if (!ptr)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_host_alloc(size, 0, ptr));
}

FC_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	RT_ENTER_ALLOC("cudaHostAlloc");
	if (!pHost)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_host_alloc(size, flags, pHost));
}

FC_API cudaError_t cudaFreeHost(void *ptr)
{
	RT_ENTER("cudaFreeHost");
	if (!ptr)
		return cudaSuccess;
	return rt_ret(fc_host_free(ptr) ? cudaErrorInvalidValue : cudaSuccess);
}

FC_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	RT_ENTER("cudaHostRegister");
	return rt_reti(fc_host_register(ptr, size, flags));
}

FC_API cudaError_t cudaHostUnregister(void *ptr)
{
	RT_ENTER("cudaHostUnregister");
	return rt_reti(fc_host_unregister(ptr));
}

FC_API cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
	int kind;

	RT_ENTER("cudaHostGetDevicePointer");
	if (!pDevice || flags)
		return rt_ret(cudaErrorInvalidValue);
	kind = fc_mem_classify(pHost, 1, NULL);
	if (kind != FC_PINNED && kind != FC_MANAGED)
		return rt_ret(cudaErrorInvalidValue);
	*pDevice = pHost;
	return cudaSuccess;
}

FC_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr)
{
	int dev = 0;
	int kind;

	RT_ENTER("cudaPointerGetAttributes");
	if (!a)
		return rt_ret(cudaErrorInvalidValue);
	memset(a, 0, sizeof(*a));
	kind = fc_mem_classify(ptr, 1, &dev);
	switch (kind) {
	case FC_DEVICE:
		a->type = cudaMemoryTypeDevice;
		a->device = dev;
		a->devicePointer = (void *)(uintptr_t)ptr;
		break;
	case FC_MANAGED:
		a->type = cudaMemoryTypeManaged;
		a->device = dev;
		a->devicePointer = a->hostPointer = (void *)(uintptr_t)ptr;
		break;
	case FC_PINNED:
		a->type = cudaMemoryTypeHost;
		a->device = fc_cur_dev();
		a->devicePointer = a->hostPointer = (void *)(uintptr_t)ptr;
		break;
	case -EINVAL: /* inside the arena but not allocated */
		a->type = cudaMemoryTypeUnregistered;
		a->device = cudaInvalidDeviceId;
		return rt_ret(cudaErrorInvalidValue);
	default:
		a->type = cudaMemoryTypeUnregistered;
		a->device = cudaInvalidDeviceId;
		a->hostPointer = (void *)(uintptr_t)ptr;
		break;
	}
	return cudaSuccess;
}

static cudaError_t memset_any(const char *name, int ptsz, int sync, void *p, int v, size_t n, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_memset(p, v, n, s, sync));
}

FC_API cudaError_t cudaMemset(void *p, int v, size_t n)
{
	return memset_any("cudaMemset", 0, 1, p, v, n, 0);
}

FC_API cudaError_t cudaMemset_ptds(void *p, int v, size_t n)
{
	return memset_any("cudaMemset_ptds", 1, 1, p, v, n, 0);
}

FC_API cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t h)
{
	return memset_any("cudaMemsetAsync", 0, 0, p, v, n, h);
}

FC_API cudaError_t cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t h)
{
	return memset_any("cudaMemsetAsync_ptsz", 1, 0, p, v, n, h);
}

/* ---- copies ---- */

static cudaError_t memcpy_any(const char *name, int ptsz, int sync, void *dst, const void *src,
			      size_t n, enum cudaMemcpyKind kind, cudaStream_t h)
{
	const struct rt_driver *d;
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if ((d = rt_driver(ptsz)))
		return rt_driver_copy(d, sync, dst, src, n, kind, h);
	return rt_reti(fc_copy(dst, src, n, (int)kind, s, sync));
}

FC_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	return memcpy_any("cudaMemcpy", 0, 1, dst, src, n, kind, 0);
}

FC_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	return memcpy_any("cudaMemcpy_ptds", 1, 1, dst, src, n, kind, 0);
}

FC_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
				   enum cudaMemcpyKind kind, cudaStream_t h)
{
	return memcpy_any("cudaMemcpyAsync", 0, 0, dst, src, n, kind, h);
}

FC_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n,
					enum cudaMemcpyKind kind, cudaStream_t h)
{
	return memcpy_any("cudaMemcpyAsync_ptsz", 1, 0, dst, src, n, kind, h);
}

/* A peer copy needs no peer access; each pointer must lie on its device. */
static cudaError_t memcpy_peer(const char *name, int sync, void *dst, int ddev, const void *src,
			       int sdev, size_t n, cudaStream_t h)
{
	struct CUstream_st *s;
	int d = -1, e = -1;

	RT_ENTER(name);
	RT_STREAM(h, 0, s);
	if (ddev < 0 || ddev >= fc.cfg.devices || sdev < 0 || sdev >= fc.cfg.devices)
		return rt_ret(cudaErrorInvalidDevice);
	if (n && (fc_mem_classify(dst, n, &d) != FC_DEVICE || d != ddev ||
		  fc_mem_classify(src, n, &e) != FC_DEVICE || e != sdev))
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_copy(dst, src, n, cudaMemcpyDeviceToDevice, s, sync));
}

FC_API cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t n)
{
	return memcpy_peer("cudaMemcpyPeer", 1, dst, dstDevice, src, srcDevice, n, 0);
}

FC_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				       size_t n, cudaStream_t h)
{
	return memcpy_peer("cudaMemcpyPeerAsync", 0, dst, dstDevice, src, srcDevice, n, h);
}

/* The 13.0 batch: unordered inside, stream-ordered as a whole; refuses the
 * legacy stream and a zero srcAccessOrder. */
static cudaError_t batch_any(const char *name, int ptsz, void *const *dsts, const void *const *srcs,
			     const size_t *sizes, size_t count, struct cudaMemcpyAttributes *attrs,
			     size_t *attrsIdxs, size_t numAttrs, cudaStream_t h)
{
	struct CUstream_st *s;
	size_t i;
	int err = 0;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (fc_stream_is_legacy(s) || !count || !dsts || !srcs || !sizes ||
	    !attrs || !attrsIdxs || !numAttrs || numAttrs > count || attrsIdxs[0] != 0)
		return rt_ret(cudaErrorInvalidValue);
	for (i = 0; i < numAttrs; i++)
		if (attrs[i].srcAccessOrder == cudaMemcpySrcAccessOrderInvalid ||
		    (i && attrsIdxs[i] <= attrsIdxs[i - 1]) || attrsIdxs[i] >= count)
			return rt_ret(cudaErrorInvalidValue);
	for (i = 0; i < count && !err; i++)
		err = fc_copy(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, s, 0);
	return rt_reti(err);
}

FC_API cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes,
					size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
					size_t numAttrs, cudaStream_t h)
{
	return batch_any("cudaMemcpyBatchAsync", 0, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, h);
}

FC_API cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs, const size_t *sizes,
					     size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
					     size_t numAttrs, cudaStream_t h)
{
	return batch_any("cudaMemcpyBatchAsync_ptsz", 1, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, h);
}

/* ---- streams ---- */

FC_API cudaError_t cudaStreamCreate(cudaStream_t *p)
{
	RT_ENTER("cudaStreamCreate");
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_stream_create(fc_cur_dev(), 0, 0, p));
}

FC_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *p, unsigned int flags)
{
	RT_ENTER("cudaStreamCreateWithFlags");
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_stream_create(fc_cur_dev(), flags, 0, p));
}

FC_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *p, unsigned int flags, int priority)
{
	RT_ENTER("cudaStreamCreateWithPriority");
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_stream_create(fc_cur_dev(), flags, priority, p));
}

FC_API cudaError_t cudaStreamDestroy(cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER("cudaStreamDestroy");
	if ((uintptr_t)h <= 2)
		return rt_ret(cudaErrorInvalidResourceHandle);
	RT_STREAM(h, 0, s);
	return rt_reti(fc_stream_destroy(s));
}

#define RT_STREAM_PAIR(fn, body_call) \
	FC_API cudaError_t fn(cudaStream_t h) { return body_call(#fn, 0, h); } \
	FC_API cudaError_t fn##_ptsz(cudaStream_t h) { return body_call(#fn "_ptsz", 1, h); }

static cudaError_t stream_sync(const char *name, int ptsz, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_stream_sync(s));
}

static cudaError_t stream_query(const char *name, int ptsz, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_stream_query(s));
}

RT_STREAM_PAIR(cudaStreamSynchronize, stream_sync)
RT_STREAM_PAIR(cudaStreamQuery, stream_query)

static cudaError_t stream_get_flags(const char *name, int ptsz, cudaStream_t h, unsigned *flags, int *dev)
{
	struct CUstream_st *s;
	unsigned f;
	int d;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	d = fc_stream_flags(s, &f);
	if (flags)
		*flags = f;
	if (dev)
		*dev = d;
	return cudaSuccess;
}

FC_API cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int *flags)
{
	return stream_get_flags("cudaStreamGetFlags", 0, h, flags, NULL);
}

FC_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t h, unsigned int *flags)
{
	return stream_get_flags("cudaStreamGetFlags_ptsz", 1, h, flags, NULL);
}

FC_API cudaError_t cudaStreamGetDevice(cudaStream_t h, int *dev)
{
	return stream_get_flags("cudaStreamGetDevice", 0, h, NULL, dev);
}

FC_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t h, int *dev)
{
	return stream_get_flags("cudaStreamGetDevice_ptsz", 1, h, NULL, dev);
}

static cudaError_t stream_wait_event(const char *name, int ptsz, cudaStream_t h, cudaEvent_t e)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_stream_wait_event(s, e));
}

FC_API cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned int flags)
{
	(void)flags;
	return stream_wait_event("cudaStreamWaitEvent", 0, h, e);
}

FC_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t h, cudaEvent_t e, unsigned int flags)
{
	(void)flags;
	return stream_wait_event("cudaStreamWaitEvent_ptsz", 1, h, e);
}

static cudaError_t host_func(const char *name, int ptsz, cudaStream_t h, cudaHostFn_t fn, void *arg)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_hostfn(s, fn, arg));
}

FC_API cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *arg)
{
	return host_func("cudaLaunchHostFunc", 0, h, fn, arg);
}

FC_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t h, cudaHostFn_t fn, void *arg)
{
	return host_func("cudaLaunchHostFunc_ptsz", 1, h, fn, arg);
}

/* ---- capture and graphs ---- */

static cudaError_t begin_capture(const char *name, int ptsz, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_capture_begin(s, NULL));
}

FC_API cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
	(void)mode;
	return begin_capture("cudaStreamBeginCapture", 0, h);
}

FC_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
	(void)mode;
	return begin_capture("cudaStreamBeginCapture_ptsz", 1, h);
}

static cudaError_t end_capture(const char *name, int ptsz, cudaStream_t h, cudaGraph_t *g)
{
	struct CUstream_st *s;
	int err;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!g)
		return rt_ret(cudaErrorInvalidValue);
	err = fc_capture_end(s, g);
	return rt_ret(err == -EPERM ? cudaErrorIllegalState : fc_rt_err(err));
}

FC_API cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *g)
{
	return end_capture("cudaStreamEndCapture", 0, h, g);
}

FC_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t h, cudaGraph_t *g)
{
	return end_capture("cudaStreamEndCapture_ptsz", 1, h, g);
}

static cudaError_t capture_info(const char *name, int ptsz, cudaStream_t h,
				enum cudaStreamCaptureStatus *st, unsigned long long *id,
				cudaGraph_t *graph, const cudaGraphNode_t **deps,
				const cudaGraphEdgeData **edges, size_t *ndeps)
{
	struct CUstream_st *s;
	int c;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!st)
		return rt_ret(cudaErrorInvalidValue);
	c = fc_capture_status(s, id, graph);
	*st = c ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
	if (deps)
		*deps = NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = 0;
	return cudaSuccess;
}

FC_API cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus *st)
{
	return capture_info("cudaStreamIsCapturing", 0, h, st, NULL, NULL, NULL, NULL, NULL);
}

FC_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t h, enum cudaStreamCaptureStatus *st)
{
	return capture_info("cudaStreamIsCapturing_ptsz", 1, h, st, NULL, NULL, NULL, NULL, NULL);
}

FC_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t h, enum cudaStreamCaptureStatus *st,
					    unsigned long long *id, cudaGraph_t *graph,
					    const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
					    size_t *ndeps)
{
	return capture_info("cudaStreamGetCaptureInfo", 0, h, st, id, graph, deps, edges, ndeps);
}

FC_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t h, enum cudaStreamCaptureStatus *st,
						 unsigned long long *id, cudaGraph_t *graph,
						 const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
						 size_t *ndeps)
{
	return capture_info("cudaStreamGetCaptureInfo_ptsz", 1, h, st, id, graph, deps, edges, ndeps);
}

FC_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
	RT_ENTER("cudaGraphInstantiate");
	(void)flags;
	if (!x)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_graph_instantiate(g, x));
}

FC_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
	RT_ENTER("cudaGraphInstantiateWithFlags");
	(void)flags;
	if (!x)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_graph_instantiate(g, x));
}

static cudaError_t graph_launch(const char *name, int ptsz, cudaGraphExec_t x, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_graph_launch(x, s));
}

FC_API cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_launch("cudaGraphLaunch", 0, x, h);
}

FC_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_launch("cudaGraphLaunch_ptsz", 1, x, h);
}

FC_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	RT_ENTER("cudaGraphExecDestroy");
	return rt_reti(fc_graph_exec_destroy(x));
}

FC_API cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	RT_ENTER("cudaGraphDestroy");
	return rt_reti(fc_graph_destroy(g));
}

/* ---- events ---- */

FC_API cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	RT_ENTER("cudaEventCreate");
	if (!e)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_event_create(0, e));
}

FC_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	RT_ENTER("cudaEventCreateWithFlags");
	if (!e)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_event_create(flags, e));
}

FC_API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	RT_ENTER("cudaEventDestroy");
	return rt_reti(fc_event_destroy(e));
}

static cudaError_t event_record(const char *name, int ptsz, cudaEvent_t e, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_event_record(e, s));
}

FC_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h)
{
	return event_record("cudaEventRecord", 0, e, h);
}

FC_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t h)
{
	return event_record("cudaEventRecord_ptsz", 1, e, h);
}

FC_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t h, unsigned int flags)
{
	(void)flags;
	return event_record("cudaEventRecordWithFlags", 0, e, h);
}

FC_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t h, unsigned int flags)
{
	(void)flags;
	return event_record("cudaEventRecordWithFlags_ptsz", 1, e, h);
}

FC_API cudaError_t cudaEventQuery(cudaEvent_t e)
{
	RT_ENTER("cudaEventQuery");
	return rt_reti(fc_event_query(e));
}

FC_API cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	RT_ENTER("cudaEventSynchronize");
	return rt_reti(fc_event_sync(e));
}

FC_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	RT_ENTER("cudaEventElapsedTime");
	return rt_reti(fc_event_elapsed(ms, a, b));
}

/* ---- kernels (not emulated) and driver entry points ---- */

FC_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				    size_t sharedMem, cudaStream_t stream)
{
	(void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("cudaLaunchKernel");
	return rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
					 size_t sharedMem, cudaStream_t stream)
{
	(void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("cudaLaunchKernel_ptsz");
	return rt_ret(cudaErrorNotSupported);
}

static cudaError_t entry_point(const char *name, const char *sym, void **fp, unsigned int ver,
			       unsigned long long flags, enum cudaDriverEntryPointQueryResult *st)
{
	int err;

	RT_ENTER(name);
	if (!sym || !fp)
		return rt_ret(cudaErrorInvalidValue);
	err = fc_proc_lookup(sym, (int)ver, flags, fp);
	if (st)
		*st = err == 0 ? cudaDriverEntryPointSuccess
		      : err == -ERANGE ? cudaDriverEntryPointVersionNotSufficent
		      : cudaDriverEntryPointSymbolNotFound;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDriverEntryPoint(const char *sym, void **fp, unsigned long long flags,
					   enum cudaDriverEntryPointQueryResult *st)
{
	return entry_point("cudaGetDriverEntryPoint", sym, fp, 13000, flags, st);
}

FC_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *sym, void **fp, unsigned long long flags,
						enum cudaDriverEntryPointQueryResult *st)
{
	return entry_point("cudaGetDriverEntryPoint_ptsz", sym, fp, 13000, flags, st);
}

FC_API cudaError_t cudaGetDriverEntryPointByVersion(const char *sym, void **fp, unsigned int ver,
						    unsigned long long flags,
						    enum cudaDriverEntryPointQueryResult *st)
{
	return entry_point("cudaGetDriverEntryPointByVersion", sym, fp, ver, flags, st);
}

FC_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *sym, void **fp, unsigned int ver,
							 unsigned long long flags,
							 enum cudaDriverEntryPointQueryResult *st)
{
	return entry_point("cudaGetDriverEntryPointByVersion_ptsz", sym, fp, ver, flags, st);
}

/* ---- fat-binary registration: accepted and ignored ---- */

static void *fatbin_handle[1];

FC_API void **__cudaRegisterFatBinary(void *fatCubin)
{
	(void)fatCubin;
	fc_api_enter("__cudaRegisterFatBinary");
	return fatbin_handle;
}

FC_API void __cudaRegisterFatBinaryEnd(void **handle)
{
	(void)handle;
}

FC_API void __cudaUnregisterFatBinary(void **handle)
{
	(void)handle;
}

FC_API void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
				   const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
				   dim3 *bDim, dim3 *gDim, int *wSize)
{
	(void)handle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)thread_limit;
	(void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

/* Registered module variables (__device__, __constant__): the host shadow
 * address nvcc passes as the symbol, the name and size, and per device a
 * device allocation made at first use (forgotten in a fork child, whose
 * arenas are new). Guarded by fc.lock. */
struct fc_symbol {
	const void *host;
	const char *name;
	size_t size;
	void *dev[FC_MAX_DEV];
};

static struct fc_symbol *syms;
static size_t nsyms, syms_cap;

void fc_symbols_forget(void)
{
	size_t i;

	for (i = 0; i < nsyms; i++)
		memset(syms[i].dev, 0, sizeof(syms[i].dev));
}

FC_API void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress,
			      const char *deviceName, int ext, size_t size, int constant, int global)
{
	struct fc_symbol *ns;

	(void)handle, (void)deviceAddress, (void)ext, (void)constant, (void)global;
	fc_api_enter("__cudaRegisterVar");
	if (!hostVar || !size)
		return;
	pthread_mutex_lock(&fc.lock);
	if (nsyms == syms_cap) {
		size_t ncap = syms_cap ? syms_cap * 2 : 16;

		ns = realloc(syms, ncap * sizeof(*ns));
		if (!ns)
			goto out_unlock;
		syms = ns;
		syms_cap = ncap;
	}
	memset(&syms[nsyms], 0, sizeof(syms[nsyms]));
	syms[nsyms].host = hostVar;
	syms[nsyms].name = deviceName;
	syms[nsyms].size = size;
	nsyms++;
out_unlock:
	pthread_mutex_unlock(&fc.lock);
}

FC_API void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
				     const char *deviceName, int ext, size_t size, int constant,
				     int global)
{
	(void)handle, (void)hostVarPtrAddress, (void)deviceAddress, (void)deviceName;
	(void)ext, (void)size, (void)constant, (void)global;
}

FC_API char __cudaInitModule(void **handle)
{
	(void)handle;
	return 1;
}

FC_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream)
{
	(void)gridDim, (void)blockDim, (void)sharedMem, (void)stream;
	return 0;
}

FC_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
	(void)gridDim, (void)blockDim, (void)sharedMem, (void)stream;
	return cudaSuccess;
}

/* nvcc 13 launch stubs: a kernel handle is looked up, then launched. The
 * lookup succeeds (so static initialisers are happy); the launch is refused. */
FC_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
	if (kernel)
		*kernel = (cudaKernel_t)(uintptr_t)func;
	return cudaSuccess;
}

FC_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				      void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)kernel, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("__cudaLaunchKernel");
	return rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					   void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)kernel, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("__cudaLaunchKernel_ptsz");
	return rt_ret(cudaErrorNotSupported);
}

/* ==== entry points added for wider programs ==== */

/* ---- pitched copies and memsets ---- */

static cudaError_t memcpy2d_any(const char *name, int ptsz, int sync, void *dst, size_t dpitch,
				const void *src, size_t spitch, size_t width, size_t height,
				enum cudaMemcpyKind kind, cudaStream_t h)
{
	const struct rt_driver *d;
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if ((d = rt_driver(ptsz)))
		return rt_driver_copy2d(d, sync, dst, dpitch, src, spitch, width, height, kind, h);
	return rt_reti(fc_copy2d(dst, dpitch, src, spitch, width, height, (int)kind, s, sync));
}

FC_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
				size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return memcpy2d_any("cudaMemcpy2D", 0, 1, dst, dpitch, src, spitch, width, height, kind, 0);
}

FC_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return memcpy2d_any("cudaMemcpy2D_ptds", 1, 1, dst, dpitch, src, spitch, width, height, kind, 0);
}

FC_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind,
				     cudaStream_t h)
{
	return memcpy2d_any("cudaMemcpy2DAsync", 0, 0, dst, dpitch, src, spitch, width, height, kind, h);
}

FC_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
					  size_t width, size_t height, enum cudaMemcpyKind kind,
					  cudaStream_t h)
{
	return memcpy2d_any("cudaMemcpy2DAsync_ptsz", 1, 0, dst, dpitch, src, spitch, width, height, kind, h);
}

static cudaError_t memset2d_any(const char *name, int ptsz, int sync, void *p, size_t pitch,
				int v, size_t width, size_t height, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return rt_reti(fc_memset2d(p, pitch, (unsigned)v & 0xff, 1, width, height, s, sync));
}

FC_API cudaError_t cudaMemset2D(void *p, size_t pitch, int v, size_t width, size_t height)
{
	return memset2d_any("cudaMemset2D", 0, 1, p, pitch, v, width, height, 0);
}

FC_API cudaError_t cudaMemset2D_ptds(void *p, size_t pitch, int v, size_t width, size_t height)
{
	return memset2d_any("cudaMemset2D_ptds", 1, 1, p, pitch, v, width, height, 0);
}

FC_API cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int v, size_t width, size_t height,
				     cudaStream_t h)
{
	return memset2d_any("cudaMemset2DAsync", 0, 0, p, pitch, v, width, height, h);
}

FC_API cudaError_t cudaMemset2DAsync_ptsz(void *p, size_t pitch, int v, size_t width, size_t height,
					  cudaStream_t h)
{
	return memset2d_any("cudaMemset2DAsync_ptsz", 1, 0, p, pitch, v, width, height, h);
}

/* ---- module variables ---- */

/* Finds SYMBOL, checks [off, off + n) against its size and returns the
 * address of its copy on the current device, made (zeroed) at first use. */
static cudaError_t symbol_addr(const void *symbol, size_t off, size_t n, char **out, size_t *size)
{
	struct fc_symbol *sym = NULL;
	int dev = fc_cur_dev();
	size_t i, sz = 0;
	void *p = NULL;

	if (dev < 0 || dev >= fc.cfg.devices)
		return cudaErrorInvalidDevice;
	pthread_mutex_lock(&fc.lock);
	for (i = 0; i < nsyms && !sym; i++)
		if (syms[i].host == symbol)
			sym = &syms[i];
	if (sym) {
		sz = sym->size;
		p = sym->dev[dev];
	}
	pthread_mutex_unlock(&fc.lock);
	if (!sym || !symbol)
		return cudaErrorInvalidSymbol;
	if (off > sz || n > sz - off)
		return cudaErrorInvalidValue;
	if (!p) {
		if (fc_dev_alloc_internal(dev, sz, &p) < 0)
			return cudaErrorMemoryAllocation;
		memset(fc_dev_rw(p), 0, sz); /* initialisation, not a copy */
		pthread_mutex_lock(&fc.lock);
		for (i = 0; i < nsyms; i++)
			if (syms[i].host == symbol)
				sym = &syms[i];
		if (!sym->dev[dev])
			sym->dev[dev] = p;
		p = sym->dev[dev];
		pthread_mutex_unlock(&fc.lock);
	}
	*out = (char *)p + off;
	if (size)
		*size = sz;
	return cudaSuccess;
}

static cudaError_t to_symbol(const char *name, int ptsz, int sync, const void *symbol, const void *src,
			     size_t n, size_t off, enum cudaMemcpyKind kind, cudaStream_t h)
{
	struct CUstream_st *s;
	cudaError_t e;
	char *d;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
		return rt_ret(cudaErrorInvalidMemcpyDirection);
	if ((e = symbol_addr(symbol, off, n, &d, NULL)) != cudaSuccess)
		return rt_ret(e);
	return rt_reti(fc_copy(d, src, n, (int)kind, s, sync));
}

static cudaError_t from_symbol(const char *name, int ptsz, int sync, void *dst, const void *symbol,
			       size_t n, size_t off, enum cudaMemcpyKind kind, cudaStream_t h)
{
	struct CUstream_st *s;
	cudaError_t e;
	char *d;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
		return rt_ret(cudaErrorInvalidMemcpyDirection);
	if ((e = symbol_addr(symbol, off, n, &d, NULL)) != cudaSuccess)
		return rt_ret(e);
	return rt_reti(fc_copy(dst, d, n, (int)kind, s, sync));
}

FC_API cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t n, size_t off,
				      enum cudaMemcpyKind kind)
{
	return to_symbol("cudaMemcpyToSymbol", 0, 1, symbol, src, n, off, kind, 0);
}

FC_API cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t n, size_t off,
					   enum cudaMemcpyKind kind)
{
	return to_symbol("cudaMemcpyToSymbol_ptds", 1, 1, symbol, src, n, off, kind, 0);
}

FC_API cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t n, size_t off,
					   enum cudaMemcpyKind kind, cudaStream_t h)
{
	return to_symbol("cudaMemcpyToSymbolAsync", 0, 0, symbol, src, n, off, kind, h);
}

FC_API cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t n, size_t off,
						enum cudaMemcpyKind kind, cudaStream_t h)
{
	return to_symbol("cudaMemcpyToSymbolAsync_ptsz", 1, 0, symbol, src, n, off, kind, h);
}

FC_API cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t n, size_t off,
					enum cudaMemcpyKind kind)
{
	return from_symbol("cudaMemcpyFromSymbol", 0, 1, dst, symbol, n, off, kind, 0);
}

FC_API cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t n, size_t off,
					     enum cudaMemcpyKind kind)
{
	return from_symbol("cudaMemcpyFromSymbol_ptds", 1, 1, dst, symbol, n, off, kind, 0);
}

FC_API cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t n, size_t off,
					     enum cudaMemcpyKind kind, cudaStream_t h)
{
	return from_symbol("cudaMemcpyFromSymbolAsync", 0, 0, dst, symbol, n, off, kind, h);
}

FC_API cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t n, size_t off,
						  enum cudaMemcpyKind kind, cudaStream_t h)
{
	return from_symbol("cudaMemcpyFromSymbolAsync_ptsz", 1, 0, dst, symbol, n, off, kind, h);
}

FC_API cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
	cudaError_t e;
	char *d;

	RT_ENTER("cudaGetSymbolAddress");
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	if ((e = symbol_addr(symbol, 0, 0, &d, NULL)) != cudaSuccess)
		return rt_ret(e);
	*devPtr = d;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
	cudaError_t e;
	char *d;

	RT_ENTER("cudaGetSymbolSize");
	if (!size)
		return rt_ret(cudaErrorInvalidValue);
	if ((e = symbol_addr(symbol, 0, 0, &d, size)) != cudaSuccess)
		return rt_ret(e);
	return cudaSuccess;
}

/* ---- stream queries and callbacks ---- */

static cudaError_t add_callback(const char *name, int ptsz, cudaStream_t h, cudaStreamCallback_t cb,
				void *arg, unsigned flags)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (flags || !cb)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_stream_callback(s, h, cb, arg));
}

FC_API cudaError_t cudaStreamAddCallback(cudaStream_t h, cudaStreamCallback_t cb, void *arg,
					 unsigned int flags)
{
	return add_callback("cudaStreamAddCallback", 0, h, cb, arg, flags);
}

FC_API cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t h, cudaStreamCallback_t cb, void *arg,
					      unsigned int flags)
{
	return add_callback("cudaStreamAddCallback_ptsz", 1, h, cb, arg, flags);
}

static cudaError_t stream_prio(const char *name, int ptsz, cudaStream_t h, int *prio)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!prio)
		return rt_ret(cudaErrorInvalidValue);
	*prio = fc_stream_priority(s);
	return cudaSuccess;
}

FC_API cudaError_t cudaStreamGetPriority(cudaStream_t h, int *prio)
{
	return stream_prio("cudaStreamGetPriority", 0, h, prio);
}

FC_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t h, int *prio)
{
	return stream_prio("cudaStreamGetPriority_ptsz", 1, h, prio);
}

static cudaError_t stream_id(const char *name, int ptsz, cudaStream_t h, unsigned long long *id)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!id)
		return rt_ret(cudaErrorInvalidValue);
	*id = fc_stream_id(s);
	return cudaSuccess;
}

FC_API cudaError_t cudaStreamGetId(cudaStream_t h, unsigned long long *id)
{
	return stream_id("cudaStreamGetId", 0, h, id);
}

FC_API cudaError_t cudaStreamGetId_ptsz(cudaStream_t h, unsigned long long *id)
{
	return stream_id("cudaStreamGetId_ptsz", 1, h, id);
}

/* ---- peers, limits, device selection ---- */

static int dev_ok(int d)
{
	return d >= 0 && d < fc.cfg.devices;
}

FC_API cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
	RT_ENTER("cudaDeviceCanAccessPeer");
	if (!can)
		return rt_ret(cudaErrorInvalidValue);
	if (!dev_ok(device) || !dev_ok(peer))
		return rt_ret(cudaErrorInvalidDevice);
	*can = device != peer;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
	int cur = fc_cur_dev();
	cudaError_t e = cudaSuccess;

	RT_ENTER("cudaDeviceEnablePeerAccess");
	if (flags)
		return rt_ret(cudaErrorInvalidValue);
	if (!dev_ok(peer) || !dev_ok(cur) || peer == cur)
		return rt_ret(cudaErrorInvalidDevice);
	pthread_mutex_lock(&fc.lock);
	if (fc.dev[cur].peers & (1u << peer))
		e = cudaErrorPeerAccessAlreadyEnabled;
	else
		fc.dev[cur].peers |= 1u << peer;
	pthread_mutex_unlock(&fc.lock);
	return rt_ret(e);
}

FC_API cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
	int cur = fc_cur_dev();
	cudaError_t e = cudaSuccess;

	RT_ENTER("cudaDeviceDisablePeerAccess");
	if (!dev_ok(peer) || !dev_ok(cur))
		return rt_ret(cudaErrorInvalidDevice);
	pthread_mutex_lock(&fc.lock);
	if (!(fc.dev[cur].peers & (1u << peer)))
		e = cudaErrorPeerAccessNotEnabled;
	else
		fc.dev[cur].peers &= ~(1u << peer);
	pthread_mutex_unlock(&fc.lock);
	return rt_ret(e);
}

FC_API cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
	RT_ENTER("cudaInitDevice");
	(void)deviceFlags;
	if (flags & ~(unsigned)cudaInitDeviceFlagsAreValid)
		return rt_ret(cudaErrorInvalidValue);
	if (!dev_ok(device))
		return rt_ret(cudaErrorInvalidDevice);
	return cudaSuccess;
}

FC_API cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *prop)
{
	RT_ENTER("cudaChooseDevice");
	if (!device || !prop)
		return rt_ret(cudaErrorInvalidValue);
	if (!fc.cfg.devices)
		return rt_ret(cudaErrorNoDevice);
	*device = 0;
	return cudaSuccess;
}

static const size_t limit_default[FC_NLIMITS] = {
	1024, 1 << 20, 8 << 20, 2, 2048, 64, 0,
};

FC_API cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
	int d = fc_cur_dev();

	RT_ENTER("cudaDeviceSetLimit");
	if ((unsigned)limit >= FC_NLIMITS)
		return rt_ret(cudaErrorUnsupportedLimit);
	if (!dev_ok(d))
		return rt_ret(cudaErrorNoDevice);
	if (limit == cudaLimitMaxL2FetchGranularity && value > 128)
		return rt_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&fc.lock);
	fc.dev[d].limits[limit] = value + 1; /* 0 means the default */
	pthread_mutex_unlock(&fc.lock);
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceGetLimit(size_t *value, enum cudaLimit limit)
{
	int d = fc_cur_dev();
	size_t v;

	RT_ENTER("cudaDeviceGetLimit");
	if (!value)
		return rt_ret(cudaErrorInvalidValue);
	if ((unsigned)limit >= FC_NLIMITS)
		return rt_ret(cudaErrorUnsupportedLimit);
	if (!dev_ok(d))
		return rt_ret(cudaErrorNoDevice);
	pthread_mutex_lock(&fc.lock);
	v = fc.dev[d].limits[limit];
	pthread_mutex_unlock(&fc.lock);
	*value = v ? v - 1 : limit_default[limit];
	return cudaSuccess;
}

/* Device d sits on PCI bus d + 1 (as cudaDeviceProp.pciBusID says). */
FC_API cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device)
{
	RT_ENTER("cudaDeviceGetPCIBusId");
	if (!id || len < 13)
		return rt_ret(cudaErrorInvalidValue);
	if (!dev_ok(device))
		return rt_ret(cudaErrorInvalidDevice);
	snprintf(id, (size_t)len, "0000:%02x:00.0", device + 1);
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *id)
{
	unsigned dom = 0, bus = 0, slot = 0, fn = 0;

	RT_ENTER("cudaDeviceGetByPCIBusId");
	if (!device || !id)
		return rt_ret(cudaErrorInvalidValue);
	if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4 &&
	    sscanf(id, "%x:%x.%x", &bus, &slot, &fn) != 3)
		return rt_ret(cudaErrorInvalidValue);
	if (dom || slot || fn || !bus || !dev_ok((int)bus - 1))
		return rt_ret(cudaErrorInvalidDevice);
	*device = (int)bus - 1;
	return cudaSuccess;
}

/* ---- host memory, prefetch, advice ---- */

FC_API cudaError_t cudaHostGetFlags(unsigned int *flags, void *p)
{
	RT_ENTER("cudaHostGetFlags");
	if (!flags || !p)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_host_flags(p, flags));
}

/* A location names a device or the host; -ENODEV / -EINVAL otherwise. */
static cudaError_t location_check(struct cudaMemLocation loc)
{
	switch (loc.type) {
	case cudaMemLocationTypeDevice:
		return dev_ok(loc.id) ? cudaSuccess : cudaErrorInvalidDevice;
	case cudaMemLocationTypeHost:
	case cudaMemLocationTypeHostNuma:
	case cudaMemLocationTypeHostNumaCurrent:
		return cudaSuccess;
	default:
		return cudaErrorInvalidValue;
	}
}

/* Prefetching moves nothing here: after validation it is a stream-ordered
 * no-op. Only managed memory can be prefetched (no HMM). */
static cudaError_t prefetch(const char *name, int ptsz, const void *p, size_t n,
			    struct cudaMemLocation loc, unsigned flags, cudaStream_t h)
{
	struct CUstream_st *s;
	cudaError_t e;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!p || !n || flags || fc_mem_classify(p, n, NULL) != FC_MANAGED)
		return rt_ret(cudaErrorInvalidValue);
	if ((e = location_check(loc)) != cudaSuccess)
		return rt_ret(e);
	return rt_reti(fc_stream_nop(s));
}

FC_API cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, struct cudaMemLocation loc,
					unsigned int flags, cudaStream_t h)
{
	return prefetch("cudaMemPrefetchAsync", 0, p, n, loc, flags, h);
}

FC_API cudaError_t cudaMemPrefetchAsync_ptsz(const void *p, size_t n, struct cudaMemLocation loc,
					     unsigned int flags, cudaStream_t h)
{
	return prefetch("cudaMemPrefetchAsync_ptsz", 1, p, n, loc, flags, h);
}

FC_API cudaError_t cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise advice,
				 struct cudaMemLocation loc)
{
	cudaError_t e;

	RT_ENTER("cudaMemAdvise");
	if (!p || !n || fc_mem_classify(p, n, NULL) != FC_MANAGED ||
	    advice < cudaMemAdviseSetReadMostly || advice > cudaMemAdviseUnsetAccessedBy)
		return rt_ret(cudaErrorInvalidValue);
	if ((advice == cudaMemAdviseSetPreferredLocation || advice == cudaMemAdviseSetAccessedBy) &&
	    (e = location_check(loc)) != cudaSuccess)
		return rt_ret(e);
	return cudaSuccess;
}

/* ---- graphs ---- */

static cudaError_t graph_upload(const char *name, int ptsz, cudaGraphExec_t x, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (fc_graph_exec_check(x))
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_stream_nop(s));
}

FC_API cudaError_t cudaGraphUpload(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_upload("cudaGraphUpload", 0, x, h);
}

FC_API cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_upload("cudaGraphUpload_ptsz", 1, x, h);
}

FC_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	struct fc_tls *t;
	enum cudaStreamCaptureMode old;

	RT_ENTER("cudaThreadExchangeStreamCaptureMode");
	if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
		return rt_ret(cudaErrorInvalidValue);
	t = fc_tls_get();
	old = t->capture_mode;
	t->capture_mode = *mode;
	*mode = old;
	return cudaSuccess;
}

static cudaError_t capture_to_graph(const char *name, int ptsz, cudaStream_t h, cudaGraph_t g,
				    const cudaGraphNode_t *deps, size_t ndeps,
				    enum cudaStreamCaptureMode mode)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!g || (ndeps && !deps) || (unsigned)mode > cudaStreamCaptureModeRelaxed)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_capture_begin(s, g));
}

FC_API cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t h, cudaGraph_t g, const cudaGraphNode_t *deps,
						 const cudaGraphEdgeData *edges, size_t ndeps,
						 enum cudaStreamCaptureMode mode)
{
	(void)edges;
	return capture_to_graph("cudaStreamBeginCaptureToGraph", 0, h, g, deps, ndeps, mode);
}

FC_API cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t h, cudaGraph_t g,
						      const cudaGraphNode_t *deps,
						      const cudaGraphEdgeData *edges, size_t ndeps,
						      enum cudaStreamCaptureMode mode)
{
	(void)edges;
	return capture_to_graph("cudaStreamBeginCaptureToGraph_ptsz", 1, h, g, deps, ndeps, mode);
}

FC_API cudaError_t cudaGraphCreate(cudaGraph_t *g, unsigned int flags)
{
	RT_ENTER("cudaGraphCreate");
	if (!g || flags)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_graph_create(g));
}

FC_API cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *node, cudaGraph_t g,
					    const cudaGraphNode_t *deps, size_t ndeps, void *dst,
					    const void *src, size_t count, enum cudaMemcpyKind kind)
{
	RT_ENTER("cudaGraphAddMemcpyNode1D");
	return rt_reti(fc_graph_add_copy(g, deps, ndeps, dst, src, count, (int)kind, node));
}

FC_API cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *node, cudaGraph_t g,
					  const cudaGraphNode_t *deps, size_t ndeps,
					  const struct cudaMemsetParams *p)
{
	RT_ENTER("cudaGraphAddMemsetNode");
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_graph_add_memset(g, deps, ndeps, p->dst, p->pitch, p->value,
					   p->elementSize, p->width, p->height, node));
}

FC_API cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *node, cudaGraph_t g,
					const cudaGraphNode_t *deps, size_t ndeps,
					const struct cudaHostNodeParams *p)
{
	RT_ENTER("cudaGraphAddHostNode");
	if (!p || !p->fn)
		return rt_ret(cudaErrorInvalidValue);
	return rt_reti(fc_graph_add_host(g, deps, ndeps, p->fn, p->userData, node));
}

FC_API cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *node, cudaGraph_t g,
					 const cudaGraphNode_t *deps, size_t ndeps)
{
	RT_ENTER("cudaGraphAddEmptyNode");
	return rt_reti(fc_graph_add_host(g, deps, ndeps, NULL, NULL, node));
}

FC_API cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *num)
{
	RT_ENTER("cudaGraphGetNodes");
	return rt_reti(fc_graph_nodes(g, nodes, num));
}

FC_API cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type)
{
	int t;

	RT_ENTER("cudaGraphNodeGetType");
	t = fc_graph_node_type(node);
	if (!type || t < 0)
		return rt_ret(cudaErrorInvalidValue);
	*type = (enum cudaGraphNodeType)t;
	return cudaSuccess;
}

FC_API cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g,
				       cudaGraphExecUpdateResultInfo *info)
{
	enum cudaGraphExecUpdateResult r;
	struct CUgraphNode_st *errnode;
	int err;

	RT_ENTER("cudaGraphExecUpdate");
	if (!info)
		return rt_ret(cudaErrorInvalidValue);
	err = fc_graph_exec_update(x, g, &r, &errnode);
	info->result = err == -EBADF ? cudaGraphExecUpdateError : r;
	info->errorNode = errnode;
	info->errorFromNode = NULL;
	return rt_reti(err == -EBADF ? -EINVAL : err);
}

/* ---- memory pools: one default pool per device ---- */

#define pool_dev fc_pool_dev

FC_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
	RT_ENTER("cudaDeviceGetDefaultMemPool");
	if (!pool)
		return rt_ret(cudaErrorInvalidValue);
	if (!dev_ok(device))
		return rt_ret(cudaErrorInvalidDevice);
	*pool = &fc.dev[device].pool;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device)
{
	RT_ENTER("cudaDeviceGetMemPool");
	if (!pool)
		return rt_ret(cudaErrorInvalidValue);
	if (!dev_ok(device))
		return rt_ret(cudaErrorInvalidDevice);
	*pool = &fc.dev[device].pool;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool)
{
	RT_ENTER("cudaDeviceSetMemPool");
	if (!dev_ok(device))
		return rt_ret(cudaErrorInvalidDevice);
	if (pool_dev(pool) != device)
		return rt_ret(cudaErrorInvalidValue);
	return cudaSuccess;
}

FC_API cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
	RT_ENTER("cudaMemPoolCreate");
	if (!pool || !props)
		return rt_ret(cudaErrorInvalidValue);
	return rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
	RT_ENTER("cudaMemPoolDestroy");
	(void)pool;
	return rt_ret(cudaErrorInvalidValue); /* a default pool cannot be destroyed */
}

static cudaError_t malloc_pool(const char *name, int ptsz, void **p, size_t size,
			       cudaMemPool_t pool, cudaStream_t h)
{
	struct CUstream_st *s;
	int d = pool_dev(pool);

	RT_ENTER_ALLOC(name);
	RT_STREAM(h, ptsz, s);
	if (!p || d < 0)
		return rt_ret(cudaErrorInvalidValue);
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	return rt_reti(fc_dev_alloc(d, size ? size : 1, p));
}

FC_API cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool, cudaStream_t h)
{
	return malloc_pool("cudaMallocFromPoolAsync", 0, p, size, pool, h);
}

FC_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t size, cudaMemPool_t pool, cudaStream_t h)
{
	return malloc_pool("cudaMallocFromPoolAsync_ptsz", 1, p, size, pool, h);
}

FC_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep)
{
	RT_ENTER("cudaMemPoolTrimTo");
	(void)keep;
	return rt_ret(pool_dev(pool) < 0 ? cudaErrorInvalidValue : cudaSuccess);
}

FC_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
	int d = pool_dev(pool);

	RT_ENTER("cudaMemPoolSetAttribute");
	if (d < 0 || !value)
		return rt_ret(cudaErrorInvalidValue);
	switch (attr) {
	case cudaMemPoolReuseFollowEventDependencies:
	case cudaMemPoolReuseAllowOpportunistic:
	case cudaMemPoolReuseAllowInternalDependencies:
		pool->reuse[attr - 1] = *(int *)value != 0;
		return cudaSuccess;
	case cudaMemPoolAttrReleaseThreshold:
		pool->release_threshold = *(unsigned long long *)value;
		return cudaSuccess;
	case cudaMemPoolAttrReservedMemHigh:
	case cudaMemPoolAttrUsedMemHigh:
		/* Only a reset to zero is allowed. */
		return rt_ret(*(unsigned long long *)value ? cudaErrorInvalidValue : cudaSuccess);
	default:
		return rt_ret(cudaErrorInvalidValue);
	}
}

/* The pool's memory is the device's: current and high figures are the
 * device arena's use. */
FC_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
	int d = pool_dev(pool);
	size_t f = 0, t = 0;

	RT_ENTER("cudaMemPoolGetAttribute");
	if (d < 0 || !value)
		return rt_ret(cudaErrorInvalidValue);
	switch (attr) {
	case cudaMemPoolReuseFollowEventDependencies:
	case cudaMemPoolReuseAllowOpportunistic:
	case cudaMemPoolReuseAllowInternalDependencies:
		*(int *)value = pool->reuse[attr - 1];
		return cudaSuccess;
	case cudaMemPoolAttrReleaseThreshold:
		*(unsigned long long *)value = pool->release_threshold;
		return cudaSuccess;
	case cudaMemPoolAttrReservedMemCurrent:
	case cudaMemPoolAttrReservedMemHigh:
	case cudaMemPoolAttrUsedMemCurrent:
	case cudaMemPoolAttrUsedMemHigh:
		fc_dev_meminfo(d, &f, &t);
		*(unsigned long long *)value = t - f;
		return cudaSuccess;
	default:
		return rt_ret(cudaErrorInvalidValue);
	}
}

/* ---- kernels: plausible answers, no execution ---- */

FC_API cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	RT_ENTER("cudaFuncGetAttributes");
	if (!attr)
		return rt_ret(cudaErrorInvalidValue);
	if (!func)
		return rt_ret(cudaErrorInvalidDeviceFunction);
	memset(attr, 0, sizeof(*attr));
	attr->maxThreadsPerBlock = 1024;
	attr->ptxVersion = 90;
	attr->binaryVersion = 90;
	attr->maxDynamicSharedSizeBytes = 48 << 10;
	return cudaSuccess;
}

static cudaError_t occupancy(const char *name, int *n, const void *func, int block, unsigned flags)
{
	RT_ENTER(name);
	if (!n || block <= 0 || flags > 1)
		return rt_ret(cudaErrorInvalidValue);
	if (!func)
		return rt_ret(cudaErrorInvalidDeviceFunction);
	*n = block > 1024 ? 0 : 2048 / block > 32 ? 32 : 2048 / block;
	return cudaSuccess;
}

FC_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block,
								 size_t smem)
{
	(void)smem;
	return occupancy("cudaOccupancyMaxActiveBlocksPerMultiprocessor", n, func, block, 0);
}

FC_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func,
									  int block, size_t smem,
									  unsigned int flags)
{
	(void)smem;
	return occupancy("cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", n, func, block, flags);
}

/* ---- IPC: not emulated ---- */

FC_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *p)
{
	(void)handle, (void)p;
	RT_ENTER("cudaIpcGetMemHandle");
	return rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t handle, unsigned int flags)
{
	(void)p, (void)handle, (void)flags;
	RT_ENTER("cudaIpcOpenMemHandle");
	return rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaIpcCloseMemHandle(void *p)
{
	(void)p;
	RT_ENTER("cudaIpcCloseMemHandle");
	return rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t e)
{
	(void)handle, (void)e;
	RT_ENTER("cudaIpcGetEventHandle");
	return rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *e, cudaIpcEventHandle_t handle)
{
	(void)e, (void)handle;
	RT_ENTER("cudaIpcOpenEventHandle");
	return rt_ret(cudaErrorNotSupported);
}
