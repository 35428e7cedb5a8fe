/*
 * dump: what a report says beyond the counters: who wrote it, and when.
 * The reporter (report.c) fills one for each dump and summary; the JSON
 * writer (json.h), the summary (summary.h) and the reason (reason.h) read
 * it. Header only.
 */
#ifndef VRAMPOOL_DUMP_H
#define VRAMPOOL_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "core/layout.h"

/* The strings are the caller's and must outlive the call they are passed to. */
struct stats_dump {
	long pid;
	const char *rank;       /* "rank": the launcher's rank variable; NULL: none set (null) */
	const char *host;       /* "host": NULL: unknown (null) */
	const char *problem;    /* config's first malformed variable (the reason when none is set); NULL: none */
	int invalid;            /* config's malformed variables that turned the pool off */
	const char *layout_error; /* VRAMPOOL_LAYOUT rejected: the parser's reason; NULL or "": it was not */
	const struct layout *layout; /* VRAMPOOL_LAYOUT as parsed (specs[].index: layout_position); NULL: none */
	int final;              /* "final": the exit or signal dump, not a rewrite while the job runs */
	const char *ended_by;   /* "ended_by": "exit", "SIGINT", "SIGTERM", "SIGHUP"; NULL: running (null) */
	/* The cost ledger (issue 16): VRAMPOOL_LEDGER and VRAMPOOL_LINK_GBPS (0: not stated). */
	int ledger_mode;        /* enum ledger_mode */
	double link_gbps;
	/*
	 * Issue 19 (item 5): what a dashboard needs to file the dump. The
	 * command is /proc/self/cmdline as read at load time: arguments each
	 * ended by a NUL, command_len bytes in all (the last one may be cut,
	 * unended); NULL or 0: unknown ([]). Times are Unix milliseconds
	 * (0: unknown, null); ended is when this dump was formatted.
	 */
	const char *command;
	size_t command_len;
	int64_t started_ms, ended_ms;
	const char *device_name;        /* "device": the device the probe read; NULL: no probe (null) */
	int device_ordinal;
};

#endif
