/*
 * ledger: what pooling a row spec costs and what it saves, and whether it
 * pays (issue 16, "never slower, by construction").
 *
 * For each spec of the layout (LEDGER_SPECS: the fixed row sizes by their
 * index in the layout, then whole:MIN) the ledger weighs the shim's own
 * host time on the spec's copies (clock reads per copy, never per row)
 * against the link time the pool saves: a row served from the pool is a
 * row that did not cross the host-to-device link, whose speed the link
 * meter (link.h) measures from the program's own plain copies, or
 * VRAMPOOL_LINK_GBPS states.
 *
 * Host time is the calling thread's CPU time in the shim, less the
 * program's own sends and a synchronous copy's wait for its stream: what
 * the shim's work takes from the thread that makes the copies (the serial
 * model of issue 16). Its wall time is kept beside it, not judged: on a
 * busy machine it counts the waits for a core, which are the scheduler's
 * (on the emulated device, largely its own stream workers'), not the
 * shim's. The CPU clock is a system call, read around the copy and each
 * of the program's sends in it: a thread reads it on its first hashed
 * copies and one in LEDGER_CPU_EVERY after, and gives the others its wall
 * time times the CPU share those readings measured (ledger_cpu_due,
 * ledger_cpu_share).
 *
 * The cost of a row is the shim's host time per row seen. What a row can
 * save is the link's time for its bytes, if it is a hit: while the pool
 * can still admit rows, every row may come back, so the ledger weighs a
 * row's link time (what each repeat will save); once the pool can admit
 * no row it has not seen (full, or the doorkeeper engaged), only the hits
 * save, so it weighs the link time of the share of rows that hit. (Rows
 * that never repeat are the back-off's business, backoff.h.) A capture
 * costs more than a hit (the index insert, the what-if table, the copy
 * into the slab) but is paid once, and the row's repeats pay it back:
 * while the pool can admit and a window captured more rows than it
 * served, the ledger weighs what every later sighting of a row costs at
 * least, its hash (the verdict says "of hashing"), not the captures; once
 * rows come back, the whole host time.
 *
 * Decisions, in numbers ("64 B rows stood aside: 150 ns of host time per
 * row to save 4 ns of link time at 16 GB/s"):
 * - The prior, from the spec's first LEDGER_PRIOR_COPIES copies: the least
 *   host time per row they took (hash and look-up as measured on this
 *   machine, on this spec's rows, in CPU time; the least, so that the
 *   one-time costs the first copies carry, a table made, the probe, do
 *   not count) against the row's time on the link
 *   stated by VRAMPOOL_LINK_GBPS, or else on a slow one (LEDGER_SLOW_GBPS,
 *   assumed). A spec whose rows cost more than that stands aside at once,
 *   before any measurement of the link: 64 B rows never pay above 2 GB/s.
 * - The window, once the link is stated or measured: over at least
 *   LEDGER_FAST_COPIES copies, a cost LEDGER_CLEAR times the saving stands
 *   aside at once; a closer one is judged over a whole window
 *   (LEDGER_WINDOW copies, LEDGER_WINDOW_BYTES or LEDGER_WINDOW_NS,
 *   whichever comes first, at least LEDGER_FAST_COPIES copies): a cost
 *   above the saving stands aside, anything else pools on and opens the
 *   next window. Without a stated or measured link, the window does not
 *   decide.
 * - Standing aside: the spec's copies go straight through, counted as
 *   such; a sample of them (one in LEDGER_SAMPLE_EVERY, chosen by the
 *   caller) keeps measuring the link and, with a full pool, looks a few
 *   rows up for the share that would hit, and times their hash and
 *   look-up. It comes back when the saving that sample shows beats the
 *   cost (ledger_aside says which) by LEDGER_RESUME_MARGIN, judged over LEDGER_RESUME_COPIES sampled copies
 *   (and LEDGER_RESUME_ROWS sampled rows with a full pool). Each stand-aside
 *   after a resume doubles the evidence the next resume needs (at most
 *   2^LEDGER_FLIPS_MAX times), so a close case does not churn.
 *
 * Modes (VRAMPOOL_LEDGER, config.h): on decides; force keeps the books and
 * the verdicts but always pools; off is not consulted at all (the caller
 * does not call in).
 *
 * The clock: ledger_stamp, ledger_stamp_cpu and ledger_elapsed read
 * CLOCK_MONOTONIC and CLOCK_THREAD_CPUTIME_ID unless a test installed a
 * fake one (ledger_set_clock); window times come from the same clock.
 *
 * Pure: no device, no lock. A struct ledger belongs to its pool (one per
 * spec, under the pool's lock). The tally (struct ledger_tally) holds the
 * totals the reports read: relaxed atomics, added to by any thread, read
 * without a lock (each field exact, fields not mutually synchronised, as
 * stats.h's counters). The process's tallies, one per spec, are the board
 * (ledger_board), which the reports and the calls layer read.
 */
