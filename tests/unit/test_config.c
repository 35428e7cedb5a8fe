/*
 * Unit tests of shim/config: defaults, every variable good and bad, the
 * single stderr line a bad value costs, VRAMPOOL=off, the size grammar,
 * the rank variables, the path getter and the %p, %r, %h, %q{NAME}
 * expansion, the cosmetic variables' warnings and the unknown names'
 * warning, once per job. The environment is a table handed to
 * config_load through its getenv-like callback; stderr is captured by
 * pointing file descriptor 2 at a temporary file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "cunit_main.h"
#include "core/config.h"
#include "core/config_names.h"
#include "core/log.h"
#include "core/size.h"

#define MAX_VARS 16

/* The fake environment: pairs of name and value, NULL-terminated. */
static const char *env[2 * MAX_VARS + 2];

static const char *fake_getenv(const char *name)
{
	int i;

	for (i = 0; env[i] != NULL; i += 2)
		if (strcmp(env[i], name) == 0)
			return env[i + 1];
	return NULL;
}

/* Sets the fake environment to one variable (name NULL: empty). */
static void env_one(const char *name, const char *value)
{
	memset(env, 0, sizeof(env));
	env[0] = name;
	env[1] = value;
}

/* Adds a variable to the fake environment. */
static void env_add(const char *name, const char *value)
{
	int i;

	for (i = 0; env[i] != NULL; i += 2)
		;
	env[i] = name;
	env[i + 1] = value;
	env[i + 2] = NULL;
}

/* What captured() runs: config_load of the fake environment, or config_warn_names of a list. */
static struct config *cap_config;
static char *const *cap_list;
static int cap_rc;

static void cap_load(void)
{
	cap_rc = config_load(cap_config, fake_getenv);
}

static void cap_warn_names(void)
{
	cap_rc = config_warn_names(cap_list);
}

/* Runs fn with file descriptor 2 pointed at a temporary file; out gets what it wrote. */
static void captured(void (*fn)(void), char *out, size_t len)
{
	FILE *tmp = tmpfile();
	int saved;
	size_t n;

	out[0] = '\0';
	if (tmp == NULL) {
		CU_FAIL("tmpfile failed");
		fn();
		return;
	}
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fileno(tmp), STDERR_FILENO);
	fn();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, len - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
}

/*
 * Runs config_load with stderr captured into out. Returns config_load's
 * result; out holds everything written on file descriptor 2.
 */
static int load_captured(struct config *c, char *out, size_t len)
{
	cap_config = c;
	captured(cap_load, out, len);
	return cap_rc;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/*
 * Loads the fake environment and asserts a bad value: exactly one line on
 * stderr naming the variable and its value, saying what was expected and
 * that the run is pass-through; enabled 0, invalid 1.
 */
static void expect_bad(struct config *c, const char *name, const char *value, const char *expected)
{
	char out[2048], quoted[256];
	int rc;

	env_one(name, value);
	rc = load_captured(c, out, sizeof(out));
	CU_ASSERT_EQUAL(rc, 1);
	CU_ASSERT_EQUAL(c->invalid, 1);
	CU_ASSERT_EQUAL(c->enabled, 0);
	CU_ASSERT_EQUAL(count_lines(out), 1);
	CU_ASSERT(strncmp(out, "vrampool: ", 10) == 0);
	snprintf(quoted, sizeof(quoted), "%s='%s'", name, value);
	CU_ASSERT(strstr(out, quoted) != NULL);
	CU_ASSERT(strstr(out, expected) != NULL);
	CU_ASSERT(strstr(out, "pass-through") != NULL);
	if (count_lines(out) != 1 || strstr(out, quoted) == NULL || strstr(out, expected) == NULL)
		fprintf(stdout, "\n  for %s='%s' stderr was: %s", name, value, out);
}

/*
 * Loads the fake environment and asserts a cosmetic variable's bad value:
 * one line naming it, its value and what was expected, saying the default
 * is used; the pool stays enabled and the configuration valid.
 */
static void expect_warned(struct config *c, const char *name, const char *value, const char *expected)
{
	char out[2048], quoted[256];

	env_one(name, value);
	CU_ASSERT_EQUAL(load_captured(c, out, sizeof(out)), 0);
	CU_ASSERT_EQUAL(c->invalid, 0);
	CU_ASSERT_EQUAL(c->warnings, 1);
	CU_ASSERT_EQUAL(c->enabled, 1);
	CU_ASSERT_EQUAL(count_lines(out), 1);
	snprintf(quoted, sizeof(quoted), "vrampool: %s='%s'", name, value);
	CU_ASSERT(strstr(out, quoted) != NULL);
	CU_ASSERT(strstr(out, expected) != NULL);
	CU_ASSERT(strstr(out, "ignored, the default") != NULL);
	CU_ASSERT(strstr(out, "pass-through") == NULL);
	if (count_lines(out) != 1 || strstr(out, quoted) == NULL || strstr(out, expected) == NULL)
		fprintf(stdout, "\n  for %s='%s' stderr was: %s", name, value, out);
}

/* Loads the fake environment and asserts it is good and silent. */
static void expect_good(struct config *c, const char *name, const char *value)
{
	char out[2048];

	env_one(name, value);
	CU_ASSERT_EQUAL(load_captured(c, out, sizeof(out)), 0);
	CU_ASSERT_EQUAL(c->invalid, 0);
	CU_ASSERT_STRING_EQUAL(out, "");
}

static void assert_defaults(const struct config *c)
{
	CU_ASSERT_EQUAL(c->budget_kind, BUDGET_AUTO);
	CU_ASSERT_EQUAL(c->probe_after, 2);
	CU_ASSERT_EQUAL(c->reserve_batches, 16);
	CU_ASSERT_EQUAL(c->margin, 512ULL << 20);
	CU_ASSERT_EQUAL(c->slab, 64ULL << 20);
	CU_ASSERT_EQUAL(c->threads, 0);
	CU_ASSERT_EQUAL(c->telemetry_s, 10);
	CU_ASSERT_EQUAL(c->has_layout, 0);
	CU_ASSERT_STRING_EQUAL(c->stats_path, "");
	CU_ASSERT_STRING_EQUAL(c->telemetry_path, "");
	CU_ASSERT_EQUAL(c->whatif_mem, 1ULL << 20);
	CU_ASSERT_STRING_EQUAL(c->rank, "0");
	CU_ASSERT_EQUAL(c->has_rank, 0);
}

static void test_defaults(void)
{
	struct config c;
	char out[256];

	env_one(NULL, NULL);
	CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(c.enabled, 1);
	CU_ASSERT_EQUAL(c.off, 0);
	CU_ASSERT_EQUAL(c.invalid, 0);
	CU_ASSERT_EQUAL(c.verbose, 0);
	CU_ASSERT_EQUAL(c.quiet, 0);
	assert_defaults(&c);
}

static void test_empty_is_unset(void)
{
	static const char *const names[] = {
		"VRAMPOOL", "VRAMPOOL_LAYOUT", "VRAMPOOL_BUDGET", "VRAMPOOL_PROBE_AFTER",
		"VRAMPOOL_RESERVE_BATCHES", "VRAMPOOL_MARGIN", "VRAMPOOL_SLAB", "VRAMPOOL_THREADS",
		"VRAMPOOL_STATS", "VRAMPOOL_VERBOSE", "VRAMPOOL_QUIET", "VRAMPOOL_TELEMETRY_S",
	};
	struct config c;
	size_t i;

	env[0] = NULL;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		env_add(names[i], "");
	{
		char out[256];

		CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 0);
		CU_ASSERT_STRING_EQUAL(out, "");
	}
	CU_ASSERT_EQUAL(c.enabled, 1);
	assert_defaults(&c);
}

