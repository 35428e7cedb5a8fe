/*
 * Unit tests of core/stats (the counters) and report/json, report/summary,
 * report/reason: counters, the JSON dump (parsed back with
 * jansson, every key checked with its type, null where unknown), the
 * reason a pool does not serve, the human summary (the why, what-if,
 * evidence, stood-down and suggestion lines), the text fields read while
 * they are written, and exact sums under concurrent updates. The exit
 * report that writes these is report's (test_report.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <jansson.h>

#include "cunit_main.h"
#include "pool/fingerprint.h"
#include "core/log.h"
#include "core/stats.h"
#include "pool/ledger.h"
#include "pool/whatif.h"
#include "report/json.h"
#include "report/reason.h"
#include "report/summary.h"

/* Runs stats_write_json into memory for d and parses it; the caller json_decrefs. */
static json_t *dump_json_d(const struct stats_dump *d)
{
	char *buf = NULL;
	size_t len = 0;
	json_error_t jerr;
	json_t *root;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	CU_ASSERT_EQUAL(report_write_json(f, d), 0);
	fclose(f);
	CU_ASSERT(len > 0 && buf[len - 1] == '\n');
	CU_ASSERT(memchr(buf, '\n', len) == buf + len - 1);	/* one line */
	root = json_loads(buf, 0, &jerr);
	if (root == NULL)
		fprintf(stdout, "\n  JSON does not parse: %s: %s\n", jerr.text, buf);
	free(buf);
	return root;
}

/* dump_json_d for pid, nothing else known. */
static json_t *dump_json(long pid)
{
	struct stats_dump d = { .pid = pid };

	return dump_json_d(&d);
}

/* Returns the integer at obj.key (asserting it is an integer), or -1. */
static json_int_t json_int_at(json_t *root, const char *obj, const char *key)
{
	json_t *o = obj ? json_object_get(root, obj) : root;
	json_t *v = o ? json_object_get(o, key) : NULL;

	CU_ASSERT(json_is_integer(v));
	if (!json_is_integer(v)) {
		fprintf(stdout, "\n  missing or not an integer: %s.%s\n", obj ? obj : "", key);
		return -1;
	}
	return json_integer_value(v);
}

/* Runs stats_write_summary into memory; the caller frees. */
static char *summary(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	report_write_summary(f, NULL);
	fclose(f);
	return buf;
}

/* The summary for d; the caller frees. */
static char *summary_d(const struct stats_dump *d)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	report_write_summary(f, d);
	fclose(f);
	return buf;
}

/* Returns the string at obj.key, or NULL when it is null (asserting one or the other). */
static const char *json_str_at(json_t *root, const char *obj, const char *key)
{
	json_t *o = obj ? json_object_get(root, obj) : root;
	json_t *v = o ? json_object_get(o, key) : NULL;

	CU_ASSERT(json_is_string(v) || json_is_null(v));
	if (!json_is_string(v) && !json_is_null(v))
		fprintf(stdout, "\n  missing or not a string or null: %s.%s\n", obj ? obj : "", key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Records calls copies of size bytes. */
static void note(uint64_t size, int calls)
{
	int i;

	for (i = 0; i < calls; i++)
		stats_note_size(size);
}

static void test_counters(void)
{
	char buf[64];

	whatif_reset();
	stats_reset(1, "3072");
	CU_ASSERT_EQUAL(stats_get(ST_H2D_CALLS), 0);
	CU_ASSERT_EQUAL(stats_state(), POOL_DORMANT);
	stats_add(ST_H2D_CALLS, 3);
	stats_add(ST_H2D_CALLS, 4);
	CU_ASSERT_EQUAL(stats_get(ST_H2D_CALLS), 7);
	stats_sub(ST_H2D_CALLS, 2);
	CU_ASSERT_EQUAL(stats_get(ST_H2D_CALLS), 5);
	stats_set(ST_POOL_SLABS, 9);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_SLABS), 9);
	stats_set_state(POOL_FULL);
	CU_ASSERT_EQUAL(stats_state(), POOL_FULL);
	CU_ASSERT_STRING_EQUAL(stats_state_name(POOL_OFF), "off");
	CU_ASSERT_STRING_EQUAL(stats_state_name(POOL_DORMANT), "dormant");
	CU_ASSERT_STRING_EQUAL(stats_state_name(POOL_ACTIVE), "active");
	CU_ASSERT_STRING_EQUAL(stats_state_name(POOL_FULL), "full");
	CU_ASSERT_STRING_EQUAL(stats_state_name(POOL_LATCHED), "latched");
	stats_reset(0, NULL);
	CU_ASSERT_EQUAL(stats_get(ST_H2D_CALLS), 0);
	CU_ASSERT_EQUAL(stats_get(ST_POOL_SLABS), 0);
	CU_ASSERT_EQUAL(stats_state(), POOL_OFF);
	stats_get_text(STATS_LAYOUT, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "");
}

