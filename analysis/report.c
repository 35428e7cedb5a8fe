/*
 * report.c: `vrampool report STATS.json [OTHER.json]`, the stats dumps of
 * the preloaded library as tables.
 *
 * One dump becomes a table (copies, bytes, hit rate, bytes saved, pool,
 * evictions, the probe's decision); two (off, then on) become a side-by-side
 * comparison with the ratio of host-to-device bytes and a one-line verdict.
 * The JSON is read with jansson: a small C library with no dependencies of
 * its own, in Debian for many years (libjansson-dev), with a strict parser
 * that reports line and column. Unknown keys are ignored and optional ones
 * may be missing; a file without "vrampool" and "bytes" is not a dump.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "vrampool.h"

const char *tool_format_bytes(uint64_t n, char *buf, size_t size)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)n;
	int u = -1;

	if (n < 1024) {
		snprintf(buf, size, "%" PRIu64 " B", n);
		return buf;
	}
	while (v >= 1024.0 && u < 4) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, size, "%.1f %s", v, units[u]);
	return buf;
}

/* Where a failed read goes: the message and its destination. */
struct load_error {
	char *msg;
	size_t size;
	const char *path;
};

/* Writes "PATH: key SECTION.KEY: expected WHAT" and returns -EINVAL. */
static int load_type_error(struct load_error *e, const char *section,
			   const char *key, const char *what)
{
	snprintf(e->msg, e->size, "%s: key \"%s%s%s\" is not %s", e->path,
		 section ? section : "", section ? "." : "", key, what);
	return -EINVAL;
}

/*
 * Reads the unsigned integer KEY of OBJ into OUT. A missing key (or a
 * missing OBJ) leaves OUT at 0 and is not an error; a key of another type is.
 */
static int load_u64(struct load_error *e, json_t *obj, const char *section,
		    const char *key, uint64_t *out)
{
	json_t *v = obj ? json_object_get(obj, key) : NULL;

	*out = 0;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_real(v) && json_real_value(v) >= 0) {
		*out = (uint64_t)json_real_value(v);
		return 0;
	}
	return load_type_error(e, section, key, "a non-negative number");
}

/* Reads the string KEY of OBJ into OUT ("" when missing or null). */
static int load_string(struct load_error *e, json_t *obj, const char *section,
		       const char *key, char *out, size_t size)
{
	json_t *v = obj ? json_object_get(obj, key) : NULL;

	out[0] = '\0';
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return load_type_error(e, section, key, "a string");
	snprintf(out, size, "%s", json_string_value(v));
	return 0;
}

/* Reads the boolean KEY of OBJ (DEF when missing); numbers count too. */
static int load_bool(struct load_error *e, json_t *obj, const char *section,
		     const char *key, bool def, bool *out)
{
	json_t *v = obj ? json_object_get(obj, key) : NULL;

	*out = def;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_boolean(v))
		*out = json_is_true(v);
	else if (json_is_integer(v))
		*out = json_integer_value(v) != 0;
	else
		return load_type_error(e, section, key, "a boolean");
	return 0;
}

/* Returns the object KEY of ROOT, NULL when missing; sets *ERR on a wrong type. */
static json_t *load_section(struct load_error *e, json_t *root, const char *key, int *err)
{
	json_t *v = json_object_get(root, key);

	if (!v || json_is_null(v))
		return NULL;
	if (!json_is_object(v)) {
		*err = load_type_error(e, NULL, key, "an object");
		return NULL;
	}
	return v;
}

/* Reads the "sizes" array: the most frequent copy sizes, kept largest first. */
static int load_sizes(struct load_error *e, struct dump *d, json_t *root)
{
	json_t *arr = json_object_get(root, "sizes"), *item;
	size_t i;
	int j, k, max = (int)(sizeof(d->sizes) / sizeof(d->sizes[0])), err;
	uint64_t bytes, calls, total;

	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return load_type_error(e, NULL, "sizes", "an array");
	json_array_foreach(arr, i, item) {
		if (!json_is_object(item))
			return load_type_error(e, NULL, "sizes", "an array of objects");
		if ((err = load_u64(e, item, "sizes[]", "bytes", &bytes)) ||
		    (err = load_u64(e, item, "sizes[]", "calls", &calls)) ||
		    (err = load_u64(e, item, "sizes[]", "total", &total)))
			return err;
		if (!total)
			total = bytes * calls;
		for (j = 0; j < d->nsizes && d->sizes[j].total >= total; j++)
			;
		if (j >= max)
			continue;
		for (k = (d->nsizes < max ? d->nsizes : max - 1); k > j; k--)
			d->sizes[k] = d->sizes[k - 1];
		d->sizes[j].bytes = bytes;
		d->sizes[j].calls = calls;
		d->sizes[j].total = total;
		if (d->nsizes < max)
			d->nsizes++;
	}
	return 0;
}

