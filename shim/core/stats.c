/*
 * stats: the global counters, the copy-size table, the text fields, and
 * the formatting of the human summary and of the JSON dump.
 *
 * The counters themselves are inline relaxed atomics in stats.h; this file
 * holds the global, the lock-free size table and the reports. The reports
 * make no CUDA call, allocate nothing and take no lock (stats.h says why),
 * so the reporter thread can format them while another thread is stopped
 * by a signal anywhere, and they are safe from an atexit handler while the
 * runtime is being torn down. Output goes into a caller's buffer through
 * a small bounded writer (struct sbuf); files are report's business.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/stats.h"
#include "pool/whatif.h"

#define STATS_JSON_SIZES 16	/* sizes listed in the JSON dump */
#define STATS_SUGGEST_SIZES 5	/* sizes listed in the summary */
#define STATS_MIN_COMMON_ROW 1024	/* smallest common row worth suggesting */
#define STATS_TEXT_TRIES 1000	/* reads of a text field before taking what is there */
#define STATS_JSON_MAX 16384
#define STATS_SUMMARY_MAX 8192

struct stats stats_global;

/* Serialises writers of the text fields; readers use text_seq only. */
static pthread_mutex_t stats_text_lock = PTHREAD_MUTEX_INITIALIZER;

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
	atomic_store(&stats_global.start_ns, 0);
	stats_global.enabled = enabled;
	stats_global.mode = enabled ? STATS_MODE_ON : STATS_MODE_OFF;
	/* After fork the lock may belong to a thread that does not exist here. */
	pthread_mutex_init(&stats_text_lock, NULL);
	atomic_store(&stats_global.text_seq, 0);
	snprintf(stats_global.layout, sizeof(stats_global.layout), "%s", layout ? layout : "");
	stats_global.layout_source[0] = '\0';
	stats_global.reason[0] = '\0';
	stats_global.evidence[0] = '\0';
	stats_global.gather[0] = '\0';
	stats_global.suggest[0] = '\0';
	atomic_store(&stats_global.stood_down, 0);
}

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

/*
 * The text fields are a sequence lock: a writer (one at a time, under
 * stats_text_lock) makes text_seq odd, writes, makes it even again; a
 * reader copies between two reads of text_seq and retries when they
 * differ or the first was odd. The copies go through volatile accesses so
 * the compiler keeps them between the two reads.
 */
static void stats_text_copy(char *dst, const char *src, size_t n)
{
	const volatile char *s = src;
	volatile char *d = dst;
	size_t i;

	for (i = 0; i < n; i++)
		d[i] = s[i];
}

void stats_set_text(enum stats_text which, const char *fmt, ...)
{
	char buf[STATS_TEXT_MAX];
	size_t len, n;
	char *field = stats_text_field(which, &len);
	unsigned seq;
	va_list ap;

	if (!field)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	n = strlen(buf);
	if (n > len - 1)
		n = len - 1;
	buf[n] = '\0';
	pthread_mutex_lock(&stats_text_lock);
	seq = atomic_load_explicit(&stats_global.text_seq, memory_order_relaxed);
	atomic_store_explicit(&stats_global.text_seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	stats_text_copy(field, buf, n + 1);
	atomic_store_explicit(&stats_global.text_seq, seq + 2, memory_order_release);
	pthread_mutex_unlock(&stats_text_lock);
}

void stats_get_text(enum stats_text which, char *buf, size_t len)
{
	size_t flen, n;
	const char *field = stats_text_field(which, &flen);
	unsigned s1, s2;
	int tries;

	if (len == 0)
		return;
	buf[0] = '\0';
	if (!field)
		return;
	n = flen < len ? flen : len;
	for (tries = 0;; tries++) {
		s1 = atomic_load_explicit(&stats_global.text_seq, memory_order_acquire);
		if ((s1 & 1) && tries < STATS_TEXT_TRIES) {
			sched_yield();
			continue;
		}
		stats_text_copy(buf, field, n);
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&stats_global.text_seq, memory_order_relaxed);
		if (s1 == s2 && !(s1 & 1))
			break;
		if (tries >= STATS_TEXT_TRIES) {
			/*
			 * Writers kept coming: take their lock, but never wait long
			 * for it (a signal may have stopped its holder for good).
			 */
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += 50 * 1000000L;
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			if (pthread_mutex_timedlock(&stats_text_lock, &until) == 0) {
				stats_text_copy(buf, field, n);
				pthread_mutex_unlock(&stats_text_lock);
			}
			break;
		}
	}
	buf[n - 1] = '\0';
}

