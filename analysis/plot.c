/*
 * plot.c: the pictures of plot.h, drawn through canvas.h (cairo for a PNG,
 * svg.c for an SVG). One or two panels stacked, each with its axes, ticks
 * (plot_ticks), legend and title.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "canvas.h"
#include "plot.h"
#include "vrampool.h"

#define PLOT_W 900
#define PANEL_H 460
#define MARGIN_L 90
#define MARGIN_R 30
#define MARGIN_T 56
#define MARGIN_B 60
#define MAX_SERIES 16
#define TICKS_TARGET 5		/* intervals an axis is cut into, about */
#define TICKS_LEAST 1e-3	/* the shortest axis, and the longest */
#define TICKS_LIMIT 1e15
#define SAME_PX 0.5		/* closer than this on the canvas: drawn on top of each other */
#define GROUP_NAMES 3		/* members named in a legend entry that is not ranks */

/* The drawing area of one panel, in canvas coordinates. */
struct panel {
	double x0, y0, w, h;	/* the plot area inside the margins */
	double xmax;		/* data value at the right edge (left is 0) */
	int rows;		/* legend rows at the top left, which budget marks stop below */
};

/* Colours (0xRRGGBB) and dash patterns of the series: series I gets colour I % 8 and dash I % 5. */
static const uint32_t palette[] = { 0x1f77b4, 0xd62728, 0x2ca02c, 0x9467bd,
				    0xff7f0e, 0x8c564b, 0xe377c2, 0x7f7f7f };
static const double dash_long[] = { 9, 4 }, dash_dot[] = { 2.5, 3 }, dash_mixed[] = { 9, 3, 2.5, 3 },
		    dash_longest[] = { 16, 4, 4, 4 };
static const struct { const double *dash; int n; } dashes[] = {
	{ NULL, 0 }, { dash_long, 2 }, { dash_dot, 2 }, { dash_mixed, 4 }, { dash_longest, 4 },
};
#define NCOLORS (sizeof(palette) / sizeof(palette[0]))
#define NDASHES (sizeof(dashes) / sizeof(dashes[0]))

static const struct svg_font font_title = { 15, SVG_START, 0x000000, 0 };
static const struct svg_font font_label = { 11, SVG_START, 0x000000, 0 };
static const struct svg_stroke stroke_grid = { 0xe0e0e0, 1, NULL, 0 };
static const struct svg_stroke stroke_axes = { 0x000000, 1, NULL, 0 };

/* The stroke of series I: its own colour and dash pattern, WIDTH wide. */
static struct svg_stroke series_stroke(int i, double width)
{
	struct svg_stroke k = { palette[(size_t)i % NCOLORS], width, dashes[(size_t)i % NDASHES].dash,
				dashes[(size_t)i % NDASHES].n };

	return k;
}

/* FONT_LABEL with anchor A and rotation R. */
static struct svg_font label_font(enum svg_anchor a, double r)
{
	struct svg_font f = font_label;

	f.anchor = a;
	f.rotate = r;
	return f;
}

