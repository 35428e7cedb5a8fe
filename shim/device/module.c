/*
 * module: the gather kernel of each device, reached through the driver
 * table of device.c: its PTX loaded with cuModuleLoadData in the device's
 * primary context, its parameter block, its launches, the self-test that
 * must pass before the pool uses it, and the verdict (ready, retry later,
 * off) that the copy path reads with one atomic load.
 *
 * Loading and testing can fail for a passing reason (out of memory, a
 * failed allocation or synchronisation of the self-test); those are
 * retried with device.c's back-off (struct device_retry). A module that
 * cannot load, a missing kernel or a wrong byte turns the kernel off for
 * the context. The contract, the parameter layout and the launch shape are
 * in device/device.h; device/table.c shapes each launch and places its
 * table (inline or mapped); shim/device/gather.cu is the kernel.
 */
#include "device/device.h"

#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/stats.h"
#include "device/device_impl.h"

/* The gather kernel's PTX text, NUL-terminated (shim/device/gather_ptx.S embeds build/shim/gather.ptx). */
extern const char vrampool_gather_ptx[] __attribute__((visibility("hidden")));

/*
 * The gather kernel of one device. state is read without the lock on the
 * copy path; READY publishes ctx and fn (release/acquire). The lock is held
 * while loading and testing, and by device_forget.
 */
enum device_gather_state { GATHER_UNTRIED, GATHER_RETRY, GATHER_READY, GATHER_OFF };

struct device_kernel {
	pthread_mutex_t lock;
	_Atomic int state;              /* enum device_gather_state */
	_Atomic(CUcontext) ctx;         /* the primary context the module lives in */
	_Atomic(CUfunction) fn;
	uint64_t ctx_id;                /* that context's id (cuCtxGetId), 0 unknown */
	uint32_t sms;                   /* the device's multiprocessors (1 when the driver cannot say) */
	_Atomic int mapped;             /* mapped tables passed the self-test */
	CUmodule mod;
	struct device_retry retry;
};

static struct device_kernel device_kernels[DEVICE_MAX];
static pthread_once_t device_kernel_once = PTHREAD_ONCE_INIT;

/* Each thread's launch parameters (16 KiB, too big for a program thread's stack), freed at thread exit. */
static pthread_key_t device_params_key;
static int device_params_keyed;
static __thread struct dev_gather_params *device_params;

/*
 * Makes the kernels' locks and the parameter blocks' key, once, before the
 * first use of either (device_gather_ready's first try, device_kernel_forget).
 */
static void device_kernel_init(void)
{
	for (int i = 0; i < DEVICE_MAX; i++)
		pthread_mutex_init(&device_kernels[i].lock, NULL);
	device_params_keyed = pthread_key_create(&device_params_key, free) == 0;
}

/* Forgets device dev's gather kernel (its module died with the context); the lock is held. */
static void device_kernel_drop(struct device_kernel *k)
{
	atomic_store_explicit(&k->state, GATHER_UNTRIED, memory_order_release);
	k->mod = NULL;
	k->ctx_id = 0;
	k->retry = (struct device_retry){ 0 };
}

void device_kernel_forget(int dev)
{
	pthread_once(&device_kernel_once, device_kernel_init);
	pthread_mutex_lock(&device_kernels[dev].lock);
	device_kernel_drop(&device_kernels[dev]);
	pthread_mutex_unlock(&device_kernels[dev].lock);
}

void device_kernel_atfork_child(void)
{
	for (int i = 0; i < DEVICE_MAX; i++) {
		pthread_mutex_init(&device_kernels[i].lock, NULL);
		device_kernel_drop(&device_kernels[i]);
	}
}

/* The calling thread's parameter block, allocated on first use; NULL when out of memory. */
static struct dev_gather_params *device_params_get(void)
{
	if (!device_params) {
		device_params = malloc(sizeof(*device_params));
		if (device_params && device_params_keyed)
			pthread_setspecific(device_params_key, device_params);
	}
	return device_params;
}

