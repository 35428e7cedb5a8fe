/*
 * stats: the counters of DESIGN.md's stats JSON, the text fields, the pool
 * state and the copy-size table. The reports that show them (the JSON dump,
 * the summary) are report's (report/json.h, report/summary.h).
 *
 * Counters are relaxed atomics, per thread (below) plus a global part in
 * stats_global, written
 * by any thread with stats_add; readers see a consistent-enough snapshot
 * (each field exact, fields not mutually synchronised). The pool's gauges
 * (state, budget, bytes, slabs, probe) are set by the pool with stats_set.
 *
 * Invariant the rest of the shim maintains and the tests check:
 *   bytes.requested == bytes.h2d + bytes.served_from_pool
 *
 * Every reader here (stats_get, stats_get_text, stats_sizes,
 * stats_elapsed_ns, stats_state) makes no CUDA call, allocates nothing and
 * takes no lock: counters are atomics, text fields are read under a
 * sequence count with a bounded number of retries. So the reporter thread
 * can read them while another thread, stopped by a signal, is inside any
 * of the shim's critical sections; and they are safe from an atexit
 * handler while the runtime unloads.
 *
 * This is the core layer: it includes and calls nothing above core/.
 */
#ifndef VRAMPOOL_STATS_H
#define VRAMPOOL_STATS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

enum stat_id {
	ST_H2D_CALLS,           /* copies.h2d_calls: host-to-device copies seen */
	ST_MATCHED_CALLS,       /* copies.matched_calls: those the layout matched and the pool handled */
	ST_PASSTHROUGH_CALLS,   /* copies.passthrough_calls: those forwarded untouched */
	ST_BYTES_REQUESTED,     /* bytes.requested */
	ST_BYTES_H2D,           /* bytes.h2d: crossed host-to-device */
	ST_BYTES_SERVED,        /* bytes.served_from_pool */
	ST_BYTES_CAPTURED,      /* bytes.captured: copied into slabs */
	ST_ROWS_SEEN,
	ST_ROWS_HITS,
	ST_ROWS_MISSES,
	ST_ROWS_CAPTURED,
	ST_ROWS_POOLED,         /* gauge: rows currently in the pool */
	ST_POOL_BUDGET,         /* gauge */
	ST_POOL_BYTES,          /* gauge: slab bytes allocated */
	ST_POOL_SLABS,          /* gauge */
	ST_POOL_EVICTIONS,      /* slabs evicted */
	ST_POOL_EVICTED_BYTES,
	ST_POOL_OOM_RETRIES,    /* program allocations retried after eviction */
	ST_PROBE_FREE,          /* gauge: cuMemGetInfo free at the probe */
	ST_PROBE_TOTAL,
	ST_PROBE_RESERVE,
	ST_PROBE_MARGIN,
	ST_TIME_FINGERPRINT_NS,
	ST_TIME_SHIM_NS,        /* caller's time in the shim on matched copies, less the real calls it forwards */
	ST_DEVICE_OPS,          /* device operations the pool issued (copies, events, waits) */
	ST_FALLBACKS,           /* matched copies that fell back to the plain copy after a pool failure */
	ST_ALLOC_CALLS,         /* program allocations seen */
	ST_GRAPH_CAPTURE_CALLS, /* copies forwarded because their stream was capturing */
	ST_DRIVER_CALLS,        /* copies.driver_calls: host-to-device copies made through the driver API */
	ST_BATCH_CALLS,         /* copies.batch_calls: the program's own batched copies (counted per h2d entry in h2d_calls) */
	ST_STOOD_DOWN_CALLS,    /* copies.stood_down: matched copies passed without fingerprinting while pooling stood down */
	ST_BACKOFF_EVENTS,      /* pool.stand_downs: times pooling stood down because rows did not repeat */
	ST_POOL_DISPLACED_BYTES,/* pool.displaced_bytes: slab bytes freed for rows of a higher priority */
	ST_POOL_DISPLACED_SLABS,/* pool.displaced_slabs */
	ST_POOL_FAULTS,         /* pool.faults: failed device calls of the pool's own (each handled) */
	ST_GATHER_LAUNCHES,     /* pool.gather_launches: gather kernel launches */
	/* Admission on evidence (issue 16, pool/doorkeeper.h). */
	ST_ROWS_REFUSED,        /* rows.refused: rows seen once that the doorkeeper kept out of the pool */
	ST_ADMIT_ENGAGEMENTS,   /* pool.doorkeeper.engagements: times rows began to be captured on a second sighting */
	ST_ADMIT_DISENGAGEMENTS,/* pool.doorkeeper.disengagements: times capture on first sight resumed */
	/* copies.passthrough_reasons, in classify.h's order from CL_OFF (CL_CAPTURING is graph_capture) */
	ST_PASS_OFF,
	ST_PASS_NO_LAYOUT,
	ST_PASS_NO_MATCH,
	ST_PASS_DST_NOT_DEVICE,
	ST_PASS_DST_EXTENT,
	ST_PASS_NO_CONTEXT,
	ST_PASS_SRC_NOT_HOST,
	ST_PASS_CAPTURING_UNUSED,
	ST_PASS_NO_DRIVER,
	/* The cost ledger (issue 16, pool/ledger.h). */
	ST_STOOD_ASIDE_CALLS,   /* copies.stood_aside: matched copies passed straight through while their spec stood aside */
	ST_LEDGER_ASIDES,       /* pool.stand_asides: times a spec stood aside because pooling it did not pay */
	ST_LEDGER_RESUMES,      /* pool.resumes: times a spec that stood aside came back */
	ST_TIME_SHIM_CPU_NS,    /* time_ns.shim_cpu: the calling thread's CPU time in the shim on matched copies */
	ST__COUNT
};

