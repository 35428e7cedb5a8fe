/*
 * interpose: the only file that knows about symbols (STYLE.md 1, 8-12).
 *
 * It exports the CUDA runtime and driver entry points vrampool interposes
 * (one table, VP_ENTRIES, declares, resolves and dispatches them), hands
 * its wrappers to programs that look entry points up at run time
 * (cuGetProcAddress, cudaGetDriverEntryPoint*, dlsym and dlvsym on a
 * library handle: the route of statically linked runtimes, TensorFlow,
 * JAX), forwards everything through the real functions, and owns the
 * process life cycle: configuration at load, the fork handler, the exit
 * report. What a copy is and whether the pool takes it is classify.c's;
 * what the pool does with it, pool.c's.
 *
 * Rules kept here:
 * - errno is preserved across every interposed call;
 * - a per-thread guard (vp_inside) makes every call made while a wrapper
 *   runs go straight to the real function: the shim's own work, and a
 *   runtime that reaches the driver through entry points it got from us,
 *   are never seen twice (each copy is counted and pooled once, whichever
 *   route reaches it);
 * - a CUDA runtime asking the dynamic linker or cuGetProcAddress for
 *   driver functions gets the real ones (its own entry points are
 *   interposed already);
 * - no CUDA call from the constructor or the exit report;
 * - the libraries the real functions live in are kept loaded (a reference
 *   is held), so a program that unloads and reloads them never leaves the
 *   shim calling a stale pointer;
 * - when anything of the shim's own fails, the program's call is forwarded
 *   unchanged.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/autolayout.h"
#include "pool/classify.h"
#include "core/config.h"
#include "device/device.h"
#include "core/dlreal.h"
#include "pool/fingerprint.h"
#include "core/layout.h"
#include "core/log.h"
#include "pool/pool.h"
#include "report/report.h"
#include "pool/specpick.h"
#include "core/stats.h"
#include "pool/whatif.h"

#define VP_API __attribute__((visibility("default")))

/* The shim interposes deprecated entry points too (cudaGetDriverEntryPoint). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Any function pointer, as the table keeps them. */
typedef void (*vp_fn_t)(void);

/* The address of a function pointer as an object pointer (dlsym's currency). */
static void *vp_addr(vp_fn_t f)
{
	void *p;

	memcpy(&p, &f, sizeof(p));
	return p;
}

static vp_fn_t vp_fn_of(void *p)
{
	vp_fn_t f;

	memcpy(&f, &p, sizeof(f));
	return f;
}

/*
 * Entry points the headers declare only under per-thread-default-stream
 * builds (or not at all: the 4-argument cuGetProcAddress of old binaries).
 */
#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
				 cudaStream_t stream);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			      size_t height, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
				   size_t width, size_t height, enum cudaMemcpyKind kind,
				   cudaStream_t stream);
cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
				    enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count,
					 size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs, const size_t *sizes,
				      size_t count, struct cudaMemcpyAttributes *attrs,
				      size_t *attrsIdxs, size_t numAttrs, cudaStream_t stream);
cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool, cudaStream_t stream);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn, unsigned long long flags,
					 enum cudaDriverEntryPointQueryResult *status);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fn, unsigned int version,
						  unsigned long long flags,
						  enum cudaDriverEntryPointQueryResult *status);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream stream);
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream);
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p);
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p);
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream stream);
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
				    CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
				    CUstream stream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream stream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream stream);

/*
 * The table of interposed entry points: X(name, lib), lib RT (libcudart)
 * or DRV (libcuda). Each gets a typed real pointer (real_NAME), an
 * exported wrapper of the same name below, an entry in vp_entries for
 * resolution and for handing wrappers out, and a line in
 * libvrampool.map.
 */
#define VP_ENTRIES(X) \
	X(cudaMemcpy, RT) \
	X(cudaMemcpy_ptds, RT) \
	X(cudaMemcpyAsync, RT) \
	X(cudaMemcpyAsync_ptsz, RT) \
	X(cudaMemcpy2D, RT) \
	X(cudaMemcpy2D_ptds, RT) \
	X(cudaMemcpy2DAsync, RT) \
	X(cudaMemcpy2DAsync_ptsz, RT) \
	X(cudaMemcpyToSymbol, RT) \
	X(cudaMemcpyToSymbol_ptds, RT) \
	X(cudaMemcpyToSymbolAsync, RT) \
	X(cudaMemcpyToSymbolAsync_ptsz, RT) \
	X(cudaMemcpyBatchAsync, RT) \
	X(cudaMemcpyBatchAsync_ptsz, RT) \
	X(cudaMalloc, RT) \
	X(cudaMallocAsync, RT) \
	X(cudaMallocAsync_ptsz, RT) \
	X(cudaMallocManaged, RT) \
	X(cudaMallocPitch, RT) \
	X(cudaMallocFromPoolAsync, RT) \
	X(cudaMallocFromPoolAsync_ptsz, RT) \
	X(cudaGetDriverEntryPoint, RT) \
	X(cudaGetDriverEntryPoint_ptsz, RT) \
	X(cudaGetDriverEntryPointByVersion, RT) \
	X(cudaGetDriverEntryPointByVersion_ptsz, RT) \
	X(cuMemcpyHtoD_v2, DRV) \
	X(cuMemcpyHtoD_v2_ptds, DRV) \
	X(cuMemcpyHtoDAsync_v2, DRV) \
	X(cuMemcpyHtoDAsync_v2_ptsz, DRV) \
	X(cuMemcpy, DRV) \
	X(cuMemcpy_ptds, DRV) \
	X(cuMemcpyAsync, DRV) \
	X(cuMemcpyAsync_ptsz, DRV) \
	X(cuMemcpy2D_v2, DRV) \
	X(cuMemcpy2D_v2_ptds, DRV) \
	X(cuMemcpy2DUnaligned_v2, DRV) \
	X(cuMemcpy2DUnaligned_v2_ptds, DRV) \
	X(cuMemcpy2DAsync_v2, DRV) \
	X(cuMemcpy2DAsync_v2_ptsz, DRV) \
	X(cuMemcpyBatchAsync_v2, DRV) \
	X(cuMemcpyBatchAsync_v2_ptsz, DRV) \
	X(cuMemAlloc_v2, DRV) \
	X(cuMemAllocAsync, DRV) \
	X(cuMemAllocAsync_ptsz, DRV) \
	X(cuMemAllocManaged, DRV) \
	X(cuMemAllocPitch_v2, DRV) \
	X(cuMemAllocFromPoolAsync, DRV) \
	X(cuMemAllocFromPoolAsync_ptsz, DRV) \
	X(cuMemCreate, DRV) \
	X(cuGetProcAddress, DRV) \
	X(cuGetProcAddress_v2, DRV)

enum vp_lib { VP_LIB_RT, VP_LIB_DRV };

#define VP_REAL(name, lib) static __typeof__(name) *_Atomic real_##name;
VP_ENTRIES(VP_REAL)
#undef VP_REAL
static __typeof__(cudaGetLastError) *_Atomic real_cudaGetLastError;

struct vp_entry {
	const char *name;
	vp_fn_t wrapper;
	vp_fn_t _Atomic *real;
	enum vp_lib lib;
};

#define VP_LIB_OF_RT VP_LIB_RT
#define VP_LIB_OF_DRV VP_LIB_DRV
#define VP_ROW(name, lib) { #name, (vp_fn_t)name, (vp_fn_t _Atomic *)&real_##name, VP_LIB_OF_##lib },
static const struct vp_entry vp_entries[] = { VP_ENTRIES(VP_ROW) };
#undef VP_ROW
#define VP_NENTRIES (sizeof(vp_entries) / sizeof(vp_entries[0]))

/* Loads a real pointer (the table's pointers are written by the resolver while others read). */
#define VP_R(name) atomic_load_explicit(&real_##name, memory_order_acquire)

static struct config vp_config;
static _Atomic int vp_resolved;         /* every real pointer was looked for once */
static __thread int vp_inside;  /* re-entry guard (STYLE.md 9) */

/* The layout in use: VRAMPOOL_LAYOUT, or the automatic one once found. */
static struct layout vp_auto;
static _Atomic int vp_auto_state;       /* enum autolayout_state of the automatic layout */

/* ---- resolution ------------------------------------------------------------ */

/* Returns nonzero when addr lies in this shared object. */
static int vp_is_self(const void *addr)
{
	Dl_info self, other;

	if (!addr || !dladdr((void *)&vp_config, &self) || !dladdr(addr, &other))
		return 0;
	return self.dli_fbase == other.dli_fbase;
}

/* dl_iterate_phdr callback: remembers the first loaded object whose name starts with arg's prefix. */
struct vp_find_lib {
	const char *prefix;
	const char *path;
};

static int vp_find_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct vp_find_lib *f = arg;
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, f->prefix, strlen(f->prefix)) != 0)
		return 0;
	f->path = info->dlpi_name;
	return 1;
}

/*
 * Keeps the object holding f loaded for the rest of the process (a
 * reference the shim never drops): a real pointer then never goes stale.
 */
