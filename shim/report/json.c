/*
 * json: the JSON dump, one line, formatted into a caller's buffer through a
 * bounded writer (json.h is the contract).
 */
#include "report/json.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/pace.h"
#include "core/stats.h"
#include "pool/ledger.h"
#include "pool/whatif.h"
#include "report/reason.h"
#include "report/sbuf.h"

#define REPORT_JSON_SIZES 16	/* sizes listed in the dump */

#ifndef VRAMPOOL_VERSION
#define VRAMPOOL_VERSION "unknown"	/* unit-test objects are built without it */
#endif

/* Writes s as a JSON string, quotes included; bytes outside printable ASCII as \u00XX. */
static void sbuf_json_string(struct sbuf *b, const char *s)
{
	sbuf_putc(b, '"');
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			sbuf_printf(b, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			sbuf_printf(b, "\\u%04x", ch);
		else
			sbuf_putc(b, (char)ch);
	}
	sbuf_putc(b, '"');
}

/* s as a JSON string, or null when NULL or empty. */
static void sbuf_json_opt(struct sbuf *b, const char *s)
{
	if (s && s[0] != '\0')
		sbuf_json_string(b, s);
	else
		sbuf_printf(b, "null");
}

/* A text field as a JSON string, or null when empty. */
static void sbuf_json_text(struct sbuf *b, enum stats_text which)
{
	char buf[STATS_TEXT_MAX];

	stats_get_text(which, buf, sizeof(buf));
	sbuf_json_opt(b, buf);
}

static unsigned long long report_ull(enum stat_id id)
{
	return (unsigned long long)stats_get(id);
}

const char *report_mode_name(enum stats_mode m)
{
	switch (m) {
	case STATS_MODE_ON:
		return "on";
	case STATS_MODE_OFF:
		return "off";
	case STATS_MODE_DRY:
		return "dry";
	}
	return "off";
}

/* ---- issue 19: who wrote the dump, for what, when; the program's pace ------- */

void report_json_rank(struct sbuf *b, const char *rank)
{
	size_t n = rank ? strspn(rank, "0123456789") : 0;

	if (n == 0 || n > 9 || rank[n] != '\0')
		sbuf_printf(b, "null");
	else
		sbuf_printf(b, "%ld", strtol(rank, NULL, 10));
}

void report_json_ident(struct sbuf *b, const char *host, const char *rank)
{
	char layout[STATS_TEXT_MAX];

	stats_get_text(STATS_LAYOUT, layout, sizeof(layout));
	sbuf_printf(b, "\"format\": %d, \"version\": ", REPORT_FORMAT);
	sbuf_json_string(b, VRAMPOOL_VERSION);
	sbuf_printf(b, ", \"host\": ");
	sbuf_json_opt(b, host);
	sbuf_printf(b, ", \"rank\": ");
	report_json_rank(b, rank);
	sbuf_printf(b, ", \"mode\": \"%s\", \"layout\": ", report_mode_name(stats_global.mode));
	sbuf_json_opt(b, layout);
}

/*
 * Unix milliseconds as an ISO 8601 UTC time, "2026-12-02T05:00:00.123Z",
 * or null when 0. By hand (days to civil date): gmtime_r takes the C
 * library's time-zone lock, which a thread stopped by a signal may hold.
 */
static void report_json_time(struct sbuf *b, int64_t ms)
{
	int64_t secs, days, era, doe, yoe, doy, mp, y, m, d, sod;

	if (ms <= 0) {
		sbuf_printf(b, "null");
		return;
	}
	secs = ms / 1000;
	days = secs / 86400;
	sod = secs % 86400;
	days += 719468;
	era = days / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	y = yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y += m <= 2;
	sbuf_printf(b, "\"%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ\"", (long long)y, (long long)m,
		    (long long)d, (long long)(sod / 3600), (long long)(sod / 60 % 60), (long long)(sod % 60),
		    (long long)(ms % 1000));
}

