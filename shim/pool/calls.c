/*
 * calls: the fate of each copy and allocation the program makes, decided
 * below the hooks (STYLE.md 1). calls.h states the rules.
 */
#include <errno.h>
#include <stdatomic.h>

#include "core/log.h"
#include "core/pace.h"
#include "core/stats.h"
#include "device/device.h"
#include "pool/autolayout.h"
#include "pool/calls.h"
#include "pool/classify.h"
#include "pool/fingerprint.h"
#include "pool/graphs.h"
#include "pool/hazard.h"
#include "pool/ledger.h"
#include "pool/pool.h"
#include "pool/specpick.h"
#include "pool/whatif.h"

static const struct config *calls_cfg;

/* The automatic layout, once found, and the finder's state (enum autolayout_state). */
static struct layout calls_auto;
static _Atomic int calls_auto_state;

/* ---- the layout in use ------------------------------------------------------ */

/*
 * The layout to match: VRAMPOOL_LAYOUT, or the automatic one once found.
 * NULL with *why (CL_OFF, CL_NO_LAYOUT) when the pool takes nothing now.
 */
static const struct layout *calls_layout(int *why)
{
	const struct config *c = calls_cfg;

	if (c->off || c->invalid) {
		*why = CL_OFF;
		return NULL;
	}
	if (!c->has_layout) {
		*why = CL_NO_LAYOUT;
		return NULL;
	}
	if (!c->layout.is_auto)
		return &c->layout;
	if (atomic_load_explicit(&calls_auto_state, memory_order_acquire) == AUTOLAYOUT_FOUND)
		return &calls_auto;
	*why = CL_NO_LAYOUT;
	return NULL;
}

/*
 * Shows one host-to-device copy to the layout finder, when it is looking
 * (VRAMPOOL_LAYOUT=auto, or no layout in a run that is not off). On a
 * decision, publishes it: the automatic layout, or the suggestion.
 */
static void calls_autolayout(const void *src, uint64_t n)
{
	const struct config *c = calls_cfg;
	struct autolayout_result res;
	enum dev_mem kind;
	int ord;

	if (c->off || c->invalid || (c->has_layout && !c->layout.is_auto))
		return;
	if (atomic_load_explicit(&calls_auto_state, memory_order_relaxed) != AUTOLAYOUT_LOOKING || !src || !n)
		return;
	/* Only host memory is read: a wrong kind is the runtime's to refuse. */
	if (device_open() || device_classify(src, &kind, &ord, NULL) ||
	    (kind != DEV_MEM_UNREGISTERED && kind != DEV_MEM_HOST))
		return;
	if (!autolayout_observe(src, n)) {
		/* VRAMPOOL_LAYOUT=auto: what it has examined so far, for a job that ends first (issue 19) */
		if (c->layout.is_auto) {
			autolayout_result(&res);
			stats_set_text(STATS_EVIDENCE, "%s", res.evidence);
		}
		return;
	}
	autolayout_result(&res);
	if (res.state == AUTOLAYOUT_FOUND && c->layout.is_auto) {
		calls_auto = res.layout;
		pool_set_layout(&calls_auto);
		stats_set_text(STATS_LAYOUT, "%s", calls_auto.text);
		stats_set_text(STATS_LAYOUT_SOURCE, "auto");
		stats_set_text(STATS_EVIDENCE, "%s", res.evidence);
		stats_set_state(POOL_DORMANT);
		log_verbose("layout found: %s (%s)", calls_auto.text, res.evidence);
	} else if (res.state == AUTOLAYOUT_FOUND) {
		stats_set_text(STATS_EVIDENCE, "%s", res.evidence);
		stats_set_text(STATS_SUGGEST, "%s", res.layout.text);
	} else {
		stats_set_text(STATS_EVIDENCE, "%s", res.evidence);
		if (c->layout.is_auto)
			stats_set_text(STATS_REASON, "VRAMPOOL_LAYOUT=auto found no layout: %s; rows that never "
				       "repeat cannot be pooled (move random augmentation after the copy, or "
				       "leave VRAMPOOL_LAYOUT unset)", res.evidence);
		log_verbose("no layout found: %s", res.evidence);
	}
	atomic_store_explicit(&calls_auto_state, (int)res.state, memory_order_release);
}

