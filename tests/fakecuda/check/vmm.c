/*
 * vmm.c: proves the emulated device's virtual memory management (what
 * PyTorch's expandable segments use) behaves as CUDA documents it:
 * physical memory counted against the device, mappings usable as device
 * memory only once access is granted, across adjacent mappings, by
 * copies, memsets, pointer queries and the gather kernel, never readable
 * from the host, and gone after unmapping. Built against the real toolkit
 * and run with LD_LIBRARY_PATH=build/fakecuda.
 *
 * Each case runs in a fork()ed child with its own FAKECUDA_* settings; the
 * child exits with (the low byte of) the line of the first failed check.
 */
#include <CUnit/Basic.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define MB ((size_t)1 << 20)
#define GRAN (2 * MB)

static CUmemAllocationProp prop_of(int dev)
{
	CUmemAllocationProp p;

	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	return p;
}

static CUresult grant(CUdeviceptr p, size_t n, int dev, CUmemAccess_flags f)
{
	CUmemAccessDesc d;

	memset(&d, 0, sizeof(d));
	d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	d.location.id = dev;
	d.flags = f;
	return cuMemSetAccess(p, n, &d, 1);
}

static void *vp(CUdeviceptr p)
{
	return (void *)(uintptr_t)p;
}

static CUdeviceptr va;

static void child_read_va(void)
{
	fprintf(stderr, "reading mapped device memory from the host (a SIGSEGV is expected)\n");
	(void)*(volatile char *)vp(va + GRAN + 5);
}

/* ---- the life of a reservation ---- */

