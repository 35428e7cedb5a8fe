/*
 * opscount: counts the emulated device's operations behind each program
 * copy. A dataset of distinct rows goes up in batches, epoch 1 in order
 * (the pool captures what its budget holds), later epochs reshuffled, so
 * that with a partial pool each copy has hits and scattered misses. Every
 * copy is waited for alone, and the device's operation counters
 * (fakecuda_counter: copies, batches, kernel launches, memsets) are read
 * around it: the copy's byte-moving operations. Every byte is read back
 * and compared.
 *
 * Usage: opscount [--row R] [--rows N] [--batch B] [--epochs E] [--pageable]
 *                 [--stream legacy|nonblocking] [--busy]
 * --busy queues a host function that sleeps 2 ms ahead of every copy (work
 * queued ahead of it). Prints one line:
 *   "opscount: copies C max_ops M split S whole W h2d_bytes H"
 * for the copies after epoch 1 (split: some of the copy's bytes crossed,
 * the rest came from the pool; whole: every byte crossed), then
 * "verified". Exit 0 verified, 1 a mismatch, 2 bad usage or no emulated
 * device, 3 a CUDA error.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                        \
	do {                                                                               \
		cudaError_t e_ = (call);                                                   \
		if (e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "opscount: %s: %s\n", #call, cudaGetErrorName(e_)); \
			return 3;                                                          \
		}                                                                          \
	} while (0)

static unsigned long long (*fc_counter)(const char *);

/* The device's operations that move bytes so far. */
static unsigned long long moving_ops(void)
{
	return fc_counter("ops_copy") + fc_counter("ops_batch") + fc_counter("ops_kernel") +
	       fc_counter("ops_memset");
}

static void busy_wait(void *arg)
{
	struct timespec t = { 0, 2000000 };

	(void)arg;
	nanosleep(&t, NULL);
}

static unsigned long long rnd(unsigned long long *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int main(int argc, char **argv)
{
	size_t row = 3072, rows = 400, batch = 32, epochs = 3, copies = 0, split = 0, whole = 0;
	unsigned long long seed = 88172645463325252ULL, max_ops = 0;
	int pageable = 0, legacy = 0, busy = 0;
	unsigned char *data, *stage, *back;
	size_t *order;
	cudaStream_t s = 0;
	void *dst;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--row") && i + 1 < argc)
			row = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
			rows = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
			epochs = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--pageable"))
			pageable = 1;
		else if (!strcmp(argv[i], "--busy"))
			busy = 1;
		else if (!strcmp(argv[i], "--stream") && i + 1 < argc && (!strcmp(argv[i + 1], "legacy") ||
									  !strcmp(argv[i + 1], "nonblocking")))
			legacy = !strcmp(argv[++i], "legacy");
		else
			return fprintf(stderr, "usage: opscount [--row R] [--rows N] [--batch B] [--epochs E] "
				       "[--pageable] [--stream legacy|nonblocking] [--busy]\n"), 2;
	}
	if (!row || !batch || batch > rows)
		return 2;
	*(void **)&fc_counter = dlsym(RTLD_DEFAULT, "fakecuda_counter");
	if (!fc_counter)
		return fprintf(stderr, "opscount: needs the emulated device\n"), 2;
	data = malloc(rows * row);
	back = malloc(batch * row);
	order = malloc(rows * sizeof(*order));
	if (!data || !back || !order)
		return 3;
	if (pageable) {
		stage = malloc(batch * row);
		if (!stage)
			return 3;
	} else {
		CHECK(cudaHostAlloc((void **)&stage, batch * row, cudaHostAllocDefault));
	}
	for (size_t i = 0; i < rows * row; i++)
		data[i] = (unsigned char)rnd(&seed);
	for (size_t i = 0; i < rows; i++)
		order[i] = i;
	CHECK(cudaMalloc(&dst, batch * row));
	if (!legacy)
		CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (size_t e = 0; e < epochs; e++) {
		for (size_t i = rows - 1; e && i > 0; i--) {
			size_t j = rnd(&seed) % (i + 1), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
		for (size_t b = 0; b + batch <= rows; b += batch) {
			unsigned long long before, h2d, ops;

			for (size_t k = 0; k < batch; k++)
				memcpy(stage + k * row, data + order[b + k] * row, row);
			CHECK(cudaStreamSynchronize(s));
			if (busy)
				CHECK(cudaLaunchHostFunc(s, busy_wait, NULL));
			before = moving_ops();
			h2d = fc_counter("h2d_bytes");
			CHECK(cudaMemcpyAsync(dst, stage, batch * row, cudaMemcpyHostToDevice, s));
			CHECK(cudaStreamSynchronize(s));
			ops = moving_ops() - before;
			h2d = fc_counter("h2d_bytes") - h2d;
			CHECK(cudaMemcpy(back, dst, batch * row, cudaMemcpyDeviceToHost));
			for (size_t k = 0; k < batch; k++)
				if (memcmp(back + k * row, data + order[b + k] * row, row)) {
					fprintf(stderr, "opscount: epoch %zu batch %zu row %zu differs\n", e + 1,
						b / batch, k);
					return 1;
				}
			/* Copies of epoch 1 run the probe and the kernel's self-test. */
			if (e == 0)
				continue;
			copies++;
			if (ops > max_ops)
				max_ops = ops;
			split += h2d && h2d < batch * row;
			whole += h2d == batch * row;
		}
	}
	printf("opscount: copies %zu max_ops %llu split %zu whole %zu h2d_bytes %llu\n", copies, max_ops, split,
	       whole, fc_counter("h2d_bytes"));
	printf("verified\n");
	return 0;
}
