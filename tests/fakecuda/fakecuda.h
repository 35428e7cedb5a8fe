/*
 * fakecuda.h: the internal contract of the emulated CUDA device.
 *
 * One shared object (soname libcudart.so.13, also reached as libcuda.so.1)
 * emulates the CUDA runtime and driver on the host, strictly enough that a
 * program which forgets a wait, reads device memory from the host or relies
 * on luck fails. The engine:
 *
 *   core.c       configuration, devices and their memory arenas, the host
 *                memory registry (pinned, managed), counters, the exit
 *                report, fault injection, fork handling.
 *   stream.c     the stream engine: streams (one worker thread each),
 *                the default streams' ordering, jitter, waits, events.
 *   enqueue.c    what is put on a stream: copies, memsets, frees, host
 *                functions, callbacks, launches, graph replays.
 *   graph.c      stream capture and graphs.
 *   exec_copy.c  the copy executor: copies and memsets described and
 *                performed at the cost model's link rates.
 *   exec_gather.c the gather executor (the launch is kernel.c's).
 *
 * (stream_impl.h is what those five share, internal to them.)
 *
 * The entry points, one API family per file (cuda* in rt_*.c, cu* in
 * drv_*.c and the two driver-only families):
 *
 *   rt_error.c   the runtime's prologue, error codes and last error.
 *   rt_device.c  devices, peers, limits.
 *   rt_memory.c  allocations, host memory, pointer queries, pools, IPC.
 *   rt_copy.c    copies and memsets.
 *   rt_stream.c  streams, events, host functions and callbacks.
 *   rt_graph.c   stream capture and graphs.
 *   rt_module.c  registration, module variables, kernels, driver entry
 *                points (cudaGetDriverEntryPoint).
 *   rt_driver.c  the runtime through the driver (FAKECUDA_RT_VIA_DRIVER).
 *   drv_entry.c  the driver's prologue, error codes and strings,
 *                cuGetProcAddress and its table, cuGetExportTable (no table).
 *   drv_device.c initialisation, devices, contexts.
 *   drv_memory.c allocations, host memory, pointer attributes.
 *   drv_copy.c   copies and memsets.
 *   drv_stream.c streams, events, host functions, capture.
 *   kernel.c     modules and the one kernel emulated (vrampool_gather).
 *   vmm.c        virtual memory management (cuMemCreate, cuMemMap, ...).
 *
 * Invariants: one global mutex (fc.lock) guards every structure below;
 * workers never hold it while they copy or sleep. Device addresses handed to
 * the program lie in a no-access mapping; only workers touch device bytes,
 * through a second read-write mapping of the same memfd (fc_dev_rw).
 * Inside the emulation, functions return 0 or a negative errno; the entry
 * points convert to cudaError_t / CUresult (fc_rt_err, fc_drv_err).
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The driver exports its deprecated entry points too (PyCUDA links some). */
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <cuda_runtime_api.h>

#define FC_API __attribute__((visibility("default")))
#define FC_MAX_DEV 16
#define FC_ALIGN 256

/* What a host or device address is, as far as the emulation knows. */
enum fc_mem_kind {
	FC_PAGEABLE = 0, /* ordinary host memory, read or written at call time */
	FC_PINNED,       /* cudaHostAlloc, cudaMallocHost, cudaHostRegister */
	FC_DEVICE,       /* inside a device arena: no host access */
	FC_MANAGED,      /* cudaMallocManaged: host-visible, counted as device */
};

/* Ground-truth counters; every field is read without the lock. */
struct fc_counters {
	atomic_ullong h2d_bytes, h2d_calls;
	atomic_ullong d2d_bytes, d2d_calls;
	atomic_ullong d2h_bytes, d2h_calls;
	atomic_ullong h2h_bytes, h2h_calls;
	atomic_ullong memset_bytes, memset_calls;
	atomic_ullong alloc_bytes, peak_alloc, alloc_calls, free_calls;
	atomic_ullong oom_errors, injected_faults;
	atomic_ullong graph_nodes_captured, graph_launches;
	atomic_ullong kernel_launches, kernel_bytes, kernel_faults;
	/* Wall time the stream workers spent on device-to-device copies and
	 * gathers (the cost model's sleep and the first touch of memory included). */
	atomic_ullong d2d_ns;
	/* Stream operations by kind, counted when submitted to run (a graph
	 * replay's nodes at replay): a batch is one operation. */
	atomic_ullong ops_copy, ops_batch, ops_kernel, ops_memset, ops_hostfn, ops_event, ops_other;
	/* Accesses refused because the memory belongs to another context
	 * (copies and memsets at the call, gather launches on the worker). */
	atomic_ullong ctx_refusals;
};

