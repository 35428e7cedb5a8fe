/*
 * interpose: the only file that knows about symbols (STYLE.md 1, 8-12).
 *
 * It exports the CUDA runtime entry points vrampool interposes, resolves
 * the real ones once, classifies each call and hands matched host-to-device
 * copies to the pool, failed allocations to the pool's reclaim, and
 * everything else straight to the real runtime. It owns the process-level
 * life cycle: configuration at load, the fork handler, the exit report.
 *
 * Rules kept here: errno is preserved across every interposed call; a
 * per-thread guard makes the shim's own work bypass the shim; no CUDA call
 * is made from the constructor or the exit report; when anything of the
 * shim's own fails, the program's call is forwarded unchanged.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "device.h"
#include "fingerprint.h"
#include "layout.h"
#include "log.h"
#include "pool.h"
#include "report.h"
#include "stats.h"

#define VP_API __attribute__((visibility("default")))

/* The per-thread-default-stream variants are not declared by the header
 * outside CUDA_API_PER_THREAD_DEFAULT_STREAM builds. */
VP_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n,
					enum cudaMemcpyKind kind, cudaStream_t stream);
VP_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
VP_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t stream);

static __typeof__(cudaMemcpyAsync) *real_cudaMemcpyAsync;
static __typeof__(cudaMemcpyAsync_ptsz) *real_cudaMemcpyAsync_ptsz;
static __typeof__(cudaMemcpy) *real_cudaMemcpy;
static __typeof__(cudaMemcpy_ptds) *real_cudaMemcpy_ptds;
static __typeof__(cudaMalloc) *real_cudaMalloc;
static __typeof__(cudaMallocAsync) *real_cudaMallocAsync;
static __typeof__(cudaMallocAsync_ptsz) *real_cudaMallocAsync_ptsz;
static __typeof__(cudaMallocManaged) *real_cudaMallocManaged;
static __typeof__(cudaMallocPitch) *real_cudaMallocPitch;
static __typeof__(cudaGetLastError) *real_cudaGetLastError;
static __typeof__(cudaStreamSynchronize) *real_cudaStreamSynchronize;

static struct config vp_config;
static pthread_once_t vp_resolve_once = PTHREAD_ONCE_INIT;
static __thread int vp_inside;  /* re-entry guard (STYLE.md 9) */

/* Returns nonzero when addr lies in this shared object. */
static int vp_is_self(void *addr)
{
	Dl_info self, other;

	if (!addr || !dladdr(&vp_config, &self) || !dladdr(addr, &other))
		return 0;
	return self.dli_fbase == other.dli_fbase;
}

/* dl_iterate_phdr callback: remembers the first loaded libcudart's path. */
static int vp_find_cudart(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libcudart.so", 12) != 0)
		return 0;
	*(const char **)arg = info->dlpi_name;
	return 1;
}

/*
 * Looks name up after this object (RTLD_NEXT); when that finds nothing or
 * finds the shim itself (the runtime was loaded privately, RTLD_LOCAL),
 * looks in the libcudart already loaded in the process.
 */
static void *vp_lookup(const char *name)
{
	const char *path = NULL;
	void *h, *f = dlsym(RTLD_NEXT, name);

	if (f && !vp_is_self(f))
		return f;
	dl_iterate_phdr(vp_find_cudart, &path);
	h = path ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
	if (!h)
		h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	f = dlsym(h, name);
	dlclose(h);
	return f && !vp_is_self(f) ? f : NULL;
}

static void vp_resolve(void)
{
	*(void **)&real_cudaMemcpyAsync = vp_lookup("cudaMemcpyAsync");
	*(void **)&real_cudaMemcpyAsync_ptsz = vp_lookup("cudaMemcpyAsync_ptsz");
	*(void **)&real_cudaMemcpy = vp_lookup("cudaMemcpy");
	*(void **)&real_cudaMemcpy_ptds = vp_lookup("cudaMemcpy_ptds");
	*(void **)&real_cudaMalloc = vp_lookup("cudaMalloc");
	*(void **)&real_cudaMallocAsync = vp_lookup("cudaMallocAsync");
	*(void **)&real_cudaMallocAsync_ptsz = vp_lookup("cudaMallocAsync_ptsz");
	*(void **)&real_cudaMallocManaged = vp_lookup("cudaMallocManaged");
	*(void **)&real_cudaMallocPitch = vp_lookup("cudaMallocPitch");
	*(void **)&real_cudaGetLastError = vp_lookup("cudaGetLastError");
	*(void **)&real_cudaStreamSynchronize = vp_lookup("cudaStreamSynchronize");
}

