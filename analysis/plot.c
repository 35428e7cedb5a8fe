/*
 * plot.c: the pictures of plot.h, drawn with cairo's path and toy text API.
 * One surface (an image for PNG, an SVG surface that writes as it goes),
 * one or two panels stacked, each with its axes, ticks, legend and title.
 */
#include <cairo.h>
#include <cairo-svg.h>
#include <errno.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plot.h"
#include "vrampool.h"

#define PLOT_W 900
#define PANEL_H 460
#define MARGIN_L 90
#define MARGIN_R 30
#define MARGIN_T 56
#define MARGIN_B 60
#define MAX_SERIES 16

/* The drawing area of one panel, in surface coordinates. */
struct panel {
	double x0, y0, w, h;	/* the plot area inside the margins */
	double xmax;		/* data value at the right edge (left is 0) */
};

static const double palette[][3] = {
	{ 0.12, 0.47, 0.71 }, { 0.84, 0.15, 0.16 }, { 0.17, 0.63, 0.17 },
	{ 0.58, 0.40, 0.74 }, { 1.00, 0.50, 0.05 }, { 0.55, 0.34, 0.29 },
	{ 0.89, 0.47, 0.76 }, { 0.50, 0.50, 0.50 },
};
#define NCOLORS (sizeof(palette) / sizeof(palette[0]))

int plot_check_name(const char *name, char *err, size_t err_size)
{
	size_t n = strlen(name);

	if (n > 4 && (strcasecmp(name + n - 4, ".png") == 0 || strcasecmp(name + n - 4, ".svg") == 0))
		return 0;
	snprintf(err, err_size, "--plot %s: the file name must end in .png or .svg", esc(name));
	return -EINVAL;
}

static void set_color(cairo_t *cr, int i)
{
	const double *c = palette[(size_t)i % NCOLORS];

	cairo_set_source_rgb(cr, c[0], c[1], c[2]);
}

/* Draws TEXT with its left (ALIGN 0), centre (0.5) or right (1) at X, baseline Y. */
static void text_at(cairo_t *cr, double x, double y, double align, const char *text)
{
	cairo_text_extents_t ext;

	cairo_text_extents(cr, text, &ext);
	cairo_move_to(cr, x - align * ext.x_advance, y);
	cairo_show_text(cr, text);
}

/* Maps data X (0..xmax) and Y (0..100) to the surface. */
static double px(const struct panel *p, double x)
{
	return p->x0 + (p->xmax > 0 ? x / p->xmax : 0) * p->w;
}

static double py(const struct panel *p, double y)
{
	return p->y0 + p->h - (y / 100.0) * p->h;
}

/*
 * Draws the frame of a panel: title, axes, the y ticks in percent and the x
 * ticks, labelled by LABEL_X (bytes or seconds).
 */
static void panel_frame(cairo_t *cr, const struct panel *p, const char *title,
			const char *xlabel, const char *ylabel, bool bytes)
{
	char buf[64];
	int i;

	cairo_set_source_rgb(cr, 0, 0, 0);
	cairo_set_font_size(cr, 15);
	text_at(cr, p->x0, p->y0 - 22, 0, title);
	cairo_set_font_size(cr, 11);
	cairo_set_line_width(cr, 1);
	for (i = 0; i <= 4; i++) {
		double y = py(p, 25.0 * i), x = p->x0 + p->w * i / 4.0, v = p->xmax * i / 4.0;

		cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
		cairo_move_to(cr, p->x0, y);
		cairo_line_to(cr, p->x0 + p->w, y);
		cairo_move_to(cr, x, p->y0);
		cairo_line_to(cr, x, p->y0 + p->h);
		cairo_stroke(cr);
		cairo_set_source_rgb(cr, 0, 0, 0);
		snprintf(buf, sizeof(buf), "%d%%", 25 * i);
		text_at(cr, p->x0 - 8, y + 4, 1, buf);
		if (bytes)
			tool_format_bytes((uint64_t)v, buf, sizeof(buf));
		else
			snprintf(buf, sizeof(buf), "%.0f s", v);
		text_at(cr, x, p->y0 + p->h + 16, 0.5, buf);
	}
	cairo_set_source_rgb(cr, 0, 0, 0);
	cairo_rectangle(cr, p->x0, p->y0, p->w, p->h);
	cairo_stroke(cr);
	text_at(cr, p->x0 + p->w / 2, p->y0 + p->h + 38, 0.5, xlabel);
	cairo_save(cr);
	cairo_move_to(cr, p->x0 - 52, p->y0 + p->h / 2);
	cairo_rotate(cr, -M_PI / 2);
	{
		cairo_text_extents_t ext;

		cairo_text_extents(cr, ylabel, &ext);
		cairo_rel_move_to(cr, -ext.x_advance / 2, 0);
	}
	cairo_show_text(cr, ylabel);
	cairo_restore(cr);
}

