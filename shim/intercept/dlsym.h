/*
 * dlsym: the dynamic-linker route. Internal to the interception layer.
 *
 * dlsym and dlvsym are exported so that a program looking an interposed
 * function up on an explicit handle (dlopen("libcuda.so.1") then
 * dlsym(h, "cuGetProcAddress_v2"): a statically linked runtime; ctypes)
 * gets the shim's wrapper: when the name is a row of entries.h, the
 * function found lies in the CUDA runtime or driver (a library of another
 * name that exports a function of the same name is its own business), and
 * the caller is not a CUDA runtime (whose own entry points are interposed
 * already). errno is preserved.
 *
 * Look-ups on RTLD_DEFAULT and RTLD_NEXT depend on who calls (the next
 * object after the caller), so those are handed to the C library's own
 * function by a tail jump that keeps the caller's return address: the shim
 * is invisible to them (and its exports are found there in the usual
 * preload order anyway). The jump is written in assembly, x86-64 and
 * aarch64 (no other architecture builds). Every look-up the shim makes for
 * itself goes through core/dlreal.h, never through these exports.
 */
#ifndef VRAMPOOL_DLSYM_H
#define VRAMPOOL_DLSYM_H

#include "intercept/table.h"

/*
 * Finds the C library's dlsym and dlvsym for the trampolines (the
 * constructor calls it first; a look-up made before the constructor ran,
 * from another library's constructor, calls it itself). Returns the real
 * dlsym, or NULL: the trampolines then answer NULL. Keeps errno.
 */
void *vp_dl_init_real(void) VP_HIDDEN;

#endif
