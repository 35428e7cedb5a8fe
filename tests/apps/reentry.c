/*
 * reentry: the shim's re-entry guard, one fixed sequence. Run under
 * FAKECUDA_RT_VIA_DRIVER=1, the emulated runtime does each copy and
 * allocation through the driver entry points it looked up with
 * cuGetProcAddress_v2, which the shim answers with its own hooks: every
 * runtime call reaches an interposed driver entry point again from inside
 * the shim's runtime hook, and must be seen once. The program allocates
 * twice and makes five runtime copies of 3072-byte rows, each read back
 * and compared:
 *   1. 1000 bytes (no layout matches them: passed through);
 *   2. rows 0-15, new (captured);
 *   3. rows 0-15 again (served from the pool);
 *   4. rows 0-15, then rows 16-31, new, with the device set to fail the
 *      next gather launch (fakecuda_fail): the pool sends rows 16-31, the
 *      launch fails, and it sends rows 0-15 again, so one runtime hook
 *      makes two deliveries that reach the driver;
 *   5. rows 0-31 synchronously (cudaMemcpy).
 * Prints "reentry: copies 5 bytes B allocs 2" (what the program asked
 * for: the shim's dump must say the same) and "verified". Exit 0
 * verified, 1 a mismatch, 2 no emulated device, 3 a CUDA error.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW 3072
#define ROWS 32
#define SMALL 1000

#define CHECK(call)                                                                        \
	do {                                                                               \
		cudaError_t e_ = (call);                                                   \
		if (e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "reentry: %s: %s\n", #call, cudaGetErrorName(e_)); \
			return 3;                                                          \
		}                                                                          \
	} while (0)

static unsigned char rows[ROWS * ROW], back[ROWS * ROW];
static unsigned long long copies, bytes;

/* Compares the n bytes at dst with want. Returns 0, 1 (a mismatch) or 3. */
static int reentry_check(const void *dst, const unsigned char *want, size_t n, int step)
{
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(back, dst, n, cudaMemcpyDeviceToHost));
	if (memcmp(back, want, n) != 0) {
		fprintf(stderr, "reentry: copy %d: wrong bytes on the device\n", step);
		return 1;
	}
	return 0;
}

/* Copy step of n bytes from src into dst (sync: cudaMemcpy), then its check. */
static int reentry_copy(void *dst, const unsigned char *src, size_t n, int sync, int step)
{
	CHECK(cudaMemset(dst, 0xA5, n));
	if (sync)
		CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
	else
		CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, 0));
	copies++;
	bytes += n;
	return reentry_check(dst, src, n, step);
}

int main(void)
{
	unsigned long long (*counter)(const char *);
	int (*fail)(const char *);
	void *small, *dst;
	char spec[64];
	int rc;

	*(void **)&counter = dlsym(RTLD_DEFAULT, "fakecuda_counter");
	*(void **)&fail = dlsym(RTLD_DEFAULT, "fakecuda_fail");
	if (!counter || !fail) {
		fprintf(stderr, "reentry: needs the emulated device (LD_LIBRARY_PATH=build/fakecuda)\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(rows); i++)
		rows[i] = (unsigned char)(i / ROW * 37u + i * 11u + (i >> 10));
	CHECK(cudaMalloc(&small, SMALL));
	CHECK(cudaMalloc(&dst, sizeof(rows)));
	if ((rc = reentry_copy(small, rows, SMALL, 0, 1)) || (rc = reentry_copy(dst, rows, 16 * ROW, 0, 2)) ||
	    (rc = reentry_copy(dst, rows, 16 * ROW, 0, 3)))
		return rc;
	snprintf(spec, sizeof(spec), "cuLaunchKernel#%llu", counter("cuLaunchKernel") + 1);
	fail(spec);
	if ((rc = reentry_copy(dst, rows, ROWS * ROW, 0, 4)))
		return rc;
	fail("");
	if ((rc = reentry_copy(dst, rows, ROWS * ROW, 1, 5)))
		return rc;
	printf("reentry: copies %llu bytes %llu allocs 2\n", copies, bytes);
	printf("verified\n");
	return 0;
}