static void vp_pin(const void *f)
{
	Dl_info info;

	if (f && dladdr(f, &info) && info.dli_fname)
		dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

static void *_Atomic vp_rt_lib, *_Atomic vp_drv_lib;

/* The handle of the loaded runtime (a reference kept), or NULL. */
static void *vp_runtime_handle(void)
{
	struct vp_find_lib f = { .prefix = "libcudart.so" };
	void *h = atomic_load(&vp_rt_lib);

	if (h)
		return h;
	dl_iterate_phdr(vp_find_lib, &f);
	h = f.path ? dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
	if (!h)
		h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
	if (h)
		atomic_store(&vp_rt_lib, h);
	return h;
}

/* The handle of the driver (loaded if it is not; a reference kept), or NULL. */
static void *vp_driver_handle(void)
{
	void *h = atomic_load(&vp_drv_lib);

	if (h)
		return h;
	h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_LAZY);
	if (h)
		atomic_store(&vp_drv_lib, h);
	return h;
}

/*
 * Looks a runtime function up after this object (RTLD_NEXT); when that
 * finds nothing or finds the shim itself (the runtime was loaded
 * privately, RTLD_LOCAL), in the libcudart already loaded.
 */
static void *vp_lookup_rt(const char *name)
{
	void *h, *f = dlreal_sym(RTLD_NEXT, name);

	if (f && !vp_is_self(f)) {
		vp_pin(f);
		return f;
	}
	h = vp_runtime_handle();
	f = h ? dlreal_sym(h, name) : NULL;
	return f && !vp_is_self(f) ? f : NULL;
}

static void *vp_lookup_drv(const char *name)
{
	void *h = vp_driver_handle();
	void *f = h ? dlreal_sym(h, name) : NULL;

	return f && !vp_is_self(f) ? f : NULL;
}

/*
 * Resolves every real pointer still unknown. Threads never wait for each
 * other here: a thread that finds the work not done does it too (the
 * stores are idempotent). Waiting could deadlock: a thread resolving may
 * be blocked in dlopen on the dynamic linker's lock, held by another
 * thread running a library constructor that makes a CUDA call.
 */
static void vp_resolve_missing(void)
{
	for (size_t i = 0; i < VP_NENTRIES; i++) {
		const struct vp_entry *e = &vp_entries[i];
		void *f;

		if (atomic_load_explicit(e->real, memory_order_relaxed))
			continue;
		f = e->lib == VP_LIB_RT ? vp_lookup_rt(e->name) : vp_lookup_drv(e->name);
		if (f)
			atomic_store_explicit(e->real, vp_fn_of(f), memory_order_release);
	}
	if (!atomic_load_explicit(&real_cudaGetLastError, memory_order_relaxed)) {
		void *f = vp_lookup_rt("cudaGetLastError");

		if (f)
			atomic_store_explicit((vp_fn_t _Atomic *)&real_cudaGetLastError, vp_fn_of(f),
					      memory_order_release);
	}
}

/* Resolves the real functions at the first interposed call (any thread, no waiting). */
static void vp_resolve(void)
{
	if (atomic_load_explicit(&vp_resolved, memory_order_acquire))
		return;
	dlreal_init();
	vp_resolve_missing();
	atomic_store_explicit(&vp_resolved, 1, memory_order_release);
}

/*
 * A real pointer was still unknown when needed (the runtime was loaded
 * after the first call, by a library opened later): look again.
 */
static void vp_resolve_again(void)
{
	vp_resolve_missing();
}

/* Loads real pointer p of an entry, resolving once more when it is unknown. */
#define VP_GET(name) (VP_R(name) ? VP_R(name) : (vp_resolve_again(), VP_R(name)))

/*
 * Runs at the start of every interposed call: resolves the real functions
 * once, marks the process as a CUDA user and starts the reporter.
 */
static void vp_enter(void)
{
	vp_resolve();
	stats_mark_used();
	report_start();
}

/* ---- the layout in use ------------------------------------------------------ */

/*
 * The layout to match, or NULL with *why (CL_OFF, CL_NO_LAYOUT) when the
 * pool takes nothing now.
 */
static const struct layout *vp_layout(int *why)
{
	if (vp_config.off || vp_config.invalid) {
		*why = CL_OFF;
		return NULL;
	}
	if (!vp_config.has_layout) {
		*why = CL_NO_LAYOUT;
		return NULL;
	}
	if (!vp_config.layout.is_auto)
		return &vp_config.layout;
	if (atomic_load_explicit(&vp_auto_state, memory_order_acquire) == AUTOLAYOUT_FOUND)
		return &vp_auto;
	*why = CL_NO_LAYOUT;
	return NULL;
}

/*
 * Shows one host-to-device copy to the layout finder, when it is looking
 * (VRAMPOOL_LAYOUT=auto, or no layout in a run that is not off). On a
 * decision, publishes it: the automatic layout, or the suggestion.
 */
static void vp_autolayout(const void *src, uint64_t n)
{
	struct autolayout_result res;
	enum dev_mem kind;
	int ord;

	if (vp_config.off || vp_config.invalid || (vp_config.has_layout && !vp_config.layout.is_auto))
		return;
	if (atomic_load_explicit(&vp_auto_state, memory_order_relaxed) != AUTOLAYOUT_LOOKING || !src || !n)
		return;
	/* Only host memory is read: a wrong kind is the runtime's to refuse. */
	if (device_open() || device_classify(src, &kind, &ord, NULL) ||
	    (kind != DEV_MEM_UNREGISTERED && kind != DEV_MEM_HOST))
		return;
	if (!autolayout_observe(src, n))
		return;
	autolayout_result(&res);
	if (res.state == AUTOLAYOUT_FOUND && vp_config.layout.is_auto) {
		vp_auto = res.layout;
		pool_set_layout(&vp_auto);
		stats_set_text(STATS_LAYOUT, "%s", vp_auto.text);
		stats_set_text(STATS_LAYOUT_SOURCE, "auto");
		stats_set_text(STATS_EVIDENCE, "%s", res.evidence);
		stats_set_state(POOL_DORMANT);
		log_verbose("layout found: %s (%s)", vp_auto.text, res.evidence);
	} else if (res.state == AUTOLAYOUT_FOUND) {
		stats_set_text(STATS_EVIDENCE, "%s", res.evidence);
		stats_set_text(STATS_SUGGEST, "%s", res.layout.text);
	} else {
		stats_set_text(STATS_EVIDENCE, "%s", res.evidence);
		if (vp_config.layout.is_auto)
			stats_set_text(STATS_REASON, "VRAMPOOL_LAYOUT=auto found no layout: %s", res.evidence);
		log_verbose("no layout found: %s", res.evidence);
	}
	atomic_store_explicit(&vp_auto_state, (int)res.state, memory_order_release);
}

/* ---- copies ---------------------------------------------------------------- */

/* The entry point a copy came through. */
enum vp_fn {
	VP_RT_SYNC, VP_RT_SYNC_PTDS, VP_RT_ASYNC, VP_RT_ASYNC_PTSZ,
	VP_RT_2D, VP_RT_2D_PTDS, VP_RT_2D_ASYNC, VP_RT_2D_ASYNC_PTSZ,
	VP_DRV_HTOD, VP_DRV_HTOD_PTDS, VP_DRV_HTOD_ASYNC, VP_DRV_HTOD_ASYNC_PTSZ,
	VP_DRV_COPY, VP_DRV_COPY_PTDS, VP_DRV_COPY_ASYNC, VP_DRV_COPY_ASYNC_PTSZ,
	VP_DRV_2D, VP_DRV_2D_PTDS, VP_DRV_2DU, VP_DRV_2DU_PTDS, VP_DRV_2D_ASYNC, VP_DRV_2D_ASYNC_PTSZ,
};

/* One copy the program made, with what it takes to forward it or split it. */
struct vp_call {
	enum vp_fn fn;
	void *dst;              /* the contiguous destination (2D: the first row) */
	const void *src;
	size_t n;               /* bytes (2D: width * height) */
	enum cudaMemcpyKind kind;       /* runtime entries */
	void *stream;           /* async entries */
	/* 2D entries, as the program passed them */
	size_t dpitch, spitch, width, height;
	const CUDA_MEMCPY2D *p2d;
	int capture_mode;       /* the program's own, restored around its copies */
};

static int vp_fn_driver(enum vp_fn f)
{
	return f >= VP_DRV_HTOD;
}

static int vp_fn_sync(enum vp_fn f)
{
	switch (f) {
	case VP_RT_SYNC: case VP_RT_SYNC_PTDS: case VP_RT_2D: case VP_RT_2D_PTDS:
	case VP_DRV_HTOD: case VP_DRV_HTOD_PTDS: case VP_DRV_COPY: case VP_DRV_COPY_PTDS:
	case VP_DRV_2D: case VP_DRV_2D_PTDS: case VP_DRV_2DU: case VP_DRV_2DU_PTDS:
		return 1;
	default:
		return 0;
	}
}

static int vp_fn_per_thread(enum vp_fn f)
{
	switch (f) {
	case VP_RT_SYNC_PTDS: case VP_RT_ASYNC_PTSZ: case VP_RT_2D_PTDS: case VP_RT_2D_ASYNC_PTSZ:
	case VP_DRV_HTOD_PTDS: case VP_DRV_HTOD_ASYNC_PTSZ: case VP_DRV_COPY_PTDS:
	case VP_DRV_COPY_ASYNC_PTSZ: case VP_DRV_2D_PTDS: case VP_DRV_2DU_PTDS: case VP_DRV_2D_ASYNC_PTSZ:
		return 1;
	default:
		return 0;
	}
}

#define VP_NO_RT cudaErrorInitializationError
#define VP_NO_DRV CUDA_ERROR_NOT_INITIALIZED

