/*
 * specpick: the content-based choice between specs that divide one copy
 * size (specpick.h says why and when).
 *
 * Per ambiguous copy size, a record holds its candidate specs (largest
 * first). Per row size, a set holds the 64-bit fingerprints of rows of that
 * size seen in earlier copies of any ambiguous size (open addressing, zero
 * is empty), so the last, partial batch of an epoch finds the rows the full
 * batches showed. A copy first looks its distinct rows up in the sets (so
 * repeats inside one copy do not count), then adds them. Window sums per candidate collect rows looked up and repeats; once
 * every candidate has SPECPICK_MIN_ROWS rows in the window, the largest
 * candidate with at least half of its rows repeated is chosen; if none is,
 * the window starts again (the first epoch: nothing repeats yet).
 *
 * Memory: all sets together stay under SPECPICK_MEM_MAX. Past it, the
 * sampling level rises: a fingerprint is kept only when its top `level`
 * bits are zero, every set drops what no longer qualifies, and only
 * qualifying rows are looked up and counted from then on.
 */
#include "pool/specpick.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pool/fingerprint.h"
#include "core/log.h"

#define SPECPICK_SIZES 16
#define SPECPICK_CANDS 4
#define SPECPICK_MIN_ROWS 4

struct sp_set {
	uint64_t *keys;
	size_t cap, count;      /* cap a power of two, count <= cap / 2 */
};

struct sp_size {
	_Atomic uint64_t n;     /* the copy size, 0: a free record */
	_Atomic int decided;    /* -1 undecided, else the candidate chosen */
	int ncand;
	struct layout_hit cand[SPECPICK_CANDS];
	uint64_t win_rows[SPECPICK_CANDS], win_reps[SPECPICK_CANDS];
};

/* The fingerprints of rows of one row size. */
struct sp_rows {
	uint64_t row;           /* 0: a free record */
	struct sp_set seen;
};

#define SPECPICK_ROWS LAYOUT_MAX_SPECS

static pthread_mutex_t sp_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sp_size sp_sizes[SPECPICK_SIZES];
static struct sp_rows sp_rows[SPECPICK_ROWS];
static unsigned sp_level;      /* sampling level: keep keys whose top sp_level bits are zero */
static uint64_t sp_bytes;      /* bytes of every set */

static int sp_keep(uint64_t k)
{
	return sp_level == 0 || (k >> (64 - sp_level)) == 0;
}

/* Slot of key k in s (the key or the empty slot where it would go). */
static size_t sp_slot(const struct sp_set *s, uint64_t k)
{
	size_t mask = s->cap - 1, i = (size_t)(k * 0x9E3779B97F4A7C15ULL) & mask;

	while (s->keys[i] && s->keys[i] != k)
		i = (i + 1) & mask;
	return i;
}

static int sp_has(const struct sp_set *s, uint64_t k)
{
	return s->cap && s->keys[sp_slot(s, k)] == k;
}

/* Rebuilds s with capacity cap, keeping the keys that still qualify. Returns 0 or -1. */
static int sp_rebuild(struct sp_set *s, size_t cap)
{
	struct sp_set n = { .cap = cap };

	n.keys = calloc(cap, sizeof(*n.keys));
	if (!n.keys)
		return -1;
	for (size_t i = 0; i < s->cap; i++) {
		if (s->keys[i] && sp_keep(s->keys[i])) {
			n.keys[sp_slot(&n, s->keys[i])] = s->keys[i];
			n.count++;
		}
	}
	sp_bytes += cap * sizeof(*n.keys);
	sp_bytes -= s->cap * sizeof(*s->keys);
	free(s->keys);
	*s = n;
	return 0;
}

/* Raises the sampling level until the sets fit the memory bound. */
static void sp_thin(void)
{
	while (sp_bytes > SPECPICK_MEM_MAX / 2 && sp_level < 60) {
		sp_level++;
		for (int i = 0; i < SPECPICK_ROWS; i++)
			if (sp_rows[i].seen.cap)
				sp_rebuild(&sp_rows[i].seen, sp_rows[i].seen.cap);
	}
}

/* The set of rows of row bytes (made on first use), or NULL (table full). */
static struct sp_set *sp_seen(uint64_t row)
{
	for (int i = 0; i < SPECPICK_ROWS; i++)
		if (sp_rows[i].row == row)
			return &sp_rows[i].seen;
	for (int i = 0; i < SPECPICK_ROWS; i++) {
		if (!sp_rows[i].row) {
			sp_rows[i].row = row;
			return &sp_rows[i].seen;
		}
	}
	return NULL;
}