void plot_ticks(struct plot_ticks *t, double max, enum plot_unit unit)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double scale = 1, raw, p10, norm, m, v;
	int k, u = 0, i, decimals;

	if (isnan(max))
		max = 1;
	max = max < TICKS_LEAST ? TICKS_LEAST : max > TICKS_LIMIT ? TICKS_LIMIT : max;
	if (unit == PLOT_BYTES) {
		if (max < 1)
			max = 1;
		while (u < 6 && max >= scale * 1024) {
			scale *= 1024;
			u++;
		}
	}
	/* The step in the axis's unit: m times 10^k, m one of 1, 2, 5 (rounded, as Heckbert's nice numbers). */
	raw = max / scale / TICKS_TARGET;
	k = (int)floor(log10(raw));
	p10 = pow(10, k);
	norm = raw / p10;
	m = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
	if (m == 10) {
		m = 1;
		k++;
	}
	if (unit == PLOT_BYTES && u == 0 && k < 0) {
		m = 1;		/* whole bytes only */
		k = 0;
	}
	decimals = k < 0 ? -k : 0;
	/* i * m * 10^k in one rounding: divided by a power of ten, not multiplied by its inverse. */
	t->step = (k < 0 ? m / pow(10, -k) : m * pow(10, k)) * scale;
	t->n = 0;
	for (i = 0; i < PLOT_TICKS_MAX; i++) {
		v = k < 0 ? i * m / pow(10, -k) : i * m * pow(10, k);
		if (v * scale > max * (1 + 1e-12))
			break;
		t->value[t->n] = v * scale;
		if (unit == PLOT_BYTES)
			snprintf(t->label[t->n], sizeof(t->label[0]), "%.*f %s", decimals, v, units[u]);
		else if (unit == PLOT_SECONDS)
			snprintf(t->label[t->n], sizeof(t->label[0]), "%.*f s", decimals, v);
		else
			snprintf(t->label[t->n], sizeof(t->label[0]), "%.*f%%", decimals, v);
		t->n++;
	}
}

int plot_check_name(const char *name, char *err, size_t err_size)
{
	size_t n = strlen(name);

	if (n > 4 && (strcasecmp(name + n - 4, ".png") == 0 || strcasecmp(name + n - 4, ".svg") == 0))
		return 0;
	snprintf(err, err_size, "--plot %s: the file name must end in .png or .svg", esc(name));
	return -EINVAL;
}

/* The panel whose top edge is at TOP on the canvas, XMAX at its right edge, no legend yet. */
static struct panel panel_at(double top, double xmax)
{
	struct panel p = { MARGIN_L, top + MARGIN_T, PLOT_W - MARGIN_L - MARGIN_R,
			   PANEL_H - MARGIN_T - MARGIN_B, xmax, 0 };

	return p;
}

/* Maps data X (0..xmax) and Y (0..100) to the canvas. */
static double px(const struct panel *p, double x)
{
	return p->x0 + (p->xmax > 0 ? x / p->xmax : 0) * p->w;
}

static double py(const struct panel *p, double y)
{
	return p->y0 + p->h - (y / 100.0) * p->h;
}

/* A straight line from (X1, Y1) to (X2, Y2) with K. */
static void line(struct canvas *c, double x1, double y1, double x2, double y2, const struct svg_stroke *k)
{
	double x[2] = { x1, x2 }, y[2] = { y1, y2 };

	canvas_polyline(c, x, y, 2, k);
}

/*
 * Draws the frame of a panel: title, grid, axes, the y ticks in percent and
 * the x ticks in XUNIT (bytes or seconds), and the axis labels.
 */
static void panel_frame(struct canvas *c, const struct panel *p, const char *title,
			const char *xlabel, const char *ylabel, enum plot_unit xunit)
{
	struct svg_font below = label_font(SVG_MIDDLE, 0), left = label_font(SVG_END, 0);
	struct svg_font side = label_font(SVG_MIDDLE, -90);
	struct plot_ticks tx, ty;
	int i;

	canvas_text(c, p->x0, p->y0 - 22, &font_title, title);
	plot_ticks(&tx, p->xmax, xunit);
	plot_ticks(&ty, 100, PLOT_PERCENT);
	for (i = 0; i < ty.n; i++) {
		line(c, p->x0, py(p, ty.value[i]), p->x0 + p->w, py(p, ty.value[i]), &stroke_grid);
		canvas_text(c, p->x0 - 8, py(p, ty.value[i]) + 4, &left, ty.label[i]);
	}
	for (i = 0; i < tx.n; i++) {
		line(c, px(p, tx.value[i]), p->y0, px(p, tx.value[i]), p->y0 + p->h, &stroke_grid);
		canvas_text(c, px(p, tx.value[i]), p->y0 + p->h + 16, &below, tx.label[i]);
	}
	canvas_frame(c, p->x0, p->y0, p->w, p->h, &stroke_axes);
	canvas_text(c, p->x0 + p->w / 2, p->y0 + p->h + 38, &below, xlabel);
	canvas_text(c, p->x0 - 52, p->y0 + p->h / 2, &side, ylabel);
}

