/*
 * table: the real functions behind the interposed entry points, found
 * once, typed, never the shim's own (STYLE.md 8), and the per-thread
 * re-entry guard. table.h states the rules.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <string.h>

#include "core/dlreal.h"
#include "core/stats.h"
#include "intercept/table.h"
#include "report/report.h"

#define VP_REAL(name, lib) __typeof__(name) *_Atomic real_##name;
VP_ENTRIES(VP_REAL)
#undef VP_REAL
__typeof__(cudaGetLastError) *_Atomic real_cudaGetLastError;

#define VP_LIB_OF_RT VP_LIB_RT
#define VP_LIB_OF_DRV VP_LIB_DRV
#define VP_ROW(name, lib) { #name, (vp_fn_t _Atomic *)&real_##name, VP_LIB_OF_##lib },
const struct vp_entry vp_entries[VP_NENTRIES] = { VP_ENTRIES(VP_ROW) };
#undef VP_ROW

__thread int vp_inside;

static _Atomic int vp_resolved;         /* every real pointer was looked for once */

int vp_is_self(const void *addr)
{
	Dl_info self, other;

	if (!addr || !dladdr((void *)&vp_resolved, &self) || !dladdr(addr, &other))
		return 0;
	return self.dli_fbase == other.dli_fbase;
}

/* dl_iterate_phdr callback: remembers the first loaded object whose name starts with arg's prefix. */
struct vp_find_lib {
	const char *prefix;
	const char *path;
};

static int vp_find_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct vp_find_lib *f = arg;
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, f->prefix, strlen(f->prefix)) != 0)
		return 0;
	f->path = info->dlpi_name;
	return 1;
}

/*
 * Keeps the object holding f loaded for the rest of the process (a
 * reference the shim never drops): a real pointer then never goes stale.
 */
static void vp_pin(const void *f)
{
	Dl_info info;

	if (f && dladdr(f, &info) && info.dli_fname)
		dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

static void *_Atomic vp_rt_lib, *_Atomic vp_drv_lib;

/* The handle of the loaded runtime (a reference kept), or NULL. */
static void *vp_runtime_handle(void)
{
	struct vp_find_lib f = { .prefix = "libcudart.so" };
	void *h = atomic_load(&vp_rt_lib);

	if (h)
		return h;
	dl_iterate_phdr(vp_find_lib, &f);
	h = f.path ? dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
	if (!h)
		h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
	if (h)
		atomic_store(&vp_rt_lib, h);
	return h;
}

/* The handle of the driver (loaded if it is not; a reference kept), or NULL. */
static void *vp_driver_handle(void)
{
	void *h = atomic_load(&vp_drv_lib);

	if (h)
		return h;
	h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_LAZY);
	if (h)
		atomic_store(&vp_drv_lib, h);
	return h;
}

/*
 * Looks a runtime function up after this object (RTLD_NEXT); when that
 * finds nothing or finds the shim itself (the runtime was loaded
 * privately, RTLD_LOCAL), in the libcudart already loaded.
 */
static void *vp_lookup_rt(const char *name)
{
	void *h, *f = dlreal_sym(RTLD_NEXT, name);

	if (f && !vp_is_self(f)) {
		vp_pin(f);
		return f;
	}
	h = vp_runtime_handle();
	f = h ? dlreal_sym(h, name) : NULL;
	return f && !vp_is_self(f) ? f : NULL;
}

static void *vp_lookup_drv(const char *name)
{
	void *h = vp_driver_handle();
	void *f = h ? dlreal_sym(h, name) : NULL;

	return f && !vp_is_self(f) ? f : NULL;
}

/*
 * Resolves every real pointer still unknown. Threads never wait for each
 * other here: a thread that finds the work not done does it too (the
 * stores are idempotent). Waiting could deadlock: a thread resolving may
 * be blocked in dlopen on the dynamic linker's lock, held by another
 * thread running a library constructor that makes a CUDA call.
 */
static void vp_resolve_missing(void)
{
	for (size_t i = 0; i < VP_NENTRIES; i++) {
		const struct vp_entry *e = &vp_entries[i];
		void *f;

		if (atomic_load_explicit(e->real, memory_order_relaxed))
			continue;
		f = e->lib == VP_LIB_RT ? vp_lookup_rt(e->name) : vp_lookup_drv(e->name);
		if (f)
			atomic_store_explicit(e->real, vp_fn_of(f), memory_order_release);
	}
	if (!atomic_load_explicit(&real_cudaGetLastError, memory_order_relaxed)) {
		void *f = vp_lookup_rt("cudaGetLastError");

		if (f)
			atomic_store_explicit((vp_fn_t _Atomic *)&real_cudaGetLastError, vp_fn_of(f),
					      memory_order_release);
	}
}

void vp_resolve(void)
{
	if (atomic_load_explicit(&vp_resolved, memory_order_acquire))
		return;
	dlreal_init();
	vp_resolve_missing();
	atomic_store_explicit(&vp_resolved, 1, memory_order_release);
}

void vp_resolve_again(void)
{
	vp_resolve_missing();
}

int vp_cuda_loaded(void)
{
	struct vp_find_lib rt = { .prefix = "libcudart.so" }, drv = { .prefix = "libcuda.so" };

	dl_iterate_phdr(vp_find_lib, &rt);
	if (rt.path)
		return 1;
	dl_iterate_phdr(vp_find_lib, &drv);
	return drv.path != NULL;
}

void vp_mark_cuda(void)
{
	stats_mark_used();
	report_start();
}

void vp_enter(void)
{
	vp_resolve();
	vp_mark_cuda();
}