/*
 * Lays out and enqueues one launch of the kernel fn for the n entries on
 * stream s, into the parameter block p: the table inline when it fits
 * (and mapped is not 1), else in a mapped table of device dev (mapped 0
 * forbids that: -EAGAIN). One device operation (and one event behind a
 * mapped table). Returns 0, -EAGAIN or -E2BIG with nothing enqueued, or
 * the launch's error.
 */
static int device_gather_run(int dev, uint32_t sms, CUfunction fn, struct dev_gather_params *p, dev_ptr dst,
			     uint64_t row, const struct dev_gather_entry *e, uint32_t n, CUstream s, int mapped)
{
	struct dev_gather_shape sh;
	struct device_table *t = NULL;
	void *args[1] = { p };
	void *where = p->inline_table;
	int err = device_gather_shape(&sh, e, n, row, sms);

	if (err)
		return err;
	p->dst = dst;
	p->row = row;
	p->table = 0;
	p->units = sh.units;
	p->count = n;
	p->per_warp = (uint32_t)sh.per_warp;
	p->warps = (uint32_t)sh.warps;
	p->pad = 0;
	if (mapped == 1 || sh.table_bytes > DEV_GATHER_INLINE) {
		if (!mapped)
			return -EAGAIN;
		t = device_table_take(dev, sh.table_bytes, &where, &p->table);
		if (!t)
			return -EAGAIN;
	}
	device_gather_table(&sh, e, n, row, where);
	stats_add(ST_DEVICE_OPS, 1);
	err = device_own(drv.launch_kernel(fn, (unsigned int)sh.blocks, 1, 1, DEV_GATHER_THREADS, 1, 1, 0, s,
					   args, NULL));
	if (t)
		device_table_give(dev, t, s, err == 0);
	return err;
}

/* Writes the value of the embedded PTX's directive (".version", ".target") into buf. */
static void device_ptx_directive(const char *directive, char *buf, size_t len)
{
	char key[16];
	const char *v;
	size_t n = 0;

	snprintf(key, sizeof(key), "\n%s ", directive);
	v = strstr(vrampool_gather_ptx, key);
	if (v) {
		v += strlen(key);
		while (v[n] && v[n] != '\n' && n + 1 < len)
			n++;
		memcpy(buf, v, n);
	}
	buf[n] = '\0';
}

/*
 * Loads the module and finds the kernel in the current context. Returns 0,
 * -ENOMEM (the load ran out of memory: worth another try) or -ENOEXEC (the
 * driver refuses the module or lacks the calls: final), with why set.
 */
static int device_kernel_load(struct device_kernel *k, char *why, size_t len)
{
	CUfunction fn = NULL;
	CUresult r;
	char ver[16], target[16];

	if (!drv.module_load_data || !drv.module_get_function || !drv.module_unload || !drv.launch_kernel ||
	    !drv.memset_d32_async || !drv.memset_d2d8_async || !drv.memcpy_dtoh_async) {
		snprintf(why, len, "cannot be used: the driver lacks the module, launch or memset calls");
		return -ENOEXEC;
	}
	r = drv.module_load_data(&k->mod, vrampool_gather_ptx);
	if (r != CUDA_SUCCESS) {
		k->mod = NULL;
		device_own(r);
		device_ptx_directive(".version", ver, sizeof(ver));
		device_ptx_directive(".target", target, sizeof(target));
		snprintf(why, len, "did not load (cuModuleLoadData: %s; the embedded PTX is .version %s, .target %s: "
			 "it needs a CUDA 12.1 or newer driver and a GPU of that target or newer)",
			 device_err_name(r), ver, target);
		return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -ENOEXEC;
	}
	r = drv.module_get_function(&fn, k->mod, "vrampool_gather");
	if (r != CUDA_SUCCESS) {
		device_own(r);
		drv.module_unload(k->mod);
		k->mod = NULL;
		snprintf(why, len, "has no vrampool_gather (cuModuleGetFunction: %s)", device_err_name(r));
		return -ENOEXEC;
	}
	atomic_store_explicit(&k->fn, fn, memory_order_relaxed);
	return 0;
}