/* Draws legend row K: a short line with K's stroke (a dot on it when DOT), then TEXT. */
static void legend(struct canvas *c, const struct panel *p, int k, const struct svg_stroke *s,
		   bool dot, const char *text)
{
	double x = p->x0 + 12, y = p->y0 + 18 + 16 * k;

	line(c, x, y - 4, x + 30, y - 4, s);
	if (dot)
		canvas_disc(c, x + 15, y - 4, 2.5, s->rgb);
	canvas_text(c, x + 36, y, &font_label, text);
}

/* The share of D's matched bytes that S is, in percent. */
static double curve_share(const struct dump *d, uint64_t s)
{
	uint64_t m = d->unique_bytes + d->repeat_bytes;

	return m ? 100.0 * (double)s / (double)m : 0.0;
}

/* The y of D's curve at budget X, on the canvas. */
static double curve_y(const struct panel *p, const struct dump *d, double x)
{
	return py(p, curve_share(d, dump_whatif_served_at(d, (uint64_t)x)));
}

/* Whether D has a curve to draw: a line, not the lone point (0, 0) of a run that saw no matched copy. */
static bool has_curve(const struct dump *d)
{
	return d->npoints > 1;
}

/*
 * Whether the curves of A and B would be drawn on top of each other in P:
 * they end within half a pixel, and at every point of either (both are
 * straight between their points) they are within half a pixel.
 */
static bool curves_coincide(const struct panel *p, const struct dump *a, const struct dump *b)
{
	const struct dump *pair[2] = { a, b };
	int s, k;

	if (fabs(px(p, (double)a->curve_budget[a->npoints - 1]) -
		 px(p, (double)b->curve_budget[b->npoints - 1])) >= SAME_PX)
		return false;
	for (s = 0; s < 2; s++)
		for (k = 0; k < pair[s]->npoints; k++) {
			double x = (double)pair[s]->curve_budget[k];

			if (fabs(curve_y(p, a, x) - curve_y(p, b, x)) >= SAME_PX)
				return false;
		}
	return true;
}

/* Compares two ranks, for qsort. */
static int rank_cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* RANK as a number, or -1 when it is not digits only (at most 18 of them: no overflow). */
static long long rank_number(const char *rank)
{
	size_t n = strspn(rank, "0123456789");

	return n > 0 && n <= 18 && rank[n] == '\0' ? strtoll(rank, NULL, 10) : -1;
}

/* What names the members of a legend entry: member I's rank ("" none), else its label. */
struct namer {
	const void *set;
	const char *(*rank)(const void *set, int i);
	const char *(*label)(const void *set, int i, char *buf, size_t size);
};

/*
 * Writes into BUF the name of the M members MEMBERS[i] of N's set: their
 * ranks as "rank 2" or "ranks 0-3, 5", then the labels of those without a
 * rank (escaped; the first few and how many more).
 */
static void group_name(const struct namer *n, const int *members, int m, char *buf, size_t size)
{
	long long *ranks = malloc(sizeof(*ranks) * (size_t)m);
	char name[256];
	size_t o = 0;
	int i, j, nr = 0, others = 0;

	buf[0] = '\0';
	for (i = 0; ranks && i < m; i++)
		if ((ranks[nr] = rank_number(n->rank(n->set, members[i]))) >= 0)
			nr++;
	if (nr) {
		qsort(ranks, (size_t)nr, sizeof(*ranks), rank_cmp);
		o += (size_t)snprintf(buf, size, "%s", nr > 1 && ranks[nr - 1] != ranks[0] ? "ranks " : "rank ");
		for (i = 0; i < nr; i = j + 1) {
			for (j = i; j + 1 < nr && ranks[j + 1] <= ranks[j] + 1; j++)
				;
			o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "%s%lld", i ? ", " : "", ranks[i]);
			if (ranks[j] != ranks[i])
				o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "-%lld", ranks[j]);
		}
	}
	for (i = 0; i < m; i++) {
		if (ranks && rank_number(n->rank(n->set, members[i])) >= 0)
			continue;
		if (others++ < GROUP_NAMES)
			o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "%s%s", o ? ", " : "",
					      esc(n->label(n->set, members[i], name, sizeof(name))));
	}
	if (others > GROUP_NAMES)
		snprintf(buf + o, o < size ? size - o : 0, " and %d more", others - GROUP_NAMES);
	free(ranks);
}