/* Forwards a copy to the real entry point it came through. Returns its status. */
static int vp_forward_copy(const struct vp_call *c)
{
	const char *s = c->src;
	CUdeviceptr d = (CUdeviceptr)(uintptr_t)c->dst;
	CUstream st = (CUstream)c->stream;
	int r, outer = vp_inside;       /* a nested forward keeps its caller's guard */

	vp_inside = 1;
	switch (c->fn) {
	case VP_RT_SYNC:
		r = VP_GET(cudaMemcpy) ? VP_R(cudaMemcpy)(c->dst, s, c->n, c->kind) : VP_NO_RT;
		break;
	case VP_RT_SYNC_PTDS:
		r = VP_GET(cudaMemcpy_ptds) ? VP_R(cudaMemcpy_ptds)(c->dst, s, c->n, c->kind) : VP_NO_RT;
		break;
	case VP_RT_ASYNC:
		r = VP_GET(cudaMemcpyAsync) ? VP_R(cudaMemcpyAsync)(c->dst, s, c->n, c->kind, c->stream)
					    : VP_NO_RT;
		break;
	case VP_RT_ASYNC_PTSZ:
		r = VP_GET(cudaMemcpyAsync_ptsz)
			    ? VP_R(cudaMemcpyAsync_ptsz)(c->dst, s, c->n, c->kind, c->stream) : VP_NO_RT;
		break;
	case VP_RT_2D:
		r = VP_GET(cudaMemcpy2D) ? VP_R(cudaMemcpy2D)(c->dst, c->dpitch, s, c->spitch, c->width,
							     c->height, c->kind) : VP_NO_RT;
		break;
	case VP_RT_2D_PTDS:
		r = VP_GET(cudaMemcpy2D_ptds) ? VP_R(cudaMemcpy2D_ptds)(c->dst, c->dpitch, s, c->spitch,
								       c->width, c->height, c->kind)
					      : VP_NO_RT;
		break;
	case VP_RT_2D_ASYNC:
		r = VP_GET(cudaMemcpy2DAsync) ? VP_R(cudaMemcpy2DAsync)(c->dst, c->dpitch, s, c->spitch,
								       c->width, c->height, c->kind,
								       c->stream) : VP_NO_RT;
		break;
	case VP_RT_2D_ASYNC_PTSZ:
		r = VP_GET(cudaMemcpy2DAsync_ptsz)
			    ? VP_R(cudaMemcpy2DAsync_ptsz)(c->dst, c->dpitch, s, c->spitch, c->width,
							   c->height, c->kind, c->stream) : VP_NO_RT;
		break;
	case VP_DRV_HTOD:
		r = VP_GET(cuMemcpyHtoD_v2) ? VP_R(cuMemcpyHtoD_v2)(d, s, c->n) : VP_NO_DRV;
		break;
	case VP_DRV_HTOD_PTDS:
		r = VP_GET(cuMemcpyHtoD_v2_ptds) ? VP_R(cuMemcpyHtoD_v2_ptds)(d, s, c->n) : VP_NO_DRV;
		break;
	case VP_DRV_HTOD_ASYNC:
		r = VP_GET(cuMemcpyHtoDAsync_v2) ? VP_R(cuMemcpyHtoDAsync_v2)(d, s, c->n, st) : VP_NO_DRV;
		break;
	case VP_DRV_HTOD_ASYNC_PTSZ:
		r = VP_GET(cuMemcpyHtoDAsync_v2_ptsz) ? VP_R(cuMemcpyHtoDAsync_v2_ptsz)(d, s, c->n, st)
						      : VP_NO_DRV;
		break;
	case VP_DRV_COPY:
		r = VP_GET(cuMemcpy) ? VP_R(cuMemcpy)(d, (CUdeviceptr)(uintptr_t)s, c->n) : VP_NO_DRV;
		break;
	case VP_DRV_COPY_PTDS:
		r = VP_GET(cuMemcpy_ptds) ? VP_R(cuMemcpy_ptds)(d, (CUdeviceptr)(uintptr_t)s, c->n)
					  : VP_NO_DRV;
		break;
	case VP_DRV_COPY_ASYNC:
		r = VP_GET(cuMemcpyAsync) ? VP_R(cuMemcpyAsync)(d, (CUdeviceptr)(uintptr_t)s, c->n, st)
					  : VP_NO_DRV;
		break;
	case VP_DRV_COPY_ASYNC_PTSZ:
		r = VP_GET(cuMemcpyAsync_ptsz)
			    ? VP_R(cuMemcpyAsync_ptsz)(d, (CUdeviceptr)(uintptr_t)s, c->n, st) : VP_NO_DRV;
		break;
	case VP_DRV_2D:
		r = VP_GET(cuMemcpy2D_v2) ? VP_R(cuMemcpy2D_v2)(c->p2d) : VP_NO_DRV;
		break;
	case VP_DRV_2D_PTDS:
		r = VP_GET(cuMemcpy2D_v2_ptds) ? VP_R(cuMemcpy2D_v2_ptds)(c->p2d) : VP_NO_DRV;
		break;
	case VP_DRV_2DU:
		r = VP_GET(cuMemcpy2DUnaligned_v2) ? VP_R(cuMemcpy2DUnaligned_v2)(c->p2d) : VP_NO_DRV;
		break;
	case VP_DRV_2DU_PTDS:
		r = VP_GET(cuMemcpy2DUnaligned_v2_ptds) ? VP_R(cuMemcpy2DUnaligned_v2_ptds)(c->p2d)
							: VP_NO_DRV;
		break;
	case VP_DRV_2D_ASYNC:
		r = VP_GET(cuMemcpy2DAsync_v2) ? VP_R(cuMemcpy2DAsync_v2)(c->p2d, st) : VP_NO_DRV;
		break;
	case VP_DRV_2D_ASYNC_PTSZ:
		r = VP_GET(cuMemcpy2DAsync_v2_ptsz) ? VP_R(cuMemcpy2DAsync_v2_ptsz)(c->p2d, st) : VP_NO_DRV;
		break;
	default:
		r = vp_fn_driver(c->fn) ? CUDA_ERROR_INVALID_VALUE : cudaErrorInvalidValue;
		break;
	}
	vp_inside = outer;
	return r;
}

/*
 * The pool's delivery of bytes [off, off + len): asynchronously on the
 * program's stream (a synchronous entry's stream: legacy, or per-thread
 * for _ptds), through the runtime for runtime entries and the driver for
 * driver entries. The pool synchronises synchronous copies itself.
 */
static int vp_copy_h2d(void *arg, uint64_t off, uint64_t len)
{
	const struct vp_call *c = arg;
	int pt = vp_fn_per_thread(c->fn), sync = vp_fn_sync(c->fn);
	void *stream = sync ? NULL : c->stream;
	char *dst = (char *)c->dst + off;
	const char *src = (const char *)c->src + off;
	enum cudaMemcpyKind kind = c->kind == cudaMemcpyDefault ? cudaMemcpyDefault : cudaMemcpyHostToDevice;
	int r;

	/* The program's own copy runs under the program's capture mode. */
	device_capture_restore(c->capture_mode);
	if (!vp_fn_driver(c->fn))
		r = pt ? (VP_GET(cudaMemcpyAsync_ptsz) ? VP_R(cudaMemcpyAsync_ptsz)(dst, src, len, kind, stream)
						       : VP_NO_RT)
		       : (VP_GET(cudaMemcpyAsync) ? VP_R(cudaMemcpyAsync)(dst, src, len, kind, stream) : VP_NO_RT);
	else
		r = pt ? (VP_GET(cuMemcpyHtoDAsync_v2_ptsz)
				  ? VP_R(cuMemcpyHtoDAsync_v2_ptsz)((CUdeviceptr)(uintptr_t)dst, src, len, stream)
				  : VP_NO_DRV)
		       : (VP_GET(cuMemcpyHtoDAsync_v2)
				  ? VP_R(cuMemcpyHtoDAsync_v2)((CUdeviceptr)(uintptr_t)dst, src, len, stream)
				  : VP_NO_DRV);
	device_capture_relax();
	return r;
}

/*
 * The pool's synchronous delivery of bytes [off, off + len), for a
 * synchronous copy whose own completion the pool could not wait for.
 */
static int vp_copy_h2d_sync(void *arg, uint64_t off, uint64_t len)
{
	const struct vp_call *c = arg;
	char *dst = (char *)c->dst + off;
	const char *src = (const char *)c->src + off;
	int pt = vp_fn_per_thread(c->fn);
	enum cudaMemcpyKind kind = c->kind == cudaMemcpyDefault ? cudaMemcpyDefault : cudaMemcpyHostToDevice;
	int r;

	device_capture_restore(c->capture_mode);
	if (!vp_fn_driver(c->fn))
		r = pt ? (VP_GET(cudaMemcpy_ptds) ? VP_R(cudaMemcpy_ptds)(dst, src, len, kind) : VP_NO_RT)
		       : (VP_GET(cudaMemcpy) ? VP_R(cudaMemcpy)(dst, src, len, kind) : VP_NO_RT);
	else
		r = pt ? (VP_GET(cuMemcpyHtoD_v2_ptds)
				  ? VP_R(cuMemcpyHtoD_v2_ptds)((CUdeviceptr)(uintptr_t)dst, src, len) : VP_NO_DRV)
		       : (VP_GET(cuMemcpyHtoD_v2) ? VP_R(cuMemcpyHtoD_v2)((CUdeviceptr)(uintptr_t)dst, src, len)
						  : VP_NO_DRV);
	device_capture_relax();
	return r;
}

