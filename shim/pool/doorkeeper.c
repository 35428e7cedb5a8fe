/*
 * doorkeeper: admission on evidence (doorkeeper.h is the contract).
 *
 * The filter is a blocked Bloom filter: a row's 6 bits lie in one 64-byte
 * block (one cache line), chosen by the high bits of the fingerprint's
 * high word; the bits within it are six 9-bit fields of the low word's low
 * 54 bits. The index's home slot uses the low word's high bits and the
 * what-if's sampling its top bits, so the three are independent. Two
 * generations make the filter forget gradually: a lookup reads the row's
 * block in both (both prefetched a few rows ahead), an addition sets bits
 * in the current one only.
 *
 * The evidence is counted in bytes, so that rows of several specs add up;
 * only the filter's size is in rows (of the copy that engaged it).
 */
#include "pool/doorkeeper.h"

#include <stdlib.h>
#include <string.h>

#define DK_BLOCK_WORDS 8                /* 64-bit words in a 64-byte block */
#define DK_BITS 6                       /* bits set per row */
#define DK_PREFETCH 8                   /* rows ahead whose blocks are prefetched */

static uint64_t dk_first_pass_max = DK_FIRST_PASS_BYTES;

/* The high 64 bits of the 128-bit product a * b. */
static uint64_t dk_mulhi(uint64_t a, uint64_t b)
{
	__extension__ typedef unsigned __int128 u128;

	return (uint64_t)(((u128)a * b) >> 64);
}

/* The block of a row whose fingerprint's high word is hi, in generation gen. */
static uint64_t *dk_block(const struct doorkeeper *dk, unsigned gen, uint64_t hi)
{
	return dk->bits + (gen * dk->nblocks + dk_mulhi(hi, dk->nblocks)) * DK_BLOCK_WORDS;
}

/* Whether every bit of a row whose fingerprint's low word is lo is set in block b. */
static int dk_test(const uint64_t *b, uint64_t lo)
{
	for (unsigned j = 0; j < DK_BITS; j++) {
		unsigned p = (unsigned)(lo >> (9 * j)) & 511;

		if (!((b[p >> 6] >> (p & 63)) & 1))
			return 0;
	}
	return 1;
}

/* Adds a row to the current generation, turning generations over when it is full. */
static void dk_add(struct doorkeeper *dk, const struct fp *f)
{
	uint64_t *b;

	if (dk->gen_rows >= dk->gen_cap) {
		dk->cur ^= 1;
		memset(dk->bits + dk->cur * dk->nblocks * DK_BLOCK_WORDS, 0,
		       dk->nblocks * DK_BLOCK_WORDS * sizeof(*dk->bits));
		dk->gen_rows = 0;
	}
	b = dk_block(dk, dk->cur, f->hi);
	for (unsigned j = 0; j < DK_BITS; j++) {
		unsigned p = (unsigned)(f->lo >> (9 * j)) & 511;

		b[p >> 6] |= 1ULL << (p & 63);
	}
	dk->gen_rows++;
}

uint64_t doorkeeper_filter(struct doorkeeper *dk, const struct fp *fps, uint64_t n, uint8_t *found)
{
	uint64_t refused = 0;

	if (!dk->engaged)
		return 0;
	for (uint64_t i = 0; i < n; i++) {
		if (i + DK_PREFETCH < n && !found[i + DK_PREFETCH]) {
			__builtin_prefetch(dk_block(dk, 0, fps[i + DK_PREFETCH].hi));
			__builtin_prefetch(dk_block(dk, 1, fps[i + DK_PREFETCH].hi));
		}
		if (found[i])
			continue;
		if (dk_test(dk_block(dk, 0, fps[i].hi), fps[i].lo) ||
		    dk_test(dk_block(dk, 1, fps[i].hi), fps[i].lo)) {
			dk->again++;
			continue;
		}
		dk_add(dk, &fps[i]);
		found[i] = DK_REFUSED;
		refused++;
	}
	dk->refused += refused;
	return refused;
}

