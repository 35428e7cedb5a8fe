/*
 * badcalls: calls a careless or hostile program makes, for an A/B test.
 *
 * Each case prints one line "case NAME -> ERRORNAME" (and the last error
 * afterwards where it matters). Run without and with the shim preloaded
 * (with a layout that matches every copy here), the output must be
 * identical: the shim neither crashes on bad input nor changes an error.
 * The last case fills the pool, then asks for nearly all free device memory:
 * with the shim it must succeed after eviction and leave no error behind,
 * as it does without the shim (where the memory is free anyway).
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW 4096

static void report(const char *name, cudaError_t e)
{
	printf("case %-34s -> %s\n", name, cudaGetErrorName(e));
}

int main(void)
{
	unsigned char *pinned, *pageable;
	void *dev, *dev2, *big = NULL;
	size_t free_b = 0, total_b = 0;
	cudaStream_t s;
	cudaError_t e;

	if (cudaHostAlloc((void **)&pinned, 64 * ROW, cudaHostAllocDefault) ||
	    cudaMalloc(&dev, 64 * ROW) || cudaMalloc(&dev2, 64 * ROW) ||
	    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))
		return 3;
	pageable = malloc(64 * ROW);
	if (!pageable)
		return 3;
	memset(pinned, 5, 64 * ROW);
	memset(pageable, 6, 64 * ROW);

	report("null source", cudaMemcpyAsync(dev, NULL, 4 * ROW, cudaMemcpyHostToDevice, s));
	report("last error after null source", cudaGetLastError());
	report("device source with kind host-to-device",
	       cudaMemcpyAsync(dev, dev2, 4 * ROW, cudaMemcpyHostToDevice, s));
	report("last error", cudaGetLastError());
	report("host destination with kind host-to-device",
	       cudaMemcpyAsync(pageable, pinned, 4 * ROW, cudaMemcpyHostToDevice, s));
	report("last error", cudaGetLastError());
	report("past the end of the destination",
	       cudaMemcpyAsync(dev, pinned, 64 * ROW, cudaMemcpyHostToDevice, s) == cudaSuccess ?
	       cudaMemcpyAsync((char *)dev + ROW, pinned, 64 * ROW, cudaMemcpyHostToDevice, s) : cudaErrorUnknown);
	report("last error", cudaGetLastError());
	report("zero bytes", cudaMemcpyAsync(dev, pinned, 0, cudaMemcpyHostToDevice, s));
	report("stream sync after the errors", cudaStreamSynchronize(s));

	/* Fill the pool (same rows, several times), then ask for most of what is free. */
	for (int i = 0; i < 6; i++) {
		memset(pinned, i, 64 * ROW);
		for (int k = 0; k < 4; k++)
			if ((e = cudaMemcpyAsync(dev, pinned, 64 * ROW, cudaMemcpyHostToDevice, s)))
				report("fill", e);
		cudaStreamSynchronize(s);
	}
	/* All but the program's own two buffers and 64 KiB: it fits only if
	 * nothing else (a pool) holds device memory. */
	cudaMemGetInfo(&free_b, &total_b);
	(void)free_b;
	e = cudaMalloc(&big, total_b - 2 * 64 * ROW - 65536);
	report("most of the device after filling", e);
	report("last error after that", cudaGetLastError());
	if (big)
		cudaFree(big);
	report("final sync", cudaDeviceSynchronize());
	return 0;
}