/* The stats counter of each pass-through reason. */
static enum stat_id vp_reason_stat(enum classify_reason r)
{
	switch (r) {
	case CL_CAPTURING:
		return ST_GRAPH_CAPTURE_CALLS;
	default:
		return (enum stat_id)(ST_PASS_OFF + (r - CL_OFF));
	}
}

/* Counts a copy the program made successfully. */
static void vp_count(const struct vp_call *c, enum classify_reason reason)
{
	stats_add(ST_H2D_CALLS, 1);
	stats_add(ST_BYTES_REQUESTED, c->n);
	stats_note_size(c->n);
	if (vp_fn_driver(c->fn))
		stats_add(ST_DRIVER_CALLS, 1);
	if (reason != CL_POOL) {
		stats_add(ST_PASSTHROUGH_CALLS, 1);
		stats_add(ST_BYTES_H2D, c->n);
		stats_add(vp_reason_stat(reason), 1);
	}
}

/*
 * The copy path shared by every entry point: forward it, or hand it to
 * the pool. dir says how its direction is known. Returns exactly what the
 * program's plain call would return.
 */
static int vp_copy(struct vp_call *c, enum classify_dir dir)
{
	struct classify_in in = {
		.dst = c->dst, .src = c->src, .n = c->n, .dir = dir, .stream = c->stream,
		.sync = vp_fn_sync(c->fn), .per_thread = vp_fn_per_thread(c->fn),
	};
	struct classify_out out;
	struct pool_request r;
	struct pool *p;
	uint64_t ctx_id;
	int why = CL_OFF, err, h2d, mode;
	enum specpick_result pick;

	if (vp_inside)
		return vp_forward_copy(c);
	vp_enter();
	in.layout = vp_layout(&why);
	in.off_reason = why;
	vp_inside = 1;
	h2d = classify_copy(&in, &out);
	if (h2d && out.reason == CL_NO_LAYOUT) {
		vp_autolayout(c->src, c->n);
		in.layout = vp_layout(&why);
		if (in.layout)
			h2d = classify_copy(&in, &out);
	}
	vp_inside = 0;
	if (!h2d)
		return vp_forward_copy(c);
	if (out.reason != CL_POOL)
		goto passthrough;
	/* Several specs divide the size: the content says which one cuts it. */
	vp_inside = 1;
	pick = specpick_choose(in.layout, c->n, c->src, &out.hit);
	vp_inside = 0;
	device_context_id(&ctx_id);
	p = pool_get(out.dev, ctx_id);
	if (!p)
		goto passthrough;
	r = (struct pool_request){
		.dst = (dev_ptr)(uintptr_t)c->dst, .src = c->src, .n = c->n, .row = out.hit.row,
		.prio = out.hit.prio, .stream = out.ds, .h2d = vp_copy_h2d, .h2d_sync = vp_copy_h2d_sync,
		.arg = c, .verify = out.verify, .sync = vp_fn_sync(c->fn),
		.no_admit = pick == SPECPICK_UNDECIDED,
	};
	vp_inside = 1;
	c->capture_mode = mode = device_capture_relax();
	err = pool_copy(p, &r);
	device_capture_restore(mode);
	vp_inside = 0;
	if (err == 0)
		vp_count(c, CL_POOL);
	return err;

passthrough:
	err = vp_forward_copy(c);
	if (err == 0)
		vp_count(c, out.reason);
	return err;
}

/* Runs f with errno preserved: every exported wrapper goes through it. */
#define VP_KEEP_ERRNO(type, expr)                                                                    \
	do {                                                                                         \
		int vp_saved_errno = errno;                                                          \
		type vp_result = (type)(expr);                                                       \
		errno = vp_saved_errno;                                                              \
		return vp_result;                                                                    \
	} while (0)

/* The direction of a runtime copy of kind k. */
static enum classify_dir vp_rt_dir(enum cudaMemcpyKind k)
{
	return k == cudaMemcpyHostToDevice ? CL_DIR_H2D : k == cudaMemcpyDefault ? CL_DIR_INFER : CL_DIR_OTHER;
}

static int vp_rt_copy(enum vp_fn fn, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
		      cudaStream_t stream)
{
	struct vp_call c = { .fn = fn, .dst = dst, .src = src, .n = n, .kind = kind, .stream = stream };

	return vp_copy(&c, vp_rt_dir(kind));
}

VP_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_copy(VP_RT_SYNC, dst, src, n, kind, NULL));
}

VP_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_copy(VP_RT_SYNC_PTDS, dst, src, n, kind, NULL));
}

VP_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
				   cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_copy(VP_RT_ASYNC, dst, src, n, kind, stream));
}

VP_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
					cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_copy(VP_RT_ASYNC_PTSZ, dst, src, n, kind, stream));
}

/*
 * A 2D copy whose pitches equal its width (or of one row) is one
 * contiguous copy of width * height bytes, pooled like any other; any
 * other 2D host-to-device copy is counted and forwarded.
 */
static int vp_rt_2d(enum vp_fn fn, void *dst, size_t dpitch, const void *src, size_t spitch,
		    size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	struct vp_call c = { .fn = fn, .dst = dst, .src = src, .kind = kind, .stream = stream,
			     .dpitch = dpitch, .spitch = spitch, .width = width, .height = height };
	int contiguous = height <= 1 || (dpitch == width && spitch == width);

	if (width && height > SIZE_MAX / width)
		return vp_forward_copy(&c);
	c.n = width * height;
	if (!contiguous) {
		int err;

		if (vp_inside || vp_rt_dir(kind) != CL_DIR_H2D)
			return vp_forward_copy(&c);
		vp_enter();
		err = vp_forward_copy(&c);
		if (err == 0)
			vp_count(&c, CL_NO_MATCH);
		return err;
	}
	return vp_copy(&c, vp_rt_dir(kind));
}

VP_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
				size_t height, enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_2d(VP_RT_2D, dst, dpitch, src, spitch, width, height, kind, NULL));
}

VP_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind)
{
	VP_KEEP_ERRNO(cudaError_t,
		      vp_rt_2d(VP_RT_2D_PTDS, dst, dpitch, src, spitch, width, height, kind, NULL));
}

VP_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind,
				     cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t,
		      vp_rt_2d(VP_RT_2D_ASYNC, dst, dpitch, src, spitch, width, height, kind, stream));
}

VP_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
					  size_t width, size_t height, enum cudaMemcpyKind kind,
					  cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_2d(VP_RT_2D_ASYNC_PTSZ, dst, dpitch, src, spitch, width, height,
					    kind, stream));
}

/*
 * Counts a host-to-device copy the pool does not take by its nature
 * (to a module variable, the program's own batches) once it succeeded.
 */
static void vp_count_other(size_t n, int driver)
{
	struct vp_call c = { .fn = driver ? VP_DRV_HTOD : VP_RT_SYNC, .n = n };

	vp_count(&c, CL_NO_MATCH);
}

/* Whether a copy to a module variable is host-to-device (Default: from host memory). */
static int vp_symbol_h2d(const void *src, enum cudaMemcpyKind kind)
{
	enum dev_mem k;
	int ord;

	if (kind == cudaMemcpyHostToDevice)
		return 1;
	if (kind != cudaMemcpyDefault || device_open() || device_classify(src, &k, &ord, NULL))
		return 0;
	return k == DEV_MEM_UNREGISTERED || k == DEV_MEM_HOST;
}

/* Which of the four entry points a copy to a module variable came through. */
enum vp_sym_fn { VP_SYM, VP_SYM_PTDS, VP_SYM_ASYNC, VP_SYM_ASYNC_PTSZ };

/* Forwards a copy to a module variable to its real entry point. */
static cudaError_t vp_symbol_real(enum vp_sym_fn f, const void *symbol, const void *src, size_t count,
				  size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	switch (f) {
	case VP_SYM:
		return VP_GET(cudaMemcpyToSymbol) ? VP_R(cudaMemcpyToSymbol)(symbol, src, count, offset, kind)
						  : VP_NO_RT;
	case VP_SYM_PTDS:
		return VP_GET(cudaMemcpyToSymbol_ptds)
			       ? VP_R(cudaMemcpyToSymbol_ptds)(symbol, src, count, offset, kind) : VP_NO_RT;
	case VP_SYM_ASYNC:
		return VP_GET(cudaMemcpyToSymbolAsync)
			       ? VP_R(cudaMemcpyToSymbolAsync)(symbol, src, count, offset, kind, stream) : VP_NO_RT;
	case VP_SYM_ASYNC_PTSZ:
		return VP_GET(cudaMemcpyToSymbolAsync_ptsz)
			       ? VP_R(cudaMemcpyToSymbolAsync_ptsz)(symbol, src, count, offset, kind, stream)
			       : VP_NO_RT;
	}
	return cudaErrorInvalidValue;
}

/* The path of the four ToSymbol entry points: forwarded, and counted when host-to-device. */
static cudaError_t vp_symbol_copy(enum vp_sym_fn f, const void *symbol, const void *src, size_t count,
				  size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	int saved = errno;
	cudaError_t err;

	if (vp_inside)
		return vp_symbol_real(f, symbol, src, count, offset, kind, stream);
	vp_enter();
	vp_inside = 1;
	err = vp_symbol_real(f, symbol, src, count, offset, kind, stream);
	vp_inside = 0;
	if (err == cudaSuccess && vp_symbol_h2d(src, kind))
		vp_count_other(count, 0);
	errno = saved;
	return err;
}

VP_API cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
				      enum cudaMemcpyKind kind)
{
	return vp_symbol_copy(VP_SYM, symbol, src, count, offset, kind, NULL);
}

