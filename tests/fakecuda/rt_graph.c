/*
 * rt_graph.c: the runtime's stream capture and graphs: capture into a new
 * or an existing graph, capture queries and modes, explicit graphs,
 * instantiation, update, upload and launch.
 */
#include "fakecuda.h"

#include <string.h>

/* ---- stream capture; instantiation, launch and destruction of graphs ---- */

static cudaError_t begin_capture(const char *name, int ptsz, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return fc_rt_reti(fc_capture_begin(s, NULL));
}

FC_API cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
	(void)mode;
	return begin_capture("cudaStreamBeginCapture", 0, h);
}

FC_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
	(void)mode;
	return begin_capture("cudaStreamBeginCapture_ptsz", 1, h);
}

static cudaError_t end_capture(const char *name, int ptsz, cudaStream_t h, cudaGraph_t *g)
{
	struct CUstream_st *s;
	int err;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!g)
		return fc_rt_ret(cudaErrorInvalidValue);
	err = fc_capture_end(s, g);
	return fc_rt_ret(err == -EPERM ? cudaErrorIllegalState : fc_rt_err(err));
}

FC_API cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *g)
{
	return end_capture("cudaStreamEndCapture", 0, h, g);
}

FC_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t h, cudaGraph_t *g)
{
	return end_capture("cudaStreamEndCapture_ptsz", 1, h, g);
}

static cudaError_t capture_info(const char *name, int ptsz, cudaStream_t h,
				enum cudaStreamCaptureStatus *st, unsigned long long *id,
				cudaGraph_t *graph, const cudaGraphNode_t **deps,
				const cudaGraphEdgeData **edges, size_t *ndeps)
{
	struct CUstream_st *s;
	int c;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!st)
		return fc_rt_ret(cudaErrorInvalidValue);
	c = fc_capture_status(s, id, graph);
	*st = c ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
	if (deps)
		*deps = NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = 0;
	return cudaSuccess;
}

FC_API cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus *st)
{
	return capture_info("cudaStreamIsCapturing", 0, h, st, NULL, NULL, NULL, NULL, NULL);
}

FC_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t h, enum cudaStreamCaptureStatus *st)
{
	return capture_info("cudaStreamIsCapturing_ptsz", 1, h, st, NULL, NULL, NULL, NULL, NULL);
}

FC_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t h, enum cudaStreamCaptureStatus *st,
					    unsigned long long *id, cudaGraph_t *graph,
					    const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
					    size_t *ndeps)
{
	return capture_info("cudaStreamGetCaptureInfo", 0, h, st, id, graph, deps, edges, ndeps);
}

FC_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t h, enum cudaStreamCaptureStatus *st,
						 unsigned long long *id, cudaGraph_t *graph,
						 const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
						 size_t *ndeps)
{
	return capture_info("cudaStreamGetCaptureInfo_ptsz", 1, h, st, id, graph, deps, edges, ndeps);
}

FC_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
	RT_ENTER("cudaGraphInstantiate");
	(void)flags;
	if (!x)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_graph_instantiate(g, x));
}

FC_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
	RT_ENTER("cudaGraphInstantiateWithFlags");
	(void)flags;
	if (!x)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_graph_instantiate(g, x));
}

static cudaError_t graph_launch(const char *name, int ptsz, cudaGraphExec_t x, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	return fc_rt_reti(fc_graph_launch(x, s));
}

FC_API cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_launch("cudaGraphLaunch", 0, x, h);
}

FC_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_launch("cudaGraphLaunch_ptsz", 1, x, h);
}

FC_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	RT_ENTER("cudaGraphExecDestroy");
	return fc_rt_reti(fc_graph_exec_destroy(x));
}

FC_API cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	RT_ENTER("cudaGraphDestroy");
	return fc_rt_reti(fc_graph_destroy(g));
}

/* ---- capture modes, capture into a graph, explicit graphs, upload, update ---- */

static cudaError_t graph_upload(const char *name, int ptsz, cudaGraphExec_t x, cudaStream_t h)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (fc_graph_exec_check(x))
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_stream_nop(s));
}

FC_API cudaError_t cudaGraphUpload(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_upload("cudaGraphUpload", 0, x, h);
}

FC_API cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t x, cudaStream_t h)
{
	return graph_upload("cudaGraphUpload_ptsz", 1, x, h);
}