/* ---- counting ---------------------------------------------------------------- */

/* The stats counter of each pass-through reason. */
static enum stat_id calls_reason_stat(enum classify_reason r)
{
	switch (r) {
	case CL_CAPTURING:
		return ST_GRAPH_CAPTURE_CALLS;
	default:
		return (enum stat_id)(ST_PASS_OFF + (r - CL_OFF));
	}
}

/*
 * Counts a host-to-device copy of n bytes the program made successfully.
 * A pooled copy's requested bytes were counted by pool_copy, right beside
 * its bytes sent and served, so that a dump taken meanwhile (a signal's,
 * from the reporter thread) never sees one copy's bytes without its
 * request (the soak found requested != h2d + served at a SIGTERM).
 */
static void calls_count(uint64_t n, int driver, enum classify_reason reason)
{
	stats_add(ST_H2D_CALLS, 1);
	stats_note_size(n);
	if (driver)
		stats_add(ST_DRIVER_CALLS, 1);
	if (reason != CL_POOL) {
		stats_add(ST_PASSTHROUGH_CALLS, 1);
		stats_add(ST_BYTES_REQUESTED, n);
		stats_add(ST_BYTES_H2D, n);
		stats_add(calls_reason_stat(reason), 1);
	}
	pace_note(n);   /* issue 19: the program's pace, every copy in every mode (core/pace.h) */
}

/*
 * A copy captured into a graph moves its bytes at each launch of the
 * graph, not now, as the device counts it: it is counted at each launch
 * (calls_graph_launch) when its graph is known. Returns 1 when its bytes
 * went to the graph's, 0 when it is to be counted now.
 */
static int calls_graph_captured(dev_stream ds, uint64_t n)
{
	void *graph;

	return device_capture_graph(ds, &graph) == 0 && graphs_add(graph, n) == 0;
}

/* Set once the program began a stream capture (calls_capture_begun). */
static _Atomic int calls_captures;

/*
 * Whether copy c, passing through for reason out->reason, went into a
 * graph (calls_graph_captured). A copy the pool never asked about (off, no
 * layout, no match) is asked once the program has begun a capture, so
 * that a run that is off counts graphs as one that is on.
 */
static int calls_graph_passthrough(const struct copy_call *c, const struct classify_out *out)
{
	dev_stream ds;

	if (out->reason == CL_CAPTURING)
		return calls_graph_captured(out->ds, c->n);
	if (c->sync || !atomic_load_explicit(&calls_captures, memory_order_relaxed) ||
	    (out->reason != CL_OFF && out->reason != CL_NO_LAYOUT && out->reason != CL_NO_MATCH) ||
	    device_open())
		return 0;
	ds = c->per_thread && c->stream == NULL ? DEV_STREAM_PER_THREAD : c->stream;
	return calls_graph_captured(ds, c->n);
}

void calls_capture_begun(void)
{
	atomic_store_explicit(&calls_captures, 1, memory_order_relaxed);
}

/* Whether p is host memory (pageable or pinned). */
static int calls_host_memory(const void *p)
{
	enum dev_mem k;
	int ord;

	if (device_open() || device_classify(p, &k, &ord, NULL))
		return 0;
	return k == DEV_MEM_UNREGISTERED || k == DEV_MEM_HOST;
}

/* Whether a batch entry is host-to-device: a host source and a device (or managed) destination. */
static int calls_entry_h2d(const void *dst, const void *src)
{
	enum dev_mem dk;
	int dd;

	if (device_open() || device_classify(dst, &dk, &dd, NULL))
		return 0;
	return (dk == DEV_MEM_DEVICE || dk == DEV_MEM_MANAGED) && calls_host_memory(src);
}

/* ---- copies ------------------------------------------------------------------ */

/*
 * The pool's deliveries of the program's bytes: the program's own entry
 * point (asynchronous, or synchronous when sync is set), run under the
 * program's capture mode (the pool relaxes it for its own work; calls_copy).
 */