#define FC_BLOCK_VAR 1   /* backs a registered __device__ variable */
#define FC_BLOCK_PHYS 2  /* physical memory of cuMemCreate */

/* An allocated extent of a device arena, [off, off + size). */
struct fc_block {
	size_t off;
	size_t size;
	size_t asked;
	int internal;    /* FC_BLOCK_VAR or FC_BLOCK_PHYS: not freeable with cudaFree */
	struct CUctx_st *ctx; /* the created context it was allocated in; NULL: the primary */
};

/* The one memory pool of a device (cudaMemPool_t): stream-ordered
 * allocations from it are ordinary arena allocations. */
struct CUmemPoolHandle_st {
	int dev;
	int reuse[3];    /* cudaMemPoolReuse* attributes 1..3 */
	unsigned long long release_threshold;
};

#define FC_NLIMITS 7

/* A context (CUcontext): the primary context of a device, or one of its
 * own made by cuCtxCreate (drv_context.c), never freed (a destroyed one
 * stays, marked, so that a stale handle is recognised). */
struct CUctx_st {
	int dev;
	int refs;
	atomic_int active;       /* used since the last reset (cuDevicePrimaryCtxGetState); set by any thread */
	unsigned long long gen;  /* bumped by cudaDeviceReset (cuCtxDestroy); part of cuCtxGetId */
	int created;             /* made by cuCtxCreate */
	int destroyed;           /* by cuCtxDestroy */
};

struct fc_device {
	int fd;
	char *none_base; /* addresses handed out; PROT_NONE */
	char *rw_base;   /* the workers' view of the same bytes */
	size_t cap;
	size_t used;     /* arena blocks plus managed memory of this device */
	struct fc_block *blocks; /* sorted by offset */
	size_t nblocks, blocks_cap;
	struct CUstream_st *legacy;
	struct CUctx_st ctx;
	unsigned peers;  /* bit p: peer access to device p enabled */
	size_t limits[FC_NLIMITS]; /* cudaDeviceSetLimit values; 0 = default */
	struct CUmemPoolHandle_st pool;
	unsigned char *resident; /* FC_PREFAULT_ALLOC: a flag per FC_RESIDENT_CHUNK made resident */
};

/* A host range known to the emulation (pinned or managed). */
struct fc_hostrange {
	struct fc_hostrange *next;
	char *base;
	size_t size;
	enum fc_mem_kind kind;
	int dev;        /* managed: the device it is counted against */
	int owned;      /* mapped by us (cudaHostAlloc, managed), unmap on free */
	unsigned flags; /* cudaHostAlloc / cudaHostRegister flags */
};

/* FAKECUDA_KERNEL: what the emulated gather kernel does. */
enum fc_kernel_mode {
	FC_KERNEL_OK = 0,  /* as documented */
	FC_KERNEL_BROKEN,  /* flips one byte of the last row each launch writes */
	FC_KERNEL_NONE,    /* cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU */
};

/* FAKECUDA_PREFAULT: when the arena's pages become resident. */
enum fc_prefault {
	FC_PREFAULT_NONE = 0,   /* unset: at the first touch of each page */
	FC_PREFAULT_ARENA,      /* 1: the whole arena at the device's first use */
	FC_PREFAULT_ALLOC,      /* alloc: an allocation's pages when it is made */
};

#define FC_RESIDENT_CHUNK (2u << 20)    /* FC_PREFAULT_ALLOC makes the arena resident in these */

struct fc_config {
	size_t mem;
	int devices;
	unsigned jitter_us;
	double h2d_gbps, d2d_gbps;
	unsigned call_us;
	enum fc_kernel_mode kernel;
	int rt_via_driver;       /* FAKECUDA_RT_VIA_DRIVER=1 */
	enum fc_prefault prefault;
};

