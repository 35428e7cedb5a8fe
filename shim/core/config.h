/*
 * config: every VRAMPOOL_* variable of DESIGN.md, parsed once at start.
 *
 * A malformed value is never fatal: config_load prints one line on stderr
 * naming the variable and what was expected. A variable that decides what
 * the pool does marks the configuration invalid, and the shim then runs
 * as a counting pass-through; a cosmetic one (VRAMPOOL_VERBOSE,
 * VRAMPOOL_QUIET, VRAMPOOL_TELEMETRY_S) is warned about and its default
 * used. Warnings that need not repeat in every process of a job (cosmetic
 * values, unknown VRAMPOOL_* names) are shown once per job: the launcher
 * or the first process that shows them sets CONFIG_WARNED in the
 * environment its children inherit, and a process that finds it set
 * stays silent about them. Parsing is
 * pure (the environment comes through getenv-like callbacks) so the unit
 * tests drive it without touching the process environment. Path variables
 * (VRAMPOOL_STATS, VRAMPOOL_TELEMETRY) come through a getter of their own,
 * secure_getenv in the shim: a set-user-ID or otherwise secure-execution
 * process never takes a file name to write from its environment.
 */
#ifndef VRAMPOOL_CONFIG_H
#define VRAMPOOL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "core/layout.h"

enum budget_kind { BUDGET_AUTO, BUDGET_BYTES, BUDGET_SHARE };

/*
 * Set (to 1) in the environment once this job's configuration warnings
 * were shown (config_names.h warns about unknown names).
 */
#define CONFIG_WARNED "VRAMPOOL_WARNED"

/* VRAMPOOL_LEDGER (issue 16): the cost ledger decides, is left out, or always pools. */
enum ledger_mode { LEDGER_ON, LEDGER_OFF, LEDGER_FORCE };

struct config {
	int enabled;            /* the pool may act: VRAMPOOL on (not off, 0 or dry) and every value valid */
	int off;                /* VRAMPOOL=off or 0 asked for pass-through */
	int dry;                /* VRAMPOOL=dry: fingerprint and index, no device memory or work of its own */
	int invalid;            /* number of malformed variables seen that turn the pool off */
	int warnings;           /* number of cosmetic variables with a malformed value (default used) */
	int warned_before;      /* CONFIG_WARNED was set: this job's warnings were shown already */
	char problem[256];      /* the first malformed variable's message (the dump's "reason"), or empty */
	int has_layout;         /* VRAMPOOL_LAYOUT set and valid */
	char layout_error[192]; /* VRAMPOOL_LAYOUT set and rejected: the parser's reason; else empty */
	struct layout layout;
	enum budget_kind budget_kind;
	uint64_t budget_bytes;  /* BUDGET_BYTES */
	double budget_share;    /* BUDGET_SHARE, in (0, 1] */
	uint64_t probe_after;   /* VRAMPOOL_PROBE_AFTER, default 2; 0: decide at the first matched copy */
	uint64_t reserve_batches; /* default 16 */
	uint64_t margin;        /* default 512M */
	uint64_t slab;          /* default 64M; at least 1M */
	unsigned threads;       /* 0: chosen from the CPU count */
	char stats_path[4096];  /* empty: no JSON dump; "%p", "%r", "%h" not yet expanded */
	char telemetry_path[4096]; /* VRAMPOOL_TELEMETRY: append a JSON line per interval; empty: none */
	int verbose;
	int quiet;
	uint64_t telemetry_s;   /* VRAMPOOL_TELEMETRY_S: the telemetry interval in seconds, default 10 */
	uint64_t whatif_mem;    /* VRAMPOOL_WHATIF_MEM: the what-if table's memory cap, default 1M, 16K to 1T */
	/* The cost ledger (issue 16, pool/ledger.h). */
	enum ledger_mode ledger;        /* VRAMPOOL_LEDGER: on (default), off, force */
	double link_gbps;       /* VRAMPOOL_LINK_GBPS: the stated host-to-device link, 1e9 bytes/s; 0: measure it */
	/*
	 * The process's rank in a distributed job: the first of RANK,
	 * LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID that is set
	 * to a decimal number (at most 9 digits; other values are skipped, as
	 * they would not be safe in a file name). "0" and has_rank 0 when none
	 * (a path's %r then expands to "norank", config_stats_path).
	 */
	char rank[16];
	int has_rank;
};