/*
 * The self-test pattern. Its device memory is two halves: the slab side
 * (what hits read and captures write) and the destination side. Each half
 * is filled by memsets alone: a 4-byte fill, then 2D byte memsets whose
 * pitches are coprime, so that every position in the test has a byte value
 * that its neighbours within several hundred bytes do not share in the
 * same combination (a shifted or misdirected copy shows). The destination
 * half has the top bit set in every byte, the slab half clear.
 */
#define SELFTEST_HALF 32768

static const struct {
	uint32_t off, pitch, width;
	uint8_t value;
} selftest_layers[] = {
	{ 0, 7, 2, 0x10 }, { 3, 11, 3, 0x20 }, { 6, 13, 1, 0x30 }, { 1, 17, 1, 0x40 }, { 9, 19, 2, 0x50 },
};

/*
 * The launches of the self-test: an odd row size, a misaligned destination,
 * and entries whose slab address differs from their destination address by
 * delta modulo 16 (0: 16-byte words, 8: 8-byte, 4 and 12: 4-byte, others:
 * the funnel-shift path), hits and captures, one to eleven rows. Hits take
 * destination rows from 0 up, captures the rows after them.
 */
struct selftest_entry {
	uint8_t rows, capture, delta;
};

static const struct {
	uint32_t row, dst_off, n;
	struct selftest_entry e[10];
} selftest_launches[] = {
	{ 37, 3, 10, { { 1, 0, 0 }, { 2, 0, 8 }, { 3, 0, 4 }, { 5, 0, 1 }, { 6, 0, 6 }, { 7, 0, 13 },
		       { 1, 1, 0 }, { 2, 1, 3 }, { 4, 1, 8 }, { 11, 1, 12 } } },
	{ 1029, 8199, 7, { { 1, 0, 0 }, { 3, 0, 8 }, { 2, 0, 4 }, { 4, 0, 5 },
			   { 2, 1, 0 }, { 3, 1, 2 }, { 1, 1, 9 } } },
};

/* Fills half h (0 slab, 1 destination) of the host image as the memsets do. */
static void selftest_fill_host(unsigned char *half, int h)
{
	uint8_t top = h ? 0x80 : 0;

	for (uint32_t i = 0; i < SELFTEST_HALF; i++)
		half[i] = (uint8_t)((i % 4 + 1) | top);
	for (size_t l = 0; l < sizeof(selftest_layers) / sizeof(selftest_layers[0]); l++) {
		uint32_t off = selftest_layers[l].off, pitch = selftest_layers[l].pitch;
		uint32_t width = selftest_layers[l].width;

		for (uint32_t at = off; at + width <= SELFTEST_HALF; at += pitch)
			memset(half + at, selftest_layers[l].value | top, width);
	}
}

/* Enqueues the memsets of half h at d on stream s. */
static int selftest_fill_device(CUdeviceptr d, int h, CUstream s)
{
	uint8_t top = h ? 0x80 : 0;
	int err;

	stats_add(ST_DEVICE_OPS, 1);
	err = device_own(drv.memset_d32_async(d, 0x04030201u | (h ? 0x80808080u : 0), SELFTEST_HALF / 4, s));
	for (size_t l = 0; l < sizeof(selftest_layers) / sizeof(selftest_layers[0]) && !err; l++) {
		uint32_t off = selftest_layers[l].off, pitch = selftest_layers[l].pitch;
		uint32_t width = selftest_layers[l].width;
		size_t height = (SELFTEST_HALF - off - width) / pitch + 1;

		stats_add(ST_DEVICE_OPS, 1);
		err = device_own(drv.memset_d2d8_async(d + off, pitch, (unsigned char)(selftest_layers[l].value | top),
						       width, height, s));
	}
	return err;
}

/*
 * Fills e with the entries of self-test launch l over the device image at
 * base (returning the destination in *dst) and applies them to the host
 * image want, as the kernel must. *slab_at is the next free offset in the
 * slab half.
 */
