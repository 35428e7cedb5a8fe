/*
 * entries: the single list of the CUDA entry points vrampool interposes
 * (proxychains-ng's one symbol list). Everything that names them is made
 * from it:
 *
 * - table.c: a typed real pointer real_NAME each, and resolution;
 * - procaddr.c: the wrapper handed out for each, by name or by the real
 *   function it stands for;
 * - alloc.c: the allocation hooks themselves, one generated from each row
 *   of VP_ALLOCATORS; hostwork.c likewise from each row of VP_HOSTWORK;
 * - the build: the version script build/libvrampool.map
 *   (libvrampool.map.in: these names, dlsym, dlvsym, the signal hooks of
 *   signals.h, and nothing else is exported), which tests/e2e/shim.sh checks against
 *   the rows written here.
 *
 * Adding a copy entry point: a row X(name, lib) in VP_ENTRIES and its
 * hook in copy.c. Adding an allocator: one row in VP_ALLOCATORS; work the
 * pool must know of (host work, graphs): one row in VP_HOSTWORK (hostwork.c).
 *
 * This file holds macros only and includes nothing, so that the build can
 * expand it with the preprocessor alone. lib is RT (found in libcudart)
 * or DRV (in libcuda).
 */
#ifndef VRAMPOOL_ENTRIES_H
#define VRAMPOOL_ENTRIES_H

/*
 * The allocation entry points, one row each:
 *   A(X, name, lib, (params), (args), need, dev)
 * params and args as the entry point declares and passes them, need the
 * bytes it asks for (what pool memory must give back for it), dev its
 * device, or -1 for the calling thread's current context. X is passed
 * through to A untouched, so that VP_ENTRIES can list the allocators by
 * name (VP_ALLOC_ENTRY).
 */
#define VP_ALLOCATORS(A, X) \
	A(X, cudaMalloc, RT, (void **p, size_t n), (p, n), n, -1) \
	A(X, cudaMallocAsync, RT, (void **p, size_t n, cudaStream_t s), (p, n, s), n, -1) \
	A(X, cudaMallocAsync_ptsz, RT, (void **p, size_t n, cudaStream_t s), (p, n, s), n, -1) \
	A(X, cudaMallocManaged, RT, (void **p, size_t n, unsigned int flags), (p, n, flags), n, -1) \
	A(X, cudaMallocPitch, RT, (void **p, size_t *pitch, size_t w, size_t h), (p, pitch, w, h), \
	  (uint64_t)w * h, -1) \
	A(X, cudaMallocFromPoolAsync, RT, (void **p, size_t n, cudaMemPool_t pool, cudaStream_t s), \
	  (p, n, pool, s), n, -1) \
	A(X, cudaMallocFromPoolAsync_ptsz, RT, (void **p, size_t n, cudaMemPool_t pool, cudaStream_t s), \
	  (p, n, pool, s), n, -1) \
	A(X, cuMemAlloc_v2, DRV, (CUdeviceptr *p, size_t n), (p, n), n, -1) \
	A(X, cuMemAllocAsync, DRV, (CUdeviceptr *p, size_t n, CUstream s), (p, n, s), n, -1) \
	A(X, cuMemAllocAsync_ptsz, DRV, (CUdeviceptr *p, size_t n, CUstream s), (p, n, s), n, -1) \
	A(X, cuMemAllocManaged, DRV, (CUdeviceptr *p, size_t n, unsigned int flags), (p, n, flags), n, -1) \
	A(X, cuMemAllocPitch_v2, DRV, (CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned int elem), \
	  (p, pitch, w, h, elem), (uint64_t)w * h, -1) \
	A(X, cuMemAllocFromPoolAsync, DRV, (CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s), \
	  (p, n, pool, s), n, -1) \
	A(X, cuMemAllocFromPoolAsync_ptsz, DRV, (CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s), \
	  (p, n, pool, s), n, -1) \
	/* the physical allocation of the virtual-memory API (PyTorch's expandable segments) */ \
	A(X, cuMemCreate, DRV, (CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop, \
				unsigned long long flags), (h, n, prop, flags), n, \
	  prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1)

