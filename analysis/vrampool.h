/*
 * vrampool.h: the contract between the parts of the `vrampool` command.
 *
 * The command is a table of subcommands (main.c), one file each: run.c (the
 * launcher, with run_check.c and run_dumps.c behind run.h), inspect.c (will
 * a binary's copies be seen?) and report.c (stats dumps as tables and
 * pictures). They stand on libraries of their own, each with its header:
 * elf_facts.h (what one ELF file holds, libelf only), loader.h (the dynamic
 * linker's and the shell's search rules), dump.h (stats dumps and telemetry
 * files: dump.c, telemetry.c, load.c), plot.h (cairo pictures). `run` uses
 * inspect's verdict and report's printing; no subcommand loads another's
 * files. Every function returns 0 or a negative errno unless its comment
 * says otherwise; the *_main functions return the process exit status.
 * inspect_verdict.h draws inspect's verdict on one file; options.h words a
 * bad option of any subcommand in one line.
 *
 * Everything printed that comes from outside (a path from argv, a name from
 * an ELF file, a string from a dump) goes through tool_escape first, so no
 * terminal control character reaches the terminal raw.
 */
#ifndef VRAMPOOL_TOOL_H
#define VRAMPOOL_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dump.h"

#ifndef VRAMPOOL_VERSION
#define VRAMPOOL_VERSION "unknown"
#endif

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
 * What inspect concludes about one file (and, for the overall verdict,
 * about a file and everything it loads). The three SEEN kinds are the
 * routes by which the preloaded library sees a copy; the others are
 * ordered so that a larger one is the more telling reason for "not seen".
 */
enum inspect_verdict {
	INSPECT_NONE = 0,	/* no CUDA use found */
	INSPECT_OTHER,		/* uses CUDA, but no copy entry point vrampool interposes */
	INSPECT_PROVIDER,	/* defines the runtime API: libcudart, the shim */
	INSPECT_DRIVER,		/* defines the driver API: libcuda.so.1 or its stub */
	INSPECT_VENDOR,		/* an NVIDIA library with its own runtime or driver route:
				   its internal copies are not seen (README) */
	INSPECT_STATIC,		/* carries the runtime, but cannot reach the driver's entry points */
	INSPECT_UNREACHABLE,	/* statically linked executable: no preload ever loads */
	INSPECT_SEEN_ENTRY,	/* seen through the driver entry points (static runtime, own dlopen) */
	INSPECT_SEEN_DRIVER,	/* imports interposed driver copies (cuMemcpyHtoD*) */
	INSPECT_SEEN,		/* imports interposed copies from the shared runtime */
};

/* Whether V is one of the SEEN kinds. */
static inline bool inspect_verdict_seen(enum inspect_verdict v)
{
	return v >= INSPECT_SEEN_ENTRY;
}

/*
 * Inspects PROGRAM (a path, a name found through $PATH, or a #! script) and
 * everything it loads, printing nothing. Returns the overall verdict (a
 * SEEN kind when any file is seen, else the largest other) and writes into
 * WHY a one-line reason naming the file that decided it (escaped), or
 * returns a negative errno (WHY then holds the message).
 */
int inspect_program_verdict(const char *program, char *why, size_t why_size);

/* Prints one dump as a table (with its what-if curve, when it has one). */
void report_print_one(FILE *out, const struct dump *d);

/*
 * Prints OFF and ON side by side: byte figures with their ratio, the wall
 * time of each run and its ratio (when known), and a verdict that names a
 * likely reason when the pool served little.
 */
void report_print_ab(FILE *out, const struct dump *off, const struct dump *on);

/*
 * Prints N dumps that are not an off/on pair: one column per dump (labelled
 * by rank, else pid, else file name) and a total column, and no verdict that
 * credits the pool for a difference between runs.
 */
void report_print_columns(FILE *out, const struct dump *d, int n);

/*
 * Writes into BUF a likely reason why the pool of D served little, drawn
 * from its counters and what-if figures. Returns whether one was found.
 */
bool report_likely_reason(const struct dump *d, char *buf, size_t size);

/* Formats N bytes as "1.5 GiB" into BUF; returns BUF. */
const char *tool_format_bytes(uint64_t n, char *buf, size_t size);

/*
 * Copies S into BUF so that it is safe on a terminal: C0 and C1 control
 * characters, DEL, bidirectional overrides and bytes that are not UTF-8
 * become \xNN (\t, \n, \r, \e as such); valid printable UTF-8 stays. A
 * result that does not fit ends in "...". Returns BUF.
 */
const char *tool_escape(const char *s, char *buf, size_t size);

/*
 * tool_escape into one of a few rotating static buffers, for printf
 * arguments: the result stays valid until TOOL_ESC_SLOTS more calls.
 * The command is single-threaded.
 */
#define TOOL_ESC_SLOTS 8
const char *esc(const char *s);

#endif
