/*
 * drv_entry.c: the prologue of the driver's entry points, its errors,
 * cuGetProcAddress: the table that finds every driver entry point by base
 * name and version (cudaGetDriverEntryPoint uses it too), and
 * cuGetExportTable, which hands out none of NVIDIA's private tables.
 */
#include "fakecuda.h"
#include "linked.h"

#include <stdio.h>
#include <string.h>

/* ---- the prologue ---- */

CUresult fc_drv_err(int e)
{
	switch (e) {
	case 0: return CUDA_SUCCESS;
	case -ENOMEM: return CUDA_ERROR_OUT_OF_MEMORY;
	case -EINVAL: return CUDA_ERROR_INVALID_VALUE;
	case -EBADF: return CUDA_ERROR_INVALID_HANDLE;
	case -EAGAIN: return CUDA_ERROR_NOT_READY;
	case -ENODEV: return CUDA_ERROR_INVALID_DEVICE;
	case -EPERM: return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	case -ENOTSUP: return CUDA_ERROR_NOT_SUPPORTED;
	case -EEXIST: return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	case -ENOENT: return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	case -FC_ENOCTX: return CUDA_ERROR_INVALID_CONTEXT;
	case -FC_ENOINIT: return CUDA_ERROR_NOT_INITIALIZED;
	default: return CUDA_ERROR_UNKNOWN;
	}
}

int fc_drv_enter(const char *name, int need_ctx)
{
	if (fc_api_enter(name))
		return -EIO;
	if (!fc.driver_inited)
		return -FC_ENOINIT;
	if (need_ctx && (!fc_tls_get()->ctx || fc_tls_get()->ctx->destroyed))
		return -FC_ENOCTX;
	return 0;
}

/* The stubs of linked.h (drv_linked.c): counted, named once, refused. */
int fc_linked_unemulated(const char *name, int *said)
{
	if (fc_api_enter(name))
		return CUDA_ERROR_UNKNOWN;
	if (!__atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "fakecuda: %s is not emulated (CUDA_ERROR_NOT_SUPPORTED)\n", name);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- errors ---- */

#define DRV_ERRORS(X) \
	X(CUDA_SUCCESS, "no error") \
	X(CUDA_ERROR_INVALID_VALUE, "invalid argument") \
	X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory") \
	X(CUDA_ERROR_NOT_INITIALIZED, "initialization error") \
	X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected") \
	X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") \
	X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context") \
	X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle") \
	X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid") \
	X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device") \
	X(CUDA_ERROR_NOT_FOUND, "named symbol not found") \
	X(CUDA_ERROR_NOT_READY, "device not ready") \
	X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
	X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
	X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
	X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped") \
	X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region") \
	X(CUDA_ERROR_UNKNOWN, "unknown error")

/* The error strings need no cuInit; they count and fail like any call. */
FC_API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	if (fc_api_enter("cuGetErrorString")) {
		if (pStr)
			*pStr = NULL;
		return CUDA_ERROR_UNKNOWN;
	}
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define X(c, s) case c: *pStr = s; return CUDA_SUCCESS;
	DRV_ERRORS(X)
#undef X
	default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
	}
}

FC_API CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	if (fc_api_enter("cuGetErrorName")) {
		if (pStr)
			*pStr = NULL;
		return CUDA_ERROR_UNKNOWN;
	}
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define X(c, s) case c: *pStr = #c; return CUDA_SUCCESS;
	DRV_ERRORS(X)
#undef X
	default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
	}
}

/* ---- cuGetProcAddress ---- */

typedef void (*fc_fn)(void);

/* A base name, the oldest CUDA version it answers, the default entry and
 * the per-thread-default-stream entry (NULL when there is none). */
struct fc_proc {
	const char *name;
	int min_version;
	fc_fn fn;
	fc_fn fn_ptsz;
};

#define P(n, v, f, fp) { n, v, (fc_fn)(f), (fc_fn)(fp) }