static void test_json_keys(void)
{
	static const char *const keys[][6] = {
		{ "copies", "h2d_calls", "matched_calls", "passthrough_calls", "fallbacks", "graph_capture" },
		{ "copies", "driver_calls", "batch_calls", "stood_down", NULL, NULL },
		{ "bytes", "requested", "h2d", "served_from_pool", "captured", NULL },
		{ "rows", "seen", "hits", "misses", "captured", "pooled" },
		{ "pool", "budget", "bytes", "slabs", "evictions", "evicted_bytes" },
		{ "pool", "oom_retries", "device_ops", "displaced_bytes", "displaced_slabs", "faults" },
		{ "pool", "gather_launches", "stand_downs", NULL, NULL, NULL },
		{ "probe", "free", "total", "reserve", "margin", NULL },
		{ "time_ns", "fingerprint", "shim", NULL, NULL, NULL },
		{ "allocs", "calls", NULL, NULL, NULL, NULL },
	};
	json_t *root;
	size_t i, j;
	int id;

	stats_reset(1, "u8:3x224x224");
	for (id = 0; id < ST__COUNT; id++)
		stats_set((enum stat_id)id, 1000 + (uint64_t)id);
	stats_set_state(POOL_ACTIVE);
	atomic_store(&stats_global.probe_decided, 1);
	root = dump_json(4321);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_EQUAL(json_int_at(root, NULL, "vrampool"), 1);
	CU_ASSERT_EQUAL(json_int_at(root, NULL, "pid"), 4321);
	CU_ASSERT(json_is_true(json_object_get(root, "enabled")));
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "layout")), "u8:3x224x224");
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		for (j = 1; j < 6 && keys[i][j] != NULL; j++)
			CU_ASSERT(json_int_at(root, keys[i][0], keys[i][j]) >= 1000);
	CU_ASSERT_EQUAL(json_int_at(root, "bytes", "requested"), 1000 + ST_BYTES_REQUESTED);
	CU_ASSERT_EQUAL(json_int_at(root, "rows", "pooled"), 1000 + ST_ROWS_POOLED);
	CU_ASSERT_EQUAL(json_int_at(root, "time_ns", "shim"), 1000 + ST_TIME_SHIM_NS);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(root, "pool"), "state")),
			       "active");
	CU_ASSERT(json_is_true(json_object_get(json_object_get(root, "probe"), "decided")));
	CU_ASSERT(json_is_array(json_object_get(root, "sizes")));
	CU_ASSERT_EQUAL(json_int_at(root, "copies", "stood_down"), 1000 + ST_STOOD_DOWN_CALLS);
	CU_ASSERT_EQUAL(json_int_at(root, "pool", "stand_downs"), 1000 + ST_BACKOFF_EVENTS);
	CU_ASSERT_EQUAL(json_int_at(root, "pool", "gather_launches"), 1000 + ST_GATHER_LAUNCHES);
	CU_ASSERT_EQUAL(json_int_at(root, "rows", "refused"), 1000 + ST_ROWS_REFUSED);
	CU_ASSERT_EQUAL(json_int_at(json_object_get(root, "pool"), "doorkeeper", "engagements"),
			1000 + ST_ADMIT_ENGAGEMENTS);
	CU_ASSERT_EQUAL(json_int_at(json_object_get(root, "pool"), "doorkeeper", "disengagements"),
			1000 + ST_ADMIT_DISENGAGEMENTS);
	json_decref(root);
}

/* Every key of the dump, with its type, null where nothing is known yet. */
static void test_json_every_key_null_where_unknown(void)
{
	static const char *const top[] = { "vrampool", "pid", "rank", "host", "enabled", "mode", "final",
					   "ended_by", "elapsed_s", "layout", "layout_source", "reason",
					   "evidence", "suggest", "copies", "bytes", "rows", "pool", "probe",
					   "time_ns", "whatif", "allocs", "sizes", "ledger", "specs",
					   /* issue 19 */
					   "format", "version", "command", "started", "started_unix_ms", "ended",
					   "ended_unix_ms", "device", "pace" };
	json_t *root, *w, *curve, *pool;
	size_t i;

	whatif_reset();
	stats_reset(1, "3072");
	root = dump_json(77);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_EQUAL(json_object_size(root), sizeof(top) / sizeof(top[0]));
	for (i = 0; i < sizeof(top) / sizeof(top[0]); i++)
		CU_ASSERT_PTR_NOT_NULL(json_object_get(root, top[i]));
	CU_ASSERT(json_is_null(json_object_get(root, "rank")));
	CU_ASSERT(json_is_null(json_object_get(root, "host")));
	CU_ASSERT(json_is_null(json_object_get(root, "ended_by")));
	CU_ASSERT(json_is_null(json_object_get(root, "elapsed_s")));	/* no CUDA call yet */
	/* issue 19: what is not known is null, the command empty, the pace without a window */
	CU_ASSERT_EQUAL(json_int_at(root, NULL, "format"), 2);
	CU_ASSERT(json_is_string(json_object_get(root, "version")));
	CU_ASSERT_EQUAL(json_array_size(json_object_get(root, "command")), 0);
	CU_ASSERT(json_is_null(json_object_get(root, "started")));
	CU_ASSERT(json_is_null(json_object_get(root, "ended_unix_ms")));
	CU_ASSERT(json_is_null(json_object_get(root, "device")));
	CU_ASSERT_EQUAL(json_int_at(root, "pace", "copies"), 0);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(json_object_get(root, "pace"), "windows")), 0);
	CU_ASSERT(json_is_null(json_object_get(json_object_get(root, "pace"), "steady")));
	CU_ASSERT(json_is_null(json_object_get(root, "layout_source")));
	CU_ASSERT(json_is_null(json_object_get(root, "evidence")));
	CU_ASSERT(json_is_null(json_object_get(root, "suggest")));
	CU_ASSERT(json_is_false(json_object_get(root, "final")));
	CU_ASSERT_STRING_EQUAL(json_str_at(root, NULL, "mode"), "on");
	CU_ASSERT_STRING_EQUAL(json_str_at(root, NULL, "layout"), "3072");
	/* dormant: the reason is never missing */
	CU_ASSERT_STRING_EQUAL(json_str_at(root, NULL, "reason"),
			       "no copy matched the layout 3072: no host-to-device copy was seen");
	pool = json_object_get(root, "pool");
	CU_ASSERT_EQUAL(json_object_size(pool), 18);
	CU_ASSERT(json_is_null(json_object_get(pool, "gather")));
	CU_ASSERT(json_is_false(json_object_get(pool, "stood_down")));
	/* admission on evidence (issue 16) */
	CU_ASSERT_EQUAL(json_object_size(json_object_get(pool, "doorkeeper")), 3);
	CU_ASSERT(json_is_false(json_object_get(json_object_get(pool, "doorkeeper"), "engaged")));
	CU_ASSERT_EQUAL(json_int_at(pool, "doorkeeper", "engagements"), 0);
	CU_ASSERT_EQUAL(json_int_at(root, "rows", "refused"), 0);
	CU_ASSERT_EQUAL(json_object_size(json_object_get(root, "copies")), 10);
	/* the cost ledger: its mode, no stated link, no spec met yet */
	CU_ASSERT_STRING_EQUAL(json_str_at(root, "ledger", "mode"), "on");
	CU_ASSERT(json_is_null(json_object_get(json_object_get(root, "ledger"), "link_gbps_stated")));
	CU_ASSERT_EQUAL(json_array_size(json_object_get(root, "specs")), 0);
	CU_ASSERT(json_is_integer(json_object_get(json_object_get(root, "time_ns"), "shim_cpu")));
	CU_ASSERT_EQUAL(json_object_size(json_object_get(json_object_get(root, "copies"), "passthrough_reasons")), 9);
	w = json_object_get(root, "whatif");
	CU_ASSERT_EQUAL(json_object_size(w), 7);
	CU_ASSERT_EQUAL(json_int_at(w, NULL, "unique_bytes"), 0);
	CU_ASSERT_EQUAL(json_int_at(w, NULL, "repeat_bytes"), 0);
	CU_ASSERT_EQUAL(json_int_at(w, NULL, "tracked_rows"), 0);
	CU_ASSERT(json_is_false(json_object_get(w, "sampled")));
	CU_ASSERT_EQUAL(json_int_at(w, NULL, "sample_one_in"), 1);
	CU_ASSERT(json_is_false(json_object_get(w, "estimate")));
	curve = json_object_get(w, "curve");
	CU_ASSERT_EQUAL(json_array_size(curve), 1);
	CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_array_get(curve, 0), 0)), 0);
	json_decref(root);
}