/* An allocator row as an X(name, lib) row. */
#define VP_ALLOC_ENTRY(X, name, lib, params, args, need, dev) X(name, lib)

/*
 * The program's work the pool must know of without taking part in it,
 * one row each:
 *   W(X, name, lib, (params), (args), after)
 * after runs when the real call succeeded (pool/calls.h). Stream work that
 * may write host memory after its call returned (pool/hazard.h): host
 * functions, stream callbacks, copies to the host, and graph launches (a
 * graph may hold either), which also move the bytes of the copies captured
 * into the graph (pool/graphs.h); the executables made from a graph, and
 * destroyed handles.
 */
#define VP_HOSTWORK(W, X) \
	W(X, cudaLaunchHostFunc, RT, (cudaStream_t s, cudaHostFn_t fn, void *arg), (s, fn, arg), \
	  calls_host_work(s, 0)) \
	W(X, cudaLaunchHostFunc_ptsz, RT, (cudaStream_t s, cudaHostFn_t fn, void *arg), (s, fn, arg), \
	  calls_host_work(s, 1)) \
	W(X, cudaStreamAddCallback, RT, (cudaStream_t s, cudaStreamCallback_t cb, void *arg, unsigned int flags), \
	  (s, cb, arg, flags), calls_host_work(s, 0)) \
	W(X, cudaStreamAddCallback_ptsz, RT, \
	  (cudaStream_t s, cudaStreamCallback_t cb, void *arg, unsigned int flags), (s, cb, arg, flags), \
	  calls_host_work(s, 1)) \
	W(X, cudaStreamBeginCapture, RT, (cudaStream_t s, enum cudaStreamCaptureMode mode), (s, mode), \
	  calls_capture_begun()) \
	W(X, cudaStreamBeginCapture_ptsz, RT, (cudaStream_t s, enum cudaStreamCaptureMode mode), (s, mode), \
	  calls_capture_begun()) \
	W(X, cudaStreamBeginCaptureToGraph, RT, \
	  (cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *deps, const cudaGraphEdgeData *edges, size_t n, \
	   enum cudaStreamCaptureMode mode), (s, g, deps, edges, n, mode), calls_capture_begun()) \
	W(X, cudaStreamBeginCaptureToGraph_ptsz, RT, \
	  (cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t *deps, const cudaGraphEdgeData *edges, size_t n, \
	   enum cudaStreamCaptureMode mode), (s, g, deps, edges, n, mode), calls_capture_begun()) \
	W(X, cudaGraphLaunch, RT, (cudaGraphExec_t g, cudaStream_t s), (g, s), calls_graph_launch(g, s, 0)) \
	W(X, cudaGraphLaunch_ptsz, RT, (cudaGraphExec_t g, cudaStream_t s), (g, s), calls_graph_launch(g, s, 1)) \
	W(X, cudaGraphInstantiate, RT, (cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags), \
	  (x, g, flags), calls_graph_exec(x ? *x : NULL, g)) \
	W(X, cudaGraphInstantiateWithFlags, RT, (cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags), \
	  (x, g, flags), calls_graph_exec(x ? *x : NULL, g)) \
	W(X, cudaGraphInstantiateWithParams, RT, (cudaGraphExec_t *x, cudaGraph_t g, cudaGraphInstantiateParams *p), \
	  (x, g, p), calls_graph_exec(x ? *x : NULL, g)) \
	W(X, cudaGraphInstantiateWithParams_ptsz, RT, \
	  (cudaGraphExec_t *x, cudaGraph_t g, cudaGraphInstantiateParams *p), (x, g, p), \
	  calls_graph_exec(x ? *x : NULL, g)) \
	W(X, cudaGraphExecUpdate, RT, (cudaGraphExec_t x, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info), \
	  (x, g, info), calls_graph_exec(x, g)) \
	W(X, cudaGraphDestroy, RT, (cudaGraph_t g), (g), calls_graph_gone(g)) \
	W(X, cudaGraphExecDestroy, RT, (cudaGraphExec_t x), (x), calls_graph_gone(x)) \
	W(X, cuLaunchHostFunc, DRV, (CUstream s, CUhostFn fn, void *arg), (s, fn, arg), calls_host_work(s, 0)) \
	W(X, cuLaunchHostFunc_ptsz, DRV, (CUstream s, CUhostFn fn, void *arg), (s, fn, arg), calls_host_work(s, 1)) \
	W(X, cuStreamAddCallback, DRV, (CUstream s, CUstreamCallback cb, void *arg, unsigned int flags), \
	  (s, cb, arg, flags), calls_host_work(s, 0)) \
	W(X, cuStreamAddCallback_ptsz, DRV, (CUstream s, CUstreamCallback cb, void *arg, unsigned int flags), \
	  (s, cb, arg, flags), calls_host_work(s, 1)) \
	W(X, cuMemcpyDtoHAsync_v2, DRV, (void *d, CUdeviceptr src, size_t n, CUstream s), (d, src, n, s), \
	  calls_host_write(s, 0, d, n)) \
	W(X, cuMemcpyDtoHAsync_v2_ptsz, DRV, (void *d, CUdeviceptr src, size_t n, CUstream s), (d, src, n, s), \
	  calls_host_write(s, 1, d, n)) \
	W(X, cuStreamBeginCapture_v2, DRV, (CUstream s, CUstreamCaptureMode mode), (s, mode), \
	  calls_capture_begun()) \
	W(X, cuStreamBeginCapture_v2_ptsz, DRV, (CUstream s, CUstreamCaptureMode mode), (s, mode), \
	  calls_capture_begun()) \
	W(X, cuStreamBeginCaptureToGraph, DRV, \
	  (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n, \
	   CUstreamCaptureMode mode), (s, g, deps, edges, n, mode), calls_capture_begun()) \
	W(X, cuStreamBeginCaptureToGraph_ptsz, DRV, \
	  (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n, \
	   CUstreamCaptureMode mode), (s, g, deps, edges, n, mode), calls_capture_begun()) \
	W(X, cuGraphLaunch, DRV, (CUgraphExec g, CUstream s), (g, s), calls_graph_launch(g, s, 0)) \
	W(X, cuGraphLaunch_ptsz, DRV, (CUgraphExec g, CUstream s), (g, s), calls_graph_launch(g, s, 1)) \
	W(X, cuGraphInstantiateWithFlags, DRV, (CUgraphExec *x, CUgraph g, unsigned long long flags), \
	  (x, g, flags), calls_graph_exec(x ? *x : NULL, g)) \
	W(X, cuGraphInstantiateWithParams, DRV, (CUgraphExec *x, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p), \
	  (x, g, p), calls_graph_exec(x ? *x : NULL, g)) \
	W(X, cuGraphInstantiateWithParams_ptsz, DRV, \
	  (CUgraphExec *x, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p), (x, g, p), \
	  calls_graph_exec(x ? *x : NULL, g)) \
	W(X, cuGraphExecUpdate_v2, DRV, (CUgraphExec x, CUgraph g, CUgraphExecUpdateResultInfo *info), \
	  (x, g, info), calls_graph_exec(x, g)) \
	W(X, cuGraphDestroy, DRV, (CUgraph g), (g), calls_graph_gone(g)) \
	W(X, cuGraphExecDestroy, DRV, (CUgraphExec x), (x), calls_graph_gone(x))

/* A host-work row as an X(name, lib) row. */
#define VP_HOSTWORK_ENTRY(X, name, lib, params, args, after) X(name, lib)

/*
 * Every interposed entry point as X(name, lib): copies (runtime, then
 * driver), the look-ups that hand out entry points, the allocators, then
 * the work the pool must know of.
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
	X(cudaGetDriverEntryPoint, RT) \
	X(cudaGetDriverEntryPoint_ptsz, RT) \
	X(cudaGetDriverEntryPointByVersion, RT) \
	X(cudaGetDriverEntryPointByVersion_ptsz, RT) \
	X(cuGetProcAddress, DRV) \
	X(cuGetProcAddress_v2, DRV) \
	VP_ALLOCATORS(VP_ALLOC_ENTRY, X) \
	VP_HOSTWORK(VP_HOSTWORK_ENTRY, X)

#endif
