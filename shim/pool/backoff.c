/*
 * backoff: the stand-down and resume rules of backoff.h.
 */
#include "pool/backoff.h"

#include <string.h>

/* Back to pooling: a fresh window, no samples pending. */
static void backoff_resume(struct backoff *b)
{
	b->down = 0;
	b->win_copies = 0;
	b->win_bytes = 0;
	b->win_hit_bytes = 0;
	b->skipped = 0;
	b->sample_rows = 0;
	b->sample_hits = 0;
	b->repeats = 0;
}

enum backoff_route backoff_route(struct backoff *b, int can_admit)
{
	if (!b->down)
		return BACKOFF_FULL;
	if (can_admit) {
		backoff_resume(b);
		return BACKOFF_FULL;
	}
	if (++b->skipped >= BACKOFF_SAMPLE_EVERY) {
		b->skipped = 0;
		return BACKOFF_SAMPLE;
	}
	return BACKOFF_PASS;
}

int backoff_full(struct backoff *b, int can_admit, uint64_t bytes, uint64_t hit_bytes)
{
	if (b->down)
		return 0;
	if (can_admit) {
		b->win_copies = 0;
		b->win_bytes = 0;
		b->win_hit_bytes = 0;
		return 0;
	}
	b->win_copies++;
	b->win_bytes += bytes;
	b->win_hit_bytes += hit_bytes;
	if (b->win_copies < BACKOFF_WINDOW &&
	    (b->win_copies < BACKOFF_WINDOW_MIN || b->win_bytes < BACKOFF_WINDOW_BYTES))
		return 0;
	/* Under 1% of the window's bytes came from the pool: stand down. */
	if (b->win_hit_bytes * 100 < b->win_bytes) {
		backoff_resume(b);
		b->down = 1;
		b->stand_downs++;
		return 1;
	}
	/* Judge the next window afresh. */
	b->win_copies = 0;
	b->win_bytes = 0;
	b->win_hit_bytes = 0;
	return 0;
}

enum backoff_verdict backoff_sample(struct backoff *b, uint32_t rows, uint32_t hits, uint32_t repeats)
{
	uint64_t need = (uint64_t)BACKOFF_STALE_REPEATS << (b->refreshes < 16 ? b->refreshes : 16);

	if (!b->down)
		return BACKOFF_STAY;
	b->sample_rows += rows;
	b->sample_hits += hits;
	b->repeats += repeats;
	if (b->sample_rows >= BACKOFF_RESUME_ROWS) {
		if ((uint64_t)b->sample_hits * 16 >= b->sample_rows) {
			backoff_resume(b);
			return BACKOFF_RESUME;
		}
		b->sample_rows = 0;
		b->sample_hits = 0;
	}
	if (b->repeats >= need) {
		backoff_resume(b);
		b->refreshes++;
		return BACKOFF_REFRESH;
	}
	return BACKOFF_STAY;
}