VP_API cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count,
					   size_t offset, enum cudaMemcpyKind kind)
{
	return vp_symbol_copy(VP_SYM_PTDS, symbol, src, count, offset, kind, NULL);
}

VP_API cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
					   size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return vp_symbol_copy(VP_SYM_ASYNC, symbol, src, count, offset, kind, stream);
}

VP_API cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count,
						size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return vp_symbol_copy(VP_SYM_ASYNC_PTSZ, symbol, src, count, offset, kind, stream);
}

/* Whether a batch entry is host-to-device: a host source and a device (or managed) destination. */
static int vp_entry_h2d(const void *dst, const void *src)
{
	enum dev_mem dk, sk;
	int dd, sd;

	if (device_open() || device_classify(dst, &dk, &dd, NULL) || device_classify(src, &sk, &sd, NULL))
		return 0;
	return (dk == DEV_MEM_DEVICE || dk == DEV_MEM_MANAGED) &&
	       (sk == DEV_MEM_UNREGISTERED || sk == DEV_MEM_HOST);
}

/*
 * Counts the host-to-device entries of one of the program's own batched
 * copies (cudaMemcpyBatchAsync, cuMemcpyBatchAsync): each entry is one
 * copy in the counters. Entries are forwarded as they are.
 */
static void vp_count_batch(void *const *dsts, const void *const *srcs, const size_t *sizes,
			   size_t count, int driver)
{
	stats_add(ST_BATCH_CALLS, 1);
	for (size_t i = 0; i < count; i++)
		if (sizes[i] && vp_entry_h2d(dsts[i], srcs[i]))
			vp_count_other(sizes[i], driver);
}

static cudaError_t vp_rt_batch(int ptsz, void *const *dsts, const void *const *srcs, const size_t *sizes,
			       size_t count, struct cudaMemcpyAttributes *attrs, size_t *idxs, size_t nattrs,
			       cudaStream_t stream)
{
	cudaError_t err;

	if (!vp_inside)
		vp_enter();
	else
		return ptsz ? (VP_GET(cudaMemcpyBatchAsync_ptsz) ? VP_R(cudaMemcpyBatchAsync_ptsz)(
					       dsts, srcs, sizes, count, attrs, idxs, nattrs, stream) : VP_NO_RT)
			    : (VP_GET(cudaMemcpyBatchAsync) ? VP_R(cudaMemcpyBatchAsync)(
					       dsts, srcs, sizes, count, attrs, idxs, nattrs, stream) : VP_NO_RT);
	vp_inside = 1;
	err = ptsz ? (VP_GET(cudaMemcpyBatchAsync_ptsz)
			      ? VP_R(cudaMemcpyBatchAsync_ptsz)(dsts, srcs, sizes, count, attrs, idxs, nattrs, stream)
			      : VP_NO_RT)
		   : (VP_GET(cudaMemcpyBatchAsync)
			      ? VP_R(cudaMemcpyBatchAsync)(dsts, srcs, sizes, count, attrs, idxs, nattrs, stream)
			      : VP_NO_RT);
	if (err == cudaSuccess && dsts && srcs && sizes)
		vp_count_batch(dsts, srcs, sizes, count, 0);
	vp_inside = 0;
	return err;
}

VP_API cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes,
					size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
					size_t numAttrs, cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_batch(0, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream));
}

VP_API cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs,
					     const size_t *sizes, size_t count,
					     struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
					     size_t numAttrs, cudaStream_t stream)
{
	VP_KEEP_ERRNO(cudaError_t, vp_rt_batch(1, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream));
}

/* ---- driver copies ---------------------------------------------------------- */

static int vp_drv_copy(enum vp_fn fn, CUdeviceptr dst, const void *src, size_t n, CUstream stream,
		       enum classify_dir dir)
{
	struct vp_call c = { .fn = fn, .dst = (void *)(uintptr_t)dst, .src = src, .n = n,
			     .kind = dir == CL_DIR_INFER ? cudaMemcpyDefault : cudaMemcpyHostToDevice,
			     .stream = stream };

	return vp_copy(&c, dir);
}

VP_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_HTOD, dst, src, n, NULL, CL_DIR_H2D));
}

VP_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_HTOD_PTDS, dst, src, n, NULL, CL_DIR_H2D));
}

VP_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_HTOD_ASYNC, dst, src, n, stream, CL_DIR_H2D));
}

VP_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_HTOD_ASYNC_PTSZ, dst, src, n, stream, CL_DIR_H2D));
}

/* cuMemcpy and cuMemcpyAsync: unified addressing decides the direction. */
VP_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_COPY, dst, (const void *)(uintptr_t)src, n, NULL, CL_DIR_INFER));
}

VP_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	VP_KEEP_ERRNO(CUresult,
		      vp_drv_copy(VP_DRV_COPY_PTDS, dst, (const void *)(uintptr_t)src, n, NULL, CL_DIR_INFER));
}

VP_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult,
		      vp_drv_copy(VP_DRV_COPY_ASYNC, dst, (const void *)(uintptr_t)src, n, stream, CL_DIR_INFER));
}

VP_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_copy(VP_DRV_COPY_ASYNC_PTSZ, dst, (const void *)(uintptr_t)src, n,
					    stream, CL_DIR_INFER));
}

/*
 * A driver 2D copy: host (or unified host) to device (or unified device)
 * with pitches equal to the width (or one row) is one contiguous copy.
 */
static int vp_drv_2d(enum vp_fn fn, const CUDA_MEMCPY2D *p, CUstream stream)
{
	struct vp_call c = { .fn = fn, .p2d = p, .stream = stream, .kind = cudaMemcpyHostToDevice };
	enum classify_dir dir;
	const char *src;
	CUdeviceptr dst;
	int contiguous, err;

	if (!p)
		return vp_forward_copy(&c);
	if (p->srcMemoryType == CU_MEMORYTYPE_HOST && p->dstMemoryType == CU_MEMORYTYPE_DEVICE)
		dir = CL_DIR_H2D;
	else if ((p->srcMemoryType == CU_MEMORYTYPE_HOST || p->srcMemoryType == CU_MEMORYTYPE_UNIFIED) &&
		 (p->dstMemoryType == CU_MEMORYTYPE_DEVICE || p->dstMemoryType == CU_MEMORYTYPE_UNIFIED))
		dir = CL_DIR_INFER;
	else
		return vp_forward_copy(&c);
	if (p->WidthInBytes && p->Height > SIZE_MAX / p->WidthInBytes)
		return vp_forward_copy(&c);
	src = p->srcMemoryType == CU_MEMORYTYPE_HOST ? (const char *)p->srcHost
						     : (const char *)(uintptr_t)p->srcDevice;
	dst = p->dstDevice;
	if (!src)
		return vp_forward_copy(&c);
	c.src = src + p->srcY * p->srcPitch + p->srcXInBytes;
	c.dst = (void *)(uintptr_t)(dst + p->dstY * p->dstPitch + p->dstXInBytes);
	c.n = p->WidthInBytes * p->Height;
	c.kind = dir == CL_DIR_INFER ? cudaMemcpyDefault : cudaMemcpyHostToDevice;
	contiguous = p->Height <= 1 || (p->srcPitch == p->WidthInBytes && p->dstPitch == p->WidthInBytes);
	if (contiguous)
		return vp_copy(&c, dir);
	if (vp_inside)
		return vp_forward_copy(&c);
	vp_enter();
	err = vp_forward_copy(&c);
	if (err == CUDA_SUCCESS && dir == CL_DIR_H2D)
		vp_count(&c, CL_NO_MATCH);
	return err;
}

VP_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2D, p, NULL));
}

VP_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2D_PTDS, p, NULL));
}

VP_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2DU, p, NULL));
}

VP_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2DU_PTDS, p, NULL));
}

VP_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2D_ASYNC, p, stream));
}

VP_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_2d(VP_DRV_2D_ASYNC_PTSZ, p, stream));
}

static CUresult vp_drv_batch(int ptsz, CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
			     CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, CUstream stream)
{
	CUresult err;

	if (!vp_inside)
		vp_enter();
	else
		return ptsz ? (VP_GET(cuMemcpyBatchAsync_v2_ptsz) ? VP_R(cuMemcpyBatchAsync_v2_ptsz)(
					       dsts, srcs, sizes, count, attrs, idxs, nattrs, stream) : VP_NO_DRV)
			    : (VP_GET(cuMemcpyBatchAsync_v2) ? VP_R(cuMemcpyBatchAsync_v2)(
					       dsts, srcs, sizes, count, attrs, idxs, nattrs, stream) : VP_NO_DRV);
	vp_inside = 1;
	err = ptsz ? (VP_GET(cuMemcpyBatchAsync_v2_ptsz)
			      ? VP_R(cuMemcpyBatchAsync_v2_ptsz)(dsts, srcs, sizes, count, attrs, idxs, nattrs, stream)
			      : VP_NO_DRV)
		   : (VP_GET(cuMemcpyBatchAsync_v2)
			      ? VP_R(cuMemcpyBatchAsync_v2)(dsts, srcs, sizes, count, attrs, idxs, nattrs, stream)
			      : VP_NO_DRV);
	if (err == CUDA_SUCCESS && dsts && srcs && sizes)
		vp_count_batch((void *const *)dsts, (const void *const *)srcs, sizes, count, 1);
	vp_inside = 0;
	return err;
}

VP_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
				      CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
				      CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_batch(0, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream));
}

VP_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
					   size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
					   size_t numAttrs, CUstream stream)
{
	VP_KEEP_ERRNO(CUresult, vp_drv_batch(1, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream));
}

