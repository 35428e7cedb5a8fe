/*
 * config: the VRAMPOOL_* variables, parsed once from a getenv-like callback.
 *
 * One reading for every variable but the two paths: the spaces, tabs and
 * line ends around a value are left out, a value that is empty (or only
 * those) counts as unset, and keywords (on, off, dry, auto, force, and
 * the layout's) are read in any case. Paths are taken as written. Inside
 * a value every parser is strict (no sign, no spaces, no trailing junk;
 * the layout's spaces around its commas excepted) and
 * never fatal: a bad value costs one stderr line naming the variable, the
 * value and what was expected, and leaves the default in place. A variable
 * that decides what the pool does then turns the pool off for the run; a
 * cosmetic one (VRAMPOOL_VERBOSE, VRAMPOOL_QUIET, VRAMPOOL_TELEMETRY_S) is
 * only warned about, once per job (CONFIG_WARNED). VRAMPOOL_VERBOSE and
 * VRAMPOOL_QUIET are read first so they hold whatever else is wrong.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "core/size.h"

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)
#define TIB (1024ULL * GIB)

#define CONFIG_SHOW_MAX 64	/* longest value quoted in an error line */
#define CONFIG_VALUE_MAX 4096	/* longest value trimmed (config_get) */
#define CONFIG_SPACE " \t\r\n\v\f"	/* what config_get trims around a value */

/*
 * Copies value into out for quoting: at most CONFIG_SHOW_MAX characters,
 * unprintable ones as '?', so a hostile or mistyped value cannot break the
 * line in two.
 */
static const char *config_show(char *out, size_t outlen, const char *value)
{
	size_t i, k = 0;

	for (i = 0; value[i] != '\0' && k + 4 < outlen && i < CONFIG_SHOW_MAX; i++)
		out[k++] = isprint((unsigned char)value[i]) ? value[i] : '?';
	if (value[i] != '\0' && k + 4 < outlen) {
		memcpy(out + k, "...", 3);
		k += 3;
	}
	out[k] = '\0';
	return out;
}

/* The configuration being loaded, so a complaint can be kept for the dump. */
static struct config *config_cur;

/* Reports one malformed variable; the caller counts it. The first is kept in problem. */
static void config_complain(const char *name, const char *value, const char *why)
{
	char show[CONFIG_SHOW_MAX + 8];

	config_show(show, sizeof(show), value);
	log_line("%s='%s' %s; running as pass-through", name, show, why);
	if (config_cur && config_cur->problem[0] == '\0')
		snprintf(config_cur->problem, sizeof(config_cur->problem), "%s='%s' %s", name, show, why);
}

/*
 * Warns about a cosmetic variable's malformed value (the default is kept,
 * the pool runs), unless this job's warnings were shown already
 * (CONFIG_WARNED set). Counted in warnings, not in invalid.
 */
static void config_warn(const char *name, const char *value, const char *why, const char *dflt)
{
	char show[CONFIG_SHOW_MAX + 8];

	config_cur->warnings++;
	if (config_cur->warned_before)
		return;
	config_show(show, sizeof(show), value);
	log_line("%s='%s' %s; ignored, the default (%s) is used", name, show, why, dflt);
}

/*
 * The usual spellings of a switch, case-insensitive: 1 for on, 1, true,
 * yes, enable, enabled; 0 for off, 0, false, no, disable, disabled; -1
 * for anything else.
 */
static int config_onoff(const char *v)
{
	static const char *const on[] = { "on", "1", "true", "yes", "enable", "enabled" };
	static const char *const off[] = { "off", "0", "false", "no", "disable", "disabled" };

	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		if (strcasecmp(v, on[i]) == 0)
			return 1;
		if (strcasecmp(v, off[i]) == 0)
			return 0;
	}
	return -1;
}

/*
 * Parses "N%" with 0 < N <= 100 (N may have a decimal part: 12.5%) into a
 * share in (0, 1]. Returns 0 or -EINVAL.
 */
static int config_parse_share(const char *s, double *out)
{
	double whole = 0, frac = 0, scale = 1;
	const char *p = s;
	int digits = 0;

	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		whole = whole * 10 + (*p - '0');
		if (whole > 1000)
			return -EINVAL;
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
			scale /= 10;
			frac += (*p - '0') * scale;
		}
	}
	if (digits == 0 || p[0] != '%' || p[1] != '\0')
		return -EINVAL;
	whole += frac;
	if (!(whole > 0) || whole > 100)
		return -EINVAL;
	*out = whole / 100;
	return 0;
}