/*
 * One reading for every variable (issue: the layout trimmed spaces and
 * took lower case only, the others refused spaces): spaces, tabs and line
 * ends around a value are left out, a value of nothing but those is
 * unset, keywords are read in any case; inside a value spaces are still
 * refused, and the paths are taken as written.
 */
static void test_one_reading(void)
{
	static const char *const names[] = {
		"VRAMPOOL", "VRAMPOOL_LAYOUT", "VRAMPOOL_BUDGET", "VRAMPOOL_PROBE_AFTER", "VRAMPOOL_LEDGER",
		"VRAMPOOL_LINK_GBPS", "VRAMPOOL_WHATIF_MEM", "VRAMPOOL_TELEMETRY_S", "VRAMPOOL_QUIET",
	};
	struct config c;
	char out[256];
	size_t i;

	expect_good(&c, "VRAMPOOL", " dry\n");
	CU_ASSERT(c.dry);
	expect_good(&c, "VRAMPOOL_LAYOUT", "\tu8:3x224x224 ");
	CU_ASSERT_EQUAL(c.layout.rows[0], 150528);
	CU_ASSERT_STRING_EQUAL(c.layout.text, "u8:3x224x224");
	expect_good(&c, "VRAMPOOL_LAYOUT", " AUTO ");
	CU_ASSERT(c.has_layout && c.layout.is_auto);
	CU_ASSERT_STRING_EQUAL(c.layout.text, "auto");
	expect_good(&c, "VRAMPOOL_LAYOUT", "U8:3x4,WHOLE:1M,F32:2");
	CU_ASSERT_EQUAL(c.layout.nrows, 2);
	CU_ASSERT(c.layout.has_whole);
	expect_good(&c, "VRAMPOOL_BUDGET", " AUTO");
	CU_ASSERT_EQUAL(c.budget_kind, BUDGET_AUTO);
	expect_good(&c, "VRAMPOOL_BUDGET", " 8G\n");
	CU_ASSERT_EQUAL(c.budget_bytes, 8ULL << 30);
	expect_good(&c, "VRAMPOOL_BUDGET", "50% ");
	CU_ASSERT_EQUAL(c.budget_kind, BUDGET_SHARE);
	expect_good(&c, "VRAMPOOL_LEDGER", "Force ");
	CU_ASSERT_EQUAL(c.ledger, LEDGER_FORCE);
	expect_good(&c, "VRAMPOOL_LEDGER", "OFF");
	CU_ASSERT_EQUAL(c.ledger, LEDGER_OFF);
	expect_good(&c, "VRAMPOOL_PROBE_AFTER", " 5 ");
	CU_ASSERT_EQUAL(c.probe_after, 5);
	expect_good(&c, "VRAMPOOL_LINK_GBPS", "12.5\n");
	CU_ASSERT_DOUBLE_EQUAL(c.link_gbps, 12.5, 1e-9);
	expect_good(&c, "VRAMPOOL_TELEMETRY_S", " 3 ");
	CU_ASSERT_EQUAL(c.telemetry_s, 3);
	expect_good(&c, "VRAMPOOL_QUIET", " YES ");
	CU_ASSERT(c.quiet);
	/* inside a value, spaces are still refused */
	expect_bad(&c, "VRAMPOOL_BUDGET", "8 G", "expected auto");
	expect_bad(&c, "VRAMPOOL_LAYOUT", "u8:3 x4", "bad shape");
	/* nothing but spaces is unset, as empty is: no complaint, the defaults */
	env[0] = NULL;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		env_add(names[i], " \t ");
	CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(c.enabled, 1);
	CU_ASSERT_EQUAL(c.has_layout, 0);
	assert_defaults(&c);
	/* a path is taken as written */
	expect_good(&c, "VRAMPOOL_STATS", " /tmp/a b.json ");
	CU_ASSERT_STRING_EQUAL(c.stats_path, " /tmp/a b.json ");
	log_set_verbose(0);
}

