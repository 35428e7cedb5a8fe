/*
 * test_plot.c: CUnit suite of the plots, linked directly: plot.c's tick
 * chooser (1-2-5 steps, labels exact and distinct, on every axis),
 * svg.c's writer (escaping, errors), and plot_write's SVG (coinciding
 * curves drawn once and named so, distinct styles, the reason an off run
 * has nothing to draw). That the SVG is well-formed XML is checked with
 * python3 by tests/e2e/plot.sh.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit/cunit_main.h"
#include "dump.h"
#include "plot.h"
#include "svg.h"

static char tmpdir[256];

/* The files the tests may leave in the suite's directory. */
static const char *const leftovers[] = { "doc.svg", "c.svg", "b.svg", "o.svg" };

static int suite_init(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/vrampool-test-plot.XXXXXX", base ? base : "/tmp");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static const char *tmp_path(const char *name);

static int suite_clean(void)
{
	size_t i;

	for (i = 0; i < sizeof(leftovers) / sizeof(leftovers[0]); i++)
		unlink(tmp_path(leftovers[i]));
	return rmdir(tmpdir);
}

/* The path of NAME in the suite's directory (static). */
static const char *tmp_path(const char *name)
{
	static char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	return path;
}

/* The whole of the file at PATH, NUL-terminated (the caller frees), or NULL. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) != NULL) {
		buf[fread(buf, 1, (size_t)n, f)] = '\0';
	}
	fclose(f);
	return buf;
}

/* How many times NEEDLE occurs in HAY. */
static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (; (hay = strstr(hay, needle)) != NULL; hay += strlen(needle))
		n++;
	return n;
}

/* The value LABEL says, in bytes, seconds or percent (its unit read back), or NAN. */
static double label_value(const char *label)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	char *end;
	double v = strtod(label, &end), scale = 1;
	int i;

	if (end == label)
		return NAN;
	if (strcmp(end, "%") == 0 || strcmp(end, " s") == 0)
		return v;
	for (i = 0; i < 7; i++, scale *= 1024)
		if (end[0] == ' ' && strcmp(end + 1, units[i]) == 0)
			return v * scale;
	return NAN;
}

/* Whether STEP is 1, 2 or 5 times a power of ten, times SCALE. */
static bool one_two_five(double step, double scale)
{
	double m = step / scale / pow(10, floor(log10(step / scale) + 1e-9));

	return fabs(m - 1) < 1e-9 || fabs(m - 2) < 1e-9 || fabs(m - 5) < 1e-9;
}

/* The binary unit a byte axis up to MAX is labelled in. */
static double byte_scale(double max)
{
	double s = 1;

	while (s < 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024 && max >= s * 1024)
		s *= 1024;
	return s;
}

/* Checks every rule of an axis from 0 to MAX in UNIT; returns how many failed. */
static int check_axis(double max, enum plot_unit unit)
{
	struct plot_ticks t;
	int i, j, bad = 0;

	plot_ticks(&t, max, unit);
	if (unit == PLOT_BYTES && max < 1)
		max = 1;	/* whole bytes only */
	bad += t.n < 2 || t.n > PLOT_TICKS_MAX;
	bad += !one_two_five(t.step, unit == PLOT_BYTES ? byte_scale(max) : 1);
	bad += t.value[t.n - 1] > max * (1 + 1e-9);
	bad += t.value[t.n - 1] + t.step <= max;	/* the ticks reach the end of the axis */
	for (i = 0; i < t.n; i++) {
		bad += fabs(t.value[i] - i * t.step) > 1e-9 * t.step * (i + 1);
		bad += fabs(label_value(t.label[i]) - t.value[i]) > 1e-9 * (t.value[i] + 1) ||
		       isnan(label_value(t.label[i]));
		for (j = 0; j < i; j++)
			bad += strcmp(t.label[i], t.label[j]) == 0;
	}
	if (bad)
		printf("\naxis up to %g (unit %d): %d ticks, step %g, %s ... %s\n", max, (int)unit, t.n,
		       t.step, t.label[0], t.label[t.n - 1]);
	return bad;
}