/* Returns the variable's value as it is, or NULL when unset or empty (paths, ranks, the marker). */
static const char *config_get_raw(const char *(*get)(const char *name), const char *name)
{
	const char *v = get(name);

	return (v != NULL && v[0] != '\0') ? v : NULL;
}

/*
 * Returns the value of a variable that is not a path, without the spaces,
 * tabs and line ends around it (a copy in buf, CONFIG_VALUE_MAX bytes), or
 * NULL when it is unset, empty or nothing but those. A value too long for
 * buf is returned as it is (no valid value is that long: the parser
 * refuses it).
 */
static const char *config_get(const char *(*get)(const char *name), const char *name, char *buf)
{
	const char *v = config_get_raw(get, name);
	size_t b, e;

	if (v == NULL)
		return NULL;
	b = strspn(v, CONFIG_SPACE);
	e = strlen(v);
	while (e > b && strchr(CONFIG_SPACE, v[e - 1]))
		e--;
	if (e == b)
		return NULL;
	if (e - b >= CONFIG_VALUE_MAX)
		return v;
	memcpy(buf, v + b, e - b);
	buf[e - b] = '\0';
	return buf;
}

/*
 * Parses a cosmetic flag (1, 0 or another spelling config_onoff knows);
 * a bad value is warned about and leaves *out as it is.
 */
static void config_flag(const char *(*get)(const char *name), const char *name, int *out)
{
	char buf[CONFIG_VALUE_MAX];
	const char *v = config_get(get, name, buf);
	int on;

	if (v == NULL)
		return;
	on = config_onoff(v);
	if (on >= 0)
		*out = on;
	else
		config_warn(name, v, "is not a flag (expected 1 or 0)", *out ? "1" : "0");
}

/*
 * Reads variable name with parse (size_parse_uint: digits only, or
 * size_parse: a size) and keeps it in *out when it lies in [min, max].
 * A value parse refuses gets the line "name='v' " + bad; one out of range
 * gets range (bad as well when range is NULL). Returns 0, or -EINVAL after
 * complaining. An unset variable leaves *out as it is.
 */
static int config_number(const char *(*get)(const char *name), const char *name,
			 int (*parse)(const char *s, uint64_t *out), const char *bad,
			 uint64_t min, uint64_t max, const char *range, uint64_t *out)
{
	char buf[CONFIG_VALUE_MAX];
	const char *v = config_get(get, name, buf);
	uint64_t n;

	if (v == NULL)
		return 0;
	if (parse(v, &n) < 0 || ((n < min || n > max) && !range)) {
		config_complain(name, v, bad);
		return -EINVAL;
	}
	if (n < min || n > max) {
		config_complain(name, v, range);
		return -EINVAL;
	}
	*out = n;
	return 0;
}

/* An integer in [min, max]; expected says what is expected, in words. */
static int config_int(const char *(*get)(const char *name), const char *name,
		      uint64_t min, uint64_t max, const char *expected, uint64_t *out)
{
	return config_number(get, name, size_parse_uint, expected, min, max, NULL, out);
}

/*
 * VRAMPOOL_TELEMETRY_S, cosmetic: seconds from 1 to 86400; a bad value is
 * warned about and the default kept.
 */
static void config_interval(struct config *c, const char *(*get)(const char *name))
{
	char buf[CONFIG_VALUE_MAX];
	const char *v = config_get(get, "VRAMPOOL_TELEMETRY_S", buf);
	char dflt[32];
	uint64_t n;

	if (v == NULL)
		return;
	if (size_parse_uint(v, &n) == 0 && n >= 1 && n <= 86400) {
		c->telemetry_s = n;
		return;
	}
	snprintf(dflt, sizeof(dflt), "%llu s", (unsigned long long)c->telemetry_s);
	config_warn("VRAMPOOL_TELEMETRY_S", v, "is not an interval (expected seconds from 1 to 86400)", dflt);
}

/* A size in [min, max]; range says what is expected when it lies outside. */
static int config_size(const char *(*get)(const char *name), const char *name,
		       uint64_t min, uint64_t max, const char *range, uint64_t *out)
{
	return config_number(get, name, size_parse, "is not a size (expected e.g. 64M, 1G)",
			     min, max, range, out);
}