/* The rank and the label of dump I of the array SET, for struct namer. */
static const char *dump_rank(const void *set, int i)
{
	return ((const struct dump *)set)[i].rank;
}

static const char *dump_name(const void *set, int i, char *buf, size_t size)
{
	return dump_label(&((const struct dump *)set)[i], buf, size);
}

/* The right edge of the what-if panel: the longest curve, and a budget a little past it. */
static double curves_xmax(const struct dump *d, int n)
{
	double xmax = 0;
	int i;

	for (i = 0; i < n; i++)
		if (has_curve(&d[i]) && (double)d[i].curve_budget[d[i].npoints - 1] > xmax)
			xmax = (double)d[i].curve_budget[d[i].npoints - 1];
	/* A budget a little past the unique set is shown; one far past it is named. */
	for (i = 0; i < n; i++)
		if (has_curve(&d[i]) && d[i].budget && (double)d[i].budget > xmax &&
		    (double)d[i].budget <= 1.5 * xmax)
			xmax = (double)d[i].budget;
	return xmax > 0 ? xmax * 1.04 : 1;
}

/*
 * Draws the budget marks of the M dumps D[MEMBERS[i]] in group G's colour,
 * one for each place (marks within half a pixel are one), and appends to
 * NOTE what the legend says of budgets past the panel. *MARKS counts the
 * marks drawn, to stagger their labels.
 */
static void budget_marks(struct canvas *c, const struct panel *p, const struct dump *d, const int *members,
			 int m, int g, int *marks, char *note, size_t size)
{
	static const double dash[] = { 4, 4 };
	struct svg_stroke k = { palette[(size_t)g % NCOLORS], 1.2, dash, 2 };
	uint64_t lo = 0, hi = 0;
	char label[64], b1[32], b2[32];
	int i, j;

	for (i = 0; i < m; i++) {
		const struct dump *x = &d[members[i]];
		double bx = px(p, (double)x->budget);

		if (!x->budget)
			continue;
		if ((double)x->budget > p->xmax) {
			lo = !lo || x->budget < lo ? x->budget : lo;
			hi = x->budget > hi ? x->budget : hi;
			continue;
		}
		for (j = 0; j < i && !(d[members[j]].budget && (double)d[members[j]].budget <= p->xmax &&
				       fabs(px(p, (double)d[members[j]].budget) - bx) < SAME_PX); j++)
			;
		if (j < i)
			continue;
		line(c, bx, p->y0 + p->h, bx, p->y0 + (p->rows ? 10 + 16 * p->rows : 0), &k);
		canvas_disc(c, bx, curve_y(p, x, (double)x->budget), 5, k.rgb);
		snprintf(label, sizeof(label), "budget %s", tool_format_bytes(x->budget, b1, sizeof(b1)));
		canvas_text(c, bx + 4, p->y0 + p->h - 8 - 14 * ((*marks)++ % 4), &font_label, label);
	}
	if (lo == hi && lo)
		snprintf(note, size, " (budget %s: past the unique set)", tool_format_bytes(lo, b1, sizeof(b1)));
	else if (lo)
		snprintf(note, size, " (budgets %s to %s: past the unique set)",
			 tool_format_bytes(lo, b1, sizeof(b1)), tool_format_bytes(hi, b2, sizeof(b2)));
}