static void test_ticks_seconds_round(void)
{
	static const char *const want[] = { "0.0 s", "0.5 s", "1.0 s", "1.5 s", "2.0 s", "2.5 s", "3.0 s" };
	struct plot_ticks t;
	int i;

	/* Today's axis of 3.3 s read 0 s, 1 s, 2 s, 2 s, 3 s at 0.8 s steps. */
	plot_ticks(&t, 3.3, PLOT_SECONDS);
	CU_ASSERT_EQUAL_FATAL(t.n, 7);
	CU_ASSERT_DOUBLE_EQUAL(t.step, 0.5, 1e-12);
	for (i = 0; i < 7; i++)
		CU_ASSERT_STRING_EQUAL(t.label[i], want[i]);
}

static void test_ticks_bytes_round(void)
{
	struct plot_ticks t;

	plot_ticks(&t, 6144000 * 1.04, PLOT_BYTES);
	CU_ASSERT_EQUAL(t.n, 7);
	CU_ASSERT_STRING_EQUAL(t.label[1], "1 MiB");
	CU_ASSERT_STRING_EQUAL(t.label[6], "6 MiB");
	CU_ASSERT_DOUBLE_EQUAL(t.value[6], 6.0 * 1024 * 1024, 1e-6);
	plot_ticks(&t, 1500 * 1024.0, PLOT_BYTES);
	CU_ASSERT_STRING_EQUAL(t.label[1], "0.2 MiB");
	CU_ASSERT_STRING_EQUAL(t.label[t.n - 1], "1.4 MiB");
	plot_ticks(&t, 3, PLOT_BYTES);
	CU_ASSERT_EQUAL(t.n, 4);
	CU_ASSERT_STRING_EQUAL(t.label[3], "3 B");
	plot_ticks(&t, 100, PLOT_PERCENT);
	CU_ASSERT_EQUAL(t.n, 6);
	CU_ASSERT_STRING_EQUAL(t.label[1], "20%");
	CU_ASSERT_STRING_EQUAL(t.label[5], "100%");
}

