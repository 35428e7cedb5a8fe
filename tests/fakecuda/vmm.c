/*
 * vmm.c: virtual memory management of the emulated device (cuMemCreate,
 * cuMemAddressReserve, cuMemMap and the rest: what PyTorch's expandable
 * segments use).
 *
 * A reservation is two address ranges of the same size, both PROT_NONE
 * when reserved: the one handed to the program and a mirror only workers
 * use. Physical memory (cuMemCreate) is a 2 MiB-aligned block of the
 * device's arena memfd, counted like an allocation (capacity, alloc_bytes,
 * oom_errors) but not freeable with cudaFree, and kept by a device reset.
 * cuMemMap maps its pages into both ranges at the same offset, no-access
 * in the program's range (a host read still faults) and read-write in the
 * mirror, so a device address translates to the mirror by one offset,
 * across adjacent mappings too. Copies, memsets and the gather kernel need
 * read-write access granted with cuMemSetAccess first, as on CUDA.
 *
 * Allocation handles (CUmemGenericAllocationHandle) are the addresses of
 * struct fc_phys, always checked against the registry before use. One
 * mutex (vmm_lock) guards the lists; it may be taken before fc.lock,
 * never after it. cuMemUnmap waits for the device to finish its work
 * first, so a worker never touches pages that have gone.
 */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GRAN ((size_t)2 << 20)

/* Physical memory made by cuMemCreate. */
struct fc_phys {
	struct fc_phys *next;
	int dev;
	size_t off;     /* in the device's arena memfd */
	size_t size;
	int refs;       /* handle references: cuMemCreate, cuMemRetainAllocationHandle */
	int nmaps;      /* mappings of it */
};

/* A reserved address range and its workers' mirror. */
struct fc_vres {
	struct fc_vres *next;
	char *base;
	char *rw;
	size_t size;
};

/* One mapping of [offset, offset + size) of PHYS at BASE. */
struct fc_vmap {
	struct fc_vmap *next;
	struct fc_vres *res;
	char *base;
	size_t size, offset;
	struct fc_phys *phys;
	unsigned char access[FC_MAX_DEV]; /* CUmemAccess_flags per device */
};

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_phys *physs;
static struct fc_vres *ress;
static struct fc_vmap *maps;

void fc_vmm_forget(void)
{
	pthread_mutex_init(&vmm_lock, NULL);
	physs = NULL;
	ress = NULL;
	maps = NULL;
}

/* ---- lookups (vmm_lock held) ---- */

static struct fc_vres *res_find_locked(const void *p)
{
	struct fc_vres *r;

	for (r = ress; r; r = r->next)
		if ((const char *)p >= r->base && (const char *)p < r->base + r->size)
			return r;
	return NULL;
}

static struct fc_vmap *map_find_locked(const void *p)
{
	struct fc_vmap *m;

	for (m = maps; m; m = m->next)
		if ((const char *)p >= m->base && (const char *)p < m->base + m->size)
			return m;
	return NULL;
}

static struct fc_phys *phys_find_locked(CUmemGenericAllocationHandle h)
{
	struct fc_phys *ph;

	for (ph = physs; ph; ph = ph->next)
		if ((CUmemGenericAllocationHandle)(uintptr_t)ph == h)
			return ph;
	return NULL;
}

int fc_vmm_classify(const void *p, size_t n, int *dev)
{
	const char *c = p, *end;
	struct fc_vres *r;
	struct fc_vmap *m;
	int d = -1, kind = FC_DEVICE;

	pthread_mutex_lock(&vmm_lock);
	r = res_find_locked(p);
	if (!r) {
		kind = -ENOENT;
		goto out_unlock;
	}
	if (n > (size_t)(r->base + r->size - c)) {
		kind = -EINVAL;
		goto out_unlock;
	}
	end = c + (n ? n : 1);
	while (c < end) {
		m = map_find_locked(c);
		if (!m || (d >= 0 && m->phys->dev != d) ||
		    m->access[m->phys->dev] != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
			kind = -EINVAL;
			break;
		}
		d = m->phys->dev;
		c = m->base + m->size;
	}
	if (dev)
		*dev = d >= 0 ? d : 0;
out_unlock:
	pthread_mutex_unlock(&vmm_lock);
	return kind;
}

