/*
 * fuzz_dump.c: a stats dump read back and printed (analysis/dump.c and
 * load.c, report.c's tables, text.c's escaping), without plot rendering:
 * the two plot entry points report.c links are stubs here.
 *
 * The input is the file's content. Promises checked (dump.h, vrampool.h):
 * dump_load returns 0, or a negative errno with a one-line message; every
 * string of a loaded dump is terminated; at most DUMP_CURVE_MAX curve
 * points and DUMP_SIZES_MAX sizes, the sizes most bytes first; the
 * what-if curve read at any budget lies between the served figures of the
 * points around it; the table, the A/B comparison and the columns print
 * (to /dev/null) without a sanitizer report; the likely reason and the
 * label are terminated in any buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "fuzz.h"
#include "plot.h"
#include "vrampool.h"

int plot_check_name(const char *name, char *err, size_t err_size)
{
	(void)name;
	snprintf(err, err_size, "no plots in the fuzz target");
	return -EINVAL;
}

int plot_write(const char *path, const struct dump *d, int n, const struct telemetry *t,
	       char *err, size_t err_size)
{
	(void)path, (void)d, (void)n, (void)t;
	snprintf(err, err_size, "no plots in the fuzz target");
	return -EINVAL;
}

static void fuzz_check_strings(const struct dump *d, const uint8_t *data, size_t size)
{
	if (!fuzz_terminated(d->path, sizeof(d->path)) || !fuzz_terminated(d->rank, sizeof(d->rank)) ||
	    !fuzz_terminated(d->host, sizeof(d->host)) || !fuzz_terminated(d->mode, sizeof(d->mode)) ||
	    !fuzz_terminated(d->ended_by, sizeof(d->ended_by)) ||
	    !fuzz_terminated(d->layout, sizeof(d->layout)) ||
	    !fuzz_terminated(d->layout_source, sizeof(d->layout_source)) ||
	    !fuzz_terminated(d->reason, sizeof(d->reason)) ||
	    !fuzz_terminated(d->evidence, sizeof(d->evidence)) ||
	    !fuzz_terminated(d->state, sizeof(d->state)) || !fuzz_terminated(d->gather, sizeof(d->gather)))
		fuzz_fail("a string of a loaded dump is not terminated", data, size);
}

/* The curve read at budget b lies between the served figures around b. */
static void fuzz_check_curve_at(const struct dump *d, uint64_t b, const uint8_t *data, size_t size)
{
	uint64_t got = dump_whatif_served_at(d, b), lo, hi;
	int i;

	if (d->npoints == 0) {
		if (got)
			fuzz_fail("a dump without a curve serves bytes", data, size);
		return;
	}
	for (i = 0; i < d->npoints - 1 && b > d->curve_budget[i]; i++)
		;
	lo = hi = d->curve_served[i];
	if (i > 0 && b > d->curve_budget[i - 1] && b <= d->curve_budget[i]) {
		lo = d->curve_served[i - 1] < lo ? d->curve_served[i - 1] : lo;
		hi = d->curve_served[i - 1] > hi ? d->curve_served[i - 1] : hi;
	}
	if (got < lo || got > hi)
		fuzz_fail("the what-if curve read between two points is outside them", data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t lens[] = { 1, 8, 64, 512 };
	struct dump *d = calloc(3, sizeof(*d));
	FILE *out = fuzz_devnull();
	char msg[1024], buf[512];
	const char *path;
	size_t i;
	int err, k;

	if (!d)
		abort();
	path = fuzz_file(data, size, NULL);
	memset(msg, 'x', sizeof(msg));
	err = dump_load(&d[0], path, msg, sizeof(msg));
	if (err) {
		if (err > 0 || !msg[0] || !fuzz_terminated(msg, sizeof(msg)) || strchr(msg, '\n'))
			fuzz_fail("a refused dump without a one-line message", data, size);
		goto out;
	}
	fuzz_check_strings(&d[0], data, size);
	if (d[0].npoints < 0 || d[0].npoints > DUMP_CURVE_MAX || d[0].nsizes < 0 || d[0].nsizes > DUMP_SIZES_MAX)
		fuzz_fail("more curve points or sizes than kept", data, size);
	for (k = 1; k < d[0].nsizes; k++)
		if (d[0].sizes[k].total > d[0].sizes[k - 1].total)
			fuzz_fail("the sizes are not most bytes first", data, size);
	for (k = 0; k < d[0].npoints; k++) {
		fuzz_check_curve_at(&d[0], d[0].curve_budget[k], data, size);
		fuzz_check_curve_at(&d[0], d[0].curve_budget[k] + 1, data, size);
		fuzz_check_curve_at(&d[0], d[0].curve_budget[k] / 2 + (k ? d[0].curve_budget[k - 1] / 2 : 0),
				    data, size);
	}
	fuzz_check_curve_at(&d[0], 0, data, size);
	fuzz_check_curve_at(&d[0], d[0].budget, data, size);
	fuzz_check_curve_at(&d[0], UINT64_MAX, data, size);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		memset(buf, 'x', sizeof(buf));
		report_likely_reason(&d[0], buf, lens[i]);
		dump_label(&d[0], buf + 256, lens[i] < 256 ? lens[i] : 256);
		if (!fuzz_terminated(buf + 256, lens[i] < 256 ? lens[i] : 256))
			fuzz_fail("a label is not terminated", data, size);
	}
	report_print_one(out, &d[0]);
	d[1] = d[0];
	dump_add(&d[1], &d[0]);
	report_print_ab(out, &d[0], &d[1]);
	report_print_ab(out, &d[1], &d[0]);
	d[2] = d[0];
	report_print_columns(out, d, 3);
out:
	free(d);
	return 0;
}