/*
 * Runs at the start of every interposed call: resolves the real functions
 * once and marks the process as a CUDA user for the exit report.
 */
static void vp_enter(void)
{
	pthread_once(&vp_resolve_once, vp_resolve);
	stats_mark_used();
	report_start();
}

/* ---- copies -------------------------------------------------------------- */

enum vp_entry { VP_ASYNC, VP_ASYNC_PTSZ, VP_SYNC, VP_SYNC_PTDS };

/* What the pool needs to deliver a miss run with the program's own entry point. */
struct vp_copy {
	enum vp_entry entry;
	char *dst;
	const char *src;
	enum cudaMemcpyKind kind;
	cudaStream_t stream;
	int capture_mode;       /* the program's own, restored around its copies */
};

/* Forwards a copy to the real entry point it came through. */
static cudaError_t vp_copy_real(enum vp_entry e, void *dst, const void *src, size_t n,
				enum cudaMemcpyKind kind, cudaStream_t stream)
{
	switch (e) {
	case VP_ASYNC:
		return real_cudaMemcpyAsync ? real_cudaMemcpyAsync(dst, src, n, kind, stream)
					    : cudaErrorInitializationError;
	case VP_ASYNC_PTSZ:
		return real_cudaMemcpyAsync_ptsz ? real_cudaMemcpyAsync_ptsz(dst, src, n, kind, stream)
						 : cudaErrorInitializationError;
	case VP_SYNC:
		return real_cudaMemcpy ? real_cudaMemcpy(dst, src, n, kind) : cudaErrorInitializationError;
	case VP_SYNC_PTDS:
		return real_cudaMemcpy_ptds ? real_cudaMemcpy_ptds(dst, src, n, kind)
					    : cudaErrorInitializationError;
	}
	return cudaErrorInvalidValue;
}

/*
 * The pool's miss delivery: bytes [off, off + len) as an asynchronous copy
 * on the program's stream. A synchronous entry (cudaMemcpy) is delivered
 * on its stream (legacy, or per-thread for _ptds) and synchronised at the
 * end of the whole copy.
 */
static int vp_copy_h2d(void *arg, uint64_t off, uint64_t len)
{
	struct vp_copy *c = arg;
	cudaError_t err;

	/* The program's own copy runs under the program's capture mode. */
	device_capture_restore(c->capture_mode);
	switch (c->entry) {
	case VP_ASYNC:
	case VP_SYNC:
		err = real_cudaMemcpyAsync(c->dst + off, c->src + off, len, c->kind, c->stream);
		break;
	default:
		err = real_cudaMemcpyAsync_ptsz(c->dst + off, c->src + off, len, c->kind, c->stream);
		break;
	}
	device_capture_relax();
	return (int)err;
}

/* Counts a copy the program made successfully. */
static void vp_count(size_t n, int matched)
{
	stats_add(ST_H2D_CALLS, 1);
	stats_add(ST_BYTES_REQUESTED, n);
	stats_note_size(n);
	if (!matched) {
		stats_add(ST_PASSTHROUGH_CALLS, 1);
		stats_add(ST_BYTES_H2D, n);
	}
}

/*
 * Decides whether a copy is host-to-device. cudaMemcpyDefault infers the
 * direction from the pointers, and so do we (host: pageable or pinned).
 * The destination is classified only when it matters: for a Default copy,
 * or when the pool may take the copy (want_dst). Returns 1 when the copy
 * is host-to-device, with the destination's kind and device when known.
 */
static int vp_is_h2d(const void *dst, const void *src, enum cudaMemcpyKind kind, int want_dst,
		     enum dev_mem *dkind, int *ddev, uint64_t *dend)
{
	enum dev_mem skind;
	int sdev;

