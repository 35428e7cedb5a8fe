/*
 * stats: the global counters, the copy-size table, the human summary and
 * the JSON dump written at exit.
 *
 * The counters themselves are inline relaxed atomics in stats.h; this file
 * holds the global, the lock-free size table and the reports. The reports
 * make no CUDA call and read every counter once, so they are safe from an
 * atexit handler while the runtime is being torn down.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "stats.h"

#define STATS_JSON_SIZES 16	/* sizes listed in the JSON dump */
#define STATS_SUGGEST_SIZES 5	/* sizes listed in the summary */
#define STATS_MIN_COMMON_ROW 1024	/* smallest common row worth suggesting */
#define STATS_PATH_MAX 4200

struct stats stats_global;

/* Set by the first stats_exit_report, cleared by stats_reset. */
static atomic_int stats_reported;

/* One row of a snapshot of the size table. */
struct size_entry {
	uint64_t size, calls, bytes;
};

static const char *const state_names[] = {
	[POOL_OFF] = "off",
	[POOL_DORMANT] = "dormant",
	[POOL_ACTIVE] = "active",
	[POOL_FULL] = "full",
	[POOL_LATCHED] = "latched",
};

__thread struct stats_thread *stats_self;
static struct stats_thread *_Atomic stats_threads;

struct stats_thread *stats_thread_new(void)
{
	struct stats_thread *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->next = atomic_load(&stats_threads);
	while (!atomic_compare_exchange_weak(&stats_threads, &t->next, t))
		;
	stats_self = t;
	return t;
}

uint64_t stats_get(enum stat_id id)
{
	uint64_t sum = atomic_load_explicit(&stats_global.v[id], memory_order_relaxed);

	for (struct stats_thread *t = atomic_load(&stats_threads); t; t = t->next)
		sum += atomic_load_explicit(&t->v[id], memory_order_relaxed);
	return sum;
}

void stats_reset(int enabled, const char *layout)
{
	int i;

	for (i = 0; i < ST__COUNT; i++)
		atomic_store_explicit(&stats_global.v[i], 0, memory_order_relaxed);
	/* Blocks of other threads are zeroed too: after fork they belong to
	 * threads that do not exist in the child. */
	for (struct stats_thread *t = atomic_load(&stats_threads); t; t = t->next)
		for (i = 0; i < ST__COUNT; i++)
			atomic_store_explicit(&t->v[i], 0, memory_order_relaxed);
	for (i = 0; i < STATS_MAX_SIZES; i++) {
		atomic_store_explicit(&stats_global.size_key[i], 0, memory_order_relaxed);
		atomic_store_explicit(&stats_global.size_calls[i], 0, memory_order_relaxed);
		atomic_store_explicit(&stats_global.size_bytes[i], 0, memory_order_relaxed);
	}
	atomic_store(&stats_global.state, enabled ? POOL_DORMANT : POOL_OFF);
	atomic_store(&stats_global.probe_decided, 0);
	atomic_store(&stats_global.used, 0);
	stats_global.enabled = enabled;
	stats_global.mode = enabled ? STATS_MODE_ON : STATS_MODE_OFF;
	snprintf(stats_global.layout, sizeof(stats_global.layout), "%s", layout ? layout : "");
	stats_global.layout_source[0] = '\0';
	stats_global.reason[0] = '\0';
	stats_global.evidence[0] = '\0';
	stats_global.gather[0] = '\0';
	stats_global.suggest[0] = '\0';
	atomic_store(&stats_global.stood_down, 0);
	atomic_store(&stats_reported, 0);
}

static pthread_mutex_t stats_text_lock = PTHREAD_MUTEX_INITIALIZER;

void stats_set_mode(enum stats_mode m)
{
	stats_global.mode = m;
}