/* Draws the what-if panel at TOP for the dumps that have a curve: one line per group of coinciding curves. */
static int draw_curves(struct canvas *c, double top, const struct dump *d, int n)
{
	struct panel p = panel_at(top, curves_xmax(d, n));
	int *group = malloc(sizeof(*group) * (size_t)n), *members = malloc(sizeof(*members) * (size_t)n);
	double x[DUMP_CURVE_MAX], y[DUMP_CURVE_MAX];
	char label[512], note[128];
	struct namer namer = { d, dump_rank, dump_name };
	int i, j, k, g, m, ngroups = 0, marks = 0;
	struct svg_stroke s;
	bool same_budget;

	if (!group || !members) {
		free(group);
		free(members);
		return -ENOMEM;
	}
	panel_frame(c, &p, "What a pool of each budget would have served",
		    "budget (fill-until-full in first-seen order)", "served, % of matched bytes", PLOT_BYTES);
	/* group[i]: the first dump whose curve D[i]'s coincides with (-1: none to draw). */
	for (i = 0; i < n; i++) {
		group[i] = -1;
		if (!has_curve(&d[i]))
			continue;
		for (j = 0; j < i && !(group[j] == j && curves_coincide(&p, &d[j], &d[i])); j++)
			;
		group[i] = j;
		p.rows += j == i;
	}
	for (i = 0; i < n; i++) {
		if (group[i] != i)
			continue;
		g = ngroups++;
		same_budget = true;
		for (m = 0, j = i; j < n; j++)
			if (group[j] == i) {
				members[m++] = j;
				same_budget = same_budget && d[j].budget == d[i].budget;
			}
		s = series_stroke(g, 2);
		for (k = 0; k < d[i].npoints; k++) {
			x[k] = px(&p, (double)d[i].curve_budget[k]);
			y[k] = py(&p, curve_share(&d[i], d[i].curve_served[k]));
		}
		canvas_polyline(c, x, y, d[i].npoints, &s);
		for (k = 0; k < d[i].npoints; k++)
			canvas_disc(c, x[k], y[k], 2.5, s.rgb);
		note[0] = '\0';
		budget_marks(c, &p, d, members, m, g, &marks, note, sizeof(note));
		group_name(&namer, members, m, label, sizeof(label));
		snprintf(label + strlen(label), sizeof(label) - strlen(label), "%s%s",
			 m == 1 ? "" : same_budget ? " (identical)" : " (identical curves)", note);
		legend(c, &p, g, &s, true, label);
	}
	free(group);
	free(members);
	return 0;
}

/* The processes in T, by pid, in order of first appearance; FIRST[k]: a line of each. */
static int telemetry_series(const struct telemetry *t, long long *pids, int *first)
{
	int i, k, n = 0;

	for (i = 0; i < t->n; i++) {
		for (k = 0; k < n && pids[k] != t->p[i].pid; k++)
			;
		if (k == n && n < MAX_SERIES) {
			first[n] = i;
			pids[n++] = t->p[i].pid;
		}
	}
	return n;
}

/* The x of telemetry line Q: seconds since the first CUDA call, or since the first line's t. */
static double telemetry_x(const struct telemetry_point *q, bool use_elapsed, double t0)
{
	return use_elapsed ? q->elapsed_s : q->t - t0;
}

/*
 * Collects into X and Y the points of process PID: the hit share of each
 * interval (the rows seen since its line before) or, with FILL, the pool's
 * bytes against its budget. Returns how many.
 */
static int telemetry_points(const struct panel *p, const struct telemetry *t, long long pid, bool fill,
			    bool use_elapsed, double t0, double *x, double *y)
{
	const struct telemetry_point *prev = NULL;
	uint64_t seen, hits;
	double v;
	int i, n = 0;

	for (i = 0; i < t->n; i++) {
		const struct telemetry_point *q = &t->p[i];

		if (q->pid != pid)
			continue;
		if (fill) {
			if (!q->pool_budget)
				continue;
			v = 100.0 * (double)q->pool_bytes / (double)q->pool_budget;
		} else {
			seen = prev && q->rows_seen >= prev->rows_seen ? q->rows_seen - prev->rows_seen : q->rows_seen;
			hits = prev && q->rows_hits >= prev->rows_hits ? q->rows_hits - prev->rows_hits : q->rows_hits;
			prev = q;
			if (!seen)
				continue;
			v = 100.0 * (double)hits / (double)seen;
		}
		x[n] = px(p, telemetry_x(q, use_elapsed, t0));
		y[n++] = py(p, v > 100 ? 100 : v);
	}
	return n;
}