/* How the shim runs: "on", "off" (VRAMPOOL=off or a malformed variable), "dry" (VRAMPOOL=dry). */
enum stats_mode { STATS_MODE_ON, STATS_MODE_OFF, STATS_MODE_DRY };

/* pool.state values, in the JSON as "off", "dormant", "active", "full", "latched". */
enum pool_state { POOL_OFF, POOL_DORMANT, POOL_ACTIVE, POOL_FULL, POOL_LATCHED };

#define STATS_MAX_SIZES 64
#define STATS_TEXT_MAX 256

struct stats {
	_Atomic uint64_t v[ST__COUNT];
	_Atomic int state;              /* enum pool_state */
	_Atomic int probe_decided;
	_Atomic int used;               /* this process made an interposed call */
	int enabled;                    /* set once at init */
	enum stats_mode mode;           /* set once at init */
	/*
	 * Text fields, written rarely (stats_set_text), read by the reports
	 * (stats_get_text); never read or write them directly.
	 */
	char layout[STATS_TEXT_MAX];    /* the spec in use ("" none yet) */
	char layout_source[8];          /* "env" or "auto" ("" none) */
	char reason[STATS_TEXT_MAX];    /* why the pool is off, dormant, full or latched ("" none) */
	char evidence[STATS_TEXT_MAX];  /* auto layout: what was found and from what */
	char gather[32];                /* how hits are delivered: "kernel", "batched copy", "" (none yet) */
	char suggest[STATS_TEXT_MAX];   /* no layout: the spec the evidence suggests ("" none) */
	_Atomic unsigned text_seq;      /* odd while a text field is being written */
	_Atomic int stood_down;         /* pooling stood down now (rows did not repeat) */
	_Atomic uint64_t start_ns;      /* CLOCK_MONOTONIC at the first stats_mark_used (0: not yet) */
	/* Copy sizes seen, for the layout suggestion: lock-free insert by CAS on size. */
	_Atomic uint64_t size_key[STATS_MAX_SIZES];
	_Atomic uint64_t size_calls[STATS_MAX_SIZES];
	_Atomic uint64_t size_bytes[STATS_MAX_SIZES];
};

extern struct stats stats_global;

