/*
 * kernel.c: modules and the one kernel the emulated device runs.
 *
 * The emulation cannot execute PTX. vrampool ships one kernel,
 * vrampool_gather, as PTX text and launches it through the driver API, so
 * this file implements that kernel's documented semantics by name
 * (shim/device/device.h is the contract; fakecuda.h repeats its
 * parameter layout).
 * cuModuleLoadData[Ex] accepts a NUL-terminated PTX text image that
 * declares ".entry vrampool_gather" and nothing else; a module belongs to
 * the context current at load time and dies with it (cudaDeviceReset);
 * cuModuleGetFunction finds only vrampool_gather. cuLaunchKernel copies the
 * parameters at call time, checks every range against the device's
 * allocations (a bad launch is refused, said on stderr and counted in
 * kernel_faults, so that a bug of the caller shows), then enqueues one
 * stream operation (enqueue.c) that moves every entry on the stream's
 * worker (exec_gather.c).
 *
 * Module and function handles are checked against a registry, never
 * dereferenced blindly, and never freed (an unloaded handle stays
 * recognisable as invalid).
 */
#include "fakecuda.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GATHER_NAME "vrampool_gather"

/* A loaded function (CUfunction); the module's only one. */
struct CUfunc_st {
	struct CUmod_st *mod;
};

/* A loaded module (CUmodule). */
struct CUmod_st {
	struct CUmod_st *all_next;
	struct CUctx_st *ctx;
	unsigned long long gen;  /* the context generation it was loaded in */
	int unloaded;
	struct CUfunc_st gather;
};

static struct CUmod_st *modules; /* every module ever loaded; fc.lock */

void fc_kernel_forget(void)
{
	modules = NULL;
}

/* ---- modules ---- */

/* Says whether a NUL-terminated PTX text declares the gather kernel: the
 * directive .entry, blanks, the name, then anything but a name character. */
static int ptx_has_gather(const char *ptx)
{
	const char *p = ptx;

	while ((p = strstr(p, ".entry"))) {
		const char *q = p + strlen(".entry");

		p = q;
		if (!isspace((unsigned char)*q))
			continue;
		while (isspace((unsigned char)*q))
			q++;
		if (strncmp(q, GATHER_NAME, strlen(GATHER_NAME)) != 0)
			continue;
		q += strlen(GATHER_NAME);
		if (!isalnum((unsigned char)*q) && *q != '_' && *q != '$')
			return 1;
	}
	return 0;
}

/* Says whether an image is a binary one (ELF cubin, fat binary), which
 * must not be scanned as text. */
static int image_is_binary(const unsigned char *img)
{
	static const unsigned char elf[4] = { 0x7f, 'E', 'L', 'F' };
	static const unsigned char fatbin[4] = { 0x50, 0xed, 0x55, 0xba };
	static const unsigned char fatbin_wrapper[4] = { 0xb1, 0x43, 0x62, 0x46 };

	return memcmp(img, elf, 4) == 0 || memcmp(img, fatbin, 4) == 0 ||
	       memcmp(img, fatbin_wrapper, 4) == 0;
}

static CUresult module_load(const char *name, CUmodule *out, const void *image)
{
	struct CUmod_st *m;
	struct CUctx_st *ctx;

	DRV_ENTER(name, 1);
	if (!out || !image)
		return CUDA_ERROR_INVALID_VALUE;
	if (fc.cfg.kernel == FC_KERNEL_NONE)
		return CUDA_ERROR_NO_BINARY_FOR_GPU;
	/* The first bytes decide before any scan: a binary image is not text. */
	if (!memchr(image, '\0', 4) && image_is_binary(image))
		return CUDA_ERROR_INVALID_IMAGE;
	if (!ptx_has_gather(image))
		return CUDA_ERROR_INVALID_IMAGE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx = fc_tls_get()->ctx;
	m->gather.mod = m;
	pthread_mutex_lock(&fc.lock);
	m->ctx = ctx;
	m->gen = ctx->gen;
	m->all_next = modules;
	modules = m;
	pthread_mutex_unlock(&fc.lock);
	*out = m;
	return CUDA_SUCCESS;
}

FC_API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	return module_load("cuModuleLoadData", module, image);
}

/* JIT options change nothing here; their arrays must be there when counted. */
FC_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
				   CUjit_option *options, void **optionValues)
{
	if (numOptions && (!options || !optionValues)) {
		DRV_ENTER("cuModuleLoadDataEx", 1);
		return CUDA_ERROR_INVALID_VALUE;
	}
	return module_load("cuModuleLoadDataEx", module, image);
}

/* Finds a live module of a live context generation (lock held): 0,
 * -EBADF (unknown, unloaded, or its context was reset). */
