/*
 * callbench: the host cost of cudaMemcpyAsync calls, for make bench.
 *
 * Issues CALLS host-to-device copies of BYTES bytes each from pinned memory
 * on one stream (synchronising every 256 calls so the queue stays short)
 * and prints the mean host nanoseconds per call, best of 7 rounds, twice:
 * through the symbol cudaMemcpyAsync as the program sees it (the shim's,
 * when it is preloaded) and directly through the runtime's own definition
 * (taken with dlsym on the libcudart handle, which ignores LD_PRELOAD).
 * Rounds of the two alternate in one process, so machine noise hits both.
 * --symbol-only skips the direct rounds (every copy then passes the shim).
 * --capture issues each round into a stream capture (a graph that is then
 * discarded): no worker runs, so the per-call figure is the host cost alone,
 * free of thread-scheduling noise.
 * --distinct gives every call its own source contents (misses, captured
 * once by a pool); by default all calls copy the same bytes (hits).
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double callbench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	size_t bytes = 64, calls = 20000, distinct = 0, symbol_only = 0, capture = 0;
	unsigned char *src;
	void *dst;
	cudaStream_t s;
	double best = 1e30, best_direct = 1e30;
	__typeof__(cudaMemcpyAsync) *direct;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc)
			bytes = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
			calls = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--distinct") == 0)
			distinct = 1;
		else if (strcmp(argv[i], "--symbol-only") == 0)
			symbol_only = 1;
		else if (strcmp(argv[i], "--capture") == 0)
			capture = 1;
		else {
			fprintf(stderr, "usage: callbench [--bytes N] [--calls N] [--distinct] [--symbol-only] [--capture]\n");
			return 2;
		}
	}
	if (cudaHostAlloc((void **)&src, bytes * (distinct ? 256 : 1), cudaHostAllocDefault) ||
	    cudaMalloc(&dst, bytes) || cudaStreamCreate(&s)) {
		fprintf(stderr, "callbench: CUDA set-up failed\n");
		return 3;
	}
	for (size_t i = 0; i < bytes * (distinct ? 256 : 1); i++)
		src[i] = (unsigned char)(i * 2654435761u >> 13);
	*(void **)&direct = dlsym(dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD), "cudaMemcpyAsync");
	if (!direct) {
		fprintf(stderr, "callbench: no libcudart.so.13 loaded\n");
		return 3;
	}
	for (int round = 0; round < 14; round++) {
		__typeof__(cudaMemcpyAsync) *f = round % 2 ? direct : cudaMemcpyAsync;
		double t0 = callbench_now(), dt;

		if (symbol_only && round % 2)
			continue;
		if (capture && cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed)) {
			fprintf(stderr, "callbench: cannot capture\n");
			return 3;
		}

		for (size_t c = 0; c < calls; c++) {
			const unsigned char *p = src + (distinct ? (c % 256) * bytes : 0);

			if (distinct && c % 256 == 0)
				src[(c / 256) % bytes] ^= 1;    /* new contents every 256 calls */
			if (f(dst, p, bytes, cudaMemcpyHostToDevice, s)) {
				fprintf(stderr, "callbench: cudaMemcpyAsync failed\n");
				return 3;
			}
			if (c % 256 == 255 && !capture)
				cudaStreamSynchronize(s);
		}
		dt = (callbench_now() - t0) / (double)calls;
		if (capture) {
			cudaGraph_t g;

			if (cudaStreamEndCapture(s, &g) == cudaSuccess)
				cudaGraphDestroy(g);
		}
		cudaStreamSynchronize(s);
		if (round % 2 && dt < best_direct)
			best_direct = dt;
		if (!(round % 2) && dt < best)
			best = dt;
	}
	printf("callbench bytes %zu calls %zu ns_per_call %.1f ns_direct %.1f\n", bytes, calls, best, best_direct);
	return 0;
}