/*
 * Fills c from the variables returned by get, path variables from
 * get_path (pass getenv and config_secure_getenv in the shim). Prints one
 * stderr line per malformed variable, for example
 *   vrampool: VRAMPOOL_SLAB='12Q' is not a size (expected e.g. 64M, 1G); running as pass-through
 *   vrampool: VRAMPOOL_QUIET='2' is not a flag (expected 1 or 0); ignored, the default (0) is used
 * (the second kind, cosmetic, only when get has no CONFIG_WARNED) and
 * returns the number of malformed variables that turn the pool off (0
 * when all are good; cosmetic ones are counted in c->warnings). Always
 * leaves c usable: defaults for the bad ones, enabled = 0 for the first kind.
 * VRAMPOOL takes on, off and dry, with on and off in the usual spellings
 * (1, true, yes, enable, enabled; 0, false, no, disable, disabled), any
 * case; VRAMPOOL_VERBOSE and VRAMPOOL_QUIET the same spellings of 1 and 0.
 * Every keyword is read in any case (auto, force, the layout's dtypes and
 * whole). Every value but the paths' is read without the spaces, tabs and
 * line ends around it, and one that is empty, or nothing but those, is
 * unset; the paths are taken as written (empty: unset).
 */
int config_load_secure(struct config *c, const char *(*get)(const char *name),
		       const char *(*get_path)(const char *name));

/* config_load_secure with one getter for every variable (tests). */
int config_load(struct config *c, const char *(*get)(const char *name));

/* secure_getenv with the getter's type: NULL in a secure-execution process. */
const char *config_secure_getenv(const char *name);

#define CONFIG_ENV_NAME_MAX 255	/* longest NAME of %q{NAME} */

/*
 * Reads "{NAME}" at s, NAME an environment variable's name ([A-Za-z_]
 * then [A-Za-z0-9_], at most CONFIG_ENV_NAME_MAX characters). Returns the
 * characters it spans, braces included, or 0 when malformed; name (when
 * not NULL, of CONFIG_ENV_NAME_MAX + 1 bytes) gets NAME.
 */
size_t config_env_name(const char *s, char *name);

/*
 * Expands pattern into out: "%p" the pid, "%r" rank ("norank" when rank
 * is NULL or empty, so that it never collides with rank 0), "%h" host (its
 * characters outside [A-Za-z0-9._-] become '_', and "." or ".." becomes
 * "_", so a host name cannot climb out of the directory), "%q{NAME}" the
 * value get returns for NAME ('/' and control characters become '_', "."
 * or ".." "_"; empty when unset or get is NULL); any other '%' is copied as
 * it is (there is no "%%" escape). Returns 0, -ENAMETOOLONG, or -EINVAL
 * for a "%q" not followed by "{NAME}" (NAME: [A-Za-z_][A-Za-z0-9_]*, at
 * most 255 characters); out is "" on an error.
 */
int config_expand_path_env(const char *pattern, long pid, const char *rank, const char *host,
			   const char *(*get)(const char *name), char *out, size_t len);

/* config_expand_path_env with %q read through config_secure_getenv. */
int config_expand_path(const char *pattern, long pid, const char *rank, const char *host,
		       char *out, size_t len);

/*
 * The stats path of c expanded for pid, c's rank (none: "norank") and
 * this machine's host name (config_expand_path). Returns 0 or a negative
 * errno as config_expand_path does.
 */
int config_stats_path(const struct config *c, long pid, char *out, size_t len);


#endif
