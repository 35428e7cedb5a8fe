/*
 * gather.cu: vrampool_gather, the kernel that moves every hit and capture
 * of one copy in one device operation (device.h, "The gather kernel").
 *
 * It is compiled to PTX at make time (nvcc -ptx -arch=compute_75), embedded
 * in libvrampool.so and loaded with cuModuleLoadData; nothing of the CUDA
 * runtime is involved. The parameter is one struct dev_gather_params by
 * value (__grid_constant__: read in place from parameter space, never
 * copied per thread); the entry table is inside it (inline_table) or in
 * mapped host memory (table), laid out by device/table.c.
 *
 * Work split: the bytes of every entry are cut into units of
 * DEV_GATHER_UNIT bytes (an empty entry is one unit that moves nothing),
 * numbered entry after entry. Warp w moves units [w * per_warp,
 * (w + 1) * per_warp): it finds the entry and unit it starts at in the
 * table's warp starts (or, when every entry is one unit, unit u is entry
 * u), then walks on through the entries. Its 32 lanes move one unit
 * together, each with GATHER_DEPTH words in flight. A unit is a contiguous
 * run of bytes on both sides, so only the two addresses decide how it is
 * copied:
 *  - when source and destination agree modulo 16, 8 or 4 (whatever the row
 *    size), a few head bytes bring both to that alignment and the body
 *    moves in 16-, 8- or 4-byte words;
 *  - otherwise the destination is aligned to 4 and each destination word is
 *    made from the two aligned source words it straddles with a funnel
 *    shift; both words hold at least one byte of the unit, so nothing
 *    outside the entry's source is read beyond the aligned word it shares;
 *  - the remaining tail (under one word) moves byte by byte.
 * Units start at multiples of DEV_GATHER_UNIT (a multiple of 16) inside
 * their entry, so every unit of an entry takes the same branch. Entries
 * never overlap in what they write and no entry reads what another
 * writes, so the order of work inside the grid does not matter.
 *
 * The body is plain C as well as CUDA: tests/unit/test_device.c includes
 * this file with GATHER_HOST defined and runs gather_warp over simulated
 * warps, checking the index and alignment arithmetic on the host.
 */
#include "device/device.h"

#define GATHER_LANES 32         /* threads of a warp, moving one unit together */
#define GATHER_DEPTH 4          /* words each lane loads before it stores them */

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

/*
 * Moves n words of type T into dw, word i being LOAD(i), as thread t of
 * stride: GATHER_DEPTH loads are issued before their stores, then the rest
 * one at a time. One macro for every word width, since each needs its own
 * vector type for the compiler to emit one wide load and store.
 */
#define GATHER_WORDS(T, dw, n, t, stride, LOAD)                                             \
	do {                                                                                \
		uint64_t i_ = (t);                                                          \
		for (; i_ + 3 * (stride) < (n); i_ += 4 * (stride)) {                       \
			T a_ = LOAD(i_), b_ = LOAD(i_ + (stride));                          \
			T c_ = LOAD(i_ + 2 * (stride)), d_ = LOAD(i_ + 3 * (stride));       \
			(dw)[i_] = a_;                                                      \
			(dw)[i_ + (stride)] = b_;                                           \
			(dw)[i_ + 2 * (stride)] = c_;                                       \
			(dw)[i_ + 3 * (stride)] = d_;                                       \
		}                                                                           \
		for (; i_ < (n); i_ += (stride))                                            \
			(dw)[i_] = LOAD(i_);                                                \
	} while (0)

#define GATHER_PLAIN(i) sw[i]
#define GATHER_SHIFTED(i) gather_funnel(sw[i], sw[(i) + 1], (uint32_t)(8 * r))

/* Copies bytes [from, to) of s to d, thread t of stride. */
GATHER_FN void gather_bytes(unsigned char *d, const unsigned char *s, uint64_t from, uint64_t to,
			    uint64_t t, uint64_t stride)
{
	for (uint64_t i = from + t; i < to; i += stride)
		d[i] = s[i];
}

