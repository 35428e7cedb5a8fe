/*
 * reload_work.h: the work of one round of the reload test, shared by the
 * library the reload program loads (tests/apps/lib/reloadlib.c, which
 * calls the runtime it is linked with) and the program's own --direct
 * mode (which takes every function from a libcudart handle with dlsym).
 *
 * A round: a seeded dataset of N rows of R bytes (the same every round, so
 * a content-keyed pool can serve later rounds), shuffled with the round's
 * seed, uploaded in batches of B rows with ONE cudaMemcpyAsync each from
 * pinned staging on a stream of its own, each batch read back on the same
 * stream and compared byte by byte; then everything is freed, so nothing
 * of the runtime is in use when the caller unloads it.
 */
#ifndef RELOAD_WORK_H
#define RELOAD_WORK_H

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"

/*
 * The runtime entry points a round uses, as X(name). RELOAD_CALL(api, f)
 * names f: the includer defines RELOAD_DIRECT for ordinary calls to the
 * linked runtime (api unused), else the calls go through api's pointers.
 */
#define RELOAD_ENTRIES(X) \
	X(cudaSetDevice) \
	X(cudaStreamCreateWithFlags) \
	X(cudaStreamDestroy) \
	X(cudaStreamSynchronize) \
	X(cudaMalloc) \
	X(cudaFree) \
	X(cudaHostAlloc) \
	X(cudaFreeHost) \
	X(cudaMemcpyAsync) \
	X(cudaGetErrorName)

#define RELOAD_FIELD(f) __typeof__(f) *f;
struct reload_api {
	RELOAD_ENTRIES(RELOAD_FIELD)
};
#undef RELOAD_FIELD

#ifdef RELOAD_DIRECT
#define RELOAD_CALL(api, f) ((void)(api), f)
#else
#define RELOAD_CALL(api, f) ((api)->f)
#endif

/* One round's shape. */
struct reload_round {
	unsigned round;
	size_t samples;
	size_t row;
	size_t batch;
	uint64_t seed;
	unsigned long long rows;        /* out: rows uploaded and verified */
};

/* What a round ends with (the reload program's exit statuses). */
enum reload_status {
	RELOAD_OK = 0,
	RELOAD_MISMATCH = 1,
	RELOAD_CUDA = 3,
};

/* Reports a failed call. Returns RELOAD_OK for cudaSuccess, else RELOAD_CUDA. */
static inline enum reload_status reload_check(const struct reload_api *api,
					      cudaError_t err, const char *call)
{
	if (err == cudaSuccess)
		return RELOAD_OK;
	fprintf(stderr, "reload: %s failed: %s\n", call, RELOAD_CALL(api, cudaGetErrorName)(err));
	return RELOAD_CUDA;
}

#define RELOAD_CHECK(api, status, call, label)                              \
	do {                                                                 \
		if (((status) = reload_check((api), (call), #call)) != RELOAD_OK) \
			goto label;                                          \
	} while (0)

/* Runs one round through api. Returns a reload_status. */
static inline int reload_work(const struct reload_api *api, struct reload_round *r)
{
	size_t bytes = r->batch * r->row;
	enum reload_status status = RELOAD_OK;
	unsigned char *data = malloc(r->samples * r->row);
	size_t *order = calloc(r->samples, sizeof(*order));
	unsigned char *staging = NULL, *check = NULL;
	cudaStream_t stream = NULL;
	void *dev = NULL;
	uint64_t rng = r->seed;

	if (!data || !order) {
		fprintf(stderr, "reload: out of host memory\n");
		status = RELOAD_CUDA;
		goto out;
	}
	loader_rng_fill(&rng, data, r->samples * r->row);
	rng = r->seed ^ (0x726f756e64ULL * (r->round + 1));
	loader_order_identity(order, r->samples);
	/*
	 * Fisher-Yates with a plain modulo, reload's own shuffle:
	 * loader_rng_shuffle draws without modulo bias and could order a
	 * round's rows differently.
	 */
	for (size_t i = r->samples; i > 1; i--) {
		size_t j = (size_t)(loader_rng_next(&rng) % i);
		size_t tmp = order[i - 1];

		order[i - 1] = order[j];
		order[j] = tmp;
	}
	RELOAD_CHECK(api, status, RELOAD_CALL(api, cudaSetDevice)(0), out);
	RELOAD_CHECK(api, status, RELOAD_CALL(api, cudaStreamCreateWithFlags)(&stream, cudaStreamNonBlocking), out);
	RELOAD_CHECK(api, status, RELOAD_CALL(api, cudaMalloc)(&dev, bytes), out);
	RELOAD_CHECK(api, status, RELOAD_CALL(api, cudaHostAlloc)((void **)&staging, bytes,
			cudaHostAllocDefault), out);
	RELOAD_CHECK(api, status, RELOAD_CALL(api, cudaHostAlloc)((void **)&check, bytes,
			cudaHostAllocDefault), out);
	for (size_t first = 0; first < r->samples; first += r->batch) {
		size_t count = r->samples - first < r->batch ? r->samples - first : r->batch;

		for (size_t j = 0; j < count; j++)
			memcpy(staging + j * r->row, data + order[first + j] * r->row, r->row);
		RELOAD_CHECK(api, status, RELOAD_CALL(api, cudaMemcpyAsync)(dev, staging, count * r->row,
				cudaMemcpyHostToDevice, stream), out);
		RELOAD_CHECK(api, status, RELOAD_CALL(api, cudaMemcpyAsync)(check, dev, count * r->row,
				cudaMemcpyDeviceToHost, stream), out);
		RELOAD_CHECK(api, status, RELOAD_CALL(api, cudaStreamSynchronize)(stream), out);
		for (size_t j = 0; j < count; j++) {
			if (!memcmp(check + j * r->row, data + order[first + j] * r->row, r->row))
				continue;
			fprintf(stderr, "reload: MISMATCH round %u row %zu (sample %zu)\n",
				r->round, first + j, order[first + j]);
			status = RELOAD_MISMATCH;
			goto out;
		}
		r->rows += count;
	}
out:
	if (stream)
		RELOAD_CALL(api, cudaStreamSynchronize)(stream);
	if (check)
		RELOAD_CALL(api, cudaFreeHost)(check);
	if (staging)
		RELOAD_CALL(api, cudaFreeHost)(staging);
	if (dev)
		RELOAD_CALL(api, cudaFree)(dev);
	if (stream)
		RELOAD_CALL(api, cudaStreamDestroy)(stream);
	free(order);
	free(data);
	return status;
}

#endif