int dump_load(struct dump *d, const char *path, char *msg, size_t msg_size)
{
	struct load_error e = { msg, msg_size, path };
	json_error_t jerr;
	json_t *root, *copies, *bytes, *rows, *pool, *probe, *time_ns, *version;
	uint64_t pid = 0;
	int err = 0;

	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->processes = 1;
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (jerr.line <= 0 && jerr.position == 0 && errno)
			err = -errno;
		else
			err = -EINVAL;
		if (jerr.line > 0)
			snprintf(msg, msg_size, "%s: not valid JSON (line %d, column %d): %s",
				 path, jerr.line, jerr.column, jerr.text);
		else
			snprintf(msg, msg_size, "%s: %s", path, jerr.text);
		return err ? err : -EINVAL;
	}
	version = json_is_object(root) ? json_object_get(root, "vrampool") : NULL;
	bytes = json_is_object(root) ? json_object_get(root, "bytes") : NULL;
	if (!json_is_object(root) || !version || !json_is_object(bytes)) {
		snprintf(msg, msg_size,
			 "%s: valid JSON, but not a vrampool stats dump (it lacks the \"vrampool\" and \"bytes\" keys)",
			 path);
		err = -EINVAL;
		goto out_decref;
	}
	if (!json_is_integer(version) || json_integer_value(version) < 1) {
		err = load_type_error(&e, NULL, "vrampool", "a format version (1)");
		goto out_decref;
	}
	copies = load_section(&e, root, "copies", &err);
	rows = load_section(&e, root, "rows", &err);
	pool = load_section(&e, root, "pool", &err);
	probe = load_section(&e, root, "probe", &err);
	time_ns = load_section(&e, root, "time_ns", &err);
	if (err)
		goto out_decref;
	d->has_rows = rows != NULL;
	d->has_pool = pool != NULL;
	d->has_probe = probe != NULL;
	if ((err = load_u64(&e, root, NULL, "pid", &pid)) ||
	    (err = load_bool(&e, root, NULL, "enabled", true, &d->enabled)) ||
	    (err = load_string(&e, root, NULL, "layout", d->layout, sizeof(d->layout))) ||
	    (err = load_u64(&e, copies, "copies", "h2d_calls", &d->h2d_calls)) ||
	    (err = load_u64(&e, copies, "copies", "matched_calls", &d->matched_calls)) ||
	    (err = load_u64(&e, copies, "copies", "passthrough_calls", &d->passthrough_calls)) ||
	    (err = load_u64(&e, copies, "copies", "fallbacks", &d->fallbacks)) ||
	    (err = load_u64(&e, copies, "copies", "graph_capture", &d->graph_capture)) ||
	    (err = load_u64(&e, bytes, "bytes", "requested", &d->requested)) ||
	    (err = load_u64(&e, bytes, "bytes", "h2d", &d->h2d)) ||
	    (err = load_u64(&e, bytes, "bytes", "served_from_pool", &d->served)) ||
	    (err = load_u64(&e, bytes, "bytes", "captured", &d->captured_bytes)) ||
	    (err = load_u64(&e, rows, "rows", "seen", &d->rows_seen)) ||
	    (err = load_u64(&e, rows, "rows", "hits", &d->hits)) ||
	    (err = load_u64(&e, rows, "rows", "misses", &d->misses)) ||
	    (err = load_u64(&e, rows, "rows", "captured", &d->rows_captured)) ||
	    (err = load_u64(&e, rows, "rows", "pooled", &d->pooled)) ||
	    (err = load_string(&e, pool, "pool", "state", d->state, sizeof(d->state))) ||
	    (err = load_u64(&e, pool, "pool", "budget", &d->budget)) ||
	    (err = load_u64(&e, pool, "pool", "bytes", &d->pool_bytes)) ||
	    (err = load_u64(&e, pool, "pool", "slabs", &d->slabs)) ||
	    (err = load_u64(&e, pool, "pool", "evictions", &d->evictions)) ||
	    (err = load_u64(&e, pool, "pool", "evicted_bytes", &d->evicted_bytes)) ||
	    (err = load_u64(&e, pool, "pool", "oom_retries", &d->oom_retries)) ||
	    (err = load_bool(&e, probe, "probe", "decided", false, &d->probe_decided)) ||
	    (err = load_u64(&e, probe, "probe", "free", &d->probe_free)) ||
	    (err = load_u64(&e, probe, "probe", "total", &d->probe_total)) ||
	    (err = load_u64(&e, probe, "probe", "reserve", &d->probe_reserve)) ||
	    (err = load_u64(&e, probe, "probe", "margin", &d->probe_margin)) ||
	    (err = load_u64(&e, time_ns, "time_ns", "fingerprint", &d->fingerprint_ns)) ||
	    (err = load_u64(&e, time_ns, "time_ns", "shim", &d->shim_ns)) ||
	    (err = load_sizes(&e, d, root)))
		goto out_decref;
	d->pid = (long long)pid;
