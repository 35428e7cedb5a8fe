/*
 * plot: `vrampool report --plot FILE` pictures, drawn with cairo (Debian
 * libcairo2-dev): a PNG or an SVG, chosen by FILE's extension.
 *
 * The first panel is the what-if curve of every dump that has one: the
 * share of the matched bytes a pool of each budget would have served
 * (fill-until-full in first-seen order) against the budget, with the run's
 * actual budget marked. With a telemetry file, a second panel shows, per
 * process, the hit share of each interval and the pool's fill (share of
 * its budget) over time.
 */
#ifndef VRAMPOOL_PLOT_H
#define VRAMPOOL_PLOT_H

#include <stddef.h>

#include "dump.h"

/* Returns 0 when NAME ends in .png or .svg, else -EINVAL with a message in ERR. */
int plot_check_name(const char *name, char *err, size_t err_size);

/*
 * Draws the N dumps D (and the telemetry T, or NULL) into PATH. Returns 0,
 * or a negative errno with a one-line message in ERR: nothing to draw (no
 * curve and no telemetry), or a file cairo could not write.
 */
int plot_write(const char *path, const struct dump *d, int n, const struct telemetry *t,
	       char *err, size_t err_size);

#endif
