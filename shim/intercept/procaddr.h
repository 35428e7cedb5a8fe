/*
 * procaddr: the driver entry-point route, and the shim's wrappers as they
 * are handed out at run time. Internal to the interception layer.
 *
 * Programs that look driver functions up at run time get the shim's
 * wrapper in place of the real function for every row of entries.h:
 *   cuGetProcAddress, cuGetProcAddress_v2 (a statically linked runtime,
 *     TensorFlow, JAX): unless the caller is a CUDA runtime, whose own
 *     entry points are interposed already;
 *   cudaGetDriverEntryPoint, _ptsz, ByVersion, ByVersion_ptsz.
 * Everything else the driver hands out passes unchanged. Each of these
 * hooks marks the process as a CUDA user (vp_enter: a statically linked
 * runtime looks the driver up this way at its first call of any kind,
 * cudaSetDevice included), makes one call to the real look-up and, when
 * it succeeded,
 * swaps the pointer it found for the wrapper of the row whose real
 * function it is (or, for a driver that hands out internal addresses, of
 * the row its name, version and flags spell); errno is preserved.
 *
 * The dynamic-linker route (dlsym.h) hands out the same wrappers by name
 * (vp_wrapper_named). This file holds the wrapper of each row because the
 * look-up hooks are rows themselves: the table and the hooks it names
 * stay in one object, and no file of this layer calls back into another
 * that calls it.
 */
#ifndef VRAMPOOL_PROCADDR_H
#define VRAMPOOL_PROCADDR_H

#include "intercept/table.h"

/* The shim's wrapper for the row of entries.h named name, or NULL. */
void *vp_wrapper_named(const char *name) VP_HIDDEN;

/* Returns nonzero when the code at addr belongs to an object whose file name starts with prefix. */
int vp_code_in(const void *addr, const char *prefix) VP_HIDDEN;

/* Returns nonzero when the code at addr belongs to a CUDA runtime (libcudart*). */
int vp_is_runtime_code(const void *addr) VP_HIDDEN;

#endif
