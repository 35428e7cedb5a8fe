/*
 * stream_impl.h: internal to the emulated stream engine and its rooms,
 * included by them alone (every other file sees fakecuda.h only):
 *
 *   stream.c       the engine: streams and their FIFO workers, the legacy
 *                  and per-thread default streams' ordering, jitter,
 *                  waits, events.
 *   enqueue.c      what a program puts on a stream (copies, memsets,
 *                  frees, host functions, callbacks, no-ops, kernel
 *                  launches, graph replays): recorded as a node while the
 *                  stream captures, else counted and submitted.
 *   graph.c        stream capture and graphs (nodes, instantiation,
 *                  update, destruction) and their handle registry.
 *   exec_copy.c    the copy executor: copies and memsets validated into a
 *                  description, and performed on the worker at the cost
 *                  model's link rates.
 *   exec_gather.c  the gather executor: a vrampool_gather launch
 *                  performed on the worker (kernel.c checks and enqueues
 *                  it).
 *
 * Calls run one way: enqueue.c -> stream.c and graph.c; both of those ->
 * exec_gather.c -> exec_copy.c -> core.c (and kernel.c -> enqueue.c,
 * stream.c, exec_gather.c). The engine never calls what is above it.
 *
 * Invariants: fc.lock guards every stream, operation, event and graph
 * field below (a _locked function is called with it held); workers run an
 * operation's executor without it. An operation's description (struct
 * fc_xfer) may be copied into graph nodes and executables: each copy
 * holds its own reference to a gather launch (xfer_hold / xfer_drop).
 */
#ifndef FAKECUDA_STREAM_IMPL_H
#define FAKECUDA_STREAM_IMPL_H

#include "fakecuda.h"

enum fc_op_kind { OP_COPY, OP_MEMSET, OP_EVENT, OP_NOP, OP_FREE, OP_HOSTFN, OP_CALLBACK, OP_GATHER, OP_BATCH };
enum fc_dir { DIR_H2D, DIR_D2H, DIR_D2D, DIR_H2H };

struct fc_dep {
	struct CUstream_st *s;
	uint64_t seq;
};

struct fc_batch;

/* What an operation or a graph node does. Copies and memsets are pitched:
 * ROWS rows of WIDTH bytes, rows DPITCH (SPITCH) bytes apart; a linear one
 * is one row. N is the byte count the counters see. A memset writes VALUE
 * as elements of ESIZE bytes. A gather launch holds a reference to GATHER
 * (xfer_hold / xfer_drop follow every copy of the description). A batch
 * (OP_BATCH, never a graph node) owns BATCH, freed with its operation. */
struct fc_xfer {
	enum fc_op_kind kind;
	void *dst;
	const void *src;
	size_t width, rows, dpitch, spitch, n;
	unsigned value, esize;
	enum fc_dir dir;
	void (*fn)(void *);
	void *arg;
	struct fc_gather *gather;
	struct fc_batch *batch;
};

/* The copies of one batch operation, each with its source copied at call
 * time (STAGING, packed) or NULL (read when the batch runs). */
struct fc_batch {
	size_t n;
	struct fc_batch_item {
		struct fc_xfer x;
		void *staging;
	} it[];
};

struct fc_op {
	struct fc_op *next;
	uint64_t seq;
	struct fc_dep *deps;
	size_t ndeps, depcap;
	struct fc_xfer x;
	void *staging;          /* a pageable source, packed (pitch = width) */
	struct CUevent_st *ev;
	cudaStreamCallback_t cb;
	void *cb_stream;        /* the handle the callback is given */
};