/* ---- allocations ------------------------------------------------------------ */

/* One allocation the program asked for, with what it takes to retry it. */
struct vp_alloc {
	int (*call)(const struct vp_alloc *a);  /* the real call; 0 or its error */
	int oom;                /* the call's out-of-memory code */
	int runtime;            /* a runtime call: clear the sticky error after a retry */
	int dev;                /* the device, or -1: the current context's */
	uint64_t need;          /* bytes it needs */
	void *p;                /* the program's result pointer */
	size_t n, height, elem;
	size_t *pitch;
	unsigned int flags;
	unsigned long long flags64;
	void *stream, *mempool;
	const CUmemAllocationProp *prop;
};

/*
 * The allocation path: the real call; on out-of-memory, give pool memory
 * back (newest slabs first) and retry until it fits or the pool is empty.
 * After a successful retry of a runtime call the runtime's last error,
 * set by the failed attempt, is cleared: the program asked once and got
 * its memory.
 */
static int vp_alloc(const struct vp_alloc *a)
{
	int saved = errno, err, retry, dev = a->dev;

	if (vp_inside) {
		err = a->call(a);
		goto out;
	}
	vp_enter();
	stats_add(ST_ALLOC_CALLS, 1);
	vp_inside = 1;
	err = a->call(a);
	if (err != a->oom || !vp_config.enabled || device_open() || (dev < 0 && device_current(&dev)))
		goto out_inside;
	while (pool_reclaim(dev, a->need) > 0) {
		if (a->runtime && VP_GET(cudaGetLastError))
			VP_R(cudaGetLastError)();
		stats_add(ST_POOL_OOM_RETRIES, 1);
		retry = a->call(a);
		if (retry == 0) {
			if (a->runtime && VP_GET(cudaGetLastError))
				VP_R(cudaGetLastError)();
			err = 0;
			break;
		}
		if (retry != a->oom) {
			err = retry;
			break;
		}
	}
out_inside:
	vp_inside = 0;
out:
	errno = saved;
	return err;
}

#define VP_RT_OOM cudaErrorMemoryAllocation
#define VP_DRV_OOM CUDA_ERROR_OUT_OF_MEMORY

static int vp_call_cudaMalloc(const struct vp_alloc *a)
{
	return VP_GET(cudaMalloc) ? VP_R(cudaMalloc)(a->p, a->n) : VP_NO_RT;
}

VP_API cudaError_t cudaMalloc(void **p, size_t n)
{
	struct vp_alloc a = { .call = vp_call_cudaMalloc, .oom = VP_RT_OOM, .runtime = 1, .dev = -1,
			      .need = n, .p = p, .n = n };

	return (cudaError_t)vp_alloc(&a);
}

static int vp_call_cudaMallocAsync(const struct vp_alloc *a)
{
	return VP_GET(cudaMallocAsync) ? VP_R(cudaMallocAsync)(a->p, a->n, a->stream) : VP_NO_RT;
}

VP_API cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t stream)
{
	struct vp_alloc a = { .call = vp_call_cudaMallocAsync, .oom = VP_RT_OOM, .runtime = 1, .dev = -1,
			      .need = n, .p = p, .n = n, .stream = stream };

	return (cudaError_t)vp_alloc(&a);
}

static int vp_call_cudaMallocAsync_ptsz(const struct vp_alloc *a)
{
	return VP_GET(cudaMallocAsync_ptsz) ? VP_R(cudaMallocAsync_ptsz)(a->p, a->n, a->stream) : VP_NO_RT;
}

VP_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t stream)
{
	struct vp_alloc a = { .call = vp_call_cudaMallocAsync_ptsz, .oom = VP_RT_OOM, .runtime = 1,
			      .dev = -1, .need = n, .p = p, .n = n, .stream = stream };

	return (cudaError_t)vp_alloc(&a);
}

static int vp_call_cudaMallocManaged(const struct vp_alloc *a)
{
	return VP_GET(cudaMallocManaged) ? VP_R(cudaMallocManaged)(a->p, a->n, a->flags) : VP_NO_RT;
}

VP_API cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags)
{
	struct vp_alloc a = { .call = vp_call_cudaMallocManaged, .oom = VP_RT_OOM, .runtime = 1, .dev = -1,
			      .need = n, .p = p, .n = n, .flags = flags };

	return (cudaError_t)vp_alloc(&a);
}

static int vp_call_cudaMallocPitch(const struct vp_alloc *a)
{
	return VP_GET(cudaMallocPitch) ? VP_R(cudaMallocPitch)(a->p, a->pitch, a->n, a->height) : VP_NO_RT;
}

VP_API cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
	struct vp_alloc a = { .call = vp_call_cudaMallocPitch, .oom = VP_RT_OOM, .runtime = 1, .dev = -1,
			      .need = (uint64_t)width * height, .p = p, .n = width, .height = height,
			      .pitch = pitch };

	return (cudaError_t)vp_alloc(&a);
}

static int vp_call_cudaMallocFromPoolAsync(const struct vp_alloc *a)
{
	return VP_GET(cudaMallocFromPoolAsync)
		       ? VP_R(cudaMallocFromPoolAsync)(a->p, a->n, a->mempool, a->stream) : VP_NO_RT;
}

VP_API cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool, cudaStream_t stream)
{
	struct vp_alloc a = { .call = vp_call_cudaMallocFromPoolAsync, .oom = VP_RT_OOM, .runtime = 1,
			      .dev = -1, .need = n, .p = p, .n = n, .stream = stream, .mempool = pool };

	return (cudaError_t)vp_alloc(&a);
}

static int vp_call_cudaMallocFromPoolAsync_ptsz(const struct vp_alloc *a)
{
	return VP_GET(cudaMallocFromPoolAsync_ptsz)
		       ? VP_R(cudaMallocFromPoolAsync_ptsz)(a->p, a->n, a->mempool, a->stream) : VP_NO_RT;
}

VP_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool,
						cudaStream_t stream)
{
	struct vp_alloc a = { .call = vp_call_cudaMallocFromPoolAsync_ptsz, .oom = VP_RT_OOM, .runtime = 1,
			      .dev = -1, .need = n, .p = p, .n = n, .stream = stream, .mempool = pool };

	return (cudaError_t)vp_alloc(&a);
}

static int vp_call_cuMemAlloc_v2(const struct vp_alloc *a)
{
	return VP_GET(cuMemAlloc_v2) ? VP_R(cuMemAlloc_v2)(a->p, a->n) : VP_NO_DRV;
}

VP_API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	struct vp_alloc a = { .call = vp_call_cuMemAlloc_v2, .oom = VP_DRV_OOM, .dev = -1, .need = n,
			      .p = p, .n = n };

	return (CUresult)vp_alloc(&a);
}

static int vp_call_cuMemAllocAsync(const struct vp_alloc *a)
{
	return VP_GET(cuMemAllocAsync) ? VP_R(cuMemAllocAsync)(a->p, a->n, a->stream) : VP_NO_DRV;
}

VP_API CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream stream)
{
	struct vp_alloc a = { .call = vp_call_cuMemAllocAsync, .oom = VP_DRV_OOM, .dev = -1, .need = n,
			      .p = p, .n = n, .stream = stream };

	return (CUresult)vp_alloc(&a);
}

static int vp_call_cuMemAllocAsync_ptsz(const struct vp_alloc *a)
{
	return VP_GET(cuMemAllocAsync_ptsz) ? VP_R(cuMemAllocAsync_ptsz)(a->p, a->n, a->stream) : VP_NO_DRV;
}

VP_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream stream)
{
	struct vp_alloc a = { .call = vp_call_cuMemAllocAsync_ptsz, .oom = VP_DRV_OOM, .dev = -1, .need = n,
			      .p = p, .n = n, .stream = stream };

	return (CUresult)vp_alloc(&a);
}

static int vp_call_cuMemAllocManaged(const struct vp_alloc *a)
{
	return VP_GET(cuMemAllocManaged) ? VP_R(cuMemAllocManaged)(a->p, a->n, a->flags) : VP_NO_DRV;
}

VP_API CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int flags)
{
	struct vp_alloc a = { .call = vp_call_cuMemAllocManaged, .oom = VP_DRV_OOM, .dev = -1, .need = n,
			      .p = p, .n = n, .flags = flags };

	return (CUresult)vp_alloc(&a);
}

static int vp_call_cuMemAllocPitch_v2(const struct vp_alloc *a)
{
	return VP_GET(cuMemAllocPitch_v2)
		       ? VP_R(cuMemAllocPitch_v2)(a->p, a->pitch, a->n, a->height, (unsigned int)a->elem)
		       : VP_NO_DRV;
}

VP_API CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height,
				   unsigned int elem)
{
	struct vp_alloc a = { .call = vp_call_cuMemAllocPitch_v2, .oom = VP_DRV_OOM, .dev = -1,
			      .need = (uint64_t)width * height, .p = p, .n = width, .height = height,
			      .pitch = pitch, .elem = elem };

	return (CUresult)vp_alloc(&a);
}

static int vp_call_cuMemAllocFromPoolAsync(const struct vp_alloc *a)
{
	return VP_GET(cuMemAllocFromPoolAsync)
		       ? VP_R(cuMemAllocFromPoolAsync)(a->p, a->n, a->mempool, a->stream) : VP_NO_DRV;
}

