/*
 * plot: `vrampool report --plot FILE` pictures: a PNG (drawn with cairo,
 * Debian libcairo2-dev) or an SVG (written by svg.c, with its labels as
 * <text>), chosen by FILE's extension; both drawn through canvas.h.
 *
 * The first panel is the what-if curve of every dump that has one: the
 * share of the matched bytes a pool of each budget would have served
 * (fill-until-full in first-seen order) against the budget, with the run's
 * actual budget marked. Each curve has its own colour and dash pattern and
 * a legend entry; curves that would be drawn on top of each other (within
 * half a pixel everywhere, as the ranks of one job often are) are drawn
 * once, with one entry that names them all: "ranks 0-3 (identical)". With
 * a telemetry file, a second panel shows, per process, the hit share of
 * each interval and the pool's fill (share of its budget) over time.
 *
 * Axes are ticked at multiples of a 1-2-5 step (1, 2 or 5 times a power of
 * ten) of one unit per axis (bytes in B, KiB, MiB..., seconds, percent),
 * so each label is the exact value at its tick and no two labels are alike.
 */
#ifndef VRAMPOOL_PLOT_H
#define VRAMPOOL_PLOT_H

#include <stddef.h>

#include "dump.h"

/* What an axis counts. */
enum plot_unit { PLOT_BYTES, PLOT_SECONDS, PLOT_PERCENT };

#define PLOT_TICKS_MAX 12

/* The ticks of one axis: N values from 0 up, each with its label. */
struct plot_ticks {
	int n;
	double step;				/* value[i] = i * step */
	double value[PLOT_TICKS_MAX];
	char label[PLOT_TICKS_MAX][32];		/* "1.5 MiB", "0.5 s", "20%" */
};

/*
 * Chooses the ticks of an axis from 0 to MAX in UNIT: about five intervals
 * of a 1-2-5 step (bytes: in the largest binary unit MAX reaches, and
 * never less than one byte), every multiple of it up to MAX, labelled with
 * as many decimals as the step has. Two ticks at least: MAX is taken as
 * 1e-3 at least (1 for bytes) and 1e15 at most, and as 1 when it is NaN.
 */
void plot_ticks(struct plot_ticks *t, double max, enum plot_unit unit);

/* Returns 0 when NAME ends in .png or .svg, else -EINVAL with a message in ERR. */
int plot_check_name(const char *name, char *err, size_t err_size);

/*
 * Draws the N dumps D (and the telemetry T, or NULL) into PATH. Returns 0,
 * or a negative errno with a one-line message in ERR: nothing to draw (no
 * curve and no telemetry: the message says why each dump has no curve,
 * an off run's among them), or a file that could not be written.
 */
int plot_write(const char *path, const struct dump *d, int n, const struct telemetry *t,
	       char *err, size_t err_size);

#endif
