/*
 * fingerprint: keyed XXH3-128 of each row of a host buffer.
 *
 * The key is a per-process random secret (getrandom), so colliding inputs
 * cannot be prepared in advance; a forked child keeps its parent's secret
 * (fingerprints of one process family agree) but not its threads.
 *
 * Copies of FINGERPRINT_PARALLEL_MIN bytes or more may be split into tasks
 * (runs of whole rows, or 4 MiB chunks of rows longer than that) shared by
 * the caller and worker threads, started lazily on the first such copy and
 * started again in a forked child that fingerprints. The caller takes tasks
 * itself and never waits for a worker that has not started: it waits only
 * for tasks a worker has taken and is running (a worker that wakes on the
 * caller's own CPU takes none). Workers run under SCHED_BATCH: waking one
 * never preempts a running thread. One copy is split at a time; a
 * concurrent caller hashes alone.
 *
 * Thread count, chosen from what is measured: each large copy's throughput
 * (bytes per nanosecond of the caller's time, averaged over recent copies)
 * is recorded for the count it used. The first large copy is hashed alone,
 * the second with 2 threads, then again 1 and 2, and the faster count is
 * kept; one large copy in 32 tries a count next to the choice, so the
 * choice follows the machine's load (a second thread that has no idle CPU
 * to run on only slows the caller down). fingerprint_init(0) chooses among
 * 1, 2, 4, ... and the CPU count (at most 8); fingerprint_init(N)
 * (VRAMPOOL_THREADS=N) splits a copy exactly N ways whenever it splits, and
 * chooses between that and the caller alone.
 * Thread-safe: any number of callers may fingerprint at once.
 *
 * The room: fingerprint.c holds the set-up and the parallel path (workers,
 * jobs); fingerprint_hash.c the keys, the kernels and the tree of long rows
 * (and fingerprint_one); fingerprint_tune.c the choice of the thread count.
 * Calls run one way: fingerprint.c into the other two.
 */
#ifndef VRAMPOOL_FINGERPRINT_H
#define VRAMPOOL_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

struct fp {
	uint64_t lo, hi;
};

/*
 * Copies smaller than this are hashed by the caller alone. Measured with
 * tests/bench/bench_fp_split.c on a 2-core KVM guest: waking a sleeping
 * worker costs the caller about 5 us and the worker starts about 15 us
 * later, so a split pays from about 0.5 MiB on an idle machine (25 us of
 * hashing); on a loaded one it paid only from 1-4 MiB (147 KiB rows) and
 * 4-9 MiB (3 KiB rows). 1 MiB keeps a margin on an idle machine; above it,
 * the measured choice of the thread count guards a loaded one.
 */
#define FINGERPRINT_PARALLEL_MIN (1ull << 20)

static inline int fp_equal(const struct fp *a, const struct fp *b)
{
	return a->lo == b->lo && a->hi == b->hi;
}

/*
 * Sets up the module: threads is the most threads, the caller included (0:
 * chosen from measured throughput, at most the CPU count and 8; N > 1:
 * exactly N or the caller alone, as measured faster; 1: no workers, the
 * caller hashes). Generates the secret. Returns 0 or a negative errno.
 * Idempotent; called again with another count, later copies use the new
 * count (tests, benchmarks): workers are added when more are needed, never
 * stopped here, and the measurements of the last few counts are kept. Not
 * calling it at all is the same as fingerprint_init(0) on first use.
 */
int fingerprint_init(unsigned threads);

/*
 * Writes the fingerprint of each of nrows rows of row bytes starting at src
 * into out[0..nrows). Copies smaller than FINGERPRINT_PARALLEL_MIN, and one
 * row of at most 4 MiB, are hashed by the caller alone. Returns the
 * nanoseconds spent (wall clock of the caller), which the shim adds to
 * time_ns.fingerprint.
 */
uint64_t fingerprint_rows(const void *src, uint64_t row, uint64_t nrows, struct fp *out);

/* Fingerprint of one buffer with the process secret (tests, small rows). */
struct fp fingerprint_one(const void *src, uint64_t len);

/* In a forked child: forget the parent's workers (they do not exist here). */
void fingerprint_atfork_child(void);

/* Stops the workers and forgets the chooser's measurements (tests; never needed at exit). */
void fingerprint_shutdown(void);

/* For tests: replaces the secret with one derived from seed (deterministic runs). */
void fingerprint_set_seed_for_tests(uint64_t seed);

/* What the parallel path has done since start (or since a fork, in the child). */
struct fp_stats {
	uint64_t parallel_jobs;   /* copies split across threads */
	uint64_t caller_tasks;    /* tasks of those the caller ran itself */
	uint64_t worker_tasks;    /* tasks of those workers ran */
	uint64_t waits;           /* split copies where the caller waited for a running task */
	uint64_t wait_ns;         /* the caller's time in those waits */
	unsigned threads;         /* the count (caller included) chosen for the next large copy */
	unsigned threads_max;     /* the most it may choose; the forced count when forced */
	unsigned workers;         /* worker threads running */
	int adaptive;             /* the count is chosen from measured throughput */
};

/* Fills *st. Exact when no copy is being fingerprinted, else approximate. */
void fingerprint_get_stats(struct fp_stats *st);

/*
 * For tests and benchmarks: knobs on the parallel path. The struct must
 * stay valid and unchanged while installed; install and remove it while no
 * copy is being fingerprinted. NULL removes it.
 */
struct fp_test_hooks {
	int no_workers;                     /* worker threads fail to start */
	int exact_threads;                  /* large copies use the configured count, unmeasured */
	int workers_anywhere;               /* a worker on the caller's CPU takes tasks too */
	uint64_t parallel_min;              /* the split threshold (0: FINGERPRINT_PARALLEL_MIN) */
	void (*worker_joined)(void);        /* a worker woke for a copy, before its first task */
	void (*task_claimed)(int by_worker); /* a task was taken, before it runs */
	/* The throughput the chooser records for a large copy hashed with
	 * threads threads (the caller included) that measured measured bytes/ns. */
	double (*rate)(unsigned threads, double measured);
	/* Rewrites the fingerprints fingerprint_rows made (out[0..nrows) of the
	 * rows at src), before it returns: keys that collide in one half. */
	void (*rows_hashed)(const void *src, uint64_t row, uint64_t nrows, struct fp *out);
};

void fingerprint_set_test_hooks(const struct fp_test_hooks *hooks);

#endif