#ifndef VRAMPOOL_LEDGER_H
#define VRAMPOOL_LEDGER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/layout.h"

#define LEDGER_SPECS (LAYOUT_MAX_SPECS + 1)     /* the fixed specs, then whole:MIN */
#define LEDGER_WHOLE LAYOUT_MAX_SPECS           /* the slot of whole:MIN */
#define LEDGER_PRIOR_COPIES 3           /* copies measured for the prior (the least) */
#define LEDGER_SLOW_GBPS 2.0            /* the link assumed by the prior when none is known */
#define LEDGER_FAST_COPIES 4            /* copies before a clear case stands aside */
#define LEDGER_CLEAR 2.0                /* cost / saving that is clear without a window */
#define LEDGER_WINDOW 32                /* copies in a window, */
#define LEDGER_WINDOW_BYTES (256ULL << 20) /* or bytes, */
#define LEDGER_WINDOW_NS 1000000000ULL  /* or wall time */
#define LEDGER_SAMPLE_EVERY 16          /* standing aside: one copy in this many is sampled */
#define LEDGER_RESUME_COPIES 4          /* sampled copies judged before resuming, */
#define LEDGER_RESUME_ROWS 64           /* and sampled rows, with a full pool */
#define LEDGER_RESUME_MARGIN 1.25       /* the saving must beat the cost by this */
#define LEDGER_FLIPS_MAX 6              /* the evidence doubles at most this many times */
#define LEDGER_CPU_FIRST 16             /* a thread's hashed copies that all read the CPU clock, */
#define LEDGER_CPU_EVERY 4              /* then one in this many */

enum ledger_state { LEDGER_POOLING, LEDGER_ASIDE };

/* Where a link speed came from. */
enum ledger_source {
	LEDGER_LINK_NONE,       /* nothing known */
	LEDGER_LINK_ASSUMED,    /* LEDGER_SLOW_GBPS, for the prior only */
	LEDGER_LINK_STATED,     /* VRAMPOOL_LINK_GBPS */
	LEDGER_LINK_MEASURED,   /* events around the program's own plain copies (link.h) */
};

/* What a verdict was judged on. */
enum ledger_basis {
	LEDGER_BASIS_NONE,      /* no verdict yet */
	LEDGER_BASIS_PRIOR,     /* the first copies against the link known then */
	LEDGER_BASIS_WINDOW,    /* a window of pooled copies */
	LEDGER_BASIS_SAMPLE,    /* the sample taken while standing aside */
};

/*
 * A link speed and its source, and the device's speed serving a hit: a
 * hit does not cross the link but is copied from a slab on the device
 * (the gather), which takes the stream's time too. A row saves its link
 * time less its serving time.
 */
struct ledger_link {
	double gbps;            /* 1e9 bytes per second; 0 with LEDGER_LINK_NONE */
	enum ledger_source source;
	double serve_gbps;      /* serving from the slabs, measured (link.h); 0: not measured, taken as free */
};

/*
 * Two clock readings: wall (CLOCK_MONOTONIC, cheap) and, where the shim's
 * time is long enough to be worth a system call, the calling thread's CPU
 * time (CLOCK_THREAD_CPUTIME_ID, which no vDSO serves: about 0.5 us here).
 */
struct ledger_stamp {
	uint64_t wall, cpu;
	int has_cpu;
};

/* One copy the pool fingerprinted (the full path, or observed before the probe). */
struct ledger_copy {
	uint64_t rows, row;
	uint64_t cpu_ns;        /* the shim's host time on it (judged): the calling thread's CPU time */
	uint64_t wall_ns;       /* its wall time, the same way (kept, not judged) */
	uint64_t hash_ns;       /* of cpu_ns, the time its rows took to hash */
	uint64_t hit_rows;      /* rows served from the pool */
	uint64_t captured_rows; /* rows captured into the pool */
	uint64_t calls_added;   /* device operations beyond the one plain copy */
	int can_admit;          /* the pool could still admit rows afterwards */
};

/* The last verdict, in numbers. */
struct ledger_verdict {
	enum ledger_basis basis;
	double host_ns;         /* host time per row */
	double link_ns;         /* a row's time on the link */
	double serve_ns;        /* a row's time served from the slabs (0: not measured) */
	double saved_ns;        /* what a row saves: link_ns less serve_ns, times the hit share with a full pool */
	double hit_share;       /* 1 while the pool can admit, else the share of rows that hit */
	struct ledger_link link;
	int hashing;            /* host_ns is a hash's: a window of captures', or a sample's hash and look-up */
	int aside;              /* the verdict: stand aside (in force mode: would) */
};