void *fc_vmm_rw(const void *p)
{
	struct fc_vres *r;
	void *rw = NULL;

	pthread_mutex_lock(&vmm_lock);
	r = res_find_locked(p);
	if (r)
		rw = r->rw + ((const char *)p - r->base);
	pthread_mutex_unlock(&vmm_lock);
	return rw;
}

int fc_vmm_range(const void *p, int *dev, void **base, size_t *size)
{
	struct fc_vmap *m;
	int err = -ENOENT;

	pthread_mutex_lock(&vmm_lock);
	m = map_find_locked(p);
	if (m) {
		*dev = m->phys->dev;
		*base = m->base;
		*size = m->size;
		err = 0;
	}
	pthread_mutex_unlock(&vmm_lock);
	return err;
}

int fc_vmm_reserved(const void *p)
{
	int found;

	pthread_mutex_lock(&vmm_lock);
	found = res_find_locked(p) != NULL;
	pthread_mutex_unlock(&vmm_lock);
	return found;
}

/* ---- entry points ---- */

/* Checks an allocation's properties: pinned memory on a device. */
static int prop_ok(const CUmemAllocationProp *prop)
{
	return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
	       prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
	       prop->location.id >= 0 && prop->location.id < fc.cfg.devices;
}

/* 2 MiB, minimum and recommended alike. */
FC_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
					      CUmemAllocationGranularity_flags option)
{
	DRV_ENTER("cuMemGetAllocationGranularity", 0);
	if (!granularity || !prop_ok(prop) || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
					       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = GRAN;
	return CUDA_SUCCESS;
}

/* Maps SIZE bytes no-access, aligned to ALIGN; at HINT when that is free. */
static char *map_none(size_t size, size_t align, const void *hint)
{
	char *p, *a;

	if (hint) {
		p = mmap((void *)(uintptr_t)hint, size, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == hint && (uintptr_t)p % align == 0)
			return p;
		if (p != MAP_FAILED)
			munmap(p, size);
	}
	p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	a = (char *)(((uintptr_t)p + align - 1) / align * align);
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + size, (size_t)(p + size + align - (a + size)));
	return a;
}