static int calls_deliver(struct copy_call *c, uint64_t off, uint64_t len, int sync)
{
	int r;

	device_capture_restore(c->capture_mode);
	r = sync ? c->h2d_sync(c->arg, off, len) : c->h2d(c->arg, off, len);
	device_capture_relax();
	return r;
}

static int calls_h2d(void *arg, uint64_t off, uint64_t len)
{
	return calls_deliver(arg, off, len, 0);
}

static int calls_h2d_sync(void *arg, uint64_t off, uint64_t len)
{
	return calls_deliver(arg, off, len, 1);
}

/*
 * A copy of a spec standing aside (ledger.h): forwarded before any
 * pointer query, counted as a matched copy of that spec passed straight
 * through; one in LEDGER_SAMPLE_EVERY still reaches its pool, which
 * samples it. Only an explicit host-to-device copy that one spec alone
 * divides (several: the content picks the spec, specpick.h). Returns 1
 * with *err the forward's status when it took the copy, else 0.
 */
static int calls_aside(struct copy_call *c, const struct layout *l, int *err)
{
	struct layout_hit hit;
	int slot;

	if (calls_cfg->ledger != LEDGER_ON || c->dir != CL_DIR_H2D || !layout_match_hit(l, c->n, &hit))
		return 0;
	for (int i = 0; i < l->nrows; i++)
		if (i != hit.spec && c->n % l->rows[i] == 0)
			return 0;
	slot = ledger_slot(hit.spec);
	if (slot < 0 || !ledger_skip(slot))
		return 0;
	*err = c->forward(c->arg);
	if (*err)
		return 1;
	stats_add(ST_MATCHED_CALLS, 1);
	stats_add(ST_STOOD_ASIDE_CALLS, 1);
	stats_add(ST_ROWS_SEEN, c->n / hit.row);
	stats_add(ST_ROWS_MISSES, c->n / hit.row);
	stats_add(ST_BYTES_REQUESTED, c->n);     /* beside the bytes, as pool_copy does */
	stats_add(ST_BYTES_H2D, c->n);
	ledger_count_aside(&ledger_board[slot], c->n, hit.row);
	calls_count(c->n, c->driver, CL_POOL);
	/* not a word of its rows read for the what-if curve: standing aside costs only the
	 * counting (DESIGN, never slower); the curve says it is an estimate (whatif.h) */
	whatif_set_unobserved();
	return 1;
}

/* Whether the program's host work is followed: a run that can pool (not off, invalid or dry). */
static int calls_tracks_host(void)
{
	const struct config *c = calls_cfg;

	return c && !c->off && !c->invalid && !c->dry;
}

void calls_host_write(dev_stream stream, int per_thread, const void *dst, uint64_t n)
{
	if (!calls_tracks_host())
		return;
	hazard_note(per_thread && stream == NULL ? DEV_STREAM_PER_THREAD : stream, dst, n);
}

void calls_host_work(dev_stream stream, int per_thread)
{
	calls_host_write(stream, per_thread, NULL, 0);
}

void calls_graph_launch(const void *exec, dev_stream stream, int per_thread)
{
	uint64_t bytes = graphs_bytes(exec);

	calls_host_work(stream, per_thread);    /* a graph may hold host nodes: any */
	if (bytes) {
		/* its captured copies, as one host-to-device copy that went untouched */
		pace_begin();
		calls_count(bytes, 0, CL_CAPTURING);
	}
}

void calls_graph_exec(const void *exec, const void *graph)
{
	if (exec)
		graphs_copy(exec, graph);
}

void calls_graph_gone(const void *h)
{
	graphs_forget(h);
}

/*
 * An asynchronous copy into page-locked host memory is written in stream
 * order (pageable memory is written before the call returns): noted. A
 * destination that cannot be asked counts as pinned.
 */
int calls_copy_other(struct copy_call *c)
{
	enum dev_mem kind;
	int err = c->forward(c->arg), ord;

	if (err || !c->host_dst || c->sync || !calls_tracks_host())
		return err;     /* off: no pointer query either */
	if (!device_open() && !device_classify(c->dst, &kind, &ord, NULL) && kind != DEV_MEM_HOST)
		return err;
	/* n 0: the bytes written are not one range (a strided 2D copy): any */
	calls_host_write(c->stream, c->per_thread, c->n ? c->dst : NULL, c->n);
	return err;
}