/* Copies len bytes from s to d (no overlap) as thread t of stride threads. */
GATHER_FN void gather_entry(unsigned char *d, const unsigned char *s, uint64_t len, uint64_t t,
			    uint64_t stride)
{
	uint64_t mis = ((uint64_t)(uintptr_t)d ^ (uint64_t)(uintptr_t)s) & 15;
	uint64_t w = mis == 0 ? 16 : (mis & 7) == 0 ? 8 : (mis & 3) == 0 ? 4 : 1;
	uint64_t head = (0 - (uint64_t)(uintptr_t)d) & (w == 1 ? 3 : w - 1);
	uint64_t n;

	if (head > len)
		head = len;
	gather_bytes(d, s, 0, head, t, stride);
	n = (len - head) / (w == 1 ? 4 : w);
	if (w == 1) {
		/* d + head is 4-aligned, s + head is not: r in 1..3. */
		const unsigned char *sp = s + head;
		uint64_t r = (uint64_t)(uintptr_t)sp & 3;
		const uint32_t *sw = (const uint32_t *)(const void *)(sp - r);
		uint32_t *dw = (uint32_t *)(void *)(d + head);

		GATHER_WORDS(uint32_t, dw, n, t, stride, GATHER_SHIFTED);
		n *= 4;
	} else if (w == 16) {
		const gather_u4 *sw = (const gather_u4 *)(const void *)(s + head);
		gather_u4 *dw = (gather_u4 *)(void *)(d + head);

		GATHER_WORDS(gather_u4, dw, n, t, stride, GATHER_PLAIN);
		n *= 16;
	} else if (w == 8) {
		const gather_u2 *sw = (const gather_u2 *)(const void *)(s + head);
		gather_u2 *dw = (gather_u2 *)(void *)(d + head);

		GATHER_WORDS(gather_u2, dw, n, t, stride, GATHER_PLAIN);
		n *= 8;
	} else {
		const uint32_t *sw = (const uint32_t *)(const void *)(s + head);
		uint32_t *dw = (uint32_t *)(void *)(d + head);

		GATHER_WORDS(uint32_t, dw, n, t, stride, GATHER_PLAIN);
		n *= 4;
	}
	gather_bytes(d, s, head + n, len, t, stride);
}

/*
 * The units of warp w of the launch p, whose table (entries, then warp
 * starts) is t, as lane `lane` of it: a hit copies slab bytes into the
 * destination, a capture destination bytes into the slab.
 */
GATHER_FN void gather_warp(const struct dev_gather_params *p, const unsigned char *t, uint64_t w,
			   uint64_t lane)
{
	const struct dev_gather_entry *entries = (const struct dev_gather_entry *)(const void *)t;
	uint64_t u = w * p->per_warp, end;
	uint32_t e = 0, k = 0;

	if (u >= p->units)
		return;
	end = p->units - u < p->per_warp ? p->units : u + p->per_warp;
	if (p->warps) {
		const struct dev_gather_start *s =
			(const struct dev_gather_start *)(const void *)(t + (uint64_t)p->count * sizeof(*entries));

		e = s[w].entry;
		k = s[w].unit;
	} else {
		e = (uint32_t)u;
	}
	for (; u < end; u++) {
		struct dev_gather_entry x = entries[e];
		uint64_t len = (uint64_t)(x.nrows_dir & ~DEV_GATHER_CAPTURE) * p->row;
		uint64_t off = (uint64_t)k * DEV_GATHER_UNIT;
		uint64_t piece = len - off < DEV_GATHER_UNIT ? len - off : DEV_GATHER_UNIT;
		unsigned char *dst = (unsigned char *)(uintptr_t)(p->dst + (uint64_t)x.dst_row * p->row + off);
		unsigned char *slab = (unsigned char *)(uintptr_t)(x.slab + off);

		if (x.nrows_dir & DEV_GATHER_CAPTURE)
			gather_entry(slab, dst, piece, lane, GATHER_LANES);
		else
			gather_entry(dst, slab, piece, lane, GATHER_LANES);
		if (off + DEV_GATHER_UNIT >= len) {
			e++;
			k = 0;
		} else {
			k++;
		}
	}
}

#ifndef GATHER_HOST
/* Blocks of DEV_GATHER_THREADS; registers kept low enough for the grid's DEV_GATHER_WARPS_PER_SM per SM. */
extern "C" __global__ void __launch_bounds__(DEV_GATHER_THREADS, DEV_GATHER_WARPS_PER_SM * 32 / DEV_GATHER_THREADS)
vrampool_gather(const __grid_constant__ struct dev_gather_params p)
{
	uint64_t thread = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const unsigned char *t = p.table ? (const unsigned char *)(uintptr_t)p.table : p.inline_table;

	gather_warp(&p, t, thread / GATHER_LANES, thread % GATHER_LANES);
}
#endif
