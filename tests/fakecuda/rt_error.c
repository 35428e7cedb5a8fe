/*
 * rt_error.c: the runtime's errors and the prologue of its entry points.
 *
 * Every cuda* entry point counts itself (fc_rt_enter, which also applies
 * FAKECUDA_FAIL), binds the thread to its device's primary context as the
 * real runtime does on first use, does its work through the emulation, and
 * converts the internal negative errno to a cudaError_t (fc_rt_err). A
 * failing call sets the calling thread's last error (fc_rt_ret;
 * cudaGetLastError returns and clears it, cudaPeekAtLastError only returns
 * it). cudaErrorNotReady is not an error and is not recorded. Names ending
 * _ptsz / _ptds are the entry points of programs built with per-thread
 * default streams: there, stream 0 is the per-thread stream.
 */
#include "fakecuda.h"

#include <string.h>

cudaError_t fc_rt_err(int e)
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

cudaError_t fc_rt_ret(cudaError_t e)
{
	if (e != cudaSuccess && e != cudaErrorNotReady)
		fc_tls_get()->last_error = e;
	return e;
}

cudaError_t fc_rt_reti(int e)
{
	return fc_rt_ret(fc_rt_err(e));
}

int fc_rt_enter(const char *name)
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

int fc_have_device(void)
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
