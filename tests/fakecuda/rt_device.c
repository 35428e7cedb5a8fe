/*
 * rt_device.c: the runtime's devices: count, selection, properties and
 * attributes, synchronisation and reset, versions, peers, limits, PCI bus
 * ids.
 */
#include "fakecuda.h"

#include <stdio.h>
#include <string.h>

/* ---- devices ---- */

FC_API cudaError_t cudaGetDeviceCount(int *count)
{
	RT_ENTER("cudaGetDeviceCount");
	if (!count)
		return fc_rt_ret(cudaErrorInvalidValue);
	*count = fc.cfg.devices;
	return fc_rt_ret(fc.cfg.devices ? cudaSuccess : cudaErrorNoDevice);
}

FC_API cudaError_t cudaSetDevice(int device)
{
	struct fc_tls *t;

	RT_ENTER("cudaSetDevice");
	if (device < 0 || device >= fc.cfg.devices)
		return fc_rt_ret(cudaErrorInvalidDevice);
	t = fc_tls_get();
	t->dev = device;
	t->ctx = &fc.dev[device].ctx;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDevice(int *device)
{
	RT_ENTER("cudaGetDevice");
	if (!device)
		return fc_rt_ret(cudaErrorInvalidValue);
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
		return fc_rt_ret(cudaErrorInvalidValue);
	*flags = 0;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	RT_ENTER("cudaGetDeviceProperties");
	if (!prop)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (device < 0 || device >= fc.cfg.devices)
		return fc_rt_ret(cudaErrorInvalidDevice);
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
		return fc_rt_ret(cudaErrorInvalidValue);
	if (device < 0 || device >= fc.cfg.devices)
		return fc_rt_ret(cudaErrorInvalidDevice);
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
	if (!fc_have_device())
		return fc_rt_ret(cudaErrorNoDevice);
	return fc_rt_reti(fc_device_sync(fc_cur_dev()));
}

FC_API cudaError_t cudaDeviceReset(void)
{
	int err;

	RT_ENTER("cudaDeviceReset");
	if (!fc_have_device())
		return fc_rt_ret(cudaErrorNoDevice);
	/* As CUDA does: every allocation of the device is gone afterwards
	 * (whoever made it); the context that follows is a new one. Streams
	 * and events stay usable here, which is more lenient than CUDA. */
	err = fc_device_sync(fc_cur_dev());
	if (!err)
		fc_dev_reset(fc_cur_dev());
	return fc_rt_reti(err);
}

FC_API cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	size_t f, t;

	RT_ENTER("cudaMemGetInfo");
	if (!fc_have_device())
		return fc_rt_ret(cudaErrorNoDevice);
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
		return fc_rt_ret(cudaErrorInvalidValue);
	*v = 13000;
	return cudaSuccess;
}

FC_API cudaError_t cudaRuntimeGetVersion(int *v)
{
	RT_ENTER("cudaRuntimeGetVersion");
	if (!v)
		return fc_rt_ret(cudaErrorInvalidValue);
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

/* ---- peers, limits, device selection ---- */

FC_API cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
	RT_ENTER("cudaDeviceCanAccessPeer");
	if (!can)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!fc_dev_valid(device) || !fc_dev_valid(peer))
		return fc_rt_ret(cudaErrorInvalidDevice);
	*can = device != peer;
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
	int cur = fc_cur_dev();
	cudaError_t e = cudaSuccess;

	RT_ENTER("cudaDeviceEnablePeerAccess");
	if (flags)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!fc_dev_valid(peer) || !fc_dev_valid(cur) || peer == cur)
		return fc_rt_ret(cudaErrorInvalidDevice);
	pthread_mutex_lock(&fc.lock);
	if (fc.dev[cur].peers & (1u << peer))
		e = cudaErrorPeerAccessAlreadyEnabled;
	else
		fc.dev[cur].peers |= 1u << peer;
	pthread_mutex_unlock(&fc.lock);
	return fc_rt_ret(e);
}

FC_API cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
	int cur = fc_cur_dev();
	cudaError_t e = cudaSuccess;

	RT_ENTER("cudaDeviceDisablePeerAccess");
	if (!fc_dev_valid(peer) || !fc_dev_valid(cur))
		return fc_rt_ret(cudaErrorInvalidDevice);
	pthread_mutex_lock(&fc.lock);
	if (!(fc.dev[cur].peers & (1u << peer)))
		e = cudaErrorPeerAccessNotEnabled;
	else
		fc.dev[cur].peers &= ~(1u << peer);
	pthread_mutex_unlock(&fc.lock);
	return fc_rt_ret(e);
}

FC_API cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
	RT_ENTER("cudaInitDevice");
	(void)deviceFlags;
	if (flags & ~(unsigned)cudaInitDeviceFlagsAreValid)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!fc_dev_valid(device))
		return fc_rt_ret(cudaErrorInvalidDevice);
	return cudaSuccess;
}

FC_API cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *prop)
{
	RT_ENTER("cudaChooseDevice");
	if (!device || !prop)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!fc.cfg.devices)
		return fc_rt_ret(cudaErrorNoDevice);
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
		return fc_rt_ret(cudaErrorUnsupportedLimit);
	if (!fc_dev_valid(d))
		return fc_rt_ret(cudaErrorNoDevice);
	if (limit == cudaLimitMaxL2FetchGranularity && value > 128)
		return fc_rt_ret(cudaErrorInvalidValue);
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
		return fc_rt_ret(cudaErrorInvalidValue);
	if ((unsigned)limit >= FC_NLIMITS)
		return fc_rt_ret(cudaErrorUnsupportedLimit);
	if (!fc_dev_valid(d))
		return fc_rt_ret(cudaErrorNoDevice);
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
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!fc_dev_valid(device))
		return fc_rt_ret(cudaErrorInvalidDevice);
	snprintf(id, (size_t)len, "0000:%02x:00.0", device + 1);
	return cudaSuccess;
}

FC_API cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *id)
{
	unsigned dom = 0, bus = 0, slot = 0, fn = 0;

	RT_ENTER("cudaDeviceGetByPCIBusId");
	if (!device || !id)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4 &&
	    sscanf(id, "%x:%x.%x", &bus, &slot, &fn) != 3)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (dom || slot || fn || !bus || !fc_dev_valid((int)bus - 1))
		return fc_rt_ret(cudaErrorInvalidDevice);
	*device = (int)bus - 1;
	return cudaSuccess;
}