static void sp_add(struct sp_set *s, uint64_t k)
{
	size_t i;

	if (2 * (s->count + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;

		if (sp_bytes + cap * sizeof(*s->keys) > SPECPICK_MEM_MAX || sp_rebuild(s, cap))
			return;
	}
	i = sp_slot(s, k);
	if (!s->keys[i]) {
		s->keys[i] = k;
		s->count++;
	}
}

/* Fills r's candidates: the specs of l dividing n, largest first. Returns their number. */
static int sp_candidates(const struct layout *l, uint64_t n, struct layout_hit *cand)
{
	int k = 0;

	for (int i = 0; i < l->nrows && k < SPECPICK_CANDS; i++)
		if (n % l->rows[i] == 0)
			cand[k++] = (struct layout_hit){ .row = l->rows[i], .prio = l->prio[i], .spec = i };
	return k;
}

/* The record of size n, or a new one, or NULL (table full). Called under sp_lock. */
static struct sp_size *sp_record(const struct layout *l, uint64_t n)
{
	struct sp_size *free_rec = NULL;

	for (int i = 0; i < SPECPICK_SIZES; i++) {
		uint64_t m = atomic_load_explicit(&sp_sizes[i].n, memory_order_relaxed);

		if (m == n)
			return &sp_sizes[i];
		if (!m && !free_rec)
			free_rec = &sp_sizes[i];
	}
	if (!free_rec)
		return NULL;
	free_rec->ncand = sp_candidates(l, n, free_rec->cand);
	atomic_store_explicit(&free_rec->decided, -1, memory_order_relaxed);
	atomic_store_explicit(&free_rec->n, n, memory_order_release);
	return free_rec;
}

static int sp_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Observes one copy for record r; returns the candidate decided, or -1.
 * Distinct rows are counted, so a row repeated inside the copy, or a
 * constant chunk (black borders) in every copy, weighs as one row.
 * Called under sp_lock.
 */
static int sp_observe(struct sp_size *r, const void *src)
{
	struct fp *fps;
	uint64_t *keys;
	uint64_t n = atomic_load_explicit(&r->n, memory_order_relaxed);
	uint64_t most = n / r->cand[r->ncand - 1].row;
	int ready = 1;

	fps = malloc(most * sizeof(*fps));
	keys = malloc(most * sizeof(*keys));
	if (!fps || !keys) {
		free(fps);
		free(keys);
		return -1;
	}
	for (int c = 0; c < r->ncand; c++) {
		uint64_t rows = n / r->cand[c].row, m = 0;
		struct sp_set *seen = sp_seen(r->cand[c].row);

		if (!seen) {
			ready = 0;
			continue;
		}
		fingerprint_rows(src, r->cand[c].row, rows, fps);
		for (uint64_t i = 0; i < rows; i++) {
			uint64_t k = fps[i].lo | 1;

			if (sp_keep(k))
				keys[m++] = k;
		}
		qsort(keys, m, sizeof(*keys), sp_cmp);
		for (uint64_t i = 0; i < m; i++) {
			if (i && keys[i] == keys[i - 1])
				continue;
			r->win_rows[c]++;
			r->win_reps[c] += sp_has(seen, keys[i]);
		}
		for (uint64_t i = 0; i < m; i++)
			sp_add(seen, keys[i]);
		if (r->win_rows[c] < SPECPICK_MIN_ROWS)
			ready = 0;
	}
	free(fps);
	free(keys);
	sp_thin();
	if (!ready)
		return -1;
	for (int c = 0; c < r->ncand; c++)
		if (2 * r->win_reps[c] >= r->win_rows[c] && r->win_reps[c] > 0)
			return c;
	for (int c = 0; c < r->ncand; c++)
		r->win_rows[c] = r->win_reps[c] = 0;
	return -1;
}

/* Frees every set once no ambiguous size is undecided. Called under sp_lock. */
static void sp_release_if_done(void)
{
	for (int i = 0; i < SPECPICK_SIZES; i++)
		if (atomic_load_explicit(&sp_sizes[i].n, memory_order_relaxed) &&
		    atomic_load_explicit(&sp_sizes[i].decided, memory_order_relaxed) < 0)
			return;
	for (int i = 0; i < SPECPICK_ROWS; i++) {
		free(sp_rows[i].seen.keys);
		memset(&sp_rows[i], 0, sizeof(sp_rows[i]));
	}
	sp_bytes = 0;
}

enum specpick_result specpick_choose(const struct layout *l, uint64_t n, const void *src,
				     struct layout_hit *hit)
{
	struct layout_hit cand[SPECPICK_CANDS];
	struct sp_size *r = NULL;
	int d;

	if (sp_candidates(l, n, cand) < 2)
		return SPECPICK_ONE;
	for (int i = 0; i < SPECPICK_SIZES; i++) {
		if (atomic_load_explicit(&sp_sizes[i].n, memory_order_acquire) == n) {
			r = &sp_sizes[i];
			break;
		}
	}
	d = r ? atomic_load_explicit(&r->decided, memory_order_acquire) : -1;
	if (d < 0) {
		if (pthread_mutex_trylock(&sp_lock) != 0)
			return SPECPICK_UNDECIDED;
		r = sp_record(l, n);
		if (r && (d = atomic_load_explicit(&r->decided, memory_order_relaxed)) < 0 && r->ncand > 1) {
			d = sp_observe(r, src);
			if (d >= 0) {
				atomic_store_explicit(&r->decided, d, memory_order_release);
				sp_release_if_done();
				log_verbose("copies of %llu bytes are rows of %llu: their rows repeat (of %d "
					    "specs that divide the size)", (unsigned long long)n,
					    (unsigned long long)r->cand[d].row, r->ncand);
			}
		}
		pthread_mutex_unlock(&sp_lock);
		if (!r)
			return SPECPICK_ONE;    /* too many ambiguous sizes: the plain rule */
		if (d < 0)
			return SPECPICK_UNDECIDED;
	}
	*hit = r->cand[d];
	return SPECPICK_DECIDED;
}

void specpick_reset(void)
{
	pthread_mutex_init(&sp_lock, NULL);
	for (int i = 0; i < SPECPICK_ROWS; i++) {
		free(sp_rows[i].seen.keys);
		memset(&sp_rows[i], 0, sizeof(sp_rows[i]));
	}
	for (int i = 0; i < SPECPICK_SIZES; i++) {
		sp_sizes[i].ncand = 0;
		memset(sp_sizes[i].win_rows, 0, sizeof(sp_sizes[i].win_rows));
		memset(sp_sizes[i].win_reps, 0, sizeof(sp_sizes[i].win_reps));
		atomic_store(&sp_sizes[i].decided, -1);
		atomic_store(&sp_sizes[i].n, 0);
	}
	sp_level = 0;
	sp_bytes = 0;
}
