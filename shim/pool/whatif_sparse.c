/*
 * whatif_sparse: the what-if curve's content sample of copies that go to
 * the device without being fingerprinted (whatif_observe_sparse, whatif.h):
 * a pre-key of a few words of each row decides, only the rows it samples
 * are hashed and observed, each standing for 2^WHATIF_SPARSE_SHIFT rows.
 */
#include "pool/whatif.h"

#include <string.h>

#define WHATIF_PREKEY_WORDS 8           /* words of a row its sparse sampling key reads */
#define WHATIF_SPARSE_BATCH 64          /* sampled rows fingerprinted before the lock is taken */

/*
 * The sampling key of a row read without hashing it all: WHATIF_PREKEY_WORDS
 * words spread evenly over it (all of its bytes when it is shorter), mixed.
 * Equal rows have equal pre-keys, so a row is sampled or not by its
 * content, and all its sightings with it.
 */
static uint64_t whatif_prekey(const unsigned char *p, uint64_t row)
{
	uint64_t h = row * 0x9e3779b97f4a7c15ULL, w;

	if (row < 8) {
		for (uint64_t i = 0; i < row; i++)
			h = (h ^ p[i]) * 0xff51afd7ed558ccdULL;
	} else {
		for (uint64_t k = 0; k < WHATIF_PREKEY_WORDS; k++) {
			memcpy(&w, p + (row - 8) * k / (WHATIF_PREKEY_WORDS - 1), sizeof(w));
			h = (h ^ w) * 0xff51afd7ed558ccdULL;
			h ^= h >> 29;
		}
	}
	h ^= h >> 32;
	h *= 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 33);
}

void whatif_observe_sparse(const void *src, uint64_t nrows, uint64_t row)
{
	const unsigned char *p = src;
	struct fp fps[WHATIF_SPARSE_BATCH];
	uint64_t n = 0;

	if (!src || nrows == 0 || row == 0)
		return;
	for (uint64_t i = 0; i < nrows; i++, p += row) {
		if (whatif_prekey(p, row) >> (64 - WHATIF_SPARSE_SHIFT) != 0)
			continue;
		fps[n++] = fingerprint_one(p, row);
		if (n == WHATIF_SPARSE_BATCH) {
			whatif_observe_weighted(fps, n, row);
			n = 0;
		}
	}
	if (n)
		whatif_observe_weighted(fps, n, row);
	whatif_count_sparse(nrows * row);
}