out_decref:
	json_decref(root);
	return err;
}

void dump_add(struct dump *d, const struct dump *s)
{
	int i, j;

	d->processes += s->processes;
	d->enabled = d->enabled || s->enabled;
	if (!d->layout[0])
		snprintf(d->layout, sizeof(d->layout), "%s", s->layout);
	if (!d->state[0])
		snprintf(d->state, sizeof(d->state), "%s", s->state);
	d->h2d_calls += s->h2d_calls;
	d->matched_calls += s->matched_calls;
	d->passthrough_calls += s->passthrough_calls;
	d->fallbacks += s->fallbacks;
	d->graph_capture += s->graph_capture;
	d->requested += s->requested;
	d->h2d += s->h2d;
	d->served += s->served;
	d->captured_bytes += s->captured_bytes;
	d->rows_seen += s->rows_seen;
	d->hits += s->hits;
	d->misses += s->misses;
	d->rows_captured += s->rows_captured;
	d->pooled += s->pooled;
	d->budget += s->budget;
	d->pool_bytes += s->pool_bytes;
	d->slabs += s->slabs;
	d->evictions += s->evictions;
	d->evicted_bytes += s->evicted_bytes;
	d->oom_retries += s->oom_retries;
	d->has_rows = d->has_rows || s->has_rows;
	d->has_pool = d->has_pool || s->has_pool;
	if (!d->probe_decided && s->probe_decided) {
		d->has_probe = true;
		d->probe_decided = true;
		d->probe_free = s->probe_free;
		d->probe_total = s->probe_total;
		d->probe_reserve = s->probe_reserve;
		d->probe_margin = s->probe_margin;
	}
	d->fingerprint_ns += s->fingerprint_ns;
	d->shim_ns += s->shim_ns;
	for (i = 0; i < s->nsizes; i++) {
		for (j = 0; j < d->nsizes && d->sizes[j].bytes != s->sizes[i].bytes; j++)
			;
		if (j < d->nsizes) {
			d->sizes[j].calls += s->sizes[i].calls;
			d->sizes[j].total += s->sizes[i].total;
		} else if (d->nsizes < (int)(sizeof(d->sizes) / sizeof(d->sizes[0]))) {
			d->sizes[d->nsizes++] = s->sizes[i];
		}
	}
}

/* Returns A/B as a percentage, or -1 when B is 0. */
static double percent(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : -1.0;
}