static void test_json_who_and_when(void)
{
	static const char cmd[] = "python3\0train.py\0--lr=\"1\"\0cut";
	struct stats_dump d = { .pid = 5, .rank = "3", .host = "node\x01", .final = 1, .ended_by = "SIGTERM",
				.command = cmd, .command_len = sizeof(cmd) - 1,
				.started_ms = 1796187600123, .ended_ms = 951782400999,
				.device_name = "NVIDIA H200", .device_ordinal = 2 };
	json_t *root, *c;
	double e;

	whatif_reset();
	stats_reset(0, "");
	stats_set_mode(STATS_MODE_DRY);
	stats_mark_used();
	usleep(20000);
	root = dump_json_d(&d);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_EQUAL(json_int_at(root, NULL, "rank"), 3);	/* a number (issue 19) */
	/* issue 19: the command's arguments (the last one cut, unended), the times, the device */
	c = json_object_get(root, "command");
	CU_ASSERT_EQUAL(json_array_size(c), 4);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(c, 1)), "train.py");
	CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(c, 2)), "--lr=\"1\"");
	CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(c, 3)), "cut");
	CU_ASSERT_STRING_EQUAL(json_str_at(root, NULL, "started"), "2026-12-02T05:00:00.123Z");
	CU_ASSERT_EQUAL(json_int_at(root, NULL, "started_unix_ms"), 1796187600123);
	CU_ASSERT_STRING_EQUAL(json_str_at(root, NULL, "ended"), "2000-02-29T00:00:00.999Z");	/* a leap day */
	CU_ASSERT_EQUAL(json_int_at(root, NULL, "ended_unix_ms"), 951782400999);
	CU_ASSERT_STRING_EQUAL(json_str_at(root, "device", "name"), "NVIDIA H200");
	CU_ASSERT_EQUAL(json_int_at(root, "device", "ordinal"), 2);
	CU_ASSERT_STRING_EQUAL(json_str_at(root, NULL, "host"), "node\x01");
	CU_ASSERT_STRING_EQUAL(json_str_at(root, NULL, "mode"), "dry");
	CU_ASSERT_STRING_EQUAL(json_str_at(root, NULL, "ended_by"), "SIGTERM");
	CU_ASSERT(json_is_true(json_object_get(root, "final")));
	CU_ASSERT(json_is_real(json_object_get(root, "elapsed_s")));
	e = json_real_value(json_object_get(root, "elapsed_s"));
	CU_ASSERT(e >= 0.02 && e < 60);
	json_decref(root);
}

/*
 * A VRAMPOOL_LAYOUT rejected at load is said as rejected, with the
 * parser's reason, never as no layout set (the pool is off, the mode
 * off, as for VRAMPOOL=off, but the user asked for no pass-through).
 */
static void test_rejected_layout_said(void)
{
	struct stats_dump bad = {
		.problem = "VRAMPOOL_LAYOUT='u8:0x3' is not a layout: bad shape in 'u8:0x3' (expected dims >= 1 "
			   "like 3x224x224)",
		.invalid = 1,
		.layout_error = "bad shape in 'u8:0x3' (expected dims >= 1 like 3x224x224)",
	};
	char *s;

	whatif_reset();
	stats_reset(0, NULL);
	s = summary_d(&bad);
	CU_ASSERT(strstr(s, "vrampool: VRAMPOOL_LAYOUT was rejected at load (bad shape in 'u8:0x3' (expected "
			    "dims >= 1 like 3x224x224)); no host-to-device copy seen\n") != NULL);
	CU_ASSERT(strstr(s, "no VRAMPOOL_LAYOUT set") == NULL);
	free(s);
	stats_note_size(196608);
	s = summary_d(&bad);
	CU_ASSERT(strstr(s, "VRAMPOOL_LAYOUT was rejected at load (bad shape in 'u8:0x3' (expected dims >= 1 "
			    "like 3x224x224)); copy sizes seen (most bytes first): 196608 (x1, ") != NULL);
	CU_ASSERT(strstr(s, "no VRAMPOOL_LAYOUT set") == NULL);
	CU_ASSERT(strstr(s, "VRAMPOOL=off reads no row") == NULL);
	free(s);
}

