/*
 * classify: the "classify" step of DESIGN.md. For one copy a program made
 * (through any entry point), decides whether it is host-to-device at all,
 * and whether the pool takes it or it passes through untouched, with the
 * reason, which the stats count (copies.passthrough_reasons).
 *
 * The pool takes a host-to-device copy when every one of these holds:
 * the shim is on or dry and has a layout whose specs match the size; the
 * destination is device memory (not managed, not host) of the calling
 * thread's current device, holding the whole copy inside one allocation
 * (the pool writes it row by row, and a row past the end would land in the
 * neighbouring allocation instead of being refused by the runtime); the
 * source is host memory (pageable or pinned); the stream is not being
 * captured into a graph (a captured copy is replayed later from its
 * source: serving it from the pool would freeze its content).
 *
 * It also maps the program's stream to the handle the driver sees (0x2
 * for the per-thread stream of _ptds/_ptsz entries and of synchronous
 * per-thread copies) and decides whether captured rows need the run-time
 * check of a pinned source (pincheck.h): pinned source, and a stream that
 * may run the copy later than now.
 *
 * Queries only: classify makes no device work and changes no state but
 * the counters.
 */
#ifndef VRAMPOOL_CLASSIFY_H
#define VRAMPOOL_CLASSIFY_H

#include <stdint.h>

#include "device/device.h"
#include "core/layout.h"

/* Why a copy passes through (CL_POOL: it does not). */
enum classify_reason {
	CL_POOL,                /* the pool takes it */
	CL_OFF,                 /* VRAMPOOL=off or a malformed variable */
	CL_NO_LAYOUT,           /* no layout yet (none set, or auto still looking) */
	CL_NO_MATCH,            /* its size matches no spec */
	CL_DST_NOT_DEVICE,      /* the destination is managed or not device memory */
	CL_DST_EXTENT,          /* the copy runs past its destination's allocation */
	CL_NO_CONTEXT,          /* no context on the calling thread, a context of its own (not the primary), or another device's memory */
	CL_SRC_NOT_HOST,        /* the source is not host memory */
	CL_CAPTURING,           /* its stream is being captured into a graph */
	CL_NO_DRIVER,           /* the driver API could not be loaded */
	CL__COUNT
};

/* How the copy's direction is known. */
enum classify_dir {
	CL_DIR_H2D,             /* the program said host-to-device */
	CL_DIR_INFER,           /* cudaMemcpyDefault, cuMemcpy: from the pointers */
	CL_DIR_OTHER,           /* any other direction: not ours */
};

struct classify_in {
	const void *dst;
	const void *src;
	uint64_t n;
	enum classify_dir dir;
	dev_stream stream;      /* as the program passed it (ignored for synchronous entries) */
	int sync;               /* a synchronous entry: the legacy or per-thread default stream */
	int per_thread;         /* a _ptds/_ptsz entry: stream 0 is the per-thread stream */
	const struct layout *layout;    /* the layout to match; NULL: the pool is off */
	int off_reason;         /* with layout NULL: CL_OFF or CL_NO_LAYOUT */
};

struct classify_out {
	enum classify_reason reason;
	struct layout_hit hit;  /* CL_POOL: the row and priority */
	int dev;                /* CL_POOL: the destination's device */
	dev_stream ds;          /* CL_POOL, CL_CAPTURING: the stream handle the driver sees */
	int src_pinned;         /* CL_POOL: the source is page-locked host memory */
	int verify;             /* CL_POOL: the source is pinned: captured rows may need the run-time check */
};

/*
 * Classifies one copy. Returns 1 when it is host-to-device (out->reason
 * says whether the pool takes it), 0 when it is not (it is none of the
 * shim's business; out is untouched).
 */
int classify_copy(const struct classify_in *in, struct classify_out *out);

/* The stats key of a reason ("no_match", ...). */
const char *classify_reason_name(enum classify_reason r);

#endif