static void selftest_plan(size_t l, CUdeviceptr base, struct dev_gather_entry *e, dev_ptr *dst,
			  unsigned char *want, uint64_t *slab_at)
{
	uint32_t row = selftest_launches[l].row, n = selftest_launches[l].n, next_row = 0, k = 0;

	*dst = base + SELFTEST_HALF + selftest_launches[l].dst_off;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < n; i++) {
			const struct selftest_entry *x = &selftest_launches[l].e[i];
			uint64_t len = (uint64_t)x->rows * row, d = *dst + (uint64_t)next_row * row, at;

			if (x->capture != pass)
				continue;
			at = ((*slab_at + 15) & ~(uint64_t)15) + ((d + x->delta - base) & 15);
			*slab_at = at + len;
			e[k++] = (struct dev_gather_entry){ base + at, next_row,
							    x->rows | (x->capture ? DEV_GATHER_CAPTURE : 0) };
			if (x->capture)
				memcpy(want + at, want + (d - base), len);
			else
				memcpy(want + (d - base), want + at, len);
			next_row += x->rows;
		}
	}
}

/*
 * Self-test launch l: the first with its table inline, the last with it
 * mapped (entries of several units: warp starts too). When no mapped table
 * can be had, the kernel is used with inline tables only (k->mapped 0) and
 * that launch goes inline. Returns what device_gather_run returns.
 */
static int selftest_launch(int dev, struct device_kernel *k, size_t l, CUdeviceptr base,
			   struct dev_gather_params *p, unsigned char *want, uint64_t *slab_at, CUstream s)
{
	CUfunction fn = atomic_load_explicit(&k->fn, memory_order_relaxed);
	struct dev_gather_entry e[10];
	dev_ptr dst;
	int last = l + 1 == sizeof(selftest_launches) / sizeof(selftest_launches[0]), err;

	selftest_plan(l, base, e, &dst, want, slab_at);
	err = device_gather_run(dev, k->sms, fn, p, dst, selftest_launches[l].row, e, selftest_launches[l].n, s,
				last ? 1 : -1);
	if (last)
		atomic_store_explicit(&k->mapped, err != -EAGAIN, memory_order_relaxed);
	if (last && err == -EAGAIN)
		err = device_gather_run(dev, k->sms, fn, p, dst, selftest_launches[l].row, e,
					selftest_launches[l].n, s, 0);
	return err;
}

/*
 * Runs the kernel's launches on the known pattern in device memory of its own, on
 * a private non-blocking stream (so that it waits for none of the program's
 * work and never touches the legacy stream while a program's stream is being
 * captured), reads it back and compares it with what the host computed.
 * Returns 0 (passed), -EBADMSG (a byte differs: final), or another negative
 * errno (could not run: worth another try), with why set.
 */