int calls_copy(struct copy_call *c)
{
	struct classify_in in = {
		.dst = c->dst, .src = c->src, .n = c->n, .dir = c->dir, .stream = c->stream,
		.sync = c->sync, .per_thread = c->per_thread,
	};
	struct classify_out out;
	struct pool_request r;
	struct pool *p;
	uint64_t ctx_id;
	int why = CL_OFF, err, h2d, mode;
	enum specpick_result pick;

	if (c->dir != CL_DIR_OTHER)
		pace_begin();   /* issue 19: the copy's call time, shared with the ledger's stamp */
	in.layout = calls_layout(&why);
	in.off_reason = why;
	if (in.layout && calls_aside(c, in.layout, &err))
		return err;
	h2d = classify_copy(&in, &out);
	if (h2d && out.reason == CL_NO_LAYOUT) {
		calls_autolayout(c->src, c->n);
		in.layout = calls_layout(&why);
		if (in.layout)
			h2d = classify_copy(&in, &out);
	}
	if (!h2d)
		return calls_copy_other(c);
	if (out.reason != CL_POOL)
		goto passthrough;
	/* Several specs divide the size: the content says which one cuts it. */
	pick = specpick_choose(in.layout, c->n, c->src, &out.hit);
	/* Without the id a reset could go unseen, and freed slabs be served:
	 * a failed query passes the copy (a driver without it has no id). */
	if (device_context_id(&ctx_id) == -EIO) {
		out.reason = CL_NO_CONTEXT;
		goto passthrough;
	}
	p = pool_get(out.dev, ctx_id);
	if (!p)
		goto passthrough;
	r = (struct pool_request){
		.dst = (dev_ptr)(uintptr_t)c->dst, .src = c->src, .n = c->n, .row = out.hit.row,
		.prio = out.hit.prio, .stream = out.ds, .h2d = calls_h2d, .h2d_sync = calls_h2d_sync,
		.arg = c, .verify = out.verify, .sync = c->sync,
		.no_admit = pick == SPECPICK_UNDECIDED,
		.spec = out.hit.spec, .src_pinned = out.src_pinned,
	};
	c->capture_mode = mode = device_capture_relax();
	err = pool_copy(p, &r);
	device_capture_restore(mode);
	if (err == 0)
		calls_count(c->n, c->driver, CL_POOL);
	return err;

passthrough:
	err = c->forward(c->arg);
	if (err == 0 && !calls_graph_passthrough(c, &out))
		calls_count(c->n, c->driver, out.reason);
	return err;
}

int calls_copy_unpooled(struct copy_call *c)
{
	int err = (pace_begin(), c->forward(c->arg));   /* issue 19: the call time (core/pace.h) */

	if (err == 0 && (c->dir == CL_DIR_H2D || (c->dir == CL_DIR_INFER && calls_host_memory(c->src))))
		calls_count(c->n, c->driver, CL_NO_MATCH);
	return err;
}

int calls_copy_batch(struct copy_batch *b)
{
	int err = (pace_begin(), b->forward(b->arg));   /* issue 19: the call time (core/pace.h) */

	if (err != 0 || !b->dsts || !b->srcs || !b->sizes)
		return err;
	stats_add(ST_BATCH_CALLS, 1);
	for (size_t i = 0; i < b->count; i++)
		if (b->sizes[i] && calls_entry_h2d(b->dsts[i], b->srcs[i]))
			calls_count(b->sizes[i], b->driver, CL_NO_MATCH);
	return err;
}

/* ---- allocations ------------------------------------------------------------- */

void calls_alloc_begin(struct alloc_call *a)
{
	a->retries = 0;
	stats_add(ST_ALLOC_CALLS, 1);
}

static void calls_alloc_clear(const struct alloc_call *a)
{
	if (a->clear_error)
		a->clear_error();
}