/*
 * The gather kernel's parameter, laid out exactly as shim/device/device.h's
 * struct dev_gather_params (the emulation includes no shim header; the
 * asserts pin the layout). An entry moves nrows consecutive rows of row
 * bytes between slab and destination rows [dst_row, dst_row + nrows):
 * FC_GATHER_CAPTURE set, destination -> slab, else slab -> destination.
 * The table (entries, then warps starts of 8 bytes: entry, unit) is
 * inline, or at table: mapped host memory the kernel reads as it runs.
 * Each entry is cut into units of FC_GATHER_UNIT bytes (an empty one is
 * one unit); warp w (global thread / 32 of a 1-D grid) moves units
 * [w * per_warp, (w + 1) * per_warp), starting where its start says, or
 * at entry u = unit u when warps is 0 (every entry one unit).
 */
#define FC_GATHER_CAPTURE 0x80000000u
#define FC_GATHER_UNIT 2048
#define FC_GATHER_INLINE 16384

struct fc_gather_entry {
	uint64_t slab;
	uint32_t dst_row;
	uint32_t nrows_dir;
};

struct fc_gather_start {
	uint32_t entry;
	uint32_t unit;
};

/* The parameter's header: everything before the inline table. */
struct fc_gather_head {
	uint64_t dst;
	uint64_t row;
	uint64_t table;
	uint64_t units;
	uint32_t count;
	uint32_t per_warp;
	uint32_t warps;
	uint32_t pad;
};

struct fc_gather_params {
	struct fc_gather_head h;
	unsigned char inline_table[FC_GATHER_INLINE];
};

_Static_assert(sizeof(struct fc_gather_entry) == 16, "gather entry is 16 bytes");
_Static_assert(offsetof(struct fc_gather_entry, slab) == 0, "entry slab @0");
_Static_assert(offsetof(struct fc_gather_entry, dst_row) == 8, "entry dst_row @8");
_Static_assert(offsetof(struct fc_gather_entry, nrows_dir) == 12, "entry nrows_dir @12");
_Static_assert(sizeof(struct fc_gather_start) == 8, "warp start is 8 bytes");
_Static_assert(offsetof(struct fc_gather_params, h.dst) == 0, "params dst @0");
_Static_assert(offsetof(struct fc_gather_params, h.row) == 8, "params row @8");
_Static_assert(offsetof(struct fc_gather_params, h.table) == 16, "params table @16");
_Static_assert(offsetof(struct fc_gather_params, h.units) == 24, "params units @24");
_Static_assert(offsetof(struct fc_gather_params, h.count) == 32, "params count @32");
_Static_assert(offsetof(struct fc_gather_params, h.per_warp) == 36, "params per_warp @36");
_Static_assert(offsetof(struct fc_gather_params, h.warps) == 40, "params warps @40");
_Static_assert(offsetof(struct fc_gather_params, inline_table) == 48, "params inline table @48");
_Static_assert(sizeof(struct fc_gather_params) == 48 + FC_GATHER_INLINE, "params size");

/* One accepted launch of the gather kernel: its parameter's header and the
 * inline table bytes in use, copied at call time, the device and the
 * threads of its grid. Shared by reference between a stream operation and
 * graph nodes (fc_gather_hold / fc_gather_drop). Checked and performed by
 * the worker that runs it (exec_gather.c). */
struct fc_gather {
	atomic_uint refs;
	int dev;
	struct CUctx_st *ctx;    /* the launch's context (fc_ctx_owner): the only memory it may touch */
	uint64_t threads;        /* grid x block, 1-D */
	struct fc_gather_head h;
	size_t tab_bytes;        /* inline table bytes copied */
	unsigned char tab[];
};

struct fc_state {
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* host waiters': broadcast when a completion reaches one (workers sleep on their stream's) */
	int inited;
	int is_child;            /* this process is a fork() child */
	atomic_int used;         /* the API was called in this process; set by any thread */
	unsigned gen;            /* bumped in a fork child: invalidates TLS */
	struct fc_config cfg;
	struct fc_device dev[FC_MAX_DEV];
	struct fc_hostrange *hosts;
	struct CUstream_st *streams; /* every stream ever created, live or not */
	atomic_int driver_inited; /* set by any thread's first call */
};

extern struct fc_state fc;
extern struct fc_counters fc_cnt;

#define FC_CTX_STACK 16

/* Per-thread state: current context (the top of the context stack, the
 * entries below it in ctx_stack), per-thread default streams. */
