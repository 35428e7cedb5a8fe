/*
 * heldlegacy: a copy on the legacy default stream while a host function
 * the program queued there holds it until the copy call has returned.
 * CUDA's call returns (a pageable source is staged, the copy waits in the
 * stream); a preloaded pool must not wait on the host for the held stream
 * either, even when its own batched send fails (run it under FAKECUDA_FAIL).
 * The copy mixes rows the pool holds with new ones, so that its misses are
 * scattered and go as one batch through the legacy stream's bridge. A
 * watchdog opens the gate after 5 s, so a call that waited ends the run
 * instead of hanging it. Exit 0 all verified, 1 a mismatch, 3 a CUDA error,
 * 4 the copy call waited for the held stream.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROW 4096
#define ROWS 32

#define CHECK(call)                                                                       \
	do {                                                                              \
		cudaError_t e_ = (call);                                                  \
		if (e_ != cudaSuccess) {                                                  \
			fprintf(stderr, "heldlegacy: %s: %s\n", #call, cudaGetErrorName(e_)); \
			return 3;                                                         \
		}                                                                         \
	} while (0)

static atomic_int heldlegacy_gate, heldlegacy_returned, heldlegacy_forced;

static void heldlegacy_nap(void)
{
	struct timespec t = { 0, 1000000 };

	nanosleep(&t, NULL);
}

/* Holds the stream until the program opens the gate. */
static void heldlegacy_wait(void *arg)
{
	(void)arg;
	while (!atomic_load(&heldlegacy_gate))
		heldlegacy_nap();
}

/* Opens the gate after 5 s when the copy call has not returned. */
static void *heldlegacy_watchdog(void *arg)
{
	(void)arg;
	for (int ms = 0; ms < 5000 && !atomic_load(&heldlegacy_returned); ms++)
		heldlegacy_nap();
	if (!atomic_load(&heldlegacy_returned)) {
		atomic_store(&heldlegacy_forced, 1);
		atomic_store(&heldlegacy_gate, 1);
	}
	return NULL;
}

int main(void)
{
	static unsigned char old_rows[ROW * ROWS], mixed[ROW * ROWS], back[ROW * ROWS];
	pthread_t dog;
	void *dst;

	for (int i = 0; i < ROW * ROWS; i++) {
		old_rows[i] = (unsigned char)(i * 13 + i / ROW * 7 + 1);
		/* every other row new */
		mixed[i] = i / ROW % 2 ? (unsigned char)(i * 31 + i / ROW * 5 + 3) : old_rows[i];
	}
	CHECK(cudaMalloc(&dst, ROW * ROWS));
	for (int r = 0; r < 3; r++) {
		CHECK(cudaMemcpyAsync(dst, old_rows, ROW * ROWS, cudaMemcpyHostToDevice, 0));
		CHECK(cudaStreamSynchronize(0));
	}

	if (pthread_create(&dog, NULL, heldlegacy_watchdog, NULL) != 0)
		return 3;
	CHECK(cudaLaunchHostFunc(0, heldlegacy_wait, NULL));
	CHECK(cudaMemcpyAsync(dst, mixed, ROW * ROWS, cudaMemcpyHostToDevice, 0));
	atomic_store(&heldlegacy_returned, 1);
	atomic_store(&heldlegacy_gate, 1);
	pthread_join(dog, NULL);
	CHECK(cudaDeviceSynchronize());
	if (atomic_load(&heldlegacy_forced)) {
		fprintf(stderr, "heldlegacy: the copy call waited for the held legacy stream\n");
		return 4;
	}
	CHECK(cudaMemcpy(back, dst, ROW * ROWS, cudaMemcpyDeviceToHost));
	if (memcmp(back, mixed, ROW * ROWS) != 0) {
		fprintf(stderr, "heldlegacy: wrong bytes on the device\n");
		return 1;
	}
	printf("heldlegacy: verified\n");
	return 0;
}
