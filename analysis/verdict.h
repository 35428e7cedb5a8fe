/*
 * verdict.h: an off/on pair judged (`vrampool report off.json on.json`,
 * `vrampool run --ab [--repeat N]`), and a dry dump set against a real one.
 * Internal to the report's files and the launcher.
 *
 * One ratio convention everywhere: off/on, so "> 1" means fewer bytes, or
 * less time, with the pool (the README's benchmarks say it so too).
 *
 * Time: the figure both runs share is the steady-state time per copy
 * ("pace.steady": the windows of host-to-device copies from the middle of
 * the run on, the same rule in every mode) when both dumps have it, else
 * the wall time each dump states (first CUDA call to exit: start-up
 * included, which the text says). The time verdict of N pairs takes the
 * pairs' ratios: their median, their spread (min-max), and a band of no
 * measurable difference around 1, VERDICT_BAND_MIN either way: the pool
 * is faster (slower) only when every pair is beyond the band on that side;
 * a spread that reaches into the band or straddles 1 is no measurable
 * difference, whatever the median. One pair carries a verdict only beyond
 * VERDICT_ONE_PAIR_BAND (a noisy machine gave 1.51, 1.03, 1.19, 0.95 for
 * one set-up). The verdict never calls the pool faster when the pooled
 * run was slower.
 */
#ifndef VRAMPOOL_VERDICT_H
#define VRAMPOOL_VERDICT_H

#include <stdbool.h>
#include <stdio.h>

#include "dump.h"

#define VERDICT_PAIRS_MAX 64		/* --repeat's largest N */
#define VERDICT_BAND_MIN 0.03		/* the smallest band of no measurable difference */
#define VERDICT_ONE_PAIR_BAND 0.25	/* what one pair must beat to carry a time verdict */

enum verdict_bytes {
	VERDICT_BYTES_NO_COPIES,	/* neither run made a host-to-device copy */
	VERDICT_BYTES_NOT_COMPARABLE,	/* the runs asked for different amounts */
	VERDICT_BYTES_NO_SAVING,	/* as many bytes crossed with the pool */
	VERDICT_BYTES_FEWER,		/* fewer bytes crossed with the pool */
};

enum verdict_time {
	VERDICT_TIME_UNKNOWN,		/* no time figure in both dumps */
	VERDICT_TIME_ONE_PAIR,		/* one pair, within VERDICT_ONE_PAIR_BAND: no verdict */
	VERDICT_TIME_SAME,		/* no measurable difference */
	VERDICT_TIME_FASTER,		/* faster with the pool */
	VERDICT_TIME_SLOWER,		/* slower with the pool */
};

/* The time figure of a pair: seconds per copy (steady) or seconds (wall). */
struct verdict_figure {
	bool known;
	bool steady;			/* pace.steady's time per copy, else wall time */
	double off, on;
};

/* What the verdict found; the texts are one sentence each, escaped. */
struct verdict {
	enum verdict_bytes bytes;
	double bytes_ratio;		/* off/on of the bytes over PCIe; 0 when on is 0 */
	enum verdict_time time;
	struct verdict_figure figure;	/* of the pair (of the sums, for N pairs) */
	int pairs;
	double median, min, max, band;	/* of the pairs' off/on time ratios */
	char bytes_text[512];
	char time_text[512];
	char reason[1024];		/* why the pool served little, or "" */
};

/* The name of the time figure: "time per copy (steady)" or "wall time". */
const char *verdict_figure_name(bool steady);

/* The time figure OFF and ON share (pace when both have it, else wall time). */
void verdict_figure_of(const struct dump *off, const struct dump *on, struct verdict_figure *f);

/* The off/on ratio of the pair's time figure, or 0 when it is unknown. */
double verdict_time_ratio(const struct dump *off, const struct dump *on);

/*
 * Adds pair K (from 0) of an A/B, OFF and ON, into the sums SUM_OFF and
 * SUM_ON (dump_add; pair 0 starts them), its off/on time ratio into
 * RATIOS[K]. The sums' wall times are the mean of the runs' (a sum of
 * processes keeps the longest; a sum of runs one after the other is no
 * longer than its typical run).
 */
void verdict_add_pair(struct dump *sum_off, struct dump *sum_on, const struct dump *off,
		      const struct dump *on, int k, double *ratios);

/*
 * Judges OFF against ON (each a run, or the sum of N runs) with the N
 * pairs' off/on time RATIOS (n >= 1; zeros, unknown, are left out) into V.
 */
void verdict_judge(struct verdict *v, const struct dump *off, const struct dump *on,
		   const double *ratios, int n);

/*
 * Prints OFF and ON side by side (off/on ratios) and the verdict V judged
 * from them; N pairs add their ratios, median and spread.
 */
void verdict_print_ab(FILE *out, const struct dump *off, const struct dump *on,
		      const double *ratios, int n);

/*
 * Prints a dry dump DRY against a real run REAL as prediction against
 * outcome: the what-if curve read at REAL's budget beside what REAL's pool
 * served, never the two summed.
 */
void verdict_print_prediction(FILE *out, const struct dump *dry, const struct dump *real);

#endif