	*dkind = DEV_MEM_UNREGISTERED;
	*ddev = -1;
	*dend = 0;
	if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDefault)
		return 0;
	if (kind == cudaMemcpyHostToDevice && !want_dst)
		return 1;
	if (device_open() || device_classify(dst, dkind, ddev, dend)) {
		/* Without the driver the direction of a Default copy is unknown. */
		*dkind = DEV_MEM_UNREGISTERED;
		return kind == cudaMemcpyHostToDevice;
	}
	if (kind == cudaMemcpyHostToDevice)
		return 1;
	/* Managed memory is the device's, as CUDA counts it; only device
	 * memory proper goes to the pool. */
	if (*dkind != DEV_MEM_DEVICE && *dkind != DEV_MEM_MANAGED)
		return 0;
	if (device_classify(src, &skind, &sdev, NULL))
		return 0;
	return skind == DEV_MEM_UNREGISTERED || skind == DEV_MEM_HOST;
}

/*
 * The copy path shared by the four entry points: forward, or hand the copy
 * to the pool. Returns exactly what the program's plain call would return.
 */
static cudaError_t vp_copy(enum vp_entry e, void *dst, const void *src, size_t n,
			   enum cudaMemcpyKind kind, cudaStream_t stream)
{
	struct vp_copy c = { .entry = e, .dst = dst, .src = src, .kind = kind, .stream = stream };
	struct pool_request r;
	enum dev_mem dkind, skind;
	uint64_t dend, ctx_id;
	int sdev;
	struct pool *p;
	dev_stream ds;
	uint64_t row;
	int ddev, cur, capturing, mode;
	cudaError_t err;

	if (vp_inside)
		return vp_copy_real(e, dst, src, n, kind, stream);
	vp_enter();
	row = vp_config.enabled && vp_config.has_layout ? layout_match(&vp_config.layout, n) : 0;
	if (!vp_is_h2d(dst, src, kind, row != 0, &dkind, &ddev, &dend))
		return vp_copy_real(e, dst, src, n, kind, stream);
	/* The destination must hold the whole copy inside one allocation: the
	 * pool writes it row by row, and a row past the end would land in the
	 * neighbouring allocation instead of being refused by the runtime. */
	if (!row || dkind != DEV_MEM_DEVICE || !dend || (uint64_t)(uintptr_t)dst + n > dend ||
	    !real_cudaMemcpyAsync || !real_cudaMemcpyAsync_ptsz || !real_cudaStreamSynchronize)
		goto passthrough;
	if (device_current(&cur) || cur != ddev)
		goto passthrough;       /* no context yet on this thread, or a peer copy */
	/* The pool reads the source on the host: it must be host memory. A
	 * wrong kind or pointer is the runtime's to refuse, not ours to fault on. */
	if (!src || device_classify(src, &skind, &sdev, NULL) ||
	    (skind != DEV_MEM_UNREGISTERED && skind != DEV_MEM_HOST))
		goto passthrough;
	if (e == VP_SYNC_PTDS || (e == VP_ASYNC_PTSZ && stream == NULL))
		ds = DEV_STREAM_PER_THREAD;
	else
		ds = e == VP_SYNC ? NULL : (dev_stream)stream;
	if (e == VP_SYNC || e == VP_SYNC_PTDS)
		c.stream = e == VP_SYNC ? NULL : cudaStreamPerThread;
	device_is_capturing(ds, &capturing);
	if (capturing) {
		/* A captured copy is replayed later from its source: stand aside. */
		stats_add(ST_GRAPH_CAPTURE_CALLS, 1);
		goto passthrough;
	}
	device_context_id(&ctx_id);
	p = pool_get(ddev, ctx_id);
	if (!p)
		goto passthrough;

	/* A pinned source is read when the copy runs: if the stream may run it
	 * later (work queued before it; the legacy stream also waits for other
	 * streams), what the pool captures must be checked against the source
	 * at that time. A pageable source is staged during the call. */
	r = (struct pool_request){
		.dst = (dev_ptr)(uintptr_t)dst, .src = src, .n = n, .row = row,
		.stream = ds, .h2d = vp_copy_h2d, .arg = &c,
		.verify = skind == DEV_MEM_HOST &&
			  (ds == NULL || ds == DEV_STREAM_LEGACY || device_stream_query(ds) != 0),
	};
	vp_inside = 1;
	c.capture_mode = mode = device_capture_relax();
	err = (cudaError_t)pool_copy(p, &r);
	device_capture_restore(mode);
	if (err == cudaSuccess && (e == VP_SYNC || e == VP_SYNC_PTDS))
		err = real_cudaStreamSynchronize(c.stream);
	vp_inside = 0;
	if (err == cudaSuccess)
		vp_count(n, 1);
	return err;

passthrough:
	err = vp_copy_real(e, dst, src, n, kind, stream);
	if (err == cudaSuccess)
		vp_count(n, 0);
	return err;
}

