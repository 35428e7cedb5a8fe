/*
 * inspect_verdict.c: one file's verdict from its facts (inspect_verdict.h
 * states the rules), and how a file is known to be NVIDIA's.
 */
#include <elf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_verdict.h"

/* Library names NVIDIA ships (the toolkit, cuDNN, NCCL, the driver). */
static const char *const vendor_prefixes[] = {
	"libcublas", "libcudart", "libcufft", "libcurand", "libcusolver", "libcusparse",
	"libcudnn", "libnccl", "libnvrtc", "libnvJitLink", "libnvblas", "libnvjpeg",
	"libnpp", "libcupti", "libnvperf", "libnvToolsExt", "libnvtx3interop", "libnvvm",
	"libcheckpoint", "libpcsamplingutil", "libcuda.", "libcufile", "libnvidia-",
	"libcutensor", "libcudss", "libnvshmem", "libnvfatbin", "libnvptxcompiler",
};

/* The last component of PATH. */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Whether REAL (a real path) lies in the CUDA toolkit at $CUDA_HOME. */
static bool in_cuda_home(const char *real)
{
	const char *home = getenv("CUDA_HOME");
	char root[PATH_MAX];
	size_t n;

	if (!home || !*home || !realpath(home, root))
		return false;
	n = strlen(root);
	return n > 1 && strncmp(real, root, n) == 0 && real[n] == '/';
}

/* Whether PATH (with facts F) is a library NVIDIA ships. */
static bool vendor_file(const char *path, const struct elf_facts *f)
{
	const char *names[2] = { f->soname, base_name(path) };
	char real[PATH_MAX];
	size_t i, k;

	for (k = 0; k < 2; k++)
		for (i = 0; i < sizeof(vendor_prefixes) / sizeof(vendor_prefixes[0]); i++)
			if (names[k][0] && strncmp(names[k], vendor_prefixes[i],
						   strlen(vendor_prefixes[i])) == 0)
				return true;
	if (!realpath(path, real))
		return false;
	return strncmp(real, "/usr/local/cuda", 15) == 0 || strstr(real, "/site-packages/nvidia/") ||
	       in_cuda_home(real);
}

/* Whether PATH lies in a directory called "stubs" (the toolkit's link-time stubs). */
static bool stub_file(const char *path)
{
	char real[PATH_MAX];
	const char *p = realpath(path, real) ? real : path;
	const char *slash = strrchr(p, '/');

	if (!slash || slash == p)
		return false;
	return slash - p >= 6 && strncmp(slash - 6, "/stubs", 6) == 0;
}

/* Draws the verdict on one file from its facts, with the reason in V->why. */
void file_verdict_decide(struct file_verdict *v, const char *path, const struct elf_facts *f)
{
	bool entry = f->imports_dlsym;

	memset(v, 0, sizeof(*v));
	v->vendor = vendor_file(path, f);
	v->program = f->interp || f->type == ET_EXEC;
	if (f->runtime_copies[0]) {
		v->verdict = INSPECT_SEEN;
		snprintf(v->why, sizeof(v->why), "seen: imports %s from the shared CUDA runtime%s%s%s",
			 f->runtime_copies, f->driver_copies[0] ? " and " : "", f->driver_copies,
			 f->driver_copies[0] ? " from the CUDA driver" : "");
	} else if (f->defines_runtime) {
		v->verdict = INSPECT_PROVIDER;
		snprintf(v->why, sizeof(v->why),
			 "provides the CUDA runtime API itself (libcudart, or a library that interposes it)");
	} else if (f->defines_driver) {
		v->verdict = INSPECT_DRIVER;
		if (stub_file(path))
			snprintf(v->why, sizeof(v->why),
				 "the CUDA driver (a stub): defines the driver API for linking only; at run time the NVIDIA driver's libcuda.so.1 is loaded instead");
		else
			snprintf(v->why, sizeof(v->why), "the CUDA driver: defines the driver API");
	} else if (f->driver_copies[0]) {
		v->verdict = INSPECT_SEEN_DRIVER;
		snprintf(v->why, sizeof(v->why), "seen: imports %s from the CUDA driver",
			 f->driver_copies);
	} else if (f->static_evidence[0] && !f->dynamic && f->type == ET_EXEC) {
		v->verdict = INSPECT_UNREACHABLE;
		snprintf(v->why, sizeof(v->why),
			 "not seen: statically linked (no dynamic linker runs in it, so nothing is preloaded), with the CUDA runtime inside (%s)",
			 f->static_evidence);
	} else if (v->vendor && !v->program && (f->static_evidence[0] ||
						 (f->names_driver && f->imports_dlopen && entry))) {
		v->verdict = INSPECT_VENDOR;
		if (f->static_evidence[0])
			snprintf(v->why, sizeof(v->why),
				 "not seen (its own copies): an NVIDIA library that carries its own CUDA runtime (static runtime: %s%s) over NVIDIA's private interfaces; copies it makes inside itself are not seen",
				 f->static_evidence, f->has_symtab ? "" : ", stripped");
		else
			snprintf(v->why, sizeof(v->why),
				 "not seen (its own copies): an NVIDIA library that loads the CUDA driver itself (dlopen of libcuda.so.1, then dlsym) and uses NVIDIA's private interfaces; copies it makes inside itself are not seen");
	} else if (f->static_evidence[0] && entry) {
		v->verdict = INSPECT_SEEN_ENTRY;
		snprintf(v->why, sizeof(v->why),
			 "seen (through the driver entry points): carries the CUDA runtime inside itself (static runtime: %s%s), which takes the driver's functions with dlsym and cuGetProcAddress",
			 f->static_evidence, f->has_symtab ? "" : ", stripped");
	} else if (f->static_evidence[0]) {
		v->verdict = INSPECT_STATIC;
		snprintf(v->why, sizeof(v->why),
			 "not seen: carries the CUDA runtime inside itself (static runtime: %s%s) and imports no dlsym to reach the driver's entry points",
			 f->static_evidence, f->has_symtab ? "" : ", stripped");
	} else if (f->names_driver && f->imports_dlopen && entry) {
		v->verdict = INSPECT_SEEN_ENTRY;
		snprintf(v->why, sizeof(v->why),
			 "seen (through the driver entry points): loads the CUDA driver itself (dlopen of libcuda.so.1, then dlsym)");
	} else if (f->runtime_imports || f->driver_imports) {
		v->verdict = INSPECT_OTHER;
		snprintf(v->why, sizeof(v->why),
			 "uses the CUDA %s API but imports no copy that vrampool interposes%s%s%s",
			 f->runtime_imports ? "runtime" : "driver",
			 f->other_copies[0] ? " (only " : "", f->other_copies,
			 f->other_copies[0] ? ")" : "");
	} else {
		v->verdict = INSPECT_NONE;
		snprintf(v->why, sizeof(v->why), "no CUDA use%s",
			 f->device_code ? " found, though it holds device code" : "");
	}
}