/* A spec's ledger, in its pool, under the pool's lock. */
struct ledger {
	enum ledger_state state;
	uint64_t row;
	uint32_t prior_copies;
	double prior_ns[LEDGER_PRIOR_COPIES];   /* host ns per row of the first copies */
	/* the open window */
	uint32_t win_copies;
	uint64_t win_rows, win_bytes, win_host_ns, win_hit_rows, win_start;
	uint64_t win_hash_ns, win_captured;
	int win_full;           /* its copies found the pool unable to admit (a change opens a new window) */
	/* the sample while standing aside */
	uint32_t smp_copies;
	uint64_t smp_rows, smp_hits;
	uint64_t smp_cost_ns, smp_cost_rows;    /* the samples' host time and the rows it hashed */
	uint32_t flips;         /* stand-asides after a resume */
	int resumed;            /* it came back at least once */
	struct ledger_verdict last;
};

/* The totals of one spec, for the reports: relaxed atomics. */
struct ledger_tally {
	_Atomic uint64_t row;           /* the last row size seen (whole:MIN rows vary) */
	_Atomic uint64_t copies;        /* copies fingerprinted (pooled or observed) */
	_Atomic uint64_t rows;
	_Atomic uint64_t cpu_ns, wall_ns;
	_Atomic uint64_t hit_rows;
	_Atomic uint64_t saved_ns;      /* link time of the hits, at the link known then */
	_Atomic uint64_t calls_added;
	_Atomic uint64_t aside_copies;  /* passed straight through while standing aside */
	_Atomic uint64_t aside_bytes;
	_Atomic uint64_t sampled;       /* of those, sampled */
	_Atomic uint64_t stand_asides, resumes;
	_Atomic int aside;              /* pools where the spec stands aside now */
	_Atomic uint64_t turn;          /* the calls layer's count for LEDGER_SAMPLE_EVERY */
	/* the last verdict's figures (fixed point: ps per row, MB/s, per mille) */
	_Atomic int basis, source, verdict_aside, hashing;
	_Atomic uint64_t host_ps, link_ps, serve_ps, saved_ps, mbps, serve_mbps, hit_pm;
};

/* The process's board: one tally per spec slot. */
extern struct ledger_tally ledger_board[LEDGER_SPECS];

/* The tally slot of a layout_hit.spec (-1, whole:MIN, is LEDGER_WHOLE); -1 out of range. */
static inline int ledger_slot(int spec)
{
	if (spec < 0)
		return LEDGER_WHOLE;
	return spec < LAYOUT_MAX_SPECS ? spec : -1;
}

/* Installs a fake clock (tests): wall and cpu return nanoseconds. NULLs restore the real one. */
void ledger_set_clock(uint64_t (*wall)(void), uint64_t (*cpu)(void));

/*
 * The wall clock into s (no CPU reading yet): the copy's call time, read
 * once by the calls layer for the program's pace (core/pace.h, issue 19);
 * ledger_elapsed's reading is that copy's return there too.
 */
void ledger_stamp(struct ledger_stamp *s);

/* Adds the calling thread's CPU clock to s. */
void ledger_stamp_cpu(struct ledger_stamp *s);

/*
 * Whether the calling thread's next hashed copy reads the CPU clock (a
 * system call, about 0.5-1 us here: two to six a copy, a few ns a row of
 * small rows): the thread's first LEDGER_CPU_FIRST copies, then one in
 * LEDGER_CPU_EVERY, every synchronous one (its wait may spin), and all of
 * them under a fake clock. The others take their CPU time from their wall
 * time (ledger_cpu_share).
 */
int ledger_cpu_due(int sync);

/*
 * The shim's CPU time of a hashed copy whose wall time (the program's
 * sends left out) is wall_ns: a copy that read the clock (timed) gives
 * cpu_ns, which the calling thread's CPU share of its wall time learns
 * (the mean of its last few such copies, at most 1); one that did not is
 * given wall_ns times that share. What a busy machine's waits for a core
 * add to wall time is so left out of both.
 */
uint64_t ledger_cpu_share(int timed, uint64_t wall_ns, uint64_t cpu_ns);

/*
 * Nanoseconds since s (never negative): wall time, and CPU time when s has
 * a CPU reading, else the wall time again (a short stretch that did not
 * block: its CPU time is its wall time, without a system call).
 */
void ledger_elapsed(const struct ledger_stamp *s, uint64_t *wall_ns, uint64_t *cpu_ns);

/* The calling thread's CPU clock in ns (the fake one under a test). */
uint64_t ledger_cpu_now(void);

/* What a recorded copy or sample changed. */
enum ledger_event {
	LEDGER_EV_NONE,
	LEDGER_EV_ASIDE,        /* the spec just stood aside */
	LEDGER_EV_RESUME,       /* the spec just came back */
};