struct fc_tls {
	unsigned gen;
	struct CUctx_st *ctx;
	struct CUctx_st *ctx_stack[FC_CTX_STACK];
	int ctx_depth;
	int dev;
	struct CUstream_st *pts[FC_MAX_DEV];
	cudaError_t last_error;
	enum cudaStreamCaptureMode capture_mode;
};

/* ---- core.c ---- */

/* Initialises the emulation on first use (reads the environment). */
void fc_init(void);
/* Returns the calling thread's state, reset if it predates a fork. */
struct fc_tls *fc_tls_get(void);
/* Counts a call of the API function NAME, spins FAKECUDA_CALL_US, and
 * returns 1 when FAKECUDA_FAIL says this call must fail (NAME, NAME@N:
 * the Nth call on; NAME#N: the Nth only), counting it in injected_faults. */
int fc_api_enter(const char *name);
/* Classifies [p, p+n): returns the kind; for FC_DEVICE checks that the range
 * lies inside one allocation (else -EINVAL), sets *dev when not NULL. */
int fc_mem_classify(const void *p, size_t n, int *dev);
/* The requested extent [*lo, *hi) of the arena allocation holding p and its
 * device: 0, or -ENOENT (not arena device memory: managed, VMM, host). */
int fc_mem_extent(const void *p, int *dev, const char **lo, const char **hi);
/* Translates a device address to the workers' view; other addresses are
 * returned unchanged. Takes no lock. */
void *fc_dev_rw(const void *p);
/* Device memory: 0 or -ENOMEM / -EINVAL. */
int fc_dev_alloc(int dev, size_t size, void **out);
/* Same, for module variables: neither counted in alloc_bytes nor freeable. */
int fc_dev_alloc_internal(int dev, size_t size, void **out);
int fc_dev_free(const void *p);
/* Physical memory for cuMemCreate: SIZE bytes at an arena offset that is
 * a multiple of ALIGN, counted as allocated; 0 or -ENOMEM / -ENODEV. */
int fc_dev_alloc_phys(int dev, size_t size, size_t align, size_t *off);
void fc_dev_free_phys(int dev, size_t off);
/* cudaDeviceReset's memory part: frees every allocation of device dev
 * (not module variables) and starts a new context generation. */
void fc_dev_reset(int dev);
/* Frees every allocation made in the created context C (cuCtxDestroy). */
void fc_ctx_free_blocks(struct CUctx_st *c);
/* The owner the arena allocations of a thread whose current context is C
 * get: C when created, else NULL (the device's primary context). */
struct CUctx_st *fc_ctx_owner(struct CUctx_st *c);
/* 0 when P is not arena device memory or belongs to context C (as
 * fc_ctx_owner normalises it); else -EINVAL, counted in ctx_refusals: a
 * driver refuses memory of another context. */
int fc_mem_ctx_check(const void *p, struct CUctx_st *c);
/* drv_context.c: whether C is a live context (primary or created). */
int fc_ctx_valid(CUcontext c);
void fc_dev_meminfo(int dev, size_t *free_b, size_t *total);
/* Host memory registry. */
int fc_host_alloc(size_t size, unsigned flags, void **out);
int fc_host_free(void *p);
int fc_host_register(void *p, size_t size, unsigned flags);
/* Flags of the pinned range holding p: 0 or -EINVAL (not pinned). */
int fc_host_flags(const void *p, unsigned *flags);
int fc_host_unregister(void *p);
int fc_managed_alloc(int dev, size_t size, void **out);
/* Looks up the registered host range holding p, or NULL (lock held). */
struct fc_hostrange *fc_host_find_locked(const void *p);
/* Looks up the device block holding p: 0 and base/size, or -ENOENT. */
int fc_dev_block(const void *p, int *dev, void **base, size_t *size);
/* Current device of the calling thread (its context's device). */
int fc_cur_dev(void);
/* The device of a memory pool handle, or -1 if it is none of ours. */
int fc_pool_dev(const struct CUmemPoolHandle_st *pool);
/* cudaMallocPitch / cuMemAllocPitch: the pitch for WIDTH bytes and the
 * bytes to allocate (at least 1); -EINVAL on overflow. */
int fc_pitch_size(size_t width, size_t height, size_t *pitch, size_t *bytes);
void fc_alloc_account(long long delta);