VP_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
				   cudaStream_t stream)
{
	int saved = errno;
	cudaError_t err = vp_copy(VP_ASYNC, dst, src, n, kind, stream);

	errno = saved;
	return err;
}

VP_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n,
					enum cudaMemcpyKind kind, cudaStream_t stream)
{
	int saved = errno;
	cudaError_t err = vp_copy(VP_ASYNC_PTSZ, dst, src, n, kind, stream);

	errno = saved;
	return err;
}

VP_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	int saved = errno;
	cudaError_t err = vp_copy(VP_SYNC, dst, src, n, kind, NULL);

	errno = saved;
	return err;
}

VP_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	int saved = errno;
	cudaError_t err = vp_copy(VP_SYNC_PTDS, dst, src, n, kind, NULL);

	errno = saved;
	return err;
}

/* ---- allocations ----------------------------------------------------------- */

enum vp_alloc_kind { VP_MALLOC, VP_MALLOC_ASYNC, VP_MALLOC_ASYNC_PTSZ, VP_MALLOC_MANAGED, VP_MALLOC_PITCH };

struct vp_alloc {
	enum vp_alloc_kind kind;
	void **p;
	size_t n;               /* bytes (width for pitch) */
	size_t height;          /* pitch */
	size_t *pitch;
	unsigned int flags;     /* managed */
	cudaStream_t stream;    /* async */
};

static cudaError_t vp_alloc_real(const struct vp_alloc *a)
{
	switch (a->kind) {
	case VP_MALLOC:
		return real_cudaMalloc ? real_cudaMalloc(a->p, a->n) : cudaErrorInitializationError;
	case VP_MALLOC_ASYNC:
		return real_cudaMallocAsync ? real_cudaMallocAsync(a->p, a->n, a->stream)
					    : cudaErrorInitializationError;
	case VP_MALLOC_ASYNC_PTSZ:
		return real_cudaMallocAsync_ptsz ? real_cudaMallocAsync_ptsz(a->p, a->n, a->stream)
						 : cudaErrorInitializationError;
	case VP_MALLOC_MANAGED:
		return real_cudaMallocManaged ? real_cudaMallocManaged(a->p, a->n, a->flags)
					      : cudaErrorInitializationError;
	case VP_MALLOC_PITCH:
		return real_cudaMallocPitch ? real_cudaMallocPitch(a->p, a->pitch, a->n, a->height)
					    : cudaErrorInitializationError;
	}
	return cudaErrorInvalidValue;
}

/*
 * The allocation path: the real call; on out-of-memory, give pool memory
 * back (newest slabs first) and retry until it fits or the pool is empty.
 * After a successful retry the runtime's last error, set by the failed
 * attempt, is cleared: the program asked once and got its memory.
 */
static cudaError_t vp_alloc(const struct vp_alloc *a)
{
	int saved = errno;
	cudaError_t err, retry;
	uint64_t need;
	int dev;

	if (vp_inside) {
		err = vp_alloc_real(a);
		goto out;
	}
	vp_enter();
	stats_add(ST_ALLOC_CALLS, 1);
	err = vp_alloc_real(a);
	if (err != cudaErrorMemoryAllocation || !vp_config.enabled || !real_cudaGetLastError ||
	    device_open() || device_current(&dev))
		goto out;
	need = a->kind == VP_MALLOC_PITCH ? (uint64_t)a->n * a->height : a->n;
	vp_inside = 1;
	while (pool_reclaim(dev, need) > 0) {
		real_cudaGetLastError();
		stats_add(ST_POOL_OOM_RETRIES, 1);
		retry = vp_alloc_real(a);
		if (retry == cudaSuccess) {
			real_cudaGetLastError();
			err = cudaSuccess;
			break;
		}
		if (retry != cudaErrorMemoryAllocation) {
			err = retry;
			break;
		}
	}
	vp_inside = 0;
out:
	errno = saved;
	return err;
}

