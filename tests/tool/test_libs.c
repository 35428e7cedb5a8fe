/*
 * test_libs.c: CUnit suites of the vrampool command's libraries, linked
 * directly (no subcommand runs): text.c (escaping, byte counts), dump.c
 * with load.c (numbers it cannot represent, old and new dumps, the what-if
 * curve), telemetry.c (telemetry files), loader.c (regular files only, #! lines, shells, pyenv
 * shims) and report.c's likely reasons. The ELF facts are tested end to
 * end on files built by tests/e2e/tool_inspect.sh.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/cunit_main.h"
#include "dump.h"
#include "loader.h"
#include "vrampool.h"

static char tmpdir[256];

/* Writes TEXT to NAME in the suite's directory; returns the path (static). */
static const char *write_file(const char *name, const char *text)
{
	static char path[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Loads the dump TEXT; returns dump_load's result, the message in ERR. */
static int load_text(struct dump *d, const char *text, char *err, size_t size)
{
	return dump_load(d, write_file("d.json", text), err, size);
}

static int suite_init(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/vrampool-test-tool.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int suite_clean(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- text.c ------------------------------------------------------------- */

static void test_escape_controls(void)
{
	char buf[128];

	CU_ASSERT_STRING_EQUAL(tool_escape("a\033[31mb", buf, sizeof(buf)), "a\\e[31mb");
	CU_ASSERT_STRING_EQUAL(tool_escape("x\ty\nz\r", buf, sizeof(buf)), "x\\ty\\nz\\r");
	CU_ASSERT_STRING_EQUAL(tool_escape("\x07\x7f", buf, sizeof(buf)), "\\x07\\x7f");
}

static void test_escape_c1_and_bidi(void)
{
	char buf[128];

	/* U+009B (CSI in C1) and U+202E (right-to-left override). */
	CU_ASSERT_STRING_EQUAL(tool_escape("a\xc2\x9b" "b", buf, sizeof(buf)), "a\\xc2\\x9bb");
	CU_ASSERT_STRING_EQUAL(tool_escape("\xe2\x80\xae" "txt", buf, sizeof(buf)),
			       "\\xe2\\x80\\xaetxt");
}

static void test_escape_keeps_utf8(void)
{
	char buf[128];

	CU_ASSERT_STRING_EQUAL(tool_escape("caf\xc3\xa9 \xe6\x97\xa5", buf, sizeof(buf)),
			       "caf\xc3\xa9 \xe6\x97\xa5");
	/* A stray continuation byte and a truncated sequence are escaped. */
	CU_ASSERT_STRING_EQUAL(tool_escape("\x80z\xc3", buf, sizeof(buf)), "\\x80z\\xc3");
}

static void test_escape_cuts_long_text(void)
{
	char buf[16];

	tool_escape("abcdefghijklmnopqrstuvwxyz", buf, sizeof(buf));
	CU_ASSERT_EQUAL(strlen(buf), 15);
	CU_ASSERT_STRING_EQUAL(buf + 12, "...");
}

static void test_format_bytes(void)
{
	char buf[32];

	CU_ASSERT_STRING_EQUAL(tool_format_bytes(1023, buf, sizeof(buf)), "1023 B");
	CU_ASSERT_STRING_EQUAL(tool_format_bytes(1536, buf, sizeof(buf)), "1.5 KiB");
	CU_ASSERT_STRING_EQUAL(tool_format_bytes(UINT64_MAX, buf, sizeof(buf)), "16.0 EiB");
}

/* ---- dump.c --------------------------------------------------------------- */

static void test_dump_number_too_large(void)
{
	struct dump d;
	char err[512];

	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{\"requested\":18446744073709551616}}",
				  err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "too large to represent"));
	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{\"h2d\":1e20}}", err, sizeof(err)),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "key \"bytes.h2d\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "2^64 or more"));
}

static void test_dump_negative_and_fraction(void)
{
	struct dump d;
	char err[512];

	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{\"requested\":-1}}", err, sizeof(err)),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "negative"));
	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{},\"rows\":{\"hits\":0.5}}",
				  err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "key \"rows.hits\" is 0.5: a fraction"));
}

static void test_dump_integral_real_is_a_count(void)
{
	struct dump d;
	char err[512];

	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{\"requested\":1e3}}", err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(d.requested, 1000);
}

static void test_dump_old_and_new_modes(void)
{
	struct dump d;
	char err[512];

	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"enabled\":false,\"bytes\":{}}", err, sizeof(err)), 0);
	CU_ASSERT_TRUE(dump_is_off(&d));
	CU_ASSERT_FALSE(dump_is_on(&d));
	CU_ASSERT_FALSE(d.has_whatif);
	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"enabled\":false,\"mode\":\"dry\",\"bytes\":{}}",
				  err, sizeof(err)), 0);
	CU_ASSERT_FALSE(dump_is_off(&d));
	CU_ASSERT_FALSE(dump_is_on(&d));
	CU_ASSERT_STRING_EQUAL(dump_mode(&d), "dry");
}

