/*
 * enqueue.c: what a program puts on a stream of the emulated device:
 * copies and memsets (described by exec_copy.c), asynchronous frees, host
 * functions, stream callbacks, stream-ordered no-ops, gather launches
 * (checked by kernel.c) and graph replays. While the stream captures, a
 * copy, memset, host function or launch becomes a node of its graph
 * (graph.c); otherwise the operation is counted as accepted and handed to
 * the engine (stream.c), and a synchronous call waits for it there.
 */
#include "stream_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- counting, capturing or submitting ---- */

/* Each direction's call and byte counters. */
static atomic_ullong *const copy_calls[] = {
	[DIR_H2D] = &fc_cnt.h2d_calls, [DIR_D2H] = &fc_cnt.d2h_calls,
	[DIR_D2D] = &fc_cnt.d2d_calls, [DIR_H2H] = &fc_cnt.h2h_calls,
};
static atomic_ullong *const copy_bytes[] = {
	[DIR_H2D] = &fc_cnt.h2d_bytes, [DIR_D2H] = &fc_cnt.d2h_bytes,
	[DIR_D2D] = &fc_cnt.d2d_bytes, [DIR_H2H] = &fc_cnt.h2h_bytes,
};

/* Counts one copy of n bytes in direction dir. */
static void count_copy(enum fc_dir dir, size_t n)
{
	atomic_fetch_add(copy_calls[dir], 1);
	atomic_fetch_add(copy_bytes[dir], n);
}

/* Counts an operation accepted for execution. */
static void count_xfer(const struct fc_xfer *x)
{
	if (x->kind == OP_COPY) {
		count_copy(x->dir, x->n);
	} else if (x->kind == OP_MEMSET) {
		atomic_fetch_add(&fc_cnt.memset_calls, 1);
		atomic_fetch_add(&fc_cnt.memset_bytes, x->n);
	} else if (x->kind == OP_GATHER) {
		/* A device-to-device call; its bytes are counted as the worker moves them. */
		atomic_fetch_add(&fc_cnt.kernel_launches, 1);
		atomic_fetch_add(&fc_cnt.d2d_calls, 1);
	} else if (x->kind == OP_BATCH) {
		for (size_t i = 0; i < x->batch->n; i++)
			count_copy(x->batch->it[i].x.dir, x->batch->it[i].x.n);
	}
}

/* Enqueues a copy, memset or host function, or records it as a node when
 * s is capturing. */
static int enqueue_data_op(struct CUstream_st *s, struct fc_op *op, int sync)
{
	uint64_t seq;
	int err = 0;

	pthread_mutex_lock(&fc.lock);
	if (s->capturing) {
		err = fc_graph_add_locked(s->graph, &op->x, NULL);
		pthread_mutex_unlock(&fc.lock);
		fc_op_free(op);
		return err;
	}
	count_xfer(&op->x);
	seq = fc_submit_locked(s, op);
	if (sync)
		fc_wait_seq_locked(s, seq);
	pthread_mutex_unlock(&fc.lock);
	return err;
}

/* ---- copies and memsets ---- */

int fc_copy2d_check(void *dst, size_t dpitch, const void *src, size_t spitch,
		    size_t width, size_t height, int kind)
{
	struct fc_xfer x;
	int sk, dk;

	if (!width || !height)
		return 0;
	dk = fc_copy_describe(&x, dst, dpitch, src, spitch, width, height, kind, &sk);
	return dk < 0 ? dk : 0;
}

int fc_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch,
	      size_t width, size_t height, int kind, struct CUstream_st *s, int sync)
{
	struct fc_op *op;
	size_t r;
	int sk, dk;

	if (!width || !height)
		return 0;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	dk = fc_copy_describe(&op->x, dst, dpitch, src, spitch, width, height, kind, &sk);
	if (dk < 0) {
		fc_op_free(op);
		return dk;
	}
	if (sk == FC_PAGEABLE && !s->capturing) {
		/* A pageable source is read now, as the real runtime stages it. */
		op->staging = malloc(op->x.n);
		if (!op->staging) {
			fc_op_free(op);
			return -ENOMEM;
		}
		for (r = 0; r < height; r++)
			memcpy((char *)op->staging + r * width,
			       (const char *)src + r * op->x.spitch, width);
	}
	if (dk == FC_PAGEABLE)
		sync = 1;
	return enqueue_data_op(s, op, sync);
}

int fc_copy(void *dst, const void *src, size_t n, int kind,
	    struct CUstream_st *s, int sync)
{
	return fc_copy2d(dst, n, src, n, n, 1, kind, s, sync);
}

/* The srcAccessOrder of copy I of a batch (attribute structs of SIZE bytes, order first). */
static int batch_order(const void *attrs, size_t size, const size_t *idxs, size_t nattrs, size_t i)
{
	size_t a = 0;
	int order;

	while (a + 1 < nattrs && idxs[a + 1] <= i)
		a++;
	memcpy(&order, (const char *)attrs + a * size, sizeof(order));
	return order;
}

int fc_copy_batch(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
		  const void *attrs, size_t attr_size, const size_t *idxs, size_t nattrs,
		  struct CUstream_st *s)
{
	struct fc_batch *b;
	struct fc_op *op;
	size_t i, k = 0;
	int err = 0, sk, dk;

