/*
 * config: every VRAMPOOL_* variable of DESIGN.md, parsed once at start.
 *
 * A malformed value is never fatal: config_load prints one line on stderr
 * naming the variable and what was expected, marks the configuration
 * invalid, and the shim then runs as a counting pass-through. Parsing is
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

/* VRAMPOOL_LEDGER (issue 16): the cost ledger decides, is left out, or always pools. */
enum ledger_mode { LEDGER_ON, LEDGER_OFF, LEDGER_FORCE };

struct config {
	int enabled;            /* the pool may act: VRAMPOOL on (not off, 0 or dry) and every value valid */
	int off;                /* VRAMPOOL=off or 0 asked for pass-through */
	int dry;                /* VRAMPOOL=dry: fingerprint and index, no device memory or work of its own */
	int invalid;            /* number of malformed variables seen */
	char problem[256];      /* the first malformed variable's message (the dump's "reason"), or empty */
	int has_layout;         /* VRAMPOOL_LAYOUT set and valid */
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
	 * they would not be safe in a file name). "0" and has_rank 0 when none.
	 */
	char rank[16];
	int has_rank;
};

/*
 * Fills c from the variables returned by get, path variables from
 * get_path (pass getenv and config_secure_getenv in the shim). Prints one
 * stderr line per malformed variable, for example
 *   vrampool: VRAMPOOL_SLAB='12Q' is not a size (expected e.g. 64M, 1G); running as pass-through
 * and returns the number of malformed variables (0 when all are good).
 * Always leaves c usable: defaults for the bad ones, enabled = 0.
 */
int config_load_secure(struct config *c, const char *(*get)(const char *name),
		       const char *(*get_path)(const char *name));

/* config_load_secure with one getter for every variable (tests). */
int config_load(struct config *c, const char *(*get)(const char *name));

/* secure_getenv with the getter's type: NULL in a secure-execution process. */
const char *config_secure_getenv(const char *name);

/*
 * Expands pattern into out: "%p" the pid, "%r" rank, "%h" host (its
 * characters outside [A-Za-z0-9._-] become '_', and "." or ".." becomes
 * "_", so a host name cannot climb out of the directory); any other '%' is
 * copied as it is (there is no "%%" escape). Returns 0 or -ENAMETOOLONG.
 */
int config_expand_path(const char *pattern, long pid, const char *rank, const char *host,
		       char *out, size_t len);

/*
 * The stats path of c expanded for pid, c's rank and this machine's host
 * name (config_expand_path). Returns 0 or -ENAMETOOLONG.
 */
int config_stats_path(const struct config *c, long pid, char *out, size_t len);

#endif
