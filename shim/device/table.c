/*
 * table: where one gather launch finds its entries, and the launch's
 * shape. device_gather_shape cuts the entries into units and sizes the
 * grid from them and the multiprocessor count; device_gather_table writes
 * the entries and the warps' starts. The table goes inside the kernel's
 * parameter when it fits; otherwise into one of a few page-locked host
 * buffers per device, mapped into the device's address space, which the
 * kernel reads as it runs (nothing is uploaded: no host-to-device byte of
 * the pool's own). A buffer is written only once the event recorded
 * behind the last launch that read it has completed. device.h states the
 * layout and the contract; device_impl.h the buffers' part of it.
 */
#include "device/device.h"

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "core/log.h"
#include "core/stats.h"
#include "device/device_impl.h"

#define DEVICE_TABLES 16                /* mapped tables per device: launches in flight that need one */
#define DEVICE_TABLE_MIN (64 * 1024)    /* the smallest mapped table made */

_Static_assert(sizeof(struct dev_gather_entry) == 16, "a gather entry is 16 bytes");
_Static_assert(sizeof(struct dev_gather_start) == 8, "a warp start is 8 bytes");
_Static_assert(offsetof(struct dev_gather_params, inline_table) == 48, "the inline table at 48");
_Static_assert(sizeof(struct dev_gather_params) == 48 + DEV_GATHER_INLINE, "the parameter's size");
_Static_assert(DEV_GATHER_UNIT % 16 == 0, "units keep an entry's alignment");

/* The units of entry e: its bytes in DEV_GATHER_UNIT pieces, at least one. */
static uint64_t device_entry_units(const struct dev_gather_entry *e, uint64_t row)
{
	uint64_t len = (uint64_t)(e->nrows_dir & ~DEV_GATHER_CAPTURE) * row;

	return len ? (len + DEV_GATHER_UNIT - 1) / DEV_GATHER_UNIT : 1;
}

int device_gather_shape(struct dev_gather_shape *sh, const struct dev_gather_entry *e, uint32_t n,
			uint64_t row, uint32_t sms)
{
	uint64_t units = 0, most = (uint64_t)(sms ? sms : 1) * DEV_GATHER_WARPS_PER_SM, working;
	int one_each = 1;

	if (!n || !row || row >> 33)     /* rows < 2^31: their bytes fit in 64 bits */
		return -E2BIG;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t u = device_entry_units(&e[i], row);

		units += u;
		one_each &= u == 1;
	}
	sh->units = units;
	sh->per_warp = (units + most - 1) / most;
	working = (units + sh->per_warp - 1) / sh->per_warp;
	sh->warps = one_each ? 0 : working;
	sh->blocks = (working + DEV_GATHER_THREADS / 32 - 1) / (DEV_GATHER_THREADS / 32);
	sh->table_bytes = (uint64_t)n * sizeof(*e) + sh->warps * sizeof(struct dev_gather_start);
	return sh->per_warp > UINT32_MAX || sh->warps > UINT32_MAX ? -E2BIG : 0;
}

void device_gather_table(const struct dev_gather_shape *sh, const struct dev_gather_entry *e, uint32_t n,
			 uint64_t row, void *t)
{
	struct dev_gather_start *st = (struct dev_gather_start *)(void *)((char *)t + (uint64_t)n * sizeof(*e));
	uint64_t first = 0, w = 0;

	memcpy(t, e, (uint64_t)n * sizeof(*e));
	/* Warp w begins at unit w * per_warp: the entry holding it, and its unit there. */
	for (uint32_t i = 0; i < n && w < sh->warps; i++) {
		uint64_t u = device_entry_units(&e[i], row);

		for (; w < sh->warps && w * sh->per_warp < first + u; w++)
			st[w] = (struct dev_gather_start){ i, (uint32_t)(w * sh->per_warp - first) };
		first += u;
	}
}

/*
 * One mapped table: host memory of cap bytes and its device address, and
 * the event recorded behind the last launch that read it. busy while a
 * thread writes it and launches; recorded once an event guards it.
 */
struct device_table {
	void *host;
	dev_ptr dptr;
	uint64_t cap;
	CUevent ev;
	int busy;
	int recorded;
};

struct device_tables {
	pthread_mutex_t lock;
	struct device_table t[DEVICE_TABLES];
	int off;                /* mapping is not possible in this context: not tried again */
};