static void test_ticks_every_axis(void)
{
	double max;
	int bad = 0;

	for (max = 1e-3; max < 1e14; max *= 1.0137) {
		bad += check_axis(max, PLOT_SECONDS);
		bad += check_axis(max, PLOT_PERCENT);
		bad += check_axis(max, PLOT_BYTES);
	}
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_ticks_odd_max(void)
{
	static const double odd[] = { 0, -5, NAN, INFINITY, -INFINITY, 1e300, 0.25, 1e-300 };
	struct plot_ticks t;
	size_t i;

	for (i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		plot_ticks(&t, odd[i], PLOT_BYTES);
		CU_ASSERT(t.n >= 2 && t.n <= PLOT_TICKS_MAX);
		plot_ticks(&t, odd[i], PLOT_SECONDS);
		CU_ASSERT(t.n >= 2 && t.n <= PLOT_TICKS_MAX);
		CU_ASSERT(strlen(t.label[t.n - 1]) < sizeof(t.label[0]) - 1);
	}
	plot_ticks(&t, 0.25, PLOT_BYTES);	/* whole bytes only */
	CU_ASSERT_STRING_EQUAL(t.label[1], "1 B");
	plot_ticks(&t, 1e-300, PLOT_SECONDS);	/* a millisecond at least */
	CU_ASSERT_STRING_EQUAL(t.label[1], "0.0002 s");
}

#define FFFD "\xef\xbf\xbd"	/* U+FFFD REPLACEMENT CHARACTER */

static void test_svg_escape(void)
{
	static const struct { const char *in, *want; } cases[] = {
		{ "a&b<c>\"'", "a&amp;b&lt;c&gt;&quot;&apos;" },
		{ "tab\tnl\ncr\r", "tab\tnl\ncr\r" },
		{ "\x01\x1b\x7f", FFFD FFFD FFFD },			/* C0, ESC, DEL */
		{ "\xc2\x85", FFFD FFFD },				/* C1 (NEL) */
		{ "\xff\xc0\xaf", FFFD FFFD FFFD },			/* not UTF-8; overlong '/' */
		{ "\xed\xa0\x80", FFFD FFFD FFFD },			/* a surrogate */
		{ "\xef\xbf\xbe", FFFD FFFD FFFD },			/* U+FFFE */
		{ "\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD },		/* past U+10FFFF */
		{ "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" },
		{ "x\xe2\x82", "x" FFFD FFFD },			/* cut short */
	};
	char out[256], small[7];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CU_ASSERT_EQUAL(svg_escape(cases[i].in, out, sizeof(out)), strlen(cases[i].want));
		CU_ASSERT_STRING_EQUAL(out, cases[i].want);
	}
	/* Cut whole: no half entity, no half character. */
	CU_ASSERT_EQUAL(svg_escape("a&b", small, sizeof(small)), 7);
	CU_ASSERT_STRING_EQUAL(small, "a&amp;");
	CU_ASSERT_EQUAL(svg_escape("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", small, sizeof(small)), 8);
	CU_ASSERT_STRING_EQUAL(small, "\xc3\xa9\xc3\xa9\xc3\xa9");
}

static void test_svg_document(void)
{
	static const double dash[] = { 5, 3 };
	struct svg_stroke k = { 0x1f77b4, 2, dash, 2 };
	struct svg_font f = { 11, SVG_END, 0, -90 };
	double x[] = { 0, 10, NAN }, y[] = { 5, 1e300, 2 };
	struct svg s;
	char *doc;

	CU_ASSERT_EQUAL_FATAL(svg_begin(&s, tmp_path("doc.svg"), 100, 50, "sans-serif"), 0);
	svg_polyline(&s, x, y, 3, &k);
	svg_text(&s, 10, 20, &f, "rank <0> & \"1\"");
	CU_ASSERT_EQUAL(svg_end(&s), 0);
	doc = slurp(tmp_path("doc.svg"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	CU_ASSERT(strncmp(doc, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"", 76) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, ">rank &lt;0&gt; &amp; &quot;1&quot;</text>\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, "text-anchor=\"end\" transform=\"rotate(-90.00 10.00 20.00)\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, "stroke=\"#1f77b4\" stroke-width=\"2.00\" stroke-dasharray=\"5.00,3.00\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, "points=\"0.00,5.00 10.00,1000000.00 0.00,2.00\""));
	CU_ASSERT_EQUAL(count(doc, "<svg"), 1);
	CU_ASSERT(strlen(doc) > 7 && strcmp(doc + strlen(doc) - 7, "</svg>\n") == 0);
	free(doc);
}

static void test_svg_errors(void)
{
	struct svg s;
	char name[PATH_MAX + 64];
	int i;

	snprintf(name, sizeof(name), "%s/nope/a.svg", tmpdir);
	CU_ASSERT_EQUAL(svg_begin(&s, name, 10, 10, "serif"), -ENOENT);
	if (access("/dev/full", W_OK) != 0)
		return;
	CU_ASSERT_EQUAL_FATAL(svg_begin(&s, "/dev/full", 10, 10, "serif"), 0);
	for (i = 0; i < 2000; i++)
		svg_disc(&s, i, i, 1, 0);
	CU_ASSERT_EQUAL(svg_end(&s), -ENOSPC);
}

/* Fills D as a dump of rank RANK with a straight curve of N points up to U unique bytes, served S of 100. */
static void fake_dump(struct dump *d, const char *rank, uint64_t u, int s, uint64_t budget)
{
	int k;

	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "r%s.json", rank);
	snprintf(d->rank, sizeof(d->rank), "%s", rank);
	snprintf(d->mode, sizeof(d->mode), "on");
	d->enabled = true;
	d->pid = 100;
	d->has_whatif = true;
	d->matched_calls = 10;
	d->unique_bytes = u;
	d->repeat_bytes = 3 * u;
	d->budget = budget;
	d->npoints = 17;
	for (k = 0; k < d->npoints; k++) {
		d->curve_budget[k] = u * (uint64_t)k / 16;
		d->curve_served[k] = 4 * u * (uint64_t)s / 100 * (uint64_t)k / 16;
	}
}

static void test_plot_coinciding_curves_once(void)
{
	struct dump d[6];
	char err[512], *doc;

	fake_dump(&d[0], "0", 6144000, 75, 1ULL << 30);
	fake_dump(&d[1], "3", 6144000, 75, 1ULL << 30);
	fake_dump(&d[2], "2", 6144000, 75, 1ULL << 30);
	fake_dump(&d[3], "1", 6144000, 75, 1ULL << 30);
	fake_dump(&d[4], "4", 6144000, 60, 1ULL << 30);
	fake_dump(&d[5], "7", 6144000, 75, 1ULL << 30);
	CU_ASSERT_EQUAL_FATAL(plot_write(tmp_path("c.svg"), d, 6, NULL, err, sizeof(err)), 0);
	doc = slurp(tmp_path("c.svg"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	/* Two curves drawn (width 2), not six; the legend names the ranks of each. */
	CU_ASSERT_EQUAL(count(doc, "stroke-width=\"2.00\""), 2 + 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, ">ranks 0-3, 7 (identical) (budget 1.0 GiB: past the unique set)</text>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, ">rank 4 (budget 1.0 GiB: past the unique set)</text>"));
	/* Distinct colour and dash pattern: the second curve is red and dashed, the first blue and solid. */
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, "stroke=\"#1f77b4\" stroke-width=\"2.00\" points="));
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, "stroke=\"#d62728\" stroke-width=\"2.00\" stroke-dasharray="));
	free(doc);
}

