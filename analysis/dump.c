/*
 * dump.c: stats dumps read back (dump.h), strictly: every number that is
 * shown was checked to be what its key promises (load.c reads and checks
 * each value). Also what the readers derive from a dump: the sum of a
 * multi-process run, the mode, a column label, and the what-if curve read
 * at a budget.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "load.h"
#include "vrampool.h"

#define DUMP_FILE_MAX (64ULL << 20)		/* a dump is a few KiB */

/* Reads the "sizes" array: the copy sizes, kept most bytes first. */
static int dump_parse_sizes(struct load_error *e, struct dump *d, json_t *root)
{
	json_t *arr = json_object_get(root, "sizes"), *item;
	size_t i;
	int j, k, max = DUMP_SIZES_MAX, err;
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
		if (!total && calls && bytes <= UINT64_MAX / calls)
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

/*
 * Reads the cost ledger (issue 16): "ledger" (its mode), "specs" (each
 * spec's verdict and what it did) and the counters it added elsewhere.
 * All optional: an older dump has none of them.
 */
static int dump_parse_ledger(struct load_error *e, struct dump *d, json_t *root)
{
	json_t *arr = json_object_get(root, "specs"), *item, *l;
	size_t i;
	int err;

	if ((err = load_u64(e, json_object_get(root, "copies"), "copies", "stood_aside", &d->stood_aside_calls)) ||
	    (err = load_u64(e, json_object_get(root, "pool"), "pool", "stand_asides", &d->stand_asides)) ||
	    (err = load_u64(e, json_object_get(root, "pool"), "pool", "resumes", &d->resumes)) ||
	    (err = load_u64(e, json_object_get(root, "time_ns"), "time_ns", "shim_cpu", &d->shim_cpu_ns)) ||
	    (err = load_string(e, json_object_get(root, "ledger"), "ledger", "mode", d->ledger_mode,
			       sizeof(d->ledger_mode), false)))
		return err;
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return load_type_error(e, NULL, "specs", "an array");
	json_array_foreach(arr, i, item) {
		struct dump_spec *sp = &d->specs[d->nspecs];
		char decision[16];
		uint64_t index = 0;
		json_t *ix = json_is_object(item) ? json_object_get(item, "index") : NULL;

		l = json_is_object(item) ? json_object_get(item, "ledger") : NULL;
		if (!json_is_object(l) || (ix && !json_is_integer(ix)))
			return load_type_error(e, NULL, "specs", "an array of objects with an index and a \"ledger\"");
		if (d->nspecs >= DUMP_SPECS_MAX)
			break;
		if ((err = load_u64(e, item, "specs[]", "row", &sp->row)) ||
		    (err = load_string(e, l, "specs[].ledger", "decision", decision, sizeof(decision), false)) ||
		    (err = load_string(e, l, "specs[].ledger", "reason", sp->reason, sizeof(sp->reason), false)) ||
		    (err = load_u64(e, l, "specs[].ledger", "stood_aside_copies", &sp->aside_copies)) ||
		    (err = load_u64(e, l, "specs[].ledger", "stand_asides", &sp->stand_asides)) ||
		    (err = load_u64(e, l, "specs[].ledger", "resumes", &sp->resumes)))
			return err;
		index = ix ? (uint64_t)json_integer_value(ix) : 0;
		sp->index = (int)(int64_t)index;
		sp->aside = strcmp(decision, "stood_aside") == 0;
		d->nspecs++;
	}
	return 0;
}

/*
 * Reads "whatif": the figures and the curve, thinned to DUMP_CURVE_MAX
 * points. Along a curve neither the budget nor the bytes served go down
 * (the library writes it so): one that does is not read, since what is
 * read between its points would be nonsense (and a served figure that
 * falls would be a negative difference turned into a count).
 */
static int dump_parse_whatif(struct load_error *e, struct dump *d, json_t *w)
{
	json_t *curve, *pt;
	size_t i, n, step_num, k;
	uint64_t b, s, pb = 0, ps = 0;
	char shown[128];
	int err;

	if (!w)
		return 0;
	d->has_whatif = true;
	if ((err = load_u64(e, w, "whatif", "unique_bytes", &d->unique_bytes)) ||
	    (err = load_u64(e, w, "whatif", "repeat_bytes", &d->repeat_bytes)) ||
	    (err = load_u64(e, w, "whatif", "tracked_rows", &d->tracked_rows)) ||
	    (err = load_bool(e, w, "whatif", "sampled", false, &d->whatif_sampled, NULL)))
		return err;
	curve = json_object_get(w, "curve");
	if (!curve || json_is_null(curve))
		return 0;
	if (!json_is_array(curve))
		return load_type_error(e, "whatif", "curve", "a list of [budget, served] pairs");
	n = json_array_size(curve);
	json_array_foreach(curve, i, pt) {
		if (!json_is_array(pt) || json_array_size(pt) != 2)
			return load_type_error(e, "whatif", "curve", "a list of [budget, served] pairs");
		if ((err = load_count(e, json_array_get(pt, 0), "whatif", "curve[][0]", &b)) ||
		    (err = load_count(e, json_array_get(pt, 1), "whatif", "curve[][1]", &s)))
			return err;
		if (i > 0 && (b < pb || s < ps)) {
			snprintf(shown, sizeof(shown), "[%" PRIu64 ", %" PRIu64 "] after [%" PRIu64 ", %" PRIu64 "]",
				 b, s, pb, ps);
			return load_value_error(e, "whatif", "curve", shown, b < pb ?
						"the budgets of a what-if curve never go down" :
						"the bytes a what-if curve serves never go down as the budget grows");
		}
		pb = b;
		ps = s;
	}
	/* Keep at most DUMP_CURVE_MAX points, evenly, the first and the last. */
	step_num = n > DUMP_CURVE_MAX ? n - 1 : 0;
	for (k = 0; k < n && k < DUMP_CURVE_MAX; k++) {
		i = step_num ? k * step_num / (DUMP_CURVE_MAX - 1) : k;
		pt = json_array_get(curve, i);
		load_count(e, json_array_get(pt, 0), NULL, "", &d->curve_budget[k]);
		load_count(e, json_array_get(pt, 1), NULL, "", &d->curve_served[k]);
		d->npoints = (int)k + 1;
	}
	return 0;
}

/*
 * Reads the keys of dump format 2 (issue 19): "format", "version",
 * "command", "device" and "pace". All optional: an older dump has none.
 */
static int dump_parse_v2(struct load_error *e, struct dump *d, json_t *root)
{
	json_t *pace, *steady, *dev, *cmd, *word;
	bool has_npc = false;
	double npc = 0;
	size_t i, o = 0;
	int err = 0;

	pace = load_section(e, root, "pace", &err);
	dev = load_section(e, root, "device", &err);
	if (err)
		return err;
	steady = pace ? load_section(e, pace, "steady", &err) : NULL;
	if (err ||
	    (err = load_u64(e, root, NULL, "format", &d->format)) ||
	    (err = load_string(e, root, NULL, "version", d->version, sizeof(d->version), false)) ||
	    (err = load_string(e, dev, "device", "name", d->device_name, sizeof(d->device_name), false)) ||
	    (err = load_u64(e, dev, "device", "ordinal", &d->device_ordinal)) ||
	    (err = load_u64(e, pace, "pace", "window_copies", &d->pace_window)) ||
	    (err = load_u64(e, pace, "pace", "copies", &d->pace_copies)) ||
	    (err = load_u64(e, pace, "pace", "bytes", &d->pace_bytes)) ||
	    (err = load_u64(e, pace, "pace", "ns", &d->pace_ns)) ||
	    (err = load_u64(e, steady, "pace.steady", "copies", &d->steady_copies)) ||
	    (err = load_u64(e, steady, "pace.steady", "ns", &d->steady_ns)) ||
	    (err = load_seconds(e, steady, "pace.steady", "ns_per_copy", &npc, &has_npc)))
		return err;
	d->has_device = dev != NULL;
	d->has_pace = pace != NULL;
	d->has_steady = steady && (d->steady_copies || has_npc);
	d->steady_ns_per_copy = d->steady_copies ? (double)d->steady_ns / (double)d->steady_copies : npc;
	cmd = json_object_get(root, "command");
	if (!cmd || json_is_null(cmd))
		return 0;
	if (!json_is_array(cmd))
		return load_type_error(e, NULL, "command", "a list of strings");
	json_array_foreach(cmd, i, word) {
		if (!json_is_string(word))
			return load_type_error(e, NULL, "command", "a list of strings");
		if (o + 1 < sizeof(d->command))
			o += (size_t)snprintf(d->command + o, sizeof(d->command) - o, "%s%s",
					      i ? " " : "", json_string_value(word));
		if (o >= sizeof(d->command))
			o = sizeof(d->command) - 1;
	}
	return 0;
}

/* Reads the dump in ROOT into D. */
static int dump_parse(struct dump *d, json_t *root, struct load_error *e)
{
	json_t *copies, *bytes, *rows, *pool, *probe, *time_ns, *version, *whatif, *allocs;
	uint64_t pid = 0;
	size_t o;
	int err = 0;

	version = json_is_object(root) ? json_object_get(root, "vrampool") : NULL;
	bytes = json_is_object(root) ? json_object_get(root, "bytes") : NULL;
	if (!json_is_object(root) || !version || !json_is_object(bytes)) {
		o = load_where(e);
		snprintf(e->msg + o, e->size - o,
			 "valid JSON, but not a vrampool stats dump (it lacks the \"vrampool\" and \"bytes\" keys)");
		return -EINVAL;
	}
	if (!json_is_integer(version) || json_integer_value(version) < 1)
		return load_type_error(e, NULL, "vrampool", "a format version (1)");
	copies = load_section(e, root, "copies", &err);
	rows = load_section(e, root, "rows", &err);
	pool = load_section(e, root, "pool", &err);
	probe = load_section(e, root, "probe", &err);
	time_ns = load_section(e, root, "time_ns", &err);
	whatif = load_section(e, root, "whatif", &err);
	allocs = load_section(e, root, "allocs", &err);
	if (err)
		return err;
	d->has_rows = rows != NULL;
	d->has_pool = pool != NULL;
	d->has_probe = probe != NULL;
	if ((err = load_u64(e, root, NULL, "pid", &pid)) ||
	    (err = load_string(e, root, NULL, "rank", d->rank, sizeof(d->rank), true)) ||
	    (err = load_string(e, root, NULL, "host", d->host, sizeof(d->host), false)) ||
	    (err = load_bool(e, root, NULL, "enabled", true, &d->enabled, NULL)) ||
	    (err = load_string(e, root, NULL, "mode", d->mode, sizeof(d->mode), false)) ||
	    (err = load_bool(e, root, NULL, "final", true, &d->final, &d->has_final)) ||
	    (err = load_string(e, root, NULL, "ended_by", d->ended_by, sizeof(d->ended_by), false)) ||
	    (err = load_seconds(e, root, NULL, "elapsed_s", &d->elapsed_s, &d->has_elapsed)) ||
	    (err = load_string(e, root, NULL, "layout", d->layout, sizeof(d->layout), false)) ||
	    (err = load_string(e, root, NULL, "layout_source", d->layout_source,
			       sizeof(d->layout_source), false)) ||
	    (err = load_string(e, root, NULL, "reason", d->reason, sizeof(d->reason), false)) ||
	    (err = load_string(e, root, NULL, "evidence", d->evidence, sizeof(d->evidence), false)) ||
	    (err = load_u64(e, copies, "copies", "h2d_calls", &d->h2d_calls)) ||
	    (err = load_u64(e, copies, "copies", "matched_calls", &d->matched_calls)) ||
	    (err = load_u64(e, copies, "copies", "passthrough_calls", &d->passthrough_calls)) ||
	    (err = load_u64(e, copies, "copies", "fallbacks", &d->fallbacks)) ||
	    (err = load_u64(e, copies, "copies", "graph_capture", &d->graph_capture)) ||
	    (err = load_u64(e, copies, "copies", "driver_calls", &d->driver_calls)) ||
	    (err = load_u64(e, copies, "copies", "batch_calls", &d->batch_calls)) ||
	    (err = load_u64(e, copies, "copies", "stood_down", &d->stood_down_calls)) ||
	    (err = load_u64(e, bytes, "bytes", "requested", &d->requested)) ||
	    (err = load_u64(e, bytes, "bytes", "h2d", &d->h2d)) ||
	    (err = load_u64(e, bytes, "bytes", "served_from_pool", &d->served)) ||
	    (err = load_u64(e, bytes, "bytes", "captured", &d->captured_bytes)) ||
	    (err = load_u64(e, rows, "rows", "seen", &d->rows_seen)) ||
	    (err = load_u64(e, rows, "rows", "hits", &d->hits)) ||
	    (err = load_u64(e, rows, "rows", "misses", &d->misses)) ||
	    (err = load_u64(e, rows, "rows", "captured", &d->rows_captured)) ||
	    (err = load_u64(e, rows, "rows", "pooled", &d->pooled)) ||
	    (err = load_string(e, pool, "pool", "state", d->state, sizeof(d->state), false)) ||
	    (err = load_u64(e, pool, "pool", "budget", &d->budget)) ||
	    (err = load_u64(e, pool, "pool", "bytes", &d->pool_bytes)) ||
	    (err = load_u64(e, pool, "pool", "slabs", &d->slabs)) ||
	    (err = load_u64(e, pool, "pool", "evictions", &d->evictions)) ||
	    (err = load_u64(e, pool, "pool", "evicted_bytes", &d->evicted_bytes)) ||
	    (err = load_u64(e, pool, "pool", "oom_retries", &d->oom_retries)) ||
	    (err = load_u64(e, pool, "pool", "device_ops", &d->device_ops)) ||
	    (err = load_u64(e, pool, "pool", "displaced_bytes", &d->displaced_bytes)) ||
	    (err = load_u64(e, pool, "pool", "displaced_slabs", &d->displaced_slabs)) ||
	    (err = load_u64(e, pool, "pool", "faults", &d->faults)) ||
	    (err = load_string(e, pool, "pool", "gather", d->gather, sizeof(d->gather), false)) ||
	    (err = load_u64(e, pool, "pool", "gather_launches", &d->gather_launches)) ||
	    (err = load_bool(e, pool, "pool", "stood_down", false, &d->pool_stood_down, NULL)) ||
	    (err = load_u64(e, pool, "pool", "stand_downs", &d->stand_downs)) ||
	    (err = load_bool(e, probe, "probe", "decided", false, &d->probe_decided, NULL)) ||
	    (err = load_u64(e, probe, "probe", "free", &d->probe_free)) ||
	    (err = load_u64(e, probe, "probe", "total", &d->probe_total)) ||
	    (err = load_u64(e, probe, "probe", "reserve", &d->probe_reserve)) ||
	    (err = load_u64(e, probe, "probe", "margin", &d->probe_margin)) ||
	    (err = load_u64(e, time_ns, "time_ns", "fingerprint", &d->fingerprint_ns)) ||
	    (err = load_u64(e, time_ns, "time_ns", "shim", &d->shim_ns)) ||
	    (err = load_u64(e, allocs, "allocs", "calls", &d->alloc_calls)) ||
	    (err = dump_parse_whatif(e, d, whatif)) ||
	    (err = dump_parse_sizes(e, d, root)) ||
	    (err = dump_parse_ledger(e, d, root)) ||
	    (err = dump_parse_v2(e, d, root)))
		return err;
	if (pid > (uint64_t)INT64_MAX)
		return load_value_error(e, NULL, "pid", "too large", "not a process id");
	d->pid = (long long)pid;
	return 0;
}

int dump_load(struct dump *d, const char *path, char *msg, size_t msg_size)
{
	struct load_error e = { msg, msg_size, path, 0 };
	json_error_t jerr;
	json_t *root;
	char *buf = NULL;
	size_t len = 0;
	int err;

	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->processes = 1;
	err = load_file(&e, path, DUMP_FILE_MAX, &buf, &len);
	if (err)
		return err;
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	free(buf);
	if (!root)
		return load_json_error(&e, &jerr);
	err = dump_parse(d, root, &e);
	json_decref(root);
	return err;
}

/* Sums A and B, saturating instead of wrapping. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
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
	if (!d->reason[0])
		snprintf(d->reason, sizeof(d->reason), "%s", s->reason);
	if (s->has_elapsed && (!d->has_elapsed || s->elapsed_s > d->elapsed_s)) {
		d->has_elapsed = true;
		d->elapsed_s = s->elapsed_s;
	}
	if (s->has_final && !s->final) {
		d->has_final = true;
		d->final = false;
	}
#define ADD(f) (d->f = add_sat(d->f, s->f))
	ADD(h2d_calls); ADD(matched_calls); ADD(passthrough_calls); ADD(fallbacks);
	ADD(graph_capture); ADD(driver_calls); ADD(batch_calls); ADD(stood_down_calls);
	ADD(requested); ADD(h2d); ADD(served); ADD(captured_bytes);
	ADD(rows_seen); ADD(hits); ADD(misses); ADD(rows_captured); ADD(pooled);
	ADD(budget); ADD(pool_bytes); ADD(slabs); ADD(evictions); ADD(evicted_bytes);
	ADD(oom_retries); ADD(device_ops); ADD(displaced_bytes); ADD(displaced_slabs);
	ADD(faults); ADD(gather_launches); ADD(stand_downs);
	ADD(fingerprint_ns); ADD(shim_ns); ADD(alloc_calls);
	ADD(unique_bytes); ADD(repeat_bytes); ADD(tracked_rows);
	ADD(stood_aside_calls); ADD(stand_asides); ADD(resumes); ADD(shim_cpu_ns);
	ADD(pace_copies); ADD(pace_bytes); ADD(pace_ns); ADD(steady_copies); ADD(steady_ns);
#undef ADD
	/* The pace of a sum: every process's, or none (one without would skew it). */
	d->has_pace = d->has_pace && s->has_pace;
	d->has_steady = d->has_steady && s->has_steady && d->steady_copies;
	d->steady_ns_per_copy = d->steady_copies ? (double)d->steady_ns / (double)d->steady_copies : 0;
	if (!dump_same_device(d, s))
		d->has_device = false;
	/* The processes' ledgers: the first process's verdict per spec, the counts summed. */
	for (i = 0; i < s->nspecs; i++) {
		for (j = 0; j < d->nspecs && d->specs[j].index != s->specs[i].index; j++)
			;
		if (j == d->nspecs && d->nspecs < DUMP_SPECS_MAX)
			d->specs[d->nspecs++] = s->specs[i];
		else if (j < d->nspecs) {
			d->specs[j].aside = d->specs[j].aside || s->specs[i].aside;
			d->specs[j].aside_copies = add_sat(d->specs[j].aside_copies, s->specs[i].aside_copies);
			d->specs[j].stand_asides = add_sat(d->specs[j].stand_asides, s->specs[i].stand_asides);
			d->specs[j].resumes = add_sat(d->specs[j].resumes, s->specs[i].resumes);
		}
	}
	d->pool_stood_down = d->pool_stood_down || s->pool_stood_down;
	d->has_rows = d->has_rows || s->has_rows;
	d->has_pool = d->has_pool || s->has_pool;
	/* The processes' curves have different budgets: the sum keeps none. */
	d->has_whatif = d->has_whatif || s->has_whatif;
	d->whatif_sampled = d->whatif_sampled || s->whatif_sampled;
	d->npoints = 0;
	if (!d->probe_decided && s->probe_decided) {
		d->has_probe = true;
		d->probe_decided = true;
		d->probe_free = s->probe_free;
		d->probe_total = s->probe_total;
		d->probe_reserve = s->probe_reserve;
		d->probe_margin = s->probe_margin;
	}
	for (i = 0; i < s->nsizes; i++) {
		for (j = 0; j < d->nsizes && d->sizes[j].bytes != s->sizes[i].bytes; j++)
			;
		if (j < d->nsizes) {
			d->sizes[j].calls = add_sat(d->sizes[j].calls, s->sizes[i].calls);
			d->sizes[j].total = add_sat(d->sizes[j].total, s->sizes[i].total);
		} else if (d->nsizes < DUMP_SIZES_MAX) {
			d->sizes[d->nsizes++] = s->sizes[i];
		}
	}
}

