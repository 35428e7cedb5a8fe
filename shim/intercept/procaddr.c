/*
 * procaddr: the driver entry-point route (cuGetProcAddress*,
 * cudaGetDriverEntryPoint*) and the table of the wrappers both run-time
 * routes hand out. procaddr.h states the rules.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "intercept/procaddr.h"

/* The shim's wrapper of each row of entries.h, in vp_entries' order. */
#define VP_WRAPPER(name, lib) (vp_fn_t)name,
static const vp_fn_t vp_wrappers[VP_NENTRIES] = { VP_ENTRIES(VP_WRAPPER) };
#undef VP_WRAPPER

int vp_code_in(const void *addr, const char *prefix)
{
	Dl_info info;
	const char *base;

	if (!addr || !dladdr(addr, &info) || !info.dli_fname)
		return 0;
	base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return strncmp(base, prefix, strlen(prefix)) == 0;
}

int vp_is_runtime_code(const void *addr)
{
	return vp_code_in(addr, "libcudart");
}

/* The index of the row named name, or -1. */
static int vp_row_named(const char *name)
{
	for (size_t i = 0; i < VP_NENTRIES; i++)
		if (strcmp(vp_entries[i].name, name) == 0)
			return (int)i;
	return -1;
}

void *vp_wrapper_named(const char *name)
{
	int i = vp_row_named(name);

	return i < 0 ? NULL : vp_addr(vp_wrappers[i]);
}

/* The wrapper of row i when it is a driver row, else NULL. */
static void *vp_drv_wrapper(int i)
{
	return i >= 0 && vp_entries[i].lib == VP_LIB_DRV ? vp_addr(vp_wrappers[i]) : NULL;
}

/* Whether the table has a _v2 form of base name symbol. */
static int vp_row_named_v2(const char *symbol)
{
	char name[128];

	snprintf(name, sizeof(name), "%s_v2", symbol);
	return vp_row_named(name) >= 0;
}

/* The CUDA version from which a base name's "_v2" form is the one handed out. */
static int vp_v2_since(const char *symbol)
{
	if (strcmp(symbol, "cuGetProcAddress") == 0)
		return 12000;
	if (strcmp(symbol, "cuMemcpyBatchAsync") == 0)
		return 13000;   /* 12.8's form had a failIdx argument */
	return 3020;
}

/*
 * The wrapper for a driver function pointer f that the driver handed out
 * for base name symbol at cudaVersion version with flags: the entry whose
 * real function is f; failing that (a driver that hands out internal
 * addresses), the entry named symbol with the suffix the version and the
 * flags ask for. Returns f itself for anything the shim does not
 * interpose, or whose form it cannot tell.
 */
static void *vp_wrap_driver(const char *symbol, void *f, int version, unsigned long long flags)
{
	int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	int v2 = version >= (symbol ? vp_v2_since(symbol) : 3020);
	const char *suffixes[2];
	char name[128];
	void *w;
	int i;

	if (!f || vp_is_self(f))
		return f;
	vp_resolve();
	for (size_t k = 0; k < VP_NENTRIES; k++)
		if (vp_entries[k].lib == VP_LIB_DRV &&
		    vp_addr(atomic_load_explicit(vp_entries[k].real, memory_order_acquire)) == f)
			return vp_addr(vp_wrappers[k]);
	if (!symbol || strlen(symbol) + 10 > sizeof(name))
		return f;
	/* cuMemcpyHtoD_v2_ptds but cuMemcpyHtoDAsync_v2_ptsz: try both per-thread spellings. */
	suffixes[0] = pt ? (v2 ? "_v2_ptds" : "_ptds") : (v2 ? "_v2" : "");
	suffixes[1] = pt ? (v2 ? "_v2_ptsz" : "_ptsz") : NULL;
	for (int k = 0; k < 2 && suffixes[k]; k++) {
		snprintf(name, sizeof(name), "%s%s", symbol, suffixes[k]);
		w = vp_drv_wrapper(vp_row_named(name));
		if (w)
			return w;
	}
	/* Names without a _v2 form at all (cuMemCreate, cuMemcpy) at any version. */
	if (v2) {
		snprintf(name, sizeof(name), "%s%s", symbol, pt ? "_ptsz" : "");
		i = vp_row_named(name);
		if (i < 0 && pt) {
			snprintf(name, sizeof(name), "%s_ptds", symbol);
			i = vp_row_named(name);
		}
		w = vp_drv_wrapper(i);
		if (w && !vp_row_named_v2(symbol))
			return w;
	}
	return f;
}

/*
 * The body of the six look-up hooks: one call to the real look-up name
 * with args; when it succeeded, *pfn becomes the shim's wrapper for what
 * it found, unless caller is CUDA runtime code (the driver's look-ups
 * pass their return address; the runtime's pass NULL: they always wrap).
 */
#define VP_LOOKUP(type, ok, fail, name, args, symbol, pfn, version, flags, caller) \
	do {                                                                        \
		int vp_saved_errno = errno;                                         \
		type vp_r;                                                          \
                                                                                    \
		vp_enter();                                                         \
		vp_r = VP_CALL(name, fail, args);                                   \
		if (vp_r == (ok) && (pfn) && !vp_is_runtime_code(caller))           \
			*(pfn) = vp_wrap_driver(symbol, *(pfn), version, flags);    \
		errno = vp_saved_errno;                                             \
		return vp_r;                                                        \
	} while (0)

VP_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	VP_LOOKUP(CUresult, CUDA_SUCCESS, VP_NO_DRV, cuGetProcAddress_v2, (symbol, pfn, version, flags, status),
		  symbol, pfn, version, flags, __builtin_return_address(0));
}

VP_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	VP_LOOKUP(CUresult, CUDA_SUCCESS, VP_NO_DRV, cuGetProcAddress, (symbol, pfn, version, flags),
		  symbol, pfn, version, flags, __builtin_return_address(0));
}

/* cudaEnable* flags as the driver's CU_GET_PROC_ADDRESS_* (the same bits). */
VP_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
					   enum cudaDriverEntryPointQueryResult *status)
{
	VP_LOOKUP(cudaError_t, cudaSuccess, VP_NO_RT, cudaGetDriverEntryPoint, (symbol, fn, flags, status),
		  symbol, fn, CUDART_VERSION, flags, NULL);
}

VP_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn, unsigned long long flags,
						enum cudaDriverEntryPointQueryResult *status)
{
	VP_LOOKUP(cudaError_t, cudaSuccess, VP_NO_RT, cudaGetDriverEntryPoint_ptsz, (symbol, fn, flags, status),
		  symbol, fn, CUDART_VERSION, flags, NULL);
}

VP_API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
						    unsigned long long flags,
						    enum cudaDriverEntryPointQueryResult *status)
{
	VP_LOOKUP(cudaError_t, cudaSuccess, VP_NO_RT, cudaGetDriverEntryPointByVersion,
		  (symbol, fn, version, flags, status), symbol, fn, (int)version, flags, NULL);
}

VP_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fn,
							 unsigned int version, unsigned long long flags,
							 enum cudaDriverEntryPointQueryResult *status)
{
	VP_LOOKUP(cudaError_t, cudaSuccess, VP_NO_RT, cudaGetDriverEntryPointByVersion_ptsz,
		  (symbol, fn, version, flags, status), symbol, fn, (int)version, flags, NULL);
}
