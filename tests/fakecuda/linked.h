/*
 * linked.h: the driver entry points PyCUDA 2026.1 links (its _driver module
 * needs libcuda.so.1 to define all 143 it names) that the emulated device
 * does not emulate. drv_linked.c exports each as a stub: it counts the call
 * (the report's "calls"), says on stderr once per name that it is not
 * emulated, and returns CUDA_ERROR_NOT_SUPPORTED without touching its
 * arguments. None of them is in cuGetProcAddress's table, which answers
 * "not found" for them, as for any name it does not emulate: a program (the
 * shim) that takes an optional entry point's presence as support is not
 * misled. This header does not include cuda.h (the stubs take no
 * declared arguments), so drv_linked.c includes it alone.
 */
#ifndef FAKECUDA_LINKED_H
#define FAKECUDA_LINKED_H

/* X(name) for each stub, sorted. To refresh: the undefined cu[A-Z]*
 * symbols of PyCUDA's _driver*.so (nm -D) less what the emulation
 * defines. */
#define FC_LINKED_UNEMULATED(X) \
	X(cuArray3DCreate_v2) X(cuArray3DGetDescriptor_v2) X(cuArrayCreate_v2) \
	X(cuArrayDestroy) X(cuArrayGetDescriptor_v2) \
	X(cuCtxDisablePeerAccess) \
	X(cuCtxEnablePeerAccess) X(cuCtxGetCacheConfig) X(cuCtxGetLimit) \
	X(cuCtxGetSharedMemConfig) X(cuCtxSetCacheConfig) X(cuCtxSetLimit) \
	X(cuCtxSetSharedMemConfig) X(cuDeviceCanAccessPeer) X(cuDeviceGetByPCIBusId) \
	X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuFuncSetBlockShape) \
	X(cuFuncSetCacheConfig) X(cuFuncSetSharedSize) X(cuIpcCloseMemHandle) \
	X(cuIpcGetEventHandle) X(cuIpcGetMemHandle) X(cuIpcOpenEventHandle) \
	X(cuIpcOpenMemHandle_v2) X(cuLaunch) X(cuLaunchGrid) X(cuLaunchGridAsync) \
	X(cuLinkAddData_v2) X(cuLinkAddFile_v2) X(cuLinkComplete) X(cuLinkCreate_v2) \
	X(cuLinkDestroy) X(cuMemHostGetFlags) X(cuMemcpy3DAsync_v2) \
	X(cuMemcpy3DPeer) X(cuMemcpy3DPeerAsync) X(cuMemcpy3D_v2) X(cuMemcpyAtoA_v2) \
	X(cuMemcpyAtoD_v2) X(cuMemcpyAtoH_v2) X(cuMemcpyDtoA_v2) X(cuMemcpyHtoA_v2) \
	X(cuMemcpyPeer) X(cuMemcpyPeerAsync) X(cuModuleGetGlobal_v2) \
	X(cuModuleGetSurfRef) X(cuModuleGetTexRef) X(cuModuleLoad) X(cuParamSetSize) \
	X(cuParamSetTexRef) X(cuParamSetf) X(cuParamSeti) X(cuParamSetv) \
	X(cuProfilerInitialize) X(cuProfilerStart) X(cuProfilerStop) \
	X(cuStreamAttachMemAsync) X(cuSurfRefGetArray) X(cuSurfRefSetArray) \
	X(cuTexRefCreate) X(cuTexRefDestroy) X(cuTexRefGetAddressMode) \
	X(cuTexRefGetAddress_v2) X(cuTexRefGetArray) X(cuTexRefGetFilterMode) \
	X(cuTexRefGetFlags) X(cuTexRefGetFormat) X(cuTexRefSetAddress2D_v3) \
	X(cuTexRefSetAddressMode) X(cuTexRefSetAddress_v2) X(cuTexRefSetArray) \
	X(cuTexRefSetFilterMode) X(cuTexRefSetFlags) X(cuTexRefSetFormat)

/* The body of every stub: counts the call of NAME, says once (*said) that
 * it is not emulated, returns CUDA_ERROR_NOT_SUPPORTED (801). */
int fc_linked_unemulated(const char *name, int *said);

#endif