/* The dump's reason and the summary's agree; each state says why. */
static void test_reason_falls_back(void)
{
	struct stats_dump bad = { .problem = "VRAMPOOL_SLAB='12Q' is not a size (expected e.g. 64M, 1G)" };
	char buf[STATS_TEXT_MAX];
	char *s;

	whatif_reset();
	stats_reset(0, "3072");
	CU_ASSERT_STRING_EQUAL(report_reason(NULL, buf, sizeof(buf)), "VRAMPOOL=off");
	CU_ASSERT_STRING_EQUAL(report_reason(&bad, buf, sizeof(buf)), bad.problem);
	s = summary_d(&bad);
	/* the variable's line at load said why: the summary names it and does not repeat it */
	CU_ASSERT(strncmp(s, "vrampool: pass-through, pool off by a malformed VRAMPOOL_SLAB: ", 63) == 0);
	CU_ASSERT(strstr(s, "is not a size") == NULL);
	free(s);
	stats_set_mode(STATS_MODE_DRY);
	CU_ASSERT(strncmp(report_reason(NULL, buf, sizeof(buf)), "VRAMPOOL=dry", 12) == 0);

	stats_reset(1, "");
	stats_set_state(POOL_OFF);
	CU_ASSERT_STRING_EQUAL(report_reason(NULL, buf, sizeof(buf)), "no VRAMPOOL_LAYOUT set");

	stats_reset(1, "3072");
	stats_add(ST_MATCHED_CALLS, 1);
	CU_ASSERT(strstr(report_reason(NULL, buf, sizeof(buf)), "VRAMPOOL_PROBE_AFTER") != NULL);
	s = summary();
	CU_ASSERT(strstr(s, "budget not decided") != NULL);
	free(s);
	atomic_store(&stats_global.probe_decided, 1);
	stats_set(ST_PROBE_FREE, 600ULL << 20);
	stats_set(ST_PROBE_TOTAL, 1ULL << 30);
	stats_set(ST_PROBE_RESERVE, 96ULL << 20);
	stats_set(ST_PROBE_MARGIN, 512ULL << 20);
	CU_ASSERT_STRING_EQUAL(report_reason(NULL, buf, sizeof(buf)),
			       "the probe found 600.0 MiB free of 1.0 GiB: no room for one slab beside the "
			       "reserve (96.0 MiB) and the margin (512.0 MiB)");
	s = summary();
	CU_ASSERT(strstr(s, "budget not decided") == NULL);
	CU_ASSERT(strstr(s, "vrampool: pool dormant: the probe found 600.0 MiB free") != NULL);
	free(s);

	stats_set(ST_POOL_BUDGET, 1ULL << 30);
	stats_set_state(POOL_FULL);
	CU_ASSERT_STRING_EQUAL(report_reason(NULL, buf, sizeof(buf)),
			       "the budget of 1.0 GiB is full: rows past it cross PCIe");
	stats_set_state(POOL_LATCHED);
	stats_set(ST_POOL_EVICTIONS, 2);
	CU_ASSERT(strstr(report_reason(NULL, buf, sizeof(buf)), "2 slabs given back") != NULL);
	stats_set_state(POOL_ACTIVE);
	CU_ASSERT_PTR_NULL(report_reason(NULL, buf, sizeof(buf)));
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: pool ") == NULL);
	free(s);
	/* the pool's own reason wins, and reaches the summary cleaned of control characters */
	stats_set_state(POOL_FULL);
	stats_set_text(STATS_REASON, "budget of 8 GiB\033[2J is full");
	CU_ASSERT_STRING_EQUAL(report_reason(NULL, buf, sizeof(buf)), "budget of 8 GiB?[2J is full");
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: pool full: budget of 8 GiB?[2J is full\n") != NULL);
	CU_ASSERT(strchr(s, '\033') == NULL);
	free(s);
}

/* Observes rows 0..n-1 e times (a dataset over e epochs) in the what-if module. */
static void whatif_epochs(uint64_t n, unsigned e, uint64_t row)
{
	struct fp f;
	uint64_t i;
	unsigned k;

	for (k = 0; k < e; k++)
		for (i = 0; i < n; i++) {
			f.lo = (i + 1) * 0x9E3779B97F4A7C15ULL;
			f.hi = i;
			whatif_observe(&f, NULL, 1, row, NULL);
		}
}

static void test_summary_whatif(void)
{
	json_t *root, *curve, *last;
	char *s;
	size_t i;
	int found = 0;

	whatif_setup(0);
	stats_reset(1, "3072");
	stats_set_state(POOL_FULL);
	stats_set(ST_POOL_BUDGET, 200 * 3072);
	whatif_epochs(1000, 4, 3072);	/* U = 3000 KiB, R = 9000 KiB */
	/* what a 200-row pool served: 3 later epochs of its 200 rows */
	stats_add(ST_BYTES_SERVED, 3 * 200 * 3072);
	s = summary();
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT(strstr(s, "vrampool: a budget of 2.9 MiB would have served 75.0% (8.8 MiB of 11.7 MiB matched bytes)\n")
		  != NULL);
	free(s);
	root = dump_json(1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_EQUAL(json_int_at(json_object_get(root, "whatif"), NULL, "unique_bytes"), 1000 * 3072);
	CU_ASSERT_EQUAL(json_int_at(json_object_get(root, "whatif"), NULL, "repeat_bytes"), 3000 * 3072);
	curve = json_object_get(json_object_get(root, "whatif"), "curve");
	CU_ASSERT(json_array_size(curve) >= 16);
	last = json_array_get(curve, json_array_size(curve) - 1);
	CU_ASSERT_EQUAL(json_integer_value(json_array_get(last, 0)), 1000 * 3072);
	CU_ASSERT_EQUAL(json_integer_value(json_array_get(last, 1)), 3000 * 3072);
	for (i = 0; i < json_array_size(curve); i++)
		if (json_integer_value(json_array_get(json_array_get(curve, i), 0)) == 200 * 3072) {
			found = 1;
			/* the point at the actual budget is what the pool served */
			CU_ASSERT(json_integer_value(json_array_get(json_array_get(curve, i), 1)) >= 3 * 199 * 3072);
			CU_ASSERT(json_integer_value(json_array_get(json_array_get(curve, i), 1)) <= 3 * 201 * 3072);
		}
	CU_ASSERT(found);
	json_decref(root);

	/* a budget above U that served less (copies before the probe): not the budget's doing */
	stats_set(ST_POOL_BUDGET, 1ULL << 30);
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: the budget held every repeated row") != NULL);
	free(s);
	stats_set(ST_POOL_BUDGET, 200 * 3072);

	/* a run that got every repeat */
	stats_add(ST_BYTES_SERVED, 3 * 800 * 3072);
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: the budget held every repeated row") != NULL);
	CU_ASSERT(strstr(s, "would have served") == NULL);
	free(s);

	/* nothing repeated */
	whatif_reset();
	whatif_epochs(100, 1, 3072);
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: no matched row repeated") != NULL);
	free(s);
	whatif_reset();
}

static void test_summary_auto_and_stood_down(void)
{
	char *s;

	whatif_reset();
	stats_reset(1, "3072");
	stats_set_state(POOL_ACTIVE);
	stats_set_text(STATS_LAYOUT_SOURCE, "auto");
	stats_set_text(STATS_EVIDENCE, "rows of 3072 bytes repeated in 96%% of sampled rows over 33 copies");
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: layout found from the copies' content: 3072; rows of 3072 bytes "
			 "repeated in 96% of sampled rows over 33 copies\n") != NULL);
	CU_ASSERT(strstr(s, "stood down") == NULL);
	free(s);

	stats_reset(1, "auto");
	stats_set_state(POOL_DORMANT);
	stats_set_text(STATS_EVIDENCE, "no row size repeated in 64 copies");
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: pool dormant: VRAMPOOL_LAYOUT=auto found no row size: no row size repeated "
			 "in 64 copies; copy sizes seen (most bytes first): none; next: run longer") != NULL);
	CU_ASSERT(strstr(s, "found automatically") == NULL);
	free(s);

	stats_reset(1, "3072");
	stats_add(ST_MATCHED_CALLS, 40);
	stats_add(ST_STOOD_DOWN_CALLS, 30);
	stats_add(ST_BACKOFF_EVENTS, 1);
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: pooling stood down after 10 copies (rows did not hit the pool and it "
			 "could admit no more; one copy in 8 sampled after)\n") != NULL);
	free(s);
	stats_reset(1, "3072");
	atomic_store(&stats_global.stood_down, 1);
	s = summary();
	CU_ASSERT(strstr(s, "pooling stood down") != NULL);
	CU_ASSERT(strstr(s, "second sighting") == NULL);
	free(s);
	/* stood down while the doorkeeper admits only rows seen twice: the line says so */
	stats_reset(1, "3072");
	stats_add(ST_MATCHED_CALLS, 40);
	stats_add(ST_STOOD_DOWN_CALLS, 30);
	stats_add(ST_BACKOFF_EVENTS, 1);
	stats_add(ST_ADMIT_ENGAGEMENTS, 1);
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: pooling stood down after 10 copies (rows did not hit the pool and it "
			 "admitted only rows seen twice; one copy in 8 sampled after)\n") != NULL);
	free(s);
	/* admission on evidence (issue 16): the doorkeeper says what it kept out */
	stats_reset(1, "3072");
	stats_add(ST_ADMIT_ENGAGEMENTS, 2);
	stats_add(ST_ADMIT_DISENGAGEMENTS, 1);
	stats_add(ST_ROWS_REFUSED, 5000);
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: a pass of the rows seen got no hits: rows are captured on their second "
			 "sighting (5000 rows seen once kept out of the pool; engaged 2 times, disengaged 1)\n")
		  != NULL);
	free(s);
}