FC_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
				    unsigned long long flags)
{
	struct fc_vres *r;

	DRV_ENTER("cuMemAddressReserve", 0);
	if (!ptr || !size || size % GRAN || flags || (alignment & (alignment - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	if (alignment < GRAN)
		alignment = GRAN;
	r = calloc(1, sizeof(*r));
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->size = size;
	r->base = map_none(size, alignment, (const void *)(uintptr_t)addr);
	r->rw = r->base ? map_none(size, 4096, NULL) : NULL;
	if (!r->rw) {
		if (r->base)
			munmap(r->base, size);
		free(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&vmm_lock);
	r->next = ress;
	ress = r;
	pthread_mutex_unlock(&vmm_lock);
	*ptr = (CUdeviceptr)(uintptr_t)r->base;
	return CUDA_SUCCESS;
}

/* The whole reservation, with nothing mapped in it any more. */
FC_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct fc_vres **pp, *r;
	struct fc_vmap *m;
	CUresult res = CUDA_ERROR_INVALID_VALUE;

	DRV_ENTER("cuMemAddressFree", 0);
	pthread_mutex_lock(&vmm_lock);
	for (pp = &ress; (r = *pp); pp = &r->next) {
		if (r->base != (char *)(uintptr_t)ptr)
			continue;
		if (r->size != size)
			break;
		for (m = maps; m; m = m->next)
			if (m->res == r)
				break;
		if (m)
			break;
		*pp = r->next;
		munmap(r->base, r->size);
		munmap(r->rw, r->size);
		free(r);
		res = CUDA_SUCCESS;
		break;
	}
	pthread_mutex_unlock(&vmm_lock);
	return res;
}

FC_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			    const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct fc_phys *ph;
	int err;

	DRV_ENTER_ALLOC("cuMemCreate");
	if (!handle || !prop_ok(prop) || !size || size % GRAN || flags)
		return CUDA_ERROR_INVALID_VALUE;
	atomic_fetch_add(&fc_cnt.alloc_calls, 1);
	ph = calloc(1, sizeof(*ph));
	if (!ph)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ph->dev = prop->location.id;
	ph->size = size;
	ph->refs = 1;
	err = fc_dev_alloc_phys(ph->dev, size, GRAN, &ph->off);
	if (err) {
		free(ph);
		return fc_drv_err(err);
	}
	pthread_mutex_lock(&vmm_lock);
	ph->next = physs;
	physs = ph;
	pthread_mutex_unlock(&vmm_lock);
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
	return CUDA_SUCCESS;
}

/* Frees physical memory nobody holds or maps any more (vmm_lock held). */
static void phys_put_locked(struct fc_phys *ph)
{
	struct fc_phys **pp;

	if (ph->refs || ph->nmaps)
		return;
	for (pp = &physs; *pp != ph; pp = &(*pp)->next)
		;
	*pp = ph->next;
	fc_dev_free_phys(ph->dev, ph->off);
	free(ph);
}

/* Drops a handle reference; the memory goes once it is unmapped too. */
FC_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct fc_phys *ph;
	CUresult res = CUDA_ERROR_INVALID_VALUE;

	DRV_ENTER("cuMemRelease", 0);
	pthread_mutex_lock(&vmm_lock);
	ph = phys_find_locked(handle);
	if (ph && ph->refs > 0) {
		atomic_fetch_add(&fc_cnt.free_calls, 1);
		ph->refs--;
		phys_put_locked(ph);
		res = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&vmm_lock);
	return res;
}

FC_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	struct fc_vmap *m;
	CUresult res = CUDA_ERROR_INVALID_VALUE;

	DRV_ENTER("cuMemRetainAllocationHandle", 0);
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&vmm_lock);
	m = map_find_locked(addr);
	if (m) {
		m->phys->refs++;
		*handle = (CUmemGenericAllocationHandle)(uintptr_t)m->phys;
		res = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&vmm_lock);
	return res;
}

FC_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
						       CUmemGenericAllocationHandle handle)
{
	struct fc_phys *ph;
	int dev = -1;

	DRV_ENTER("cuMemGetAllocationPropertiesFromHandle", 0);
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&vmm_lock);
	ph = phys_find_locked(handle);
	if (ph && ph->refs > 0)
		dev = ph->dev;
	pthread_mutex_unlock(&vmm_lock);
	if (dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = dev;
	return CUDA_SUCCESS;
}

/* Maps SIZE bytes of FD at OFFSET over P with PROT (MAP_FIXED). */
static int map_fixed(char *p, size_t size, int prot, int fd, size_t offset)
{
	void *q = mmap(p, size, prot, MAP_SHARED | MAP_FIXED, fd, (off_t)offset);

	return q == MAP_FAILED ? -ENOMEM : 0;
}

/* Puts back the reserved, no-access state of [p, p + size). */
static void map_reserved(char *p, size_t size)
{
	mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

/* Inside one reservation, granularity-aligned, over nothing mapped yet;
 * the new mapping grants no access until cuMemSetAccess. */
FC_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			 CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	char *p = (char *)(uintptr_t)ptr;
	struct fc_phys *ph;
	struct fc_vres *r;
	struct fc_vmap *m, *nm;
	CUresult res = CUDA_ERROR_INVALID_VALUE;

	DRV_ENTER("cuMemMap", 0);
	if (!size || flags || ptr % GRAN || size % GRAN || offset % GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	nm = calloc(1, sizeof(*nm));
	if (!nm)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&vmm_lock);
	ph = phys_find_locked(handle);
	if (!ph || !ph->refs) {
		res = CUDA_ERROR_INVALID_HANDLE;
		goto out_unlock;
	}
	r = res_find_locked(p);
	if (!r || size > (size_t)(r->base + r->size - p) || offset > ph->size ||
	    size > ph->size - offset)
		goto out_unlock;
	for (m = maps; m; m = m->next)
		if (m->base < p + size && p < m->base + m->size)
			goto out_unlock;
	if (map_fixed(p, size, PROT_NONE, fc.dev[ph->dev].fd, ph->off + offset) ||
	    map_fixed(r->rw + (p - r->base), size, PROT_READ | PROT_WRITE, fc.dev[ph->dev].fd,
		      ph->off + offset)) {
		map_reserved(p, size);
		map_reserved(r->rw + (p - r->base), size);
		res = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_unlock;
	}
	nm->res = r;
	nm->base = p;
	nm->size = size;
	nm->offset = offset;
	nm->phys = ph;
	ph->nmaps++;
	nm->next = maps;
	maps = nm;
	nm = NULL;
	res = CUDA_SUCCESS;
out_unlock:
	pthread_mutex_unlock(&vmm_lock);
	free(nm);
	return res;
}

