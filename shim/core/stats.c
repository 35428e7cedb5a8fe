/*
 * stats: the global counters, the per-thread blocks, the copy-size table,
 * the text fields and the pool state.
 *
 * The counters themselves are inline relaxed atomics in stats.h; this file
 * holds the global, the list of per-thread blocks, the lock-free size
 * table and the sequence-counted text fields. Its readers make no CUDA
 * call, allocate nothing and take no lock (stats.h says why). Formatting
 * what they read is report's (report/json.c, report/summary.c).
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/stats.h"

#define STATS_TEXT_TRIES 1000	/* reads of a text field before taking what is there */

struct stats stats_global;

/* Serialises writers of the text fields; readers use text_seq only. */
static pthread_mutex_t stats_text_lock = PTHREAD_MUTEX_INITIALIZER;

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

/* Where each text field lies in struct stats, and its size. */
#define STATS_TEXT_FIELD(f) { offsetof(struct stats, f), sizeof(stats_global.f) }

static const struct {
	size_t offset, len;
} stats_text_fields[] = {
	[STATS_LAYOUT] = STATS_TEXT_FIELD(layout),
	[STATS_LAYOUT_SOURCE] = STATS_TEXT_FIELD(layout_source),
	[STATS_REASON] = STATS_TEXT_FIELD(reason),
	[STATS_EVIDENCE] = STATS_TEXT_FIELD(evidence),
	[STATS_GATHER] = STATS_TEXT_FIELD(gather),
	[STATS_SUGGEST] = STATS_TEXT_FIELD(suggest),
};

/* The field of which, and its size; NULL and 0 for a value out of the enum. */
static char *stats_text_field(enum stats_text which, size_t *len)
{
	if ((unsigned)which >= sizeof(stats_text_fields) / sizeof(stats_text_fields[0])) {
		*len = 0;
		return NULL;
	}
	*len = stats_text_fields[which].len;
	return (char *)&stats_global + stats_text_fields[which].offset;
}

/*
 * The text fields are a sequence lock: a writer (one at a time, under
 * stats_text_lock) makes text_seq odd, writes, makes it even again; a
 * reader copies between two reads of text_seq and retries when they
 * differ or the first was odd. Both sides copy with relaxed atomic
 * accesses, byte by byte (a text is short and read rarely), so a reader
 * that overlaps a writer is no data race under C11's rules: it reads
 * some mixture, which the second read of text_seq makes it throw away.
 */
static void stats_text_copy(char *dst, const char *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		__atomic_store_n(&dst[i], __atomic_load_n(&src[i], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
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

int stats_elapsed_ns(uint64_t *ns)
{
	uint64_t start = atomic_load_explicit(&stats_global.start_ns, memory_order_relaxed), now;

	*ns = 0;
	if (start == 0)
		return 0;
	now = stats_now_ns(CLOCK_MONOTONIC);
	*ns = now > start ? now - start : 0;
	return 1;
}

int stats_sizes(struct stats_size *out)
{
	int i, j, n = 0;

	for (i = 0; i < STATS_MAX_SIZES; i++) {
		struct stats_size e;

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