/* A process of the telemetry panel: its line of hit shares and its line of pool fill, as offsets into X and Y. */
struct series {
	int hit, nhit, fill, nfill;
};

/* Whether the N points of X and Y from A and from B are within half a pixel of each other. */
static bool lines_coincide(const double *x, const double *y, int a, int b, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (fabs(x[a + i] - x[b + i]) >= SAME_PX || fabs(y[a + i] - y[b + i]) >= SAME_PX)
			return false;
	return true;
}

/* Whether the two lines of processes A and B would be drawn on top of each other. */
static bool series_coincide(const double *x, const double *y, const struct series *a, const struct series *b)
{
	return a->nhit == b->nhit && a->nfill == b->nfill && lines_coincide(x, y, a->hit, b->hit, a->nhit) &&
	       lines_coincide(x, y, a->fill, b->fill, a->nfill);
}

/* The processes of the telemetry panel, for struct namer: a line of each names it. */
struct telemetry_names {
	const struct telemetry *t;
	const int *first;
};

static const char *telemetry_rank(const void *set, int i)
{
	const struct telemetry_names *n = set;

	return n->t->p[n->first[i]].rank;
}

static const char *telemetry_name(const void *set, int i, char *buf, size_t size)
{
	const struct telemetry_names *n = set;

	snprintf(buf, size, "pid %lld", n->t->p[n->first[i]].pid);
	return buf;
}

/*
 * Draws the telemetry panel at TOP: hit share per interval and pool fill,
 * per process; processes whose lines coincide are drawn once.
 */
static int draw_telemetry(struct canvas *c, double top, const struct telemetry *t)
{
	static const double dash[] = { 6, 4 };
	struct panel p = panel_at(top, 0);
	double *x = malloc(sizeof(*x) * 2 * (size_t)t->n), *y = malloc(sizeof(*y) * 2 * (size_t)t->n);
	double t0 = t->p[0].t;
	long long pids[MAX_SERIES];
	int first[MAX_SERIES], group[MAX_SERIES], members[MAX_SERIES];
	int s, i, j, m, o, nseries, ngroups = 0;
	struct telemetry_names names = { t, first };
	struct namer namer = { &names, telemetry_rank, telemetry_name };
	struct series ser[MAX_SERIES];
	bool use_elapsed = false;
	char label[640], who[512];

	if (!x || !y) {
		free(x);
		free(y);
		return -ENOMEM;
	}
	for (i = 0; i < t->n; i++) {
		if (t->p[i].elapsed_s > 0)
			use_elapsed = true;
		if (t->p[i].t < t0)
			t0 = t->p[i].t;
	}
	for (i = 0; i < t->n; i++)
		if (telemetry_x(&t->p[i], use_elapsed, t0) > p.xmax)
			p.xmax = telemetry_x(&t->p[i], use_elapsed, t0);
	p.xmax = p.xmax > 0 ? p.xmax * 1.04 : 1;
	panel_frame(c, &p, "Over time: hit share per interval, pool fill",
		    use_elapsed ? "seconds since the first CUDA call" : "seconds",
		    "% (hits of rows seen; pool bytes of budget)", PLOT_SECONDS);
	nseries = telemetry_series(t, pids, first);
	for (s = 0, o = 0; s < nseries; s++) {
		ser[s].hit = o;
		o += ser[s].nhit = telemetry_points(&p, t, pids[s], false, use_elapsed, t0, x + o, y + o);
		ser[s].fill = o;
		o += ser[s].nfill = telemetry_points(&p, t, pids[s], true, use_elapsed, t0, x + o, y + o);
		for (j = 0; j < s && !(group[j] == j && series_coincide(x, y, &ser[j], &ser[s])); j++)
			;
		group[s] = j;
	}
	for (s = 0; s < nseries; s++) {
		struct svg_stroke hit = { palette[(size_t)ngroups % NCOLORS], 2, NULL, 0 };
		struct svg_stroke fill = { hit.rgb, 2, dash, 2 };

		if (group[s] != s)
			continue;
		for (m = 0, j = s; j < nseries; j++)
			if (group[j] == s)
				members[m++] = j;
		canvas_polyline(c, x + ser[s].hit, y + ser[s].hit, ser[s].nhit, &hit);
		canvas_polyline(c, x + ser[s].fill, y + ser[s].fill, ser[s].nfill, &fill);
		group_name(&namer, members, m, who, sizeof(who));
		snprintf(label, sizeof(label), "%s%s: hit share", who, m > 1 ? " (identical)" : "");
		legend(c, &p, 2 * ngroups, &hit, false, label);
		snprintf(label, sizeof(label), "%s%s: pool fill", who, m > 1 ? " (identical)" : "");
		legend(c, &p, 2 * ngroups++ + 1, &fill, false, label);
	}
	free(x);
	free(y);
	return 0;
}

