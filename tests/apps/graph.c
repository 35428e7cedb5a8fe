/*
 * graph: a host-to-device copy captured into a CUDA graph and replayed.
 *
 * A captured copy reads its pinned source at replay, not at capture: the
 * program changes the source between replays and checks that each replay
 * delivers the bytes present at that replay. A shim that served the
 * captured copy from a cache keyed at capture time would deliver stale
 * bytes here. Rows are ROW bytes; the copy is ROWS rows. Exit 0 when every
 * replay verifies, 1 on a mismatch, 3 on a CUDA error.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW 3072
#define ROWS 8
#define REPLAYS 4

#define CHECK(call)                                                                  \
	do {                                                                         \
		cudaError_t e_ = (call);                                             \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "graph: %s: %s\n", #call, cudaGetErrorName(e_)); \
			return 3;                                                    \
		}                                                                    \
	} while (0)

int main(void)
{
	unsigned char *src, *back;
	void *dst;
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;

	CHECK(cudaHostAlloc((void **)&src, ROW * ROWS, cudaHostAllocDefault));
	back = malloc(ROW * ROWS);
	if (!back)
		return 3;
	CHECK(cudaMalloc(&dst, ROW * ROWS));
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	/* The same bytes copied eagerly first, so a pool would hold them. */
	memset(src, 0x11, ROW * ROWS);
	for (int i = 0; i < 4; i++)
		CHECK(cudaMemcpyAsync(dst, src, ROW * ROWS, cudaMemcpyHostToDevice, s));
	CHECK(cudaStreamSynchronize(s));

	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CHECK(cudaMemcpyAsync(dst, src, ROW * ROWS, cudaMemcpyHostToDevice, s));
	CHECK(cudaStreamEndCapture(s, &g));
	CHECK(cudaGraphInstantiate(&x, g, 0));

	for (int r = 0; r < REPLAYS; r++) {
		unsigned char v = (unsigned char)(0x11 + r * 0x22);

		memset(src, v, ROW * ROWS);
		CHECK(cudaGraphLaunch(x, s));
		CHECK(cudaStreamSynchronize(s));
		CHECK(cudaMemcpy(back, dst, ROW * ROWS, cudaMemcpyDeviceToHost));
		for (int i = 0; i < ROW * ROWS; i++) {
			if (back[i] != v) {
				fprintf(stderr, "graph: replay %d byte %d: expected 0x%02x got 0x%02x\n",
					r, i, v, back[i]);
				return 1;
			}
		}
	}
	printf("graph: %d replays verified\n", REPLAYS);
	cudaGraphExecDestroy(x);
	cudaGraphDestroy(g);
	cudaStreamDestroy(s);
	cudaFree(dst);
	cudaFreeHost(src);
	free(back);
	return 0;
}
