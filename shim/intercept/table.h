/*
 * table: the real functions behind the interposed entry points
 * (entries.h), how they are found, and the rules every hook keeps
 * (STYLE.md 8, 9, 4). Internal to the interception layer.
 *
 * Invariants:
 * - real_NAME is the real NAME of the row in entries.h: the next
 *   definition after this object (RTLD_NEXT), or, for a runtime loaded
 *   privately (RTLD_LOCAL), the one in the libcudart already loaded; for
 *   driver rows, the one in libcuda.so.1. Never the shim's own (vp_is_self).
 *   A pointer is written once found and read with acquire (VP_R); one still
 *   unknown when needed is looked for again (VP_GET): the runtime may be
 *   loaded after the first call.
 * - The libraries the real functions live in are kept loaded (a reference
 *   the shim never drops), so a program that unloads and reloads them never
 *   leaves the shim calling a stale pointer.
 * - Resolution never waits for another thread (vp_resolve says why) and
 *   never calls an interposed function.
 * - vp_inside is the per-thread re-entry guard: while it is set, every
 *   interposed call goes straight to the real function. A hook sets it
 *   around its one call down, so the shim's own work, and a runtime that
 *   reaches the driver through entry points it got from us, are never seen
 *   twice (each copy is counted and pooled once, whichever route reaches it).
 * - errno is preserved across every interposed call (VP_KEEP_ERRNO).
 * - CUDA codes stay in this layer: a real function that cannot be found
 *   answers VP_NO_RT or VP_NO_DRV, as an uninitialised library would.
 */
#ifndef VRAMPOOL_TABLE_H
#define VRAMPOOL_TABLE_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "intercept/entries.h"

/* The shim interposes deprecated entry points too (cudaGetDriverEntryPoint). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define VP_API __attribute__((visibility("default")))
#define VP_HIDDEN __attribute__((visibility("hidden")))

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
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *arg);
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void *arg, unsigned int flags);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t g, cudaStream_t s);
CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *arg);
CUresult cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *arg, unsigned int flags);
CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s);
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr src, size_t n, CUstream s);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *deps,
					       const cudaGraphEdgeData *edges, size_t n,
					       enum cudaStreamCaptureMode mode);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges,
					  size_t n, CUstreamCaptureMode mode);
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *x, cudaGraph_t g, cudaGraphInstantiateParams *p);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *x, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream stream);

/* Any function pointer, as the table keeps them. */
typedef void (*vp_fn_t)(void);

/* The address of a function pointer as an object pointer (dlsym's currency). */
static inline void *vp_addr(vp_fn_t f)
{
	void *p;

	memcpy(&p, &f, sizeof(p));
	return p;
}

static inline vp_fn_t vp_fn_of(void *p)
{
	vp_fn_t f;

	memcpy(&f, &p, sizeof(f));
	return f;
}

/* The real functions, one typed pointer a row of entries.h, and cudaGetLastError. */
#define VP_REAL_DECL(name, lib) extern __typeof__(name) *_Atomic real_##name VP_HIDDEN;
VP_ENTRIES(VP_REAL_DECL)
#undef VP_REAL_DECL
extern __typeof__(cudaGetLastError) *_Atomic real_cudaGetLastError VP_HIDDEN;

enum vp_lib { VP_LIB_RT, VP_LIB_DRV };

/* A row of entries.h: its name, its real pointer, its library. */
struct vp_entry {
	const char *name;
	vp_fn_t _Atomic *real;
	enum vp_lib lib;
};

/* Every row of entries.h, in its order. */
#define VP_ONE(name, lib) +1
enum { VP_NENTRIES = 0 VP_ENTRIES(VP_ONE) };
#undef VP_ONE
extern const struct vp_entry vp_entries[VP_NENTRIES] VP_HIDDEN;

/*
 * The per-thread re-entry guard (STYLE.md 9): nonzero while a hook calls
 * down. Local-dynamic, the TLS model a file's static variable gets: an
 * extern one would otherwise cost a look-up per access.
 */