	if (s->capturing) {
		for (i = 0; i < count && !err; i++)
			err = fc_copy(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, s, 0);
		return err;
	}
	op = calloc(1, sizeof(*op));
	b = calloc(1, sizeof(*b) + count * sizeof(b->it[0]));
	if (!op || !b) {
		free(op);
		free(b);
		return -ENOMEM;
	}
	op->x.kind = OP_BATCH;
	op->x.batch = b;
	for (i = 0; i < count; i++) {
		struct fc_batch_item *it = &b->it[k];

		if (!sizes[i])
			continue;
		dk = fc_copy_describe(&it->x, dsts[i], sizes[i], srcs[i], sizes[i], sizes[i], 1,
				      cudaMemcpyDefault, &sk);
		if (dk < 0 || dk == FC_PAGEABLE) {
			/* A pageable destination would make the batch synchronous: not a batch's job here. */
			err = dk < 0 ? dk : -EINVAL;
			break;
		}
		b->n = ++k;
		/* Read during the call: copied now, whatever the memory. */
		if (batch_order(attrs, attr_size, idxs, nattrs, i) == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
		    sk != FC_DEVICE) {
			it->staging = malloc(sizes[i]);
			if (!it->staging) {
				err = -ENOMEM;
				break;
			}
			memcpy(it->staging, srcs[i], sizes[i]);
		}
	}
	if (err || !k) {
		fc_op_free(op);
		return err;
	}
	return enqueue_data_op(s, op, 0);
}

int fc_memset2d(void *dst, size_t pitch, unsigned value, unsigned esize,
		size_t width, size_t height, struct CUstream_st *s, int sync)
{
	struct fc_op *op;
	int err;

	if (!width || !height)
		return esize == 1 || esize == 2 || esize == 4 ? 0 : -EINVAL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	err = fc_memset_describe(&op->x, dst, pitch, value, esize, width, height);
	if (err) {
		fc_op_free(op);
		return err;
	}
	return enqueue_data_op(s, op, sync);
}

int fc_memset(void *dst, int value, size_t n, struct CUstream_st *s, int sync)
{
	return fc_memset2d(dst, n, (unsigned)value & 0xff, 1, n, 1, s, sync);
}

/* ---- other operations ---- */

/* A new operation of KIND, otherwise zeroed; NULL when out of memory. */
static struct fc_op *op_new(enum fc_op_kind kind)
{
	struct fc_op *op = calloc(1, sizeof(*op));

	if (op)
		op->x.kind = kind;
	return op;
}

/* Enqueues a non-data operation (lock not held); refused while capturing. */
static int enqueue_simple(struct CUstream_st *s, struct fc_op *op)
{
	int err = 0;

	pthread_mutex_lock(&fc.lock);
	if (s->capturing) {
		err = -ENOTSUP;
		fc_op_free(op);
	} else {
		fc_submit_locked(s, op);
	}
	pthread_mutex_unlock(&fc.lock);
	return err;
}

int fc_free_async(void *p, struct CUstream_st *s)
{
	struct fc_op *op;
	void *base;
	size_t size;
	int dev;

	if (fc_dev_block(p, &dev, &base, &size) < 0 || base != p || fc_vmm_reserved(p))
		return -EINVAL;
	op = op_new(OP_FREE);
	if (!op)
		return -ENOMEM;
	op->x.dst = p;
	return enqueue_simple(s, op);
}

int fc_gather_enqueue(struct CUstream_st *s, struct fc_gather *g)
{
	struct fc_op *op = op_new(OP_GATHER);

	if (!op) {
		fc_gather_drop(g);
		return -ENOMEM;
	}
	op->x.gather = g;
	op->x.dir = DIR_D2D;
	return enqueue_data_op(s, op, 0);
}

/* A host function runs on the worker in stream order; while the stream is
 * capturing it becomes a host node, as on a real device. */
int fc_hostfn(struct CUstream_st *s, void (*fn)(void *), void *arg)
{
	struct fc_op *op;

	if (!fn)
		return -EINVAL;
	op = op_new(OP_HOSTFN);
	if (!op)
		return -ENOMEM;
	op->x.fn = fn;
	op->x.arg = arg;
	return enqueue_data_op(s, op, 0);
}

/* The legacy callback form; not capturable (cudaErrorStreamCaptureUnsupported).
 * Shaped like fc_hostfn (check, allocate, fill, enqueue), but its fields and
 * its refusal under capture (enqueue_simple) are its own. */
int fc_stream_callback(struct CUstream_st *s, void *handle, cudaStreamCallback_t cb, void *arg)
{
	struct fc_op *op;
	int err;

	if (!cb)
		return -EINVAL;
	op = op_new(OP_CALLBACK);
	if (!op)
		return -ENOMEM;
	op->x.arg = arg;
	op->cb = cb;
	op->cb_stream = handle;
	err = enqueue_simple(s, op);
	return err == -ENOTSUP ? -EPERM : err;
}

int fc_stream_nop(struct CUstream_st *s)
{
	struct fc_op *op = op_new(OP_NOP);

	if (!op)
		return -ENOMEM;
	pthread_mutex_lock(&fc.lock);
	if (s->capturing)
		fc_op_free(op);
	else
		fc_submit_locked(s, op);
	pthread_mutex_unlock(&fc.lock);
	return 0;
}

/* ---- graph replays ---- */

/* Replays the nodes on s in order; sources are read when each runs. */
int fc_graph_launch(struct CUgraphExec_st *x, struct CUstream_st *s)
{
	struct fc_op *op;
	size_t i;
	int err = 0;

	if (fc_graph_exec_check(x))
		return -EBADF;
	pthread_mutex_lock(&fc.lock);
	if (s->capturing) {
		err = -ENOTSUP;
		goto out_unlock;
	}
	for (i = 0; i < x->n; i++) {
		op = calloc(1, sizeof(*op));
		if (!op) {
			err = -ENOMEM;
			break;
		}
		op->x = x->nodes[i];
		xfer_hold(&op->x);
		count_xfer(&op->x);
		fc_submit_locked(s, op);
	}
	atomic_fetch_add(&fc_cnt.graph_launches, 1);
out_unlock:
	pthread_mutex_unlock(&fc.lock);
	return err;
}