static int module_live_locked(struct CUmod_st *h)
{
	struct CUmod_st *m;

	for (m = modules; m; m = m->all_next)
		if (m == h)
			return !m->unloaded && m->gen == m->ctx->gen ? 0 : -EBADF;
	return -EBADF;
}

FC_API CUresult cuModuleUnload(CUmodule hmod)
{
	int err;

	DRV_ENTER("cuModuleUnload", 1);
	pthread_mutex_lock(&fc.lock);
	err = module_live_locked(hmod);
	if (!err)
		hmod->unloaded = 1;
	pthread_mutex_unlock(&fc.lock);
	return fc_drv_err(err);
}

FC_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	int err;

	DRV_ENTER("cuModuleGetFunction", 1);
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fc.lock);
	err = module_live_locked(hmod);
	pthread_mutex_unlock(&fc.lock);
	if (err)
		return fc_drv_err(err);
	if (strcmp(name, GATHER_NAME) != 0)
		return CUDA_ERROR_NOT_FOUND;
	*hfunc = &hmod->gather;
	return CUDA_SUCCESS;
}

/* ---- the gather kernel ---- */

/* A byte range [lo, hi) one entry reads or writes. */
struct span {
	uint64_t lo, hi;
	uint32_t entry;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Refuses a launch: one line on stderr, counted in kernel_faults. */
__attribute__((format(printf, 1, 2)))
static CUresult gather_fault(const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "fakecuda: vrampool_gather launch refused: %s\n", msg);
	atomic_fetch_add(&fc_cnt.kernel_faults, 1);
	return CUDA_ERROR_INVALID_VALUE;
}

/* The last arena allocation a range was found in (a launch's entries mostly share two). */
struct range_cache {
	const char *lo, *hi;
};

/* Says whether [p, p + n) lies inside one allocation the kernel on device
 * DEV may touch: device memory of DEV, or managed memory. */
static int range_ok(uint64_t p, uint64_t n, int dev, struct range_cache *c)
{
	const char *a = (const char *)(uintptr_t)p;
	const char *lo, *hi;
	int d = -1, kind;

	if (c->lo && a >= c->lo && a < c->hi && n <= (uint64_t)(c->hi - a))
		return 1;
	if (fc_mem_extent(a, &d, &lo, &hi) == 0) {
		if (d != dev || n > (uint64_t)(hi - a))
			return 0;
		c->lo = lo;
		c->hi = hi;
		return 1;
	}
	kind = fc_mem_classify(a, (size_t)n, &d);
	return (kind == FC_DEVICE && d == dev) || kind == FC_MANAGED;
}

/*
 * Checks a copied launch: every entry's slab range and destination range
 * inside one allocation, and the contract that no entry writes what
 * another writes or reads (the real kernel runs entries in parallel).
 * Returns CUDA_SUCCESS or a refusal.
 */
static CUresult gather_check(const struct fc_gather *g, int dev)
{
	struct span *w, *r;
	struct range_cache slabs = { 0 }, dsts = { 0 };
	uint64_t n, off;
	uint32_t i, nspans = 0;
	CUresult res = CUDA_SUCCESS;

	w = malloc(2 * (size_t)g->count * sizeof(*w));
	if (!w)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = w + g->count;
	for (i = 0; i < g->count; i++) {
		const struct fc_gather_entry *e = &g->e[i];
		uint32_t nrows = e->nrows_dir & ~FC_GATHER_CAPTURE;
		uint64_t slab_end, dst, dst_end;

		if (!nrows)
			continue;
		if (__builtin_mul_overflow((uint64_t)nrows, g->row, &n) ||
		    __builtin_mul_overflow((uint64_t)e->dst_row, g->row, &off) ||
		    __builtin_add_overflow(g->dst, off, &dst) ||
		    __builtin_add_overflow(dst, n, &dst_end) ||
		    __builtin_add_overflow(e->slab, n, &slab_end)) {
			res = gather_fault("entry %u: %u rows of %llu bytes overflow the address space",
					   i, nrows, (unsigned long long)g->row);
			goto out_free;
		}
		if (!range_ok(e->slab, n, dev, &slabs)) {
			res = gather_fault("entry %u: slab range 0x%llx + %llu is not inside one "
					   "allocation of device %d", i, (unsigned long long)e->slab,
					   (unsigned long long)n, dev);
			goto out_free;
		}
		if (!range_ok(dst, n, dev, &dsts)) {
			res = gather_fault("entry %u: destination rows %u..%u (0x%llx + %llu) are not "
					   "inside one allocation of device %d", i, e->dst_row,
					   e->dst_row + nrows - 1, (unsigned long long)dst,
					   (unsigned long long)n, dev);
			goto out_free;
		}
		if (e->nrows_dir & FC_GATHER_CAPTURE) {
			w[nspans] = (struct span){ e->slab, slab_end, i };
			r[nspans] = (struct span){ dst, dst_end, i };
		} else {
			w[nspans] = (struct span){ dst, dst_end, i };
			r[nspans] = (struct span){ e->slab, slab_end, i };
		}
		nspans++;
	}
	/* Writes pairwise disjoint: sorted by start, neighbours suffice. */
	qsort(w, nspans, sizeof(*w), span_cmp);
	for (i = 1; i < nspans; i++) {
		if (w[i].lo < w[i - 1].hi) {
			res = gather_fault("entries %u and %u write the same bytes",
					   w[i - 1].entry, w[i].entry);
			goto out_free;
		}
	}
	/* No read meets a write: the last write starting before the read's
	 * end is the only candidate (writes are disjoint, ends sorted). */
	for (i = 0; i < nspans; i++) {
		uint32_t lo = 0, hi = nspans;

		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (w[mid].lo < r[i].hi)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo && w[lo - 1].hi > r[i].lo) {
			res = gather_fault("entry %u reads bytes that entry %u writes",
					   r[i].entry, w[lo - 1].entry);
			goto out_free;
		}
	}