/* Draws one legend entry (a short line in colour I, dashed or not) at row K. */
static void legend(cairo_t *cr, const struct panel *p, int k, int i, bool dashed, const char *text)
{
	double x = p->x0 + 12, y = p->y0 + 18 + 16 * k;
	static const double dash[] = { 5, 3 };

	set_color(cr, i);
	cairo_set_line_width(cr, 2);
	cairo_set_dash(cr, dash, dashed ? 2 : 0, 0);
	cairo_move_to(cr, x, y - 4);
	cairo_line_to(cr, x + 22, y - 4);
	cairo_stroke(cr);
	cairo_set_dash(cr, NULL, 0, 0);
	cairo_set_source_rgb(cr, 0, 0, 0);
	text_at(cr, x + 28, y, 0, text);
}

/* The share of D's matched bytes that S is, in percent. */
static double curve_share(const struct dump *d, uint64_t s)
{
	uint64_t m = d->unique_bytes + d->repeat_bytes;

	return m ? 100.0 * (double)s / (double)m : 0.0;
}

/* Draws the what-if panel at TOP for the dumps that have a curve. */
static void draw_curves(cairo_t *cr, double top, const struct dump *d, int n)
{
	static const double dash[] = { 4, 4 };
	struct panel p = { MARGIN_L, top + MARGIN_T, PLOT_W - MARGIN_L - MARGIN_R,
			   PANEL_H - MARGIN_T - MARGIN_B, 0 };
	char label[320], name[256], b1[32];
	int i, k, row = 0;

	for (i = 0; i < n; i++) {
		if (!d[i].npoints)
			continue;
		if ((double)d[i].curve_budget[d[i].npoints - 1] > p.xmax)
			p.xmax = (double)d[i].curve_budget[d[i].npoints - 1];
	}
	/* A budget a little past the unique set is shown; one far past it is named. */
	for (i = 0; i < n; i++)
		if (d[i].npoints && d[i].budget && (double)d[i].budget > p.xmax &&
		    (double)d[i].budget <= 1.5 * p.xmax)
			p.xmax = (double)d[i].budget;
	p.xmax = p.xmax > 0 ? p.xmax * 1.04 : 1;
	panel_frame(cr, &p, "What a pool of each budget would have served",
		    "budget (fill-until-full in first-seen order)", "served, % of matched bytes", true);
	for (i = 0; i < n; i++) {
		const struct dump *x = &d[i];

		if (!x->npoints)
			continue;
		set_color(cr, i);
		cairo_set_line_width(cr, 2);
		for (k = 0; k < x->npoints; k++) {
			double cx = px(&p, (double)x->curve_budget[k]);
			double cy = py(&p, curve_share(x, x->curve_served[k]));

			if (k == 0)
				cairo_move_to(cr, cx, cy);
			else
				cairo_line_to(cr, cx, cy);
		}
		cairo_stroke(cr);
		for (k = 0; k < x->npoints; k++) {
			cairo_arc(cr, px(&p, (double)x->curve_budget[k]),
				  py(&p, curve_share(x, x->curve_served[k])), 2.5, 0, 2 * M_PI);
			cairo_fill(cr);
		}
		if (x->budget && (double)x->budget <= p.xmax) {
			double bx = px(&p, (double)x->budget);
			double by = py(&p, curve_share(x, dump_whatif_served_at(x, x->budget)));

			cairo_set_dash(cr, dash, 2, 0);
			cairo_set_line_width(cr, 1.2);
			cairo_move_to(cr, bx, p.y0 + p.h);
			cairo_line_to(cr, bx, p.y0);
			cairo_stroke(cr);
			cairo_set_dash(cr, NULL, 0, 0);
			cairo_arc(cr, bx, by, 5, 0, 2 * M_PI);
			cairo_fill(cr);
			snprintf(label, sizeof(label), "budget %s", tool_format_bytes(x->budget, b1, sizeof(b1)));
			text_at(cr, bx + 4, p.y0 + p.h - 8 - 14 * (i % 4), 0, label);
		}
		snprintf(label, sizeof(label), "%s", esc(dump_label(x, name, sizeof(name))));
		if (x->budget && (double)x->budget > p.xmax)
			snprintf(label + strlen(label), sizeof(label) - strlen(label),
				 " (budget %s: past the unique set)",
				 tool_format_bytes(x->budget, b1, sizeof(b1)));
		legend(cr, &p, row++, i, false, label);
	}
}