/* The field of which, and its size. */
static char *stats_text_field(enum stats_text which, size_t *len)
{
	switch (which) {
	case STATS_LAYOUT:
		*len = sizeof(stats_global.layout);
		return stats_global.layout;
	case STATS_LAYOUT_SOURCE:
		*len = sizeof(stats_global.layout_source);
		return stats_global.layout_source;
	case STATS_REASON:
		*len = sizeof(stats_global.reason);
		return stats_global.reason;
	case STATS_EVIDENCE:
		*len = sizeof(stats_global.evidence);
		return stats_global.evidence;
	case STATS_GATHER:
		*len = sizeof(stats_global.gather);
		return stats_global.gather;
	case STATS_SUGGEST:
		*len = sizeof(stats_global.suggest);
		return stats_global.suggest;
	}
	*len = 0;
	return NULL;
}

void stats_set_text(enum stats_text which, const char *fmt, ...)
{
	char buf[256];
	size_t len;
	char *field = stats_text_field(which, &len);
	va_list ap;

	if (!field)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&stats_text_lock);
	snprintf(field, len, "%s", buf);
	pthread_mutex_unlock(&stats_text_lock);
}

void stats_get_text(enum stats_text which, char *buf, size_t len)
{
	size_t flen;
	const char *field = stats_text_field(which, &flen);

	if (len == 0)
		return;
	pthread_mutex_lock(&stats_text_lock);
	snprintf(buf, len, "%s", field ? field : "");
	pthread_mutex_unlock(&stats_text_lock);
}

void stats_set_state(enum pool_state s)
{
	atomic_store_explicit(&stats_global.state, (int)s, memory_order_relaxed);
}

void stats_set_probe_decided(void)
{
	atomic_store(&stats_global.probe_decided, 1);
}

void stats_set_stood_down(int down)
{
	atomic_store(&stats_global.stood_down, down != 0);
}

enum pool_state stats_state(void)
{
	return (enum pool_state)atomic_load_explicit(&stats_global.state, memory_order_relaxed);
}

const char *stats_state_name(enum pool_state s)
{
	if ((unsigned)s >= sizeof(state_names) / sizeof(state_names[0]))
		return "unknown";
	return state_names[s];
}

/*
 * Open addressing with linear probing, keyed by the size itself (0 marks an
 * empty slot, so a zero-byte copy is not recorded). A slot is claimed by a
 * compare-and-swap from 0; a thread that loses the race to the same size
 * counts into the winner's slot. When every slot holds another size the
 * copy is not recorded: the table is for suggestions, not for accounting.
 */
void stats_note_size(uint64_t n)
{
	unsigned i, probe;

	if (n == 0)
		return;
	i = (unsigned)((n * 0x9E3779B97F4A7C15ULL) >> 32) % STATS_MAX_SIZES;
	for (probe = 0; probe < STATS_MAX_SIZES; probe++, i = (i + 1) % STATS_MAX_SIZES) {
		uint64_t key = atomic_load_explicit(&stats_global.size_key[i], memory_order_relaxed);

		if (key == 0 &&
		    atomic_compare_exchange_strong_explicit(&stats_global.size_key[i], &key, n,
							    memory_order_relaxed, memory_order_relaxed))
			key = n;	/* claimed; a failed exchange left the winner in key */
		if (key != n)
			continue;
		atomic_fetch_add_explicit(&stats_global.size_calls[i], 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats_global.size_bytes[i], n, memory_order_relaxed);
		return;
	}
}

void stats_mark_used(void)
{
	/* Read first: a store on every call would bounce the line between threads. */
	if (!atomic_load_explicit(&stats_global.used, memory_order_relaxed))
		atomic_store_explicit(&stats_global.used, 1, memory_order_relaxed);
}

/*
 * Copies the size table into out, sorted by total bytes, most first (ties:
 * the larger size first). Returns the number of entries.
 */
