/*
 * fingerprint_tune: the thread-count chooser behind fingerprint_rows
 * (fingerprint_tune.h is the contract and says how it chooses).
 *
 * A chooser learns which count hashes a large copy fastest on this machine
 * under its present load: it measures its choice and the neighbouring
 * counts, keeps an average per count, and moves only to a count that is
 * clearly (FP_TUNE_MARGIN) faster, so that noise does not swing it.
 */
#include "pool/fingerprint_tune.h"

#include <string.h>

#define FP_TUNE_SAMPLES 2
#define FP_PROBE_EVERY 32
#define FP_TUNE_MARGIN 1.05

/* One chooser per configuration lately used (tests and benchmarks switch). */
#define FP_TUNERS 4
static struct fp_tuner fp_tuners[FP_TUNERS];
static unsigned fp_tuner_next;            /* the slot to reuse next */

/*
 * Sets up the chooser for configuration cfg: candidates 1, 2, 4, ... and
 * the most threads when adaptive, 1 and the forced count otherwise.
 */
static void fp_tune_reset(struct fp_tuner *t, unsigned cfg)
{
	unsigned max = fp_cfg_max(cfg);

	memset(t, 0, sizeof(*t));
	t->cfg = cfg;
	for (unsigned c = 1; c < max && t->ncand < FP_TUNE_CANDS - 1;
	     c = fp_cfg_adaptive(cfg) ? c * 2 : max)
		t->cand[t->ncand++] = c;
	t->cand[t->ncand++] = max;
}

unsigned fp_tune_pick(struct fp_tuner *t)
{
	unsigned c = t->cur, lo = c ? c - 1 : c, hi = c + 1 < t->ncand ? c + 1 : c;
	unsigned least = c;

	t->jobs++;
	if (t->n[lo] < t->n[least])
		least = lo;
	if (t->n[hi] < t->n[least])
		least = hi;
	if (t->n[least] < FP_TUNE_SAMPLES)
		return least;
	if (t->jobs % FP_PROBE_EVERY == 0) {
		t->dir ^= 1;
		if (t->dir ? hi == c : lo == c)
			t->dir ^= 1;           /* at an end of the list: the other way */
		return t->dir ? hi : lo;
	}
	return c;
}

void fp_tune_record(struct fp_tuner *t, unsigned i, double rate)
{
	unsigned c = t->cur, best = c;

	t->rate[i] = t->n[i] ? t->rate[i] + (rate - t->rate[i]) / 4 : rate;
	t->n[i]++;
	for (unsigned j = c ? c - 1 : c; j <= c + 1 && j < t->ncand; j++)
		if (j != c && t->n[j] && t->rate[j] > t->rate[c] * FP_TUNE_MARGIN &&
		    t->rate[j] > t->rate[best])
			best = j;
	t->cur = best;
}

struct fp_tuner *fp_tuner_for(unsigned cfg)
{
	struct fp_tuner *t;

	for (unsigned i = 0; i < FP_TUNERS; i++)
		if (fp_tuners[i].cfg == cfg)
			return &fp_tuners[i];
	t = &fp_tuners[fp_tuner_next++ % FP_TUNERS];
	fp_tune_reset(t, cfg);
	return t;
}

unsigned fp_tune_threads(unsigned cfg)
{
	unsigned threads = 1;

	for (unsigned i = 0; i < FP_TUNERS; i++)
		if (fp_tuners[i].cfg == cfg)
			threads = fp_tuners[i].cand[fp_tuners[i].cur];
	return threads;
}

void fp_tune_forget(void)
{
	memset(fp_tuners, 0, sizeof(fp_tuners));
}