/* The processes in T, by pid, in order of first appearance. */
static int telemetry_series(const struct telemetry *t, long long *pids)
{
	int i, k, n = 0;

	for (i = 0; i < t->n; i++) {
		for (k = 0; k < n && pids[k] != t->p[i].pid; k++)
			;
		if (k == n && n < MAX_SERIES)
			pids[n++] = t->p[i].pid;
	}
	return n;
}

/* Draws the telemetry panel at TOP: hit share per interval and pool fill, per process. */
static void draw_telemetry(cairo_t *cr, double top, const struct telemetry *t)
{
	static const double dash[] = { 6, 4 };
	struct panel p = { MARGIN_L, top + MARGIN_T, PLOT_W - MARGIN_L - MARGIN_R,
			   PANEL_H - MARGIN_T - MARGIN_B, 0 };
	long long pids[MAX_SERIES];
	double t0 = t->p[0].t, x;
	bool use_elapsed = false;
	char label[128];
	int s, i, nseries, row = 0;

	for (i = 0; i < t->n; i++) {
		if (t->p[i].elapsed_s > 0)
			use_elapsed = true;
		if (t->p[i].t < t0)
			t0 = t->p[i].t;
	}
	for (i = 0; i < t->n; i++) {
		x = use_elapsed ? t->p[i].elapsed_s : t->p[i].t - t0;
		if (x > p.xmax)
			p.xmax = x;
	}
	p.xmax = p.xmax > 0 ? p.xmax * 1.04 : 1;
	panel_frame(cr, &p, "Over time: hit share per interval, pool fill",
		    use_elapsed ? "seconds since the first CUDA call" : "seconds",
		    "% (hits of rows seen; pool bytes of budget)", false);
	nseries = telemetry_series(t, pids);
	for (s = 0; s < nseries; s++) {
		const struct telemetry_point *prev = NULL;
		bool started = false;

		/* Hit share of each interval: the rows seen since the line before. */
		set_color(cr, s);
		cairo_set_line_width(cr, 2);
		for (i = 0; i < t->n; i++) {
			const struct telemetry_point *q = &t->p[i];
			uint64_t seen, hits;

			if (q->pid != pids[s])
				continue;
			seen = prev && q->rows_seen >= prev->rows_seen ? q->rows_seen - prev->rows_seen : q->rows_seen;
			hits = prev && q->rows_hits >= prev->rows_hits ? q->rows_hits - prev->rows_hits : q->rows_hits;
			prev = q;
			if (!seen)
				continue;
			x = px(&p, use_elapsed ? q->elapsed_s : q->t - t0);
			if (!started)
				cairo_move_to(cr, x, py(&p, 100.0 * (double)hits / (double)seen));
			else
				cairo_line_to(cr, x, py(&p, 100.0 * (double)hits / (double)seen));
			started = true;
		}
		cairo_stroke(cr);
		/* Pool fill: bytes held against the budget. */
		started = false;
		cairo_set_dash(cr, dash, 2, 0);
		for (i = 0; i < t->n; i++) {
			const struct telemetry_point *q = &t->p[i];
			double fill;

			if (q->pid != pids[s] || !q->pool_budget)
				continue;
			fill = 100.0 * (double)q->pool_bytes / (double)q->pool_budget;
			x = px(&p, use_elapsed ? q->elapsed_s : q->t - t0);
			if (!started)
				cairo_move_to(cr, x, py(&p, fill > 100 ? 100 : fill));
			else
				cairo_line_to(cr, x, py(&p, fill > 100 ? 100 : fill));
			started = true;
		}
		cairo_stroke(cr);
		cairo_set_dash(cr, NULL, 0, 0);
		snprintf(label, sizeof(label), "pid %lld: hit share", pids[s]);
		legend(cr, &p, row++, s, false, label);
		snprintf(label, sizeof(label), "pid %lld: pool fill", pids[s]);
		legend(cr, &p, row++, s, true, label);
	}
}