/*
 * Counters are kept per thread, so that concurrent callers never write a
 * shared cache line on the copy path: each thread that counts gets a block
 * (allocated on its first count, linked into a list, kept after the thread
 * exits so its counts stay in the totals). Only the owning thread writes
 * its block; readers sum the blocks with relaxed loads. Gauges that go up
 * and down (rows pooled, slab bytes) are sums of per-thread deltas, modulo
 * 2^64. stats_set writes the global part and is for values nobody adds to.
 */
struct stats_thread {
	_Atomic uint64_t v[ST__COUNT];
	struct stats_thread *next;
};

extern __thread struct stats_thread *stats_self;

/* Allocates and links the calling thread's block; NULL when out of memory. */
struct stats_thread *stats_thread_new(void);

static inline void stats_add(enum stat_id id, uint64_t n)
{
	struct stats_thread *t = stats_self;

	if (__builtin_expect(!t, 0) && !(t = stats_thread_new())) {
		atomic_fetch_add_explicit(&stats_global.v[id], n, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&t->v[id], atomic_load_explicit(&t->v[id], memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static inline void stats_sub(enum stat_id id, uint64_t n)
{
	stats_add(id, (uint64_t)0 - n);
}

static inline void stats_set(enum stat_id id, uint64_t n)
{
	atomic_store_explicit(&stats_global.v[id], n, memory_order_relaxed);
}

/* Returns the total of id: the global part plus every thread's block. */
uint64_t stats_get(enum stat_id id);

/*
 * Zeroes every counter and the size table, clears used and the start
 * time, sets the fixed fields and the state (dormant when enabled, off
 * otherwise) (fork child, tests). The once-only exit report is report's
 * (report_atfork_child re-arms it).
 */
void stats_reset(int enabled, const char *layout);

/* Sets the mode (after stats_reset). */
void stats_set_mode(enum stats_mode m);

/* Which text field stats_set_text writes. */
enum stats_text {
	STATS_LAYOUT,
	STATS_LAYOUT_SOURCE,
	STATS_REASON,
	STATS_EVIDENCE,
	STATS_GATHER,
	STATS_SUGGEST,          /* set with STATS_EVIDENCE when a run without a layout finds one */
};

/*
 * Sets one text field (printf-style; truncated to its size). Thread-safe;
 * a report reads a whole old or new value, never a mix (but see
 * stats_get_text).
 */
void stats_set_text(enum stats_text which, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Copies one text field into buf, NUL-terminated. Takes no lock: it reads
 * under the fields' sequence count and retries while a write is under
 * way; if a writer stays inside its write (a thread stopped by a signal
 * there), it gives up after a bounded number of tries and returns what it
 * read, which may then mix the old and the new value.
 */
void stats_get_text(enum stats_text which, char *buf, size_t len);

void stats_set_state(enum pool_state s);

/* Marks the one-shot probe as decided (probe.decided). */
void stats_set_probe_decided(void);

/* Sets whether pooling stands down now (pool.stood_down). */
void stats_set_stood_down(int down);
enum pool_state stats_state(void);
const char *stats_state_name(enum pool_state s);

/* Records one host-to-device copy of n bytes in the size table (for suggestions). */
void stats_note_size(uint64_t n);

/*
 * Marks that this process used CUDA through the shim (a process that never
 * did dumps nothing) and, the first time, starts the clock of elapsed_s.
 */
void stats_mark_used(void);

/* One entry of the copy-size table: a copy size, its copies and their bytes. */
struct stats_size {
	uint64_t size, calls, bytes;
};

/*
 * Copies the size table into out (room for STATS_MAX_SIZES), sorted by
 * total bytes, most first (ties: the larger size first). Returns the
 * number of entries. Lock-free: a size claimed and not yet counted is left
 * out.
 */
int stats_sizes(struct stats_size *out);

/*
 * The time since the first stats_mark_used (CLOCK_MONOTONIC), into *ns.
 * Returns 1, or 0 with *ns = 0 while the clock has not started.
 */
int stats_elapsed_ns(uint64_t *ns);

#endif