void report_print_one(FILE *out, const struct dump *d)
{
	char b1[32], b2[32], b3[32], b4[32];
	int i;

	fprintf(out, "vrampool report: %s", d->path);
	if (d->processes > 1)
		fprintf(out, " (%d processes summed)\n", d->processes);
	else if (d->pid)
		fprintf(out, " (pid %lld)\n", d->pid);
	else
		fprintf(out, "\n");
	fprintf(out, "  %-18s %s", "mode", d->enabled ? "on" : "off (pass-through, counting only)");
	if (d->layout[0])
		fprintf(out, ", layout %s\n", d->layout);
	else
		fprintf(out, ", no layout (pass-through)\n");
	fprintf(out, "  %-18s %" PRIu64 " calls, %" PRIu64 " matched the layout, %" PRIu64 " passed through",
		"host-to-device", d->h2d_calls, d->matched_calls, d->passthrough_calls);
	if (d->graph_capture || d->fallbacks)
		fprintf(out, " (%" PRIu64 " in graph capture, %" PRIu64 " fallbacks)",
			d->graph_capture, d->fallbacks);
	fprintf(out, "\n");
	fprintf(out, "  %-18s %s\n", "bytes requested", tool_format_bytes(d->requested, b1, sizeof(b1)));
	fprintf(out, "  %-18s %s\n", "bytes over PCIe", tool_format_bytes(d->h2d, b1, sizeof(b1)));
	fprintf(out, "  %-18s %s", "served from pool", tool_format_bytes(d->served, b1, sizeof(b1)));
	if (d->requested)
		fprintf(out, " (%.1f%% of requested: bytes saved)", percent(d->served, d->requested));
	fprintf(out, "\n");
	if (d->has_rows) {
		fprintf(out, "  %-18s %" PRIu64 " seen, %" PRIu64 " hits", "rows", d->rows_seen, d->hits);
		if (d->rows_seen)
			fprintf(out, " (%.1f%% hit rate)", percent(d->hits, d->rows_seen));
		fprintf(out, ", %" PRIu64 " misses, %" PRIu64 " captured, %" PRIu64 " pooled\n",
			d->misses, d->rows_captured, d->pooled);
	}
	if (d->has_pool) {
		fprintf(out, "  %-18s %s, %" PRIu64 " slab%s, %s of %s budget\n", "pool",
			d->state[0] ? d->state : "?", d->slabs, d->slabs == 1 ? "" : "s",
			tool_format_bytes(d->pool_bytes, b1, sizeof(b1)),
			tool_format_bytes(d->budget, b2, sizeof(b2)));
		fprintf(out, "  %-18s %" PRIu64 " (%s), %" PRIu64 " out-of-memory retries\n",
			"evictions", d->evictions, tool_format_bytes(d->evicted_bytes, b1, sizeof(b1)),
			d->oom_retries);
	}
	if (d->has_probe) {
		if (d->probe_decided)
			fprintf(out, "  %-18s decided: %s free of %s, reserve %s, margin %s\n", "probe",
				tool_format_bytes(d->probe_free, b1, sizeof(b1)),
				tool_format_bytes(d->probe_total, b2, sizeof(b2)),
				tool_format_bytes(d->probe_reserve, b3, sizeof(b3)),
				tool_format_bytes(d->probe_margin, b4, sizeof(b4)));
		else
			fprintf(out, "  %-18s not run (the budget was never decided)\n", "probe");
	}
	fprintf(out, "  %-18s fingerprint %.3f s, shim total %.3f s\n", "time",
		(double)d->fingerprint_ns / 1e9, (double)d->shim_ns / 1e9);
	if (!d->h2d_calls)
		fprintf(out, "note: no host-to-device copy was seen; if the program made some, run `vrampool inspect` on it.\n");
	else if (!d->layout[0] && d->nsizes) {
		fprintf(out, "note: no layout; the most frequent copy sizes were:\n");
		for (i = 0; i < d->nsizes; i++)
			fprintf(out, "    %" PRIu64 " bytes x %" PRIu64 " calls (%s)\n",
				d->sizes[i].bytes, d->sizes[i].calls,
				tool_format_bytes(d->sizes[i].total, b1, sizeof(b1)));
		fprintf(out, "  try `--layout %" PRIu64 "` (or VRAMPOOL_LAYOUT=%" PRIu64 ") if one sample is one such row.\n",
			d->sizes[0].bytes, d->sizes[0].bytes);
	}
}

/* Prints one row of the comparison: two byte counts and their ratio. */
static void ab_bytes(FILE *out, const char *label, uint64_t a, uint64_t b, bool ratio)
{
	char b1[32], b2[32], r[32] = "";

	if (ratio && a)
		snprintf(r, sizeof(r), "%.2f", (double)b / (double)a);
	fprintf(out, "  %-22s %14s %14s", label, tool_format_bytes(a, b1, sizeof(b1)),
		tool_format_bytes(b, b2, sizeof(b2)));
	fprintf(out, r[0] ? " %8s\n" : "\n", r);
}

/* Prints one row of the comparison: two counts. */
static void ab_count(FILE *out, const char *label, uint64_t a, uint64_t b)
{
	char s1[32], s2[32];

	snprintf(s1, sizeof(s1), "%" PRIu64, a);
	snprintf(s2, sizeof(s2), "%" PRIu64, b);
	fprintf(out, "  %-22s %14s %14s\n", label, s1, s2);
}