static void test_dump_labels(void)
{
	struct dump d;
	char err[512], label[64];

	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"pid\":7,\"rank\":3,\"bytes\":{}}", err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(dump_label(&d, label, sizeof(label)), "rank 3");
	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"pid\":7,\"rank\":null,\"bytes\":{}}", err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(dump_label(&d, label, sizeof(label)), "pid 7");
	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{}}", err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(dump_label(&d, label, sizeof(label)), "d.json");
}

static void test_dump_curve_thinned_and_read(void)
{
	char text[8192], *p = text;
	struct dump d;
	char err[512];
	int i;

	p += sprintf(p, "{\"vrampool\":1,\"bytes\":{},\"whatif\":{\"unique_bytes\":1000,"
		     "\"repeat_bytes\":3000,\"curve\":[");
	for (i = 0; i <= 100; i++)
		p += sprintf(p, "%s[%d,%d]", i ? "," : "", i * 10, i * 30);
	sprintf(p, "]}}");
	CU_ASSERT_EQUAL_FATAL(load_text(&d, text, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(d.npoints, DUMP_CURVE_MAX);
	CU_ASSERT_EQUAL(d.curve_budget[0], 0);
	CU_ASSERT_EQUAL(d.curve_budget[DUMP_CURVE_MAX - 1], 1000);
	CU_ASSERT_EQUAL(d.curve_served[DUMP_CURVE_MAX - 1], 3000);
	CU_ASSERT_EQUAL(dump_whatif_served_at(&d, 500), 1500);
	CU_ASSERT_EQUAL(dump_whatif_served_at(&d, 5000), 3000);
}

static void test_dump_bad_curve(void)
{
	struct dump d;
	char err[512];

	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{},\"whatif\":{\"curve\":[[1,2,3]]}}",
				  err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "whatif.curve"));
	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{},\"whatif\":{\"curve\":[[1,-2]]}}",
				  err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "negative"));
}

/*
 * A curve whose served bytes go down (tests/tool/whatif_down.json, the
 * regression input: read between its points it asked a negative count of
 * bytes) or whose budgets go down is refused with a line naming the key,
 * and never read between its points.
 */
