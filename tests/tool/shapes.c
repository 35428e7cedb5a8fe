/*
 * shapes.c: small files with the shapes that vrampool inspect met in the
 * CUDA toolkit, built by tests/e2e/tool_inspect.sh and tool_run.sh with gcc
 * alone (no CUDA needed), one macro each:
 *
 *   SHAPE_LRODATA      a library that dlopens "libcuda.so.1" and takes
 *                      cuGetProcAddress_v2 with dlsym, the name kept in
 *                      .lrodata (as libcufft.so does): seen through the
 *                      driver entry points
 *   SHAPE_HEADER_TEXT  a library that embeds CUDA header text naming
 *                      cudaErrorMemoryAllocation (as libnvrtc-builtins
 *                      does): strings are not a runtime, no CUDA use
 *   SHAPE_DRIVER       a library that defines the driver API (cuInit,
 *                      cuGetProcAddress_v2, cuMemcpyHtoD_v2), as
 *                      stubs/libcuda.so does: the CUDA driver
 *   SHAPE_STATIC_NODL  a runtime carried inside (cudaGetErrorString
 *                      defined, hidden) with no dlsym import: not seen;
 *                      built as a program and as a library
 *   SHAPE_STATIC_EXE   the same, linked with -static: no dynamic linker
 *   SHAPE_DRIVER_DLOPEN a program that dlopens libcuda.so.1 and copies
 *                      through cuGetProcAddress_v2 (a static runtime's
 *                      route, made by hand)
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if defined(SHAPE_LRODATA) || defined(SHAPE_DRIVER_DLOPEN)
#include <dlfcn.h>

__attribute__((section(".lrodata"))) const char shape_driver_name[] = "libcuda.so.1";

int shape_reach_driver(void);

/* Reaches the driver's entry points as a static runtime does. */
int shape_reach_driver(void)
{
	void *h = dlopen(shape_driver_name, RTLD_NOW | RTLD_LOCAL);
	void *gpa;

	if (!h)
		return -1;
	gpa = dlsym(h, "cuGetProcAddress_v2");
	return gpa ? 0 : -1;
}
#endif

#ifdef SHAPE_HEADER_TEXT
/* A header as libnvrtc-builtins embeds them: text, not a table of names. */
const char shape_header[] =
	"enum cudaError {\n"
	"cudaSuccess = 0,\n"
	"cudaErrorInvalidValue = 1,\n"
	"cudaErrorMemoryAllocation = 2,\n"
	"};\n";

const char *shape_header_text(void);

const char *shape_header_text(void)
{
	return shape_header;
}
#endif

#ifdef SHAPE_DRIVER
/* The driver API as a link-time stub defines it: every call fails. */
int cuInit(unsigned flags);
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
			int *status);
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n);

int cuInit(unsigned flags)
{
	(void)flags;
	return 34;	/* CUDA_ERROR_STUB_LIBRARY */
}

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
			int *status)
{
	(void)symbol, (void)version, (void)flags, (void)status;
	*pfn = NULL;
	return 34;
}

int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n)
{
	(void)dst, (void)src, (void)n;
	return 34;
}
#endif

#if defined(SHAPE_STATIC_NODL) || defined(SHAPE_STATIC_EXE)
const char *cudaGetErrorString(int err);

/* A runtime of its own, reached by no dynamic symbol: only .symtab names it. */
__attribute__((visibility("hidden"))) const char *cudaGetErrorString(int err)
{
	return err ? "cudaErrorMemoryAllocation" : "cudaSuccess";
}

int shape_static_use(int err);

int shape_static_use(int err)
{
	return (int)strlen(cudaGetErrorString(err));
}
#endif

#ifdef SHAPE_MAIN
int main(void)
{
#if defined(SHAPE_STATIC_NODL) || defined(SHAPE_STATIC_EXE)
	printf("%d\n", shape_static_use(2));
#elif defined(SHAPE_DRIVER_DLOPEN)
	printf("%d\n", shape_reach_driver());
#endif
	return 0;
}
#endif