static void test_summary_suggests_from_evidence(void)
{
	char *s;

	whatif_reset();
	stats_reset(1, "");
	note(64 * 3072, 100);
	stats_set_text(STATS_EVIDENCE, "rows of 3072 bytes repeated in 97%% of sampled rows");
	stats_set_text(STATS_SUGGEST, "3072");
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: no VRAMPOOL_LAYOUT set; rows of 3072 bytes repeated in 97% of sampled rows; "
			 "try VRAMPOOL_LAYOUT=3072\n") != NULL);
	CU_ASSERT(strstr(s, "most bytes first") == NULL);
	free(s);
	stats_set_text(STATS_SUGGEST, "%s", "");
	stats_set_text(STATS_EVIDENCE, "no row size repeated");
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: no VRAMPOOL_LAYOUT set; no row size repeated\n") != NULL);
	free(s);
}

/*
 * Issue 19, case 1: a small budget that filled and stood down is "below
 * the unique working set", with the figures, whenever the curve shows
 * repeats it could not hold; host-side augmentation only when the curve
 * shows no repeat. In the dump's reason and the summary alike.
 */
static void test_reason_budget_below_working_set(void)
{
	char why[REPORT_REASON_MAX], *s;
	json_t *root;

	whatif_reset();
	stats_reset(1, "3072");
	whatif_epochs(800, 4, 3072);            /* 2.3 MiB distinct, 75% repeats */
	stats_set(ST_POOL_BUDGET, 100 * 3072);
	stats_set_state(POOL_FULL);
	stats_add(ST_BACKOFF_EVENTS, 1);
	stats_add(ST_MATCHED_CALLS, 40);
	CU_ASSERT_PTR_NOT_NULL(report_repeat_why(why, sizeof(why)));
	CU_ASSERT(strstr(why, "the budget is below the unique working set: 2.3 MiB of distinct rows seen against a "
			 "budget of 300.0 KiB; a budget of 2.3 MiB would have served 75.0% of the matched bytes") != NULL);
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: pool full: the budget of 300.0 KiB is full: rows past it cross PCIe; the budget "
			 "is below the unique working set") != NULL);
	CU_ASSERT(strstr(s, "augmentation") == NULL);
	free(s);
	root = dump_json(1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT(strstr(json_str_at(root, NULL, "reason"), "below the unique working set") != NULL);
	json_decref(root);
	/* a pool that stood down, its reason from the pool, gets the same word */
	stats_set_text(STATS_REASON, "rows did not hit the pool and it can admit no more: pooling stood down after "
		       "40 copies");
	atomic_store(&stats_global.stood_down, 1);
	s = summary();
	CU_ASSERT(strstr(s, "pooling stood down after 40 copies; the budget is below the unique working set") != NULL);
	free(s);
	/* no repeat at all: augmentation */
	whatif_reset();
	whatif_epochs(800, 1, 3072);
	s = summary();
	CU_ASSERT(strstr(s, "no row repeated (2.3 MiB of distinct rows seen, the what-if curve finds no repeat): "
			 "host-side random augmentation") != NULL);
	CU_ASSERT(strstr(s, "working set") == NULL);
	free(s);
	/* copies of small rows went by unobserved: the curve cannot blame augmentation */
	whatif_set_unobserved();
	s = summary();
	CU_ASSERT(strstr(s, "went straight through unobserved: a dry run (VRAMPOOL=dry) tells whether rows repeat")
		  != NULL);
	CU_ASSERT(strstr(s, "augmentation") == NULL);
	free(s);
	atomic_store(&stats_global.stood_down, 0);
	whatif_reset();
}