int plot_write(const char *path, const struct dump *d, int n, const struct telemetry *t,
	       char *err, size_t err_size)
{
	bool svg, curves = false, times = t && t->n > 0;
	cairo_surface_t *surface;
	cairo_status_t st;
	cairo_t *cr;
	double height;
	size_t len = strlen(path);
	int i, ret = 0;

	if (plot_check_name(path, err, err_size) != 0)
		return -EINVAL;
	for (i = 0; i < n; i++)
		curves = curves || d[i].npoints > 1;
	if (!curves && !times) {
		snprintf(err, err_size,
			 "--plot %s: nothing to draw: no what-if curve in the dump%s (an older vrampool writes none) and no --telemetry file",
			 esc(path), n > 1 ? "s" : "");
		return -EINVAL;
	}
	svg = strcasecmp(path + len - 4, ".svg") == 0;
	height = PANEL_H * ((curves ? 1 : 0) + (times ? 1 : 0));
	if (svg)
		surface = cairo_svg_surface_create(path, PLOT_W, height);
	else
		surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, PLOT_W, (int)height);
	st = cairo_surface_status(surface);
	if (st != CAIRO_STATUS_SUCCESS) {
		snprintf(err, err_size, "--plot %s: %s", esc(path), cairo_status_to_string(st));
		cairo_surface_destroy(surface);
		return -EIO;
	}
	cr = cairo_create(surface);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	if (curves)
		draw_curves(cr, 0, d, n);
	if (times)
		draw_telemetry(cr, curves ? PANEL_H : 0, t);
	st = cairo_status(cr);
	cairo_destroy(cr);
	if (st == CAIRO_STATUS_SUCCESS && !svg)
		st = cairo_surface_write_to_png(surface, path);
	cairo_surface_finish(surface);
	if (st == CAIRO_STATUS_SUCCESS)
		st = cairo_surface_status(surface);
	if (st != CAIRO_STATUS_SUCCESS) {
		snprintf(err, err_size, "--plot %s: %s", esc(path), cairo_status_to_string(st));
		ret = -EIO;
	}
	cairo_surface_destroy(surface);
	/* Cairo's and fontconfig's caches, so that leak checkers see a clean exit. */
	cairo_debug_reset_static_data();
	FcFini();
	return ret;
}