static void test_switch(void)
{
	struct config c;

	expect_good(&c, "VRAMPOOL", "on");
	CU_ASSERT(c.enabled && !c.off);
	expect_good(&c, "VRAMPOOL", "1");
	CU_ASSERT(c.enabled && !c.off);
	expect_good(&c, "VRAMPOOL", "off");
	CU_ASSERT(!c.enabled && c.off);
	expect_good(&c, "VRAMPOOL", "0");
	CU_ASSERT(!c.enabled && c.off);
	expect_good(&c, "VRAMPOOL", "dry");
	CU_ASSERT(!c.enabled && !c.off && c.dry);
	expect_bad(&c, "VRAMPOOL", "maybe", "expected on, off or dry");
	CU_ASSERT_EQUAL(c.off, 0);
	expect_bad(&c, "VRAMPOOL", "o", "expected on, off or dry");
	expect_bad(&c, "VRAMPOOL", "onn", "expected on, off or dry");
}

/* The usual spellings of on and off, and dry, in any case (issue 19). */
static void test_switch_spellings(void)
{
	static const char *const on[] = { "ON", "On", "true", "TRUE", "yes", "Yes", "enable", "ENABLED", "1" };
	static const char *const off[] = { "OFF", "false", "False", "no", "NO", "disable", "Disabled", "0" };
	struct config c;

	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		expect_good(&c, "VRAMPOOL", on[i]);
		CU_ASSERT(c.enabled && !c.off && !c.dry);
	}
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
		expect_good(&c, "VRAMPOOL", off[i]);
		CU_ASSERT(!c.enabled && c.off);
	}
	expect_good(&c, "VRAMPOOL", "DRY");
	CU_ASSERT(!c.enabled && c.dry);
	/* the flags take the same spellings */
	static const struct { const char *name, *value; int verbose, quiet; } flags[] = {
		{ "VRAMPOOL_VERBOSE", "Yes", 1, 0 }, { "VRAMPOOL_QUIET", "true", 0, 1 },
		{ "VRAMPOOL_VERBOSE", "off", 0, 0 }, { "VRAMPOOL_QUIET", "ENABLED", 0, 1 },
	};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		expect_good(&c, flags[i].name, flags[i].value);
		CU_ASSERT(c.verbose == flags[i].verbose && c.quiet == flags[i].quiet);
	}
	log_set_verbose(0);
}

static void test_layout_var(void)
{
	struct config c;

	expect_good(&c, "VRAMPOOL_LAYOUT", "u8:3x224x224");
	CU_ASSERT_EQUAL(c.enabled, 1);
	CU_ASSERT_EQUAL(c.has_layout, 1);
	CU_ASSERT_EQUAL(c.layout.rows[0], 150528);
	CU_ASSERT_STRING_EQUAL(c.layout_error, "");
	expect_bad(&c, "VRAMPOOL_LAYOUT", "f8:3x3", "expected u8");
	CU_ASSERT_EQUAL(c.has_layout, 0);
	CU_ASSERT_EQUAL(c.layout.nrows, 0);
	/* the parser's reason is kept for the summary (a rejected layout is no missing one) */
	CU_ASSERT(strncmp(c.layout_error, "bad dtype 'f8' in 'f8:3x3' (expected u8", 39) == 0);
	expect_bad(&c, "VRAMPOOL_LAYOUT", "whole:1M,whole:2M", "at most one whole:MIN");
}

static void test_budget(void)
{
	struct config c;

	expect_good(&c, "VRAMPOOL_BUDGET", "auto");
	CU_ASSERT_EQUAL(c.budget_kind, BUDGET_AUTO);
	expect_good(&c, "VRAMPOOL_BUDGET", "8G");
	CU_ASSERT_EQUAL(c.budget_kind, BUDGET_BYTES);
	CU_ASSERT_EQUAL(c.budget_bytes, 8ULL << 30);
	expect_good(&c, "VRAMPOOL_BUDGET", "50%");
	CU_ASSERT_EQUAL(c.budget_kind, BUDGET_SHARE);
	CU_ASSERT_DOUBLE_EQUAL(c.budget_share, 0.5, 1e-12);
	expect_good(&c, "VRAMPOOL_BUDGET", "100%");
	CU_ASSERT_DOUBLE_EQUAL(c.budget_share, 1.0, 1e-12);
	expect_good(&c, "VRAMPOOL_BUDGET", "12.5%");
	CU_ASSERT_DOUBLE_EQUAL(c.budget_share, 0.125, 1e-12);
	expect_bad(&c, "VRAMPOOL_BUDGET", "0%", "a share like 50%");
	CU_ASSERT_EQUAL(c.budget_kind, BUDGET_AUTO);
	expect_bad(&c, "VRAMPOOL_BUDGET", "101%", "a share like 50%");
	expect_bad(&c, "VRAMPOOL_BUDGET", "50%%", "expected auto");
	expect_bad(&c, "VRAMPOOL_BUDGET", "%", "expected auto");
	expect_bad(&c, "VRAMPOOL_BUDGET", "0", "a size like 8G");
	expect_bad(&c, "VRAMPOOL_BUDGET", "lots", "a size like 8G");
	CU_ASSERT_EQUAL(c.budget_kind, BUDGET_AUTO);
}

