// kernel.cu: the one CUDA source of the inspect tests: one kernel and one
// cudaMemcpyAsync, built with nvcc's default static runtime and with
// -cudart shared.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void inc(unsigned char *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i]++;
}

int main(void)
{
	unsigned char h[256] = {0}, *d = NULL;

	if (cudaMalloc((void **)&d, sizeof h) != cudaSuccess)
		return 3;
	cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, 0);
	inc<<<1, 256>>>(d, 256);
	cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
	cudaFree(d);
	printf("%d\n", h[0]);
	return 0;
}