/* Why D has no curve to draw: the words inside "no what-if curve (...)". */
static const char *no_curve_reason(const struct dump *d)
{
	if (dump_is_off(d))
		return "the run was made with the pool off, which keeps none: run it with the pool on or dry to get one";
	if (!d->has_whatif)
		return "an older vrampool writes none";
	if (!d->matched_calls)
		return "no copy matched a layout, and only matched copies make one";
	return "the dump's curve is empty";
}

/* Writes into ERR why there is nothing to draw: each distinct reason of the N dumps, once. */
static void nothing_to_draw(const char *path, const struct dump *d, int n, const struct telemetry *t,
			    char *err, size_t err_size)
{
	char why[512];
	size_t o = 0;
	int i, j;

	why[0] = '\0';
	for (i = 0; i < n; i++) {
		for (j = 0; j < i && no_curve_reason(&d[j]) != no_curve_reason(&d[i]); j++)
			;
		if (j == i)
			o += (size_t)snprintf(why + o, o < sizeof(why) ? sizeof(why) - o : 0, "%s%s",
					      i ? "; " : "", no_curve_reason(&d[i]));
	}
	snprintf(err, err_size, "--plot %s: nothing to draw: no what-if curve in the dump%s%s%s%s and %s",
		 esc(path), n > 1 ? "s" : "", o ? " (" : "", why, o ? ")" : "",
		 t ? "no line in the --telemetry file" : "no --telemetry file");
}

int plot_write(const char *path, const struct dump *d, int n, const struct telemetry *t,
	       char *err, size_t err_size)
{
	bool curves = false, times = t && t->n > 0;
	struct canvas c;
	char why[256];
	int i, ret;

	if (plot_check_name(path, err, err_size) != 0)
		return -EINVAL;
	for (i = 0; i < n; i++)
		curves = curves || has_curve(&d[i]);
	if (!curves && !times) {
		nothing_to_draw(path, d, n, t, err, err_size);
		return -EINVAL;
	}
	ret = canvas_open(&c, path, PLOT_W, PANEL_H * ((curves ? 1 : 0) + (times ? 1 : 0)), why, sizeof(why));
	if (ret) {
		snprintf(err, err_size, "--plot %s: %s", esc(path), why);
		return ret;
	}
	ret = curves ? draw_curves(&c, 0, d, n) : 0;
	if (!ret && times)
		ret = draw_telemetry(&c, curves ? PANEL_H : 0, t);
	i = canvas_close(&c, why, sizeof(why));
	if (ret)
		snprintf(err, err_size, "--plot %s: %s", esc(path), strerror(-ret));
	else if (i)
		snprintf(err, err_size, "--plot %s: %s", esc(path), why);
	return ret ? ret : i;
}