static int device_selftest(int dev, struct device_kernel *k, char *why, size_t len)
{
	unsigned char *want = malloc(2 * SELFTEST_HALF), *got = malloc(2 * SELFTEST_HALF);
	struct dev_gather_params *p = malloc(sizeof(*p));
	CUstream s = NULL;
	CUdeviceptr base = 0;
	uint64_t slab_at = 0;
	CUresult r;
	int err;

	if (!want || !got || !p) {
		snprintf(why, len, "out of host memory");
		err = -ENOMEM;
		goto out_free_host;
	}
	selftest_fill_host(want, 0);
	selftest_fill_host(want + SELFTEST_HALF, 1);
	err = device_own(r = drv.stream_create(&s, CU_STREAM_NON_BLOCKING));
	if (err) {
		snprintf(why, len, "cuStreamCreate: %s", device_err_name(r));
		goto out_free_host;
	}
	err = device_own(r = drv.mem_alloc(&base, 2 * SELFTEST_HALF));
	if (err) {
		snprintf(why, len, "cuMemAlloc: %s", device_err_name(r));
		goto out_destroy_stream;
	}
	err = selftest_fill_device(base, 0, s);
	if (!err)
		err = selftest_fill_device(base + SELFTEST_HALF, 1, s);
	if (err)
		snprintf(why, len, "a memset failed");
	for (size_t l = 0; l < sizeof(selftest_launches) / sizeof(selftest_launches[0]) && !err; l++) {
		memset(p, 0, sizeof(*p));
		err = selftest_launch(dev, k, l, base, p, want, &slab_at, s);
		if (err)
			snprintf(why, len, "a launch failed");
	}
	if (!err) {
		stats_add(ST_DEVICE_OPS, 1);
		err = device_own(r = drv.memcpy_dtoh_async(got, base, 2 * SELFTEST_HALF, s));
		if (err)
			snprintf(why, len, "cuMemcpyDtoHAsync: %s", device_err_name(r));
	}
	/* Everything enqueued must be done before the memory is freed. */
	r = drv.stream_synchronize(s);
	if (r != CUDA_SUCCESS) {
		device_own(r);
		if (!err)
			snprintf(why, len, "cuStreamSynchronize: %s", device_err_name(r));
		err = err ? err : -EIO;
		if (device_own(drv.ctx_synchronize())) {
			base = 0;       /* cannot tell when it is unused: 64 KiB left behind */
			goto out_destroy_stream;
		}
	}
	if (!err) {
		for (size_t i = 0; i < 2 * SELFTEST_HALF; i++) {
			if (got[i] != want[i]) {
				snprintf(why, len, "failed its self-test (byte %zu of the %s half is 0x%02x, expected 0x%02x)",
					 i % SELFTEST_HALF, i < SELFTEST_HALF ? "slab" : "destination", got[i], want[i]);
				stats_add(ST_POOL_FAULTS, 1);
				err = -EBADMSG;
				break;
			}
		}
	}
	if (device_own(drv.mem_free(base)))
		device_own(drv.mem_free(base));        /* once more: 64 KiB the program may need */
out_destroy_stream:
	drv.stream_destroy(s);
out_free_host:
	free(want);
	free(got);
	free(p);
	return err;
}

/* Device dev's multiprocessor count, 1 when the driver cannot say. */
static uint32_t device_kernel_sms(int dev)
{
	int sms = 0;

	if (!drv.device_get_attribute ||
	    drv.device_get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, (CUdevice)dev) != CUDA_SUCCESS ||
	    sms < 1)
		return 1;
	return (uint32_t)sms;
}

/*
 * Loads and tests device dev's kernel in its primary context, with the
 * lock held, and publishes the outcome: READY, RETRY (a passing failure,
 * with back-off) or OFF (final for this context). Runs in relaxed capture
 * mode so that a program's global-mode capture on another stream is not
 * invalidated by the allocation, frees and synchronisation here.
 */
static void device_kernel_try(int dev, struct device_kernel *k)
{
	char why[320] = "its context could not be made current";
	int mode = device_capture_relax();
	CUcontext prev;
	uint64_t id = 0;
	int err = device_ctx_enter(dev, &prev);

	if (!err) {
		device_context_id(&id);
		if (k->mod && id != k->ctx_id)
			k->mod = NULL;  /* a module of an earlier context, gone with it */
		k->ctx_id = id;
		atomic_store_explicit(&k->ctx, device_ctx_primary(dev), memory_order_relaxed);
		k->sms = device_kernel_sms(dev);
		err = k->mod ? 0 : device_kernel_load(k, why, sizeof(why));
		if (!err)
			err = device_selftest(dev, k, why, sizeof(why));
		if (err == -EBADMSG || err == -ENOEXEC) {
			if (k->mod)
				drv.module_unload(k->mod);
			k->mod = NULL;
		}
		device_ctx_leave(dev, prev);
	}
	device_capture_restore(mode);
	if (!err) {
		atomic_store_explicit(&k->state, GATHER_READY, memory_order_release);
		stats_set_text(STATS_GATHER, "kernel");
		log_verbose("device %d: the gather kernel loaded and passed its self-test; each copy's hits and "
			    "captures go in one launch", dev);
		return;
	}
	stats_set_text(STATS_GATHER, "batched copy");
	if (err == -EBADMSG || err == -ENOEXEC) {
		atomic_store_explicit(&k->state, GATHER_OFF, memory_order_release);
		log_verbose("device %d: the gather kernel %s; hits and captures use batched copies instead", dev, why);
	} else if (device_retry_failed(&k->retry)) {
		atomic_store_explicit(&k->state, GATHER_OFF, memory_order_release);
		log_verbose("device %d: the gather kernel's self-test could not run in %u attempts (%s); hits and "
			    "captures use batched copies instead", dev, k->retry.fails, why);
	} else {
		atomic_store_explicit(&k->state, GATHER_RETRY, memory_order_release);
		log_verbose("device %d: the gather kernel's self-test could not run (%s); batched copies until it "
			    "is tried again", dev, why);
	}
}

