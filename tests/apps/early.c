/*
 * early: a CUDA program that ends before its first host-to-device copy or
 * allocation, after CUDA calls the shim does not hook, as
 * tests/e2e/report.sh runs it: the shim must still leave its summary and
 * dump, at exit and when a signal ends it.
 *
 * Usage: early MODE END. MODE is the one CUDA call it makes: setdevice
 * (cudaSetDevice), hostalloc (cudaHostAlloc), stream (cudaStreamCreate),
 * getproc (the driver reached as a statically linked runtime reaches it:
 * dlopen of libcuda.so.1, cuGetProcAddress_v2 taken with dlsym, cuInit
 * through it) or none. END is exit (exit status 7) or wait (prints
 * "ready", then waits for a signal).
 *
 * Built twice: build/apps/early is linked against libcudart (the runtime
 * is in the process from its start); build/apps/early_drv, with
 * EARLY_UNLINKED, against neither libcudart nor libcuda, knows only
 * getproc and none.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef EARLY_UNLINKED
#include <cuda_runtime_api.h>
#endif

typedef CUresult early_getproc_fn(const char *symbol, void **pfn, int version, cuuint64_t flags,
				  CUdriverProcAddressQueryResult *status);
typedef CUresult early_init_fn(unsigned int flags);

/* cuInit through cuGetProcAddress_v2, found with dlsym on libcuda.so.1. Returns 0 or 3. */
static int early_getproc(void)
{
	CUdriverProcAddressQueryResult q;
	early_getproc_fn *gpa;
	early_init_fn *init = NULL;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		fprintf(stderr, "early: %s\n", dlerror());
		return 3;
	}
	*(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
	if (!gpa || gpa("cuInit", (void **)&init, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||
	    !init || init(0) != CUDA_SUCCESS) {
		fprintf(stderr, "early: cuInit through cuGetProcAddress_v2 failed\n");
		return 3;
	}
	return 0;
}

/* The one CUDA call of MODE. Returns 0, 2 for an unknown mode, 3 for a CUDA error. */
static int early_call(const char *mode)
{
#ifndef EARLY_UNLINKED
	cudaStream_t s;
	void *p;

	if (strcmp(mode, "setdevice") == 0)
		return cudaSetDevice(0) == cudaSuccess ? 0 : 3;
	if (strcmp(mode, "hostalloc") == 0)
		return cudaHostAlloc(&p, 1 << 20, cudaHostAllocDefault) == cudaSuccess ? 0 : 3;
	if (strcmp(mode, "stream") == 0)
		return cudaStreamCreate(&s) == cudaSuccess ? 0 : 3;
#endif
	if (strcmp(mode, "getproc") == 0)
		return early_getproc();
	if (strcmp(mode, "none") == 0)
		return 0;
	fprintf(stderr, "early: unknown mode %s\n", mode);
	return 2;
}

int main(int argc, char **argv)
{
	int rc;

	if (argc != 3 || (strcmp(argv[2], "exit") != 0 && strcmp(argv[2], "wait") != 0)) {
		fprintf(stderr, "usage: early MODE exit|wait\n");
		return 2;
	}
	rc = early_call(argv[1]);
	if (rc != 0)
		return rc;
	if (strcmp(argv[2], "exit") == 0)
		return 7;
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