/* stats_get_text with control characters as '?', for the summary. */
static void stats_get_clean(enum stats_text which, char *buf, size_t len)
{
	char *p;

	stats_get_text(which, buf, len);
	for (p = buf; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
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

static uint64_t stats_now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void stats_mark_used(void)
{
	uint64_t zero = 0;

	/* Read first: a store on every call would bounce the line between threads. */
	if (atomic_load_explicit(&stats_global.used, memory_order_relaxed))
		return;
	atomic_compare_exchange_strong(&stats_global.start_ns, &zero, stats_now_ns(CLOCK_MONOTONIC));
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

/* A bounded writer into a caller's buffer: what does not fit is dropped and remembered. */
struct sbuf {
	char *p;
	size_t len, used;
	int full;
};

static void sb_init(struct sbuf *b, char *p, size_t len)
{
	b->p = p;
	b->len = len;
	b->used = 0;
	b->full = len == 0;
	if (len)
		p[0] = '\0';
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->used, b->len - b->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->len - b->used) {
		b->full = 1;
		b->p[b->used] = '\0';
		return;
	}
	b->used += (size_t)n;
}

static void sb_putc(struct sbuf *b, char ch)
{
	if (b->full || b->used + 1 >= b->len) {
		b->full = 1;
		return;
	}
	b->p[b->used++] = ch;
	b->p[b->used] = '\0';
}

/* Writes s as a JSON string, quotes included; bytes outside printable ASCII as \u00XX. */
static void sb_json_string(struct sbuf *b, const char *s)
{
	sb_putc(b, '"');
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			sb_printf(b, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			sb_printf(b, "\\u%04x", ch);
		else
			sb_putc(b, (char)ch);
	}
	sb_putc(b, '"');
}

/* s as a JSON string, or null when NULL or empty. */
static void sb_json_opt(struct sbuf *b, const char *s)
{
	if (s && s[0] != '\0')
		sb_json_string(b, s);
	else
		sb_printf(b, "null");
}

/* A text field as a JSON string, or null when empty. */
static void sb_json_text(struct sbuf *b, enum stats_text which)
{
	char buf[STATS_TEXT_MAX];

	stats_get_text(which, buf, sizeof(buf));
	sb_json_opt(b, buf);
}

static unsigned long long stats_ull(enum stat_id id)
{
	return (unsigned long long)stats_get(id);
}

static const char *stats_mode_name(enum stats_mode m)
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

const char *stats_reason(const struct stats_dump *d, char *buf, size_t len)
{
	enum pool_state st = stats_state();
	char layout[STATS_TEXT_MAX], b1[32], b2[32], b3[32], b4[32];

	stats_get_clean(STATS_REASON, buf, len);
	if (buf[0] != '\0')
		return buf;
	if (st == POOL_ACTIVE)
		return NULL;
	if (d && d->problem && d->problem[0] != '\0') {
		snprintf(buf, len, "%s", d->problem);
		return buf;
	}
	if (stats_global.mode == STATS_MODE_DRY) {
		snprintf(buf, len, "VRAMPOOL=dry: no pool of its own; the what-if figures tell what one would have served");
		return buf;
	}
	if (!stats_global.enabled) {
		snprintf(buf, len, "VRAMPOOL=off");
		return buf;
	}
	stats_get_text(STATS_LAYOUT, layout, sizeof(layout));
	if (layout[0] == '\0') {
		snprintf(buf, len, "no VRAMPOOL_LAYOUT set");
		return buf;
	}
	switch (st) {
	case POOL_DORMANT:
		if (!atomic_load(&stats_global.probe_decided))
			snprintf(buf, len, stats_get(ST_MATCHED_CALLS) == 0 ? "no copy matched the layout"
					   : "the budget is decided after VRAMPOOL_PROBE_AFTER matched copies");
		else if (stats_get(ST_POOL_BUDGET) == 0)
			snprintf(buf, len, "the probe found %s free of %s: no room for one slab beside the "
				 "reserve (%s) and the margin (%s)",
				 log_bytes(b1, sizeof(b1), stats_get(ST_PROBE_FREE)),
				 log_bytes(b2, sizeof(b2), stats_get(ST_PROBE_TOTAL)),
				 log_bytes(b3, sizeof(b3), stats_get(ST_PROBE_RESERVE)),
				 log_bytes(b4, sizeof(b4), stats_get(ST_PROBE_MARGIN)));
		else
			snprintf(buf, len, "a budget of %s is decided and no row admitted yet",
				 log_bytes(b1, sizeof(b1), stats_get(ST_POOL_BUDGET)));
		return buf;
	case POOL_FULL:
		snprintf(buf, len, "the budget of %s is full: rows past it cross PCIe",
			 log_bytes(b1, sizeof(b1), stats_get(ST_POOL_BUDGET)));
		return buf;
	case POOL_LATCHED:
		snprintf(buf, len, "%llu slab%s given back for the program's allocations: nothing new is admitted",
			 stats_ull(ST_POOL_EVICTIONS), stats_get(ST_POOL_EVICTIONS) == 1 ? "" : "s");
		return buf;
	case POOL_OFF:
		snprintf(buf, len, "pool off");
		return buf;
	case POOL_ACTIVE:
		break;
	}
	return NULL;
}

int stats_format_json(char *buf, size_t len, const struct stats_dump *d)
{
	static const struct stats_dump none;
	struct size_entry sizes[STATS_MAX_SIZES];
	int nsizes = stats_sizes_snapshot(sizes);
	uint64_t start = atomic_load_explicit(&stats_global.start_ns, memory_order_relaxed);
	struct whatif_snapshot w;
	char reason[STATS_TEXT_MAX];
	struct sbuf b;
	int i;

	if (d == NULL)
		d = &none;
	sb_init(&b, buf, len);
	sb_printf(&b, "{\"vrampool\": 1, \"pid\": %ld, \"rank\": ", d->pid);
	sb_json_opt(&b, d->rank);
	sb_printf(&b, ", \"host\": ");
	sb_json_opt(&b, d->host);
	sb_printf(&b, ", \"enabled\": %s, \"mode\": \"%s\", \"final\": %s, \"ended_by\": ",
		  stats_global.enabled ? "true" : "false", stats_mode_name(stats_global.mode),
		  d->final ? "true" : "false");
	sb_json_opt(&b, d->ended_by);
	if (start != 0) {
		uint64_t now = stats_now_ns(CLOCK_MONOTONIC), e = now > start ? now - start : 0;

		sb_printf(&b, ", \"elapsed_s\": %llu.%03llu", (unsigned long long)(e / 1000000000ULL),
			  (unsigned long long)(e % 1000000000ULL / 1000000ULL));
	} else {
		sb_printf(&b, ", \"elapsed_s\": null");
	}
	sb_printf(&b, ", \"layout\": ");
	sb_json_text(&b, STATS_LAYOUT);
	sb_printf(&b, ", \"layout_source\": ");
	sb_json_text(&b, STATS_LAYOUT_SOURCE);
	sb_printf(&b, ", \"reason\": ");
	sb_json_opt(&b, stats_reason(d, reason, sizeof(reason)));
	sb_printf(&b, ", \"evidence\": ");
	sb_json_text(&b, STATS_EVIDENCE);
	sb_printf(&b, ", \"suggest\": ");
	sb_json_text(&b, STATS_SUGGEST);
	sb_printf(&b, ", \"copies\": {\"h2d_calls\": %llu, \"matched_calls\": %llu, "
		  "\"passthrough_calls\": %llu, \"fallbacks\": %llu, \"graph_capture\": %llu, "
		  "\"driver_calls\": %llu, \"batch_calls\": %llu, \"stood_down\": %llu, "
		  "\"passthrough_reasons\": {\"off\": %llu, \"no_layout\": %llu, \"no_match\": %llu, "
		  "\"dst_not_device\": %llu, \"dst_extent\": %llu, \"no_context\": %llu, "
		  "\"src_not_host\": %llu, \"graph_capture\": %llu, \"no_driver\": %llu}}",
		  stats_ull(ST_H2D_CALLS), stats_ull(ST_MATCHED_CALLS), stats_ull(ST_PASSTHROUGH_CALLS),
		  stats_ull(ST_FALLBACKS), stats_ull(ST_GRAPH_CAPTURE_CALLS), stats_ull(ST_DRIVER_CALLS),
		  stats_ull(ST_BATCH_CALLS), stats_ull(ST_STOOD_DOWN_CALLS), stats_ull(ST_PASS_OFF),
		  stats_ull(ST_PASS_NO_LAYOUT), stats_ull(ST_PASS_NO_MATCH), stats_ull(ST_PASS_DST_NOT_DEVICE),
		  stats_ull(ST_PASS_DST_EXTENT), stats_ull(ST_PASS_NO_CONTEXT), stats_ull(ST_PASS_SRC_NOT_HOST),
		  stats_ull(ST_GRAPH_CAPTURE_CALLS), stats_ull(ST_PASS_NO_DRIVER));
	sb_printf(&b, ", \"bytes\": {\"requested\": %llu, \"h2d\": %llu, \"served_from_pool\": %llu, "
		  "\"captured\": %llu}",
		  stats_ull(ST_BYTES_REQUESTED), stats_ull(ST_BYTES_H2D), stats_ull(ST_BYTES_SERVED),
		  stats_ull(ST_BYTES_CAPTURED));
	sb_printf(&b, ", \"rows\": {\"seen\": %llu, \"hits\": %llu, \"misses\": %llu, "
		  "\"captured\": %llu, \"pooled\": %llu}",
		  stats_ull(ST_ROWS_SEEN), stats_ull(ST_ROWS_HITS), stats_ull(ST_ROWS_MISSES),
		  stats_ull(ST_ROWS_CAPTURED), stats_ull(ST_ROWS_POOLED));
	sb_printf(&b, ", \"pool\": {\"state\": \"%s\", \"budget\": %llu, \"bytes\": %llu, "
		  "\"slabs\": %llu, \"evictions\": %llu, \"evicted_bytes\": %llu, "
		  "\"oom_retries\": %llu, \"device_ops\": %llu, \"displaced_bytes\": %llu, "
		  "\"displaced_slabs\": %llu, \"faults\": %llu, \"gather\": ",
		  stats_state_name(stats_state()), stats_ull(ST_POOL_BUDGET), stats_ull(ST_POOL_BYTES),
		  stats_ull(ST_POOL_SLABS), stats_ull(ST_POOL_EVICTIONS), stats_ull(ST_POOL_EVICTED_BYTES),
		  stats_ull(ST_POOL_OOM_RETRIES), stats_ull(ST_DEVICE_OPS), stats_ull(ST_POOL_DISPLACED_BYTES),
		  stats_ull(ST_POOL_DISPLACED_SLABS), stats_ull(ST_POOL_FAULTS));
	sb_json_text(&b, STATS_GATHER);
	sb_printf(&b, ", \"gather_launches\": %llu, \"stood_down\": %s, \"stand_downs\": %llu}",
		  stats_ull(ST_GATHER_LAUNCHES), atomic_load(&stats_global.stood_down) ? "true" : "false",
		  stats_ull(ST_BACKOFF_EVENTS));
	sb_printf(&b, ", \"probe\": {\"decided\": %s, \"free\": %llu, \"total\": %llu, "
		  "\"reserve\": %llu, \"margin\": %llu}",
		  atomic_load(&stats_global.probe_decided) ? "true" : "false",
		  stats_ull(ST_PROBE_FREE), stats_ull(ST_PROBE_TOTAL), stats_ull(ST_PROBE_RESERVE),
		  stats_ull(ST_PROBE_MARGIN));
	sb_printf(&b, ", \"time_ns\": {\"fingerprint\": %llu, \"shim\": %llu}",
		  stats_ull(ST_TIME_FINGERPRINT_NS), stats_ull(ST_TIME_SHIM_NS));
	whatif_snapshot(&w, stats_get(ST_POOL_BUDGET));
	sb_printf(&b, ", \"whatif\": {\"unique_bytes\": %llu, \"repeat_bytes\": %llu, "
		  "\"tracked_rows\": %llu, \"sampled\": %s, \"curve\": [",
		  (unsigned long long)w.unique_bytes, (unsigned long long)w.repeat_bytes,
		  (unsigned long long)w.tracked_rows, w.sampled ? "true" : "false");
	for (i = 0; i < w.npoints; i++)
		sb_printf(&b, "%s[%llu, %llu]", i ? ", " : "", (unsigned long long)w.budget[i],
			  (unsigned long long)w.served[i]);
	sb_printf(&b, "]}, \"allocs\": {\"calls\": %llu}, \"sizes\": [", stats_ull(ST_ALLOC_CALLS));
	for (i = 0; i < nsizes && i < STATS_JSON_SIZES; i++)
		sb_printf(&b, "%s{\"bytes\": %llu, \"calls\": %llu, \"total\": %llu}", i ? ", " : "",
			  (unsigned long long)sizes[i].size, (unsigned long long)sizes[i].calls,
			  (unsigned long long)sizes[i].bytes);
	sb_printf(&b, "]}\n");
	return b.full ? -ENOSPC : (int)b.used;
}

int stats_write_json(FILE *f, const struct stats_dump *d)
{
	char buf[STATS_JSON_MAX];
	int n = stats_format_json(buf, sizeof(buf), d);

	if (n < 0)
		return n;
	if (fwrite(buf, 1, (size_t)n, f) != (size_t)n || fflush(f) != 0 || ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}
/*
 * Appends one "vrampool: " line (the newline added here) to b, whole or not
 * at all, so a summary cut short ends at a line's end.
 */
static void sb_line(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_line(struct sbuf *b, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || b->full)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n] = '\n';
	line[n + 1] = '\0';
	if (b->used + (size_t)n + 1 >= b->len) {
		b->full = 1;
		return;
	}
	memcpy(b->p + b->used, line, (size_t)n + 2);
	b->used += (size_t)n + 1;
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

/*
 * The "no layout" line: the evidence's suggestion when the content was
 * examined, else the sizes seen, most bytes first, and a suggestion from
 * them.
 */
static void stats_summary_suggestion(struct sbuf *b)
{
	struct size_entry sizes[STATS_MAX_SIZES];
	char suggest[STATS_TEXT_MAX], evidence[STATS_TEXT_MAX];
	char list[640], b1[32];
	size_t used = 0;
	uint64_t row;
	int i, n, common;

	stats_get_clean(STATS_SUGGEST, suggest, sizeof(suggest));
	stats_get_clean(STATS_EVIDENCE, evidence, sizeof(evidence));
	if (suggest[0] != '\0') {
		sb_line(b, "vrampool: no VRAMPOOL_LAYOUT set; %s%stry VRAMPOOL_LAYOUT=%s", evidence,
			evidence[0] ? "; " : "", suggest);
		return;
	}
	if (evidence[0] != '\0') {
		sb_line(b, "vrampool: no VRAMPOOL_LAYOUT set; %s", evidence);
		return;
	}
	n = stats_sizes_snapshot(sizes);
	if (n == 0) {
		sb_line(b, "vrampool: no VRAMPOOL_LAYOUT set and no host-to-device copy seen");
		return;
	}
	if (n > STATS_SUGGEST_SIZES)
		n = STATS_SUGGEST_SIZES;
	list[0] = '\0';
	for (i = 0; i < n && used < sizeof(list); i++) {
		int k = snprintf(list + used, sizeof(list) - used, "%s%llu (x%llu, %s)",
				 i ? ", " : "", (unsigned long long)sizes[i].size,
				 (unsigned long long)sizes[i].calls,
				 log_bytes(b1, sizeof(b1), sizes[i].bytes));
		if (k < 0)
			break;
		used += (size_t)k;
	}
	row = stats_suggest_row(sizes, n, &common);
	sb_line(b, "vrampool: no VRAMPOOL_LAYOUT set; copy sizes seen (most bytes first): "
		"%s; try VRAMPOOL_LAYOUT=%llu%s", list, (unsigned long long)row,
		common ? " (the common row of these batch sizes; use one sample's size "
			 "if it is smaller)" : "");
}

/*
 * The what-if line. W, the matched bytes, is U + R: every row sighting is
 * either a first (unique) or a repeat. A budget of U would have served
 * served(U). When the run's budget was below U (or there was none: a dry
 * run, a dormant pool) and served(U) beats what the run served by more
 * than half a percent of W, say so; otherwise the budget held every row
 * (repeats the run did not serve were missed for other reasons, such as
 * copies made before the probe).
 */
static void stats_summary_whatif(struct sbuf *b, int stood_down)
{
	struct whatif_snapshot w;
	uint64_t total, at_u, served = stats_get(ST_BYTES_SERVED), budget = stats_get(ST_POOL_BUDGET);
	char b1[32], b2[32], b3[32];

	whatif_snapshot(&w, 0);
	if (w.unique_bytes == 0)
		return;
	total = w.unique_bytes + w.repeat_bytes;
	at_u = w.served[w.npoints - 1];
	if (w.repeat_bytes == 0) {
		if (!stood_down)
			sb_line(b, "vrampool: no matched row repeated (%s of distinct rows seen): no budget "
				"would have served any", log_bytes(b1, sizeof(b1), w.unique_bytes));
		return;
	}
	if (budget < w.unique_bytes && at_u > served && at_u - served > total / 200) {
		sb_line(b, "vrampool: a budget of %s would have served %.1f%% (%s of %s matched bytes)%s",
			log_bytes(b1, sizeof(b1), w.unique_bytes), 100.0 * (double)at_u / (double)total,
			log_bytes(b2, sizeof(b2), at_u), log_bytes(b3, sizeof(b3), total),
			w.sampled ? ", estimated from a sample of the rows" : "");
		return;
	}
	sb_line(b, "vrampool: the budget held every repeated row (%s served of %s matched bytes)",
		log_bytes(b1, sizeof(b1), served), log_bytes(b2, sizeof(b2), total));
}

int stats_format_summary(char *buf, size_t len, const struct stats_dump *d)
{
	uint64_t calls = stats_get(ST_H2D_CALLS);
	uint64_t req = stats_get(ST_BYTES_REQUESTED);
	uint64_t h2d = stats_get(ST_BYTES_H2D);
	uint64_t served = stats_get(ST_BYTES_SERVED);
	uint64_t budget = stats_get(ST_POOL_BUDGET);
	uint64_t matched = stats_get(ST_MATCHED_CALLS), passed = stats_get(ST_STOOD_DOWN_CALLS);
	int dry = stats_global.mode == STATS_MODE_DRY;
	int stood = atomic_load(&stats_global.stood_down) || stats_get(ST_BACKOFF_EVENTS) > 0;
	char layout[STATS_TEXT_MAX], source[16], evidence[STATS_TEXT_MAX], why[STATS_TEXT_MAX];
	char b1[32], b2[32], b3[32], b4[48];
	const char *reason;
	struct sbuf b;

	sb_init(&b, buf, len);
	stats_get_clean(STATS_LAYOUT, layout, sizeof(layout));
	stats_get_clean(STATS_LAYOUT_SOURCE, source, sizeof(source));
	stats_get_clean(STATS_EVIDENCE, evidence, sizeof(evidence));
	if (dry) {
		sb_line(&b, "vrampool: dry run (no pool of its own): %llu host-to-device copies, "
			"%s requested, %s crossed PCIe",
			(unsigned long long)calls, log_bytes(b1, sizeof(b1), req), log_bytes(b2, sizeof(b2), h2d));
	} else if (!stats_global.enabled) {
		sb_line(&b, "vrampool: pass-through, pool off: %llu host-to-device copies, "
			"%s requested, %s crossed PCIe",
			(unsigned long long)calls, log_bytes(b1, sizeof(b1), req), log_bytes(b2, sizeof(b2), h2d));
	} else if (layout[0] == '\0') {
		sb_line(&b, "vrampool: %llu host-to-device copies, %s requested, "
			"%s crossed PCIe (nothing pooled without a layout)",
			(unsigned long long)calls, log_bytes(b1, sizeof(b1), req), log_bytes(b2, sizeof(b2), h2d));
	} else {
		sb_line(&b, "vrampool: %llu host-to-device copies, %s requested; "
			"%s served from VRAM (%.1f%%), %s crossed PCIe",
			(unsigned long long)calls, log_bytes(b1, sizeof(b1), req),
			log_bytes(b2, sizeof(b2), served), req ? 100.0 * (double)served / (double)req : 0.0,
			log_bytes(b3, sizeof(b3), h2d));
	}
	if (stats_global.enabled && layout[0] != '\0') {
		if (budget > 0)
			snprintf(b4, sizeof(b4), "budget %s", log_bytes(b3, sizeof(b3), budget));
		else
			snprintf(b4, sizeof(b4), "%s", atomic_load(&stats_global.probe_decided)
						     ? "no budget" : "budget not decided");
		sb_line(&b, "vrampool: rows %llu seen, %llu hits, %llu misses, %llu captured; "
			"pool %s, %s in %llu slab%s of %s",
			(unsigned long long)stats_get(ST_ROWS_SEEN), (unsigned long long)stats_get(ST_ROWS_HITS),
			(unsigned long long)stats_get(ST_ROWS_MISSES),
			(unsigned long long)stats_get(ST_ROWS_CAPTURED), stats_state_name(stats_state()),
			log_bytes(b1, sizeof(b1), stats_get(ST_POOL_BYTES)),
			(unsigned long long)stats_get(ST_POOL_SLABS), stats_get(ST_POOL_SLABS) == 1 ? "" : "s", b4);
	}
	/* Why the pool is not serving, as the JSON says it. Without a layout
	 * the suggestion below says it; a plain VRAMPOOL=off or a dry run the
	 * first line. */
	reason = stats_reason(d, why, sizeof(why));
	if (reason && layout[0] != '\0' && !dry &&
	    (stats_global.enabled || (d && d->problem && d->problem[0] != '\0')))
		sb_line(&b, "vrampool: pool %s: %s", stats_state_name(stats_state()), reason);
	stats_summary_whatif(&b, stood);
	if (strcmp(source, "auto") == 0 && layout[0] != '\0' && strcmp(layout, "auto") != 0)
		sb_line(&b, "vrampool: layout found from the copies' content: %s%s%s", layout,
			evidence[0] ? "; " : "", evidence);
	else if (strcmp(layout, "auto") == 0 && evidence[0] != '\0' && (!reason || !strstr(reason, evidence)))
		sb_line(&b, "vrampool: VRAMPOOL_LAYOUT=auto found no layout: %s", evidence);
	if (stood)
		sb_line(&b, "vrampool: rows did not repeat: pooling stood down after %llu copies; "
			"host-side random augmentation makes every epoch unique",
			(unsigned long long)(matched > passed ? matched - passed : matched));
	if (layout[0] == '\0')
		stats_summary_suggestion(&b);
	return (int)b.used;
}

void stats_write_summary(FILE *f, const struct stats_dump *d)
{
	char buf[STATS_SUMMARY_MAX];
	int n = stats_format_summary(buf, sizeof(buf), d);

	fwrite(buf, 1, (size_t)n, f);
}
