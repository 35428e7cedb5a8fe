/*
 * copy: the copy hooks. Internal to the interception layer; what it
 * exports are the copy rows of entries.h themselves:
 *
 *   runtime   cudaMemcpy, cudaMemcpyAsync, cudaMemcpy2D, cudaMemcpy2DAsync,
 *             cudaMemcpyToSymbol, cudaMemcpyToSymbolAsync,
 *             cudaMemcpyBatchAsync (each also _ptds or _ptsz);
 *   driver    cuMemcpyHtoD_v2, cuMemcpyHtoDAsync_v2, cuMemcpy, cuMemcpyAsync,
 *             cuMemcpy2D_v2, cuMemcpy2DUnaligned_v2, cuMemcpy2DAsync_v2,
 *             cuMemcpyBatchAsync_v2 (each also _ptds or _ptsz).
 *
 * Each hook describes the call (struct copy_call or copy_batch, with
 * callbacks that reach the real functions) and makes one call down into
 * the pool layer (pool/calls.h), which decides its fate:
 *   - calls_copy: every contiguous copy, 2D copies whose pitches equal
 *     their width (or of one row) included;
 *   - calls_copy_unpooled: 2D copies with other pitches, copies to a
 *     module variable (counted when host-to-device, never pooled);
 *   - calls_copy_batch: the program's own batches (each host-to-device
 *     entry counted, the batch forwarded as it is).
 * A copy whose shape cannot be described (no 2D parameters, a size that
 * overflows, a driver 2D copy that is not host-to-device) is forwarded
 * unchanged without a look.
 *
 * The re-entry guard is set around that one call down; a hook reached
 * while it is set forwards the call unchanged, and its forward keeps the
 * caller's guard. errno is preserved. The callbacks are the only place
 * that knows which real entry point serves a copy: the program's own for
 * forwarding, and its plain host-to-device form (asynchronous or
 * synchronous, per-thread or not, runtime or driver) for the pool's
 * deliveries.
 */
#ifndef VRAMPOOL_COPY_H
#define VRAMPOOL_COPY_H

#include "intercept/table.h"
#include "pool/calls.h"

#endif