/* Unmaps every mapping in [ptr, ptr + size), which must cover each one it
 * touches entirely, after the devices concerned have finished their work. */
FC_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	char *p = (char *)(uintptr_t)ptr;
	struct fc_vmap **pp, *m;
	unsigned devs = 0;
	int found = 0, d;

	DRV_ENTER("cuMemUnmap", 0);
	if (!size || ptr % GRAN || size % GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&vmm_lock);
	for (m = maps; m; m = m->next) {
		if (m->base < p + size && p < m->base + m->size) {
			if (m->base < p || m->base + m->size > p + size) {
				pthread_mutex_unlock(&vmm_lock);
				return CUDA_ERROR_INVALID_VALUE;
			}
			devs |= 1u << m->phys->dev;
			found = 1;
		}
	}
	pthread_mutex_unlock(&vmm_lock);
	if (!found)
		return CUDA_ERROR_INVALID_VALUE;
	for (d = 0; d < fc.cfg.devices; d++)
		if (devs & (1u << d))
			fc_device_sync(d);
	pthread_mutex_lock(&vmm_lock);
	for (pp = &maps; (m = *pp);) {
		if (m->base >= p && m->base + m->size <= p + size) {
			*pp = m->next;
			map_reserved(m->base, m->size);
			map_reserved(m->res->rw + (m->base - m->res->base), m->size);
			m->phys->nmaps--;
			phys_put_locked(m->phys);
			free(m);
			continue;
		}
		pp = &m->next;
	}
	pthread_mutex_unlock(&vmm_lock);
	return CUDA_SUCCESS;
}

/* Grants access to every mapping in the range, which must be mapped
 * throughout; only device locations, read or read-write or none. */
FC_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	char *p = (char *)(uintptr_t)ptr, *c;
	struct fc_vmap *m;
	size_t i;
	CUresult res = CUDA_SUCCESS;

	DRV_ENTER("cuMemSetAccess", 0);
	if (!size || !desc || !count || ptr % GRAN || size % GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < count; i++)
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
		    desc[i].location.id >= fc.cfg.devices ||
		    (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
		     desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		     desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
			return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&vmm_lock);
	for (c = p; c < p + size; c = m->base + m->size) {
		m = map_find_locked(c);
		if (!m || m->base + m->size > p + size) {
			res = CUDA_ERROR_INVALID_VALUE;
			goto out_unlock;
		}
	}
	for (c = p; c < p + size; c = m->base + m->size) {
		m = map_find_locked(c);
		for (i = 0; i < count; i++)
			m->access[desc[i].location.id] = (unsigned char)desc[i].flags;
	}
out_unlock:
	pthread_mutex_unlock(&vmm_lock);
	return res;
}

FC_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
	struct fc_vmap *m;
	CUresult res = CUDA_ERROR_INVALID_VALUE;

	DRV_ENTER("cuMemGetAccess", 0);
	if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    location->id < 0 || location->id >= fc.cfg.devices)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&vmm_lock);
	m = map_find_locked((const void *)(uintptr_t)ptr);
	if (m) {
		*flags = m->access[location->id];
		res = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&vmm_lock);
	return res;
}
