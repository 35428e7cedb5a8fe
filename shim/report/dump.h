/*
 * dump: what a report says beyond the counters: who wrote it, and when.
 * The reporter (report.c) fills one for each dump and summary; the JSON
 * writer (json.h), the summary (summary.h) and the reason (reason.h) read
 * it. Header only.
 */
#ifndef VRAMPOOL_DUMP_H
#define VRAMPOOL_DUMP_H

/* The strings are the caller's and must outlive the call they are passed to. */
struct stats_dump {
	long pid;
	const char *rank;       /* "rank": the launcher's rank variable; NULL: none set (null) */
	const char *host;       /* "host": NULL: unknown (null) */
	const char *problem;    /* config's first malformed variable (the reason when none is set); NULL: none */
	int final;              /* "final": the exit or signal dump, not a rewrite while the job runs */
	const char *ended_by;   /* "ended_by": "exit", "SIGINT", "SIGTERM", "SIGHUP"; NULL: running (null) */
	/* The cost ledger (issue 16): VRAMPOOL_LEDGER and VRAMPOOL_LINK_GBPS (0: not stated). */
	int ledger_mode;        /* enum ledger_mode */
	double link_gbps;
};

#endif
