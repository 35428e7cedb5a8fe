/*
 * core.c: configuration, device arenas, host memory registry, counters,
 * fault injection, the exit report and fork handling of the emulated device.
 *
 * Each device owns a memfd of FAKECUDA_MEM bytes mapped twice: a PROT_NONE
 * mapping whose addresses are handed to the program (a host read faults) and
 * a read-write mapping that only stream workers use. Allocation is first fit
 * over a sorted array of allocated blocks, 256-byte aligned; freeing removes
 * the block, so neighbouring free space coalesces by construction.
 */
#include "fakecuda.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct fc_state fc = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};
struct fc_counters fc_cnt;

static __thread struct fc_tls tls;
static pid_t fc_main_pid;

/* ---- per-API call counts and fault injection ---- */

#define FC_API_SLOTS 512
#define FC_FAIL_MAX 32

struct fc_api_slot {
	const char *_Atomic name;
	atomic_ullong calls;
	atomic_ullong injected;         /* calls of it failed by FAKECUDA_FAIL */
};

static struct fc_api_slot api_slots[FC_API_SLOTS];
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;

/* One FAKECUDA_FAIL item: NAME@N fails calls N, N+1, ...; NAME#N only
 * call N. */
struct fc_fail {
	char name[64];
	unsigned long long n;
	int only;
};
static struct fc_fail fails[FC_FAIL_MAX];
static int nfails;

static unsigned fc_hash(const char *s)
{
	unsigned h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h;
}

/* Finds or inserts the slot of NAME (open addressing, never removed). */
static struct fc_api_slot *api_slot(const char *name, int insert)
{
	unsigned i = fc_hash(name) % FC_API_SLOTS;
	unsigned probes;
	struct fc_api_slot *found = NULL;

	for (probes = 0; probes < FC_API_SLOTS; probes++, i = (i + 1) % FC_API_SLOTS) {
		const char *n = atomic_load(&api_slots[i].name);

		if (n && strcmp(n, name) == 0)
			return &api_slots[i];
		if (!n)
			break;
	}
	if (!insert || probes == FC_API_SLOTS)
		return NULL;
	pthread_mutex_lock(&api_lock);
	for (probes = 0; probes < FC_API_SLOTS; probes++, i = (i + 1) % FC_API_SLOTS) {
		const char *n = atomic_load(&api_slots[i].name);

		if (n && strcmp(n, name) == 0) {
			found = &api_slots[i];
			break;
		}
		if (!n) {
			atomic_store(&api_slots[i].name, name);
			found = &api_slots[i];
			break;
		}
	}
	pthread_mutex_unlock(&api_lock);
	return found;
}

static void spin_us(unsigned us)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000000LL + (b.tv_nsec - a.tv_nsec) / 1000 < (long long)us);
}

int fc_api_enter(const char *name)
{
	struct fc_api_slot *slot;
	unsigned long long n = 0;
	int i;

	fc_init();
	fc.used = 1;
	slot = api_slot(name, 1);
	if (slot)
		n = atomic_fetch_add(&slot->calls, 1) + 1;
	if (fc.cfg.call_us)
		spin_us(fc.cfg.call_us);
	for (i = 0; i < nfails; i++) {
		if (strcmp(fails[i].name, name) == 0 &&
		    (fails[i].only ? n == fails[i].n : n >= fails[i].n)) {
			atomic_fetch_add(&fc_cnt.injected_faults, 1);
			if (slot)
				atomic_fetch_add(&slot->injected, 1);
			return 1;
		}
	}
	return 0;
}

/* ---- configuration ---- */

/* Parses a size with an optional K/M/G/T suffix; 0 on a malformed value. */
static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	switch (toupper((unsigned char)*end)) {
	case 'T': v <<= 10; /* fall through */
	case 'G': v <<= 10; /* fall through */
	case 'M': v <<= 10; /* fall through */
	case 'K': v <<= 10; end++; break;
	case '\0': break;
	default: return 0;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	return *end ? 0 : (size_t)v;
}

/* Parses FAKECUDA_FAIL: a comma-separated list of NAME (every call fails),
 * NAME@N (calls from the Nth on) and NAME#N (the Nth call only; repeat the
 * item for several N). N counts from 1; 0 or garbage is read as 1. */
