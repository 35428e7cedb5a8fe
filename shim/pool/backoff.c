/*
 * backoff: the stand-down and resume rules of backoff.h.
 */
#include "pool/backoff.h"

#include <string.h>

/* A fresh window of full-path copies. */
static void backoff_window_reset(struct backoff *b)
{
	b->win_copies = 0;
	b->win_bytes = 0;
	b->win_hit_bytes = 0;
}

/* Back to pooling: a fresh window, no samples pending. */
static void backoff_resume(struct backoff *b)
{
	b->down = 0;
	backoff_window_reset(b);
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
		backoff_window_reset(b);
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
	backoff_window_reset(b);
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

struct backoff *backoff_kind(struct backoff_kinds *t, int spec, uint64_t rows)
{
	struct backoff_kind *k, *victim = NULL;

	if (!rows)
		rows = 1;
	t->clock++;
	for (int i = 0; i < BACKOFF_KINDS; i++) {
		k = &t->k[i];
		if (k->rows == rows && k->spec == spec) {
			k->used = t->clock;
			return &k->b;
		}
		/* A free slot first, then the least recently used, a stood-down one last. */
		if (!victim || (victim->rows && (!k->rows || k->b.down < victim->b.down ||
						 (k->b.down == victim->b.down && k->used < victim->used))))
			victim = k;
	}
	memset(victim, 0, sizeof(*victim));
	victim->spec = spec;
	victim->rows = rows;
	victim->used = t->clock;
	return &victim->b;
}

int backoff_any_down(const struct backoff_kinds *t)
{
	for (int i = 0; i < BACKOFF_KINDS; i++)
		if (t->k[i].rows && t->k[i].b.down)
			return 1;
	return 0;
}