static struct device_tables device_tables[DEVICE_MAX];
static pthread_once_t device_tables_once = PTHREAD_ONCE_INIT;

static void device_tables_init(void)
{
	for (int i = 0; i < DEVICE_MAX; i++)
		pthread_mutex_init(&device_tables[i].lock, NULL);
}

/* Whether table t can be written now: no launch reads it any more. Lock held. */
static int device_table_free(struct device_table *t)
{
	if (t->busy)
		return 0;
	if (t->recorded && drv.event_query(t->ev) != CUDA_SUCCESS)
		return 0;
	t->recorded = 0;
	return 1;
}

/* Makes t hold at least bytes (its old memory, if any, no longer read). Lock held. */
static int device_table_grow(struct device_tables *ts, struct device_table *t, uint64_t bytes)
{
	CUdeviceptr d = 0;
	uint64_t cap = DEVICE_TABLE_MIN;
	void *host = NULL;
	CUresult r;

	while (cap < bytes)
		cap *= 2;
	if (!t->ev && device_own(drv.event_create(&t->ev, CU_EVENT_DISABLE_TIMING)))
		return -EAGAIN;
	r = drv.mem_host_alloc(&host, (size_t)cap, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
	if (r == CUDA_SUCCESS) {
		r = drv.mem_host_get_device_pointer(&d, host, 0);
		if (r != CUDA_SUCCESS)
			drv.mem_free_host(host);
	}
	if (r != CUDA_SUCCESS) {
		device_own(r);
		if (r != CUDA_ERROR_OUT_OF_MEMORY && !ts->off) {
			ts->off = 1;
			log_verbose("the gather kernel cannot map host memory (%s); gathers too large for "
				    "its parameter use batched copies", device_err_name(r));
		}
		return -EAGAIN;
	}
	if (t->host)
		drv.mem_free_host(t->host);
	t->host = host;
	t->dptr = (dev_ptr)d;
	t->cap = cap;
	return 0;
}

struct device_table *device_table_take(int dev, uint64_t bytes, void **host, dev_ptr *dptr)
{
	struct device_tables *ts;
	struct device_table *t = NULL;

	if (dev < 0 || dev >= DEVICE_MAX || !drv.mem_host_alloc || !drv.mem_free_host ||
	    !drv.mem_host_get_device_pointer)
		return NULL;
	pthread_once(&device_tables_once, device_tables_init);
	ts = &device_tables[dev];
	pthread_mutex_lock(&ts->lock);
	if (ts->off)
		goto out;
	for (int i = 0; i < DEVICE_TABLES; i++) {
		struct device_table *c = &ts->t[i];

		if (!device_table_free(c))
			continue;
		if (c->cap >= bytes) {
			t = c;
			break;
		}
		if (!t || c->cap > t->cap)
			t = c;          /* the largest free one, to grow */
	}
	if (t && t->cap < bytes && device_table_grow(ts, t, bytes))
		t = NULL;
	if (t) {
		t->busy = 1;
		*host = t->host;
		*dptr = t->dptr;
	}
out:
	pthread_mutex_unlock(&ts->lock);
	return t;
}

void device_table_give(int dev, struct device_table *t, CUstream s, int launched)
{
	struct device_tables *ts = &device_tables[dev];
	int recorded = 0;

	if (launched) {
		stats_add(ST_DEVICE_OPS, 1);
		recorded = device_own(drv.event_record(t->ev, s)) == 0;
		/* Without the event, wait until the launch has read the table. */
		if (!recorded)
			device_own(drv.stream_synchronize(s));
	}
	pthread_mutex_lock(&ts->lock);
	t->recorded = recorded;
	t->busy = 0;
	pthread_mutex_unlock(&ts->lock);
}

void device_table_forget(int dev)
{
	struct device_tables *ts;

	pthread_once(&device_tables_once, device_tables_init);
	ts = &device_tables[dev];
	pthread_mutex_lock(&ts->lock);
	/* Their memory and events went with the context: dropped, never freed
	 * (the addresses may belong to someone else by now). */
	memset(ts->t, 0, sizeof(ts->t));
	ts->off = 0;
	pthread_mutex_unlock(&ts->lock);
}

void device_table_atfork_child(void)
{
	for (int i = 0; i < DEVICE_MAX; i++) {
		pthread_mutex_init(&device_tables[i].lock, NULL);
		memset(device_tables[i].t, 0, sizeof(device_tables[i].t));
		device_tables[i].off = 0;
	}
}
