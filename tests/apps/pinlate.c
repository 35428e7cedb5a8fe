/*
 * pinlate: a pinned source changed in stream order after the copy is
 * issued and before it runs, which CUDA allows: the copy reads a pinned
 * source when it runs. A host function blocks the stream until the program
 * has rewritten the source, so the copy must deliver the new bytes. Then the
 * program copies the old bytes again and must get the old bytes: a pool
 * that captured the delivered (new) rows under the fingerprint taken at the
 * call (old) would hand the new bytes back here. Then the same for rows
 * the pool holds: a copy of pooled rows behind the closed gate, the source
 * rewritten by the program, by a host function queued before the copy, and
 * by a copy from the device into the source queued before it; each must
 * deliver the new bytes, not the pooled ones. Last, rows whose
 * capture is still queued behind the gate on one stream are copied on
 * another stream, which must finish without the gate opening (the program
 * never ordered it after the first). Exit 0 all verified, 1 a mismatch,
 * 3 a CUDA error, 4 the second stream waited for the first.
 */
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROW 4096
#define ROWS 32
#define BIG (64u << 20)         /* a copy long enough to keep its stream busy */

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

/* A host function queued on the stream: rewrites the source. */
struct pinlate_write {
	unsigned char *dst;
	const unsigned char *src;
};

static void pinlate_writer(void *arg)
{
	struct pinlate_write *w = arg;

	memcpy(w->dst, w->src, ROW * ROWS);
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
	unsigned char *src, *big, *old_rows, *new_rows, *third_rows, *fresh_rows;
	struct pinlate_write w;
	void *dst, *dst2, *big_dev;
	cudaStream_t s, t;
	cudaError_t q = cudaErrorNotReady;
	int rc;

	CHECK(cudaHostAlloc((void **)&src, ROW * ROWS, cudaHostAllocDefault));
	old_rows = malloc(ROW * ROWS);
	new_rows = malloc(ROW * ROWS);
	third_rows = malloc(ROW * ROWS);
	fresh_rows = malloc(ROW * ROWS);
	if (!old_rows || !new_rows || !third_rows || !fresh_rows)
		return 3;
	for (int i = 0; i < ROW * ROWS; i++) {
		old_rows[i] = (unsigned char)(i * 13 + i / ROW * 7 + 1);
		new_rows[i] = (unsigned char)(i * 29 + i / ROW * 3 + 7);
		third_rows[i] = (unsigned char)(i * 41 + i / ROW * 5 + 3);
		fresh_rows[i] = (unsigned char)(i * 53 + i / ROW * 11 + 9);
	}
	CHECK(cudaMalloc(&dst, ROW * ROWS));
	CHECK(cudaMalloc(&dst2, ROW * ROWS));
	CHECK(cudaMalloc(&big_dev, BIG));
	CHECK(cudaHostAlloc((void **)&big, BIG, cudaHostAllocDefault));
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CHECK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));

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

	/* Pooled (old) rows issued behind a closed gate; the program rewrites the source. */
	atomic_store(&pinlate_gate, 0);
	CHECK(cudaLaunchHostFunc(s, pinlate_wait, NULL));
	CHECK(cudaMemcpyAsync(dst, src, ROW * ROWS, cudaMemcpyHostToDevice, s));
	memcpy(src, new_rows, ROW * ROWS);
	atomic_store(&pinlate_gate, 1);
	CHECK(cudaStreamSynchronize(s));
	if ((rc = pinlate_check(new_rows, dst, "pooled rows whose source changed before the copy ran")))
		return rc;

	/* Pooled rows again; a host function queued before the copy rewrites the source. */
	memcpy(src, old_rows, ROW * ROWS);
	atomic_store(&pinlate_gate, 0);
	w = (struct pinlate_write){ src, third_rows };
	CHECK(cudaLaunchHostFunc(s, pinlate_wait, NULL));
	CHECK(cudaLaunchHostFunc(s, pinlate_writer, &w));
	CHECK(cudaMemcpyAsync(dst, src, ROW * ROWS, cudaMemcpyHostToDevice, s));
	atomic_store(&pinlate_gate, 1);
	CHECK(cudaStreamSynchronize(s));
	if ((rc = pinlate_check(third_rows, dst, "pooled rows a host function rewrote in stream order")))
		return rc;

	/* Pooled rows again; a device-to-host copy queued before the copy rewrites the
	 * source. No host function holds the stream: a large copy elsewhere does. */
	memcpy(src, third_rows, ROW * ROWS);
	CHECK(cudaMemcpy(dst2, src, ROW * ROWS, cudaMemcpyHostToDevice));     /* third rows on the device */
	memcpy(src, old_rows, ROW * ROWS);
	CHECK(cudaMemcpyAsync(big, big_dev, BIG, cudaMemcpyDeviceToHost, t));
	CHECK(cudaMemcpyAsync(src, dst2, ROW * ROWS, cudaMemcpyDeviceToHost, t));
	CHECK(cudaMemcpyAsync(dst, src, ROW * ROWS, cudaMemcpyHostToDevice, t));
	CHECK(cudaStreamSynchronize(t));
	if ((rc = pinlate_check(third_rows, dst, "pooled rows a copy from the device rewrote in stream order")))
		return rc;

	/* Fresh rows captured behind the closed gate on s, then copied on t. */
	atomic_store(&pinlate_gate, 0);
	CHECK(cudaLaunchHostFunc(s, pinlate_wait, NULL));
	CHECK(cudaMemcpyAsync(dst, fresh_rows, ROW * ROWS, cudaMemcpyHostToDevice, s));
	CHECK(cudaMemcpyAsync(dst2, fresh_rows, ROW * ROWS, cudaMemcpyHostToDevice, t));
	for (int ms = 0; ms < 5000 && (q = cudaStreamQuery(t)) == cudaErrorNotReady; ms++) {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
	atomic_store(&pinlate_gate, 1);
	CHECK(cudaDeviceSynchronize());
	if (q != cudaSuccess) {
		fprintf(stderr, "pinlate: a copy on another stream waited for the held one (%s)\n",
			cudaGetErrorName(q));
		return 4;
	}
	if ((rc = pinlate_check(fresh_rows, dst2, "rows copied on a second stream")) ||
	    (rc = pinlate_check(fresh_rows, dst, "rows captured behind the gate")))
		return rc;
	printf("pinlate: verified\n");
	return 0;
}
