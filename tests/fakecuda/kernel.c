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
 * cuModuleGetFunction finds only vrampool_gather. cuLaunchKernel checks
 * what a driver checks (handles, stream, launch shape), copies the
 * parameter's header and inline table at call time and enqueues one stream
 * operation (enqueue.c); the stream's worker checks the launch against the
 * kernel's contract and the device's allocations (a bad launch faults:
 * said on stderr and counted in kernel_faults, so that a bug of the
 * caller shows) and moves every entry (exec_gather.c).
 *
 * Module and function handles are checked against a registry, never
 * dereferenced blindly, and never freed (an unloaded handle stays
 * recognisable as invalid).
 */
#include "fakecuda.h"

#include <ctype.h>
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
 * cuLaunchKernel for the gather kernel: checks the handle, the stream and
 * the launch shape (what a driver checks), copies the parameter's header
 * and the inline table bytes it uses (the caller may reuse its memory at
 * once), and enqueues one operation on the stream. Everything the kernel
 * itself would trip on (a table where it cannot be read, entries outside
 * their allocations or against the contract, a grid too small) is found
 * by the worker that runs it (exec_gather.c), as a device would.
 */
static CUresult launch(const char *name, int ptsz, CUfunction f, unsigned gx, unsigned gy,
		       unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem,
		       CUstream h, void **params, void **extra)
{
	struct fc_gather_head head;
	struct CUstream_st *s;
	struct CUctx_st *ctx;
	struct fc_gather *g;
	unsigned flags;
	size_t tab = 0;
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
		return extra ? CUDA_ERROR_NOT_SUPPORTED : fc_gather_fault("refused", "no kernelParams");
	if (!params[0])
		return fc_gather_fault("refused", "kernelParams[0] is NULL");
	if (!gx || !gy || !gz || !bx || !by || !bz || gy > 65535 || gz > 65535 ||
	    gx > INT32_MAX || (unsigned long long)bx * by * bz > 1024 || bz > 64)
		return fc_gather_fault("refused", "grid %ux%ux%u, block %ux%ux%u", gx, gy, gz, bx, by, bz);
	if (shmem > 48 * 1024)
		return fc_gather_fault("refused", "%u bytes of dynamic shared memory", shmem);
	memcpy(&head, params[0], sizeof(head));
	/* The inline table bytes in use (a garbage header: at most all of them). */
	if (!head.table) {
		tab = (size_t)head.count * sizeof(struct fc_gather_entry) +
		      (size_t)head.warps * sizeof(struct fc_gather_start);
		if (tab > FC_GATHER_INLINE || head.count > FC_GATHER_INLINE || head.warps > FC_GATHER_INLINE)
			tab = FC_GATHER_INLINE;
	}
	g = malloc(sizeof(*g) + tab);
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	atomic_init(&g->refs, 1);
	g->dev = ctx->dev;
	g->ctx = fc_ctx_owner(ctx);
	/* The kernel numbers threads by x alone: other dimensions repeat work. */
	g->threads = gy == 1 && gz == 1 && by == 1 && bz == 1 ? (uint64_t)gx * bx : 0;
	g->h = head;
	g->tab_bytes = tab;
	memcpy(g->tab, (const char *)params[0] + offsetof(struct fc_gather_params, inline_table), tab);
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