VP_API cudaError_t cudaMalloc(void **p, size_t n)
{
	struct vp_alloc a = { .kind = VP_MALLOC, .p = p, .n = n };

	return vp_alloc(&a);
}

VP_API cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t stream)
{
	struct vp_alloc a = { .kind = VP_MALLOC_ASYNC, .p = p, .n = n, .stream = stream };

	return vp_alloc(&a);
}

VP_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t stream)
{
	struct vp_alloc a = { .kind = VP_MALLOC_ASYNC_PTSZ, .p = p, .n = n, .stream = stream };

	return vp_alloc(&a);
}

VP_API cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags)
{
	struct vp_alloc a = { .kind = VP_MALLOC_MANAGED, .p = p, .n = n, .flags = flags };

	return vp_alloc(&a);
}

VP_API cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
	struct vp_alloc a = { .kind = VP_MALLOC_PITCH, .p = p, .n = width, .height = height, .pitch = pitch };

	return vp_alloc(&a);
}

/* ---- process life cycle ---------------------------------------------------- */

static const char *vp_getenv(const char *name)
{
	return getenv(name);
}

/*
 * A forked child cannot use its parent's CUDA context: it starts with empty
 * pools and zeroed counters, and reports only if it uses CUDA itself.
 */
static void vp_atfork_child(void)
{
	vp_inside = 0;
	pool_atfork_child();
	device_atfork_child();
	fingerprint_atfork_child();
	stats_reset(vp_config.enabled, vp_config.has_layout ? vp_config.layout.text : NULL);
	report_atfork_child();
}

/*
 * Load time: read the configuration (malformed values print their line
 * now, once), reset the counters, install the fork and exit handlers. No
 * CUDA call and no symbol resolution here: the runtime may not be loaded
 * yet (Python loads it long after start).
 */
__attribute__((constructor)) static void vp_init(void)
{
	int saved = errno;

	config_load_secure(&vp_config, vp_getenv, config_secure_getenv);
	stats_reset(vp_config.enabled, vp_config.has_layout ? vp_config.layout.text : NULL);
	/* Without a layout the pool has nothing to match: it is off, and the
	 * exit summary suggests a layout from the copy sizes it saw. */
	stats_set_state(vp_config.enabled && vp_config.has_layout ? POOL_DORMANT : POOL_OFF);
	pool_setup(&vp_config);
	fingerprint_init(vp_config.threads);
	report_setup(&vp_config);
	pthread_atfork(NULL, NULL, vp_atfork_child);
	atexit(report_exit);
	errno = saved;
}

/* ---- signals (report.h) ------------------------------------------------------
 *
 * The program's sigaction(2) and signal(2) go through report_sigaction, so
 * the shim's handler for SIGINT, SIGTERM and SIGHUP stays in place of
 * SIG_DFL while the program sees SIG_DFL (Python sets SIG_DFL, then raises
 * SIGINT to end on a KeyboardInterrupt). signal() is sigaction with glibc's
 * BSD semantics: SA_RESTART, the signal blocked in its own handler. libc's
 * sigaction is resolved by a constructor, and again on a call that comes
 * first, never from a signal handler in practice.
 */

static __typeof__(sigaction) *real_sigaction;

static int vp_real_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	__typeof__(sigaction) *f = __atomic_load_n(&real_sigaction, __ATOMIC_ACQUIRE);
	void *sym;

	if (!f) {
		sym = dlsym(RTLD_NEXT, "sigaction");
		if (!sym || vp_is_self(sym)) {
			errno = ENOSYS;
			return -1;
		}
		*(void **)&f = sym;
		__atomic_store_n(&real_sigaction, f, __ATOMIC_RELEASE);
	}
	return f(sig, act, oldact);
}

VP_API int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	return report_sigaction(sig, act, oldact, vp_real_sigaction);
}

VP_API sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	if (sig > 0 && sig < NSIG)
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = SA_RESTART;
	if (report_sigaction(sig, &act, &old, vp_real_sigaction) != 0)
		return SIG_ERR;
	return old.sa_handler;
}

__attribute__((constructor)) static void vp_signal_init(void)
{
	int saved = errno;

	vp_real_sigaction(0, NULL, NULL);	/* resolves; signal 0 is refused */
	errno = saved;
}