/* ", \"NAME\": time, \"NAME_unix_ms\": ms", or nulls when 0. */
static void report_json_when(struct sbuf *b, const char *name, int64_t ms)
{
	sbuf_printf(b, ", \"%s\": ", name);
	report_json_time(b, ms);
	if (ms > 0)
		sbuf_printf(b, ", \"%s_unix_ms\": %lld", name, (long long)ms);
	else
		sbuf_printf(b, ", \"%s_unix_ms\": null", name);
}

/* "command", "started", "ended" and their _unix_ms, "device" (json.h). */
static void report_json_run(struct sbuf *b, const struct stats_dump *d)
{
	char arg[1024];
	size_t i = 0, k;
	int n = 0;

	sbuf_printf(b, ", \"command\": [");
	while (d->command && i < d->command_len) {
		for (k = 0; i < d->command_len && d->command[i] != '\0'; i++)
			if (k + 1 < sizeof(arg))
				arg[k++] = d->command[i];
		arg[k] = '\0';
		i++;
		sbuf_printf(b, "%s", n++ ? ", " : "");
		sbuf_json_string(b, arg);
	}
	sbuf_printf(b, "]");
	report_json_when(b, "started", d->started_ms);
	report_json_when(b, "ended", d->ended_ms);
	sbuf_printf(b, ", \"device\": ");
	if (d->device_name == NULL) {
		sbuf_printf(b, "null");
		return;
	}
	sbuf_printf(b, "{\"name\": ");
	sbuf_json_string(b, d->device_name);
	sbuf_printf(b, ", \"ordinal\": %d}", d->device_ordinal);
}

/* "pace": the program's host-to-device copies in windows (core/pace.h). */
static void report_json_pace(struct sbuf *b)
{
	struct pace_snapshot p;

	pace_snapshot(&p);
	sbuf_printf(b, ", \"pace\": {\"window_copies\": %llu, \"copies\": %llu, \"bytes\": %llu, "
		    "\"ns\": %llu, \"windows\": [", (unsigned long long)p.window_copies,
		    (unsigned long long)p.copies, (unsigned long long)p.bytes, (unsigned long long)p.ns);
	for (int i = 0; i < p.nwindows; i++)
		sbuf_printf(b, "%s[%llu, %llu, %llu]", i ? ", " : "", (unsigned long long)p.w_copies[i],
			    (unsigned long long)p.w_bytes[i], (unsigned long long)p.w_ns[i]);
	sbuf_printf(b, "], \"steady\": ");
	if (p.nwindows == 0)
		sbuf_printf(b, "null}");
	else
		sbuf_printf(b, "{\"from_window\": %d, \"copies\": %llu, \"ns\": %llu, \"ns_per_copy\": %.1f}}",
			    p.steady_from, (unsigned long long)p.steady_copies, (unsigned long long)p.steady_ns,
			    p.steady_ns_per_copy);
}