static void test_dump_curve_going_down(void)
{
	char path[PATH_MAX], err[512];
	const char *slash = strrchr(__FILE__, '/');
	struct dump d;

	/* the input beside this file (the tests run from the repository's root) */
	snprintf(path, sizeof(path), "%.*swhatif_down.json", slash ? (int)(slash - __FILE__ + 1) : 0, __FILE__);
	CU_ASSERT_EQUAL_FATAL(access(path, R_OK), 0);
	CU_ASSERT_EQUAL(dump_load(&d, path, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "key \"whatif.curve\" is [409600, 204800] after [204800, 409600]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "never go down"));
	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{},\"whatif\":{\"curve\":[[0,0],[20,10],[10,10]]}}",
				  err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "budgets of a what-if curve never go down"));
	/* flat stretches are a curve still */
	CU_ASSERT_EQUAL(load_text(&d, "{\"vrampool\":1,\"bytes\":{},\"whatif\":{\"curve\":[[0,0],[10,10],[10,10],[20,10]]}}",
				  err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(dump_whatif_served_at(&d, 15), 10);
	/* a curve built by hand that falls is read flat, never as a negative rise */
	d.npoints = 2;
	d.curve_budget[0] = 0;
	d.curve_served[0] = 100;
	d.curve_budget[1] = 10;
	d.curve_served[1] = 50;
	CU_ASSERT_EQUAL(dump_whatif_served_at(&d, 5), 100);
}

static void test_dump_path_escaped_in_errors(void)
{
	struct dump d;
	char err[512];

	CU_ASSERT_NOT_EQUAL(dump_load(&d, "/nonexistent/\033[2Jx.json", err, sizeof(err)), 0);
	CU_ASSERT_PTR_NULL(strchr(err, '\033'));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\\e[2J"));
}

static void test_telemetry_cut_last_line(void)
{
	struct telemetry t;
	char err[512];
	const char *path = write_file("t.jsonl",
		"{\"t\":1.0,\"pid\":5,\"rows_seen\":10,\"rows_hits\":0,\"bytes_requested\":100}\n"
		"\n"
		"{\"t\":2.0,\"pid\":5,\"rows_seen\":20,\"rows_hits\":5,\"bytes_requested\":200}\n"
		"{\"t\":3.0,\"pid\":5,\"rows_se");

	CU_ASSERT_EQUAL_FATAL(telemetry_load(&t, path, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(t.n, 2);
	CU_ASSERT_EQUAL(t.p[1].rows_hits, 5);
	CU_ASSERT_EQUAL(t.p[1].pid, 5);
	telemetry_release(&t);
}

static void test_telemetry_bad_line_named(void)
{
	struct telemetry t;
	char err[512];
	const char *path = write_file("t.jsonl",
		"{\"t\":1.0,\"rows_seen\":10,\"bytes_requested\":100}\n"
		"{\"t\":2.0,\"rows_seen\":-1,\"bytes_requested\":100}\n"
		"{\"t\":3.0,\"rows_seen\":10,\"bytes_requested\":100}\n");

	CU_ASSERT_EQUAL(telemetry_load(&t, path, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 2"));
	CU_ASSERT_EQUAL(t.n, 0);
}

/* ---- report.c: likely reasons ---------------------------------------------- */

/* A pool run that matched copies: the base of the reason tests. */
static void reason_dump(struct dump *d)
{
	memset(d, 0, sizeof(*d));
	d->enabled = true;
	snprintf(d->mode, sizeof(d->mode), "on");
	snprintf(d->layout, sizeof(d->layout), "196608");
	d->h2d_calls = d->matched_calls = 100;
	d->requested = d->h2d = 100 * 196608ULL;
	d->has_whatif = true;
	d->has_rows = d->has_pool = true;
}

static void test_reason_several_samples(void)
{
	struct dump d;
	char why[1024];

	reason_dump(&d);
	d.rows_seen = d.rows_captured = 100;
	d.unique_bytes = d.requested;
	CU_ASSERT_TRUE(report_likely_reason(&d, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "several samples"));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "192.0 KiB"));
}

static void test_reason_rows_never_repeat(void)
{
	struct dump d;
	char why[1024];

	reason_dump(&d);
	d.rows_seen = 6400;
	d.unique_bytes = d.requested;
	d.pool_stood_down = true;
	CU_ASSERT_TRUE(report_likely_reason(&d, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "rows never repeat (the pool stood down"));
}

static void test_reason_budget_far_below(void)
{
	struct dump d;
	char why[1024];

	reason_dump(&d);
	d.rows_seen = 6400;
	d.hits = 100;
	d.budget = 1 << 20;
	d.unique_bytes = 64 << 20;
	d.repeat_bytes = 192 << 20;
	d.npoints = 3;
	d.curve_budget[1] = 32 << 20;
	d.curve_served[1] = 96 << 20;
	d.curve_budget[2] = 64 << 20;
	d.curve_served[2] = 192 << 20;
	CU_ASSERT_TRUE(report_likely_reason(&d, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "the budget is below the unique working set: a budget of 1.0 MiB"));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "where a budget of 64.0 MiB would serve 75.0%"));
	/* Standing down does not turn a budget too small into augmentation (issue 19, case 1). */
	d.pool_stood_down = true;
	CU_ASSERT_TRUE(report_likely_reason(&d, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "below the unique working set"));
	CU_ASSERT_PTR_NULL(strstr(why, "augmentation"));
}

/* ---- loader.c ------------------------------------------------------------- */

static void test_open_regular_refuses_fifo(void)
{
	char path[PATH_MAX + 16], err[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	CU_ASSERT_EQUAL_FATAL(mkfifo(path, 0600), 0);
	/* Nobody writes: an open for reading would block forever. */
	CU_ASSERT_EQUAL(loader_open_regular(path, &st, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "FIFO"));
	CU_ASSERT_EQUAL(loader_open_regular(tmpdir, &st, err, sizeof(err)), -EISDIR);
	CU_ASSERT_EQUAL(loader_open_regular("/dev/null", &st, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "character device"));
	unlink(path);
}

static void test_script_interpreter(void)
{
	char out[PATH_MAX];

	CU_ASSERT_TRUE(loader_script_interpreter("/usr/bin/python3 -u", out, sizeof(out)));
	CU_ASSERT_STRING_EQUAL(out, "/usr/bin/python3");
	CU_ASSERT_TRUE(loader_script_interpreter(" /usr/bin/env -S FOO=1 sh -e", out, sizeof(out)));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "/sh"));
	CU_ASSERT_FALSE(loader_script_interpreter("   ", out, sizeof(out)));
	CU_ASSERT_TRUE(loader_is_shell("/bin/bash"));
	CU_ASSERT_TRUE(loader_is_shell("dash"));
	CU_ASSERT_FALSE(loader_is_shell("/usr/bin/python3"));
}

/* Builds PYENV_ROOT/shims/python3 and versions/3.12.1/bin/python3 under the suite's directory. */
static void pyenv_tree(char *root, size_t size)
{
	char path[1024];

	snprintf(root, size, "%s/pyenv", tmpdir);
	snprintf(path, sizeof(path), "mkdir -p '%s/shims' '%s/versions/3.12.1/bin'", root, root);
	CU_ASSERT_EQUAL_FATAL(system(path), 0);
	snprintf(path, sizeof(path), "%s/shims/python3", root);
	CU_ASSERT_PTR_NOT_NULL_FATAL(write_file("pyenv/shims/python3",
		"#!/usr/bin/env bash\nset -e\nprogram=\"${0##*/}\"\n"
		"export PYENV_ROOT=\"/nowhere/.pyenv\"\n"
		"exec \"/nowhere/.pyenv/libexec/pyenv\" exec \"$program\" \"$@\"\n"));
	chmod(path, 0755);
	write_file("pyenv/versions/3.12.1/bin/python3", "\177ELF");
	snprintf(path, sizeof(path), "%s/versions/3.12.1/bin/python3", root);
	chmod(path, 0755);
	write_file("pyenv/version", "# the global version\n3.12.1\n");
}

static void test_pyenv_shim_resolved(void)
{
	char root[300], shim[PATH_MAX], out[PATH_MAX], how[PATH_MAX * 2];

	pyenv_tree(root, sizeof(root));
	snprintf(shim, sizeof(shim), "%s/shims/python3", root);
	setenv("PYENV_ROOT", root, 1);
	unsetenv("PYENV_VERSION");
	setenv("PYENV_DIR", "/", 1);
	CU_ASSERT_EQUAL(loader_pyenv_resolve(shim, out, sizeof(out), how, sizeof(how)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "/versions/3.12.1/bin/python3"));
	CU_ASSERT_PTR_NOT_NULL(strstr(how, "version 3.12.1 from"));
	/* PYENV_VERSION wins; a version that is not installed is said plainly. */
	setenv("PYENV_VERSION", "3.9.0", 1);
	CU_ASSERT_EQUAL(loader_pyenv_resolve(shim, out, sizeof(out), how, sizeof(how)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(how, "pyenv which python3"));
	unsetenv("PYENV_VERSION");
	unsetenv("PYENV_ROOT");
	unsetenv("PYENV_DIR");
}

static void test_not_a_pyenv_shim(void)
{
	char out[PATH_MAX], how[PATH_MAX * 2];
	const char *path = write_file("plain.sh", "#!/bin/sh\necho hello\n");

	CU_ASSERT_EQUAL(loader_pyenv_resolve(path, out, sizeof(out), how, sizeof(how)), -EINVAL);
}

static const CU_TestInfo tests[] = {
	{ "control characters are escaped for the terminal", test_escape_controls },
	{ "C1 controls and bidirectional overrides are escaped", test_escape_c1_and_bidi },
	{ "valid UTF-8 stays, broken UTF-8 is escaped", test_escape_keeps_utf8 },
	{ "an escaped text too long is cut with an ellipsis", test_escape_cuts_long_text },
	{ "byte counts are formatted up to 2^64", test_format_bytes },
	{ "a number of 2^64 or more in a dump is an error naming it", test_dump_number_too_large },
	{ "a negative count or a fraction in a dump is an error", test_dump_negative_and_fraction },
	{ "an integral real in a dump is read as a count", test_dump_integral_real_is_a_count },
	{ "off and on come from mode, or from enabled in old dumps", test_dump_old_and_new_modes },
	{ "a dump is labelled by rank, else pid, else file", test_dump_labels },
	{ "a long what-if curve is thinned, its ends kept, and read between points",
	  test_dump_curve_thinned_and_read },
	{ "a malformed what-if curve is an error", test_dump_bad_curve },
	{ "a what-if curve that goes down is an error naming the key, never read between its points",
	  test_dump_curve_going_down },
	{ "a path in an error message is escaped", test_dump_path_escaped_in_errors },
	{ "a telemetry line cut short at the end is skipped", test_telemetry_cut_last_line },
	{ "a bad telemetry line is an error with its line number", test_telemetry_bad_line_named },
	{ "single rows never hit are blamed on a layout of several samples",
	  test_reason_several_samples },
	{ "a pool that stood down is blamed on rows that never repeat",
	  test_reason_rows_never_repeat },
	{ "a budget below the unique set says what a bigger one would serve, stood down or not",
	  test_reason_budget_far_below },
	{ "a FIFO, a directory and a device are refused without blocking",
	  test_open_regular_refuses_fifo },
	{ "a #! line names its interpreter, through env too", test_script_interpreter },
	{ "a pyenv shim resolves to the interpreter pyenv would run", test_pyenv_shim_resolved },
	{ "a plain shell script is not a pyenv shim", test_not_a_pyenv_shim },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "the vrampool command's libraries",
	.init = suite_init,
	.clean = suite_clean,
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