static void test_counts(void)
{
	struct config c;

	expect_good(&c, "VRAMPOOL_PROBE_AFTER", "1");
	CU_ASSERT_EQUAL(c.probe_after, 1);
	expect_good(&c, "VRAMPOOL_PROBE_AFTER", "100");
	CU_ASSERT_EQUAL(c.probe_after, 100);
	expect_good(&c, "VRAMPOOL_PROBE_AFTER", "0");
	CU_ASSERT_EQUAL(c.probe_after, 0);
	expect_bad(&c, "VRAMPOOL_PROBE_AFTER", "-1", "integer >= 0");
	expect_bad(&c, "VRAMPOOL_PROBE_AFTER", "2x", "integer >= 0");
	expect_bad(&c, "VRAMPOOL_PROBE_AFTER", "99999999999999999999999", "integer >= 0");

	expect_good(&c, "VRAMPOOL_RESERVE_BATCHES", "0");
	CU_ASSERT_EQUAL(c.reserve_batches, 0);
	expect_good(&c, "VRAMPOOL_RESERVE_BATCHES", "4");
	CU_ASSERT_EQUAL(c.reserve_batches, 4);
	expect_bad(&c, "VRAMPOOL_RESERVE_BATCHES", "four", "integer >= 0");
	CU_ASSERT_EQUAL(c.reserve_batches, 16);

	expect_good(&c, "VRAMPOOL_THREADS", "1");
	CU_ASSERT_EQUAL(c.threads, 1);
	expect_good(&c, "VRAMPOOL_THREADS", "256");
	CU_ASSERT_EQUAL(c.threads, 256);
	expect_bad(&c, "VRAMPOOL_THREADS", "0", "from 1 to 256");
	CU_ASSERT_EQUAL(c.threads, 0);
	expect_bad(&c, "VRAMPOOL_THREADS", "257", "from 1 to 256");
	expect_bad(&c, "VRAMPOOL_THREADS", "4 4", "from 1 to 256");

	expect_good(&c, "VRAMPOOL_TELEMETRY_S", "1");
	CU_ASSERT_EQUAL(c.telemetry_s, 1);
	/* cosmetic: warned about, the default used, the pool on (issue 19) */
	expect_warned(&c, "VRAMPOOL_TELEMETRY_S", "0", "seconds from 1 to 86400");
	CU_ASSERT_EQUAL(c.telemetry_s, 10);
	expect_warned(&c, "VRAMPOOL_TELEMETRY_S", "1m", "seconds from 1 to 86400");
	CU_ASSERT_EQUAL(c.telemetry_s, 10);
}

static void test_sizes(void)
{
	struct config c;

	expect_good(&c, "VRAMPOOL_MARGIN", "0");
	CU_ASSERT_EQUAL(c.margin, 0);
	expect_good(&c, "VRAMPOOL_MARGIN", "1G");
	CU_ASSERT_EQUAL(c.margin, 1ULL << 30);
	expect_bad(&c, "VRAMPOOL_MARGIN", "1Gb", "is not a size (expected e.g. 64M, 1G)");
	CU_ASSERT_EQUAL(c.margin, 512ULL << 20);

	expect_good(&c, "VRAMPOOL_SLAB", "1M");
	CU_ASSERT_EQUAL(c.slab, 1ULL << 20);
	expect_good(&c, "VRAMPOOL_SLAB", "16G");
	CU_ASSERT_EQUAL(c.slab, 16ULL << 30);
	expect_bad(&c, "VRAMPOOL_SLAB", "12Q", "is not a size (expected e.g. 64M, 1G)");
	CU_ASSERT_EQUAL(c.slab, 64ULL << 20);
	expect_bad(&c, "VRAMPOOL_SLAB", "1023K", "from 1M to 16G");
	expect_bad(&c, "VRAMPOOL_SLAB", "17G", "from 1M to 16G");
}

static void test_stats_and_flags(void)
{
	char longpath[5000];
	struct config c;

	expect_good(&c, "VRAMPOOL_STATS", "/tmp/vp-%p.json");
	CU_ASSERT_STRING_EQUAL(c.stats_path, "/tmp/vp-%p.json");
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	{
		char out[2048];

		env_one("VRAMPOOL_STATS", longpath);
		CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 1);
		CU_ASSERT_EQUAL(count_lines(out), 1);
		CU_ASSERT(strstr(out, "VRAMPOOL_STATS=") != NULL);
		CU_ASSERT(strstr(out, "expected a path") != NULL);
		CU_ASSERT(strlen(out) < 300);	/* the value is shortened in the line */
		CU_ASSERT_STRING_EQUAL(c.stats_path, "");
	}

	expect_good(&c, "VRAMPOOL_VERBOSE", "1");
	CU_ASSERT_EQUAL(c.verbose, 1);
	CU_ASSERT_EQUAL(log_is_verbose(), 1);
	expect_good(&c, "VRAMPOOL_VERBOSE", "0");
	CU_ASSERT_EQUAL(log_is_verbose(), 0);
	/* cosmetic: a bad value is warned about and the pool stays on (issue 19) */
	expect_warned(&c, "VRAMPOOL_VERBOSE", "maybe", "expected 1 or 0");
	CU_ASSERT_EQUAL(c.verbose, 0);
	expect_good(&c, "VRAMPOOL_QUIET", "1");
	CU_ASSERT_EQUAL(c.quiet, 1);
	expect_warned(&c, "VRAMPOOL_QUIET", "2", "expected 1 or 0");
	CU_ASSERT_EQUAL(c.quiet, 0);
}