/* VRAMPOOL: on or off in the usual spellings (config_onoff), or dry; case-insensitive. */
static int config_switch(struct config *c, const char *(*get)(const char *name))
{
	char buf[CONFIG_VALUE_MAX];
	const char *v = config_get(get, "VRAMPOOL", buf);
	int on;

	if (v == NULL)
		return 0;
	on = config_onoff(v);
	if (on >= 0) {
		c->off = !on;
		return 0;
	}
	if (strcasecmp(v, "dry") == 0) {
		c->dry = 1;
		return 0;
	}
	config_complain("VRAMPOOL", v, "is not a switch (expected on, off or dry; 1, true, yes, enable(d) "
			"are on, 0, false, no, disable(d) are off)");
	return -EINVAL;
}

/* VRAMPOOL_LAYOUT: the layout grammar; the parser's reason goes in the line. */
static int config_layout(struct config *c, const char *(*get)(const char *name))
{
	char buf[CONFIG_VALUE_MAX];
	const char *v = config_get(get, "VRAMPOOL_LAYOUT", buf);
	char err[192], why[224];

	if (v == NULL)
		return 0;
	if (layout_parse(&c->layout, v, err, sizeof(err)) < 0) {
		snprintf(c->layout_error, sizeof(c->layout_error), "%s", err);
		snprintf(why, sizeof(why), "is not a layout: %s", err);
		config_complain("VRAMPOOL_LAYOUT", v, why);
		return -EINVAL;
	}
	c->has_layout = 1;
	return 0;
}

/* VRAMPOOL_BUDGET: auto, a size above zero, or a share N% with 0 < N <= 100. */
static int config_budget(struct config *c, const char *(*get)(const char *name))
{
	char buf[CONFIG_VALUE_MAX];
	const char *v = config_get(get, "VRAMPOOL_BUDGET", buf);
	uint64_t n;
	double share;

	if (v == NULL || strcasecmp(v, "auto") == 0)
		return 0;
	if (strchr(v, '%') != NULL) {
		if (config_parse_share(v, &share) == 0) {
			c->budget_kind = BUDGET_SHARE;
			c->budget_share = share;
			return 0;
		}
	} else if (size_parse(v, &n) == 0 && n > 0) {
		c->budget_kind = BUDGET_BYTES;
		c->budget_bytes = n;
		return 0;
	}
	config_complain("VRAMPOOL_BUDGET", v,
			"is not a budget (expected auto, a size like 8G, or a share like 50% in (0, 100])");
	return -EINVAL;
}

/*
 * VRAMPOOL_LINK_GBPS: a decimal number of 10^9 bytes per second, from 0.01
 * to 100000 (16, 12.5, 0.5), digits and at most one point only.
 */
static int config_link(struct config *c, const char *(*get)(const char *name))
{
	char buf[CONFIG_VALUE_MAX];
	const char *v = config_get(get, "VRAMPOOL_LINK_GBPS", buf), *p;
	double whole = 0, scale = 1;
	int digits = 0, point = 0;

	if (v == NULL)
		return 0;
	for (p = v; (*p >= '0' && *p <= '9') || (*p == '.' && !point); p++) {
		if (*p == '.') {
			point = 1;
			continue;
		}
		if (++digits > 12)
			break;
		if (point)
			scale /= 10;
		whole = whole * 10 + (*p - '0');
	}
	whole *= scale;
	if (*p != '\0' || digits == 0 || whole < 0.01 || whole > 100000) {
		config_complain("VRAMPOOL_LINK_GBPS", v,
				"is not a link speed (expected GB/s from 0.01 to 100000, e.g. 16 or 12.5)");
		return -EINVAL;
	}
	c->link_gbps = whole;
	return 0;
}

/* VRAMPOOL_LEDGER: on, off or force. */
static int config_ledger(struct config *c, const char *(*get)(const char *name))
{
	char buf[CONFIG_VALUE_MAX];
	const char *v = config_get(get, "VRAMPOOL_LEDGER", buf);

	if (v == NULL || strcasecmp(v, "on") == 0)
		return 0;
	if (strcasecmp(v, "off") == 0) {
		c->ledger = LEDGER_OFF;
		return 0;
	}
	if (strcasecmp(v, "force") == 0) {
		c->ledger = LEDGER_FORCE;
		return 0;
	}
	config_complain("VRAMPOOL_LEDGER", v, "is not a ledger mode (expected on, off or force)");
	return -EINVAL;
}

