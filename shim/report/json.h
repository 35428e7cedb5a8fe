/*
 * json: the JSON dump of DESIGN.md, formatted from the counters
 * (core/stats.h), the what-if curve (pool/whatif.h) and a struct
 * stats_dump. Files are report.c's business (report/file.h); this only
 * formats.
 *
 * Formatting makes no CUDA call, allocates nothing and takes no lock (the
 * counters and the what-if figures are atomics; text fields are read
 * under their sequence count), so the reporter thread can format the final
 * dump while another thread, stopped by a signal, is inside any of the
 * shim's critical sections, and an atexit handler can while the runtime
 * unloads.
 */
#ifndef VRAMPOOL_JSON_H
#define VRAMPOOL_JSON_H

#include <stddef.h>
#include <stdio.h>

#include "core/stats.h"
#include "report/dump.h"

#define REPORT_JSON_MAX 65536   /* a buffer this big always holds the dump */
#define REPORT_FORMAT 2         /* "format": the dump's and telemetry's format version */

struct sbuf;

/*
 * Formats the JSON object of DESIGN.md, one line ending in a newline, into
 * buf (NUL-terminated): every key always present, null where unknown.
 *
 * {"vrampool": 1, "pid", "rank", "host", "enabled", "mode": "on"|"off"|"dry",
 *  "final", "ended_by", "elapsed_s" (seconds since the first CUDA call),
 *  "layout", "layout_source", "reason", "evidence", "suggest",
 *  "copies": {"h2d_calls", "matched_calls", "passthrough_calls", "fallbacks",
 *             "graph_capture", "driver_calls", "batch_calls", "stood_down"},
 *  "bytes": {"requested", "h2d", "served_from_pool", "captured"},
 *  "rows": {"seen", "hits", "misses", "captured", "pooled"},
 *  "pool": {"state", "budget", "bytes", "slabs", "evictions", "evicted_bytes",
 *           "oom_retries", "device_ops", "displaced_bytes", "displaced_slabs",
 *           "faults", "gather", "gather_launches", "stood_down", "stand_downs"},
 *  "probe": {"decided", "free", "total", "reserve", "margin"},
 *  "time_ns": {"fingerprint", "shim"},
 *  "whatif": {"unique_bytes", "repeat_bytes", "tracked_rows", "sampled",
 *             "curve": [[budget_bytes, served_bytes], ...]},
 *  "allocs": {"calls"}, "sizes": [{"bytes", "calls", "total"}, ...],
 *  "ledger": {"mode": "on"|"off"|"force", "link_gbps_stated"},
 *  "specs": [{"index", "row", "ledger": {...}}, ...]}
 *
 * Issue 16 added "copies.stood_aside", "pool.stand_asides", "pool.resumes",
 * "time_ns.shim_cpu" (the calling thread's CPU time beside the wall time
 * of "shim"), the "ledger" settings and "specs": one entry per spec the
 * copies met (index: its place in the layout as the user wrote it,
 * layout_position, not its place in the sorted matching order; -1 for
 * whole:MIN), whose
 * "ledger" holds the cost ledger (pool/ledger.h): "decision" ("pooling" or
 * "stood_aside"), "reason" (the verdict in numbers, in words), "basis"
 * ("first_copies", "window", "sample", "none"), "cost" ("host_time", or
 * "hashing": a window of captures, the hash alone; a sample, the hash and
 * look-up of its rows), the verdict's "host_ns_per_row",
 * "link_ns_per_row", "saved_ns_per_row", "hit_share", "link_gbps" and
 * "link_source" ("measured", "stated", "assumed", "none"), and the
 * totals: "copies" and "rows" fingerprinted, "host_cpu_ns" (the host time
 * judged) and "host_wall_ns", "hit_rows", "served_bytes", "link_saved_ns",
 * "device_calls_added", "stood_aside_copies", "stood_aside_bytes",
 * "sampled_copies", "stand_asides", "resumes".
 *
 * Issue 19 (item 5; the names are fixed, shared with the command):
 * "format" (REPORT_FORMAT; "vrampool": 1 stays first, so a file's first
 * bytes say it is a dump), "version" (the tool's, VRAMPOOL_VERSION;
 * "unknown" in unit-test objects), "rank" now a number (the launcher's
 * rank variable) or null, "command" (the argument strings, bounded:
 * d->command; each argument at most 1023 bytes), "started", "ended" (UTC, "2026-12-02T05:00:00.123Z") and
 * "started_unix_ms", "ended_unix_ms" (null when unknown), "device"
 * ({"name", "ordinal"} of the device the probe read, or null: no CUDA call
 * here), and last "pace" (core/pace.h): {"window_copies", "copies",
 * "bytes", "ns", "windows": [[copies, bytes, ns], ...], "steady":
 * {"from_window", "copies", "ns", "ns_per_copy"} or null with no copy}.
 *
 * "reason" is the text the pool set, else, while the pool is not active,
 * what the counters tell (report_reason). The curve is whatif_snapshot's
 * with the pool's budget as an extra point. d may be NULL (defaults:
 * pid 0, nulls, not final). Returns the length, or -ENOSPC when buf is too
 * small (REPORT_JSON_MAX always suffices).
 */
int report_format_json(char *buf, size_t len, const struct stats_dump *d);

/* report_format_json written to f (d may be NULL). Returns 0 or -errno. */
int report_write_json(FILE *f, const struct stats_dump *d);

/* ---- shared with the telemetry line (report.c; issue 19) ---------------------- */

/* "on", "off" or "dry". */
const char *report_mode_name(enum stats_mode m);

/* rank (digits, at most 9) as a JSON number; NULL or anything else: null. */
void report_json_rank(struct sbuf *b, const char *rank);

/*
 * Appends "format", "version", "host" (NULL: null), "rank" (as
 * report_json_rank), "mode" and "layout" (the spec in use, null when none)
 * as members of an object: no leading comma.
 */
void report_json_ident(struct sbuf *b, const char *host, const char *rank);

#endif