/*
 * A cosmetic warning is shown once per job: a process that finds
 * VRAMPOOL_WARNED set (by the launcher or its parent) stays silent, and a
 * bad cosmetic value beside a bad pool variable costs the pool nothing more.
 */
static void test_cosmetic_once_per_job(void)
{
	struct config c;
	char out[2048];

	env_one("VRAMPOOL_QUIET", "2");
	env_add(CONFIG_WARNED, "1");
	CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(c.warnings, 1);
	CU_ASSERT_EQUAL(c.warned_before, 1);
	CU_ASSERT_EQUAL(c.enabled, 1);
	/* beside a bad pool variable: a line each, only the pool variable turns it off */
	env_one("VRAMPOOL_TELEMETRY_S", "soon");
	env_add("VRAMPOOL_SLAB", "huge");
	CU_ASSERT(load_captured(&c, out, sizeof(out)) == 1 && count_lines(out) == 2);
	CU_ASSERT(c.invalid == 1 && c.warnings == 1 && strstr(c.problem, "VRAMPOOL_SLAB") != NULL);
}

static void test_flags_hold_when_others_are_bad(void)
{
	struct config c;
	char out[2048];

	env_one("VRAMPOOL_SLAB", "huge");
	env_add("VRAMPOOL_VERBOSE", "1");
	env_add("VRAMPOOL_QUIET", "1");
	env_add("VRAMPOOL_LAYOUT", "u8:0");
	CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 2);
	CU_ASSERT_EQUAL(count_lines(out), 2);
	CU_ASSERT_EQUAL(c.invalid, 2);
	CU_ASSERT_EQUAL(c.enabled, 0);
	CU_ASSERT_EQUAL(c.verbose, 1);
	CU_ASSERT_EQUAL(c.quiet, 1);
	CU_ASSERT_EQUAL(log_is_verbose(), 1);
	log_set_verbose(0);
}

static void test_off_with_layout(void)
{
	struct config c;
	char out[256];

	env_one("VRAMPOOL", "off");
	env_add("VRAMPOOL_LAYOUT", "3072");
	CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(c.enabled, 0);
	CU_ASSERT_EQUAL(c.off, 1);
	CU_ASSERT_EQUAL(c.invalid, 0);
	CU_ASSERT_EQUAL(c.has_layout, 1);
}

static void test_value_is_one_line(void)
{
	struct config c;
	char out[2048];

	env_one("VRAMPOOL_SLAB", "1\nvrampool: forged");
	CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 1);
	CU_ASSERT_EQUAL(count_lines(out), 1);
	CU_ASSERT(strstr(out, "'1?vrampool: forged'") != NULL);
}

static void test_parse_size(void)
{
	static const struct { const char *s; uint64_t v; } good[] = {
		{ "0", 0 }, { "12", 12 }, { "4K", 4096 }, { "4k", 4096 }, { "64M", 64ULL << 20 },
		{ "8G", 8ULL << 30 }, { "8GB", 8ULL << 30 }, { "8GiB", 8ULL << 30 },
		{ "2T", 2ULL << 40 }, { "100B", 100 },
		{ "18446744073709551615", UINT64_MAX },
	};
	static const char *const bad[] = { "", "K", "-1", "+1", " 1", "1 ", "1.5G", "1X", "1KB2", "1iB", "0x10" };
	size_t i;
	uint64_t v;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 7;
		CU_ASSERT_EQUAL(size_parse(good[i].s, &v), 0);
		CU_ASSERT_EQUAL(v, good[i].v);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(size_parse(bad[i], &v), -EINVAL);
	CU_ASSERT_EQUAL(size_parse("18446744073709551616", &v), -ERANGE);
	CU_ASSERT_EQUAL(size_parse("16777216T", &v), -ERANGE);
}

static void test_whatif_mem(void)
{
	struct config c;

	expect_good(&c, "VRAMPOOL_WHATIF_MEM", "64K");
	CU_ASSERT_EQUAL(c.whatif_mem, 64ULL << 10);
	expect_good(&c, "VRAMPOOL_WHATIF_MEM", "2G");
	CU_ASSERT_EQUAL(c.whatif_mem, 2ULL << 30);
	expect_bad(&c, "VRAMPOOL_WHATIF_MEM", "1K", "expected a size from 16K to 1T");
	CU_ASSERT_EQUAL(c.whatif_mem, 1ULL << 20);
	expect_bad(&c, "VRAMPOOL_WHATIF_MEM", "lots", "expected e.g. 64M");
}

static void test_ledger_vars(void)
{
	static const char *const bad_links[] = { "fast", "0", "0.001", "200000", "-4", "1e3", "1 6", "1.2.3", "16GB",
						 "1234567890123" };
	struct config c;

	/* the defaults: the ledger on, the link measured */
	expect_good(&c, "VRAMPOOL_LEDGER", "on");
	CU_ASSERT_EQUAL(c.ledger, LEDGER_ON);
	CU_ASSERT_EQUAL(c.link_gbps, 0);
	expect_good(&c, "VRAMPOOL_LEDGER", "off");
	CU_ASSERT_EQUAL(c.ledger, LEDGER_OFF);
	expect_good(&c, "VRAMPOOL_LEDGER", "force");
	CU_ASSERT_EQUAL(c.ledger, LEDGER_FORCE);
	expect_bad(&c, "VRAMPOOL_LEDGER", "maybe", "expected on, off or force");
	expect_good(&c, "VRAMPOOL_LINK_GBPS", "16");
	CU_ASSERT_DOUBLE_EQUAL(c.link_gbps, 16, 1e-9);
	expect_good(&c, "VRAMPOOL_LINK_GBPS", "12.5");
	CU_ASSERT_DOUBLE_EQUAL(c.link_gbps, 12.5, 1e-9);
	expect_good(&c, "VRAMPOOL_LINK_GBPS", ".5");
	CU_ASSERT_DOUBLE_EQUAL(c.link_gbps, 0.5, 1e-9);
	expect_good(&c, "VRAMPOOL_LINK_GBPS", "0.01");
	expect_good(&c, "VRAMPOOL_LINK_GBPS", "100000");
	for (size_t i = 0; i < sizeof(bad_links) / sizeof(bad_links[0]); i++)
		expect_bad(&c, "VRAMPOOL_LINK_GBPS", bad_links[i], "expected GB/s from 0.01 to 100000");
}

