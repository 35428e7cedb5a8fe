/*
 * rt_module.c: the runtime's modules and kernels: fat-binary, function
 * and variable registration (what nvcc-built programs call at start),
 * module variables and the copies to and from them, kernel launches (not
 * emulated: only vrampool_gather runs, through the driver, kernel.c),
 * function attributes and occupancy, the driver entry points
 * (cudaGetDriverEntryPoint).
 */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>

/* ---- kernels (not emulated) and driver entry points ---- */

FC_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				    size_t sharedMem, cudaStream_t stream)
{
	(void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("cudaLaunchKernel");
	return fc_rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
					 size_t sharedMem, cudaStream_t stream)
{
	(void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("cudaLaunchKernel_ptsz");
	return fc_rt_ret(cudaErrorNotSupported);
}

static cudaError_t entry_point(const char *name, const char *sym, void **fp, unsigned int ver,
			       unsigned long long flags, enum cudaDriverEntryPointQueryResult *st)
{
	int err;

	RT_ENTER(name);
	if (!sym || !fp)
		return fc_rt_ret(cudaErrorInvalidValue);
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
	return fc_rt_ret(cudaErrorNotSupported);
}

FC_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					   void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)kernel, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
	RT_ENTER("__cudaLaunchKernel_ptsz");
	return fc_rt_ret(cudaErrorNotSupported);
}

/* ==== entry points added for wider programs ==== */

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
		return fc_rt_ret(cudaErrorInvalidMemcpyDirection);
	if ((e = symbol_addr(symbol, off, n, &d, NULL)) != cudaSuccess)
		return fc_rt_ret(e);
	return fc_rt_reti(fc_copy(d, src, n, (int)kind, s, sync));
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
		return fc_rt_ret(cudaErrorInvalidMemcpyDirection);
	if ((e = symbol_addr(symbol, off, n, &d, NULL)) != cudaSuccess)
		return fc_rt_ret(e);
	return fc_rt_reti(fc_copy(dst, d, n, (int)kind, s, sync));
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
		return fc_rt_ret(cudaErrorInvalidValue);
	if ((e = symbol_addr(symbol, 0, 0, &d, NULL)) != cudaSuccess)
		return fc_rt_ret(e);
	*devPtr = d;
	return cudaSuccess;
}

FC_API cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
	cudaError_t e;
	char *d;

	RT_ENTER("cudaGetSymbolSize");
	if (!size)
		return fc_rt_ret(cudaErrorInvalidValue);
	if ((e = symbol_addr(symbol, 0, 0, &d, size)) != cudaSuccess)
		return fc_rt_ret(e);
	return cudaSuccess;
}

/* ---- kernels: plausible answers, no execution ---- */

FC_API cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	RT_ENTER("cudaFuncGetAttributes");
	if (!attr)
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!func)
		return fc_rt_ret(cudaErrorInvalidDeviceFunction);
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
		return fc_rt_ret(cudaErrorInvalidValue);
	if (!func)
		return fc_rt_ret(cudaErrorInvalidDeviceFunction);
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
