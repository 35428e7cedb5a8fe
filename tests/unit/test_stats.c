/*
 * Unit tests of shim/stats: counters, the JSON dump (parsed back with
 * jansson, every key of DESIGN.md checked with its type), the human summary
 * and its layout suggestion, the once-only exit report written by rename,
 * and exact sums under concurrent updates.
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

#include "log.h"
#include "stats.h"

static char tmpdir[64];

static int suite_init(void)
{
	strcpy(tmpdir, "/tmp/vrampool-test-stats-XXXXXX");
	return mkdtemp(tmpdir) == NULL;
}

static int suite_clean(void)
{
	return rmdir(tmpdir);
}

/* Runs stats_write_json into memory and parses it; the caller json_decrefs. */
static json_t *dump_json(long pid)
{
	char *buf = NULL;
	size_t len = 0;
	json_error_t jerr;
	json_t *root;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	CU_ASSERT_EQUAL(stats_write_json(f, pid), 0);
	fclose(f);
	CU_ASSERT(len > 0 && buf[len - 1] == '\n');
	CU_ASSERT(memchr(buf, '\n', len) == buf + len - 1);	/* one line */
	root = json_loads(buf, 0, &jerr);
	if (root == NULL)
		fprintf(stdout, "\n  JSON does not parse: %s: %s\n", jerr.text, buf);
	free(buf);
	return root;
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
	stats_write_summary(f);
	fclose(f);
	return buf;
}

static void test_counters(void)
{
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
	CU_ASSERT_STRING_EQUAL(stats_global.layout, "");
}

static void test_json_keys(void)
{
	static const char *const keys[][6] = {
		{ "copies", "h2d_calls", "matched_calls", "passthrough_calls", "fallbacks", "graph_capture" },
		{ "bytes", "requested", "h2d", "served_from_pool", "captured", NULL },
		{ "rows", "seen", "hits", "misses", "captured", "pooled" },
		{ "pool", "budget", "bytes", "slabs", "evictions", "evicted_bytes" },
		{ "pool", "oom_retries", "device_ops", NULL, NULL, NULL },
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
	json_decref(root);
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

/* Records calls copies of size bytes. */
static void note(uint64_t size, int calls)
{
	int i;

	for (i = 0; i < calls; i++)
		stats_note_size(size);
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

/* Returns the inode of path, or 0. */
static ino_t inode_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* Runs stats_exit_report with fd 2 captured into out. */
static void exit_report_captured(int quiet, const char *path, char *out, size_t len)
{
	FILE *tmp = tmpfile();
	int saved;
	size_t n;

	out[0] = '\0';
	CU_ASSERT_PTR_NOT_NULL_FATAL(tmp);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fileno(tmp), STDERR_FILENO);
	stats_exit_report(quiet, path);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, len - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
}

static void test_exit_report_not_when_unused(void)
{
	char path[128], out[1024];

	snprintf(path, sizeof(path), "%s/unused.json", tmpdir);
	stats_reset(1, "3072");
	stats_add(ST_H2D_CALLS, 1);
	exit_report_captured(0, path, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(access(path, F_OK), -1);
}

static void test_exit_report_once_by_rename(void)
{
	char path[128], tmp[160], out[4096];
	json_error_t jerr;
	json_t *root;
	ino_t before;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stats.json", tmpdir);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("old\n", f);
	fclose(f);
	before = inode_of(path);

	stats_reset(1, "3072");
	stats_mark_used();
	stats_add(ST_H2D_CALLS, 5);
	exit_report_captured(0, path, out, sizeof(out));
	CU_ASSERT(strstr(out, "vrampool: 5 host-to-device copies") != NULL);
	CU_ASSERT(inode_of(path) != before);	/* replaced by rename, not rewritten */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
	root = json_load_file(path, 0, &jerr);
	CU_ASSERT_PTR_NOT_NULL(root);
	if (root) {
		CU_ASSERT_EQUAL(json_int_at(root, "copies", "h2d_calls"), 5);
		CU_ASSERT_EQUAL(json_int_at(root, NULL, "pid"), getpid());
		json_decref(root);
	}

	/* A second report does nothing: the file and stderr stay as they are. */
	before = inode_of(path);
	stats_add(ST_H2D_CALLS, 1);
	exit_report_captured(0, path, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(inode_of(path), before);
	unlink(path);
}

static void test_exit_report_expands_pid_and_quiet(void)
{
	char pattern[128], path[128], out[1024];

	snprintf(pattern, sizeof(pattern), "%s/s-%%p.json", tmpdir);
	snprintf(path, sizeof(path), "%s/s-%ld.json", tmpdir, (long)getpid());
	stats_reset(1, "3072");
	stats_mark_used();
	exit_report_captured(1, pattern, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(access(path, R_OK), 0);
	unlink(path);
}

static void test_exit_report_write_failure(void)
{
	char path[128], out[1024];

	snprintf(path, sizeof(path), "%s/missing-dir/stats.json", tmpdir);
	stats_reset(1, "3072");
	stats_mark_used();
	exit_report_captured(1, path, out, sizeof(out));
	CU_ASSERT(strncmp(out, "vrampool: could not write the stats to ", 39) == 0);
	CU_ASSERT(strstr(out, "missing-dir") != NULL);
	CU_ASSERT(strchr(out, '\n') == out + strlen(out) - 1);
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

int main(void)
{
	CU_pSuite s;
	int failures;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("stats", suite_init, suite_clean);
	CU_add_test(s, "counters add, subtract, set and reset", test_counters);
	CU_add_test(s, "the JSON dump parses and has every key of DESIGN.md", test_json_keys);
	CU_add_test(s, "a disabled run without layout dumps false and null", test_json_disabled_without_layout);
	CU_add_test(s, "the layout string is escaped in the JSON", test_json_escapes_layout);
	CU_add_test(s, "the JSON lists at most 16 sizes, most bytes first", test_json_sizes);
	CU_add_test(s, "a full size table drops new sizes and keeps counting old ones", test_size_table_full);
	CU_add_test(s, "the summary gives bytes, the served share and the pool", test_summary_enabled);
	CU_add_test(s, "the pass-through summary says so with the counts", test_summary_pass_through);
	CU_add_test(s, "without a layout the size with most bytes is suggested", test_summary_suggests_largest);
	CU_add_test(s, "full and partial batches of one row suggest that row", test_summary_suggests_common_row);
	CU_add_test(s, "without copies the summary says none was seen", test_summary_nothing_seen);
	CU_add_test(s, "an unused process reports nothing", test_exit_report_not_when_unused);
	CU_add_test(s, "the exit report runs once and renames its dump into place", test_exit_report_once_by_rename);
	CU_add_test(s, "%p in the dump path is the pid and quiet hides the summary",
		    test_exit_report_expands_pid_and_quiet);
	CU_add_test(s, "a dump that cannot be written costs one log line", test_exit_report_write_failure);
	CU_add_test(s, "four threads adding at once sum exactly", test_concurrent_adds);
	CU_add_test(s, "byte counts are formatted in binary units with one decimal", test_log_bytes);
	CU_add_test(s, "a log line is one prefixed line, cut short when too long", test_log_line_is_one_write);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failures = (int)CU_get_number_of_failures();
	CU_cleanup_registry();
	return failures ? 1 : 0;
}
