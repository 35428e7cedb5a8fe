/*
 * plain.c: host-only CUDA programs for the inspect tests, chosen by macros:
 * PLAIN_RUNTIME copies with cudaMemcpy (built with -lcudart and with
 * -lcudart_static), PLAIN_DRIVER copies with the driver API only, PLAIN_LIB
 * is a shared object that copies (loaded through RUNPATH/RPATH by a main
 * program built without PLAIN_*), and nothing at all without any of them.
 */
#if defined(PLAIN_RUNTIME) || defined(PLAIN_LIB)
#include <cuda_runtime_api.h>
#elif defined(PLAIN_DRIVER)
#include <cuda.h>
#endif
#include <stdio.h>

#ifdef PLAIN_LIB
int plain_copy(void *dev, const void *host, unsigned long n);

/* Copies n bytes to the device through the shared runtime. */
int plain_copy(void *dev, const void *host, unsigned long n)
{
	return (int)cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, 0);
}
#else
#ifdef PLAIN_USES_LIB
int plain_copy(void *dev, const void *host, unsigned long n);
#endif

int main(void)
{
	static char host[64];
#if defined(PLAIN_RUNTIME)
	void *dev = NULL;

	if (cudaMalloc(&dev, sizeof(host)) != cudaSuccess)
		return 3;
	return cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice) != cudaSuccess;
#elif defined(PLAIN_DRIVER)
	CUdeviceptr dev;

	if (cuInit(0) != CUDA_SUCCESS || cuMemAlloc(&dev, sizeof(host)) != CUDA_SUCCESS)
		return 3;
	return cuMemcpyHtoD(dev, host, sizeof(host)) != CUDA_SUCCESS;
#elif defined(PLAIN_USES_LIB)
	return plain_copy(NULL, host, sizeof(host));
#else
	puts(host);
	return 0;
#endif
}
#endif
