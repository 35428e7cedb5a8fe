/*
 * inspect_verdict: the verdict `vrampool inspect` draws on one file from
 * its ELF facts (elf_facts.h) and its place: whether the preloaded library
 * will see the host-to-device copies the file makes, and by which route.
 * inspect.c walks the files and folds these verdicts into one per file
 * named on the command line; nothing here opens or prints anything.
 *
 * The rules, in order (the first that applies decides):
 *  - imports interposed copies from the shared runtime: seen;
 *  - defines the runtime API (libcudart, an interposer): the runtime;
 *  - defines the driver API (libcuda.so.1, a stub in stubs/): the driver;
 *  - imports interposed driver copies (cuMemcpyHtoD*, ...): seen;
 *  - a statically linked executable with a runtime inside: not seen;
 *  - a library NVIDIA ships (by name, or under the CUDA toolkit: the
 *    default /usr/local/cuda, $CUDA_HOME, site-packages/nvidia) that
 *    carries its own runtime or loads the driver itself: its own copies
 *    are not seen (the README's "What the shim does not touch": cuBLAS and
 *    cuDNN internals, which use NVIDIA's private interfaces underneath);
 *  - a runtime inside with dlsym imported, or dlopen("libcuda.so.1") with
 *    dlsym: seen through the driver entry points (nvcc's static runtime);
 *  - a runtime inside with no dlsym: not seen;
 *  - other CUDA imports: uses CUDA, no interposed copy; else no CUDA use.
 */
#ifndef VRAMPOOL_INSPECT_VERDICT_H
#define VRAMPOOL_INSPECT_VERDICT_H

#include <stdbool.h>

#include "elf_facts.h"
#include "vrampool.h"

/* What one file is, and the verdict drawn from its facts. */
struct file_verdict {
	enum inspect_verdict verdict;
	bool vendor;			/* a library NVIDIA ships */
	bool program;			/* an executable (started by ld.so, or static) */
	char why[768];
};


/*
 * Draws the verdict on the file at PATH from its facts F into V, with the
 * reason in V->why (not escaped: the caller escapes what it prints).
 */
void file_verdict_decide(struct file_verdict *v, const char *path, const struct elf_facts *f);

#endif