static void test_plot_budgets_differ(void)
{
	struct dump d[2];
	char err[512], *doc;

	fake_dump(&d[0], "0", 6144000, 75, 1ULL << 20);
	fake_dump(&d[1], "1", 6144000, 75, 2ULL << 20);
	CU_ASSERT_EQUAL_FATAL(plot_write(tmp_path("b.svg"), d, 2, NULL, err, sizeof(err)), 0);
	doc = slurp(tmp_path("b.svg"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, ">ranks 0-1 (identical curves)</text>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, ">budget 1.0 MiB</text>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, ">budget 2.0 MiB</text>"));
	free(doc);
}

static void test_plot_odd_ranks_named_as_written(void)
{
	static const char *const rank[] = { "10", "+3", "99999999999999999999", "a<b", "9" };
	struct dump d[5];
	char err[512], *doc;
	int i;

	for (i = 0; i < 5; i++)
		fake_dump(&d[i], rank[i], 6144000, 75, 0);
	CU_ASSERT_EQUAL_FATAL(plot_write(tmp_path("c.svg"), d, 5, NULL, err, sizeof(err)), 0);
	doc = slurp(tmp_path("c.svg"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	CU_ASSERT_PTR_NOT_NULL(strstr(doc, ">ranks 9-10, rank +3, rank 99999999999999999999, rank a&lt;b (identical)</text>"));
	free(doc);
}

static void test_plot_off_run_reason(void)
{
	struct dump d[2];
	char err[512];

	fake_dump(&d[0], "0", 0, 0, 0);
	snprintf(d[0].mode, sizeof(d[0].mode), "off");
	d[0].enabled = false;
	d[0].matched_calls = 0;
	d[0].npoints = 1;	/* an off run's curve: [[0, 0]] */
	CU_ASSERT_EQUAL(plot_write(tmp_path("o.svg"), d, 1, NULL, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "nothing to draw: no what-if curve in the dump (the run was made "
					   "with the pool off, which keeps none: run it with the pool on or dry"));
	CU_ASSERT_PTR_NULL(strstr(err, "older"));
	CU_ASSERT_PTR_NULL(strchr(err, '\n'));
	/* An old dump has none for its own reason; each reason is said once. */
	d[1] = d[0];
	d[1].has_whatif = false;
	snprintf(d[1].mode, sizeof(d[1].mode), "on");
	d[1].enabled = true;
	CU_ASSERT_EQUAL(plot_write(tmp_path("o.svg"), d, 2, NULL, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "dry to get one; an older vrampool writes none) and no --telemetry file"));
	CU_ASSERT_EQUAL(access(tmp_path("o.svg"), F_OK), -1);
}

static const CU_TestInfo tests[] = {
	{ "an axis of 3.3 s is ticked every 0.5 s, each label distinct", test_ticks_seconds_round },
	{ "byte and percent axes are ticked at round values in one unit", test_ticks_bytes_round },
	{ "every axis from 1 ms to 1e14 has 1-2-5 steps, exact and distinct labels to its end",
	  test_ticks_every_axis },
	{ "an axis of no length, a negative, infinite or huge one still gets ticks", test_ticks_odd_max },
	{ "SVG text is escaped, and what XML forbids is replaced", test_svg_escape },
	{ "an SVG document has its text as text, and wild numbers clamped", test_svg_document },
	{ "an SVG that cannot be written is an error", test_svg_errors },
	{ "coinciding curves are drawn once, named as one legend entry", test_plot_coinciding_curves_once },
	{ "coinciding curves with different budgets say so and mark each budget", test_plot_budgets_differ },
	{ "ranks that are not whole numbers of at most 18 digits are named as written",
	  test_plot_odd_ranks_named_as_written },
	{ "an off run has nothing to draw because the pool was off", test_plot_off_run_reason },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "the vrampool command's plots",
	.init = suite_init,
	.clean = suite_clean,
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
