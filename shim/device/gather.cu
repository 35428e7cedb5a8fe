/*
 * gather.cu: vrampool_gather, the kernel that moves every hit and capture
 * of one copy in one device operation (device.h, "The gather kernel").
 *
 * It is compiled to PTX at make time (nvcc -ptx -arch=compute_75), embedded
 * in libvrampool.so and loaded with cuModuleLoadData; nothing of the CUDA
 * runtime is involved. The parameter is one struct dev_gather_params by
 * value (__grid_constant__: read in place from parameter space, never
 * copied per thread).
 *
 * Work split: blockIdx.y strides over the entries, blockIdx.x and the
 * threads of a block stride over the bytes of one entry (grid-stride loops
 * in both, so any grid is correct; the host picks one from the entry count
 * and the largest entry). An entry is one contiguous run of nrows * row
 * bytes on both sides, so only the two addresses decide how it is copied:
 *  - when source and destination agree modulo 16, 8 or 4 (whatever the row
 *    size), a few head bytes bring both to that alignment and the body
 *    moves in 16-, 8- or 4-byte words;
 *  - otherwise the destination is aligned to 4 and each destination word is
 *    made from the two aligned source words it straddles with a funnel
 *    shift; both words hold at least one byte of the entry, so nothing
 *    outside the entry's source is read beyond the aligned word it shares;
 *  - the remaining tail (under one word) moves byte by byte.
 * Entries never overlap in what they write and no entry reads what another
 * writes, so the order of work inside the grid does not matter.
 *
 * The body is plain C as well as CUDA: tests/unit/test_device.c includes
 * this file with GATHER_HOST defined and runs gather_entry over simulated
 * threads, checking the index and alignment arithmetic on the host.
 */
#include "device/device.h"

#ifdef GATHER_HOST
#define GATHER_FN static
/* The device's vector types, with their alignment (so UBSan checks it). */
typedef struct { _Alignas(16) uint32_t x; uint32_t y, z, w; } gather_u4;
typedef struct { _Alignas(8) uint32_t x; uint32_t y; } gather_u2;
static uint32_t gather_funnel(uint32_t lo, uint32_t hi, uint32_t shift)
{
	return (uint32_t)((((uint64_t)hi << 32) | lo) >> shift);
}
#else
#define GATHER_FN static __device__ __forceinline__
typedef uint4 gather_u4;
typedef uint2 gather_u2;
#define gather_funnel(lo, hi, shift) __funnelshift_r((lo), (hi), (shift))
#endif

/* Copies bytes [from, to) of s to d, thread t of stride. */
GATHER_FN void gather_bytes(unsigned char *d, const unsigned char *s, uint64_t from, uint64_t to,
			    uint64_t t, uint64_t stride)
{
	for (uint64_t i = from + t; i < to; i += stride)
		d[i] = s[i];
}

/*
 * Copies len bytes from s to d (no overlap) as thread t of stride threads.
 * The three aligned branches below repeat one loop on purpose, once per
 * word width (16, 8, 4 bytes): each needs its own vector type for the
 * compiler to emit one wide load and store, which a shared helper taking
 * the width as a value would not give.
 */
GATHER_FN void gather_entry(unsigned char *d, const unsigned char *s, uint64_t len, uint64_t t,
			    uint64_t stride)
{
	uint64_t mis = ((uint64_t)(uintptr_t)d ^ (uint64_t)(uintptr_t)s) & 15;
	uint64_t w = mis == 0 ? 16 : (mis & 7) == 0 ? 8 : (mis & 3) == 0 ? 4 : 1;
	uint64_t head = (0 - (uint64_t)(uintptr_t)d) & (w == 1 ? 3 : w - 1);
	uint64_t n, body;

	if (head > len)
		head = len;
	gather_bytes(d, s, 0, head, t, stride);
	if (w == 1) {
		/* d + head is 4-aligned, s + head is not: r in 1..3. */
		const unsigned char *sp = s + head;
		uint64_t r = (uint64_t)(uintptr_t)sp & 3;
		const uint32_t *sw = (const uint32_t *)(const void *)(sp - r);
		uint32_t *dw = (uint32_t *)(void *)(d + head);

		n = (len - head) / 4;
		for (uint64_t i = t; i < n; i += stride)
			dw[i] = gather_funnel(sw[i], sw[i + 1], (uint32_t)(8 * r));
		body = n * 4;
	} else if (w == 16) {
		const gather_u4 *sw = (const gather_u4 *)(const void *)(s + head);
		gather_u4 *dw = (gather_u4 *)(void *)(d + head);

		n = (len - head) / 16;
		for (uint64_t i = t; i < n; i += stride)
			dw[i] = sw[i];
		body = n * 16;
	} else if (w == 8) {
		const gather_u2 *sw = (const gather_u2 *)(const void *)(s + head);
		gather_u2 *dw = (gather_u2 *)(void *)(d + head);

		n = (len - head) / 8;
		for (uint64_t i = t; i < n; i += stride)
			dw[i] = sw[i];
		body = n * 8;
	} else {
		const uint32_t *sw = (const uint32_t *)(const void *)(s + head);
		uint32_t *dw = (uint32_t *)(void *)(d + head);

		n = (len - head) / 4;
		for (uint64_t i = t; i < n; i += stride)
			dw[i] = sw[i];
		body = n * 4;
	}
	gather_bytes(d, s, head + body, len, t, stride);
}

/*
 * Entry e of p, as thread t of the stride threads given to it: a hit copies
 * slab rows into the destination, a capture destination rows into the slab.
 */
GATHER_FN void gather_one(const struct dev_gather_params *p, uint32_t e, uint64_t t, uint64_t stride)
{
	const struct dev_gather_entry *x = &p->entries[e];
	uint64_t len = (uint64_t)(x->nrows_dir & ~DEV_GATHER_CAPTURE) * p->row;
	unsigned char *dst = (unsigned char *)(uintptr_t)(p->dst + (uint64_t)x->dst_row * p->row);
	unsigned char *slab = (unsigned char *)(uintptr_t)x->slab;

	if (x->nrows_dir & DEV_GATHER_CAPTURE)
		gather_entry(slab, dst, len, t, stride);
	else
		gather_entry(dst, slab, len, t, stride);
}

#ifndef GATHER_HOST
extern "C" __global__ void vrampool_gather(const __grid_constant__ struct dev_gather_params p)
{
	uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint32_t e = blockIdx.y; e < p.count; e += gridDim.y)
		gather_one(&p, e, t, stride);
}
#endif