/* Opens the next evidence window: one pass of the unique rows seen, at least the first pass. */
static void dk_window(struct doorkeeper *dk)
{
	dk->win_len = dk->unique > dk->first_pass ? dk->unique : dk->first_pass;
	dk->win_seen = dk->win_hits = 0;
}

/* Engages with a filter sized for the unique rows seen. Returns 0, or -1 (no memory). */
static int dk_engage(struct doorkeeper *dk, uint64_t row)
{
	uint64_t rows = dk->unique / row;

	if (rows < DK_MIN_ROWS)
		rows = DK_MIN_ROWS;
	if (rows > DK_MAX_ROWS)
		rows = DK_MAX_ROWS;
	dk->nblocks = (rows * DK_BITS_PER_ROW + 511) / 512;
	dk->bits = calloc(2 * dk->nblocks * DK_BLOCK_WORDS, sizeof(*dk->bits));
	if (!dk->bits)
		return -1;
	dk->engaged = 1;
	dk->gen_cap = rows;
	dk->gen_rows = 0;
	dk->cur = 0;
	dk->judged = dk->again = 0;
	dk->engagements++;
	return 0;
}

/* Drops the filter: capture on first sight again, and a first pass twice as long next time. */
static void dk_disengage(struct doorkeeper *dk)
{
	free(dk->bits);
	dk->bits = NULL;
	dk->nblocks = 0;
	dk->engaged = 0;
	dk->disengagements++;
	if (dk->first_pass < UINT64_MAX / 4)
		dk->first_pass *= 2;
	dk_window(dk);
}

enum dk_event doorkeeper_judge(struct doorkeeper *dk, uint64_t budget, uint64_t row, uint64_t seen,
			       uint64_t hits, uint64_t captured)
{
	if (row == 0)
		return DK_NONE;
	dk->unique += captured;
	if (dk->engaged) {
		dk->judged += seen / row;
		dk->again += hits / row;
		if (dk->judged < DK_JUDGE_ROWS)
			return DK_NONE;
		if (dk->again * DK_AGAIN_SHARE >= dk->judged) {
			dk_disengage(dk);
			return DK_DISENGAGED;
		}
		dk->judged = dk->again = 0;
		return DK_NONE;
	}
	if (dk->first_pass == 0) {
		uint64_t first = budget;

		if (first > dk_first_pass_max)
			first = dk_first_pass_max;
		if (row <= DK_FIRST_PASS_BYTES / DK_FIRST_PASS_ROWS && first > DK_FIRST_PASS_ROWS * row)
			first = DK_FIRST_PASS_ROWS * row;
		dk->first_pass = first > row ? first : row;
		dk_window(dk);
	}
	dk->win_seen += seen;
	dk->win_hits += hits;
	if (dk->win_seen < dk->win_len)
		return DK_NONE;
	if (dk->win_hits * DK_HIT_SHARE <= dk->win_seen && dk->unique > 0 && dk->unique <= budget / 2 &&
	    dk_engage(dk, row) == 0)
		return DK_ENGAGED;
	dk_window(dk);
	return DK_NONE;
}

enum dk_event doorkeeper_disengage(struct doorkeeper *dk)
{
	if (!dk->engaged)
		return DK_NONE;
	dk_disengage(dk);
	return DK_DISENGAGED;
}

uint64_t doorkeeper_bytes(const struct doorkeeper *dk)
{
	return dk->bits ? 2 * dk->nblocks * DK_BLOCK_WORDS * sizeof(*dk->bits) : 0;
}

void doorkeeper_release(struct doorkeeper *dk)
{
	free(dk->bits);
	memset(dk, 0, sizeof(*dk));
}

void doorkeeper_set_first_pass_for_tests(uint64_t bytes)
{
	dk_first_pass_max = bytes ? bytes : DK_FIRST_PASS_BYTES;
}
