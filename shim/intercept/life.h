/*
 * life: the shim's process life cycle (STYLE.md 10, 11). Internal to the
 * interception layer; nothing here is called by another file: it runs by
 * itself.
 *
 * - At load (a constructor, priority 101): finds the C library's dlsym and
 *   dlvsym for the trampolines (dlsym.h), reads the configuration once
 *   (config_load_secure: malformed values print their line now; path
 *   variables through secure_getenv), hands it to the pool layer
 *   (calls_setup) and the report (report_setup), and installs the fork
 *   and exit handlers. No CUDA call and no resolution of CUDA functions:
 *   the runtime may not be loaded yet (Python loads it long after start).
 *   When the CUDA runtime or driver is mapped already (the program is
 *   linked against it), the process is a CUDA user from here on
 *   (vp_mark_cuda: the reporter and the signal handlers start now), so a
 *   program that ends, or is ended by a signal, after CUDA calls the shim
 *   does not hook (cudaSetDevice, cudaHostAlloc, cudaStreamCreate) still
 *   leaves its summary and dump. A process that loads CUDA later becomes
 *   one at its first hooked call (table.h); one that never does (a shell
 *   on the way to the program) stays silent.
 * - In a forked child, which cannot use its parent's CUDA context: clears
 *   the re-entry guard, then calls_atfork_child (empty pools, zeroed
 *   counters) and report_atfork_child (it reports only if it uses CUDA
 *   itself).
 * - At exit: report_exit, once, with no CUDA call.
 *
 * The configuration lives here, for the rest of the process.
 */
#ifndef VRAMPOOL_LIFE_H
#define VRAMPOOL_LIFE_H

#include "intercept/table.h"

#endif