/*
 * A path variable (VRAMPOOL_STATS, VRAMPOOL_TELEMETRY): any path that fits
 * out, whose every %q is %q{NAME}.
 */
static int config_path(const char *(*get)(const char *name), const char *name, char *out, size_t len)
{
	const char *v = config_get_raw(get, name), *p;
	size_t n;

	if (v == NULL)
		return 0;
	n = strlen(v);
	if (n >= len) {
		config_complain(name, v, "is too long (expected a path under 4096 characters)");
		return -EINVAL;
	}
	for (p = strstr(v, "%q"); p; p = strstr(p + 2, "%q")) {
		if (config_env_name(p + 2, NULL) == 0) {
			config_complain(name, v, "has a malformed %q (expected %q{NAME}, NAME an environment "
					"variable's name)");
			return -EINVAL;
		}
	}
	memcpy(out, v, n + 1);
	return 0;
}

/*
 * The rank variables of the common launchers, most specific first; the
 * first set to a number of at most 9 digits wins.
 */
static void config_rank(struct config *c, const char *(*get)(const char *name))
{
	static const char *const names[] = { "RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
					     "SLURM_PROCID" };
	size_t i, n;

	snprintf(c->rank, sizeof(c->rank), "0");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = config_get_raw(get, names[i]);

		if (v == NULL)
			continue;
		n = strspn(v, "0123456789");
		if (n == 0 || n > 9 || v[n] != '\0')
			continue;
		snprintf(c->rank, sizeof(c->rank), "%s", v);
		c->has_rank = 1;
		return;
	}
}

int config_load(struct config *c, const char *(*get)(const char *name))
{
	return config_load_secure(c, get, get);
}

int config_load_secure(struct config *c, const char *(*get)(const char *name),
		       const char *(*get_path)(const char *name))
{
	uint64_t threads = 0;
	int bad = 0;

	memset(c, 0, sizeof(*c));
	config_cur = c;
	c->budget_kind = BUDGET_AUTO;
	c->probe_after = 2;
	c->reserve_batches = 16;
	c->margin = 512 * MIB;
	c->slab = 64 * MIB;
	c->telemetry_s = 10;
	c->whatif_mem = MIB;              /* issue 16: a sampled curve (whatif.h) */

	c->warned_before = config_get_raw(get, CONFIG_WARNED) != NULL;
	config_flag(get, "VRAMPOOL_VERBOSE", &c->verbose);
	config_flag(get, "VRAMPOOL_QUIET", &c->quiet);
	log_set_verbose(c->verbose);

	bad += config_switch(c, get) < 0;
	bad += config_layout(c, get) < 0;
	bad += config_budget(c, get) < 0;
	bad += config_int(get, "VRAMPOOL_PROBE_AFTER", 0, UINT64_MAX,
			  "is not a count (expected an integer >= 0)", &c->probe_after) < 0;
	bad += config_int(get, "VRAMPOOL_RESERVE_BATCHES", 0, UINT64_MAX,
			  "is not a count (expected an integer >= 0)", &c->reserve_batches) < 0;
	bad += config_size(get, "VRAMPOOL_MARGIN", 0, UINT64_MAX, "", &c->margin) < 0;
	bad += config_size(get, "VRAMPOOL_SLAB", MIB, 16 * GIB,
			   "is out of range (expected a size from 1M to 16G)", &c->slab) < 0;
	bad += config_int(get, "VRAMPOOL_THREADS", 1, 256,
			  "is not a thread count (expected an integer from 1 to 256)", &threads) < 0;
	c->threads = (unsigned)threads;
	config_interval(c, get);
	bad += config_size(get, "VRAMPOOL_WHATIF_MEM", 16 * KIB, TIB,
			   "is out of range (expected a size from 16K to 1T)", &c->whatif_mem) < 0;
	bad += config_ledger(c, get) < 0;
	bad += config_link(c, get) < 0;
	bad += config_path(get_path, "VRAMPOOL_STATS", c->stats_path, sizeof(c->stats_path)) < 0;
	bad += config_path(get_path, "VRAMPOOL_TELEMETRY", c->telemetry_path, sizeof(c->telemetry_path)) < 0;
	config_rank(c, get);

	c->invalid = bad;
	c->enabled = !c->off && !c->dry && bad == 0;
	config_cur = NULL;
	return bad;
}