static int stats_sizes_snapshot(struct size_entry *out)
{
	int i, j, n = 0;

	for (i = 0; i < STATS_MAX_SIZES; i++) {
		struct size_entry e;

		e.size = atomic_load_explicit(&stats_global.size_key[i], memory_order_relaxed);
		if (e.size == 0)
			continue;
		e.calls = atomic_load_explicit(&stats_global.size_calls[i], memory_order_relaxed);
		e.bytes = atomic_load_explicit(&stats_global.size_bytes[i], memory_order_relaxed);
		if (e.calls == 0)
			continue;	/* claimed, not yet counted */
		for (j = n; j > 0 && (out[j - 1].bytes < e.bytes ||
				      (out[j - 1].bytes == e.bytes && out[j - 1].size < e.size)); j--)
			out[j] = out[j - 1];
		out[j] = e;
		n++;
	}
	return n;
}

/* Writes s as a JSON string, quotes included; bytes outside ASCII as \u00XX. */
static void stats_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static unsigned long long stats_ull(enum stat_id id)
{
	return (unsigned long long)stats_get(id);
}

int stats_write_json(FILE *f, long pid)
{
	struct size_entry sizes[STATS_MAX_SIZES];
	int nsizes = stats_sizes_snapshot(sizes);
	int i;

	fprintf(f, "{\"vrampool\": 1, \"pid\": %ld, \"enabled\": %s, \"layout\": ",
		pid, stats_global.enabled ? "true" : "false");
	if (stats_global.layout[0] != '\0')
		stats_json_string(f, stats_global.layout);
	else
		fputs("null", f);
	fprintf(f, ", \"copies\": {\"h2d_calls\": %llu, \"matched_calls\": %llu, "
		"\"passthrough_calls\": %llu, \"fallbacks\": %llu, \"graph_capture\": %llu}",
		stats_ull(ST_H2D_CALLS), stats_ull(ST_MATCHED_CALLS), stats_ull(ST_PASSTHROUGH_CALLS),
		stats_ull(ST_FALLBACKS), stats_ull(ST_GRAPH_CAPTURE_CALLS));
	fprintf(f, ", \"bytes\": {\"requested\": %llu, \"h2d\": %llu, \"served_from_pool\": %llu, "
		"\"captured\": %llu}",
		stats_ull(ST_BYTES_REQUESTED), stats_ull(ST_BYTES_H2D), stats_ull(ST_BYTES_SERVED),
		stats_ull(ST_BYTES_CAPTURED));
	fprintf(f, ", \"rows\": {\"seen\": %llu, \"hits\": %llu, \"misses\": %llu, "
		"\"captured\": %llu, \"pooled\": %llu}",
		stats_ull(ST_ROWS_SEEN), stats_ull(ST_ROWS_HITS), stats_ull(ST_ROWS_MISSES),
		stats_ull(ST_ROWS_CAPTURED), stats_ull(ST_ROWS_POOLED));
	fprintf(f, ", \"pool\": {\"state\": \"%s\", \"budget\": %llu, \"bytes\": %llu, "
		"\"slabs\": %llu, \"evictions\": %llu, \"evicted_bytes\": %llu, "
		"\"oom_retries\": %llu, \"device_ops\": %llu}",
		stats_state_name(stats_state()), stats_ull(ST_POOL_BUDGET), stats_ull(ST_POOL_BYTES),
		stats_ull(ST_POOL_SLABS), stats_ull(ST_POOL_EVICTIONS),
		stats_ull(ST_POOL_EVICTED_BYTES), stats_ull(ST_POOL_OOM_RETRIES),
		stats_ull(ST_DEVICE_OPS));
	fprintf(f, ", \"probe\": {\"decided\": %s, \"free\": %llu, \"total\": %llu, "
		"\"reserve\": %llu, \"margin\": %llu}",
		atomic_load(&stats_global.probe_decided) ? "true" : "false",
		stats_ull(ST_PROBE_FREE), stats_ull(ST_PROBE_TOTAL), stats_ull(ST_PROBE_RESERVE),
		stats_ull(ST_PROBE_MARGIN));
	fprintf(f, ", \"time_ns\": {\"fingerprint\": %llu, \"shim\": %llu}",
		stats_ull(ST_TIME_FINGERPRINT_NS), stats_ull(ST_TIME_SHIM_NS));
	fprintf(f, ", \"allocs\": {\"calls\": %llu}, \"sizes\": [", stats_ull(ST_ALLOC_CALLS));
	for (i = 0; i < nsizes && i < STATS_JSON_SIZES; i++)
		fprintf(f, "%s{\"bytes\": %llu, \"calls\": %llu, \"total\": %llu}", i ? ", " : "",
			(unsigned long long)sizes[i].size, (unsigned long long)sizes[i].calls,
			(unsigned long long)sizes[i].bytes);
	fputs("]}\n", f);
	if (fflush(f) != 0 || ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}

/* Writes one "vrampool: " line to f with a single stdio call. */
static void stats_summary_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void stats_summary_line(FILE *f, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n] = '\n';
	buf[n + 1] = '\0';
	fputs(buf, f);
}

