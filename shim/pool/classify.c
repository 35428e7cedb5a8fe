/*
 * classify: the decisions of classify.h, with the pointer queries made
 * only when they matter (an explicit host-to-device copy that matches no
 * spec costs no query at all).
 */
#include "pool/classify.h"

static const char *const classify_names[CL__COUNT] = {
	[CL_POOL] = "pooled",
	[CL_OFF] = "off",
	[CL_NO_LAYOUT] = "no_layout",
	[CL_NO_MATCH] = "no_match",
	[CL_DST_NOT_DEVICE] = "dst_not_device",
	[CL_DST_EXTENT] = "dst_extent",
	[CL_NO_CONTEXT] = "no_context",
	[CL_SRC_NOT_HOST] = "src_not_host",
	[CL_CAPTURING] = "graph_capture",
	[CL_NO_DRIVER] = "no_driver",
};

const char *classify_reason_name(enum classify_reason r)
{
	return (unsigned)r < CL__COUNT ? classify_names[r] : "unknown";
}

/* Whether a pointer of this kind is host memory as a copy source. */
static int classify_is_host(enum dev_mem k)
{
	return k == DEV_MEM_UNREGISTERED || k == DEV_MEM_HOST;
}

/*
 * A pointer query, asked twice when the first fails: a transient failure
 * of it would leave a cudaMemcpyDefault copy's direction unknown and the
 * copy out of the counts (the soak found it). One that fails every time
 * cannot tell, and leaves the copy to the driver uncounted.
 */
static int classify_query(const void *p, enum dev_mem *kind, int *ordinal, uint64_t *end)
{
	return device_classify(p, kind, ordinal, end) && device_classify(p, kind, ordinal, end);
}

/* Why a copy that matches no spec passes: no match, or the layout's absence (off, none). */
static enum classify_reason classify_unmatched(const struct classify_in *in)
{
	return in->layout ? CL_NO_MATCH : (enum classify_reason)in->off_reason;
}

/* Whether a cudaMemcpyDefault copy goes from host memory into device (or managed) memory. */
static int classify_inferred_h2d(const struct classify_in *in)
{
	enum dev_mem dkind, skind;
	int ddev, sdev;

	return !classify_query(in->dst, &dkind, &ddev, NULL) &&
	       (dkind == DEV_MEM_DEVICE || dkind == DEV_MEM_MANAGED) && in->src &&
	       !classify_query(in->src, &skind, &sdev, NULL) && classify_is_host(skind);
}

/*
 * Whether a source that starts in pinned memory (its range ending at send,
 * 0 when the driver does not say) is pinned to its last byte. The runtime
 * stages a source that runs past its page-locked range as pageable memory,
 * during the call; the pool must read it as the runtime does.
 */
static int classify_pinned_to_end(const struct classify_in *in, uint64_t send)
{
	uint64_t end = (uint64_t)(uintptr_t)in->src + in->n;
	enum dev_mem k;
	int d;

	if (send)
		return end <= send && end >= in->n;
	return !classify_query((const unsigned char *)in->src + in->n - 1, &k, &d, NULL) && k == DEV_MEM_HOST;
}

int classify_copy(const struct classify_in *in, struct classify_out *out)
{
	enum dev_mem dkind = DEV_MEM_UNREGISTERED, skind = DEV_MEM_UNREGISTERED;
	int ddev = -1, sdev = -1, cur = -1, capturing = 0, matched;
	struct layout_hit hit = { 0 };
	uint64_t dend = 0, send = 0;
	dev_stream ds;

	if (in->dir == CL_DIR_OTHER)
		return 0;
	matched = in->layout && layout_match_hit(in->layout, in->n, &hit);
	/* An explicit host-to-device copy the pool will not take needs no query. */
	if (in->dir == CL_DIR_H2D && !matched) {
		out->reason = classify_unmatched(in);
		return 1;
	}
	if (device_open()) {
		/* The pool's start-up failed (or waits for its retry), the
		 * program's may not have: a cudaMemcpyDefault copy's direction
		 * is asked all the same, so that the copy is counted. */
		if (in->dir == CL_DIR_INFER && !(device_can_query() && classify_inferred_h2d(in)))
			return 0;       /* without the driver the direction is unknown */
		out->reason = matched ? CL_NO_DRIVER : classify_unmatched(in);
		return 1;
	}
	if (classify_query(in->dst, &dkind, &ddev, &dend)) {
		if (in->dir != CL_DIR_H2D)
			return 0;
		out->reason = CL_DST_NOT_DEVICE;
		return 1;
	}
	if (in->dir == CL_DIR_INFER) {
		/* Managed memory is the device's, as CUDA counts it. */
		if (dkind != DEV_MEM_DEVICE && dkind != DEV_MEM_MANAGED)
			return 0;
		if (!in->src || classify_query(in->src, &skind, &sdev, &send) || !classify_is_host(skind))
			return 0;
		if (!matched) {
			out->reason = classify_unmatched(in);
			return 1;
		}
	}
	if (dkind != DEV_MEM_DEVICE) {
		out->reason = CL_DST_NOT_DEVICE;
		return 1;
	}
	if (!dend || (uint64_t)(uintptr_t)in->dst + in->n > dend || (uint64_t)(uintptr_t)in->dst + in->n < in->n) {
		out->reason = CL_DST_EXTENT;
		return 1;
	}
	/* The pool serves the device's primary context only (issue 18). */
	if (device_current_primary(&cur) || cur != ddev) {
		out->reason = CL_NO_CONTEXT;
		return 1;
	}
	/* The pool reads the source on the host: it must be host memory. A
	 * wrong kind or pointer is the runtime's to refuse, not ours to fault on. */
	if (in->dir == CL_DIR_H2D &&
	    (!in->src || classify_query(in->src, &skind, &sdev, &send) || !classify_is_host(skind))) {
		out->reason = CL_SRC_NOT_HOST;
		return 1;
	}
	if (in->sync)
		ds = in->per_thread ? DEV_STREAM_PER_THREAD : NULL;
	else if (in->per_thread && in->stream == NULL)
		ds = DEV_STREAM_PER_THREAD;
	else
		ds = in->stream;
	device_is_capturing(ds, &capturing);
	if (capturing) {
		out->reason = CL_CAPTURING;
		out->ds = ds;   /* its graph is asked for (pool/graphs.h) */
		return 1;
	}
	out->reason = CL_POOL;
	out->hit = hit;
	out->dev = ddev;
	out->ds = ds;
	out->src_pinned = skind == DEV_MEM_HOST && classify_pinned_to_end(in, send);
	/* A pinned source is read when the copy runs: captured rows may need
	 * the check then (pool_issue asks whether work is queued ahead, only
	 * for copies that capture). A pageable source is staged during the call. */
	out->verify = out->src_pinned;
	return 1;
}
