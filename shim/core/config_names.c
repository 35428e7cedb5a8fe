/*
 * config_names: the warning about VRAMPOOL_* names that vrampool does not
 * read (config_names.h is the contract).
 *
 * The known names are listed here once: the library's variables, the
 * marker CONFIG_WARNED and the names the project's own scripts and tests
 * use. A name is compared with each by edit distance (a swap of two
 * neighbours counting 1, so LAYUOT is 1 from LAYOUT) and the closest is
 * suggested when it is near enough to be a misspelling.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config_names.h"
#include "core/log.h"

/*
 * Every VRAMPOOL_* name some part of vrampool reads: the library's
 * variables, the marker, and the names of the project's own scripts and
 * tests (scripts/deps.sh, tests/e2e/lib.sh, tests/unit).
 */
static const char *const config_known[] = {
	"VRAMPOOL", "VRAMPOOL_LAYOUT", "VRAMPOOL_BUDGET", "VRAMPOOL_PROBE_AFTER",
	"VRAMPOOL_RESERVE_BATCHES", "VRAMPOOL_MARGIN", "VRAMPOOL_SLAB", "VRAMPOOL_THREADS",
	"VRAMPOOL_STATS", "VRAMPOOL_TELEMETRY", "VRAMPOOL_TELEMETRY_S", "VRAMPOOL_WHATIF_MEM",
	"VRAMPOOL_LINK_GBPS", "VRAMPOOL_LEDGER", "VRAMPOOL_VERBOSE", "VRAMPOOL_QUIET",
	CONFIG_WARNED,
	"VRAMPOOL_BIN", "VRAMPOOL_PYENV", "VRAMPOOL_CLIENTS_PYENV", "VRAMPOOL_TEST_SECURE",
};

#define CONFIG_NAME_CMP 64	/* names compared up to this many characters */

/*
 * The edit distance of a and b (insertions, deletions, substitutions and
 * swaps of two neighbours, each 1: LAYUOT is 1 from LAYOUT), over their
 * first CONFIG_NAME_CMP characters.
 */
static size_t config_distance(const char *a, const char *b)
{
	size_t d[3][CONFIG_NAME_CMP + 1];
	size_t la = strnlen(a, CONFIG_NAME_CMP), lb = strnlen(b, CONFIG_NAME_CMP), i, j;

	for (j = 0; j <= lb; j++)
		d[0][j] = j;
	for (i = 1; i <= la; i++) {
		size_t *cur = d[i % 3], *prev = d[(i - 1) % 3], *prev2 = d[(i + 1) % 3];

		cur[0] = i;
		for (j = 1; j <= lb; j++) {
			size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);

			if (prev[j] + 1 < best)
				best = prev[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < best)
				best = prev2[j - 2] + 1;
			cur[j] = best;
		}
	}
	return d[la % 3][lb];
}

const char *config_closest_name(const char *name)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX, len = strlen(name);

	for (size_t i = 0; i < sizeof(config_known) / sizeof(config_known[0]); i++) {
		size_t d = config_distance(name, config_known[i]);

		if (d < best_d) {
			best_d = d;
			best = config_known[i];
		}
	}
	/* a name too far from every known one gets no suggestion */
	return best_d <= 2 || (best_d <= 3 && len >= 16) ? best : NULL;
}

/* Whether the first len characters of name are a known name. */
static int config_is_known_name(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(config_known) / sizeof(config_known[0]); i++)
		if (strlen(config_known[i]) == len && strncmp(config_known[i], name, len) == 0)
			return 1;
	return 0;
}

int config_warn_names(char *const *env)
{
	char line[768], shown[4 * CONFIG_NAME_CMP + 8];
	size_t used = 0;
	int n = 0;

	for (char *const *e = env; e && *e; e++)
		if (strncmp(*e, CONFIG_WARNED "=", sizeof(CONFIG_WARNED)) == 0)
			return 0;
	line[0] = '\0';
	for (char *const *e = env; e && *e; e++) {
		const char *eq = strchr(*e, '='), *near;
		size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
		char name[CONFIG_NAME_CMP + 1];
		int k;

		if (strncmp(*e, "VRAMPOOL", 8) != 0 || (len > 8 && (*e)[8] != '_') || config_is_known_name(*e, len))
			continue;
		if (len > CONFIG_NAME_CMP)
			len = CONFIG_NAME_CMP;
		memcpy(name, *e, len);
		name[len] = '\0';
		near = config_closest_name(name);
		log_escape(shown, sizeof(shown), name);
		k = snprintf(line + used, sizeof(line) - used, "%s%s%s%s%s", n ? ", " : "", shown,
			     near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
		n++;
		if (k > 0 && (size_t)k < sizeof(line) - used)
			used += (size_t)k;
	}
	if (n > 0)
		log_line("unknown variable%s %s: not read by vrampool, ignored", n == 1 ? "" : "s", line);
	return n;
}

void config_warn_job(const struct config *c)
{
	int unknown = config_warn_names(environ);

	/* the processes this one starts inherit the marker, and stay silent */
	if ((unknown > 0 || (c->warnings > 0 && !c->warned_before)) && getenv(CONFIG_WARNED) == NULL)
		setenv(CONFIG_WARNED, "1", 0);
}
