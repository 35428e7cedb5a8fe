/*
 * alloc: the allocation hooks. Internal to the interception layer; what
 * it exports are the rows of VP_ALLOCATORS (entries.h) themselves, one
 * hook generated from each row: cudaMalloc, cudaMallocAsync,
 * cudaMallocManaged, cudaMallocPitch, cudaMallocFromPoolAsync,
 * cuMemAlloc_v2, cuMemAllocAsync, cuMemAllocManaged, cuMemAllocPitch_v2,
 * cuMemAllocFromPoolAsync (the asynchronous ones also _ptsz) and
 * cuMemCreate.
 *
 * Every hook makes the real call and asks the pool layer whether to make
 * it again (pool/calls.h, calls_alloc_again: on out-of-memory the pool
 * gives memory back and the call is retried), so the program's allocation
 * fails only when it would have failed without the shim. The answer is
 * the last attempt's. Under the re-entry guard a hook is the real call
 * alone; otherwise the guard is set across the attempts. errno is
 * preserved. For a runtime row, the runtime's last error left by a failed
 * attempt is cleared through cudaGetLastError (the callback the row hands
 * down), so the program never sees an error it did not get.
 */
#ifndef VRAMPOOL_ALLOC_H
#define VRAMPOOL_ALLOC_H

#include "intercept/table.h"
#include "pool/calls.h"

#endif
