/*
 * dump: the files the preloaded library writes, read back: the stats dump
 * (VRAMPOOL_STATS, DESIGN.md) and the telemetry file (VRAMPOOL_TELEMETRY,
 * one JSON object per line).
 *
 * Both are read with jansson (libjansson-dev: a small C library with no
 * dependencies of its own and a strict parser that reports line and
 * column). Unknown keys are ignored and keys an older library did not write
 * may be missing: their has_* flag stays false and the tables print "-"
 * rather than a made-up zero. Numbers are checked, never converted blindly:
 * a count must be a whole number from 0 to 2^63-1 (jansson's integers; an
 * integral real up to 2^64 is taken too); a negative number, a fraction
 * where a count is expected, or a number too large to represent is an
 * error that names the key. A what-if curve whose budget or served bytes
 * go down from one point to the next is an error too. Strings are kept as
 * they are; they are escaped when printed. "-" as a path reads standard
 * input.
 *
 * dump.c reads the stats dump and derives from it (sums, labels, the
 * what-if curve at a budget); telemetry.c reads the telemetry file; both
 * check each value through load.c (load.h, internal to the two).
 */
#ifndef VRAMPOOL_DUMP_H
#define VRAMPOOL_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DUMP_CURVE_MAX 64	/* what-if points kept (evenly thinned past it, last kept) */
#define DUMP_SIZES_MAX 4	/* copy sizes kept, most bytes first */

/*
 * One stats dump, or the sum of several (one per process of a
 * multi-process run: dump_add).
 */
#define DUMP_SPECS_MAX 17	/* specs with a ledger kept from a dump */

struct dump {
	char path[4096];	/* the file ("-": standard input), or a description */
	int processes;		/* dumps summed into this one */
	long long pid;
	char rank[64];		/* "" when the dump has none */
	char host[256];
	bool enabled;
	char mode[8];		/* "on", "off", "dry"; "" in an old dump */
	bool has_final, final;	/* final false: rewritten while the job ran */
	char ended_by[16];	/* "exit", "SIGTERM", ...; "" when running or old */
	bool has_elapsed;
	double elapsed_s;	/* seconds since the first CUDA call */
	double wall_s;		/* set by `vrampool run`: the run's wall time; 0 unknown */
	char layout[256];	/* "" when the run had no layout */
	char layout_source[16];	/* "env", "auto" or "" */
	char reason[512];	/* why the pool is off, dormant, full, latched or stood down */
	char evidence[512];	/* what the automatic layout was found from */
	char state[32];		/* pool.state, "" when absent */
	uint64_t h2d_calls, matched_calls, passthrough_calls, fallbacks,
		 graph_capture, driver_calls, batch_calls, stood_down_calls;
	uint64_t requested, h2d, served, captured_bytes;
	uint64_t rows_seen, hits, misses, rows_captured, pooled;
	uint64_t budget, pool_bytes, slabs, evictions, evicted_bytes,
		 oom_retries, device_ops, displaced_bytes, displaced_slabs,
		 faults, gather_launches, stand_downs;
	char gather[32];	/* "kernel", "batched copy" or "" */
	bool pool_stood_down;
	bool probe_decided, has_probe, has_rows, has_pool;
	uint64_t probe_free, probe_total, probe_reserve, probe_margin;
	uint64_t fingerprint_ns, shim_ns;
	uint64_t alloc_calls;
	/* What-if: what fill-until-full admission would have served. */
	bool has_whatif, whatif_sampled;
	uint64_t unique_bytes, repeat_bytes, tracked_rows;
	int npoints;
	uint64_t curve_budget[DUMP_CURVE_MAX];
	uint64_t curve_served[DUMP_CURVE_MAX];
	/* The copy sizes with the most bytes ("sizes"), most bytes first. */
	struct { uint64_t bytes, calls, total; } sizes[DUMP_SIZES_MAX];
	int nsizes;
	/* The cost ledger (issue 16): absent from older dumps (zeros, none). */
	uint64_t stood_aside_calls, stand_asides, resumes, shim_cpu_ns;
	char ledger_mode[8];	/* "on", "off", "force"; "" in an older dump */
	struct dump_spec {
		int index;	/* its place in the layout; -1 whole:MIN */
		uint64_t row;
		bool aside;	/* "decision": "stood_aside" */
		char reason[320];
		uint64_t aside_copies, stand_asides, resumes;
	} specs[DUMP_SPECS_MAX];
	int nspecs;
	/* Format 2 (issue 19): absent from older dumps ("", false, zeros). */
	uint64_t format;	/* "format": 0 in a format-1 dump */
	char version[32];	/* the tool version that wrote it */
	char command[512];	/* "command", its words joined by spaces */
	bool has_device;	/* "device": the GPU the probe read */
	char device_name[128];
	uint64_t device_ordinal;
	/*
	 * "pace": the program's host-to-device copies in windows, and the
	 * steady state (the windows from the middle on). A sum of dumps sums
	 * copies and nanoseconds, so its time per copy is the mean over them.
	 */
	bool has_pace, has_steady;
	uint64_t pace_window, pace_copies, pace_bytes, pace_ns;
	uint64_t steady_copies, steady_ns;
	double steady_ns_per_copy;	/* steady_ns / steady_copies (or the dump's own figure) */
};

