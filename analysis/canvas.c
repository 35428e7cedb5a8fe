/*
 * canvas.c: canvas.h's two back-ends. Each call goes to svg.c when the
 * canvas is an SVG, else to cairo's path and toy text API on an image
 * surface that canvas_close writes as a PNG.
 */
#include <errno.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "canvas.h"

#define CANVAS_FAMILY "sans-serif"

/* Sets cairo's source to RGB (0xRRGGBB). */
static void cairo_rgb(cairo_t *cr, uint32_t rgb)
{
	cairo_set_source_rgb(cr, ((rgb >> 16) & 0xff) / 255.0, ((rgb >> 8) & 0xff) / 255.0,
			     (rgb & 0xff) / 255.0);
}

/* Sets cairo's colour, width and dash to K's. */
static void cairo_stroke_style(cairo_t *cr, const struct svg_stroke *k)
{
	cairo_rgb(cr, k->rgb);
	cairo_set_line_width(cr, k->width);
	cairo_set_dash(cr, k->dash, k->ndash > 0 ? k->ndash : 0, 0);
}

int canvas_open(struct canvas *c, const char *path, double w, double h, char *why, size_t why_size)
{
	size_t len = strlen(path);
	cairo_status_t st;
	int err;

	memset(c, 0, sizeof(*c));
	c->path = path;
	c->is_svg = len >= 4 && strcasecmp(path + len - 4, ".svg") == 0;
	if (c->is_svg) {
		err = svg_begin(&c->svg, path, w, h, CANVAS_FAMILY);
		if (err) {
			snprintf(why, why_size, "%s", strerror(-err));
			return err;
		}
		svg_rect(&c->svg, 0, 0, w, h, 0xffffff, NULL);
		return 0;
	}
	c->surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)w, (int)h);
	st = cairo_surface_status(c->surface);
	if (st != CAIRO_STATUS_SUCCESS) {
		snprintf(why, why_size, "%s", cairo_status_to_string(st));
		cairo_surface_destroy(c->surface);
		return -EIO;
	}
	c->cr = cairo_create(c->surface);
	cairo_set_source_rgb(c->cr, 1, 1, 1);
	cairo_paint(c->cr);
	cairo_select_font_face(c->cr, CANVAS_FAMILY, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	return 0;
}

void canvas_frame(struct canvas *c, double x, double y, double w, double h, const struct svg_stroke *k)
{
	if (c->is_svg) {
		svg_rect(&c->svg, x, y, w, h, SVG_NO_FILL, k);
		return;
	}
	cairo_stroke_style(c->cr, k);
	cairo_rectangle(c->cr, x, y, w, h);
	cairo_stroke(c->cr);
}

void canvas_polyline(struct canvas *c, const double *x, const double *y, int n, const struct svg_stroke *k)
{
	int i;

	if (n < 2)
		return;
	if (c->is_svg) {
		svg_polyline(&c->svg, x, y, n, k);
		return;
	}
	cairo_stroke_style(c->cr, k);
	cairo_set_line_join(c->cr, CAIRO_LINE_JOIN_ROUND);
	cairo_move_to(c->cr, x[0], y[0]);
	for (i = 1; i < n; i++)
		cairo_line_to(c->cr, x[i], y[i]);
	cairo_stroke(c->cr);
}

void canvas_disc(struct canvas *c, double x, double y, double r, uint32_t rgb)
{
	if (c->is_svg) {
		svg_disc(&c->svg, x, y, r, rgb);
		return;
	}
	cairo_rgb(c->cr, rgb);
	cairo_new_sub_path(c->cr);
	cairo_arc(c->cr, x, y, r, 0, 2 * M_PI);
	cairo_fill(c->cr);
}

void canvas_text(struct canvas *c, double x, double y, const struct svg_font *font, const char *text)
{
	cairo_text_extents_t ext;

	if (c->is_svg) {
		svg_text(&c->svg, x, y, font, text);
		return;
	}
	cairo_save(c->cr);
	cairo_rgb(c->cr, font->rgb);
	cairo_set_font_size(c->cr, font->size);
	cairo_translate(c->cr, x, y);
	cairo_rotate(c->cr, font->rotate * M_PI / 180.0);
	cairo_text_extents(c->cr, text, &ext);
	cairo_move_to(c->cr, -ext.x_advance * (font->anchor == SVG_MIDDLE ? 0.5 : font->anchor == SVG_END ? 1 : 0), 0);
	cairo_show_text(c->cr, text);
	cairo_restore(c->cr);
}

int canvas_close(struct canvas *c, char *why, size_t why_size)
{
	cairo_status_t st;
	int err = 0;

	if (c->is_svg) {
		err = svg_end(&c->svg);
		if (err)
			snprintf(why, why_size, "%s", strerror(-err));
		return err;
	}
	st = cairo_status(c->cr);
	cairo_destroy(c->cr);
	c->cr = NULL;
	if (st == CAIRO_STATUS_SUCCESS)
		st = cairo_surface_write_to_png(c->surface, c->path);
	cairo_surface_destroy(c->surface);
	c->surface = NULL;
	if (st != CAIRO_STATUS_SUCCESS) {
		snprintf(why, why_size, "%s", cairo_status_to_string(st));
		err = -EIO;
	}
	/* Cairo's and fontconfig's caches, so that leak checkers see a clean exit. */
	cairo_debug_reset_static_data();
	FcFini();
	return err;
}
