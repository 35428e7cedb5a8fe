/*
 * fingerprint_tune: the thread-count chooser of the parallel path in
 * fingerprint.c. INTERNAL to the fingerprint room: only fingerprint.c and
 * fingerprint_tune.c include it.
 *
 * Thread count. Chosen from the throughput of large copies (bytes per
 * nanosecond of the caller's wall clock, an average weighted 1/4 to the
 * newest). Candidates: 1, 2, 4, ... and the maximum (the CPU count, at most
 * 8) for fingerprint_init(0); 1 and N for fingerprint_init(N). The choice
 * and its neighbours get FP_TUNE_SAMPLES copies each in turn (1, 2, 1, 2 at
 * the start), then a neighbour gets one copy in FP_PROBE_EVERY, and the
 * choice moves to a neighbour that is FP_TUNE_MARGIN faster. Each
 * configuration lately used keeps its own chooser (FP_TUNERS of them:
 * tests and benchmarks switch configurations). The test hook
 * exact_threads bypasses the chooser; the test hook rate is applied by the
 * caller before it records a rate.
 *
 * Invariants: a chooser's candidates ascend from 1 to the most threads of
 * its configuration; cur indexes the choice.
 *
 * Ownership: the choosers are this file's static storage; a pointer from
 * fp_tuner_for stays valid while its configuration keeps the slot.
 *
 * Locking: every function here runs under fingerprint.c's fp_job_lock,
 * held by the caller; none takes a lock. Pure bookkeeping: no clock, no
 * thread, no call into fingerprint.c.
 */
#ifndef VRAMPOOL_FINGERPRINT_TUNE_H
#define VRAMPOOL_FINGERPRINT_TUNE_H

#include <stdint.h>

#define FP_TUNE_CANDS 8

/*
 * The configuration word (fingerprint.c's fp_cfg): adaptive << 8 | the most
 * threads, the caller included; 0 before fingerprint_init.
 */

/* The most threads of a configuration word. */
static inline unsigned fp_cfg_max(unsigned cfg)
{
	return (unsigned)(cfg & 0xFF);
}

/* Whether a configuration word lets the module choose the count. */
static inline int fp_cfg_adaptive(unsigned cfg)
{
	return (cfg >> 8) & 1;
}

/* The thread-count chooser of one configuration. */
struct fp_tuner {
	unsigned cfg;                      /* the fp_cfg it was set up for, 0: none */
	unsigned ncand;
	unsigned cand[FP_TUNE_CANDS];      /* thread counts, ascending */
	unsigned cur;                      /* index of the choice */
	unsigned n[FP_TUNE_CANDS];         /* copies measured */
	double rate[FP_TUNE_CANDS];        /* bytes per ns, weighted average */
	unsigned dir;                      /* the next probe goes up (1) or down (0) */
	uint64_t jobs;                     /* large copies it chose for */
};

/*
 * Returns the chooser of configuration cfg: the one kept, or a slot set up
 * afresh (the least recently set up gives way).
 */
struct fp_tuner *fp_tuner_for(unsigned cfg);

/*
 * Chooses the candidate (an index into t->cand) for the next large copy:
 * the choice and its neighbours are measured FP_TUNE_SAMPLES times each
 * first, the least measured next (the choice on a tie); then a neighbour,
 * up and down in turn, on one copy in FP_PROBE_EVERY.
 */
unsigned fp_tune_pick(struct fp_tuner *t);

/*
 * Records the throughput rate (bytes per ns) of a large copy hashed with
 * candidate i, then moves the choice to a neighbour that is FP_TUNE_MARGIN
 * faster.
 */
void fp_tune_record(struct fp_tuner *t, unsigned i, double rate);

/*
 * Returns the count the chooser of cfg holds as its choice, for
 * fingerprint_get_stats: 1 when no chooser of cfg is kept.
 */
unsigned fp_tune_threads(unsigned cfg);

/* Forgets every chooser's measurements (fingerprint_shutdown). */
void fp_tune_forget(void);

#endif