/* The ledger's settings and the specs with their cost ledgers (json.h; issue 16). */
static void report_json_ledger(struct sbuf *b, const struct stats_dump *d)
{
	static const char *const modes[] = { "on", "off", "force" };
	struct ledger_view v;
	char why[320];
	int n = 0;

	sbuf_printf(b, ", \"ledger\": {\"mode\": \"%s\", \"link_gbps_stated\": ",
		    modes[d->ledger_mode >= 0 && d->ledger_mode < 3 ? d->ledger_mode : 0]);
	if (d->link_gbps > 0)
		sbuf_printf(b, "%.3f}", d->link_gbps);
	else
		sbuf_printf(b, "null}");
	sbuf_printf(b, ", \"specs\": [");
	for (int i = 0; i < LEDGER_SPECS; i++) {
		if (!ledger_view(&ledger_board[i], &v))
			continue;
		sbuf_printf(b, "%s{\"index\": %d, \"row\": %llu, \"ledger\": {\"decision\": \"%s\", \"reason\": ",
			    n++ ? ", " : "", i == LEDGER_WHOLE ? -1 : layout_position(d->layout, i),
			    (unsigned long long)v.row,
			    v.aside ? "stood_aside" : "pooling");
		sbuf_json_string(b, ledger_reason(&v, why, sizeof(why)));
		sbuf_printf(b, ", \"basis\": \"%s\", \"cost\": \"%s\", \"host_ns_per_row\": %.1f, "
			    "\"link_ns_per_row\": %.1f, \"saved_ns_per_row\": %.1f, \"hit_share\": %.3f, "
			    "\"link_gbps\": %.3f, \"link_source\": \"%s\"", ledger_basis_name(v.v.basis),
			    v.v.hashing ? "hashing" : "host_time", v.v.host_ns, v.v.link_ns, v.v.saved_ns,
			    v.v.hit_share, v.v.link.gbps, ledger_source_name(v.v.link.source));
		sbuf_printf(b, ", \"serve_ns_per_row\": %.1f, \"serve_gbps\": ", v.v.serve_ns);
		if (v.v.link.serve_gbps > 0)
			sbuf_printf(b, "%.3f", v.v.link.serve_gbps);
		else
			sbuf_printf(b, "null");
		sbuf_printf(b, ", \"copies\": %llu, \"rows\": %llu, \"host_cpu_ns\": %llu, \"host_wall_ns\": %llu, "
			    "\"hit_rows\": %llu, \"served_bytes\": %llu, \"link_saved_ns\": %llu, "
			    "\"device_calls_added\": %llu, \"stood_aside_copies\": %llu, "
			    "\"stood_aside_bytes\": %llu, \"sampled_copies\": %llu, \"stand_asides\": %llu, "
			    "\"resumes\": %llu}}",
			    (unsigned long long)v.copies, (unsigned long long)v.rows, (unsigned long long)v.cpu_ns,
			    (unsigned long long)v.wall_ns, (unsigned long long)v.hit_rows,
			    (unsigned long long)(v.hit_rows * v.row), (unsigned long long)v.saved_ns,
			    (unsigned long long)v.calls_added, (unsigned long long)v.aside_copies,
			    (unsigned long long)v.aside_bytes, (unsigned long long)v.sampled,
			    (unsigned long long)v.stand_asides, (unsigned long long)v.resumes);
	}
	sbuf_printf(b, "]");
}