static void parse_fail(const char *spec)
{
	const char *p = spec;

	nfails = 0;
	while (*p && nfails < FC_FAIL_MAX) {
		size_t len = strcspn(p, ",@#");
		struct fc_fail *f = &fails[nfails];

		if (len && len < sizeof(f->name)) {
			memcpy(f->name, p, len);
			f->name[len] = '\0';
			f->n = 1;
			f->only = 0;
			p += len;
			if (*p == '@' || *p == '#') {
				f->only = *p == '#';
				f->n = strtoull(p + 1, NULL, 10);
				if (!f->n)
					f->n = 1;
			}
			nfails++;
		}
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
	}
}

/*
 * The index in names (NULL-terminated, in the order of the setting's enum)
 * of the value of the environment variable var; 0 when it is unset or
 * empty, and, with a one-line warning, when it is none of them.
 */
static int env_choice(const char *var, const char *const *names)
{
	const char *v = getenv(var);
	int i;

	if (!v || !*v)
		return 0;
	for (i = 0; names[i]; i++)
		if (strcmp(v, names[i]) == 0)
			return i;
	fprintf(stderr, "fakecuda: %s=%s is not one of", var, v);
	for (i = 0; names[i]; i++)
		fprintf(stderr, " %s", names[i]);
	fprintf(stderr, "; using %s\n", names[0]);
	return 0;
}