/* ---- stream.c ---- */

struct CUstream_st;
struct CUevent_st;
/* Resolves a stream handle (0, 0x1, 0x2, or created): 0 or -EBADF. PTSZ
 * says handle 0 means the per-thread default stream. */
int fc_stream_resolve(void *handle, int ptsz, struct CUstream_st **out);
int fc_stream_create(int dev, unsigned flags, int prio, struct CUstream_st **out);
int fc_stream_destroy(struct CUstream_st *s);
int fc_stream_sync(struct CUstream_st *s);
int fc_stream_query(struct CUstream_st *s);
/* Sets *flags and returns the stream's device. */
int fc_stream_flags(struct CUstream_st *s, unsigned *flags);
int fc_stream_is_legacy(struct CUstream_st *s);
int fc_stream_wait_event(struct CUstream_st *s, struct CUevent_st *e);
int fc_device_sync(int dev);
int fc_stream_priority(struct CUstream_st *s);
unsigned long long fc_stream_id(struct CUstream_st *s);
int fc_event_create(unsigned flags, struct CUevent_st **out);
int fc_event_check(struct CUevent_st *e);
int fc_event_destroy(struct CUevent_st *e);
int fc_event_record(struct CUevent_st *e, struct CUstream_st *s);
int fc_event_query(struct CUevent_st *e);
int fc_event_sync(struct CUevent_st *e);
int fc_event_elapsed(float *ms, struct CUevent_st *a, struct CUevent_st *b);
/* Forgets every stream and event after fork() in the child (lock held). */
void fc_stream_forget(void);

/* ---- enqueue.c ---- */

/* Copies n bytes. kind: a cudaMemcpyKind (cudaMemcpyDefault infers).
 * SYNC: the caller waits for completion. */
int fc_copy(void *dst, const void *src, size_t n, int kind,
	    struct CUstream_st *s, int sync);
/* cudaMemcpyBatchAsync's work: count copies (direction from the pointers)
 * as ONE stream operation, every copy counted as its own. ATTRS holds
 * NATTRS attribute structs of ATTR_SIZE bytes whose first member is the
 * srcAccessOrder (CUmemcpyAttributes, cudaMemcpyAttributes), attribute i
 * applying from copy IDXS[i] on (the caller checked them). A source read
 * during the call (DURING_API_CALL) is copied at call time, whatever its
 * memory; in stream order (STREAM) or at any time (ANY) it is read when
 * the operation runs, a pageable one included. While s captures, each
 * copy becomes its own node. */
int fc_copy_batch(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
		  const void *attrs, size_t attr_size, const size_t *idxs, size_t nattrs,
		  struct CUstream_st *s);
int fc_memset(void *dst, int value, size_t n, struct CUstream_st *s, int sync);
/* A pitched copy of HEIGHT rows of WIDTH bytes: one operation, counted as
 * width * height bytes. -EINVAL for a pitch below the width, -ERANGE for a
 * pitch past the device maximum. */
int fc_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch,
	      size_t width, size_t height, int kind, struct CUstream_st *s, int sync);
/* What fc_copy2d would answer for these arguments, without doing anything
 * (0 for an empty copy). */
int fc_copy2d_check(void *dst, size_t dpitch, const void *src, size_t spitch,
		    size_t width, size_t height, int kind);
/* A pitched memset of HEIGHT rows of WIDTH elements of ESIZE (1, 2, 4)
 * bytes each, every element VALUE (truncated to the element size). */
int fc_memset2d(void *dst, size_t pitch, unsigned value, unsigned esize,
		size_t width, size_t height, struct CUstream_st *s, int sync);
/* Enqueues a stream-ordered no-op (prefetch, graph upload); none while
 * the stream is capturing. */
int fc_stream_nop(struct CUstream_st *s);
/* cudaStreamAddCallback: runs cb(handle, cudaSuccess, arg) on the worker. */
int fc_stream_callback(struct CUstream_st *s, void *handle, cudaStreamCallback_t cb, void *arg);
int fc_free_async(void *p, struct CUstream_st *s);
int fc_hostfn(struct CUstream_st *s, void (*fn)(void *), void *arg);
/* Enqueues one launch of the gather kernel on s as one operation (or a
 * kernel node while s is capturing); takes over the caller's reference. */
