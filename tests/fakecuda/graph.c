/*
 * graph.c: stream capture and graphs of the emulated device. While a
 * stream captures, what is put on it becomes a node of its graph
 * (enqueue.c asks fc_graph_add_locked); explicit graphs take copy, memset,
 * host and empty nodes. A graph is instantiated into an executable, a
 * copy of its nodes' descriptions that enqueue.c replays on a stream.
 * Nodes run in the order they were added, which honours every dependency.
 */
#include "stream_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The id of the last capture begun (cudaStreamGetCaptureInfo). */
static unsigned long long capture_ids;

/* ---- the handle registry ---- */

/*
 * Live graph, node and executable handles. A handle is checked here before
 * it is read, so a destroyed or foreign one is recognised without reading
 * freed memory. live_lock is a leaf lock: it may be taken with fc.lock
 * held, never the other way round.
 */
#define LIVE_BUCKETS 1024

struct live {
	struct live *next;
	const void *p;
};

static struct live *live_buckets[LIVE_BUCKETS];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned live_hash(const void *p)
{
	return (unsigned)(((uintptr_t)p >> 4) % LIVE_BUCKETS);
}

static int live_add(const void *p)
{
	struct live *l = malloc(sizeof(*l));
	unsigned b = live_hash(p);

	if (!l)
		return -ENOMEM;
	l->p = p;
	pthread_mutex_lock(&live_lock);
	l->next = live_buckets[b];
	live_buckets[b] = l;
	pthread_mutex_unlock(&live_lock);
	return 0;
}

static void live_remove(const void *p)
{
	struct live **pp, *l;

	pthread_mutex_lock(&live_lock);
	for (pp = &live_buckets[live_hash(p)]; (l = *pp); pp = &l->next) {
		if (l->p == p) {
			*pp = l->next;
			free(l);
			break;
		}
	}
	pthread_mutex_unlock(&live_lock);
}

static int live_has(const void *p)
{
	struct live *l;
	int found = 0;

	pthread_mutex_lock(&live_lock);
	for (l = live_buckets[live_hash(p)]; l && !found; l = l->next)
		found = l->p == p;
	pthread_mutex_unlock(&live_lock);
	return found;
}

/* Allocates a zeroed handle of SIZE bytes and registers it as live; NULL
 * when out of memory. */
static void *live_new(size_t size)
{
	void *p = calloc(1, size);

	if (p && live_add(p)) {
		free(p);
		p = NULL;
	}
	return p;
}

/* Forgets every graph handle and the capture ids after fork() in the child. */
void fc_graph_forget(void)
{
	memset(live_buckets, 0, sizeof(live_buckets));
	pthread_mutex_init(&live_lock, NULL);
	capture_ids = 0;
}

/* Appends a node doing X to G (lock held). */
int fc_graph_add_locked(struct CUgraph_st *g, const struct fc_xfer *x,
			struct CUgraphNode_st **out)
{
	struct CUgraphNode_st **nn, *nd;