static void read_config(void)
{
	static const char *const prefaults[] = { "0", "1", "alloc", NULL };     /* enum fc_prefault */
	static const char *const kernels[] = { "ok", "broken", "none", NULL };   /* enum fc_kernel_mode */
	const char *v;

	fc.cfg.mem = 2ULL << 30;
	fc.cfg.devices = 1;
	if ((v = getenv("FAKECUDA_MEM")) && parse_size(v))
		fc.cfg.mem = parse_size(v);
	else if (v)
		fprintf(stderr, "fakecuda: FAKECUDA_MEM=%s is not a size (e.g. 512M); using 2G\n", v);
	fc.cfg.mem = (fc.cfg.mem + FC_ALIGN - 1) / FC_ALIGN * FC_ALIGN;
	if ((v = getenv("FAKECUDA_DEVICES")))
		fc.cfg.devices = atoi(v);
	if (fc.cfg.devices < 0)
		fc.cfg.devices = 0;
	if (fc.cfg.devices > FC_MAX_DEV)
		fc.cfg.devices = FC_MAX_DEV;
	if ((v = getenv("FAKECUDA_JITTER_US")))
		fc.cfg.jitter_us = (unsigned)strtoul(v, NULL, 10);
	if ((v = getenv("FAKECUDA_H2D_GBPS")))
		fc.cfg.h2d_gbps = strtod(v, NULL);
	if ((v = getenv("FAKECUDA_D2D_GBPS")))
		fc.cfg.d2d_gbps = strtod(v, NULL);
	if ((v = getenv("FAKECUDA_CALL_US")))
		fc.cfg.call_us = (unsigned)strtoul(v, NULL, 10);
	if ((v = getenv("FAKECUDA_FAIL")))
		parse_fail(v);
	if ((v = getenv("FAKECUDA_RT_VIA_DRIVER")))
		fc.cfg.rt_via_driver = strcmp(v, "1") == 0;
	fc.cfg.prefault = env_choice("FAKECUDA_PREFAULT", prefaults);
	fc.cfg.kernel = env_choice("FAKECUDA_KERNEL", kernels);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  /* Linux 5.14 */
#endif

/*
 * Makes the n bytes of the arena's read-write mapping at p resident: one
 * call where the kernel has MADV_POPULATE_WRITE, else a touch of each page,
 * a write where nothing can be in the pages yet (write), else a read (its
 * first write then only maps the page writable).
 */
static void pages_populate(char *p, size_t n, int write)
{
	long page = sysconf(_SC_PAGESIZE);

	if (madvise(p, n, MADV_POPULATE_WRITE) == 0)
		return;
	if (page <= 0)
		page = 4096;
	for (size_t off = 0; off < n; off += (size_t)page) {
		if (write)
			((volatile char *)p)[off] = 0;
		else
			(void)((volatile char *)p)[off];
	}
}

/*
 * FAKECUDA_PREFAULT=1: makes the whole arena resident now, as a GPU's
 * memory is when allocated, so that no copy pays the first touch of its
 * pages later (a page fault per 4 KiB of the memfd, about 1 GB/s here).
 */
static void arena_prefault(struct fc_device *dv)
{
	pages_populate(dv->rw_base, dv->cap, 1);
}

/*
 * FAKECUDA_PREFAULT=alloc: makes the pages of [off, off + size) of the
 * arena resident, as cudaMalloc's memory is when it returns, in whole
 * FC_RESIDENT_CHUNKs, each once (memory freed and allocated again is
 * resident already). Without MADV_POPULATE_WRITE each page is read, not
 * written: a write could race with the workers' copies into a
 * neighbouring block of the chunk. Contents are left as they are. Called
 * without fc.lock: a chunk another thread is making resident is skipped,
 * and a page of it not resident yet is faulted in as it would be without
 * this.
 */
static void arena_populate(struct fc_device *dv, size_t off, size_t size)
{
	for (size_t c = off / FC_RESIDENT_CHUNK; c * FC_RESIDENT_CHUNK < off + size; c++) {
		size_t b = c * FC_RESIDENT_CHUNK, n = dv->cap - b < FC_RESIDENT_CHUNK ? dv->cap - b : FC_RESIDENT_CHUNK;

		if (!__atomic_exchange_n(&dv->resident[c], 1, __ATOMIC_RELAXED))
			pages_populate(dv->rw_base + b, n, 0);
	}
}

/* Creates the arena of device D: a memfd mapped no-access and read-write. */
static int device_init(int d)
{
	struct fc_device *dv = &fc.dev[d];
	char name[32];
	int err = 0;

	snprintf(name, sizeof(name), "fakecuda-dev%d", d);
	dv->cap = fc.cfg.mem;
	dv->fd = memfd_create(name, MFD_CLOEXEC);
	if (dv->fd < 0)
		return -errno;
	if (ftruncate(dv->fd, (off_t)dv->cap) < 0) {
		err = -errno;
		goto out_close;
	}
	dv->none_base = mmap(NULL, dv->cap, PROT_NONE, MAP_SHARED | MAP_NORESERVE, dv->fd, 0);
	if (dv->none_base == MAP_FAILED) {
		err = -errno;
		goto out_close;
	}
	dv->rw_base = mmap(NULL, dv->cap, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, dv->fd, 0);
	if (dv->rw_base == MAP_FAILED) {
		err = -errno;
		goto out_unmap;
	}
	if (fc.cfg.prefault == FC_PREFAULT_ARENA)
		arena_prefault(dv);
	if (fc.cfg.prefault == FC_PREFAULT_ALLOC &&
	    !(dv->resident = calloc(dv->cap / FC_RESIDENT_CHUNK + 1, 1))) {
		err = -ENOMEM;
		munmap(dv->rw_base, dv->cap);
		dv->rw_base = NULL;
		goto out_unmap;
	}
	dv->ctx.dev = d;
	dv->pool.dev = d;
	dv->pool.reuse[0] = dv->pool.reuse[1] = dv->pool.reuse[2] = 1;
	return 0;
out_unmap:
	munmap(dv->none_base, dv->cap);
	dv->none_base = NULL;
out_close:
	close(dv->fd);
	dv->fd = -1;
	return err;
}

void fc_init(void)
{
	int d;

	if (__atomic_load_n(&fc.inited, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&fc.lock);
	if (!fc.inited) {
		read_config();
		for (d = 0; d < fc.cfg.devices; d++) {
			if (device_init(d) < 0) {
				fprintf(stderr, "fakecuda: cannot map %zu bytes for device %d\n",
					fc.cfg.mem, d);
				fc.cfg.devices = d;
				break;
			}
		}
		__atomic_store_n(&fc.inited, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&fc.lock);
}

struct fc_tls *fc_tls_get(void)
{
	if (tls.gen != fc.gen) {
		memset(&tls, 0, sizeof(tls));
		tls.gen = fc.gen;
	}
	return &tls;
}

int fc_cur_dev(void)
{
	struct fc_tls *t = fc_tls_get();

	return t->ctx ? t->ctx->dev : t->dev;
}

int fc_pool_dev(const struct CUmemPoolHandle_st *pool)
{
	int d;

	for (d = 0; d < fc.cfg.devices; d++)
		if (pool == &fc.dev[d].pool)
			return d;
	return -1;
}

/* ---- device memory ---- */

int fc_pitch_size(size_t width, size_t height, size_t *pitch, size_t *bytes)
{
	size_t p, n;

	if (width > SIZE_MAX - 511)
		return -EINVAL;
	p = (width + 511) / 512 * 512;
	if (__builtin_mul_overflow(p, height, &n))
		return -EINVAL;
	*pitch = p;
	*bytes = n ? n : 1;
	return 0;
}

void fc_alloc_account(long long delta)
{
	unsigned long long now = atomic_fetch_add(&fc_cnt.alloc_bytes, (unsigned long long)delta)
				 + (unsigned long long)delta;
	unsigned long long peak = atomic_load(&fc_cnt.peak_alloc);

	while (now > peak && !atomic_compare_exchange_weak(&fc_cnt.peak_alloc, &peak, now))
		;
}

/* Returns the index of the first block whose offset is >= off. */
static size_t block_lower(struct fc_device *dv, size_t off)
{
	size_t lo = 0, hi = dv->nblocks;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (dv->blocks[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static long block_find_locked(int d, const void *p);

/* First-fit allocation in device D's arena, the block starting at a
 * multiple of ALIGN (a multiple of FC_ALIGN). Blocks of module variables
 * are not counted as allocations; neither they nor physical memory of
 * cuMemCreate can be freed with cudaFree. */
static int dev_alloc(int d, size_t size, size_t align, int internal, void **out)
{
	struct fc_device *dv;
	size_t need, prev_end = 0, start = 0, i;
	int err = -ENOMEM;

	if (d < 0 || d >= fc.cfg.devices)
		return -ENODEV;
	need = (size + FC_ALIGN - 1) / FC_ALIGN * FC_ALIGN;
	if (!need)
		need = FC_ALIGN;
	dv = &fc.dev[d];
	pthread_mutex_lock(&fc.lock);
	if (need > dv->cap - dv->used)
		goto out_unlock;
	for (i = 0; i <= dv->nblocks; i++) {
		size_t next = i < dv->nblocks ? dv->blocks[i].off : dv->cap;

		start = (prev_end + align - 1) / align * align;
		if (start <= next && next - start >= need)
			break;
		if (i < dv->nblocks)
			prev_end = dv->blocks[i].off + dv->blocks[i].size;
	}
	if (i > dv->nblocks)
		goto out_unlock;
	if (dv->nblocks == dv->blocks_cap) {
		size_t ncap = dv->blocks_cap ? dv->blocks_cap * 2 : 64;
		struct fc_block *nb = realloc(dv->blocks, ncap * sizeof(*nb));

		if (!nb)
			goto out_unlock;
		dv->blocks = nb;
		dv->blocks_cap = ncap;
	}
	memmove(&dv->blocks[i + 1], &dv->blocks[i], (dv->nblocks - i) * sizeof(*dv->blocks));
	dv->blocks[i].off = start;
	dv->blocks[i].size = need;
	dv->blocks[i].asked = size;
	dv->blocks[i].internal = internal;
	dv->blocks[i].ctx = internal ? NULL : fc_ctx_owner(fc_tls_get()->ctx);
	dv->nblocks++;
	dv->used += need;
	*out = dv->none_base + start;
	if (internal != FC_BLOCK_VAR)
		fc_alloc_account((long long)need);
	err = 0;
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	if (err == -ENOMEM && internal != FC_BLOCK_VAR)
		atomic_fetch_add(&fc_cnt.oom_errors, 1);
	if (!err && dv->resident)
		arena_populate(dv, start, need);
	return err;
}

int fc_dev_alloc(int d, size_t size, void **out)
{
	return dev_alloc(d, size, FC_ALIGN, 0, out);
}

int fc_dev_alloc_internal(int d, size_t size, void **out)
{
	return dev_alloc(d, size, FC_ALIGN, FC_BLOCK_VAR, out);
}

int fc_dev_alloc_phys(int d, size_t size, size_t align, size_t *off)
{
	void *p;
	int err = dev_alloc(d, size, align, FC_BLOCK_PHYS, &p);

	if (!err)
		*off = (size_t)((char *)p - fc.dev[d].none_base);
	return err;
}

void fc_dev_free_phys(int d, size_t off)
{
	struct fc_device *dv = &fc.dev[d];
	long i;

	pthread_mutex_lock(&fc.lock);
	i = block_find_locked(d, dv->none_base + off);
	if (i >= 0 && dv->blocks[i].off == off && dv->blocks[i].internal == FC_BLOCK_PHYS) {
		dv->used -= dv->blocks[i].size;
		fc_alloc_account(-(long long)dv->blocks[i].size);
		memmove(&dv->blocks[i], &dv->blocks[i + 1],
			(dv->nblocks - (size_t)i - 1) * sizeof(*dv->blocks));
		dv->nblocks--;
	}
	pthread_mutex_unlock(&fc.lock);
}

/* Finds the device whose arena holds p (no lock: arenas never move). */
static int dev_of(const void *p)
{
	int d;

	for (d = 0; d < fc.cfg.devices; d++) {
		const char *b = fc.dev[d].none_base;

		if (b && (const char *)p >= b && (const char *)p < b + fc.dev[d].cap)
			return d;
	}
	return -1;
}

void *fc_dev_rw(const void *p)
{
	int d = dev_of(p);
	void *rw;

	if (d < 0) {
		rw = fc_vmm_rw(p);
		return rw ? rw : (void *)(uintptr_t)p;
	}
	return fc.dev[d].rw_base + ((const char *)p - fc.dev[d].none_base);
}

/* Finds the block holding device address p (lock held): index or -1. */
static long block_find_locked(int d, const void *p)
{
	struct fc_device *dv = &fc.dev[d];
	size_t off = (size_t)((const char *)p - dv->none_base);
	size_t i = block_lower(dv, off + 1);

	if (i == 0)
		return -1;
	i--;
	if (off >= dv->blocks[i].off && off < dv->blocks[i].off + dv->blocks[i].size)
		return (long)i;
	return -1;
}

int fc_dev_block(const void *p, int *dev, void **base, size_t *size)
{
	int d = dev_of(p);
	long i;
	int err = -ENOENT;

	if (d < 0)
		return fc_vmm_range(p, dev, base, size);
	pthread_mutex_lock(&fc.lock);
	i = block_find_locked(d, p);
	if (i >= 0) {
		*dev = d;
		*base = fc.dev[d].none_base + fc.dev[d].blocks[i].off;
		*size = fc.dev[d].blocks[i].size;
		err = 0;
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

/* Frees the freeable blocks of device DV that belong to context C (NULL:
 * the primary context). */
static void free_ctx_blocks_locked(struct fc_device *dv, const struct CUctx_st *c)
{
	size_t i, kept = 0;

	for (i = 0; i < dv->nblocks; i++) {
		if (dv->blocks[i].internal || dv->blocks[i].ctx != c) {
			dv->blocks[kept++] = dv->blocks[i];
			continue;
		}
		dv->used -= dv->blocks[i].size;
		fc_alloc_account(-(long long)dv->blocks[i].size);
	}
	dv->nblocks = kept;
}

/* The primary context's allocations go; created contexts keep theirs. */
void fc_dev_reset(int dev)
{
	struct fc_device *dv = &fc.dev[dev];

	pthread_mutex_lock(&fc.lock);
	free_ctx_blocks_locked(dv, NULL);
	dv->ctx.gen++;
	dv->ctx.active = 0;
	pthread_mutex_unlock(&fc.lock);
}

void fc_ctx_free_blocks(struct CUctx_st *c)
{
	pthread_mutex_lock(&fc.lock);
	free_ctx_blocks_locked(&fc.dev[c->dev], c);
	pthread_mutex_unlock(&fc.lock);
}

struct CUctx_st *fc_ctx_owner(struct CUctx_st *c)
{
	return c && c->created ? c : NULL;
}

int fc_mem_ctx_check(const void *p, struct CUctx_st *c)
{
	int d = dev_of(p), err = 0;
	long i;

	if (d < 0)
		return 0;
	pthread_mutex_lock(&fc.lock);
	i = block_find_locked(d, p);
	if (i >= 0 && fc.dev[d].blocks[i].ctx != fc_ctx_owner(c))
		err = -EINVAL;
	pthread_mutex_unlock(&fc.lock);
	if (err)
		atomic_fetch_add(&fc_cnt.ctx_refusals, 1);
	return err;
}

int fc_dev_free(const void *p)
{
	int d = dev_of(p);
	struct fc_hostrange **pp, *h;
	struct fc_device *dv;
	long i;
	int err = -EINVAL;

	pthread_mutex_lock(&fc.lock);
	if (d < 0) {
		for (pp = &fc.hosts; (h = *pp); pp = &h->next) {
			if (h->kind == FC_MANAGED && h->base == p) {
				*pp = h->next;
				fc.dev[h->dev].used -= h->size;
				fc_alloc_account(-(long long)h->size);
				munmap(h->base, h->size);
				free(h);
				err = 0;
				break;
			}
		}
		goto out_unlock;
	}
	dv = &fc.dev[d];
	i = block_find_locked(d, p);
	if (i < 0 || dv->none_base + dv->blocks[i].off != (const char *)p ||
	    dv->blocks[i].internal)
		goto out_unlock;
	dv->used -= dv->blocks[i].size;
	fc_alloc_account(-(long long)dv->blocks[i].size);
	memmove(&dv->blocks[i], &dv->blocks[i + 1], (dv->nblocks - (size_t)i - 1) * sizeof(*dv->blocks));
	dv->nblocks--;
	err = 0;
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	return err;
}

void fc_dev_meminfo(int d, size_t *free_b, size_t *total)
{
	pthread_mutex_lock(&fc.lock);
	*total = fc.dev[d].cap;
	*free_b = fc.dev[d].cap - fc.dev[d].used;
	pthread_mutex_unlock(&fc.lock);
}

/* ---- host memory registry ---- */

struct fc_hostrange *fc_host_find_locked(const void *p)
{
	struct fc_hostrange *h;

	for (h = fc.hosts; h; h = h->next)
		if ((const char *)p >= h->base && (const char *)p < h->base + h->size)
			return h;
	return NULL;
}

int fc_mem_extent(const void *p, int *dev, const char **lo, const char **hi)
{
	int d = dev_of(p);
	long i;
	int err = -ENOENT;

	if (d < 0)
		return -ENOENT;
	pthread_mutex_lock(&fc.lock);
	i = block_find_locked(d, p);
	if (i >= 0) {
		*dev = d;
		*lo = fc.dev[d].none_base + fc.dev[d].blocks[i].off;
		*hi = *lo + fc.dev[d].blocks[i].asked;
		err = 0;
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_mem_classify(const void *p, size_t n, int *dev)
{
	int d = dev_of(p);
	struct fc_hostrange *h;
	int kind = FC_PAGEABLE;

	if (d < 0 && (kind = fc_vmm_classify(p, n, dev)) != -ENOENT)
		return kind;
	kind = FC_PAGEABLE;
	pthread_mutex_lock(&fc.lock);
	if (d >= 0) {
		long i = block_find_locked(d, p);
		struct fc_block *b = i >= 0 ? &fc.dev[d].blocks[i] : NULL;
		size_t off = (size_t)((const char *)p - fc.dev[d].none_base);

		kind = FC_DEVICE;
		if (!b || n > b->off + b->asked - off || off >= b->off + b->asked)
			kind = -EINVAL;
		if (dev)
			*dev = d;
	} else if ((h = fc_host_find_locked(p))) {
		kind = (int)h->kind;
		if (n > (size_t)(h->base + h->size - (const char *)p))
			kind = h->kind == FC_MANAGED ? -EINVAL : FC_PAGEABLE;
		if (dev)
			*dev = h->dev;
	}
	pthread_mutex_unlock(&fc.lock);
	return kind;
}

/* Records a host range (lock held by the caller). */
static int host_add_locked(char *base, size_t size, enum fc_mem_kind kind, int d, int owned,
			   unsigned flags)
{
	struct fc_hostrange *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->base = base;
	h->size = size;
	h->kind = kind;
	h->dev = d;
	h->owned = owned;
	h->flags = flags;
	h->next = fc.hosts;
	fc.hosts = h;
	return 0;
}

int fc_host_alloc(size_t size, unsigned flags, void **out)
{
	void *p;
	int err;

	if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
		return -EINVAL;
	if (!size)
		size = 1;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	pthread_mutex_lock(&fc.lock);
	err = host_add_locked(p, size, FC_PINNED, 0, 1, flags);
	pthread_mutex_unlock(&fc.lock);
	if (err) {
		munmap(p, size);
		return err;
	}
	*out = p;
	return 0;
}

int fc_managed_alloc(int d, size_t size, void **out)
{
	size_t need = (size + FC_ALIGN - 1) / FC_ALIGN * FC_ALIGN;
	void *p;
	int err = -ENOMEM;

	if (d < 0 || d >= fc.cfg.devices)
		return -ENODEV;
	if (!need)
		need = FC_ALIGN;
	pthread_mutex_lock(&fc.lock);
	if (need > fc.dev[d].cap - fc.dev[d].used)
		goto out_unlock;
	p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		goto out_unlock;
	err = host_add_locked(p, need, FC_MANAGED, d, 1, 0);
	if (err) {
		munmap(p, need);
		goto out_unlock;
	}
	fc.dev[d].used += need;
	fc_alloc_account((long long)need);
	*out = p;
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	if (err == -ENOMEM)
		atomic_fetch_add(&fc_cnt.oom_errors, 1);
	return err;
}

/* Removes the range starting at p of the given ownership; -ENOENT if none. */
static int host_remove(void *p, int owned)
{
	struct fc_hostrange **pp, *h;
	int err = -ENOENT;

	pthread_mutex_lock(&fc.lock);
	for (pp = &fc.hosts; (h = *pp); pp = &h->next) {
		if (h->base == p && h->kind == FC_PINNED && h->owned == owned) {
			*pp = h->next;
			if (owned)
				munmap(h->base, h->size);
			free(h);
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_host_free(void *p)
{
	return host_remove(p, 1);
}

int fc_host_register(void *p, size_t size, unsigned flags)
{
	struct fc_hostrange *h;
	int err = 0;

	if (!p || !size || dev_of(p) >= 0 || fc_vmm_reserved(p) ||
	    (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped |
				 cudaHostRegisterIoMemory | cudaHostRegisterReadOnly)))
		return -EINVAL;
	pthread_mutex_lock(&fc.lock);
	for (h = fc.hosts; h; h = h->next) {
		if ((char *)p < h->base + h->size && (char *)p + size > h->base) {
			err = -EEXIST;
			break;
		}
	}
	if (!err)
		err = host_add_locked(p, size, FC_PINNED, 0, 0, flags);
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_host_unregister(void *p)
{
	return host_remove(p, 0);
}

int fc_host_flags(const void *p, unsigned *flags)
{
	struct fc_hostrange *h;
	int err = -EINVAL;

	pthread_mutex_lock(&fc.lock);
	h = fc_host_find_locked(p);
	if (h && h->kind == FC_PINNED) {
		*flags = h->flags;
		err = 0;
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

/* ---- ground truth ---- */

#define FC_COUNTERS(X) \
	X(h2d_bytes) X(h2d_calls) X(d2d_bytes) X(d2d_calls) X(d2h_bytes) \
	X(d2h_calls) X(h2h_bytes) X(h2h_calls) X(memset_bytes) X(memset_calls) \
	X(alloc_bytes) X(peak_alloc) X(alloc_calls) X(free_calls) X(oom_errors) \
	X(injected_faults) X(graph_nodes_captured) X(graph_launches) \
	X(kernel_launches) X(kernel_bytes) X(kernel_faults) X(d2d_ns) \
	X(ops_copy) X(ops_batch) X(ops_kernel) X(ops_memset) X(ops_hostfn) \
	X(ops_event) X(ops_other) X(ctx_refusals)

FC_API unsigned long long fakecuda_counter(const char *name)
{
	struct fc_api_slot *slot;

	if (!name)
		return 0;
#define X(f) if (strcmp(name, #f) == 0) return atomic_load(&fc_cnt.f);
	FC_COUNTERS(X)
#undef X
	if (strcmp(name, "mem_capacity") == 0)
		return fc.cfg.mem;
	if (strcmp(name, "devices") == 0)
		return (unsigned long long)fc.cfg.devices;
	/* "injected:NAME": the calls of NAME that FAKECUDA_FAIL failed. */
	if (strncmp(name, "injected:", 9) == 0) {
		slot = api_slot(name + 9, 0);
		return slot ? atomic_load(&slot->injected) : 0;
	}
	slot = api_slot(name, 0);
	return slot ? atomic_load(&slot->calls) : 0;
}

/*
 * Test hook: replaces the FAKECUDA_FAIL list with spec (the same syntax;
 * "" or NULL fails nothing from now on). Call counts are kept, so NAME#N
 * names the Nth call since the start (fakecuda_counter(NAME) says how many
 * were made). Call it while no other thread calls the device. Returns the
 * number of items now in force.
 */
FC_API int fakecuda_fail(const char *spec)
{
	fc_init();
	parse_fail(spec ? spec : "");
	return nfails;
}

FC_API int fakecuda_write_report(const char *path)
{
	char buf[4096];
	const char *p;
	size_t o = 0;
	FILE *f;
	int i, first = 1;

	for (p = path; *p && o + 32 < sizeof(buf); p++) {
		if (p[0] == '%' && p[1] == 'p') {
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%d", (int)getpid());
			p++;
		} else {
			buf[o++] = *p;
		}
	}
	buf[o] = '\0';
	f = fopen(buf, "w");
	if (!f)
		return -errno;
	fprintf(f, "{\"fakecuda\": 1, \"pid\": %d, \"mem_capacity\": %zu, \"devices\": %d",
		(int)getpid(), fc.cfg.mem, fc.cfg.devices);
#define X(fld) fprintf(f, ", \"" #fld "\": %llu", atomic_load(&fc_cnt.fld));
	FC_COUNTERS(X)
#undef X
	fprintf(f, ", \"calls\": {");
	for (i = 0; i < FC_API_SLOTS; i++) {
		const char *n = atomic_load(&api_slots[i].name);

		if (!n)
			continue;
		fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", n, atomic_load(&api_slots[i].calls));
		first = 0;
	}
	/* Per entry point, the calls FAKECUDA_FAIL failed (those with any). */
	fprintf(f, "}, \"injected\": {");
	first = 1;
	for (i = 0; i < FC_API_SLOTS; i++) {
		const char *n = atomic_load(&api_slots[i].name);
		unsigned long long k = atomic_load(&api_slots[i].injected);

		if (!n || !k)
			continue;
		fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", n, k);
		first = 0;
	}
	fprintf(f, "}}\n");
	return fclose(f) ? -errno : 0;
}

/* Writes FAKECUDA_REPORT at exit: always in the first process, in a fork
 * child only if the child used the API. Makes no CUDA call, takes no lock. */
static void fc_atexit(void)
{
	const char *path = getenv("FAKECUDA_REPORT");

	if (!path || !*path)
		return;
	if (getpid() != fc_main_pid && !fc.used)
		return;
	if (fakecuda_write_report(path) < 0)
		fprintf(stderr, "fakecuda: cannot write FAKECUDA_REPORT=%s\n", path);
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&api_lock);
	pthread_mutex_lock(&fc.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&fc.lock);
	pthread_mutex_unlock(&api_lock);
}

/* The child gets a fresh, uninitialised emulation (its workers did not
 * survive fork): the next API call maps new arenas and rereads the
 * environment. The parent's mappings stay, still no-access. */
static void fork_child(void)
{
	unsigned gen = fc.gen + 1;
	int i;

	pthread_mutex_init(&api_lock, NULL);
	memset(&fc, 0, sizeof(fc));
	pthread_mutex_init(&fc.lock, NULL);
	pthread_cond_init(&fc.cond, NULL);
	fc.gen = gen;
	fc.is_child = 1;
	for (i = 0; i < FC_API_SLOTS; i++) {
		atomic_store(&api_slots[i].calls, 0);
		atomic_store(&api_slots[i].injected, 0);
	}
#define X(f) atomic_store(&fc_cnt.f, 0);
	FC_COUNTERS(X)
#undef X
	fc_stream_forget();
	fc_graph_forget();
	fc_symbols_forget();
	fc_kernel_forget();
	fc_vmm_forget();
}

__attribute__((constructor)) static void fc_constructor(void)
{
	fc_main_pid = getpid();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	atexit(fc_atexit);
}