int fc_gather_enqueue(struct CUstream_st *s, struct fc_gather *g);
int fc_graph_launch(struct CUgraphExec_st *x, struct CUstream_st *s);

/* ---- graph.c ---- */

/* Starts capturing into G, or into a new graph when G is NULL. */
int fc_capture_begin(struct CUstream_st *s, struct CUgraph_st *g);
int fc_capture_end(struct CUstream_st *s, struct CUgraph_st **out);
/* 0 none, 1 active, 2 invalidated; *id the capture id when active. */
int fc_capture_status(struct CUstream_st *s, unsigned long long *id,
		      struct CUgraph_st **graph);
int fc_graph_instantiate(struct CUgraph_st *g, struct CUgraphExec_st **out);
int fc_graph_destroy(struct CUgraph_st *g);
int fc_graph_exec_destroy(struct CUgraphExec_st *x);
int fc_graph_exec_check(struct CUgraphExec_st *x);
/* Explicit graphs: nodes run in the order they were added, which respects
 * every dependency (a dependency must already be a node of the graph). */
int fc_graph_create(struct CUgraph_st **out);
int fc_graph_add_copy(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
		      void *dst, const void *src, size_t n, int kind,
		      struct CUgraphNode_st **out);
int fc_graph_add_memset(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
			void *dst, size_t pitch, unsigned value, unsigned esize,
			size_t width, size_t height, struct CUgraphNode_st **out);
int fc_graph_add_host(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
		      void (*fn)(void *), void *arg, struct CUgraphNode_st **out);
/* Sets *num to the node count; fills nodes (NULL past the end) if given. */
int fc_graph_nodes(struct CUgraph_st *g, struct CUgraphNode_st **nodes, size_t *num);
/* Returns the cudaGraphNodeType of a node, or -EINVAL. */
int fc_graph_node_type(struct CUgraphNode_st *nd);
/* Takes G's node parameters into X: 0, or -EXDEV with *result and
 * *errnode set when the topology or a node type differs. */
int fc_graph_exec_update(struct CUgraphExec_st *x, struct CUgraph_st *g,
			 enum cudaGraphExecUpdateResult *result, struct CUgraphNode_st **errnode);
/* Forgets every graph handle and the capture ids after fork() in the child. */
void fc_graph_forget(void);

/* ---- exec_gather.c ---- */

/* A reference to a gather launch is taken / dropped (freed at the last). */
void fc_gather_hold(struct fc_gather *g);
void fc_gather_drop(struct fc_gather *g);
/* A launch that breaks the kernel's rules, HOW "refused" (at the call) or
 * "faulted" (on the worker): one line on stderr, kernel_faults + 1.
 * Returns CUDA_ERROR_INVALID_VALUE. */
CUresult fc_gather_fault(const char *how, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void *fc_ptr(CUdeviceptr p)
{
	return (void *)(uintptr_t)p;
}

static inline int fc_dev_valid(int d)
{
	return d >= 0 && d < fc.cfg.devices;
}

/* ---- rt_error.c ---- */

/* Converts 0 / negative errno to a cudaError_t. */
cudaError_t fc_rt_err(int e);
/* Records a failure as the thread's last error and returns it. */
cudaError_t fc_rt_ret(cudaError_t e);
cudaError_t fc_rt_reti(int e);
/* Counts the call and binds the thread to a context; 1 = inject a fault. */
int fc_rt_enter(const char *name);
/* Says whether the calling thread's device exists. */
int fc_have_device(void);

#define RT_ENTER(name) do { if (fc_rt_enter(name)) return fc_rt_ret(cudaErrorUnknown); } while (0)
#define RT_ENTER_ALLOC(name) do { if (fc_rt_enter(name)) return fc_rt_ret(cudaErrorMemoryAllocation); } while (0)
/* Resolves a stream handle or returns its error from the caller. */
#define RT_STREAM(h, ptsz, s) do { int e_ = fc_stream_resolve((void *)(h), ptsz, &(s)); \
	if (e_) return fc_rt_reti(e_); } while (0)

/* ---- rt_driver.c ---- */

