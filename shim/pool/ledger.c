/*
 * ledger: the books and the verdicts of ledger.h, and the board the
 * reports read.
 */
#include "pool/ledger.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/pace.h"

struct ledger_tally ledger_board[LEDGER_SPECS];

static uint64_t (*ledger_fake_wall)(void);
static uint64_t (*ledger_fake_cpu)(void);

/* ---- the clock ---------------------------------------------------------------- */

static uint64_t ledger_clock(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void ledger_set_clock(uint64_t (*wall)(void), uint64_t (*cpu)(void))
{
	ledger_fake_wall = wall;
	ledger_fake_cpu = cpu;
}

static uint64_t ledger_wall(void)
{
	return ledger_fake_wall ? ledger_fake_wall() : ledger_clock(CLOCK_MONOTONIC);
}

uint64_t ledger_cpu_now(void)
{
	return ledger_fake_cpu ? ledger_fake_cpu() : ledger_clock(CLOCK_THREAD_CPUTIME_ID);
}

/*
 * Issue 19: the copy's clock is shared with the program's pace
 * (core/pace.h): the stamp is the copy's call time, the end reading is
 * the return pace_note takes, so a copy reads the wall clock twice in all.
 */
void ledger_stamp(struct ledger_stamp *s)
{
	s->wall = ledger_fake_wall ? ledger_fake_wall() : pace_call_ns();
	s->cpu = 0;
	s->has_cpu = 0;
}

void ledger_stamp_cpu(struct ledger_stamp *s)
{
	s->cpu = ledger_cpu_now();
	s->has_cpu = 1;
}

/* Per thread: hashed copies seen, and the CPU share of the shim's wall time (< 0: none read). */
static __thread uint64_t ledger_cpu_copies;
static __thread double ledger_cpu_frac = -1;

int ledger_cpu_due(int sync)
{
	uint64_t n = ledger_cpu_copies++;

	return sync || ledger_fake_cpu || ledger_cpu_frac < 0 || n < LEDGER_CPU_FIRST ||
	       n % LEDGER_CPU_EVERY == 0;
}

uint64_t ledger_cpu_share(int timed, uint64_t wall_ns, uint64_t cpu_ns)
{
	double f;

	if (!timed)
		return ledger_cpu_frac < 0 ? wall_ns : (uint64_t)((double)wall_ns * ledger_cpu_frac);
	if (wall_ns > 0) {
		f = (double)cpu_ns / (double)wall_ns;
		if (f > 1)
			f = 1;
		ledger_cpu_frac = ledger_cpu_frac < 0 ? f : 0.75 * ledger_cpu_frac + 0.25 * f;
	}
	return cpu_ns;
}

void ledger_elapsed(const struct ledger_stamp *s, uint64_t *wall_ns, uint64_t *cpu_ns)
{
	uint64_t wall = ledger_fake_wall ? ledger_fake_wall() : pace_clock_ns(), cpu;   /* issue 19 */

	*wall_ns = wall > s->wall ? wall - s->wall : 0;
	if (!s->has_cpu) {
		*cpu_ns = *wall_ns;
		return;
	}
	cpu = ledger_cpu_now();
	*cpu_ns = cpu > s->cpu ? cpu - s->cpu : 0;
}

/* ---- verdicts ----------------------------------------------------------------- */

static void tally_add(_Atomic uint64_t *v, uint64_t n)
{
	if (n)
		atomic_fetch_add_explicit(v, n, memory_order_relaxed);
}

double ledger_row_ns(uint64_t row, const struct ledger_link *link)
{
	return link->gbps > 0 ? (double)row / link->gbps : 0;
}

double ledger_saved_row_ns(uint64_t row, const struct ledger_link *link)
{
	double saved = ledger_row_ns(row, link);

	if (link->serve_gbps > 0)
		saved -= (double)row / link->serve_gbps;
	return saved > 0 ? saved : 0;
}

/* Whether a link figure may judge a window or a sample: stated or measured. */
static int ledger_link_known(const struct ledger_link *link)
{
	return link->gbps > 0 && (link->source == LEDGER_LINK_STATED || link->source == LEDGER_LINK_MEASURED);
}

void ledger_init(struct ledger *l)
{
	memset(l, 0, sizeof(*l));
	l->state = LEDGER_POOLING;
}

/*
 * Judges host_ns per row against what a row of l->row bytes saves on link,
 * share of the rows being hits. Keeps the verdict in l->last.
 */
static void ledger_judge(struct ledger *l, enum ledger_basis basis, double host_ns,
			 const struct ledger_link *link, double share)
{
	struct ledger_verdict *v = &l->last;

	v->hashing = 0;
	v->basis = basis;
	v->host_ns = host_ns;
	v->link = *link;
	v->link_ns = ledger_row_ns(l->row, link);
	v->serve_ns = link->serve_gbps > 0 ? (double)l->row / link->serve_gbps : 0;
	v->hit_share = share;
	v->saved_ns = ledger_saved_row_ns(l->row, link) * share;
	v->aside = host_ns > v->saved_ns;
}

static void ledger_window_reset(struct ledger *l)
{
	l->win_copies = 0;
	l->win_rows = l->win_bytes = l->win_host_ns = l->win_hit_rows = 0;
	l->win_hash_ns = l->win_captured = 0;
	l->win_full = 0;
}

/* Starts the sample's judgement afresh. */
static void ledger_sample_reset(struct ledger *l)
{
	l->smp_copies = 0;
	l->smp_rows = l->smp_hits = 0;
	l->smp_cost_ns = l->smp_cost_rows = 0;
}

/* Stands aside on the verdict just judged (unless forced to pool). */
static enum ledger_event ledger_stand_aside(struct ledger *l, struct ledger_tally *t, enum ledger_mode mode)
{
	ledger_window_reset(l);
	ledger_publish(t, l);
	if (mode != LEDGER_ON)
		return LEDGER_EV_NONE;
	if (l->resumed && l->flips < LEDGER_FLIPS_MAX)
		l->flips++;
	l->state = LEDGER_ASIDE;
	ledger_sample_reset(l);
	tally_add(&t->stand_asides, 1);
	atomic_fetch_add_explicit(&t->aside, 1, memory_order_relaxed);
	ledger_publish(t, l);
	return LEDGER_EV_ASIDE;
}

/* Adds a pooled copy to the tally. */
static void ledger_tally_copy(struct ledger_tally *t, const struct ledger_copy *c, const struct ledger_link *link)
{
	atomic_store_explicit(&t->row, c->row, memory_order_relaxed);
	tally_add(&t->copies, 1);
	tally_add(&t->rows, c->rows);
	tally_add(&t->cpu_ns, c->cpu_ns);
	tally_add(&t->wall_ns, c->wall_ns);
	tally_add(&t->hit_rows, c->hit_rows);
	tally_add(&t->saved_ns, (uint64_t)((double)c->hit_rows * ledger_saved_row_ns(c->row, link)));
	tally_add(&t->calls_added, c->calls_added);
}

/*
 * The prior, at the spec's LEDGER_PRIOR_COPIES-th copy: the least host
 * time per row of its first copies against the stated link or else a slow
 * one (a measurement this early comes from a few copies, if any). Returns
 * whether it stands aside.
 */
static int ledger_prior(struct ledger *l, const struct ledger_link *link)
{
	struct ledger_link slow = { LEDGER_SLOW_GBPS, LEDGER_LINK_ASSUMED, link->serve_gbps };
	double least = l->prior_ns[0];

	for (int i = 1; i < LEDGER_PRIOR_COPIES; i++)
		if (l->prior_ns[i] < least)
			least = l->prior_ns[i];
	ledger_judge(l, LEDGER_BASIS_PRIOR, least, link->source == LEDGER_LINK_STATED ? link : &slow, 1.0);
	return l->last.aside;
}

/*
 * Whether the open window is judged now: a clear case after
 * LEDGER_FAST_COPIES copies, any case once the window is whole.
 */
static int ledger_window_due(const struct ledger *l, double cost, double saving)
{
	if (l->win_copies < LEDGER_FAST_COPIES)
		return 0;
	if (cost >= LEDGER_CLEAR * saving)
		return 1;
	return l->win_copies >= LEDGER_WINDOW || l->win_bytes >= LEDGER_WINDOW_BYTES ||
	       ledger_wall() - l->win_start >= LEDGER_WINDOW_NS;
}

enum ledger_event ledger_pooled(struct ledger *l, struct ledger_tally *t, const struct ledger_copy *c,
				const struct ledger_link *link, enum ledger_mode mode)
{
	double per, cost, share, saving;
	int hashing;

	ledger_tally_copy(t, c, link);
	if (!c->rows)
		return LEDGER_EV_NONE;
	l->row = c->row;
	per = (double)c->cpu_ns / (double)c->rows;
	if (l->prior_copies < LEDGER_PRIOR_COPIES) {
		l->prior_ns[l->prior_copies] = per;
		if (++l->prior_copies < LEDGER_PRIOR_COPIES)
			return LEDGER_EV_NONE;
		if (ledger_prior(l, link))
			return ledger_stand_aside(l, t, mode);
		ledger_publish(t, l);
		return LEDGER_EV_NONE;
	}
	/* A pool that just filled up (or can admit again) weighs other savings: a new window. */
	if (l->win_copies && l->win_full != !c->can_admit)
		ledger_window_reset(l);
	if (!l->win_copies)
		l->win_start = ledger_wall();
	l->win_copies++;
	l->win_rows += c->rows;
	l->win_bytes += c->rows * c->row;
	l->win_host_ns += c->cpu_ns;
	l->win_hit_rows += c->hit_rows;
	l->win_hash_ns += c->hash_ns;
	l->win_captured += c->captured_rows;
	l->win_full = !c->can_admit;
	if (!ledger_link_known(link)) {
		if (l->win_copies >= LEDGER_WINDOW)
			ledger_window_reset(l);
		return LEDGER_EV_NONE;
	}
	share = l->win_full ? (double)l->win_hit_rows / (double)l->win_rows : 1.0;
	/* A full pool whose rows (nearly) never hit is the back-off's to judge. */
	if (share < 0.01) {
		if (l->win_copies >= LEDGER_WINDOW)
			ledger_window_reset(l);
		return LEDGER_EV_NONE;
	}
	/* Captures are paid once, by the repeats: a capturing window weighs the hash. */
	hashing = !l->win_full && l->win_captured > l->win_hit_rows;
	cost = (double)(hashing ? l->win_hash_ns : l->win_host_ns) / (double)l->win_rows;
	saving = ledger_saved_row_ns(l->row, link) * share;
	if (!ledger_window_due(l, cost, saving))
		return LEDGER_EV_NONE;
	ledger_judge(l, LEDGER_BASIS_WINDOW, cost, link, share);
	l->last.hashing = hashing;
	if (l->last.aside)
		return ledger_stand_aside(l, t, mode);
	ledger_window_reset(l);
	ledger_publish(t, l);
	return LEDGER_EV_NONE;
}

int ledger_pays_clearly(const struct ledger *l, const struct ledger_link *link)
{
	struct ledger_link doubt = *link;       /* the link LEDGER_CLEAR times faster */
	double cost, share;

	if (l->state != LEDGER_POOLING || link->source != LEDGER_LINK_MEASURED || link->gbps <= 0 || l->row == 0)
		return 0;
	if (l->win_copies >= LEDGER_FAST_COPIES && l->win_rows) {
		cost = (double)l->win_host_ns / (double)l->win_rows;
		share = l->win_full ? (double)l->win_hit_rows / (double)l->win_rows : 1.0;
	} else if (l->last.basis == LEDGER_BASIS_WINDOW && !l->last.aside) {
		cost = l->last.host_ns;
		share = l->last.hit_share;
	} else {
		return 0;
	}
	doubt.gbps *= LEDGER_CLEAR;
	return ledger_saved_row_ns(l->row, &doubt) * share > cost;
}

void ledger_count_aside(struct ledger_tally *t, uint64_t n, uint64_t row)
{
	atomic_store_explicit(&t->row, row, memory_order_relaxed);
	tally_add(&t->aside_copies, 1);
	tally_add(&t->aside_bytes, n);
}

enum ledger_event ledger_aside(struct ledger *l, struct ledger_tally *t, const struct ledger_sample *s,
			       const struct ledger_link *link)
{
	uint64_t scale = 1ULL << l->flips;
	double share, cost = l->last.host_ns;
	int hashing = l->last.hashing;

	ledger_count_aside(t, s->bytes, s->row);
	if (!s->sampled || l->state != LEDGER_ASIDE)
		return LEDGER_EV_NONE;
	tally_add(&t->sampled, 1);
	l->row = s->row;
	l->smp_copies++;
	if (s->can_admit) {
		/* Every row can still come back: the whole link time is at stake. */
		l->smp_rows = l->smp_hits = 0;
	} else {
		l->smp_rows += s->rows;
		l->smp_hits += s->hits;
	}
	if (s->cpu_ns && s->rows) {
		l->smp_cost_ns += s->cpu_ns;
		l->smp_cost_rows += s->rows;
	}
	if (l->smp_copies < LEDGER_RESUME_COPIES * scale ||
	    (!s->can_admit && l->smp_rows < LEDGER_RESUME_ROWS * scale))
		return LEDGER_EV_NONE;
	share = s->can_admit ? 1.0 : (double)l->smp_hits / (double)l->smp_rows;
	/* The sample's hash and look-up stand for a cost of that kind only. */
	if (l->smp_cost_rows && (l->last.basis == LEDGER_BASIS_PRIOR || l->last.hashing)) {
		cost = (double)l->smp_cost_ns / (double)l->smp_cost_rows;
		hashing = 1;
	}
	ledger_sample_reset(l);
	if (!ledger_link_known(link)) {
		/* Nothing newer than the verdict's link: judge again only on a new share or cost. */
		if (s->can_admit && cost == l->last.host_ns)
			return LEDGER_EV_NONE;
		link = &l->last.link;
	}
	if (!(cost * LEDGER_RESUME_MARGIN < ledger_saved_row_ns(s->row, link) * share)) {
		ledger_judge(l, LEDGER_BASIS_SAMPLE, cost, link, share);
		l->last.hashing = hashing;
		ledger_publish(t, l);
		return LEDGER_EV_NONE;
	}
	ledger_judge(l, LEDGER_BASIS_SAMPLE, cost, link, share);
	l->last.hashing = hashing;
	l->last.aside = 0;
	l->state = LEDGER_POOLING;
	l->resumed = 1;
	ledger_window_reset(l);
	tally_add(&t->resumes, 1);
	atomic_fetch_sub_explicit(&t->aside, 1, memory_order_relaxed);
	ledger_publish(t, l);
	return LEDGER_EV_RESUME;
}

/* ---- the board ---------------------------------------------------------------- */

void ledger_publish(struct ledger_tally *t, const struct ledger *l)
{
	const struct ledger_verdict *v = &l->last;

	atomic_store_explicit(&t->host_ps, (uint64_t)(v->host_ns * 1000.0), memory_order_relaxed);
	atomic_store_explicit(&t->link_ps, (uint64_t)(v->link_ns * 1000.0), memory_order_relaxed);
	atomic_store_explicit(&t->serve_ps, (uint64_t)(v->serve_ns * 1000.0), memory_order_relaxed);
	atomic_store_explicit(&t->serve_mbps, (uint64_t)(v->link.serve_gbps * 1000.0 + 0.5), memory_order_relaxed);
	atomic_store_explicit(&t->saved_ps, (uint64_t)(v->saved_ns * 1000.0), memory_order_relaxed);
	atomic_store_explicit(&t->mbps, (uint64_t)(v->link.gbps * 1000.0 + 0.5), memory_order_relaxed);
	atomic_store_explicit(&t->hit_pm, (uint64_t)(v->hit_share * 1000.0 + 0.5), memory_order_relaxed);
	atomic_store_explicit(&t->source, (int)v->link.source, memory_order_relaxed);
	atomic_store_explicit(&t->verdict_aside, v->aside, memory_order_relaxed);
	atomic_store_explicit(&t->hashing, v->hashing, memory_order_relaxed);
	atomic_store_explicit(&t->basis, (int)v->basis, memory_order_release);
}

void ledger_retire(struct ledger *l, struct ledger_tally *t)
{
	if (l->state == LEDGER_ASIDE)
		atomic_fetch_sub_explicit(&t->aside, 1, memory_order_relaxed);
	ledger_init(l);
}

int ledger_skip(int slot)
{
	struct ledger_tally *t;

	if (slot < 0 || slot >= LEDGER_SPECS)
		return 0;
	t = &ledger_board[slot];
	if (atomic_load_explicit(&t->aside, memory_order_relaxed) <= 0)
		return 0;
	return atomic_fetch_add_explicit(&t->turn, 1, memory_order_relaxed) % LEDGER_SAMPLE_EVERY != 0;
}

static uint64_t tally_get(const _Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

int ledger_view(const struct ledger_tally *t, struct ledger_view *out)
{
	memset(out, 0, sizeof(*out));
	out->v.basis = (enum ledger_basis)atomic_load_explicit(&t->basis, memory_order_acquire);
	out->row = tally_get(&t->row);
	out->copies = tally_get(&t->copies);
	out->rows = tally_get(&t->rows);
	out->cpu_ns = tally_get(&t->cpu_ns);
	out->wall_ns = tally_get(&t->wall_ns);
	out->hit_rows = tally_get(&t->hit_rows);
	out->saved_ns = tally_get(&t->saved_ns);
	out->calls_added = tally_get(&t->calls_added);
	out->aside_copies = tally_get(&t->aside_copies);
	out->aside_bytes = tally_get(&t->aside_bytes);
	out->sampled = tally_get(&t->sampled);
	out->stand_asides = tally_get(&t->stand_asides);
	out->resumes = tally_get(&t->resumes);
	out->aside = atomic_load_explicit(&t->aside, memory_order_relaxed) > 0;
	out->v.host_ns = (double)tally_get(&t->host_ps) / 1000.0;
	out->v.link_ns = (double)tally_get(&t->link_ps) / 1000.0;
	out->v.serve_ns = (double)tally_get(&t->serve_ps) / 1000.0;
	out->v.link.serve_gbps = (double)tally_get(&t->serve_mbps) / 1000.0;
	out->v.saved_ns = (double)tally_get(&t->saved_ps) / 1000.0;
	out->v.link.gbps = (double)tally_get(&t->mbps) / 1000.0;
	out->v.hit_share = (double)tally_get(&t->hit_pm) / 1000.0;
	out->v.link.source = (enum ledger_source)atomic_load_explicit(&t->source, memory_order_relaxed);
	out->v.aside = atomic_load_explicit(&t->verdict_aside, memory_order_relaxed);
	out->v.hashing = atomic_load_explicit(&t->hashing, memory_order_relaxed);
	return out->copies || out->aside_copies;
}

const char *ledger_source_name(enum ledger_source s)
{
	switch (s) {
	case LEDGER_LINK_ASSUMED:
		return "assumed";
	case LEDGER_LINK_STATED:
		return "stated";
	case LEDGER_LINK_MEASURED:
		return "measured";
	case LEDGER_LINK_NONE:
		break;
	}
	return "none";
}

const char *ledger_basis_name(enum ledger_basis b)
{
	switch (b) {
	case LEDGER_BASIS_PRIOR:
		return "first_copies";
	case LEDGER_BASIS_WINDOW:
		return "window";
	case LEDGER_BASIS_SAMPLE:
		return "sample";
	case LEDGER_BASIS_NONE:
		break;
	}
	return "none";
}

/* A duration in ns as text: "4.0 ns", "150 ns", "37.6 us". */
static const char *ledger_ns_text(char *buf, size_t len, double ns)
{
	if (ns < 10)
		snprintf(buf, len, "%.1f ns", ns);
	else if (ns < 10000)
		snprintf(buf, len, "%.0f ns", ns);
	else
		snprintf(buf, len, "%.1f us", ns / 1000.0);
	return buf;
}

char *ledger_reason(const struct ledger_view *v, char *buf, size_t len)
{
	const struct ledger_verdict *d = &v->v;
	char row[32], host[32], saved[32], share[48] = "", serve[96] = "", served[32];
	/* A verdict to stand aside while the spec pools: VRAMPOOL_LEDGER=force. */
	const char *state = v->aside ? "stood aside"
			  : d->aside ? "pool, though the ledger would stand aside" : "pool";

	log_bytes(row, sizeof(row), v->row);
	if (d->basis == LEDGER_BASIS_NONE) {
		snprintf(buf, len, "%s rows pool: no verdict yet", row);
		return buf;
	}
	if (d->hit_share < 0.9995)
		snprintf(share, sizeof(share), "; %.0f%% of rows hit", 100.0 * d->hit_share);
	ledger_ns_text(host, sizeof(host), d->host_ns);
	/* The link time at stake, and what serving it from the slabs takes back (measured). */
	ledger_ns_text(saved, sizeof(saved), d->link_ns * d->hit_share);
	if (d->serve_ns > 0 && d->link.serve_gbps > 0)
		snprintf(serve, sizeof(serve), ", less %s serving it from VRAM at %.3g GB/s (measured)",
			 ledger_ns_text(served, sizeof(served), d->serve_ns * d->hit_share), d->link.serve_gbps);
	snprintf(buf, len, "%s rows %s%s: %s of %s per row %s %s of link time at %.3g GB/s (%s%s)%s",
		 row, state, d->basis == LEDGER_BASIS_PRIOR ? " from their first copies" : "", host,
		 !d->hashing ? "host time" : d->basis == LEDGER_BASIS_SAMPLE ? "sampled hashing and look-up" : "hashing",
		 d->aside ? "to save" : "saves", saved, d->link.gbps,
		 ledger_source_name(d->link.source), share, serve);
	return buf;
}

void ledger_board_reset(void)
{
	memset(ledger_board, 0, sizeof(ledger_board));
}