bool dump_is_dry(const struct dump *d)
{
	return strcmp(d->mode, "dry") == 0;
}

bool dump_same_device(const struct dump *a, const struct dump *b)
{
	return a->has_device && b->has_device && strcmp(a->host, b->host) == 0 &&
	       strcmp(a->device_name, b->device_name) == 0 && a->device_ordinal == b->device_ordinal;
}

bool dump_is_off(const struct dump *d)
{
	return d->mode[0] ? strcmp(d->mode, "off") == 0 : !d->enabled;
}

bool dump_is_on(const struct dump *d)
{
	return d->mode[0] ? strcmp(d->mode, "on") == 0 : d->enabled;
}

const char *dump_mode(const struct dump *d)
{
	if (d->mode[0])
		return d->mode;
	return d->enabled ? "on" : "off";
}

const char *dump_label(const struct dump *d, char *buf, size_t size)
{
	const char *slash = strrchr(d->path, '/');

	if (d->rank[0])
		snprintf(buf, size, "rank %s", d->rank);
	else if (d->pid)
		snprintf(buf, size, "pid %lld", d->pid);
	else if (strcmp(d->path, "-") == 0)
		snprintf(buf, size, "stdin");
	else
		snprintf(buf, size, "%s", slash ? slash + 1 : d->path);
	return buf;
}

/* 128-bit products (gcc and clang; __extension__ keeps -Wpedantic quiet). */
__extension__ typedef unsigned __int128 dump_u128;

uint64_t dump_whatif_served_at(const struct dump *d, uint64_t b)
{
	dump_u128 num;
	uint64_t run, rise;
	int i;

	if (d->npoints == 0)
		return 0;
	if (b <= d->curve_budget[0])
		return d->curve_served[0];
	for (i = 1; i < d->npoints; i++) {
		if (b > d->curve_budget[i])
			continue;
		if (d->curve_budget[i] == d->curve_budget[i - 1])
			return d->curve_served[i];
		/* dump_load keeps only curves that never go down: the rise is a count */
		if (d->curve_served[i] < d->curve_served[i - 1])
			return d->curve_served[i - 1];
		/* Exact in integers (doubles overshoot near 2^63): rise * (b - b0) / run < 2^128. */
		run = d->curve_budget[i] - d->curve_budget[i - 1];
		rise = d->curve_served[i] - d->curve_served[i - 1];
		num = (dump_u128)rise * (b - d->curve_budget[i - 1]);
		return d->curve_served[i - 1] + (uint64_t)(num / run);
	}
	return d->curve_served[d->npoints - 1];
}
