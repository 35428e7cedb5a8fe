/*
 * fuzz_config.c: the VRAMPOOL_* variables (shim/core/config.c, with the
 * layout and size parsers beneath it) and the stats path's expansion.
 *
 * The input is an environment: lines NAME=VALUE (the first '=' splits;
 * a later line of the same name is not seen, as getenv sees the first).
 * FUZZ_HOST=NAME is the host name the stats path is expanded with.
 * Promises checked (config.h): the count returned is the number of
 * malformed variables; the pool is enabled only when none is malformed
 * and the mode allows it; every value lies in its documented range; every
 * string is terminated; a malformed variable leaves a reason; the expanded
 * stats path has exactly the pattern's slashes (a host or rank cannot add
 * a directory) or is refused as too long.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "fuzz.h"

#define FUZZ_VARS_MAX 64

static const char *fuzz_names[FUZZ_VARS_MAX];
static const char *fuzz_values[FUZZ_VARS_MAX];
static int fuzz_nvars;

/* The getter config_load calls: the first line naming NAME, or NULL. */
static const char *fuzz_getenv(const char *name)
{
	int i;

	for (i = 0; i < fuzz_nvars; i++)
		if (strcmp(fuzz_names[i], name) == 0)
			return fuzz_values[i];
	return NULL;
}

/* Splits text (modified in place) into NAME=VALUE lines. */
static void fuzz_environ(char *text)
{
	char *line = text, *next, *eq;

	fuzz_nvars = 0;
	for (; line && fuzz_nvars < FUZZ_VARS_MAX; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		fuzz_names[fuzz_nvars] = line;
		fuzz_values[fuzz_nvars++] = eq + 1;
	}
}

static size_t fuzz_count(const char *s, char ch)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == ch;
	return n;
}

static void fuzz_check(const struct config *c, int bad, const uint8_t *data, size_t size)
{
	int i;

	if (bad < 0 || bad != c->invalid)
		fuzz_fail("config_load's count is not the number of malformed variables", data, size);
	if (c->enabled != (!c->off && !c->dry && bad == 0))
		fuzz_fail("enabled does not follow from the mode and the malformed count", data, size);
	if (!fuzz_terminated(c->problem, sizeof(c->problem)) || (bad && !c->problem[0]))
		fuzz_fail("a malformed variable left no reason, or an unterminated one", data, size);
	if (!fuzz_terminated(c->stats_path, sizeof(c->stats_path)) ||
	    !fuzz_terminated(c->telemetry_path, sizeof(c->telemetry_path)) ||
	    !fuzz_terminated(c->layout.text, sizeof(c->layout.text)) ||
	    !fuzz_terminated(c->rank, sizeof(c->rank)))
		fuzz_fail("a string of the configuration is not terminated", data, size);
	if (c->slab < (1ULL << 20) || c->slab > (16ULL << 30) || c->threads > 256 ||
	    c->telemetry_s < 1 || c->telemetry_s > 86400 ||
	    c->whatif_mem < (16ULL << 10) || c->whatif_mem > (1ULL << 40))
		fuzz_fail("a value is outside its documented range", data, size);
	if (c->budget_kind == BUDGET_SHARE && !(c->budget_share > 0 && c->budget_share <= 1))
		fuzz_fail("a budget share outside (0, 1]", data, size);
	if (c->has_layout && (c->layout.nrows < 0 || c->layout.nrows > LAYOUT_MAX_SPECS))
		fuzz_fail("a layout with a spec count out of range", data, size);
	for (i = 0; c->has_rank && c->rank[i]; i++)
		if (c->rank[i] < '0' || c->rank[i] > '9')
			fuzz_fail("a rank that is not decimal digits", data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_string(data, size);
	struct config *c = malloc(sizeof(*c));
	const char *host;
	char out[512];
	int bad, err;

	if (!c)
		abort();
	fuzz_environ(text);
	bad = config_load(c, fuzz_getenv);
	fuzz_check(c, bad, data, size);
	host = fuzz_getenv("FUZZ_HOST");
	err = config_expand_path(c->stats_path, 12345, c->has_rank ? c->rank : "0", host, out, sizeof(out));
	if (err != 0 && err != -ENAMETOOLONG)
		fuzz_fail("config_expand_path returned neither 0 nor -ENAMETOOLONG", data, size);
	if (!fuzz_terminated(out, sizeof(out)) ||
	    (err == 0 && fuzz_count(out, '/') != fuzz_count(c->stats_path, '/')))
		fuzz_fail("the expanded stats path gained or lost a directory", data, size);
	free(c);
	free(text);
	return 0;
}
