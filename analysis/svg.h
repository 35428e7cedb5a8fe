/*
 * svg: a small writer of SVG 1.1 documents, for the plots (plot.h). Cairo's
 * SVG surface draws every glyph as an outline; this writer puts text in
 * <text> elements, so a plot's labels can be searched, copied and read by
 * a screen reader, and the file stays small.
 *
 * The document is written as it is drawn: svg_begin opens the file and
 * writes the root element, each call appends one element, svg_end closes
 * the root and the file. Elements are painted in the order written. Every
 * call after a failed write does nothing; svg_end reports the first error.
 *
 * Text is taken as UTF-8 and escaped for XML: & < > " ' become entities,
 * and what XML 1.0 forbids in a document (control characters other than
 * tab, line feed and carriage return, U+FFFE and U+FFFF, bytes that are
 * not UTF-8) becomes U+FFFD, so any string gives a well-formed document.
 * Coordinates are user units (pixels), with y growing downwards.
 */
#ifndef VRAMPOOL_SVG_H
#define VRAMPOOL_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* An open document. The writer owns F between svg_begin and svg_end. */
struct svg {
	FILE *f;
	int err;		/* the first error, a negative errno; 0 while all is well */
};

/* How a line is drawn: colour 0xRRGGBB, width, and a dash pattern (NDASH 0: solid). */
struct svg_stroke {
	uint32_t rgb;
	double width;
	const double *dash;	/* NDASH lengths, on and off in turn */
	int ndash;
};

/* Where text stands against its x: its start, its middle or its end. */
enum svg_anchor { SVG_START, SVG_MIDDLE, SVG_END };

/* How text is drawn: size in pixels, anchor, colour, and a rotation in degrees about (x, y). */
struct svg_font {
	double size;
	enum svg_anchor anchor;
	uint32_t rgb;
	double rotate;
};

/*
 * Creates PATH (truncating a file there) and writes the root element of a
 * W by H document in FAMILY (a CSS font-family list, escaped). Returns 0,
 * or a negative errno (S is then closed: no svg_end needed).
 */
int svg_begin(struct svg *s, const char *path, double w, double h, const char *family);

/* Appends a filled rectangle (FILL 0xRRGGBB) stroked with K, or not (K NULL). */
void svg_rect(struct svg *s, double x, double y, double w, double h, long fill,
	      const struct svg_stroke *k);
#define SVG_NO_FILL (-1L)

/* Appends a polyline through the N points (X[i], Y[i]); fewer than two draw nothing. */
void svg_polyline(struct svg *s, const double *x, const double *y, int n, const struct svg_stroke *k);

/* Appends a disc of radius R at (X, Y) in colour RGB. */
void svg_disc(struct svg *s, double x, double y, double r, uint32_t rgb);

/* Appends TEXT (UTF-8, escaped here) with its baseline at Y, anchored at X. */
void svg_text(struct svg *s, double x, double y, const struct svg_font *font, const char *text);

/*
 * Writes TEXT escaped for XML character data and attribute values into
 * OUT (always terminated); a character whose escape does not fit is left
 * out with all after it. Returns the length the whole escape needs (as
 * snprintf does), so OUT of that length plus one holds all of it.
 */
size_t svg_escape(const char *text, char *out, size_t size);

/* Closes the root element and the file. Returns 0, or the first error (a negative errno). */
int svg_end(struct svg *s);

#endif
