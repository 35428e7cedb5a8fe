/*
 * drv_query.c: the driver's device queries beyond drv_device.c, for the
 * clients that ask them (numba-cuda, PyCUDA): the device's UUID (both
 * forms), its compute capability (the deprecated direct call) and its PCI
 * bus id. Every figure agrees with cuDeviceGetAttribute's.
 */
#include "fakecuda.h"

#include <stdio.h>
#include <string.h>

/* A device's UUID: "fakecuda" then the ordinal, the same on every call. */
static CUresult uuid_of(const char *name, CUuuid *uuid, CUdevice dev)
{
	static const char tag[8] = { 'f', 'a', 'k', 'e', 'c', 'u', 'd', 'a' };

	DRV_ENTER(name, 0);
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	memset(uuid->bytes, 0, sizeof(uuid->bytes));
	memcpy(uuid->bytes, tag, sizeof(tag));
	uuid->bytes[15] = (char)(dev + 1);
	return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	return uuid_of("cuDeviceGetUuid_v2", uuid, dev);
}

FC_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return uuid_of("cuDeviceGetUuid", uuid, dev);
}

/* The attribute's figures: 9.0. */
FC_API CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	DRV_ENTER("cuDeviceComputeCapability", 0);
	if (!major || !minor)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	*major = 9;
	*minor = 0;
	return CUDA_SUCCESS;
}

/* "0000:<dev+1>:00.0", as cudaDeviceGetPCIBusId. */
FC_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	DRV_ENTER("cuDeviceGetPCIBusId", 0);
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", dev + 1);
	return CUDA_SUCCESS;
}