VP_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream stream)
{
	struct vp_alloc a = { .call = vp_call_cuMemAllocFromPoolAsync, .oom = VP_DRV_OOM, .dev = -1,
			      .need = n, .p = p, .n = n, .stream = stream, .mempool = pool };

	return (CUresult)vp_alloc(&a);
}

static int vp_call_cuMemAllocFromPoolAsync_ptsz(const struct vp_alloc *a)
{
	return VP_GET(cuMemAllocFromPoolAsync_ptsz)
		       ? VP_R(cuMemAllocFromPoolAsync_ptsz)(a->p, a->n, a->mempool, a->stream) : VP_NO_DRV;
}

VP_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream stream)
{
	struct vp_alloc a = { .call = vp_call_cuMemAllocFromPoolAsync_ptsz, .oom = VP_DRV_OOM, .dev = -1,
			      .need = n, .p = p, .n = n, .stream = stream, .mempool = pool };

	return (CUresult)vp_alloc(&a);
}

static int vp_call_cuMemCreate(const struct vp_alloc *a)
{
	return VP_GET(cuMemCreate) ? VP_R(cuMemCreate)(a->p, a->n, a->prop, a->flags64) : VP_NO_DRV;
}

/*
 * cuMemCreate: the physical allocation of the virtual-memory API (PyTorch's
 * expandable segments grow with it), on the device its properties name.
 */
VP_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			    const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct vp_alloc a = { .call = vp_call_cuMemCreate, .oom = VP_DRV_OOM, .dev = -1, .need = size,
			      .p = handle, .n = size, .prop = prop, .flags64 = flags };

	if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		a.dev = prop->location.id;
	return (CUresult)vp_alloc(&a);
}

/* ---- entry points handed out at run time ------------------------------------ */

/* Returns nonzero when the code at addr belongs to an object whose file name starts with prefix. */
static int vp_code_in(const void *addr, const char *prefix)
{
	Dl_info info;
	const char *base;

	if (!addr || !dladdr(addr, &info) || !info.dli_fname)
		return 0;
	base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return strncmp(base, prefix, strlen(prefix)) == 0;
}

/* Returns nonzero when the code at addr belongs to a CUDA runtime (libcudart*). */
static int vp_is_runtime_code(const void *addr)
{
	return vp_code_in(addr, "libcudart");
}

/* The table entry named name, or NULL. */
static const struct vp_entry *vp_entry_named(const char *name)
{
	for (size_t i = 0; i < VP_NENTRIES; i++)
		if (strcmp(vp_entries[i].name, name) == 0)
			return &vp_entries[i];
	return NULL;
}

/* Whether the table has a _v2 form of base name symbol. */
static int vp_entry_named_v2(const char *symbol)
{
	char name[128];

	snprintf(name, sizeof(name), "%s_v2", symbol);
	return vp_entry_named(name) != NULL;
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
	const struct vp_entry *e;

	if (!f || vp_is_self(f))
		return f;
	vp_resolve();
	for (size_t i = 0; i < VP_NENTRIES; i++)
		if (vp_entries[i].lib == VP_LIB_DRV &&
		    vp_addr(atomic_load_explicit(vp_entries[i].real, memory_order_acquire)) == f)
			return vp_addr(vp_entries[i].wrapper);
	if (!symbol || strlen(symbol) + 10 > sizeof(name))
		return f;
	/* cuMemcpyHtoD_v2_ptds but cuMemcpyHtoDAsync_v2_ptsz: try both per-thread spellings. */
	suffixes[0] = pt ? (v2 ? "_v2_ptds" : "_ptds") : (v2 ? "_v2" : "");
	suffixes[1] = pt ? (v2 ? "_v2_ptsz" : "_ptsz") : NULL;
	for (int k = 0; k < 2 && suffixes[k]; k++) {
		snprintf(name, sizeof(name), "%s%s", symbol, suffixes[k]);
		e = vp_entry_named(name);
		if (e && e->lib == VP_LIB_DRV)
			return vp_addr(e->wrapper);
	}
	/* Names without a _v2 form at all (cuMemCreate, cuMemcpy) at any version. */
	if (v2) {
		snprintf(name, sizeof(name), "%s%s", symbol, pt ? "_ptsz" : "");
		e = vp_entry_named(name);
		if (!e && pt) {
			snprintf(name, sizeof(name), "%s_ptds", symbol);
			e = vp_entry_named(name);
		}
		if (e && e->lib == VP_LIB_DRV && !vp_entry_named_v2(symbol))
			return vp_addr(e->wrapper);
	}
	return f;
}

VP_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	int saved = errno;
	CUresult r;

	vp_resolve();
	r = VP_GET(cuGetProcAddress_v2) ? VP_R(cuGetProcAddress_v2)(symbol, pfn, version, flags, status)
					: CUDA_ERROR_NOT_INITIALIZED;
	if (r == CUDA_SUCCESS && pfn && !vp_is_runtime_code(__builtin_return_address(0)))
		*pfn = vp_wrap_driver(symbol, *pfn, version, flags);
	errno = saved;
	return r;
}

VP_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	int saved = errno;
	CUresult r;

	vp_resolve();
	r = VP_GET(cuGetProcAddress) ? VP_R(cuGetProcAddress)(symbol, pfn, version, flags)
				     : CUDA_ERROR_NOT_INITIALIZED;
	if (r == CUDA_SUCCESS && pfn && !vp_is_runtime_code(__builtin_return_address(0)))
		*pfn = vp_wrap_driver(symbol, *pfn, version, flags);
	errno = saved;
	return r;
}

/* cudaEnable* flags as the driver's CU_GET_PROC_ADDRESS_* (the same bits). */
VP_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
					   enum cudaDriverEntryPointQueryResult *status)
{
	int saved = errno;
	cudaError_t r;

	vp_resolve();
	r = VP_GET(cudaGetDriverEntryPoint) ? VP_R(cudaGetDriverEntryPoint)(symbol, fn, flags, status)
					    : VP_NO_RT;
	if (r == cudaSuccess && fn)
		*fn = vp_wrap_driver(symbol, *fn, CUDART_VERSION, flags);
	errno = saved;
	return r;
}

VP_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn, unsigned long long flags,
						enum cudaDriverEntryPointQueryResult *status)
{
	int saved = errno;
	cudaError_t r;

	vp_resolve();
	r = VP_GET(cudaGetDriverEntryPoint_ptsz)
		    ? VP_R(cudaGetDriverEntryPoint_ptsz)(symbol, fn, flags, status) : VP_NO_RT;
	if (r == cudaSuccess && fn)
		*fn = vp_wrap_driver(symbol, *fn, CUDART_VERSION, flags);
	errno = saved;
	return r;
}

VP_API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
						    unsigned long long flags,
						    enum cudaDriverEntryPointQueryResult *status)
{
	int saved = errno;
	cudaError_t r;

	vp_resolve();
	r = VP_GET(cudaGetDriverEntryPointByVersion)
		    ? VP_R(cudaGetDriverEntryPointByVersion)(symbol, fn, version, flags, status) : VP_NO_RT;
	if (r == cudaSuccess && fn)
		*fn = vp_wrap_driver(symbol, *fn, (int)version, flags);
	errno = saved;
	return r;
}

VP_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fn,
							 unsigned int version, unsigned long long flags,
							 enum cudaDriverEntryPointQueryResult *status)
{
	int saved = errno;
	cudaError_t r;

	vp_resolve();
	r = VP_GET(cudaGetDriverEntryPointByVersion_ptsz)
		    ? VP_R(cudaGetDriverEntryPointByVersion_ptsz)(symbol, fn, version, flags, status)
		    : VP_NO_RT;
	if (r == cudaSuccess && fn)
		*fn = vp_wrap_driver(symbol, *fn, (int)version, flags);
	errno = saved;
	return r;
}

/* ---- dlsym and dlvsym -------------------------------------------------------- */

/*
 * dlsym and dlvsym are exported so that a program looking an interposed
 * function up on an explicit handle (dlopen("libcuda.so.1") then
 * dlsym(h, "cuGetProcAddress_v2"): a statically linked runtime; ctypes)
 * gets the shim's wrapper. Look-ups on RTLD_DEFAULT and RTLD_NEXT depend
 * on who calls (the next object after the caller), so those are handed to
 * the C library's own function by a tail jump that keeps the caller's
 * return address: the shim is invisible to them (and its exports are found
 * there in the usual preload order anyway). Only explicit handles reach
 * vp_dlsym_handle, where the caller no longer matters.
 */
void *vp_real_dlsym __attribute__((visibility("hidden")));
void *vp_real_dlvsym __attribute__((visibility("hidden")));
void *vp_dlsym_handle(void *handle, const char *name) __attribute__((visibility("hidden")));
void *vp_dlvsym_handle(void *handle, const char *name, const char *version)
	__attribute__((visibility("hidden")));
void *vp_dl_init_real(void) __attribute__((visibility("hidden")));

