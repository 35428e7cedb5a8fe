/*
 * twoctx: the same rows uploaded in two contexts of one device, the
 * primary context and one of its own (cuCtxCreate), each with its own
 * device buffer; the shim must never serve a row captured in one context
 * to a copy made in the other (the emulated device refuses, and counts,
 * any access to another context's memory: ctx_refusals).
 *
 * A seeded dataset of --samples rows of --row bytes, reshuffled every
 * epoch, batches of --batch rows gathered into a pageable buffer, ONE
 * cuMemcpyHtoD_v2 per batch and context, read back with cuMemcpyDtoH_v2
 * and compared byte by byte.
 *   --mode alternate  every batch goes to both contexts in turn
 *   --mode phases     the first half of the epochs in the primary
 *                     context, the rest in the created one
 * Prints "epoch E ctx NAME bytes B device_h2d D" per epoch (D from the
 * emulated device's fakecuda_counter, "-" elsewhere), then "verified OK".
 * Exit status: 0 every byte verified, 1 a mismatch, 2 a bad option, 3 a
 * CUDA error (the call and the error's name are printed).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
	const char *n_ = NULL; cuGetErrorName(r_, &n_); \
	fprintf(stderr, "twoctx: %s: %s\n", #call, n_ ? n_ : "?"); exit(3); } } while (0)

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static unsigned long long device_h2d(void)
{
	unsigned long long (*fc)(const char *);

	*(void **)&fc = dlsym(RTLD_DEFAULT, "fakecuda_counter");
	return fc ? fc("h2d_bytes") : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "samples", 1, 0, 's' }, { "row", 1, 0, 'r' }, { "batch", 1, 0, 'b' },
		{ "epochs", 1, 0, 'e' }, { "seed", 1, 0, 'S' }, { "mode", 1, 0, 'm' }, { 0, 0, 0, 0 },
	};
	size_t n = 512, row = 3072, batch = 64, epochs = 6, i, b, e, k;
	int phases = 0, c, bad = 0, have_counter = dlsym(RTLD_DEFAULT, "fakecuda_counter") != NULL;
	unsigned long long seed = 1;
	CUcontext ctx[2];
	CUdeviceptr d[2];
	CUdevice dev;
	unsigned char *data, *stage, *back;
	size_t *perm;
	const char *names[2] = { "primary", "created" };

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': n = strtoul(optarg, NULL, 0); break;
		case 'r': row = strtoul(optarg, NULL, 0); break;
		case 'b': batch = strtoul(optarg, NULL, 0); break;
		case 'e': epochs = strtoul(optarg, NULL, 0); break;
		case 'S': seed = strtoull(optarg, NULL, 0); break;
		case 'm':
			if (strcmp(optarg, "phases") && strcmp(optarg, "alternate"))
				return 2;
			phases = !strcmp(optarg, "phases");
			break;
		default: return 2;
		}
	}
	if (!n || !row || !batch || batch > n || !epochs)
		return 2;
	rng_state = seed * 2654435761ULL + 1;
	data = malloc(n * row);
	stage = malloc(batch * row);
	back = malloc(batch * row);
	perm = malloc(n * sizeof(*perm));
	if (!data || !stage || !back || !perm)
		return 3;
	for (i = 0; i < n * row; i++)
		data[i] = (unsigned char)rnd();

	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx[0], dev));
	CK(cuCtxSetCurrent(ctx[0]));
	CK(cuCtxCreate(&ctx[1], NULL, 0, dev));      /* pushed: current above the primary */
	for (k = 0; k < 2; k++) {
		CK(cuCtxSetCurrent(ctx[k]));
		CK(cuMemAlloc(&d[k], batch * row));
	}
	for (e = 1; e <= epochs; e++) {
		unsigned long long h0 = device_h2d();
		size_t first = phases ? (e <= epochs / 2 ? 0 : 1) : 0, last = phases ? first : 1;

		for (i = 0; i < n; i++)
			perm[i] = i;
		for (i = n - 1; i > 0; i--) {
			size_t j = rnd() % (i + 1), t = perm[i];

			perm[i] = perm[j];
			perm[j] = t;
		}
		for (b = 0; b + batch <= n; b += batch) {
			for (i = 0; i < batch; i++)
				memcpy(stage + i * row, data + perm[b + i] * row, row);
			for (k = first; k <= last; k++) {
				CK(cuCtxSetCurrent(ctx[k]));
				memset(back, 0, batch * row);
				CK(cuMemcpyHtoD(d[k], stage, batch * row));
				CK(cuMemcpyDtoH(back, d[k], batch * row));
				if (memcmp(back, stage, batch * row)) {
					printf("MISMATCH epoch %zu batch %zu context %s\n", e, b / batch, names[k]);
					bad = 1;
				}
			}
		}
		if (have_counter)
			printf("epoch %zu ctx %s bytes %zu device_h2d %llu\n", e, phases ? names[first] : "both",
			       (n / batch) * batch * row * (last - first + 1), device_h2d() - h0);
		else
			printf("epoch %zu ctx %s bytes %zu device_h2d -\n", e, phases ? names[first] : "both",
			       (n / batch) * batch * row * (last - first + 1));
	}
	CK(cuCtxSetCurrent(ctx[1]));
	CK(cuMemFree(d[1]));
	CK(cuCtxDestroy(ctx[1]));                    /* pops it: the primary is current again */
	CK(cuMemFree(d[0]));
	CK(cuDevicePrimaryCtxRelease(dev));
	if (bad)
		return 1;
	printf("verified OK\n");
	free(data);
	free(stage);
	free(back);
	free(perm);
	return 0;
}