/* The driver entry points the runtime uses under FAKECUDA_RT_VIA_DRIVER. */
struct fc_rt_driver {
	__typeof__(cuMemcpyHtoD_v2) *htod;
	__typeof__(cuMemcpyDtoH_v2) *dtoh;
	__typeof__(cuMemcpyDtoD_v2) *dtod;
	__typeof__(cuMemcpy) *any;
	__typeof__(cuMemcpyHtoDAsync_v2) *htod_async;
	__typeof__(cuMemcpyDtoHAsync_v2) *dtoh_async;
	__typeof__(cuMemcpyDtoDAsync_v2) *dtod_async;
	__typeof__(cuMemcpyAsync) *any_async;
	__typeof__(cuMemcpy2D_v2) *copy2d;
	__typeof__(cuMemcpy2DAsync_v2) *copy2d_async;
	__typeof__(cuMemAlloc_v2) *alloc;
	__typeof__(cuMemAllocAsync) *alloc_async;
	__typeof__(cuMemAllocManaged) *alloc_managed;
	__typeof__(cuMemAllocPitch_v2) *alloc_pitch;
};

/* The driver table for a call (PTSZ: the per-thread form), or NULL when
 * the runtime works directly: not asked for, no driver found, or no device
 * (the direct path gives the runtime's own answer then). */
const struct fc_rt_driver *fc_rt_driver(int ptsz);
/* A driver result as the runtime reports it (sets the last error). */
cudaError_t fc_rt_ret_drv(CUresult r);
/* A linear copy through the driver entry point its kind names. */
cudaError_t fc_rt_driver_copy(const struct fc_rt_driver *d, int sync, void *dst, const void *src,
			      size_t n, enum cudaMemcpyKind kind, cudaStream_t h);
/* A pitched copy through cuMemcpy2D[Async]: the kind gives the memory types. */
cudaError_t fc_rt_driver_copy2d(const struct fc_rt_driver *d, int sync, void *dst, size_t dpitch,
				const void *src, size_t spitch, size_t width, size_t height,
				enum cudaMemcpyKind kind, cudaStream_t h);

/* ---- rt_module.c ---- */

/* Drops the device copies of registered variables in a fork child. */
void fc_symbols_forget(void);

/* ---- drv_entry.c ---- */

/* Errors private to the driver side: no current context, no cuInit. */
#define FC_ENOCTX ENOTCONN
#define FC_ENOINIT ESRCH

/* Converts 0 / negative errno to a CUresult. */
CUresult fc_drv_err(int e);
/* Counts a driver call; returns 0, -EIO (injected fault), -FC_ENOINIT, or
 * -FC_ENOCTX (NEED_CTX and no current context). */
int fc_drv_enter(const char *name, int need_ctx);

#define DRV_ENTER(name, ctx) do { int e_ = fc_drv_enter(name, ctx); \
	if (e_) return fc_drv_err(e_); } while (0)
#define DRV_ENTER_ALLOC(name) do { int e_ = fc_drv_enter(name, 1); \
	if (e_) return fc_drv_err(e_ == -EIO ? -ENOMEM : e_); } while (0)
#define DRV_STREAM(h, ptsz, s) do { int e_ = fc_stream_resolve((void *)(h), ptsz, &(s)); \
	if (e_) return fc_drv_err(e_); } while (0)

/* Finds a driver entry point by base name (cuMemAlloc), CUDA version and
 * cuGetProcAddress flags: 0, -ENOENT, or -ERANGE (version too old). */
int fc_proc_lookup(const char *sym, int version, unsigned long long flags, void **pfn);

/* ---- vmm.c ---- */

/* Classifies [p, p+n) against the reservations: -ENOENT when p is in
 * none, FC_DEVICE (and *dev) when mapped throughout with read-write
 * access, else -EINVAL. */
int fc_vmm_classify(const void *p, size_t n, int *dev);
/* The workers' view of a reserved address, or NULL. */
void *fc_vmm_rw(const void *p);
/* The mapping holding p: 0 and its device, base and size, or -ENOENT. */
int fc_vmm_range(const void *p, int *dev, void **base, size_t *size);
/* Says whether p lies in a reserved range. */
int fc_vmm_reserved(const void *p);
/* Forgets every reservation and mapping after fork() in the child. */
void fc_vmm_forget(void);

/* ---- kernel.c ---- */

/* Forgets every module after fork() in the child. */
void fc_kernel_forget(void);