#if defined(__x86_64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	cmpq $-1, %rdi\n"
	"	je 1f\n"
	"	testq %rdi, %rdi\n"
	"	je 1f\n"
	"	jmp vp_dlsym_handle\n"
	"1:	movq vp_real_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jne 2f\n"
	"	pushq %rdi\n"
	"	pushq %rsi\n"
	"	subq $8, %rsp\n"
	"	call vp_dl_init_real\n"
	"	addq $8, %rsp\n"
	"	popq %rsi\n"
	"	popq %rdi\n"
	"	movq vp_real_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	je 3f\n"
	"2:	jmp *%rax\n"
	"3:	ret\n"
	".size dlsym, .-dlsym\n"
	".globl dlvsym\n"
	".type dlvsym, @function\n"
	"dlvsym:\n"
	"	cmpq $-1, %rdi\n"
	"	je 1f\n"
	"	testq %rdi, %rdi\n"
	"	je 1f\n"
	"	jmp vp_dlvsym_handle\n"
	"1:	movq vp_real_dlvsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jne 2f\n"
	"	pushq %rdi\n"
	"	pushq %rsi\n"
	"	pushq %rdx\n"
	"	call vp_dl_init_real\n"
	"	popq %rdx\n"
	"	popq %rsi\n"
	"	popq %rdi\n"
	"	movq vp_real_dlvsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	je 3f\n"
	"2:	jmp *%rax\n"
	"3:	ret\n"
	".size dlvsym, .-dlvsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, %function\n"
	"dlsym:\n"
	"	cmn x0, #1\n"
	"	b.eq 1f\n"
	"	cbz x0, 1f\n"
	"	b vp_dlsym_handle\n"
	"1:	adrp x16, vp_real_dlsym\n"
	"	ldr x16, [x16, :lo12:vp_real_dlsym]\n"
	"	cbnz x16, 2f\n"
	"	stp x0, x1, [sp, #-32]!\n"
	"	stp x2, x30, [sp, #16]\n"
	"	bl vp_dl_init_real\n"
	"	ldp x2, x30, [sp, #16]\n"
	"	ldp x0, x1, [sp], #32\n"
	"	adrp x16, vp_real_dlsym\n"
	"	ldr x16, [x16, :lo12:vp_real_dlsym]\n"
	"	cbnz x16, 2f\n"
	"	mov x0, #0\n"
	"	ret\n"
	"2:	br x16\n"
	".size dlsym, .-dlsym\n"
	".globl dlvsym\n"
	".type dlvsym, %function\n"
	"dlvsym:\n"
	"	cmn x0, #1\n"
	"	b.eq 1f\n"
	"	cbz x0, 1f\n"
	"	b vp_dlvsym_handle\n"
	"1:	adrp x16, vp_real_dlvsym\n"
	"	ldr x16, [x16, :lo12:vp_real_dlvsym]\n"
	"	cbnz x16, 2f\n"
	"	stp x0, x1, [sp, #-32]!\n"
	"	stp x2, x30, [sp, #16]\n"
	"	bl vp_dl_init_real\n"
	"	ldp x2, x30, [sp, #16]\n"
	"	ldp x0, x1, [sp], #32\n"
	"	adrp x16, vp_real_dlvsym\n"
	"	ldr x16, [x16, :lo12:vp_real_dlvsym]\n"
	"	cbnz x16, 2f\n"
	"	mov x0, #0\n"
	"	ret\n"
	"2:	br x16\n"
	".size dlvsym, .-dlvsym\n");
#else
#error "dlsym trampolines exist for x86-64 and aarch64 only"
#endif

/*
 * The result of a look-up on an explicit handle: the shim's wrapper when
 * name is an interposed function found in the CUDA runtime or driver
 * (a library of another name that exports a function of the same name is
 * its own business), and the caller is not a CUDA runtime (whose own entry
 * points are interposed already).
 */
static void *vp_dl_result(void *f, const char *name, const void *caller)
{
	const struct vp_entry *e;

	if (!f || !name || vp_is_self(f) || vp_is_runtime_code(caller))
		return f;
	e = vp_entry_named(name);
	if (!e)
		return f;
	if (!vp_code_in(f, "libcuda"))  /* libcuda.so*, libcudart.so* */
		return f;
	return vp_addr(e->wrapper);
}

void *vp_dlsym_handle(void *handle, const char *name)
{
	int saved = errno;
	void *f = dlreal_sym(handle, name);

	f = vp_dl_result(f, name, __builtin_return_address(0));
	errno = saved;
	return f;
}

void *vp_dlvsym_handle(void *handle, const char *name, const char *version)
{
	int saved = errno;
	void *f = dlreal_vsym(handle, name, version);

	f = vp_dl_result(f, name, __builtin_return_address(0));
	errno = saved;
	return f;
}

/*
 * A look-up on RTLD_DEFAULT or RTLD_NEXT before the constructor found the
 * C library's functions (another library's constructor ran first): the
 * trampoline saves its arguments, calls this, and jumps on to the real
 * function with the caller's return address intact. Returns the real
 * dlsym (NULL: the trampoline returns NULL).
 */
void *vp_dl_init_real(void)
{
	int saved = errno;

	dlreal_init();
	vp_real_dlvsym = dlreal_dlvsym_fn();
	vp_real_dlsym = dlreal_dlsym_fn();
	errno = saved;
	return vp_real_dlsym;
}

/* ---- process life cycle ---------------------------------------------------- */

/* The environment for config_load_secure (paths come through config_secure_getenv). */
static const char *vp_getenv(const char *name)
{
	return getenv(name);
}

/*
 * A forked child cannot use its parent's CUDA context: it starts with empty
 * pools and zeroed counters, and reports only if it uses CUDA itself.
 */
static void vp_atfork_child(void)
{
	vp_inside = 0;
	pool_atfork_child();
	device_atfork_child();
	fingerprint_atfork_child();
	specpick_reset();
	whatif_reset();
	stats_reset(vp_config.enabled, vp_config.has_layout ? vp_config.layout.text : NULL);
	if (vp_config.dry)
		stats_set_mode(STATS_MODE_DRY);
	if (atomic_load(&vp_auto_state) == AUTOLAYOUT_FOUND) {
		stats_set_text(STATS_LAYOUT, "%s", vp_auto.text);
		stats_set_text(STATS_LAYOUT_SOURCE, "auto");
	} else if (vp_config.has_layout) {
		stats_set_text(STATS_LAYOUT_SOURCE, vp_config.layout.is_auto ? "auto" : "env");
	}
	report_atfork_child();
}

/* The starting state and reason of the pool for the dump. */
static void vp_initial_state(void)
{
	const char *layout = vp_config.has_layout ? vp_config.layout.text : NULL;

	/* "auto" stands for the layout until the content shows one. */
	stats_reset(vp_config.enabled, layout);
	if (layout)
		stats_set_text(STATS_LAYOUT_SOURCE, vp_config.layout.is_auto ? "auto" : "env");
	if (vp_config.dry && !vp_config.invalid)
		stats_set_mode(STATS_MODE_DRY);
	if (vp_config.invalid) {
		stats_set_state(POOL_OFF);
		stats_set_text(STATS_REASON, "%s", vp_config.problem);
	} else if (vp_config.off) {
		stats_set_state(POOL_OFF);
		stats_set_text(STATS_REASON, "VRAMPOOL=off: a counting pass-through");
	} else if (vp_config.dry) {
		stats_set_state(POOL_OFF);
		stats_set_text(STATS_REASON, "VRAMPOOL=dry: fingerprints only; the what-if curve says what "
			       "a pool would have served");
	} else if (!vp_config.has_layout) {
		stats_set_state(POOL_OFF);
		stats_set_text(STATS_REASON, "no VRAMPOOL_LAYOUT set");
	} else if (vp_config.layout.is_auto) {
		stats_set_state(POOL_DORMANT);
		stats_set_text(STATS_REASON, "VRAMPOOL_LAYOUT=auto: looking for the row size");
	} else {
		stats_set_state(POOL_DORMANT);
		stats_set_text(STATS_REASON, "the probe waits for VRAMPOOL_PROBE_AFTER matched copies");
	}
}

/*
 * Load time: read the configuration (malformed values print their line
 * now, once), reset the counters, install the fork and exit handlers. No
 * CUDA call and no symbol resolution of CUDA functions here: the runtime
 * may not be loaded yet (Python loads it long after start). The C
 * library's dlsym and dlvsym are found first, for the trampolines.
 */
__attribute__((constructor(101))) static void vp_init(void)
{
	int saved = errno;

	if (dlreal_init() == 0) {
		vp_real_dlsym = dlreal_dlsym_fn();
		vp_real_dlvsym = dlreal_dlvsym_fn();
	}
	config_load_secure(&vp_config, vp_getenv, config_secure_getenv);
	vp_initial_state();
	if (vp_config.has_layout && vp_config.layout.is_auto && !vp_config.off && !vp_config.invalid)
		autolayout_setup(AUTOLAYOUT_POOL);
	else if (!vp_config.has_layout && !vp_config.off && !vp_config.invalid)
		autolayout_setup(AUTOLAYOUT_SUGGEST);
	else
		atomic_store(&vp_auto_state, AUTOLAYOUT_NOTHING);
	pool_setup(&vp_config);
	fingerprint_init(vp_config.threads);
	report_setup(&vp_config);      /* also sets up the what-if curve */
	pthread_atfork(NULL, NULL, vp_atfork_child);
	atexit(report_exit);
	errno = saved;
}

/* ---- signals (report.h) ------------------------------------------------------
 *
 * The program's sigaction(2) and signal(2) go through report_sigaction, so
 * the shim's handler for SIGINT, SIGTERM and SIGHUP stays in place of
 * SIG_DFL while the program sees SIG_DFL (Python sets SIG_DFL, then raises
 * SIGINT to end on a KeyboardInterrupt). signal() is sigaction with glibc's
 * BSD semantics: SA_RESTART, the signal blocked in its own handler. The
 * C library's sigaction comes from core/dlreal, found by the constructor.
 */

VP_API int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	return report_sigaction(sig, act, oldact);
}

VP_API sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	if (sig > 0 && sig < NSIG)
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = SA_RESTART;
	if (report_sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}