/*
 * Issue 19, case 2 and item d: a layout no copy matched lists the copy
 * sizes seen and points to auto; the pass-through reasons are a line.
 */
static void test_reason_no_match_lists_sizes(void)
{
	char *s;
	json_t *root;

	whatif_reset();
	stats_reset(1, "u8:3x224x224");
	stats_set_state(POOL_DORMANT);
	note(786432, 124);
	note(512, 124);
	stats_add(ST_PASS_NO_MATCH, 248);
	stats_add(ST_PASS_SRC_NOT_HOST, 2);
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: pool dormant: no copy matched the layout u8:3x224x224: copy sizes seen (most "
			 "bytes first): 786432 (x124, 93.0 MiB), 512 (x124, 62.0 KiB); let the shim find the row "
			 "size with VRAMPOOL_LAYOUT=auto (vrampool run --layout auto)\n") != NULL);
	CU_ASSERT(strstr(s, "VRAMPOOL_PROBE_AFTER") == NULL);
	CU_ASSERT(strstr(s, "vrampool: 250 copies passed through untouched: 248 whose size matched no row of the "
			 "layout, 2 source not host memory\n") != NULL);
	free(s);
	root = dump_json(1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT(strstr(json_str_at(root, NULL, "reason"), "786432 (x124, 93.0 MiB)") != NULL);
	json_decref(root);
	/* VRAMPOOL=off alone is said by the first line: no reasons line */
	stats_reset(0, NULL);
	stats_add(ST_PASS_OFF, 5);
	s = summary();
	CU_ASSERT(strstr(s, "passed through untouched") == NULL);
	free(s);
}

/* The cost ledger's books are a line of the summary (issue 19, item e). */
static void test_summary_ledger_books(void)
{
	struct ledger_copy c = { .rows = 64, .row = 3072, .cpu_ns = 50000, .wall_ns = 60000, .hash_ns = 20000,
				 .hit_rows = 48, .calls_added = 2, .can_admit = 1 };
	struct ledger_link link = { .gbps = 4, .source = LEDGER_LINK_STATED };
	struct ledger l;
	char *s;

	whatif_reset();
	stats_reset(1, "3072");
	ledger_board_reset();
	ledger_init(&l);
	for (int i = 0; i < 4; i++)
		ledger_pooled(&l, &ledger_board[0], &c, &link, LEDGER_FORCE);
	s = summary();
	CU_ASSERT(strstr(s, "vrampool: cost ledger: 200.0 us of host time spent pooling 4 copies, ") != NULL);
	CU_ASSERT(strstr(s, "of link time saved, 8 device calls added; 0 copies stood aside") != NULL);
	free(s);
	ledger_board_reset();
}

/* A summary that does not fit ends at a line's end. */
static void test_summary_cut_at_a_line(void)
{
	char buf[150];
	int n;

	whatif_reset();
	stats_reset(1, "3072");
	stats_add(ST_H2D_CALLS, 12000);
	n = report_format_summary(buf, sizeof(buf), NULL);
	CU_ASSERT(n > 0 && n < (int)sizeof(buf));
	CU_ASSERT_EQUAL((int)strlen(buf), n);
	CU_ASSERT_EQUAL(buf[n - 1], '\n');
	CU_ASSERT(report_format_json(buf, sizeof(buf), NULL) == -ENOSPC);
}

#define TEXT_ROUNDS 20000

static const char text_a[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char text_b[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static void *text_writer(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < TEXT_ROUNDS; i++)
		stats_set_text(STATS_EVIDENCE, "%s", i % 2 ? text_a : text_b);
	return NULL;
}

/* Text fields read without a lock are never a mix of two values. */
static void test_text_read_while_written(void)
{
	char buf[STATS_TEXT_MAX];
	pthread_t t;
	int i, mixed = 0;

	stats_reset(1, "3072");
	stats_set_text(STATS_EVIDENCE, "%s", text_a);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, text_writer, NULL), 0);
	for (i = 0; i < TEXT_ROUNDS; i++) {
		stats_get_text(STATS_EVIDENCE, buf, sizeof(buf));
		mixed += strcmp(buf, text_a) != 0 && strcmp(buf, text_b) != 0;
	}
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(mixed, 0);
	stats_get_text(STATS_EVIDENCE, buf, 8);
	CU_ASSERT_EQUAL(strlen(buf), 7);
}

static void test_json_disabled_without_layout(void)
{
	json_t *root;

	stats_reset(0, "");
	root = dump_json(1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT(json_is_false(json_object_get(root, "enabled")));
	CU_ASSERT(json_is_null(json_object_get(root, "layout")));
	CU_ASSERT(json_is_false(json_object_get(json_object_get(root, "probe"), "decided")));
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(root, "pool"), "state")),
			       "off");
	CU_ASSERT_EQUAL(json_array_size(json_object_get(root, "sizes")), 0);
	json_decref(root);
}

static void test_json_escapes_layout(void)
{
	const char *odd = "a\"b\\c\nd\te\x01";
	json_t *root;

	stats_reset(1, odd);
	root = dump_json(1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "layout")), odd);
	json_decref(root);
}