static uint64_t stats_gcd(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * Chooses the row to suggest from the listed sizes (most bytes first): the
 * size with most bytes, unless smaller listed sizes share a common divisor
 * of at least STATS_MIN_COMMON_ROW with it, as full and partial batches of
 * one sample size do (64 and 40 rows of 3072 bytes); then that divisor,
 * which matches both. Small copies (labels) do not pull the row below the
 * threshold: a size that would is left out.
 */
static uint64_t stats_suggest_row(const struct size_entry *sizes, int n, int *common)
{
	uint64_t row = sizes[0].size;
	int i;

	*common = 0;
	for (i = 1; i < n; i++) {
		uint64_t g;

		if (sizes[i].size >= sizes[0].size)
			continue;
		g = stats_gcd(row, sizes[i].size);
		if (g >= STATS_MIN_COMMON_ROW) {
			row = g;
			*common = 1;
		}
	}
	return row;
}

/* The "no layout" line: sizes seen, most bytes first, and a suggestion. */
static void stats_write_suggestion(FILE *f)
{
	struct size_entry sizes[STATS_MAX_SIZES];
	int n = stats_sizes_snapshot(sizes);
	char list[640], b[32];
	size_t used = 0;
	uint64_t row;
	int i, common;

	if (n == 0) {
		stats_summary_line(f, "vrampool: no VRAMPOOL_LAYOUT set and no host-to-device copy seen");
		return;
	}
	if (n > STATS_SUGGEST_SIZES)
		n = STATS_SUGGEST_SIZES;
	list[0] = '\0';
	for (i = 0; i < n && used < sizeof(list); i++) {
		int k = snprintf(list + used, sizeof(list) - used, "%s%llu (x%llu, %s)",
				 i ? ", " : "", (unsigned long long)sizes[i].size,
				 (unsigned long long)sizes[i].calls,
				 log_bytes(b, sizeof(b), sizes[i].bytes));
		if (k < 0)
			break;
		used += (size_t)k;
	}
	row = stats_suggest_row(sizes, n, &common);
	stats_summary_line(f, "vrampool: no VRAMPOOL_LAYOUT set; copy sizes seen (most bytes first): "
			   "%s; try VRAMPOOL_LAYOUT=%llu%s", list, (unsigned long long)row,
			   common ? " (the common row of these batch sizes; use one sample's size "
				    "if it is smaller)" : "");
}

void stats_write_summary(FILE *f)
{
	uint64_t calls = stats_get(ST_H2D_CALLS);
	uint64_t req = stats_get(ST_BYTES_REQUESTED);
	uint64_t h2d = stats_get(ST_BYTES_H2D);
	uint64_t served = stats_get(ST_BYTES_SERVED);
	uint64_t budget = stats_get(ST_POOL_BUDGET);
	char b1[32], b2[32], b3[32], b4[32];

	if (!stats_global.enabled) {
		stats_summary_line(f, "vrampool: pass-through, pool off: %llu host-to-device copies, "
				   "%s requested, %s crossed PCIe",
				   (unsigned long long)calls, log_bytes(b1, sizeof(b1), req),
				   log_bytes(b2, sizeof(b2), h2d));
	} else if (stats_global.layout[0] == '\0') {
		stats_summary_line(f, "vrampool: %llu host-to-device copies, %s requested, "
				   "%s crossed PCIe (nothing pooled without a layout)",
				   (unsigned long long)calls, log_bytes(b1, sizeof(b1), req),
				   log_bytes(b2, sizeof(b2), h2d));
	} else {
		stats_summary_line(f, "vrampool: %llu host-to-device copies, %s requested; "
				   "%s served from VRAM (%.1f%%), %s crossed PCIe",
				   (unsigned long long)calls, log_bytes(b1, sizeof(b1), req),
				   log_bytes(b2, sizeof(b2), served),
				   req ? 100.0 * (double)served / (double)req : 0.0,
				   log_bytes(b3, sizeof(b3), h2d));
	}
	if (stats_global.layout[0] == '\0') {
		stats_write_suggestion(f);
		return;
	}
	if (!stats_global.enabled)
		return;
	if (budget > 0)
		snprintf(b4, sizeof(b4), "budget %s", log_bytes(b3, sizeof(b3), budget));
	else
		snprintf(b4, sizeof(b4), "budget not decided");
	stats_summary_line(f, "vrampool: rows %llu seen, %llu hits, %llu misses, %llu captured; "
			   "pool %s, %s in %llu slab%s of %s",
			   (unsigned long long)stats_get(ST_ROWS_SEEN),
			   (unsigned long long)stats_get(ST_ROWS_HITS),
			   (unsigned long long)stats_get(ST_ROWS_MISSES),
			   (unsigned long long)stats_get(ST_ROWS_CAPTURED),
			   stats_state_name(stats_state()),
			   log_bytes(b1, sizeof(b1), stats_get(ST_POOL_BYTES)),
			   (unsigned long long)stats_get(ST_POOL_SLABS),
			   stats_get(ST_POOL_SLABS) == 1 ? "" : "s", b4);
}

/*
 * Expands every "%p" in path with pid, like config_stats_path; a path
 * already expanded comes out unchanged. Returns 0 or -ENAMETOOLONG.
 */
static int stats_expand_path(const char *path, long pid, char *out, size_t len)
{
	size_t k = 0;

	while (*path != '\0') {
		if (path[0] == '%' && path[1] == 'p') {
			int n = snprintf(out + k, len - k, "%ld", pid);

			if (n < 0 || (size_t)n >= len - k)
				return -ENAMETOOLONG;
			k += (size_t)n;
			path += 2;
			continue;
		}
		if (k + 1 >= len)
			return -ENAMETOOLONG;
		out[k++] = *path++;
	}
	out[k] = '\0';
	return 0;
}

/*
 * Writes the JSON dump to a temporary file beside path and renames it over
 * path, so a reader sees either no dump or a whole one. Returns 0 or -errno.
 */
static int stats_dump_json(const char *path, long pid)
{
	char tmp[STATS_PATH_MAX + 32];
	FILE *f;
	int err;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, pid) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (f == NULL)
		return -errno;
	err = stats_write_json(f, pid);
	if (fclose(f) != 0 && err == 0)
		err = -errno;
	if (err < 0)
		goto out_unlink;
	if (rename(tmp, path) != 0) {
		err = -errno;
		goto out_unlink;
	}
	return 0;

out_unlink:
	unlink(tmp);
	return err;
}

void stats_exit_report(int quiet, const char *json_path)
{
	char path[STATS_PATH_MAX];
	long pid = (long)getpid();
	int saved = errno;
	int err;

	if (atomic_exchange(&stats_reported, 1))
		return;
	if (!atomic_load(&stats_global.used))
		return;
	if (!quiet)
		stats_write_summary(stderr);
	if (json_path == NULL || json_path[0] == '\0')
		goto out;
	err = stats_expand_path(json_path, pid, path, sizeof(path));
	if (err == 0)
		err = stats_dump_json(path, pid);
	if (err < 0)
		log_line("could not write the stats to '%s': %s", err == -ENAMETOOLONG ? json_path : path,
			 strerror(-err));
out:
	errno = saved;
}