int device_gather_ready(int dev)
{
	struct device_kernel *k;
	int state;

	if (dev < 0 || dev >= DEVICE_MAX || device_open())
		return 0;
	k = &device_kernels[dev];
	state = atomic_load_explicit(&k->state, memory_order_acquire);
	if (state == GATHER_READY || state == GATHER_OFF)
		return state == GATHER_READY;
	pthread_once(&device_kernel_once, device_kernel_init);
	/* Another thread is loading or testing: batched copies meanwhile. */
	if (pthread_mutex_trylock(&k->lock))
		return 0;
	state = atomic_load_explicit(&k->state, memory_order_relaxed);
	if (state == GATHER_UNTRIED || (state == GATHER_RETRY && device_retry_due(&k->retry)))
		device_kernel_try(dev, k);
	state = atomic_load_explicit(&k->state, memory_order_relaxed);
	pthread_mutex_unlock(&k->lock);
	return state == GATHER_READY;
}

/*
 * After a failed launch: when device dev's primary context is no longer
 * the one the module was loaded in (a reset nobody told us of), forget the
 * kernel so that the next device_gather_ready loads it again.
 */
static void device_kernel_recheck(int dev, struct device_kernel *k)
{
	uint64_t id = 0;

	if (device_context_id(&id) || !id)
		return;
	pthread_mutex_lock(&k->lock);
	if (atomic_load_explicit(&k->state, memory_order_relaxed) == GATHER_READY && k->ctx_id && id != k->ctx_id) {
		log_verbose("device %d: its context changed under the gather kernel; it is loaded again", dev);
		device_kernel_drop(k);
	}
	pthread_mutex_unlock(&k->lock);
}

int device_gather(int dev, dev_ptr dst, uint64_t row, const struct dev_gather_entry *e, uint32_t n,
		  dev_stream s)
{
	struct dev_gather_params *p;
	struct device_kernel *k;
	CUcontext cur = NULL;
	CUfunction fn;
	int err;

	if (dev < 0 || dev >= DEVICE_MAX || n == 0)
		return -EINVAL;
	k = &device_kernels[dev];
	if (atomic_load_explicit(&k->state, memory_order_acquire) != GATHER_READY)
		return -ENOSYS;
	fn = atomic_load_explicit(&k->fn, memory_order_relaxed);
	/* The stream belongs to the current context; the kernel to the primary one. */
	if (drv.ctx_get_current(&cur) != CUDA_SUCCESS || cur != atomic_load_explicit(&k->ctx, memory_order_relaxed))
		return -EXDEV;
	p = device_params_get();
	if (!p)
		return -EAGAIN;
	err = device_gather_run(dev, k->sms, fn, p, dst, row, e, n, (CUstream)s,
				atomic_load_explicit(&k->mapped, memory_order_relaxed) ? -1 : 0);
	if (!err)
		stats_add(ST_GATHER_LAUNCHES, 1);
	else if (err != -EAGAIN && err != -E2BIG)
		device_kernel_recheck(dev, k);
	return err;
}