struct CUstream_st {
	struct CUstream_st *all_next;
	int dev;
	unsigned flags;
	int prio;
	int legacy;
	int destroyed;
	uint64_t submitted, completed;
	struct fc_op *head, *tail;
	unsigned seed;
	int capturing;           /* 0 none, 1 active */
	unsigned long long capture_id;
	struct CUgraph_st *graph;
	unsigned long long id;   /* cudaStreamGetId */
	double link_done_ns;     /* the cost model: when its link finishes the stream's last copy (event times) */
	/* Test hooks (fakecuda_stream_hold, fakecuda_stream_settle in stream.c). */
	int held;                /* the worker starts no operation while set */
	int running;             /* the worker is running its head operation */
	/* The worker's own wake-up: it sleeps on wake (sleeping set) while it
	 * can start nothing, and is signalled only by what can change that. */
	pthread_cond_t wake;
	int sleeping;
	/* The least sequence number a host thread waits for on this stream
	 * (fc_wait_seq_locked; 0: none): its worker wakes the host waiters
	 * (fc.cond) when its completions reach it, not at each one. */
	uint64_t want;
};

#define GRAPH_MAGIC 0x47524150u
#define EXEC_MAGIC 0x45584543u
#define NODE_MAGIC 0x4e4f4445u

/* A graph node (cudaGraphNode_t); owned by its graph. */
struct CUgraphNode_st {
	unsigned magic;
	struct CUgraph_st *g;
	struct fc_xfer x;
};

struct CUgraph_st {
	unsigned magic;
	struct CUgraphNode_st **nodes; /* in the order added */
	size_t n, cap;
};

struct CUgraphExec_st {
	unsigned magic;
	struct fc_xfer *nodes;
	size_t n;
};

/* A copy of an operation's description was made / is being dropped. */
static inline void xfer_hold(const struct fc_xfer *x)
{
	if (x->gather)
		fc_gather_hold(x->gather);
}

static inline void xfer_drop(struct fc_xfer *x)
{
	fc_gather_drop(x->gather);
	x->gather = NULL;
}

/* ---- stream.c ---- */

/* Frees an operation that was not submitted, or has run. */
void fc_op_free(struct fc_op *op);
/* Enqueues op on s (lock held), adding the legacy-stream dependencies.
 * Returns the op's sequence number. */
uint64_t fc_submit_locked(struct CUstream_st *s, struct fc_op *op);
/* Waits (lock held, released while waiting) until s has completed SEQ operations. */
void fc_wait_seq_locked(struct CUstream_st *s, uint64_t seq);

/* ---- graph.c ---- */

/* Appends a node doing X to G (lock held); *OUT, when not NULL, gets it. */
int fc_graph_add_locked(struct CUgraph_st *g, const struct fc_xfer *x,
			struct CUgraphNode_st **out);

/* ---- exec_copy.c ---- */

/* Validates a pitched copy and describes it in X: returns the destination's
 * memory kind (*SKP gets the source's), or a negative errno. */
int fc_copy_describe(struct fc_xfer *x, void *dst, size_t dpitch, const void *src,
		     size_t spitch, size_t width, size_t height, int kind, int *skp);
/* Validates a pitched memset (WIDTH in elements) and describes it in X. */
int fc_memset_describe(struct fc_xfer *x, void *dst, size_t pitch, unsigned value,
		       unsigned esize, size_t width, size_t height);
/* CLOCK_MONOTONIC in nanoseconds. */
double fc_now_ns(void);
/* Sleeps NS nanoseconds (nothing for NS <= 0). */
void fc_sleep_ns(double ns);
/* Occupies LINK (0 host<->device, 1 device-to-device) for NS nanoseconds. */
void fc_link_occupy(int link, double ns);
/* When the link finishes the calling worker's last fc_link_occupy (0: none since the last call). */
double fc_link_take_done(void);
/* Performs a copy on the worker (from STAGING, packed, when not NULL). */
void fc_exec_copy(const struct fc_xfer *x, const void *staging);
/* Fills each of X's rows with its element value. */
void fc_exec_memset(const struct fc_xfer *x);

/* ---- exec_gather.c ---- */

/* Performs a gather launch on the worker. */
void fc_exec_gather(const struct fc_xfer *x);

#endif