void report_print_ab(FILE *out, const struct dump *off, const struct dump *on)
{
	char s1[32], s2[32], b1[32], b2[32];
	double a, b;

	if (strcmp(off->path, on->path) == 0)
		fprintf(out, "vrampool report: %s, pool off, then on\n", on->path);
	else
		fprintf(out, "vrampool report: off %s\n                 on  %s\n", off->path, on->path);
	fprintf(out, "  %-22s %14s %14s %8s\n", "", "off", "on", "on/off");
	ab_count(out, "host-to-device calls", off->h2d_calls, on->h2d_calls);
	ab_count(out, "matched the layout", off->matched_calls, on->matched_calls);
	ab_bytes(out, "bytes requested", off->requested, on->requested, true);
	ab_bytes(out, "bytes over PCIe", off->h2d, on->h2d, true);
	ab_bytes(out, "served from pool", off->served, on->served, false);
	snprintf(s1, sizeof(s1), "%s", off->rows_seen ? "" : "-");
	if (off->rows_seen)
		snprintf(s1, sizeof(s1), "%.1f%%", percent(off->hits, off->rows_seen));
	snprintf(s2, sizeof(s2), "-");
	if (on->rows_seen)
		snprintf(s2, sizeof(s2), "%.1f%%", percent(on->hits, on->rows_seen));
	fprintf(out, "  %-22s %14s %14s\n", "row hit rate", s1, s2);
	ab_bytes(out, "pool size", off->pool_bytes, on->pool_bytes, false);
	ab_count(out, "evictions", off->evictions, on->evictions);
	snprintf(s1, sizeof(s1), "%.3f s", (double)off->shim_ns / 1e9);
	snprintf(s2, sizeof(s2), "%.3f s", (double)on->shim_ns / 1e9);
	fprintf(out, "  %-22s %14s %14s\n", "shim time", s1, s2);
	if (on->processes > 1 || off->processes > 1)
		fprintf(out, "  (processes summed: off %d, on %d)\n", off->processes, on->processes);

	a = (double)off->requested;
	b = (double)on->requested;
	if (!off->h2d_calls && !on->h2d_calls) {
		fprintf(out, "verdict: no host-to-device copy was seen in either run; run `vrampool inspect` on the program.\n");
	} else if (a <= 0 || b <= 0 || (a > b ? a - b : b - a) > 0.01 * (a > b ? a : b)) {
		fprintf(out, "verdict: not comparable: the runs asked for different amounts (%s off, %s on).\n",
			tool_format_bytes(off->requested, b1, sizeof(b1)),
			tool_format_bytes(on->requested, b2, sizeof(b2)));
	} else if (on->h2d >= off->h2d) {
		fprintf(out, "verdict: no saving: the pool served nothing%s.\n",
			on->layout[0] ? (on->matched_calls ? "" : " (no copy matched the layout)") :
			" (no layout given: try --layout)");
	} else {
		fprintf(out, "verdict: with the pool, %.2fx fewer bytes crossed to the device (%s instead of %s, %.1f%% saved) for the same %s requested.\n",
			on->h2d ? (double)off->h2d / (double)on->h2d : 0.0,
			tool_format_bytes(on->h2d, b1, sizeof(b1)),
			tool_format_bytes(off->h2d, b2, sizeof(b2)),
			100.0 - percent(on->h2d, off->h2d),
			tool_format_bytes(on->requested, s1, sizeof(s1)));
	}
}

void report_usage(FILE *out)
{
	fprintf(out,
		"usage: vrampool report STATS.json [OTHER.json]\n"
		"\n"
		"Prints a stats dump of the vrampool library (VRAMPOOL_STATS, or\n"
		"`vrampool run --stats FILE`) as a table: copies, bytes requested and\n"
		"sent, bytes served from the pool, row hit rate, pool size, evictions,\n"
		"the budget probe. With two dumps (a run with VRAMPOOL=off, then one\n"
		"with the pool on) prints them side by side with the ratio of\n"
		"host-to-device bytes and a one-line verdict; the order of the files\n"
		"does not matter when one is off and the other on.\n"
		"\n"
		"Exit status: 0, or 2 for bad usage or a file that is not a dump.\n");
}

int report_main(int argc, char **argv)
{
	struct dump d[2];
	char msg[512];
	int i, n = argc - 1;

	if (n < 1 || n > 2) {
		fprintf(stderr, "vrampool report: expected one or two stats files, got %d\n", n);
		report_usage(stderr);
		return TOOL_EXIT_ERROR;
	}
	for (i = 0; i < n; i++) {
		if (dump_load(&d[i], argv[i + 1], msg, sizeof(msg)) != 0) {
			fprintf(stderr, "vrampool report: %s\n", msg);
			return TOOL_EXIT_ERROR;
		}
	}
	if (n == 1)
		report_print_one(stdout, &d[0]);
	else if (d[0].enabled && !d[1].enabled)
		report_print_ab(stdout, &d[1], &d[0]);
	else
		report_print_ab(stdout, &d[0], &d[1]);
	return TOOL_EXIT_OK;
}
