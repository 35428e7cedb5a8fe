/*
 * hostwork: the hooks of the program's work the pool must know of without
 * taking part in it. Internal to the interception layer; what it exports
 * are the rows of VP_HOSTWORK (entries.h), one hook generated from each:
 * cudaLaunchHostFunc, cudaStreamAddCallback, cudaStreamBeginCapture,
 * cudaStreamBeginCaptureToGraph, cudaGraphLaunch,
 * cudaGraphInstantiateWithParams (each also _ptsz), cudaGraphInstantiate,
 * cudaGraphInstantiateWithFlags, cudaGraphExecUpdate, cudaGraphDestroy,
 * cudaGraphExecDestroy; cuLaunchHostFunc, cuStreamAddCallback,
 * cuMemcpyDtoHAsync_v2, cuStreamBeginCapture_v2,
 * cuStreamBeginCaptureToGraph, cuGraphLaunch, cuGraphInstantiateWithParams
 * (each also _ptsz), cuGraphInstantiateWithFlags, cuGraphExecUpdate_v2,
 * cuGraphDestroy, cuGraphExecDestroy.
 *
 * Every hook makes the real call and, when it succeeded, tells the pool
 * layer what happened (its row's after: pool/calls.h): stream work that
 * may write host memory (calls_host_work: rows of a pinned source are not
 * served behind it while it may still run, pool/hazard.h), a graph launch
 * (calls_graph_launch: also the bytes of its captured copies,
 * pool/graphs.h), a capture begun, an executable made or updated from a
 * graph, a handle destroyed. Under the re-entry guard a hook is the real call alone.
 * errno is preserved.
 */
#ifndef VRAMPOOL_HOSTWORK_H
#define VRAMPOOL_HOSTWORK_H

#include "intercept/table.h"
#include "pool/calls.h"

#endif