FC_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	struct fc_tls *t;
	enum cudaStreamCaptureMode old;

	RT_ENTER("cudaThreadExchangeStreamCaptureMode");
	if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
		return fc_rt_ret(cudaErrorInvalidValue);
	t = fc_tls_get();
	old = t->capture_mode;
	t->capture_mode = *mode;
	*mode = old;
	return cudaSuccess;
}

static cudaError_t capture_to_graph(const char *name, int ptsz, cudaStream_t h, cudaGraph_t g,
				    const cudaGraphNode_t *deps, size_t ndeps,
				    enum cudaStreamCaptureMode mode)
{
	struct CUstream_st *s;

	RT_ENTER(name);
	RT_STREAM(h, ptsz, s);
	if (!g || (ndeps && !deps) || (unsigned)mode > cudaStreamCaptureModeRelaxed)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_capture_begin(s, g));
}

FC_API cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t h, cudaGraph_t g, const cudaGraphNode_t *deps,
						 const cudaGraphEdgeData *edges, size_t ndeps,
						 enum cudaStreamCaptureMode mode)
{
	(void)edges;
	return capture_to_graph("cudaStreamBeginCaptureToGraph", 0, h, g, deps, ndeps, mode);
}

FC_API cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t h, cudaGraph_t g,
						      const cudaGraphNode_t *deps,
						      const cudaGraphEdgeData *edges, size_t ndeps,
						      enum cudaStreamCaptureMode mode)
{
	(void)edges;
	return capture_to_graph("cudaStreamBeginCaptureToGraph_ptsz", 1, h, g, deps, ndeps, mode);
}

FC_API cudaError_t cudaGraphCreate(cudaGraph_t *g, unsigned int flags)
{
	RT_ENTER("cudaGraphCreate");
	if (!g || flags)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_graph_create(g));
}

FC_API cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *node, cudaGraph_t g,
					    const cudaGraphNode_t *deps, size_t ndeps, void *dst,
					    const void *src, size_t count, enum cudaMemcpyKind kind)
{
	RT_ENTER("cudaGraphAddMemcpyNode1D");
	return fc_rt_reti(fc_graph_add_copy(g, deps, ndeps, dst, src, count, (int)kind, node));
}

FC_API cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *node, cudaGraph_t g,
					  const cudaGraphNode_t *deps, size_t ndeps,
					  const struct cudaMemsetParams *p)
{
	RT_ENTER("cudaGraphAddMemsetNode");
	if (!p)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_graph_add_memset(g, deps, ndeps, p->dst, p->pitch, p->value,
					   p->elementSize, p->width, p->height, node));
}

FC_API cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *node, cudaGraph_t g,
					const cudaGraphNode_t *deps, size_t ndeps,
					const struct cudaHostNodeParams *p)
{
	RT_ENTER("cudaGraphAddHostNode");
	if (!p || !p->fn)
		return fc_rt_ret(cudaErrorInvalidValue);
	return fc_rt_reti(fc_graph_add_host(g, deps, ndeps, p->fn, p->userData, node));
}

FC_API cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *node, cudaGraph_t g,
					 const cudaGraphNode_t *deps, size_t ndeps)
{
	RT_ENTER("cudaGraphAddEmptyNode");
	return fc_rt_reti(fc_graph_add_host(g, deps, ndeps, NULL, NULL, node));
}

FC_API cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *num)
{
	RT_ENTER("cudaGraphGetNodes");
	return fc_rt_reti(fc_graph_nodes(g, nodes, num));
}

FC_API cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type)
{
	int t;

	RT_ENTER("cudaGraphNodeGetType");
	t = fc_graph_node_type(node);
	if (!type || t < 0)
		return fc_rt_ret(cudaErrorInvalidValue);
	*type = (enum cudaGraphNodeType)t;
	return cudaSuccess;
}

FC_API cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g,
				       cudaGraphExecUpdateResultInfo *info)
{
	enum cudaGraphExecUpdateResult r;
	struct CUgraphNode_st *errnode;
	int err;

	RT_ENTER("cudaGraphExecUpdate");
	if (!info)
		return fc_rt_ret(cudaErrorInvalidValue);
	err = fc_graph_exec_update(x, g, &r, &errnode);
	info->result = err == -EBADF ? cudaGraphExecUpdateError : r;
	info->errorNode = errnode;
	info->errorFromNode = NULL;
	return fc_rt_reti(err == -EBADF ? -EINVAL : err);
}
