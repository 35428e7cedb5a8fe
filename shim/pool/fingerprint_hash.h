/*
 * fingerprint_hash: the keyed hashing behind fingerprint.h. INTERNAL to the
 * fingerprint room: only fingerprint.c and fingerprint_hash.c include it.
 *
 * Keying. Two secrets are drawn once per process from getrandom(2): the row
 * secret keys XXH3-128 of each row; the tree secret keys the top level of
 * rows longer than FP_CHUNK (below). A forked child keeps both, so a process
 * family agrees on fingerprints.
 *
 * Trees. Rows longer than FP_CHUNK bytes (whole:MIN layouts make rows of
 * hundreds of MiB) are hashed as a two-level tree: each FP_CHUNK-byte chunk
 * is hashed with the row secret (fp_hash_chunk), then the chunk digests
 * followed by the row length (64 bits) are hashed with the tree secret
 * (fp_hash_tree_top). Whether a row is a tree depends on its length alone,
 * so the serial path (fp_hash_rows), the parallel one (fingerprint.c, which
 * hashes the chunks of a tree row on several threads) and fingerprint_one
 * agree.
 *
 * Invariants: a fingerprint depends on the row's bytes, its length and the
 * secrets alone, never on the kernels chosen (AVX2 or the baseline, checked
 * to agree at start) nor on the thread that computes it. The secrets are
 * written before fp_hash_prepare first returns, and again only by
 * fingerprint_set_seed_for_tests.
 *
 * Ownership: callers own every buffer passed in (read only) and every
 * digest array written; this file owns only the secrets and its lock.
 *
 * Thread-safety: every function may run on any thread, any number at once.
 *
 * fingerprint_hash.c also defines fingerprint_one and
 * fingerprint_set_seed_for_tests of fingerprint.h: both are hashing alone.
 * It calls nothing in fingerprint.c.
 */
#ifndef VRAMPOOL_FINGERPRINT_HASH_H
#define VRAMPOOL_FINGERPRINT_HASH_H

#include <stdint.h>

#include "pool/fingerprint.h"

#define FP_CHUNK (4ull << 20)              /* tree chunk; longer rows are trees */

/* Number of FP_CHUNK chunks of a tree row of len bytes. */
static inline uint64_t fp_chunks(uint64_t len)
{
	return (len + FP_CHUNK - 1) / FP_CHUNK;
}

/*
 * Generates the process secrets and chooses the kernels, once; every later
 * call returns at once. Call it before the functions below.
 */
void fp_hash_prepare(void);

/*
 * Writes the fingerprint of each of nrows rows of row bytes at src into
 * out[0..nrows), on the calling thread (tree rows chunk by chunk). The loop
 * and the per-row hash are in one function: no call per row.
 */
void fp_hash_rows(const unsigned char *src, uint64_t row, uint64_t nrows, struct fp *out);

/* Returns the digest of one chunk of a tree row (len <= FP_CHUNK bytes at p). */
struct fp fp_hash_chunk(const unsigned char *p, uint64_t len);

/*
 * Returns the fingerprint of a tree row of len bytes from the digests of
 * its nchunks chunks, in order.
 */
struct fp fp_hash_tree_top(const struct fp *digests, uint64_t nchunks, uint64_t len);

/* In a forked child: makes the secrets' lock usable again (a parent thread may have held it). */
void fp_hash_atfork_child(void);

#endif
