/*
 * hazard: the table of the program's pending work that may write host
 * memory, and the questions asked of it (hazard.h states the contract).
 */
#include "pool/hazard.h"

#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"

#define HAZARD_ENTRIES 256
#define HAZARD_PER_STREAM 16    /* pending entries a stream keeps apart; more merge into its newest */
#define HAZARD_OVERFLOW 64      /* streams asked themselves when the table is full */

/* One piece of noted work: its stream, what it may write, the event behind it. */
struct hazard_entry {
	dev_stream s;
	long tid;               /* the thread of a per-thread default stream, else 0 */
	uintptr_t lo, hi;       /* the bytes it may write; any: 0, UINTPTR_MAX */
	dev_event ev;           /* recorded behind it; NULL: ask the stream */
};

static pthread_mutex_t hazard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hazard_entry hazard_table[HAZARD_ENTRIES];
static unsigned hazard_n;       /* pending entries: [0, hazard_n) */
static dev_event hazard_spare[HAZARD_ENTRIES];  /* events of entries done, for the next ones */
static unsigned hazard_nspare;
static struct hazard_entry hazard_over[HAZARD_OVERFLOW];       /* any bytes, no event */
static unsigned hazard_nover;
static int hazard_lost;         /* work could not be noted: pending from now on */

/* Asks whether entry h's work has run: 0 done, -EBUSY not yet. Called with hazard_lock held. */
static int hazard_query(const struct hazard_entry *h)
{
	int err = 0;

	for (int tries = 0; tries < 2; tries++) {
		err = h->ev ? device_event_query(h->ev) : device_stream_query(h->s);
		if (err == 0 || err == -EBUSY)
			return err;
	}
	return 0;       /* cannot be asked twice: destroyed, or its device reset */
}

/* Removes entry i (done), keeping its event. Called with hazard_lock held. */
static void hazard_remove(unsigned i)
{
	dev_event ev = hazard_table[i].ev;

	if (ev && hazard_nspare < HAZARD_ENTRIES)
		hazard_spare[hazard_nspare++] = ev;
	else
		device_event_free(ev);
	hazard_table[i] = hazard_table[--hazard_n];
}

/* Removes every entry whose work has run. Called with hazard_lock held. */
static void hazard_prune(void)
{
	for (unsigned i = 0; i < hazard_n;) {
		if (hazard_query(&hazard_table[i]) == 0)
			hazard_remove(i);
		else
			i++;
	}
}

/* Records entry h's event on its stream (a spare one, or a new one); else leaves the stream to be asked. */
static void hazard_record(struct hazard_entry *h)
{
	for (int tries = 0; tries < 2; tries++) {
		if (!h->ev) {
			if (hazard_nspare)
				h->ev = hazard_spare[--hazard_nspare];
			else if (device_event_new(&h->ev) != 0)
				h->ev = NULL;
			if (!h->ev)
				return;
		}
		if (device_event_record_meter(h->ev, h->s) == 0)
			return;
		/* an event of another context, or a failed record: make another once */
		device_event_free(h->ev);
		h->ev = NULL;
	}
}

/* The pending entries of stream (s, tid); *newest the last of them, or NULL. Called with hazard_lock held. */
static unsigned hazard_stream_count(dev_stream s, long tid, struct hazard_entry **newest)
{
	unsigned n = 0;

	*newest = NULL;
	for (unsigned i = 0; i < hazard_n; i++) {
		if (hazard_table[i].s != s || hazard_table[i].tid != tid)
			continue;
		n++;
		*newest = &hazard_table[i];
	}
	return n;
}

/*
 * The table is full of other streams' pending work: stream (s, tid) is
 * asked itself until it is idle, for any bytes; past that, every question
 * answers pending. Called with hazard_lock held.
 */
static void hazard_overflow(dev_stream s, long tid)
{
	for (unsigned i = 0; i < hazard_nover; i++)
		if (hazard_over[i].s == s && hazard_over[i].tid == tid)
			return;
	if (hazard_nover < HAZARD_OVERFLOW) {
		hazard_over[hazard_nover++] = (struct hazard_entry){ .s = s, .tid = tid, .hi = UINTPTR_MAX };
		return;
	}
	if (!hazard_lost)
		log_verbose("host functions or copies into pinned memory are queued on more streams than "
			    "vrampool follows: rows of pinned sources on busy streams are no longer served");
	hazard_lost = 1;
}

void hazard_note(dev_stream s, const void *dst, uint64_t n)
{
	long tid = s == DEV_STREAM_PER_THREAD ? syscall(SYS_gettid) : 0;
	uintptr_t lo = (uintptr_t)dst, hi = lo + n;
	struct hazard_entry *h = NULL;

	if (!dst || hi < lo) {
		lo = 0;
		hi = UINTPTR_MAX;
	}
	if (device_open())
		return;         /* no driver: no pool to serve a pinned row */
	pthread_mutex_lock(&hazard_lock);
	if (hazard_n == HAZARD_ENTRIES || hazard_stream_count(s, tid, &h) >= HAZARD_PER_STREAM)
		hazard_prune();
	if (hazard_stream_count(s, tid, &h) < HAZARD_PER_STREAM && hazard_n < HAZARD_ENTRIES) {
		h = &hazard_table[hazard_n++];
		*h = (struct hazard_entry){ .s = s, .tid = tid, .lo = lo, .hi = hi };
	} else if (h) {
		/* The stream's newest entry takes this work too: its event is
		 * recorded again, behind both (a stream runs in order). */
		h->lo = lo < h->lo ? lo : h->lo;
		h->hi = hi > h->hi ? hi : h->hi;
	} else {
		hazard_overflow(s, tid);
		pthread_mutex_unlock(&hazard_lock);
		return;
	}
	hazard_record(h);
	pthread_mutex_unlock(&hazard_lock);
}

int hazard_pending(const void *src, uint64_t n)
{
	uintptr_t lo = (uintptr_t)src, hi = lo + n < lo ? UINTPTR_MAX : lo + n;
	int pending = 0;

	pthread_mutex_lock(&hazard_lock);
	pending = hazard_lost;
	for (unsigned i = 0; i < hazard_nover && !pending;) {
		if (hazard_query(&hazard_over[i]) == 0)
			hazard_over[i] = hazard_over[--hazard_nover];
		else
			pending = 1;
	}
	for (unsigned i = 0; i < hazard_n && !pending;) {
		const struct hazard_entry *h = &hazard_table[i];

		if (!(h->lo < hi && lo < h->hi)) {
			i++;
		} else if (hazard_query(h) == 0) {
			hazard_remove(i);
		} else {
			pending = 1;
		}
	}
	pthread_mutex_unlock(&hazard_lock);
	return pending;
}

void hazard_atfork_child(void)
{
	pthread_mutex_init(&hazard_lock, NULL);
	hazard_n = 0;           /* the parent's events mean nothing here */
	hazard_nspare = 0;
	hazard_nover = 0;
	hazard_lost = 0;
}