/*
 * Loads the JSON dump at PATH ("-": standard input) into D. Returns 0, or a
 * negative errno with a one-line message in ERR (the path escaped): -ENOENT
 * and friends for an unreadable file, -EINVAL for malformed JSON (line and
 * column), JSON that is not a vrampool dump (no "vrampool" or "bytes"
 * key), a key of the wrong type, or a number it cannot represent.
 */
int dump_load(struct dump *d, const char *path, char *err, size_t err_size);

/* Adds the counters of SRC into D (a multi-process run), keeping D's names. */
void dump_add(struct dump *d, const struct dump *src);

/* Whether D is a dry run (mode "dry"): a prediction, not a run with a pool. */
bool dump_is_dry(const struct dump *d);

/*
 * Whether A and B were written on the same device: the same host and the
 * same "device" (name and ordinal). False when either does not say.
 */
bool dump_same_device(const struct dump *a, const struct dump *b);

/* Whether D is a pass-through run (mode "off"; old dumps: enabled false). */
bool dump_is_off(const struct dump *d);

/* Whether D is a pool run (mode "on"; old dumps: enabled true). */
bool dump_is_on(const struct dump *d);

/* The mode in words: "on", "off" or "dry". */
const char *dump_mode(const struct dump *d);

/* D's column label: "rank R", else "pid N", else the file's name (raw). */
const char *dump_label(const struct dump *d, char *buf, size_t size);

/*
 * Bytes a pool of budget B would have served, read off D's what-if curve
 * (linear between points, flat past the last). 0 without a curve.
 */
uint64_t dump_whatif_served_at(const struct dump *d, uint64_t b);

/* One line of a telemetry file. */
struct telemetry_point {
	double t, elapsed_s;
	long long pid;
	char rank[32];
	uint64_t rows_seen, rows_hits, bytes_requested, bytes_h2d, bytes_served,
		 pool_bytes, pool_budget;
	char state[16];
};

/* A telemetry file: every line in order. */
struct telemetry {
	struct telemetry_point *p;
	int n;
};

/*
 * Loads the telemetry file at PATH ("-": standard input) into T. Blank
 * lines are skipped, and so is a last line cut short (a job killed while
 * writing); any other malformed line is -EINVAL with its line number in
 * ERR. Returns 0 or a negative errno.
 */
int telemetry_load(struct telemetry *t, const char *path, char *err, size_t err_size);

/* Frees T's points. */
void telemetry_release(struct telemetry *t);

#endif
