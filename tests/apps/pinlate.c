/*
 * pinlate: a pinned source changed in stream order after the copy is
 * issued and before it runs, which CUDA allows: the copy reads a pinned
 * source when it runs. A host function blocks the stream until the program
 * has rewritten the source, so the copy must deliver the new bytes. Then the
 * program copies the old bytes again and must get the old bytes: a pool
 * that captured the delivered (new) rows under the fingerprint taken at the
 * call (old) would hand the new bytes back here. Exit 0 all verified,
 * 1 a mismatch, 3 a CUDA error.
 */
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROW 4096
#define ROWS 32

#define CHECK(call)                                                                    \
	do {                                                                           \
		cudaError_t e_ = (call);                                               \
		if (e_ != cudaSuccess) {                                               \
			fprintf(stderr, "pinlate: %s: %s\n", #call, cudaGetErrorName(e_)); \
			return 3;                                                      \
		}                                                                      \
	} while (0)

static atomic_int pinlate_gate;

/* Holds the stream until the program opens the gate. */
static void pinlate_wait(void *arg)
{
	struct timespec t = { 0, 1000000 };

	(void)arg;
	while (!atomic_load(&pinlate_gate))
		nanosleep(&t, NULL);
}

static int pinlate_check(const unsigned char *want, const void *dst, const char *what)
{
	static unsigned char back[ROW * ROWS];

	if (cudaMemcpy(back, dst, ROW * ROWS, cudaMemcpyDeviceToHost) != cudaSuccess)
		return 3;
	if (memcmp(back, want, ROW * ROWS) != 0) {
		fprintf(stderr, "pinlate: %s: wrong bytes on the device\n", what);
		return 1;
	}
	return 0;
}

int main(void)
{
	unsigned char *src, *old_rows, *new_rows;
	void *dst;
	cudaStream_t s;
	int rc;

	CHECK(cudaHostAlloc((void **)&src, ROW * ROWS, cudaHostAllocDefault));
	old_rows = malloc(ROW * ROWS);
	new_rows = malloc(ROW * ROWS);
	if (!old_rows || !new_rows)
		return 3;
	for (int i = 0; i < ROW * ROWS; i++) {
		old_rows[i] = (unsigned char)(i * 13 + i / ROW * 7 + 1);
		new_rows[i] = (unsigned char)(i * 29 + i / ROW * 3 + 7);
	}
	CHECK(cudaMalloc(&dst, ROW * ROWS));
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	/* Old rows issued behind a closed gate; the source then changes. */
	memcpy(src, old_rows, ROW * ROWS);
	CHECK(cudaLaunchHostFunc(s, pinlate_wait, NULL));
	CHECK(cudaMemcpyAsync(dst, src, ROW * ROWS, cudaMemcpyHostToDevice, s));
	memcpy(src, new_rows, ROW * ROWS);
	atomic_store(&pinlate_gate, 1);
	CHECK(cudaStreamSynchronize(s));
	if ((rc = pinlate_check(new_rows, dst, "the copy that ran after the change")))
		return rc;

	/* The old rows again, several times, on an idle stream. */
	memcpy(src, old_rows, ROW * ROWS);
	for (int r = 0; r < 4; r++) {
		CHECK(cudaMemcpyAsync(dst, src, ROW * ROWS, cudaMemcpyHostToDevice, s));
		CHECK(cudaStreamSynchronize(s));
		if ((rc = pinlate_check(old_rows, dst, "the old rows copied again")))
			return rc;
	}
	printf("pinlate: verified\n");
	return 0;
}
