/*
 * vrampool.h: the contract between the subcommands of the `vrampool` command.
 *
 * The command is a table of subcommands (main.c), one file each: run.c (the
 * launcher), inspect.c (will a binary's copies be seen?) and report.c (stats
 * dumps as tables). `run` uses the other two as libraries: it asks inspect
 * for a verdict before it starts the program, and report to load and print
 * the dumps afterwards. Every function returns 0 or a negative errno unless
 * its comment says otherwise; the *_main functions return the process exit
 * status.
 */
#ifndef VRAMPOOL_TOOL_H
#define VRAMPOOL_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses shared by the subcommands: inspect uses all three. */
enum {
	TOOL_EXIT_OK = 0,	/* done; inspect: the copies will be seen */
	TOOL_EXIT_NOT_SEEN = 1,	/* inspect: the copies will not be seen */
	TOOL_EXIT_ERROR = 2,	/* bad usage or unreadable input */
};

/* Subcommand entry points: argv[0] is the subcommand's name. */
int run_main(int argc, char **argv);
int inspect_main(int argc, char **argv);
int report_main(int argc, char **argv);

/* Usage texts, printed by `vrampool help` and `vrampool CMD --help`. */
void run_usage(FILE *out);
void inspect_usage(FILE *out);
void report_usage(FILE *out);

/*
 * What inspect concludes about one file (and, for the overall verdict, about
 * a file and everything it loads). Ordered: a larger value never hides a
 * smaller one when verdicts are combined, except that SEEN wins overall.
 */
enum inspect_verdict {
	INSPECT_NONE = 0,	/* no CUDA use found */
	INSPECT_RUNTIME_OTHER,	/* uses the shared runtime, no interposed copy */
	INSPECT_PROVIDER,	/* defines the runtime API: libcudart, the shim */
	INSPECT_DRIVER,		/* driver API copies only: not seen */
	INSPECT_STATIC,		/* carries the runtime inside: not seen */
	INSPECT_SEEN,		/* imports interposed copies from libcudart */
};

/*
 * Inspects PROGRAM (a path, a name found through $PATH, or a #! script) and
 * everything it loads, printing nothing. Returns the overall verdict (the
 * largest of the closure, SEEN when any file is SEEN) and writes into WHY a
 * one-line reason naming the file that decided it, or returns a negative
 * errno (WHY then holds the message).
 */
int inspect_program_verdict(const char *program, char *why, size_t why_size);

/*
 * One stats dump, or the sum of several (one per process of a multi-process
 * run). Numbers that a dump lacks stay 0 and their has_* flag false, so the
 * tables print "-" rather than a made-up zero.
 */
struct dump {
	char path[4096];
	int processes;		/* dumps summed into this one */
	long long pid;
	bool enabled;
	char layout[256];	/* "" when the run had no layout */
	char state[32];		/* pool.state, "" when absent */
	uint64_t h2d_calls, matched_calls, passthrough_calls, fallbacks,
		 graph_capture;
	uint64_t requested, h2d, served, captured_bytes;
	uint64_t rows_seen, hits, misses, rows_captured, pooled;
	uint64_t budget, pool_bytes, slabs, evictions, evicted_bytes,
		 oom_retries;
	bool probe_decided, has_probe, has_rows, has_pool;
	uint64_t probe_free, probe_total, probe_reserve, probe_margin;
	uint64_t fingerprint_ns, shim_ns;
	/* The most frequent copy sizes ("sizes"), largest total first. */
	struct { uint64_t bytes, calls, total; } sizes[4];
	int nsizes;
};

/*
 * Loads the JSON dump at PATH into D. Returns 0, or a negative errno with a
 * one-line message in ERR: -ENOENT and friends for an unreadable file,
 * -EINVAL for malformed JSON (line and column), or JSON that is not a
 * vrampool dump (no "vrampool" or "bytes" key), or a key of the wrong type.
 */
int dump_load(struct dump *d, const char *path, char *err, size_t err_size);

/* Adds the counters of SRC into D (a multi-process run), keeping D's names. */
void dump_add(struct dump *d, const struct dump *src);

/* Prints one dump as a table. */
void report_print_one(FILE *out, const struct dump *d);

/* Prints OFF and ON side by side with the ratio of bytes and a verdict. */
void report_print_ab(FILE *out, const struct dump *off, const struct dump *on);

/* Formats N bytes as "1.5 GiB" into BUF; returns BUF. */
const char *tool_format_bytes(uint64_t n, char *buf, size_t size);

#endif