static void child_lifecycle(void)
{
	static unsigned char host[3 * MB], back[3 * MB];
	CUmemAllocationProp prop = prop_of(0), bad = prop_of(3);
	CUmemGenericAllocationHandle h1, h2, h3, hr;
	CUmemAllocationProp got;
	CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	CUpointer_attribute attrs[3] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
					 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
	struct cudaPointerAttributes pa;
	CUdeviceptr start = 0, base = 0;
	unsigned mtype = 0;
	unsigned long long acc = 0, frees;
	size_t g = 0, size = 0, f, t;
	void *data[3] = { &mtype, &start, NULL };
	unsigned char *d;
	int ord = -1, st;

	data[2] = &ord;
	CHK(cudaFree(0) == cudaSuccess);
	CHK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
	CHK(g == GRAN);
	CHK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) == CUDA_SUCCESS);
	CHK(g == GRAN);
	CHK(cuMemGetAllocationGranularity(&g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
	    CUDA_ERROR_INVALID_VALUE);

	/* Reserve 8 MiB, back 6 of them with two physical allocations. */
	CHK(cuMemAddressReserve(&va, 8 * MB, 0, 0, 0) == CUDA_SUCCESS && va % GRAN == 0);
	CHK(cuMemAddressReserve(&base, 3 * MB, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuMemCreate(&h1, 2 * MB, &prop, 0) == CUDA_SUCCESS);
	CHK(cuMemCreate(&h2, 4 * MB, &prop, 0) == CUDA_SUCCESS);
	CHK(cuMemCreate(&h3, 3 * MB, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
	CHK(counter("alloc_bytes") == 6 * MB && counter("alloc_calls") == 2);
	CHK(cudaMemGetInfo(&f, &t) == cudaSuccess && t == 16 * MB && f == 10 * MB);
	CHK(cuMemCreate(&h3, 12 * MB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
	CHK(counter("oom_errors") == 1 && counter("peak_alloc") == 6 * MB);
	CHK(cudaMalloc((void **)&d, 4 * MB) == cudaSuccess);
	CHK(cudaMalloc((void **)&d, 8 * MB) == cudaErrorMemoryAllocation); /* one capacity */

	CHK(cuMemMap(va, 2 * MB, 0, h1, 0) == CUDA_SUCCESS);
	CHK(cuMemMap(va, 4 * MB, 0, h2, 0) == CUDA_ERROR_INVALID_VALUE); /* overlaps h1 */
	CHK(cuMemMap(va + 2 * MB, 4 * MB, 2 * MB, h2, 0) == CUDA_ERROR_INVALID_VALUE); /* past h2 */
	CHK(cuMemMap(va + 8 * MB, 2 * MB, 0, h2, 0) == CUDA_ERROR_INVALID_VALUE); /* past va */
	CHK(cuMemMap(va + 2 * MB, 4 * MB, 0, 12345, 0) == CUDA_ERROR_INVALID_HANDLE);
	CHK(cuMemMap(va + 2 * MB, 4 * MB, 0, h2, 0) == CUDA_SUCCESS);

	/* No access yet: copies are refused. */
	memset(host, 0x5a, sizeof(host));
	CHK(cudaMemcpy(vp(va), host, 100, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cuMemGetAccess(&acc, &loc, va) == CUDA_SUCCESS && acc == CU_MEM_ACCESS_FLAGS_PROT_NONE);
	CHK(grant(va, 8 * MB, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CUDA_ERROR_INVALID_VALUE);
	CHK(grant(va, 6 * MB, 0, CU_MEM_ACCESS_FLAGS_PROT_READ) == CUDA_SUCCESS);
	CHK(cudaMemcpy(vp(va), host, 100, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(grant(va, 6 * MB, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CUDA_SUCCESS);
	CHK(cuMemGetAccess(&acc, &loc, va + 3 * MB) == CUDA_SUCCESS &&
	    acc == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

	/* Device memory now: copies across the two mappings, memsets, D2D. */
	for (size_t i = 0; i < sizeof(host); i++)
		host[i] = (unsigned char)(i * 13 + 7);
	CHK(cudaMemcpy(vp(va + MB), host, 3 * MB, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cudaMemcpy(back, vp(va + MB), 3 * MB, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(back, host, 3 * MB) == 0);
	CHK(cudaMemset(vp(va + GRAN - 10), 0xee, 20) == cudaSuccess);
	CHK(cudaMemcpy(d, vp(va + GRAN - 10), 20, cudaMemcpyDeviceToDevice) == cudaSuccess);
	CHK(cudaMemcpy(back, d, 20, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(back[0] == 0xee && back[19] == 0xee);
	CHK(cuMemcpyDtoD(va + 5 * MB, (CUdeviceptr)d, 20) == CUDA_SUCCESS);
	CHK(cudaMemcpy2D(back, 10, vp(va + 5 * MB), 4, 4, 5, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(back[0] == 0xee && back[43] == 0xee);
	CHK(cudaMemcpy(vp(va + 6 * MB - 10), host, 20, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cudaMemcpy(vp(va + 8 * MB - 10), host, 20, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cudaFree(vp(va)) == cudaErrorInvalidValue);

	/* Pointer queries: device memory, the mapping that holds the address. */
	CHK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + 3 * MB) == CUDA_SUCCESS);
	CHK(mtype == CU_MEMORYTYPE_DEVICE);
	CHK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + 3 * MB) == CUDA_SUCCESS);
	CHK(start == va + 2 * MB);
	CHK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + 3 * MB) == CUDA_SUCCESS);
	CHK(size == 4 * MB);
	CHK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 3 * MB) == CUDA_SUCCESS);
	CHK(ord == 0);
	start = 0;
	CHK(cuPointerGetAttributes(3, attrs, data, va + 100) == CUDA_SUCCESS);
	CHK(mtype == CU_MEMORYTYPE_DEVICE && start == va && ord == 0);
	CHK(cudaPointerGetAttributes(&pa, vp(va + 100)) == cudaSuccess && pa.type == cudaMemoryTypeDevice);
	CHK(cuMemGetAddressRange(&base, &size, va + 100) == CUDA_SUCCESS && base == va && size == 2 * MB);
	CHK(cuMemGetAddressRange(&base, &size, va + 7 * MB) == CUDA_ERROR_NOT_FOUND);

	/* The host cannot read it. */
	st = in_child(child_read_va, NULL);
	CHK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);

	/* Handles: retained, described, released; memory goes when unmapped. */
	frees = counter("free_calls");
	CHK(cuMemRetainAllocationHandle(&hr, vp(va + 3 * MB)) == CUDA_SUCCESS && hr == h2);
	CHK(cuMemRelease(hr) == CUDA_SUCCESS);
	CHK(cuMemGetAllocationPropertiesFromHandle(&got, h1) == CUDA_SUCCESS);
	CHK(got.type == CU_MEM_ALLOCATION_TYPE_PINNED && got.location.id == 0);
	CHK(cuMemUnmap(va + 3 * MB, 2 * MB) == CUDA_ERROR_INVALID_VALUE); /* half a mapping */
	CHK(cuMemAddressFree(va, 8 * MB) == CUDA_ERROR_INVALID_VALUE);    /* still mapped */
	CHK(cuMemRelease(h1) == CUDA_SUCCESS && cuMemRelease(h2) == CUDA_SUCCESS);
	CHK(cuMemRelease(h1) == CUDA_ERROR_INVALID_VALUE);
	CHK(counter("alloc_bytes") == 10 * MB); /* still mapped: still there */
	CHK(cudaMemcpy(back, vp(va + MB), 3 * MB, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(back[0] == host[0] && back[3 * MB - 1] == host[3 * MB - 1]);
	CHK(cuMemUnmap(va, 6 * MB) == CUDA_SUCCESS);
	CHK(counter("alloc_bytes") == 4 * MB && counter("free_calls") == frees + 3);
	CHK(cudaMemcpy(vp(va), host, 100, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHK(cuMemAddressFree(va, 4 * MB) == CUDA_ERROR_INVALID_VALUE);
	CHK(cuMemAddressFree(va, 8 * MB) == CUDA_SUCCESS);
	CHK(cuMemAddressFree(va, 8 * MB) == CUDA_ERROR_INVALID_VALUE);
}

static void test_lifecycle(void)
{
	const char *env[] = { "FAKECUDA_MEM", "16M", NULL };

	CU_ASSERT(child_ok(in_child(child_lifecycle, env)));
}

/* ---- unmapping waits for pending work ---- */

static void *open_gate_later(void *arg)
{
	(void)arg;
	sleep_ms(50);
	atomic_store(&gate, 1);
	return NULL;
}

/*
 * A copy into mapped memory waits behind a held host function; cuMemUnmap
 * returns only once it has run (the worker never writes into pages that
 * have gone), and the stream is idle afterwards.
 */
static void child_unmap_waits(void)
{
	CUmemAllocationProp prop = prop_of(0);
	CUmemGenericAllocationHandle h;
	unsigned char *pin;
	cudaStream_t s;
	pthread_t th;

	CHK(cudaFree(0) == cudaSuccess);
	CHK(cudaStreamCreate(&s) == cudaSuccess);
	CHK(cudaMallocHost((void **)&pin, MB) == cudaSuccess);
	CHK(cuMemAddressReserve(&va, GRAN, 0, 0, 0) == CUDA_SUCCESS);
	CHK(cuMemCreate(&h, GRAN, &prop, 0) == CUDA_SUCCESS);
	CHK(cuMemMap(va, GRAN, 0, h, 0) == CUDA_SUCCESS);
	CHK(grant(va, GRAN, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CUDA_SUCCESS);
	CHK(cuMemRelease(h) == CUDA_SUCCESS);
	atomic_store(&gate, 0);
	CHK(cudaLaunchHostFunc(s, hold_stream, NULL) == cudaSuccess);
	CHK(cudaMemcpyAsync(vp(va), pin, MB, cudaMemcpyHostToDevice, s) == cudaSuccess);
	CHK(pthread_create(&th, NULL, open_gate_later, NULL) == 0);
	CHK(cuMemUnmap(va, GRAN) == CUDA_SUCCESS);
	CHK(cudaStreamQuery(s) == cudaSuccess);
	CHK(counter("alloc_bytes") == 0);
	pthread_join(th, NULL);
}

static void test_unmap_waits(void)
{
	CU_ASSERT(child_ok(in_child(child_unmap_waits, NULL)));
}

/* ---- the gather kernel and entry points on mapped memory ---- */

/* The kernel's parameter (shim/device/device.h), its table inline: two entries of one unit each. */
struct gparams {
	uint64_t dst, row, table, units;
	uint32_t count, per_warp, warps, pad;
	struct { uint64_t slab; uint32_t dst_row, nrows_dir; } e[2];
};

/* A slab in mapped memory serves a hit into cudaMalloc'd rows and takes a
 * capture from them; every VMM entry point is in the lookup table. */
static void child_gather_and_lookup(void)
{
	static const char ptx[] = ".visible .entry vrampool_gather(\n)\n";
	static const char *const names[] = {
		"cuMemGetAllocationGranularity", "cuMemAddressReserve", "cuMemAddressFree",
		"cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
		"cuMemGetAccess", "cuMemRetainAllocationHandle",
		"cuMemGetAllocationPropertiesFromHandle", "cuMemGetAddressRange",
	};
	CUmemAllocationProp prop = prop_of(0);
	CUdriverProcAddressQueryResult q;
	CUmemGenericAllocationHandle h;
	unsigned char src[64], back[64], *dst;
	struct gparams prm;
	void *args[] = { &prm }, *fn;
	CUmodule m;
	CUfunction f;
	size_t i;

	CHK(cudaFree(0) == cudaSuccess && cuInit(0) == CUDA_SUCCESS);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		CHK(cuGetProcAddress(names[i], &fn, 12000, 0, &q) == CUDA_SUCCESS && fn != NULL);
	CHK(cuMemAddressReserve(&va, GRAN, 0, 0, 0) == CUDA_SUCCESS);
	CHK(cuMemCreate(&h, GRAN, &prop, 0) == CUDA_SUCCESS);
	CHK(cuMemMap(va, GRAN, 0, h, 0) == CUDA_SUCCESS);
	CHK(grant(va, GRAN, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CUDA_SUCCESS);
	CHK(cudaMalloc((void **)&dst, 64) == cudaSuccess);
	for (i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i + 1);
	CHK(cudaMemcpy(vp(va + 3), src, 32, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cudaMemcpy(dst + 32, src + 32, 32, cudaMemcpyHostToDevice) == cudaSuccess);
	CHK(cuModuleLoadData(&m, ptx) == CUDA_SUCCESS);
	CHK(cuModuleGetFunction(&f, m, "vrampool_gather") == CUDA_SUCCESS);
	memset(&prm, 0, sizeof(prm));
	prm.dst = (uint64_t)(uintptr_t)dst;
	prm.row = 16;
	prm.count = 2;
	prm.units = 2;
	prm.per_warp = 1;
	prm.e[0].slab = va + 3;                /* hit: slab -> rows 0, 1 */
	prm.e[0].dst_row = 0;
	prm.e[0].nrows_dir = 2;
	prm.e[1].slab = va + 1000;             /* capture: rows 2, 3 -> slab */
	prm.e[1].dst_row = 2;
	prm.e[1].nrows_dir = 2 | 0x80000000u;
	CHK(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, args, NULL) == CUDA_SUCCESS);
	CHK(cudaMemcpy(back, dst, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(back, src, 64) == 0);
	CHK(cudaMemcpy(back, vp(va + 1000), 32, cudaMemcpyDeviceToHost) == cudaSuccess);
	CHK(memcmp(back, src + 32, 32) == 0);
	prm.e[1].slab = va + GRAN - 16;        /* a capture running past the mapping: the kernel faults */
	CHK(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, args, NULL) == CUDA_SUCCESS);
	CHK(cuCtxSynchronize() == CUDA_SUCCESS);
	CHK(counter("kernel_faults") == 1 && counter("kernel_launches") == 2 && counter("kernel_bytes") == 64);
}

static void test_gather_and_lookup(void)
{
	CU_ASSERT(child_ok(in_child(child_gather_and_lookup, NULL)));
}

static const CU_TestInfo tests[] = {
	{ "reserved, created and mapped memory is device memory once access is granted, and goes when unmapped",
	  test_lifecycle },
	{ "unmapping waits for the work that writes into the mapping", test_unmap_waits },
	{ "the gather kernel works on mapped memory and every entry point is in the lookup table",
	  test_gather_and_lookup },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "virtual memory management on the emulated device",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