int report_format_json(char *buf, size_t len, const struct stats_dump *d)
{
	static const struct stats_dump none;
	struct stats_size sizes[STATS_MAX_SIZES];
	int nsizes = stats_sizes(sizes);
	uint64_t e;
	struct whatif_snapshot w;
	char reason[REPORT_REASON_MAX];       /* issue 19: reasons list copy sizes */
	struct sbuf b;
	int i;

	if (d == NULL)
		d = &none;
	sbuf_init(&b, buf, len);
	sbuf_printf(&b, "{\"vrampool\": 1, \"format\": %d, \"version\": ", REPORT_FORMAT);
	sbuf_json_string(&b, VRAMPOOL_VERSION);
	sbuf_printf(&b, ", \"pid\": %ld, \"rank\": ", d->pid);
	report_json_rank(&b, d->rank);
	sbuf_printf(&b, ", \"host\": ");
	sbuf_json_opt(&b, d->host);
	sbuf_printf(&b, ", \"enabled\": %s, \"mode\": \"%s\", \"final\": %s, \"ended_by\": ",
		    stats_global.enabled ? "true" : "false", report_mode_name(stats_global.mode),
		    d->final ? "true" : "false");
	sbuf_json_opt(&b, d->ended_by);
	report_json_run(&b, d);
	if (stats_elapsed_ns(&e)) {
		/* to the microsecond: a short run (an A/B pair's off run) lasts under a millisecond */
		sbuf_printf(&b, ", \"elapsed_s\": %llu.%06llu", (unsigned long long)(e / 1000000000ULL),
			    (unsigned long long)(e % 1000000000ULL / 1000ULL));
	} else {
		sbuf_printf(&b, ", \"elapsed_s\": null");
	}
	sbuf_printf(&b, ", \"layout\": ");
	sbuf_json_text(&b, STATS_LAYOUT);
	sbuf_printf(&b, ", \"layout_source\": ");
	sbuf_json_text(&b, STATS_LAYOUT_SOURCE);
	sbuf_printf(&b, ", \"reason\": ");
	sbuf_json_opt(&b, report_reason(d, reason, sizeof(reason)));
	sbuf_printf(&b, ", \"evidence\": ");
	sbuf_json_text(&b, STATS_EVIDENCE);
	sbuf_printf(&b, ", \"suggest\": ");
	sbuf_json_text(&b, STATS_SUGGEST);
	sbuf_printf(&b, ", \"copies\": {\"h2d_calls\": %llu, \"matched_calls\": %llu, "
		    "\"passthrough_calls\": %llu, \"fallbacks\": %llu, \"graph_capture\": %llu, "
		    "\"driver_calls\": %llu, \"batch_calls\": %llu, \"stood_down\": %llu, "
		    "\"passthrough_reasons\": {\"off\": %llu, \"no_layout\": %llu, \"no_match\": %llu, "
		    "\"dst_not_device\": %llu, \"dst_extent\": %llu, \"no_context\": %llu, "
		    "\"src_not_host\": %llu, \"graph_capture\": %llu, \"no_driver\": %llu}",
		    report_ull(ST_H2D_CALLS), report_ull(ST_MATCHED_CALLS), report_ull(ST_PASSTHROUGH_CALLS),
		    report_ull(ST_FALLBACKS), report_ull(ST_GRAPH_CAPTURE_CALLS), report_ull(ST_DRIVER_CALLS),
		    report_ull(ST_BATCH_CALLS), report_ull(ST_STOOD_DOWN_CALLS), report_ull(ST_PASS_OFF),
		    report_ull(ST_PASS_NO_LAYOUT), report_ull(ST_PASS_NO_MATCH), report_ull(ST_PASS_DST_NOT_DEVICE),
		    report_ull(ST_PASS_DST_EXTENT), report_ull(ST_PASS_NO_CONTEXT), report_ull(ST_PASS_SRC_NOT_HOST),
		    report_ull(ST_GRAPH_CAPTURE_CALLS), report_ull(ST_PASS_NO_DRIVER));
	sbuf_printf(&b, ", \"stood_aside\": %llu}", report_ull(ST_STOOD_ASIDE_CALLS));
	sbuf_printf(&b, ", \"bytes\": {\"requested\": %llu, \"h2d\": %llu, \"served_from_pool\": %llu, "
		    "\"captured\": %llu}",
		    report_ull(ST_BYTES_REQUESTED), report_ull(ST_BYTES_H2D), report_ull(ST_BYTES_SERVED),
		    report_ull(ST_BYTES_CAPTURED));
	sbuf_printf(&b, ", \"rows\": {\"seen\": %llu, \"hits\": %llu, \"misses\": %llu, "
		    "\"captured\": %llu, \"pooled\": %llu, \"refused\": %llu}",
		    report_ull(ST_ROWS_SEEN), report_ull(ST_ROWS_HITS), report_ull(ST_ROWS_MISSES),
		    report_ull(ST_ROWS_CAPTURED), report_ull(ST_ROWS_POOLED), report_ull(ST_ROWS_REFUSED));
	sbuf_printf(&b, ", \"pool\": {\"state\": \"%s\", \"budget\": %llu, \"bytes\": %llu, "
		    "\"slabs\": %llu, \"evictions\": %llu, \"evicted_bytes\": %llu, "
		    "\"oom_retries\": %llu, \"device_ops\": %llu, \"displaced_bytes\": %llu, "
		    "\"displaced_slabs\": %llu, \"faults\": %llu, \"gather\": ",
		    stats_state_name(stats_state()), report_ull(ST_POOL_BUDGET), report_ull(ST_POOL_BYTES),
		    report_ull(ST_POOL_SLABS), report_ull(ST_POOL_EVICTIONS), report_ull(ST_POOL_EVICTED_BYTES),
		    report_ull(ST_POOL_OOM_RETRIES), report_ull(ST_DEVICE_OPS), report_ull(ST_POOL_DISPLACED_BYTES),
		    report_ull(ST_POOL_DISPLACED_SLABS), report_ull(ST_POOL_FAULTS));
	sbuf_json_text(&b, STATS_GATHER);
	sbuf_printf(&b, ", \"gather_launches\": %llu, \"stood_down\": %s, \"stand_downs\": %llu",
		    report_ull(ST_GATHER_LAUNCHES), atomic_load(&stats_global.stood_down) ? "true" : "false",
		    report_ull(ST_BACKOFF_EVENTS));
	sbuf_printf(&b, ", \"stand_asides\": %llu, \"resumes\": %llu", report_ull(ST_LEDGER_ASIDES),
		    report_ull(ST_LEDGER_RESUMES));
	/* Admission on evidence (issue 16): the doorkeeper's decisions. */
	sbuf_printf(&b, ", \"doorkeeper\": {\"engaged\": %s, \"engagements\": %llu, "
		    "\"disengagements\": %llu}}",
		    stats_get(ST_ADMIT_ENGAGEMENTS) > stats_get(ST_ADMIT_DISENGAGEMENTS) ? "true" : "false",
		    report_ull(ST_ADMIT_ENGAGEMENTS), report_ull(ST_ADMIT_DISENGAGEMENTS));
	sbuf_printf(&b, ", \"probe\": {\"decided\": %s, \"free\": %llu, \"total\": %llu, "
		    "\"reserve\": %llu, \"margin\": %llu}",
		    atomic_load(&stats_global.probe_decided) ? "true" : "false",
		    report_ull(ST_PROBE_FREE), report_ull(ST_PROBE_TOTAL), report_ull(ST_PROBE_RESERVE),
		    report_ull(ST_PROBE_MARGIN));
	sbuf_printf(&b, ", \"time_ns\": {\"fingerprint\": %llu, \"shim\": %llu, \"shim_cpu\": %llu}",
		    report_ull(ST_TIME_FINGERPRINT_NS), report_ull(ST_TIME_SHIM_NS), report_ull(ST_TIME_SHIM_CPU_NS));
	whatif_snapshot(&w, stats_get(ST_POOL_BUDGET));
	sbuf_printf(&b, ", \"whatif\": {\"unique_bytes\": %llu, \"repeat_bytes\": %llu, "
		    "\"tracked_rows\": %llu, \"sampled\": %s, \"sample_one_in\": %llu, \"estimate\": %s, "
		    "\"curve\": [",
		    (unsigned long long)w.unique_bytes, (unsigned long long)w.repeat_bytes,
		    (unsigned long long)w.tracked_rows, w.sampled ? "true" : "false",
		    (unsigned long long)w.sample_one_in, w.estimate ? "true" : "false");
	for (i = 0; i < w.npoints; i++)
		sbuf_printf(&b, "%s[%llu, %llu]", i ? ", " : "", (unsigned long long)w.budget[i],
			    (unsigned long long)w.served[i]);
	sbuf_printf(&b, "]}, \"allocs\": {\"calls\": %llu}, \"sizes\": [", report_ull(ST_ALLOC_CALLS));
	for (i = 0; i < nsizes && i < REPORT_JSON_SIZES; i++)
		sbuf_printf(&b, "%s{\"bytes\": %llu, \"calls\": %llu, \"total\": %llu}", i ? ", " : "",
			    (unsigned long long)sizes[i].size, (unsigned long long)sizes[i].calls,
			    (unsigned long long)sizes[i].bytes);
	sbuf_printf(&b, "]");
	report_json_ledger(&b, d);
	report_json_pace(&b);
	sbuf_printf(&b, "}\n");
	return b.full ? -ENOSPC : (int)b.used;
}

int report_write_json(FILE *f, const struct stats_dump *d)
{
	char buf[REPORT_JSON_MAX];
	int n = report_format_json(buf, sizeof(buf), d);

	if (n < 0)
		return n;
	if (fwrite(buf, 1, (size_t)n, f) != (size_t)n || fflush(f) != 0 || ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}