/* ---- the entry points nvcc-built programs import (no public header) ---- */
FC_API void **__cudaRegisterFatBinary(void *fatCubin);
FC_API void __cudaRegisterFatBinaryEnd(void **handle);
FC_API void __cudaUnregisterFatBinary(void **handle);
FC_API void __cudaRegisterFunction(void **handle, const char *hostFun,
				   char *deviceFun, const char *deviceName,
				   int thread_limit, uint3 *tid, uint3 *bid,
				   dim3 *bDim, dim3 *gDim, int *wSize);
FC_API void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress,
			      const char *deviceName, int ext, size_t size,
			      int constant, int global);
FC_API void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress,
				     char *deviceAddress, const char *deviceName,
				     int ext, size_t size, int constant, int global);
FC_API char __cudaInitModule(void **handle);
FC_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
FC_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				      void **args, size_t sharedMem, cudaStream_t stream);
FC_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					   void **args, size_t sharedMem, cudaStream_t stream);
FC_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim,
					    size_t sharedMem, void *stream);
FC_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
					      size_t *sharedMem, void *stream);

/* ---- the per-thread-default-stream variants (declared only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM in the real headers) ---- */
FC_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
FC_API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count);
FC_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream);
FC_API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream);
FC_API cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, cudaStream_t stream);
FC_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
FC_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);
FC_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream);
FC_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
FC_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags);
FC_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int *device);
FC_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
FC_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
FC_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags);
FC_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
FC_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph);
FC_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus);
FC_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out, unsigned long long *id_out, cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out, const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out);
FC_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
FC_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream);
FC_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData);
FC_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus);
FC_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus);

FC_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind);
FC_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream);
FC_API cudaError_t cudaMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width, size_t height);
FC_API cudaError_t cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream);
FC_API cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind);
FC_API cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind);
FC_API cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream);
FC_API cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream);
FC_API cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback, void *userData, unsigned int flags);
FC_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t hStream, int *priority);
FC_API cudaError_t cudaStreamGetId_ptsz(cudaStream_t hStream, unsigned long long *streamId);
FC_API cudaError_t cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count, struct cudaMemLocation location, unsigned int flags, cudaStream_t stream);
FC_API cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
FC_API cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *dependencies, const cudaGraphEdgeData *dependencyData, size_t numDependencies, enum cudaStreamCaptureMode mode);
FC_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream);

FC_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);
FC_API CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount);
FC_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount);
FC_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
FC_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream);
FC_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
FC_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
FC_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream);
FC_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream);
FC_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
FC_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N);
FC_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N);
FC_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N);
FC_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream);
FC_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream);
FC_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy);
FC_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy);
FC_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream);
FC_API CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData);
FC_API CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags);
FC_API CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority);
FC_API CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags);
FC_API CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId);
FC_API CUresult cuStreamQuery_ptsz(CUstream hStream);
FC_API CUresult cuStreamSynchronize_ptsz(CUstream hStream);
FC_API CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);
FC_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
FC_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);
FC_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out);
FC_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
FC_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
FC_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
FC_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
FC_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
FC_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);

/* The CUDA 11 cuGetProcAddress (no status argument), still exported by the
 * driver; cuda.h declares it only for its own build and maps the name to
 * cuGetProcAddress_v2. */
#undef cuGetProcAddress
FC_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

/* The pre-11.4 cuDeviceGetUuid, likewise mapped by cuda.h to its _v2
 * (drv_query.c; numba-cuda and PyCUDA ask for one or the other). */
#undef cuDeviceGetUuid
FC_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
/* And the usage count of CUDA 1.x contexts, declared for its own build. */
FC_API CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags);
/* The CUDA 12.5+ cuCtxCreate (cuda.h maps cuCtxCreate to it) and
 * cuCtxDestroy's _v2 are declared by cuda.h; drv_context.c defines them. */
FC_API CUresult cuCtxDetach(CUcontext ctx);

/* ---- test-only hooks (version node FAKECUDA) ---- */
FC_API unsigned long long fakecuda_counter(const char *name);
FC_API int fakecuda_write_report(const char *path);
/* Mid-run control for deterministic tests (core.c, stream.c). */
FC_API int fakecuda_fail(const char *spec);
FC_API int fakecuda_stream_hold(void *stream, int on);
FC_API long long fakecuda_stream_settle(void *stream);

#endif