static void test_json_sizes(void)
{
	json_t *root, *sizes, *e;
	uint64_t n;
	int i;

	stats_reset(1, "");
	for (n = 1; n <= 20; n++)
		for (i = 0; i < (int)n; i++)
			stats_note_size(n * 100);	/* size n*100, n calls: total n*n*100 */
	stats_note_size(0);
	root = dump_json(1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	sizes = json_object_get(root, "sizes");
	CU_ASSERT_EQUAL(json_array_size(sizes), 16);
	e = json_array_get(sizes, 0);
	CU_ASSERT_EQUAL(json_int_at(e, NULL, "bytes"), 2000);
	CU_ASSERT_EQUAL(json_int_at(e, NULL, "calls"), 20);
	CU_ASSERT_EQUAL(json_int_at(e, NULL, "total"), 40000);
	for (i = 1; i < 16; i++)
		CU_ASSERT(json_int_at(json_array_get(sizes, (size_t)i - 1), NULL, "total") >
			  json_int_at(json_array_get(sizes, (size_t)i), NULL, "total"));
	json_decref(root);
}

static void test_size_table_full(void)
{
	uint64_t n;
	int i, used = 0;

	stats_reset(1, "");
	for (n = 1; n <= STATS_MAX_SIZES + 10; n++)
		stats_note_size(n * 4096);
	stats_note_size(4096);
	for (i = 0; i < STATS_MAX_SIZES; i++) {
		used += stats_global.size_key[i] != 0;
		if (stats_global.size_key[i] == 4096)
			CU_ASSERT_EQUAL(stats_global.size_calls[i], 2);
	}
	CU_ASSERT_EQUAL(used, STATS_MAX_SIZES);
}

static void test_summary_enabled(void)
{
	char *s;

	stats_reset(1, "3072");
	stats_add(ST_H2D_CALLS, 12000);
	stats_add(ST_BYTES_REQUESTED, 1000ULL << 20);
	stats_add(ST_BYTES_SERVED, 875ULL << 20);
	stats_add(ST_BYTES_H2D, 125ULL << 20);
	stats_add(ST_ROWS_SEEN, 400000);
	stats_add(ST_ROWS_HITS, 350000);
	stats_add(ST_ROWS_MISSES, 50000);
	stats_add(ST_ROWS_CAPTURED, 50000);
	stats_set(ST_POOL_BYTES, 3ULL << 30);
	stats_set(ST_POOL_SLABS, 48);
	stats_set(ST_POOL_BUDGET, 8ULL << 30);
	stats_set_state(POOL_ACTIVE);
	s = summary();
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT(strstr(s, "vrampool: 12000 host-to-device copies, 1000.0 MiB requested; "
			 "875.0 MiB served from VRAM (87.5%), 125.0 MiB crossed PCIe\n") != NULL);
	CU_ASSERT(strstr(s, "vrampool: rows 400000 seen, 350000 hits, 50000 misses, 50000 captured; "
			 "pool active, 3.0 GiB in 48 slabs of budget 8.0 GiB\n") != NULL);
	CU_ASSERT(strstr(s, "VRAMPOOL_LAYOUT=") == NULL);
	free(s);
}

static void test_summary_pass_through(void)
{
	char *s;

	stats_reset(0, "3072");
	stats_add(ST_H2D_CALLS, 10);
	stats_add(ST_BYTES_REQUESTED, 30720);
	stats_add(ST_BYTES_H2D, 30720);
	s = summary();
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT(strstr(s, "pass-through") != NULL);
	CU_ASSERT(strstr(s, "10 host-to-device copies, 30.0 KiB requested") != NULL);
	CU_ASSERT(strstr(s, "rows") == NULL);
	free(s);
}

static void test_summary_suggests_largest(void)
{
	char *s;

	stats_reset(1, "");
	note(196608, 1200);
	note(512, 1200);
	s = summary();
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT(strstr(s, "vrampool: no VRAMPOOL_LAYOUT set; copy sizes seen (most bytes first): "
			 "196608 (x1200, 225.0 MiB), 512 (x1200, 600.0 KiB); "
			 "try VRAMPOOL_LAYOUT=196608\n") != NULL);
	CU_ASSERT(strstr(s, "served from VRAM") == NULL);
	CU_ASSERT(strstr(s, "nothing pooled without a layout") != NULL);
	free(s);
}

/* Off reads no row: it names the copy sizes and the runs that find the layout,
 * never a batch's size as the layout (issue 18). */
static void test_summary_off_suggests_looking(void)
{
	char *s;

	stats_reset(0, "");
	note(196608, 1200);
	s = summary();
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT(strstr(s, "copy sizes seen (most bytes first): 196608 (x1200, 225.0 MiB); ") != NULL);
	CU_ASSERT(strstr(s, "vrampool run --dry --layout auto") != NULL);
	CU_ASSERT(strstr(s, "try VRAMPOOL_LAYOUT") == NULL);
	free(s);
}

static void test_summary_suggests_common_row(void)
{
	char *s;

	stats_reset(1, "");
	note(63 * 3072, 100);	/* full batches */
	note(40 * 3072, 3);	/* the partial batch of each epoch */
	note(63 * 8, 100);	/* labels: too small to pull the row down */
	s = summary();
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT(strstr(s, "try VRAMPOOL_LAYOUT=3072 ") != NULL);
	free(s);

	stats_reset(1, "");
	note(4096, 10);
	note(100000, 1);	/* shares no row of 1 KiB or more */
	s = summary();
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT(strstr(s, "try VRAMPOOL_LAYOUT=100000\n") != NULL);
	free(s);
}

static void test_summary_nothing_seen(void)
{
	char *s;

	stats_reset(1, "");
	s = summary();
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT(strstr(s, "no host-to-device copy seen") != NULL);
	free(s);
}

#define ADD_THREADS 4
#define ADD_ROUNDS 200000

static void *adder(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < ADD_ROUNDS; i++) {
		stats_add(ST_BYTES_REQUESTED, 3);
		stats_add(ST_ROWS_SEEN, 1);
		if (i % 100 == 0)
			stats_note_size((uint64_t)(i % 7 + 1) * 1000);
	}
	return NULL;
}