out_free:
	free(w);
	return res;
}

/* Finds the function's module, live and of the current context (lock
 * held): 0 or -EBADF. */
static int function_live_locked(struct CUfunc_st *f, struct CUctx_st *ctx)
{
	struct CUmod_st *m;

	for (m = modules; m; m = m->all_next)
		if (f == &m->gather)
			return module_live_locked(m) == 0 && m->ctx == ctx ? 0 : -EBADF;
	return -EBADF;
}

/*
 * cuLaunchKernel for the gather kernel: checks the handle, the launch
 * shape and the parameters, copies them (the caller may reuse its memory
 * at once), and enqueues one operation on the stream.
 */
static CUresult launch(const char *name, int ptsz, CUfunction f, unsigned gx, unsigned gy,
		       unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem,
		       CUstream h, void **params, void **extra)
{
	struct fc_gather_params head;
	struct CUstream_st *s;
	struct CUctx_st *ctx;
	struct fc_gather *g;
	unsigned flags;
	uint32_t i;
	CUresult res;
	int err;

	DRV_ENTER(name, 1);
	ctx = fc_tls_get()->ctx;
	pthread_mutex_lock(&fc.lock);
	err = function_live_locked(f, ctx);
	pthread_mutex_unlock(&fc.lock);
	if (err)
		return fc_drv_err(err);
	DRV_STREAM(h, ptsz, s);
	if (fc_stream_flags(s, &flags) != ctx->dev)
		return CUDA_ERROR_INVALID_HANDLE;
	if (extra && params)
		return CUDA_ERROR_INVALID_VALUE;
	if (!params)
		return extra ? CUDA_ERROR_NOT_SUPPORTED : gather_fault("no kernelParams");
	if (!params[0])
		return gather_fault("kernelParams[0] is NULL");
	if (!gx || !gy || !gz || !bx || !by || !bz || gy > 65535 || gz > 65535 ||
	    gx > INT32_MAX || (unsigned long long)bx * by * bz > 1024 || bz > 64)
		return gather_fault("grid %ux%ux%u, block %ux%ux%u", gx, gy, gz, bx, by, bz);
	if (shmem > 48 * 1024)
		return gather_fault("%u bytes of dynamic shared memory", shmem);
	memcpy(&head, params[0], offsetof(struct fc_gather_params, entries));
	if (head.count < 1 || head.count > FC_GATHER_MAX)
		return gather_fault("count %u (1..%d)", head.count, FC_GATHER_MAX);
	if (!head.row)
		return gather_fault("row size 0");
	g = malloc(sizeof(*g) + head.count * sizeof(g->e[0]));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	atomic_init(&g->refs, 1);
	g->dst = head.dst;
	g->row = head.row;
	g->count = head.count;
	memcpy(g->e, (const char *)params[0] + offsetof(struct fc_gather_params, entries),
	       head.count * sizeof(g->e[0]));
	res = gather_check(g, ctx->dev);
	if (res != CUDA_SUCCESS) {
		fc_gather_drop(g);
		return res;
	}
	g->bytes = 0;
	for (i = 0; i < g->count; i++)
		g->bytes += (uint64_t)(g->e[i].nrows_dir & ~FC_GATHER_CAPTURE) * g->row;
	return fc_drv_err(fc_gather_enqueue(s, g));
}

FC_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			       unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
			       CUstream h, void **params, void **extra)
{
	return launch("cuLaunchKernel", 0, f, gx, gy, gz, bx, by, bz, shmem, h, params, extra);
}

FC_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
				    unsigned int bx, unsigned int by, unsigned int bz,
				    unsigned int shmem, CUstream h, void **params, void **extra)
{
	return launch("cuLaunchKernel_ptsz", 1, f, gx, gy, gz, bx, by, bz, shmem, h, params, extra);
}