/* A fresh ledger: pooling, no verdict. */
void ledger_init(struct ledger *l);

/*
 * Records a copy the pool fingerprinted, into l and its tally t, with the
 * link known now; may decide (mode LEDGER_ON) to stand aside. In
 * LEDGER_FORCE the verdict is kept but the spec keeps pooling.
 */
enum ledger_event ledger_pooled(struct ledger *l, struct ledger_tally *t, const struct ledger_copy *c,
				const struct ledger_link *link, enum ledger_mode mode);

/* A copy passed straight through while its spec stands aside, as its pool saw it. */
struct ledger_sample {
	uint64_t bytes, row;    /* the copy: bytes of rows of row bytes */
	int sampled;            /* the pool sampled it: the fields below hold */
	uint64_t rows, hits;    /* rows hashed and looked up, and those found in the pool */
	uint64_t cpu_ns;        /* the host time that took (0: not timed) */
	int can_admit;          /* as in ledger_copy */
};

/*
 * Records a copy passed straight through while standing aside; may decide
 * to come back. A sample's rows judge the share that would hit (with a
 * full pool; while the pool can admit every row counts as one that can
 * come back), and its time is the cost a row's hash and look-up take now,
 * which replaces the verdict's cost where that was of the same kind (the
 * first copies', or a window's of hashing), not a whole window's host
 * time: it corrects a prior inflated by the first copies' one-time costs.
 */
enum ledger_event ledger_aside(struct ledger *l, struct ledger_tally *t, const struct ledger_sample *s,
			       const struct ledger_link *link);

/*
 * Whether the spec pools so clearly on the link measured so far that more
 * measurements of it could not change the verdict: the open window (at
 * least LEDGER_FAST_COPIES copies), or else the last window's verdict,
 * saves more than its whole host time costs even on a link LEDGER_CLEAR
 * times faster than measured (a measurement is never faster than the link,
 * link.h, and the first ones are the slowest), serving counted where it
 * was measured. A stated or unmeasured link, a spec standing aside or a
 * verdict of the first copies alone is never clear. The pool then does
 * not send a copy of hits plain only to measure the link while it has
 * fewer than a full set of measurements (link_pool_due).
 */
int ledger_pays_clearly(const struct ledger *l, const struct ledger_link *link);

/* Counts in t a copy of n bytes of rows of row bytes passed straight through (ledger_aside, the calls layer). */
void ledger_count_aside(struct ledger_tally *t, uint64_t n, uint64_t row);

/* A row's time on the link in ns (0 when link is unknown). */
double ledger_row_ns(uint64_t row, const struct ledger_link *link);

/*
 * What a hit of row bytes saves in ns: its link time less its time served
 * from the slabs (when measured), never below 0.
 */
double ledger_saved_row_ns(uint64_t row, const struct ledger_link *link);

/* Publishes l's verdict into t (the reports read it). */
void ledger_publish(struct ledger_tally *t, const struct ledger *l);

/*
 * Forgets l, whose pool is retired (a device reset): a spec it held aside
 * no longer counts as standing aside in t, and l starts afresh.
 */
void ledger_retire(struct ledger *l, struct ledger_tally *t);

/*
 * The calls layer's filter for a spec standing aside: returns 1 when the
 * copy should go straight through without reaching its pool, 0 when it
 * should reach it (the spec pools, or it is the sample's turn: one in
 * LEDGER_SAMPLE_EVERY).
 */
int ledger_skip(int slot);

/* A verdict read back from a tally. */
struct ledger_view {
	uint64_t row, copies, rows, cpu_ns, wall_ns, hit_rows, saved_ns, calls_added;
	uint64_t aside_copies, aside_bytes, sampled, stand_asides, resumes;
	int aside;              /* standing aside now */
	struct ledger_verdict v;
};

/* Reads tally t (lock-free). Returns 1 when the spec was seen at all, else 0. */
int ledger_view(const struct ledger_tally *t, struct ledger_view *out);

/*
 * Writes the verdict in words, e.g. "64 B rows stood aside: 150 ns of host
 * time per row to save 4 ns of link time at 16 GB/s (measured)" or
 * "3 KiB rows pool: 250 ns of host time per row saves 768 ns of link time
 * at 4 GB/s (stated)". Returns buf.
 */
char *ledger_reason(const struct ledger_view *v, char *buf, size_t len);

/* The name of a link source ("measured", "stated", "assumed", "none") and of a basis. */
const char *ledger_source_name(enum ledger_source s);
const char *ledger_basis_name(enum ledger_basis b);

/* Zeroes the board (a forked child, tests). */
void ledger_board_reset(void);

#endif