	if (g->n == g->cap) {
		size_t ncap = g->cap ? g->cap * 2 : 16;

		nn = realloc(g->nodes, ncap * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		g->nodes = nn;
		g->cap = ncap;
	}
	nd = live_new(sizeof(*nd));
	if (!nd)
		return -ENOMEM;
	nd->magic = NODE_MAGIC;
	nd->g = g;
	nd->x = *x;
	xfer_hold(x);
	g->nodes[g->n++] = nd;
	atomic_fetch_add(&fc_cnt.graph_nodes_captured, 1);
	if (out)
		*out = nd;
	return 0;
}

/* ---- capture and graphs ---- */

static int graph_valid(struct CUgraph_st *g)
{
	return g && live_has(g) && g->magic == GRAPH_MAGIC;
}

int fc_graph_create(struct CUgraph_st **out)
{
	struct CUgraph_st *g = live_new(sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->magic = GRAPH_MAGIC;
	*out = g;
	return 0;
}

int fc_capture_begin(struct CUstream_st *s, struct CUgraph_st *into)
{
	struct CUgraph_st *g = into;
	int err = 0;

	if (s->legacy)
		return -EPERM;
	if (into && !graph_valid(into))
		return -EINVAL;
	if (!g && (err = fc_graph_create(&g)))
		return err;
	pthread_mutex_lock(&fc.lock);
	if (s->capturing) {
		err = -EPERM;
		if (!into) {
			live_remove(g);
			free(g);
		}
	} else {
		s->capturing = 1;
		s->capture_id = ++capture_ids;
		s->graph = g;
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_capture_end(struct CUstream_st *s, struct CUgraph_st **out)
{
	int err = 0;

	pthread_mutex_lock(&fc.lock);
	if (!s->capturing) {
		err = -EPERM;
	} else {
		*out = s->graph;
		s->graph = NULL;
		s->capturing = 0;
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_capture_status(struct CUstream_st *s, unsigned long long *id,
		      struct CUgraph_st **graph)
{
	int st;

	pthread_mutex_lock(&fc.lock);
	st = s->capturing;
	if (id)
		*id = st ? s->capture_id : 0;
	if (graph)
		*graph = st ? s->graph : NULL;
	pthread_mutex_unlock(&fc.lock);
	return st;
}

/* Checks that every dependency is a node of G (lock held). */
static int deps_valid_locked(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps)
{
	size_t i;

	if (ndeps && !deps)
		return -EINVAL;
	for (i = 0; i < ndeps; i++)
		if (!deps[i] || !live_has(deps[i]) || deps[i]->magic != NODE_MAGIC || deps[i]->g != g)
			return -EINVAL;
	return 0;
}

/* Adds a described node to an explicit graph. */
static int graph_add_node(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
			  const struct fc_xfer *x, struct CUgraphNode_st **out)
{
	int err;

	if (!graph_valid(g) || !out)
		return -EINVAL;
	pthread_mutex_lock(&fc.lock);
	err = deps_valid_locked(g, deps, ndeps);
	if (!err)
		err = fc_graph_add_locked(g, x, out);
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_graph_add_copy(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
		      void *dst, const void *src, size_t n, int kind,
		      struct CUgraphNode_st **out)
{
	struct fc_xfer x;
	int sk, err;

	if (!n)
		return -EINVAL;
	err = fc_copy_describe(&x, dst, n, src, n, n, 1, kind, &sk);
	if (err < 0)
		return err;
	return graph_add_node(g, deps, ndeps, &x, out);
}

int fc_graph_add_memset(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
			void *dst, size_t pitch, unsigned value, unsigned esize,
			size_t width, size_t height, struct CUgraphNode_st **out)
{
	struct fc_xfer x;
	int err;

	if (!width || !height)
		return -EINVAL;
	err = fc_memset_describe(&x, dst, pitch, value, esize, width, height);
	if (err)
		return err;
	return graph_add_node(g, deps, ndeps, &x, out);
}

int fc_graph_add_host(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps,
		      void (*fn)(void *), void *arg, struct CUgraphNode_st **out)
{
	struct fc_xfer x;

	memset(&x, 0, sizeof(x));
	x.kind = fn ? OP_HOSTFN : OP_NOP;
	x.fn = fn;
	x.arg = arg;
	return graph_add_node(g, deps, ndeps, &x, out);
}

int fc_graph_nodes(struct CUgraph_st *g, struct CUgraphNode_st **nodes, size_t *num)
{
	size_t i;

	if (!graph_valid(g) || !num)
		return -EINVAL;
	pthread_mutex_lock(&fc.lock);
	if (nodes) {
		for (i = 0; i < *num; i++)
			nodes[i] = i < g->n ? g->nodes[i] : NULL;
		if (*num > g->n)
			*num = g->n;
	} else {
		*num = g->n;
	}
	pthread_mutex_unlock(&fc.lock);
	return 0;
}

static int xfer_type(const struct fc_xfer *x)
{
	switch (x->kind) {
	case OP_COPY: return cudaGraphNodeTypeMemcpy;
	case OP_MEMSET: return cudaGraphNodeTypeMemset;
	case OP_HOSTFN: return cudaGraphNodeTypeHost;
	case OP_GATHER: return cudaGraphNodeTypeKernel;
	default: return cudaGraphNodeTypeEmpty;
	}
}

int fc_graph_node_type(struct CUgraphNode_st *nd)
{
	if (!nd || !live_has(nd) || nd->magic != NODE_MAGIC)
		return -EINVAL;
	return xfer_type(&nd->x);
}

int fc_graph_instantiate(struct CUgraph_st *g, struct CUgraphExec_st **out)
{
	struct CUgraphExec_st *x;
	size_t i;

	if (!graph_valid(g))
		return -EBADF;
	x = live_new(sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->magic = EXEC_MAGIC;
	pthread_mutex_lock(&fc.lock);
	x->n = g->n;
	x->nodes = malloc((g->n ? g->n : 1) * sizeof(*x->nodes));
	for (i = 0; x->nodes && i < g->n; i++) {
		x->nodes[i] = g->nodes[i]->x;
		xfer_hold(&x->nodes[i]);
	}
	pthread_mutex_unlock(&fc.lock);
	if (!x->nodes) {
		live_remove(x);
		free(x);
		return -ENOMEM;
	}
	*out = x;
	return 0;
}

int fc_graph_exec_update(struct CUgraphExec_st *x, struct CUgraph_st *g,
			 enum cudaGraphExecUpdateResult *result, struct CUgraphNode_st **errnode)
{
	size_t i;
	int err = 0;

	*result = cudaGraphExecUpdateSuccess;
	*errnode = NULL;
	if (fc_graph_exec_check(x) || !graph_valid(g))
		return -EBADF;
	pthread_mutex_lock(&fc.lock);
	if (g->n != x->n) {
		*result = cudaGraphExecUpdateErrorTopologyChanged;
		err = -EXDEV;
		goto out_unlock;
	}
	for (i = 0; i < g->n; i++) {
		if (xfer_type(&g->nodes[i]->x) != xfer_type(&x->nodes[i])) {
			*result = cudaGraphExecUpdateErrorNodeTypeChanged;
			*errnode = g->nodes[i];
			err = -EXDEV;
			goto out_unlock;
		}
	}
	for (i = 0; i < g->n; i++) {
		xfer_drop(&x->nodes[i]);
		x->nodes[i] = g->nodes[i]->x;
		xfer_hold(&x->nodes[i]);
	}
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_graph_destroy(struct CUgraph_st *g)
{
	size_t i;

	if (!graph_valid(g))
		return -EBADF;
	g->magic = 0;
	for (i = 0; i < g->n; i++) {
		g->nodes[i]->magic = 0;
		live_remove(g->nodes[i]);
		xfer_drop(&g->nodes[i]->x);
		free(g->nodes[i]);
	}
	free(g->nodes);
	g->nodes = NULL;
	live_remove(g);
	free(g);
	return 0;
}

int fc_graph_exec_check(struct CUgraphExec_st *x)
{
	return x && live_has(x) && x->magic == EXEC_MAGIC ? 0 : -EBADF;
}

int fc_graph_exec_destroy(struct CUgraphExec_st *x)
{
	size_t i;

	if (fc_graph_exec_check(x))
		return -EBADF;
	x->magic = 0;
	for (i = 0; i < x->n; i++)
		xfer_drop(&x->nodes[i]);
	free(x->nodes);
	x->nodes = NULL;
	live_remove(x);
	free(x);
	return 0;
}