/* The fake environment with rank variables only. */
static void rank_env(const char *const *pairs)
{
	memset(env, 0, sizeof(env));
	for (; pairs[0] != NULL; pairs += 2)
		env_add(pairs[0], pairs[1]);
}

static void test_rank_selection(void)
{
	static const char *const all[] = { "SLURM_PROCID", "5", "PMI_RANK", "4", "OMPI_COMM_WORLD_RANK", "3",
					   "LOCAL_RANK", "2", "RANK", "1", NULL };
	static const char *const no_rank[] = { "SLURM_PROCID", "5", "PMI_RANK", "4", "LOCAL_RANK", "2", NULL };
	static const char *const slurm[] = { "SLURM_PROCID", "17", NULL };
	static const char *const junk[] = { "RANK", "../x", "LOCAL_RANK", "", "OMPI_COMM_WORLD_RANK", "1234567890",
					    "PMI_RANK", "7", NULL };
	static const char *const none[] = { "RANK", "-1", NULL };
	struct config c;
	char out[2048];

	rank_env(all);
	CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(c.rank, "1");
	CU_ASSERT_EQUAL(c.has_rank, 1);
	rank_env(no_rank);
	load_captured(&c, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(c.rank, "2");
	rank_env(slurm);
	load_captured(&c, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(c.rank, "17");
	/* values unsafe in a file name, empty or too long are skipped, silently */
	rank_env(junk);
	CU_ASSERT_EQUAL(load_captured(&c, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_STRING_EQUAL(c.rank, "7");
	rank_env(none);
	load_captured(&c, out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(c.rank, "0");
	CU_ASSERT_EQUAL(c.has_rank, 0);
}

/* The path getter: what secure_getenv would hide stays hidden. */
static const char *no_paths(const char *name)
{
	(void)name;
	return NULL;
}

static void test_paths_come_from_their_own_getter(void)
{
	struct config c;

	env_one("VRAMPOOL_STATS", "/tmp/s.json");
	env_add("VRAMPOOL_TELEMETRY", "/tmp/t.jsonl");
	env_add("VRAMPOOL_LAYOUT", "3072");
	CU_ASSERT_EQUAL(config_load_secure(&c, fake_getenv, no_paths), 0);
	CU_ASSERT_STRING_EQUAL(c.stats_path, "");
	CU_ASSERT_STRING_EQUAL(c.telemetry_path, "");
	CU_ASSERT_EQUAL(c.has_layout, 1);
	CU_ASSERT_EQUAL(config_load_secure(&c, fake_getenv, fake_getenv), 0);
	CU_ASSERT_STRING_EQUAL(c.stats_path, "/tmp/s.json");
	CU_ASSERT_STRING_EQUAL(c.telemetry_path, "/tmp/t.jsonl");
	/* in a process that is not set-user-ID it is getenv */
	setenv("VRAMPOOL_TEST_SECURE", "yes", 1);
	CU_ASSERT_STRING_EQUAL(config_secure_getenv("VRAMPOOL_TEST_SECURE"), "yes");
	unsetenv("VRAMPOOL_TEST_SECURE");
}

static void test_expand_rank_and_host(void)
{
	char out[64];

	CU_ASSERT_EQUAL(config_expand_path("/d/s-%r-%h-%p.json", 42, "3", "node1", out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/s-3-node1-42.json");
	CU_ASSERT_EQUAL(config_expand_path("%r%r", 1, NULL, NULL, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "noranknorank");
	CU_ASSERT_EQUAL(config_expand_path("%r", 1, "", NULL, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "norank");
	CU_ASSERT_EQUAL(config_expand_path("%r", 1, "0", NULL, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "0");
	/* a host name cannot climb out of the directory or carry odd bytes */
	CU_ASSERT_EQUAL(config_expand_path("/d/%h", 1, "0", "../etc", out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/.._etc");
	CU_ASSERT_EQUAL(config_expand_path("/d/%h", 1, "0", "..", out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/_");
	CU_ASSERT_EQUAL(config_expand_path("/d/%h", 1, "0", "a b\033c", out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/a_b_c");
	CU_ASSERT_EQUAL(config_expand_path("/d/%h.json", 1, "0", "", out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/_.json");
	CU_ASSERT_EQUAL(config_expand_path("/d/%x%", 1, "0", "h", out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/%x%");
	CU_ASSERT_EQUAL(config_expand_path("/d/%h", 1, "0", "abcdef", out, 9), -ENAMETOOLONG);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_EQUAL(config_expand_path("/d/%h", 1, "0", "abcdef", out, 10), 0);
	CU_ASSERT_EQUAL(config_expand_path("/d/%r", 1, "123", "h", out, 6), -ENAMETOOLONG);
}

static void test_stats_path_expansion(void)
{
	struct config c;
	char out[64];

	memset(&c, 0, sizeof(c));
	strcpy(c.stats_path, "/tmp/s-%p-%p.json");
	CU_ASSERT_EQUAL(config_stats_path(&c, 4242, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/tmp/s-4242-4242.json");
	strcpy(c.stats_path, "/tmp/100%-%d%");
	CU_ASSERT_EQUAL(config_stats_path(&c, 1, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/tmp/100%-%d%");
	strcpy(c.stats_path, "/tmp/%p");
	CU_ASSERT_EQUAL(config_stats_path(&c, 123456, out, 11), -ENAMETOOLONG);
	CU_ASSERT_EQUAL(config_stats_path(&c, 123456, out, 12), 0);
	CU_ASSERT_STRING_EQUAL(out, "/tmp/123456");
	strcpy(c.stats_path, "/tmp/abcdefgh");
	CU_ASSERT_EQUAL(config_stats_path(&c, 1, out, 13), -ENAMETOOLONG);
	/* %r is the configuration's rank, "norank" without one (not rank 0); %h the host name */
	strcpy(c.stats_path, "/tmp/r%r");
	strcpy(c.rank, "0");
	CU_ASSERT_EQUAL(config_stats_path(&c, 1, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/tmp/rnorank");
	c.has_rank = 1;
	CU_ASSERT_EQUAL(config_stats_path(&c, 1, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/tmp/r0");
	strcpy(c.rank, "12");
	CU_ASSERT_EQUAL(config_stats_path(&c, 1, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/tmp/r12");
	strcpy(c.stats_path, "/tmp/%h");
	CU_ASSERT_EQUAL(config_stats_path(&c, 1, out, sizeof(out)), 0);
	CU_ASSERT(strlen(out) > strlen("/tmp/"));
	CU_ASSERT(strchr(out + 5, '/') == NULL);
}

/* %q{NAME}: an environment variable's value, '/' made '_', empty when unset; a bad %q is an error. */
static void test_expand_env(void)
{
	char out[64];
	struct config c;

	env_one("SLURM_JOB_ID", "4711");
	env_add("ODD", "a/b/../c");
	env_add("DOTS", "..");
	CU_ASSERT_EQUAL(config_expand_path_env("/d/s-%q{SLURM_JOB_ID}-%r.json", 1, "2", "h", fake_getenv, out,
					       sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/s-4711-2.json");
	CU_ASSERT_EQUAL(config_expand_path_env("/d/%q{ODD}", 1, NULL, NULL, fake_getenv, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/a_b_.._c");
	CU_ASSERT_EQUAL(config_expand_path_env("/d/%q{DOTS}", 1, NULL, NULL, fake_getenv, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/_");
	CU_ASSERT_EQUAL(config_expand_path_env("/d/x%q{UNSET_ONE}y", 1, NULL, NULL, fake_getenv, out,
					       sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "/d/xy");
	CU_ASSERT_EQUAL(config_expand_path_env("/d/%q{SLURM_JOB_ID}", 1, NULL, NULL, fake_getenv, out, 7),
			-ENAMETOOLONG);
	static const char *const bad[] = { "/d/%q", "/d/%qSLURM", "/d/%q{}", "/d/%q{SLURM", "/d/%q{A-B}",
					   "/d/%q{1A}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT_EQUAL(config_expand_path_env(bad[i], 1, NULL, NULL, fake_getenv, out, sizeof(out)), -EINVAL);
		CU_ASSERT_STRING_EQUAL(out, "");
	}
	/* the stats and telemetry variables refuse a bad %q at load time */
	expect_good(&c, "VRAMPOOL_STATS", "/tmp/s-%q{JOB}-%p.json");
	expect_bad(&c, "VRAMPOOL_STATS", "/tmp/s-%q-%p.json", "expected %q{NAME}");
	CU_ASSERT_STRING_EQUAL(c.stats_path, "");
	expect_bad(&c, "VRAMPOOL_TELEMETRY", "/tmp/t-%q{x", "expected %q{NAME}");
}

/* Runs config_warn_names over list with stderr captured into out. Returns its result. */
static int warn_names_captured(char *const *list, char *out, size_t len)
{
	cap_list = list;
	captured(cap_warn_names, out, len);
	return cap_rc;
}

/* config_warn_job twice, as a process and then its child would. */
static void cap_warn_job_twice(void)
{
	config_warn_job(cap_config);
	config_warn_job(cap_config);
}

/* A misspelled VRAMPOOL_* name is warned about in one line, with the closest known name. */
static void test_unknown_names(void)
{
	char *typo[] = { "PATH=/bin", "VRAMPOOL_LAYUOT=u8:3", "VRAMPOOL_LAYOUT=auto", NULL };
	char *two[] = { "VRAMPOOL_BUGDET=1G", "VRAMPOOL_ZZZZZZZZZZZZ=1", "VRAMPOOLISH=1", NULL };
	char *known[] = { "VRAMPOOL=on", "VRAMPOOL_STATS=x", "VRAMPOOL_TELEMETRY_S=5", "VRAMPOOL_WHATIF_MEM=1M",
			  "VRAMPOOL_LINK_GBPS=4", "VRAMPOOL_LEDGER=on", "VRAMPOOL_BIN=/x", "VRAMPOOL_PYENV=/y",
			  "VRAMPOOL_CLIENTS_PYENV=/z", "VRAMPOOL_WARNED_NOT=1", NULL };
	char *marked[] = { "VRAMPOOL_LAYUOT=u8:3", CONFIG_WARNED "=1", NULL };
	char out[2048];

	CU_ASSERT_EQUAL(warn_names_captured(typo, out, sizeof(out)), 1);
	CU_ASSERT_EQUAL(count_lines(out), 1);
	CU_ASSERT(strstr(out, "vrampool: unknown variable VRAMPOOL_LAYUOT (did you mean VRAMPOOL_LAYOUT?)") != NULL);
	CU_ASSERT_EQUAL(warn_names_captured(two, out, sizeof(out)), 2);
	CU_ASSERT_EQUAL(count_lines(out), 1);
	CU_ASSERT(strstr(out, "VRAMPOOL_BUGDET (did you mean VRAMPOOL_BUDGET?)") != NULL);
	CU_ASSERT(strstr(out, "VRAMPOOL_ZZZZZZZZZZZZ: not read") != NULL || strstr(out, "VRAMPOOL_ZZZZZZZZZZZZ,") != NULL);
	CU_ASSERT(strstr(out, "VRAMPOOLISH") == NULL);
	/* the one known name that is not the library's is flagged as a near miss */
	CU_ASSERT_EQUAL(warn_names_captured(known, out, sizeof(out)), 1);
	CU_ASSERT(strstr(out, "VRAMPOOL_WARNED_NOT") != NULL);
	known[9] = NULL;
	CU_ASSERT_EQUAL(warn_names_captured(known, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "");
	/* once per job: the marker silences it */
	CU_ASSERT_EQUAL(warn_names_captured(marked, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "");
	CU_ASSERT_STRING_EQUAL(config_closest_name("VRAMPOOL_TELEMTRY_S"), "VRAMPOOL_TELEMETRY_S");
	CU_ASSERT_STRING_EQUAL(config_closest_name("VRAMPOOL_VERBSOE"), "VRAMPOOL_VERBOSE");
	CU_ASSERT_PTR_NULL(config_closest_name("VRAMPOOL_COMPLETELY_ELSE"));
}

/*
 * config_warn_job in a process: warns, then sets the marker in its own
 * environment, so that a second call (a child) is silent.
 */
static void test_warn_job_sets_marker(void)
{
	struct config c;
	char out[2048];
	char *none[] = { NULL };

	unsetenv(CONFIG_WARNED);
	setenv("VRAMPOOL_LAYUOT", "u8:3", 1);
	memset(&c, 0, sizeof(c));
	cap_config = &c;
	captured(cap_warn_job_twice, out, sizeof(out));
	CU_ASSERT_EQUAL(count_lines(out), 1);
	CU_ASSERT(strstr(out, "VRAMPOOL_LAYUOT") != NULL);
	CU_ASSERT_PTR_NOT_NULL(getenv(CONFIG_WARNED));
	unsetenv("VRAMPOOL_LAYUOT");
	unsetenv(CONFIG_WARNED);
	/* nothing to say: no marker */
	config_warn_job(&c);
	CU_ASSERT_PTR_NULL(getenv(CONFIG_WARNED));
	CU_ASSERT_EQUAL(warn_names_captured(none, out, sizeof(out)), 0);
}

static const CU_TestInfo tests[] = {
	{ "with nothing set the defaults of DESIGN.md hold", test_defaults },
	{ "an empty value counts as unset", test_empty_is_unset },
	{ "every value is read alike: spaces around it left out, keywords in any case, paths as written",
	  test_one_reading },
	{ "VRAMPOOL takes on, off, 1 and 0, and off is silent pass-through", test_switch },
	{ "VRAMPOOL takes the usual spellings of on and off in any case, and so do the flags",
	  test_switch_spellings },
	{ "a cosmetic variable's bad value is warned about once per job and costs the pool nothing",
	  test_cosmetic_once_per_job },
	{ "%q{NAME} expands to a variable's value, '/' as '_'; a bad %q is an error", test_expand_env },
	{ "a misspelled VRAMPOOL_* name is warned about with the closest known name", test_unknown_names },
	{ "the first process that warns sets the marker its children inherit", test_warn_job_sets_marker },
	{ "VRAMPOOL_LAYOUT is parsed and a bad one is reported", test_layout_var },
	{ "VRAMPOOL_BUDGET takes auto, a size or a share", test_budget },
	{ "the count variables take integers in their ranges", test_counts },
	{ "VRAMPOOL_MARGIN and VRAMPOOL_SLAB take sizes in their ranges", test_sizes },
	{ "VRAMPOOL_STATS, VRAMPOOL_VERBOSE and VRAMPOOL_QUIET are read; a bad flag is only warned about",
	  test_stats_and_flags },
	{ "verbose and quiet hold when other variables are bad",
	  test_flags_hold_when_others_are_bad },
	{ "VRAMPOOL=off with a layout is pass-through without complaint", test_off_with_layout },
	{ "a value with a newline cannot forge a second line", test_value_is_one_line },
	{ "sizes take binary suffixes and refuse junk and overflow", test_parse_size },
	{ "VRAMPOOL_LEDGER takes on, off and force; VRAMPOOL_LINK_GBPS a speed from 0.01 to 100000 GB/s",
	  test_ledger_vars },
	{ "%p in the stats path becomes the pid, %r the rank, %h the host",
	  test_stats_path_expansion },
	{ "VRAMPOOL_WHATIF_MEM takes a size from 16K to 1T", test_whatif_mem },
	{ "the rank is RANK, else LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, else 0",
	  test_rank_selection },
	{ "path variables come through their own getter (secure_getenv in the shim)",
	  test_paths_come_from_their_own_getter },
	{ "%r and %h expand, and a host name cannot leave the directory",
	  test_expand_rank_and_host },
	CU_TEST_INFO_NULL,
};

static const struct cunit_suite suite = {
	.name = "config",
	.tests = tests,
};

int main(void)
{
	return cunit_suite_main(&suite);
}