static const struct fc_proc procs[] = {
	P("cuInit", 0, cuInit, NULL),
	P("cuDriverGetVersion", 0, cuDriverGetVersion, NULL),
	P("cuDeviceGet", 0, cuDeviceGet, NULL),
	P("cuDeviceGetCount", 0, cuDeviceGetCount, NULL),
	P("cuDeviceGetName", 0, cuDeviceGetName, NULL),
	P("cuDeviceGetAttribute", 0, cuDeviceGetAttribute, NULL),
	P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2, NULL),
	P("cuDeviceGetUuid", 0, cuDeviceGetUuid, NULL),
	P("cuDeviceComputeCapability", 0, cuDeviceComputeCapability, NULL),
	P("cuDeviceGetPCIBusId", 0, cuDeviceGetPCIBusId, NULL),
	P("cuDeviceTotalMem", 0, cuDeviceTotalMem_v2, NULL),
	P("cuDevicePrimaryCtxRetain", 0, cuDevicePrimaryCtxRetain, NULL),
	P("cuDevicePrimaryCtxRelease", 0, cuDevicePrimaryCtxRelease_v2, NULL),
	P("cuCtxGetCurrent", 0, cuCtxGetCurrent, NULL),
	P("cuCtxSetCurrent", 0, cuCtxSetCurrent, NULL),
	P("cuCtxGetId", 0, cuCtxGetId, NULL),
	P("cuCtxGetDevice", 0, cuCtxGetDevice, NULL),
	P("cuCtxSynchronize", 13000, cuCtxSynchronize_v2, NULL),
	P("cuCtxSynchronize", 0, cuCtxSynchronize, NULL),
	P("cuCtxPushCurrent", 0, cuCtxPushCurrent_v2, NULL),
	P("cuCtxPopCurrent", 0, cuCtxPopCurrent_v2, NULL),
	P("cuCtxGetApiVersion", 0, cuCtxGetApiVersion, NULL),
	P("cuCtxCreate", 12050, cuCtxCreate_v4, NULL),
	P("cuCtxDestroy", 4000, cuCtxDestroy_v2, NULL),
	P("cuCtxAttach", 0, cuCtxAttach, NULL),
	P("cuCtxDetach", 0, cuCtxDetach, NULL),
	P("cuDevicePrimaryCtxGetState", 0, cuDevicePrimaryCtxGetState, NULL),
	P("cuMemAlloc", 0, cuMemAlloc_v2, NULL),
	P("cuMemFree", 0, cuMemFree_v2, NULL),
	P("cuMemGetInfo", 0, cuMemGetInfo_v2, NULL),
	P("cuMemAllocPitch", 0, cuMemAllocPitch_v2, NULL),
	P("cuMemAllocManaged", 0, cuMemAllocManaged, NULL),
	P("cuMemAllocAsync", 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
	P("cuMemFreeAsync", 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
	P("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
	P("cuMemAllocHost", 0, cuMemAllocHost_v2, NULL),
	P("cuMemHostAlloc", 0, cuMemHostAlloc, NULL),
	P("cuMemGetAddressRange", 0, cuMemGetAddressRange_v2, NULL),
	P("cuMemGetAllocationGranularity", 0, cuMemGetAllocationGranularity, NULL),
	P("cuMemAddressReserve", 0, cuMemAddressReserve, NULL),
	P("cuMemAddressFree", 0, cuMemAddressFree, NULL),
	P("cuMemCreate", 0, cuMemCreate, NULL),
	P("cuMemRelease", 0, cuMemRelease, NULL),
	P("cuMemMap", 0, cuMemMap, NULL),
	P("cuMemUnmap", 0, cuMemUnmap, NULL),
	P("cuMemSetAccess", 0, cuMemSetAccess, NULL),
	P("cuMemGetAccess", 0, cuMemGetAccess, NULL),
	P("cuMemRetainAllocationHandle", 0, cuMemRetainAllocationHandle, NULL),
	P("cuMemGetAllocationPropertiesFromHandle", 0, cuMemGetAllocationPropertiesFromHandle, NULL),
	P("cuMemFreeHost", 0, cuMemFreeHost, NULL),
	P("cuMemHostGetDevicePointer", 0, cuMemHostGetDevicePointer_v2, NULL),
	P("cuMemHostRegister", 0, cuMemHostRegister_v2, NULL),
	P("cuMemHostUnregister", 0, cuMemHostUnregister, NULL),
	P("cuPointerGetAttribute", 0, cuPointerGetAttribute, NULL),
	P("cuPointerGetAttributes", 0, cuPointerGetAttributes, NULL),
	P("cuMemcpyHtoD", 0, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
	P("cuMemcpyDtoH", 0, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
	P("cuMemcpyDtoD", 0, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
	P("cuMemcpy", 0, cuMemcpy, cuMemcpy_ptds),
	P("cuMemcpyHtoDAsync", 0, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
	P("cuMemcpyDtoHAsync", 0, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
	P("cuMemcpyDtoDAsync", 0, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
	P("cuMemcpyAsync", 0, cuMemcpyAsync, cuMemcpyAsync_ptsz),
	P("cuMemcpyBatchAsync", 13000, cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz),
	P("cuMemsetD8", 0, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
	P("cuMemsetD16", 0, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
	P("cuMemsetD32", 0, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
	P("cuMemsetD16Async", 0, cuMemsetD16Async, cuMemsetD16Async_ptsz),
	P("cuMemsetD32Async", 0, cuMemsetD32Async, cuMemsetD32Async_ptsz),
	P("cuMemsetD2D8", 0, cuMemsetD2D8_v2, NULL),
	P("cuMemsetD2D16", 0, cuMemsetD2D16_v2, NULL),
	P("cuMemsetD2D32", 0, cuMemsetD2D32_v2, NULL),
	P("cuMemsetD2D8Async", 0, cuMemsetD2D8Async, NULL),
	P("cuMemsetD2D16Async", 0, cuMemsetD2D16Async, NULL),
	P("cuMemsetD2D32Async", 0, cuMemsetD2D32Async, NULL),
	P("cuMemcpy2D", 0, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds),
	P("cuMemcpy2DUnaligned", 0, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds),
	P("cuMemcpy2DAsync", 0, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz),
	P("cuLaunchHostFunc", 0, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),
	P("cuStreamAddCallback", 0, cuStreamAddCallback, cuStreamAddCallback_ptsz),
	P("cuStreamGetPriority", 0, cuStreamGetPriority, cuStreamGetPriority_ptsz),
	P("cuStreamGetFlags", 0, cuStreamGetFlags, cuStreamGetFlags_ptsz),
	P("cuStreamGetId", 0, cuStreamGetId, cuStreamGetId_ptsz),
	P("cuMemsetD8Async", 0, cuMemsetD8Async, cuMemsetD8Async_ptsz),
	P("cuStreamCreate", 0, cuStreamCreate, NULL),
	P("cuStreamCreateWithPriority", 0, cuStreamCreateWithPriority, NULL),
	P("cuStreamDestroy", 0, cuStreamDestroy_v2, NULL),
	P("cuStreamSynchronize", 0, cuStreamSynchronize, cuStreamSynchronize_ptsz),
	P("cuStreamQuery", 0, cuStreamQuery, cuStreamQuery_ptsz),
	P("cuStreamWaitEvent", 0, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
	P("cuStreamIsCapturing", 0, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
	P("cuThreadExchangeStreamCaptureMode", 0, cuThreadExchangeStreamCaptureMode, NULL),
	P("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz),
	P("cuStreamBeginCapture", 0, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
	P("cuStreamEndCapture", 0, cuStreamEndCapture, cuStreamEndCapture_ptsz),
	P("cuEventCreate", 0, cuEventCreate, NULL),
	P("cuEventDestroy", 0, cuEventDestroy_v2, NULL),
	P("cuEventRecord", 0, cuEventRecord, cuEventRecord_ptsz),
	P("cuEventQuery", 0, cuEventQuery, NULL),
	P("cuEventSynchronize", 0, cuEventSynchronize, NULL),
	P("cuEventElapsedTime", 0, cuEventElapsedTime_v2, NULL),
	P("cuModuleLoadData", 0, cuModuleLoadData, NULL),
	P("cuModuleLoadDataEx", 0, cuModuleLoadDataEx, NULL),
	P("cuModuleUnload", 0, cuModuleUnload, NULL),
	P("cuModuleGetFunction", 0, cuModuleGetFunction, NULL),
	P("cuLaunchKernel", 0, cuLaunchKernel, cuLaunchKernel_ptsz),
	P("cuGetErrorString", 0, cuGetErrorString, NULL),
	P("cuGetErrorName", 0, cuGetErrorName, NULL),
	P("cuGetProcAddress", 12000, cuGetProcAddress_v2, NULL),
	P("cuGetProcAddress", 0, cuGetProcAddress, NULL),
	P("cuGetExportTable", 0, cuGetExportTable, NULL),
};

/* A name may have several rows, newest first: the first row whose version
 * the caller reaches answers. */
int fc_proc_lookup(const char *sym, int version, unsigned long long flags, void **pfn)
{
	size_t i;
	int known = 0;
	fc_fn fn;

	for (i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].name, sym) != 0)
			continue;
		known = 1;
		if (version < procs[i].min_version)
			continue;
		fn = procs[i].fn;
		if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && procs[i].fn_ptsz)
			fn = procs[i].fn_ptsz;
		memcpy(pfn, &fn, sizeof(fn));
		return 0;
	}
	*pfn = NULL;
	return known ? -ERANGE : -ENOENT;
}

FC_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	int err;

	if (fc_api_enter("cuGetProcAddress_v2"))
		return CUDA_ERROR_UNKNOWN;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	err = fc_proc_lookup(symbol, cudaVersion, flags, pfn);
	if (status)
		*status = err == 0 ? CU_GET_PROC_ADDRESS_SUCCESS
			  : err == -ERANGE ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
			  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return err ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

/* The CUDA 11 form: no status; an unknown symbol or a version too old is
 * CUDA_ERROR_NOT_FOUND. */
FC_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	if (fc_api_enter("cuGetProcAddress"))
		return CUDA_ERROR_UNKNOWN;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	return fc_proc_lookup(symbol, cudaVersion, flags, pfn) ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

/* ---- cuGetExportTable ---- */

static pthread_mutex_t export_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char export_seen[16][16];
static int export_nseen;

/* Returns nonzero the first time id is seen (up to 16 ids; later ones
 * always count as new). */
static int export_first_sight(const unsigned char *id)
{
	int i, first = 1;

	pthread_mutex_lock(&export_lock);
	for (i = 0; i < export_nseen; i++)
		if (memcmp(export_seen[i], id, 16) == 0)
			first = 0;
	if (first && export_nseen < 16)
		memcpy(export_seen[export_nseen++], id, 16);
	pthread_mutex_unlock(&export_lock);
	return first;
}

/*
 * cuGetExportTable is public (cuda.h), the tables it hands out are not:
 * NVIDIA's runtime asks for them by id before its first call, which is
 * why a statically linked runtime (CuPy's, nvcc's default) cannot start
 * on the emulated device. No table is emulated: every id is
 * CUDA_ERROR_NOT_FOUND with a NULL table, as the real driver answers an id
 * it does not know, and the first request of each id says so on stderr in
 * one line naming it, so that such a program's failure explains itself.
 */
FC_API CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	const unsigned char *u;

	if (fc_api_enter("cuGetExportTable"))
		return CUDA_ERROR_UNKNOWN;
	if (!ppExportTable || !pExportTableId)
		return CUDA_ERROR_INVALID_VALUE;
	*ppExportTable = NULL;
	u = (const unsigned char *)pExportTableId->bytes;
	if (export_first_sight(u))
		fprintf(stderr, "fakecuda: cuGetExportTable {%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			"%02x%02x%02x%02x%02x%02x}: NVIDIA's private export tables are not emulated "
			"(CUDA_ERROR_NOT_FOUND)\n", u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8],
			u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
	return CUDA_ERROR_NOT_FOUND;
}
