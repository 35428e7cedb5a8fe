/*
 * reset: a program that resets the device mid-run (cudaDeviceReset frees
 * every allocation, a preloaded pool's slabs included), then fills device
 * memory with junk and copies the same rows again. Every byte is read back
 * and compared: a pool that served the second round from its old slabs
 * would deliver the junk. Then it resets again and, with no copy after the
 * reset, fills device memory with blocks of its own until an allocation
 * fails: a pool that gave back its old slabs then would free the program's
 * blocks, whose bytes are read back last. Exit 0 all verified, 1 a
 * mismatch, 3 a CUDA error.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW 4096
#define ROWS 64
#define ROUNDS 4
#define BLOCK (1u << 20)
#define BLOCKS 4096

#define CHECK(call)                                                                  \
	do {                                                                         \
		cudaError_t e_ = (call);                                             \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "reset: %s: %s\n", #call, cudaGetErrorName(e_)); \
			return 3;                                                    \
		}                                                                    \
	} while (0)

/* Copies src to a new device buffer ROUNDS times and verifies each round. */
static int reset_rounds(const unsigned char *src, unsigned char *back, const char *phase)
{
	void *dst;

	CHECK(cudaMalloc(&dst, BLOCK));         /* a block's size: the slab after it lies where a block would */
	for (int r = 0; r < ROUNDS; r++) {
		CHECK(cudaMemcpyAsync(dst, src, ROW * ROWS, cudaMemcpyHostToDevice, 0));
		CHECK(cudaMemcpy(back, dst, ROW * ROWS, cudaMemcpyDeviceToHost));
		if (memcmp(src, back, ROW * ROWS) != 0) {
			fprintf(stderr, "reset: %s round %d: wrong bytes on the device\n", phase, r);
			return 1;
		}
	}
	return 0;
}

/* Allocates BLOCK-sized blocks until one fails, marks each, and reads every mark back. */
static int reset_fill(unsigned char *back)
{
	static void *blocks[BLOCKS];
	static unsigned char mark[BLOCK];
	int n = 0;

	while (n < BLOCKS && cudaMalloc(&blocks[n], BLOCK) == cudaSuccess) {
		CHECK(cudaMemset(blocks[n], n & 0xff, BLOCK));
		n++;
	}
	(void)cudaGetLastError();
	if (n == BLOCKS) {
		fprintf(stderr, "reset: memory never ran out (set FAKECUDA_MEM)\n");
		return 3;
	}
	for (int i = 0; i < n; i++) {
		cudaError_t e = cudaMemcpy(back, blocks[i], ROW, cudaMemcpyDeviceToHost);

		memset(mark, i & 0xff, ROW);
		if (e != cudaSuccess || memcmp(back, mark, ROW) != 0) {
			fprintf(stderr, "reset: block %d of %d lost its bytes after memory ran out (%s)\n", i, n,
				cudaGetErrorName(e));
			return 1;
		}
	}
	return 0;
}

int main(void)
{
	unsigned char *src, *back;
	void *junk;
	int rc;

	CHECK(cudaHostAlloc((void **)&src, ROW * ROWS, cudaHostAllocDefault));
	back = malloc(ROW * ROWS);
	if (!back)
		return 3;
	for (int i = 0; i < ROW * ROWS; i++)
		src[i] = (unsigned char)(i * 7 + i / ROW);
	if ((rc = reset_rounds(src, back, "before the reset")))
		return rc;

	CHECK(cudaDeviceReset());
	/* Junk over the memory the reset freed, then the same rows again. */
	CHECK(cudaMalloc(&junk, 32u << 20));
	CHECK(cudaMemset(junk, 0xEE, 32u << 20));
	if ((rc = reset_rounds(src, back, "after the reset")))
		return rc;

	/* A reset no copy follows; then the program's own blocks until memory runs out. */
	CHECK(cudaDeviceReset());
	if ((rc = reset_fill(back)))
		return rc;
	printf("reset: every round verified\n");
	return 0;
}
