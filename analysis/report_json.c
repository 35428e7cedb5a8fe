/*
 * report_json.c: `vrampool report --json` (report_json.h), built with
 * jansson and written in one piece.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "diagnose.h"
#include "report_json.h"
#include "verdict.h"
#include "vrampool.h"

/* A string, or null when empty. */
static json_t *str_or_null(const char *s)
{
	return s[0] ? json_string(s) : json_null();
}

/* A count as a JSON integer (saturated at 2^63-1, jansson's largest). */
static json_t *count(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* A positive real, or null. */
static json_t *real_or_null(double v)
{
	return v > 0 ? json_real(v) : json_null();
}

/* The figures of one dump (report_json.h lists the keys). */
static json_t *report_json_figures(const struct dump *d)
{
	char why[1024] = "";
	json_t *o = json_object(), *dev = json_null();

	if (!o)
		return NULL;
	if (d->has_device)
		dev = json_pack("{s:s, s:I}", "name", d->device_name, "ordinal",
				(json_int_t)d->device_ordinal);
	if (dump_is_on(d) && diagnose_served_little(d))
		report_likely_reason(d, why, sizeof(why));
	json_object_set_new(o, "path", json_string(d->path));
	json_object_set_new(o, "mode", json_string(dump_mode(d)));
	json_object_set_new(o, "layout", str_or_null(d->layout));
	json_object_set_new(o, "pid", d->pid ? json_integer(d->pid) : json_null());
	json_object_set_new(o, "rank", str_or_null(d->rank));
	json_object_set_new(o, "host", str_or_null(d->host));
	json_object_set_new(o, "device", dev ? dev : json_null());
	json_object_set_new(o, "h2d_calls", count(d->h2d_calls));
	json_object_set_new(o, "matched_calls", count(d->matched_calls));
	json_object_set_new(o, "bytes_requested", count(d->requested));
	json_object_set_new(o, "bytes_h2d", count(d->h2d));
	json_object_set_new(o, "bytes_served", count(d->served));
	json_object_set_new(o, "rows_seen", count(d->rows_seen));
	json_object_set_new(o, "row_hits", count(d->hits));
	json_object_set_new(o, "pool_bytes", count(d->pool_bytes));
	json_object_set_new(o, "budget", count(d->budget));
	json_object_set_new(o, "evictions", count(d->evictions));
	json_object_set_new(o, "wall_time_s", real_or_null(d->has_elapsed ? d->elapsed_s : d->wall_s));
	json_object_set_new(o, "time_per_copy_s",
			    real_or_null(d->has_steady ? d->steady_ns_per_copy / 1e9 : 0));
	json_object_set_new(o, "unique_bytes", d->has_whatif ? count(d->unique_bytes) : json_null());
	json_object_set_new(o, "repeat_bytes", d->has_whatif ? count(d->repeat_bytes) : json_null());
	json_object_set_new(o, "likely_reason", str_or_null(why));
	return o;
}

/* The report's opening keys: who, which kind, the convention, the files. */
static json_t *report_json_start(const char *kind, const struct dump *d, int n)
{
	json_t *o = json_object(), *files = json_array();
	int i;

	if (!o || !files) {
		json_decref(o);
		json_decref(files);
		return NULL;
	}
	for (i = 0; i < n; i++)
		json_array_append_new(files, json_string(d[i].path));
	json_object_set_new(o, "report", json_string("vrampool"));
	json_object_set_new(o, "format", json_integer(1));
	json_object_set_new(o, "kind", json_string(kind));
	json_object_set_new(o, "convention",
			    json_string("off/on: > 1 means fewer bytes or less time with the pool"));
	json_object_set_new(o, "files", files);
	return o;
}

/* Writes O to OUT with a newline and frees it. Returns 0 or -ENOMEM. */
static int report_json_finish(FILE *out, json_t *o)
{
	int err;

	if (!o)
		return -ENOMEM;
	err = json_dumpf(o, out, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) ? -ENOMEM : 0;
	fputc('\n', out);
	json_decref(o);
	return err;
}

int report_json_one(FILE *out, const struct dump *d)
{
	json_t *o = report_json_start("one", d, 1);

	if (o)
		json_object_set_new(o, "dump", report_json_figures(d));
	return report_json_finish(out, o);
}

/* The verdict V as values and sentences. */
static json_t *report_json_verdict(const struct verdict *v, const double *ratios, int n)
{
	static const char *const bytes[] = { "no_copies", "not_comparable", "no_saving", "fewer" };
	static const char *const time[] = { "unknown", "one_pair", "no_measurable_difference",
					    "faster", "slower" };
	json_t *r = json_array();
	int i;

	if (!r)
		return NULL;
	for (i = 0; i < n; i++)
		json_array_append_new(r, real_or_null(ratios[i]));
	return json_pack("{s:s, s:o, s:s, s:s, s:o, s:o, s:i, s:o, s:o, s:o, s:o, s:o, s:s, s:s, s:o}",
			 "bytes", bytes[v->bytes], "bytes_ratio", real_or_null(v->bytes_ratio),
			 "time", time[v->time], "time_figure", verdict_figure_name(v->figure.steady),
			 "time_off_s", real_or_null(v->figure.off), "time_on_s", real_or_null(v->figure.on),
			 "pairs", v->pairs, "time_ratios", r,
			 "time_ratio_median", real_or_null(v->median),
			 "time_ratio_min", real_or_null(v->min), "time_ratio_max", real_or_null(v->max),
			 "band", real_or_null(v->band), "bytes_text", v->bytes_text,
			 "time_text", v->time_text, "likely_reason", str_or_null(v->reason));
}

int report_json_ab(FILE *out, const struct dump *off, const struct dump *on,
		   const double *ratios, int n)
{
	struct dump both[2];
	struct verdict v;
	json_t *o, *ratio;

	both[0] = *off;
	both[1] = *on;
	o = report_json_start("ab", both, 2);
	verdict_judge(&v, off, on, ratios, n);
	ratio = json_pack("{s:o, s:o, s:o}",
			  "bytes_requested", real_or_null(on->requested ? (double)off->requested / (double)on->requested : 0),
			  "bytes_h2d", real_or_null(v.bytes_ratio),
			  "time", real_or_null(v.figure.known ? v.figure.off / v.figure.on : 0));
	if (o) {
		json_object_set_new(o, "off", report_json_figures(off));
		json_object_set_new(o, "on", report_json_figures(on));
		json_object_set_new(o, "ratio", ratio ? ratio : json_null());
		json_object_set_new(o, "verdict", report_json_verdict(&v, ratios, n));
	} else {
		json_decref(ratio);
	}
	return report_json_finish(out, o);
}

int report_json_prediction(FILE *out, const struct dump *dry, const struct dump *real)
{
	struct dump both[2];
	uint64_t at = real->budget && dry->npoints ? real->budget : UINT64_MAX;
	json_t *o;

	both[0] = *dry;
	both[1] = *real;
	o = report_json_start("prediction", both, 2);
	if (o) {
		json_object_set_new(o, "dry", report_json_figures(dry));
		json_object_set_new(o, "outcome", report_json_figures(real));
		json_object_set_new(o, "predicted_served",
				    dry->npoints ? count(dump_whatif_served_at(dry, at)) : json_null());
	}
	return report_json_finish(out, o);
}

int report_json_columns(FILE *out, const struct dump *d, int n)
{
	json_t *o = report_json_start("columns", d, n), *cols = json_array();
	int i;

	if (!o || !cols) {
		json_decref(o);
		json_decref(cols);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		json_array_append_new(cols, report_json_figures(&d[i]));
	json_object_set_new(o, "columns", cols);
	return report_json_finish(out, o);
}
