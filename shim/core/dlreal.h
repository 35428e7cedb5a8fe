/*
 * dlreal: the dynamic linker's own dlsym and dlvsym, for the shim's own
 * look-ups, found without calling either.
 *
 * The shim exports dlsym and dlvsym (intercept/dlsym.c) to hand its wrappers to
 * programs that reach CUDA through explicit library handles. Inside the
 * shim, a call to dlsym would then reach the shim's own export; so every
 * look-up the shim makes for itself (the real CUDA entry points, the
 * driver functions of device.c) goes through dlreal_sym, which calls the C
 * library's dlsym found by reading the dynamic symbol table of the loaded
 * C library (libc.so.6, or libdl.so.2 before glibc 2.34) directly.
 *
 * The shim exports sigaction, signal and their kin too (its signal hooks); the
 * report's own signal work calls the C library's sigaction through
 * dlreal_sigaction, never the exported hook.
 */
#ifndef VRAMPOOL_DLREAL_H
#define VRAMPOOL_DLREAL_H

#include <signal.h>

/* Finds the real functions once (thread-safe). Returns 0 or -ENOENT (no dlsym). */
int dlreal_init(void);

/* The C library's dlsym(handle, name), or NULL when it cannot be found. */
void *dlreal_sym(void *handle, const char *name);

/* The C library's dlvsym(handle, name, version), or NULL. */
void *dlreal_vsym(void *handle, const char *name, const char *version);

/*
 * The C library's sigaction(2). Returns its result, or -1 with errno
 * ENOSYS when it cannot be found. Async-signal-safe once dlreal_init ran.
 */
int dlreal_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact);

/* The C library's dlsym itself (for the intercept layer's trampolines), or NULL. */
void *dlreal_dlsym_fn(void);
void *dlreal_dlvsym_fn(void);

#endif