static void test_concurrent_adds(void)
{
	pthread_t t[ADD_THREADS];
	uint64_t calls = 0, bytes = 0;
	int i, used = 0;

	stats_reset(1, "3072");
	for (i = 0; i < ADD_THREADS; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, adder, NULL), 0);
	for (i = 0; i < ADD_THREADS; i++)
		pthread_join(t[i], NULL);
	CU_ASSERT_EQUAL(stats_get(ST_BYTES_REQUESTED), 3ULL * ADD_THREADS * ADD_ROUNDS);
	CU_ASSERT_EQUAL(stats_get(ST_ROWS_SEEN), (uint64_t)ADD_THREADS * ADD_ROUNDS);
	for (i = 0; i < STATS_MAX_SIZES; i++) {
		if (stats_global.size_key[i] == 0)
			continue;
		used++;
		calls += stats_global.size_calls[i];
		bytes += stats_global.size_bytes[i];
		CU_ASSERT_EQUAL(stats_global.size_bytes[i],
				stats_global.size_calls[i] * stats_global.size_key[i]);
	}
	CU_ASSERT_EQUAL(used, 7);	/* no size claimed twice */
	CU_ASSERT_EQUAL(calls, (uint64_t)ADD_THREADS * (ADD_ROUNDS / 100));
	CU_ASSERT(bytes > 0);
}

static void test_log_bytes(void)
{
	char b[32];

	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), 0), "0 B");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), 1023), "1023 B");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), 1024), "1.0 KiB");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), 1536), "1.5 KiB");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), 640 * 1024), "640.0 KiB");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), (1 << 20) - 1), "1.0 MiB");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), 12ULL * (1 << 30) / 10), "1.2 GiB");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), 3ULL << 40), "3.0 TiB");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), 5000ULL << 40), "5000.0 TiB");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, sizeof(b), UINT64_MAX), "16777216.0 TiB");
	CU_ASSERT_STRING_EQUAL(log_bytes(b, 4, 1ULL << 30), "1.0");
}

static void test_log_line_is_one_write(void)
{
	char big[3000], out[4096];
	FILE *tmp = tmpfile();
	int saved;
	size_t n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(tmp);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	saved = dup(STDERR_FILENO);
	dup2(fileno(tmp), STDERR_FILENO);
	log_line("a %s b\nc", "mid");
	log_line("%s", big);
	log_set_verbose(0);
	log_verbose("hidden");
	log_set_verbose(1);
	log_verbose("shown %d", 7);
	log_set_verbose(0);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, sizeof(out) - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	CU_ASSERT(strncmp(out, "vrampool: a mid b c\nvrampool: xxx", 33) == 0);
	CU_ASSERT(strstr(out, "xxx...\nvrampool: shown 7\n") != NULL);
	CU_ASSERT(strstr(out, "hidden") == NULL);
	CU_ASSERT_EQUAL(n, 20 + 1024 + 18);
}

/*
 * elapsed_s is written to the microsecond: an A/B pair's off run can last
 * under a millisecond, and at three decimals it read 0 (the report's wall
 * time then had no ratio). Fails with millisecond precision.
 */
static void test_elapsed_to_the_microsecond(void)
{
	struct stats_dump d = { .pid = 5, .final = 1 };
	char *buf = NULL, *at, *dot;
	size_t len = 0;
	FILE *f;

	stats_reset(1, "3072");
	stats_mark_used();
	f = open_memstream(&buf, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(report_write_json(f, &d), 0);
	fclose(f);
	at = strstr(buf, "\"elapsed_s\": ");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	at += strlen("\"elapsed_s\": ");
	dot = strchr(at, '.');
	CU_ASSERT_PTR_NOT_NULL_FATAL(dot);
	CU_ASSERT_EQUAL(strspn(dot + 1, "0123456789"), 6);
	CU_ASSERT(strtod(at, NULL) > 0 && strtod(at, NULL) < 1);
	free(buf);
}

static const CU_TestInfo tests[] = {
	{ "counters add, subtract, set and reset", test_counters },
	{ "the JSON dump parses and has every key of DESIGN.md", test_json_keys },
	{ "a disabled run without layout dumps false and null", test_json_disabled_without_layout },
	{ "elapsed_s is written to the microsecond", test_elapsed_to_the_microsecond },
	{ "the layout string is escaped in the JSON", test_json_escapes_layout },
	{ "the JSON lists at most 16 sizes, most bytes first", test_json_sizes },
	{ "a full size table drops new sizes and keeps counting old ones", test_size_table_full },
	{ "the summary gives bytes, the served share and the pool", test_summary_enabled },
	{ "the pass-through summary says so with the counts", test_summary_pass_through },
	{ "without a layout the size with most bytes is suggested", test_summary_suggests_largest },
	{ "VRAMPOOL=off with no layout points to a dry auto run, not to a copy size",
	  test_summary_off_suggests_looking },
	{ "full and partial batches of one row suggest that row",
	  test_summary_suggests_common_row },
	{ "without copies the summary says none was seen", test_summary_nothing_seen },
	{ "every key of the dump is there with its type, null where unknown",
	  test_json_every_key_null_where_unknown },
	{ "the dump carries rank, host, mode, final, ended_by and elapsed seconds",
	  test_json_who_and_when },
	{ "an off, dormant, full or latched pool says why, in the dump and the summary alike",
	  test_reason_falls_back },
	{ "a rejected VRAMPOOL_LAYOUT is said as rejected, with why, not as no layout set",
	  test_rejected_layout_said },
	{ "the what-if line says what a bigger budget would have served, or that it held all",
	  test_summary_whatif },
	{ "the summary gives the automatic layout's evidence and a stand-down",
	  test_summary_auto_and_stood_down },
	{ "without a layout the evidence's suggestion comes first",
	  test_summary_suggests_from_evidence },
	{ "a summary too long for its buffer ends at a line's end", test_summary_cut_at_a_line },
	{ "a small budget's pool says the budget is below the unique working set, augmentation only without repeats",
	  test_reason_budget_below_working_set },
	{ "a layout no copy matched lists the sizes seen and points to auto; pass-through reasons are a line",
	  test_reason_no_match_lists_sizes },
	{ "the summary gives the cost ledger's books", test_summary_ledger_books },
	{ "a text field read while another thread writes it is never a mix",
	  test_text_read_while_written },
	{ "four threads adding at once sum exactly", test_concurrent_adds },
	{ "byte counts are formatted in binary units with one decimal", test_log_bytes },
	{ "a log line is one prefixed line, cut short when too long", test_log_line_is_one_write },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "stats",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
