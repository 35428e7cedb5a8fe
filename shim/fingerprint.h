/*
 * fingerprint: keyed XXH3-128 of each row of a host buffer.
 *
 * The key is a per-process random secret (getrandom), so colliding inputs
 * cannot be prepared in advance; a forked child keeps its parent's secret
 * (fingerprints of one process family agree) but not its threads.
 * Large copies are split by rows across worker threads, started lazily on
 * first need and started again in a forked child that fingerprints.
 * Thread-safe: any number of callers may fingerprint at once.
 */
#ifndef VRAMPOOL_FINGERPRINT_H
#define VRAMPOOL_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

struct fp {
	uint64_t lo, hi;
};

static inline int fp_equal(const struct fp *a, const struct fp *b)
{
	return a->lo == b->lo && a->hi == b->hi;
}

/*
 * Sets up the module: threads is the worker count (0: chosen from the CPU
 * count, at most 8; 1: no workers, the caller hashes). Generates the secret.
 * Returns 0 or a negative errno. Idempotent; called again with another
 * count, later parallel jobs use the new count (tests, benchmarks). Not
 * calling it at all is the same as fingerprint_init(0) on first use.
 */
int fingerprint_init(unsigned threads);

/*
 * Writes the fingerprint of each of nrows rows of row bytes starting at src
 * into out[0..nrows). Copies smaller than the parallel threshold (1 MiB) are
 * hashed by the caller alone. Returns the nanoseconds spent (wall clock of
 * the caller), which the shim adds to time_ns.fingerprint.
 */
uint64_t fingerprint_rows(const void *src, uint64_t row, uint64_t nrows, struct fp *out);

/* Fingerprint of one buffer with the process secret (tests, small rows). */
struct fp fingerprint_one(const void *src, uint64_t len);

/* In a forked child: forget the parent's workers (they do not exist here). */
void fingerprint_atfork_child(void);

/* Stops the workers and frees their state (tests; never needed at exit). */
void fingerprint_shutdown(void);

/* For tests: replaces the secret with one derived from seed (deterministic runs). */
void fingerprint_set_seed_for_tests(uint64_t seed);

#endif