int calls_alloc_again(struct alloc_call *a, int err)
{
	if (a->retries && err == 0) {
		calls_alloc_clear(a);
		return 0;
	}
	if (err != a->oom)
		return 0;
	if (!a->retries && (!calls_cfg->enabled || device_open()))
		return 0;
	/* A current device that cannot be read leaves a->dev at -1: every pool gives back (item A). */
	if (!a->retries && a->dev < 0 && device_current(&a->dev))
		a->dev = -1;
	if (pool_reclaim(a->dev, a->need) <= 0)
		return 0;
	calls_alloc_clear(a);
	stats_add(ST_POOL_OOM_RETRIES, 1);
	a->retries++;
	return 1;
}

/* ---- life cycle -------------------------------------------------------------- */

/* The starting state and reason of the pool for the dump. */
static void calls_initial_state(void)
{
	const struct config *c = calls_cfg;
	const char *layout = c->has_layout ? c->layout.text : NULL;

	/* "auto" stands for the layout until the content shows one. */
	stats_reset(c->enabled, layout);
	if (layout)
		stats_set_text(STATS_LAYOUT_SOURCE, c->layout.is_auto ? "auto" : "env");
	if (c->dry && !c->invalid)
		stats_set_mode(STATS_MODE_DRY);
	if (c->invalid) {
		stats_set_state(POOL_OFF);
		stats_set_text(STATS_REASON, "%s", c->problem);
	} else if (c->off) {
		stats_set_state(POOL_OFF);
		stats_set_text(STATS_REASON, "VRAMPOOL=off: a counting pass-through");
	} else if (c->dry) {
		stats_set_state(POOL_OFF);
		stats_set_text(STATS_REASON, "VRAMPOOL=dry: fingerprints only; the what-if curve says what "
			       "a pool would have served");
	} else if (!c->has_layout) {
		stats_set_state(POOL_OFF);
		stats_set_text(STATS_REASON, "no VRAMPOOL_LAYOUT set");
	} else {
		/* auto looking, or a layout waiting for its matched copies: report/reason.c
		 * says which from the counters (issue 19: no copy matched, sizes seen) */
		stats_set_state(POOL_DORMANT);
		stats_set_text(STATS_REASON, "%s", "");
	}
}

/* Starts the layout finder afresh, when the configuration has it look. */
static void calls_autolayout_setup(const struct config *c)
{
	if (c->has_layout && c->layout.is_auto && !c->off && !c->invalid)
		autolayout_setup(AUTOLAYOUT_POOL);
	else if (!c->has_layout && !c->off && !c->invalid)
		autolayout_setup(AUTOLAYOUT_SUGGEST);
	else {
		atomic_store(&calls_auto_state, AUTOLAYOUT_NOTHING);
		return;
	}
	atomic_store(&calls_auto_state, AUTOLAYOUT_LOOKING);
}

void calls_setup(const struct config *c)
{
	calls_cfg = c;
	calls_initial_state();
	calls_autolayout_setup(c);
	pool_setup(c);
	fingerprint_init(c->threads);
}

void calls_atfork_child(void)
{
	const struct config *c = calls_cfg;

	pool_atfork_child();
	hazard_atfork_child();
	graphs_atfork_child();
	device_atfork_child();
	/* Issue 17, item F: a child that has no layout yet looks afresh, with a
	 * new lock (a thread of the parent may have held the finder's). */
	if (atomic_load(&calls_auto_state) != AUTOLAYOUT_FOUND)
		calls_autolayout_setup(c);
	fingerprint_atfork_child();
	specpick_reset();
	whatif_reset();
	ledger_board_reset();
	stats_reset(c->enabled, c->has_layout ? c->layout.text : NULL);
	if (c->dry)
		stats_set_mode(STATS_MODE_DRY);
	if (atomic_load(&calls_auto_state) == AUTOLAYOUT_FOUND) {
		stats_set_text(STATS_LAYOUT, "%s", calls_auto.text);
		stats_set_text(STATS_LAYOUT_SOURCE, "auto");
	} else if (c->has_layout) {
		stats_set_text(STATS_LAYOUT_SOURCE, c->layout.is_auto ? "auto" : "env");
	}
}
