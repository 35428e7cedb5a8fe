/*
 * drv_device.c: the driver's initialisation, devices and contexts (the
 * primary context of each device, the per-thread context stack).
 *
 * The driver shares every object with the runtime: a CUcontext is the
 * primary context of a device (or one of its own: drv_context.c), CUstream and cudaStream_t are the same
 * structures, CUevent and cudaEvent_t too. Calls other than cuInit,
 * cuDriverGetVersion, the error strings and cuGetProcAddress need cuInit
 * (or a prior runtime call) first; memory and stream calls need a current
 * context, as on a real driver. Driver calls never touch the runtime's last
 * error.
 */
#include "fakecuda.h"

#include <string.h>

/* ---- initialisation, devices, contexts ---- */

FC_API CUresult cuInit(unsigned int flags)
{
	if (fc_api_enter("cuInit"))
		return CUDA_ERROR_UNKNOWN;
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	fc.driver_inited = 1;
	return fc.cfg.devices ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

FC_API CUresult cuDriverGetVersion(int *v)
{
	if (fc_api_enter("cuDriverGetVersion"))
		return CUDA_ERROR_UNKNOWN;
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 13000;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetCount(int *count)
{
	DRV_ENTER("cuDeviceGetCount", 0);
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = fc.cfg.devices;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	DRV_ENTER("cuDeviceGet", 0);
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	DRV_ENTER("cuDeviceGetName", 0);
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	strncpy(name, "fakecuda emulated device", (size_t)len - 1);
	name[len - 1] = '\0';
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	DRV_ENTER("cuDeviceGetAttribute", 0);
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 4; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
	case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = dev + 1; break;
	default: *pi = 0; break;
	}
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	DRV_ENTER("cuDeviceTotalMem_v2", 0);
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = fc.dev[dev].cap;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	DRV_ENTER("cuDevicePrimaryCtxRetain", 0);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fc.lock);
	fc.dev[dev].ctx.refs++;
	fc.dev[dev].ctx.active = 1;
	pthread_mutex_unlock(&fc.lock);
	*pctx = &fc.dev[dev].ctx;
	return CUDA_SUCCESS;
}

/* Active once retained or used by the runtime, until a device reset. */
FC_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	DRV_ENTER("cuDevicePrimaryCtxGetState", 0);
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fc.lock);
	*active = fc.dev[dev].ctx.active;
	pthread_mutex_unlock(&fc.lock);
	*flags = 0;
	return CUDA_SUCCESS;
}

FC_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	DRV_ENTER("cuDevicePrimaryCtxRelease_v2", 0);
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fc.lock);
	if (fc.dev[dev].ctx.refs > 0)
		fc.dev[dev].ctx.refs--;
	pthread_mutex_unlock(&fc.lock);
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	DRV_ENTER("cuCtxGetCurrent", 0);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = fc_tls_get()->ctx;
	return CUDA_SUCCESS;
}

/* A context's id: the device and its generation, new after each reset. */
FC_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
	DRV_ENTER("cuCtxGetId", 0);
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		ctx = fc_tls_get()->ctx;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*id = ((unsigned long long)(ctx->dev + 1) << 32) | (ctx->gen & 0xffffffffULL);
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	struct fc_tls *t;

	DRV_ENTER("cuCtxSetCurrent", 0);
	if (ctx && !fc_ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	/* It replaces the top of the context stack; NULL pops it. */
	t = fc_tls_get();
	if (!ctx && t->ctx_depth)
		ctx = t->ctx_stack[--t->ctx_depth];
	t->ctx = ctx;
	if (ctx)
		t->dev = ctx->dev;
	return CUDA_SUCCESS;
}

/* The context stack: the current context is its top. */
FC_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	struct fc_tls *t;

	DRV_ENTER("cuCtxPushCurrent_v2", 0);
	if (!ctx || !fc_ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	t = fc_tls_get();
	if (t->ctx) {
		if (t->ctx_depth == FC_CTX_STACK)
			return CUDA_ERROR_OUT_OF_MEMORY;
		t->ctx_stack[t->ctx_depth++] = t->ctx;
	}
	t->ctx = ctx;
	t->dev = ctx->dev;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	struct fc_tls *t;

	DRV_ENTER("cuCtxPopCurrent_v2", 1);
	t = fc_tls_get();
	if (pctx)
		*pctx = t->ctx;
	t->ctx = t->ctx_depth ? t->ctx_stack[--t->ctx_depth] : NULL;
	if (t->ctx)
		t->dev = t->ctx->dev;
	return CUDA_SUCCESS;
}

/* The deprecated usage count of a context (PyCUDA detaches the context it
 * found current at exit): cuCtxAttach counts a use of the current context
 * and returns it, cuCtxDetach takes one back from a current context. The
 * count is the primary context's retain count, never below 0; neither
 * changes the context stack. */
FC_API CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
	DRV_ENTER("cuCtxAttach", 1);
	if (!pctx || flags)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = fc_tls_get()->ctx;
	pthread_mutex_lock(&fc.lock);
	(*pctx)->refs++;
	pthread_mutex_unlock(&fc.lock);
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxDetach(CUcontext ctx)
{
	DRV_ENTER("cuCtxDetach", 1);
	if (!ctx || ctx != fc_tls_get()->ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&fc.lock);
	if (ctx->refs > 0)
		ctx->refs--;
	pthread_mutex_unlock(&fc.lock);
	return CUDA_SUCCESS;
}

/* Every context here is made by the CUDA 3.2+ API. */
FC_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	DRV_ENTER("cuCtxGetApiVersion", 0);
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		ctx = fc_tls_get()->ctx;
	if (!ctx || !fc_ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	*version = 3020;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetDevice(CUdevice *dev)
{
	DRV_ENTER("cuCtxGetDevice", 1);
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = fc_tls_get()->ctx->dev;
	return CUDA_SUCCESS;
}

FC_API CUresult cuCtxSynchronize(void)
{
	DRV_ENTER("cuCtxSynchronize", 1);
	return fc_drv_err(fc_device_sync(fc_tls_get()->ctx->dev));
}

/* The CUDA 13.0 form (cuGetProcAddress at 13000 and later): waits for the
 * context named, the current one when ctx is NULL. */
FC_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	DRV_ENTER("cuCtxSynchronize_v2", 0);
	if (!ctx)
		ctx = fc_tls_get()->ctx;
	if (!ctx || !fc_ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	return fc_drv_err(fc_device_sync(ctx->dev));
}
