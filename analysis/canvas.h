/*
 * canvas: the one drawing interface of the plots (plot.h), with two
 * back-ends chosen by the file's extension: cairo's image surface, written
 * as a PNG when the canvas closes, and svg.h's writer, which keeps text as
 * text (cairo's own SVG surface draws glyph outlines).
 *
 * The plot draws once, through these calls; both back-ends paint in the
 * order drawn, with the same coordinates (pixels, y growing downwards),
 * strokes and fonts (svg.h's structs, used by both). Only text extents
 * differ: each back-end places text by its anchor itself, so no caller
 * measures text.
 */
#ifndef VRAMPOOL_CANVAS_H
#define VRAMPOOL_CANVAS_H

#include <cairo.h>
#include <stdbool.h>
#include <stddef.h>

#include "svg.h"

/* A canvas being drawn. Its fields are the back-ends' own. */
struct canvas {
	bool is_svg;
	struct svg svg;				/* the SVG back-end */
	cairo_surface_t *surface;		/* the PNG back-end */
	cairo_t *cr;
	const char *path;			/* the caller's, until canvas_close */
};

/*
 * Opens a W by H canvas, white, for PATH: SVG when PATH ends in .svg (any
 * case), else PNG. Returns 0, or a negative errno with the reason in WHY
 * (nothing to close then).
 */
int canvas_open(struct canvas *c, const char *path, double w, double h, char *why, size_t why_size);

/* Strokes the outline of a rectangle with K. */
void canvas_frame(struct canvas *c, double x, double y, double w, double h, const struct svg_stroke *k);

/* Strokes a line through the N points (X[i], Y[i]) with K; fewer than two draw nothing. */
void canvas_polyline(struct canvas *c, const double *x, const double *y, int n, const struct svg_stroke *k);

/* Fills a disc of radius R at (X, Y) in colour RGB (0xRRGGBB). */
void canvas_disc(struct canvas *c, double x, double y, double r, uint32_t rgb);

/* Draws TEXT (UTF-8) with its baseline at Y, anchored at X, in FONT. */
void canvas_text(struct canvas *c, double x, double y, const struct svg_font *font, const char *text);

/*
 * Finishes the file (the PNG is written here) and frees the canvas.
 * Returns 0, or a negative errno with the reason in WHY.
 */
int canvas_close(struct canvas *c, char *why, size_t why_size);

#endif