extern __thread int vp_inside VP_HIDDEN __attribute__((tls_model("local-dynamic")));

/* What a call answers when its real function cannot be found; the type a hook of each library returns. */
#define VP_NO_RT cudaErrorInitializationError
#define VP_NO_DRV CUDA_ERROR_NOT_INITIALIZED
#define VP_RET_RT cudaError_t
#define VP_RET_DRV CUresult

/* Loads a real pointer (the table's pointers are written by the resolver while others read). */
#define VP_R(name) atomic_load_explicit(&real_##name, memory_order_acquire)

/* Loads real pointer of name, resolving once more when it is unknown. */
#define VP_GET(name) (VP_R(name) ? VP_R(name) : (vp_resolve_again(), VP_R(name)))

/* Calls the real name with args (a parenthesised list), or answers fail when there is none. */
#define VP_CALL(name, fail, args) (VP_GET(name) ? VP_R(name) args : (fail))

/* VP_CALL of the per-thread form name##sfx (sfx: _ptds or _ptsz) when pt is set, else of name. */
#define VP_CALL_PT(pt, name, sfx, fail, args) \
	((pt) ? VP_CALL(name##sfx, fail, args) : VP_CALL(name, fail, args))

/* Returns expr (of type type) with errno preserved: every exported hook goes through it. */
#define VP_KEEP_ERRNO(type, expr)                                                                    \
	do {                                                                                         \
		int vp_saved_errno = errno;                                                          \
		type vp_result = (type)(expr);                                                       \
		errno = vp_saved_errno;                                                              \
		return vp_result;                                                                    \
	} while (0)

/*
 * The body of a generated hook of name (lib: RT or DRV) taking args: a
 * call made from inside the shim goes straight to the real function;
 * otherwise vp_enter, then the statements after args run with vp_inside
 * set and must set err (VP_RET_##lib, declared here). Either way errno is
 * the program's on return.
 */
#define VP_GUARDED_BODY(name, lib, args, ...)                                                        \
	{                                                                                            \
		int saved = errno;                                                                   \
		VP_RET_##lib err;                                                                    \
                                                                                                     \
		if (vp_inside) {                                                                     \
			err = VP_CALL(name, VP_NO_##lib, args);                                      \
			errno = saved;                                                               \
			return err;                                                                  \
		}                                                                                    \
		vp_enter();                                                                          \
		vp_inside = 1;                                                                       \
		__VA_ARGS__                                                                          \
		vp_inside = 0;                                                                       \
		errno = saved;                                                                       \
		return err;                                                                          \
	}

/* Returns nonzero when addr lies in this shared object. */
int vp_is_self(const void *addr) VP_HIDDEN;

/*
 * Resolves the real functions at the first interposed call: any thread,
 * no waiting (a thread that finds the work not done does it too).
 */
void vp_resolve(void) VP_HIDDEN;

/*
 * A real pointer was still unknown when needed (the runtime was loaded
 * after the first call, by a library opened later): looks again for every
 * pointer still unknown.
 */
void vp_resolve_again(void) VP_HIDDEN;

/*
 * Whether the CUDA runtime (libcudart.so*) or driver (libcuda.so*) is
 * mapped in the process now (dl_iterate_phdr: no dlopen, no reference
 * taken). At load time, it says that the program is linked against CUDA.
 */
int vp_cuda_loaded(void) VP_HIDDEN;

/*
 * Marks the process as a CUDA user and starts the reporter (its thread
 * and the signal handlers of report.h); idempotent, one relaxed load each
 * once done. A CUDA user writes the summary and the dump at exit or when
 * a signal ends it; a process that never becomes one stays silent.
 */
void vp_mark_cuda(void) VP_HIDDEN;

/*
 * Runs at the start of every interposed call the shim looks at (not while
 * vp_inside is set), the entry-point look-ups included: resolves the real
 * functions once, then vp_mark_cuda.
 */
void vp_enter(void) VP_HIDDEN;

#endif
