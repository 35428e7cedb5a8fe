/*
 * autolayout_judge: verdicts per copy size, the settling and the decision,
 * and the evidence text (autolayout_judge.h is the contract and states the
 * rules).
 *
 * Rates are judged by their Wilson score bounds, not by the bare ratio, so
 * that a candidate with few sampled rows neither wins nor loses on luck;
 * the square root is Newton's (the preloaded object does not link libm).
 * The text is built with al_append, which truncates safely at the buffer's
 * end.
 */
#include "pool/autolayout_judge.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pool/autolayout_sizes.h"

/* Square root by Newton's method (the preloaded object does not link libm). */
static double al_sqrt(double x)
{
	double r;

	if (x <= 0)
		return 0;
	r = x > 1 ? x : 1;
	for (int i = 0; i < 200; i++) {
		double nr = 0.5 * (r + x / r);

		if (nr >= r)
			break;
		r = nr;
	}
	return r;
}

/* Wilson score bound (z^2 = AL_Z2) of the rate k/n: the lower one, or the upper one when upper. */
static double al_wilson(uint32_t k, uint32_t n, int upper)
{
	double z2 = AL_Z2, dn = n, p, center, spread;

	if (n == 0)
		return upper ? 1.0 : 0.0;
	p = (double)k / dn;
	center = p + z2 / (2 * dn);
	spread = al_sqrt(z2 * (p * (1 - p) / dn + z2 / (4 * dn * dn)));
	return (upper ? center + spread : center - spread) / (1 + z2 / dn);
}

/* Returns the least best rate that shows a repeat regime, given the share observed. */
static double al_floor(void)
{
	uint64_t offered = atomic_load_explicit(&al.offered, memory_order_relaxed);
	double q = offered ? (double)al.observed_bytes / (double)offered : 1.0;
	double f = AL_R_MIN * (q > 1 ? 1 : q);

	return f < AL_R_FLOOR ? AL_R_FLOOR : f;
}

/* Judges s over its last K copies (see autolayout_judge.h) into v. */
static void al_judge(const struct al_size *s, unsigned K, double floor, struct al_verdict *v)
{
	uint32_t n[AL_SIZE_CANDS], k[AL_SIZE_CANDS];
	char low[AL_SIZE_CANDS], high[AL_SIZE_CANDS];
	int star = -1;
	double b = 0;

	memset(v, 0, sizeof(*v));
	for (int i = 0; i < s->ncands; i++) {
		n[i] = k[i] = 0;
		for (unsigned j = 1; j <= K; j++) {
			unsigned at = (s->ring_pos + AL_RING - j) % AL_RING;

			n[i] += s->cand[i].ring_n[at];
			k[i] += s->cand[i].ring_k[at];
		}
		if (k[i]) {
			double lb = al_wilson(k[i], n[i], 0);

			if (lb > b)
				b = lb;
		}
	}
	v->best = b;
	v->kind = b >= floor ? AL_UNSURE : AL_NONE;
	if (v->kind == AL_NONE)
		return;
	for (int i = 0; i < s->ncands; i++) {
		low[i] = n[i] && al_wilson(k[i], n[i], 1) < AL_THETA_LO * b;
		for (int j = 0; j < i && !low[i]; j++)
			if (low[j] && s->cand[i].row % s->cand[j].row == 0)
				low[i] = 1;
		high[i] = !low[i] && n[i] && k[i] >= AL_MIN_K &&
			  (double)k[i] >= AL_THETA * b * n[i] &&
			  al_wilson(k[i], n[i], 0) >= AL_THETA_LO * b;
		if (high[i])
			star = i;
	}
	if (star < 0)
		return;
	for (int i = star + 1; i < s->ncands; i++)
		if (!low[i])
			return;
	v->kind = AL_FOUND;
	v->row = s->cand[star].row;
	v->n = n[star];
	v->k = k[star];
	for (int i = star + 1; i < s->ncands; i++) {     /* the next multiple, else the next */
		if (s->cand[i].row % v->row == 0 || !v->next) {
			v->next = s->cand[i].row;
			v->next_n = n[i];
			v->next_k = k[i];
			if (s->cand[i].row % v->row == 0)
				break;
		}
	}
}

/* Updates the verdict of s from its most recent window that finds a row. */
void al_size_verdict(struct al_size *s)
{
	double floor = al_floor();
	struct al_verdict v = { .kind = AL_NONE };

	for (unsigned K = 1;; K *= 2) {
		if (K > s->ring_len)
			K = s->ring_len;
		al_judge(s, K, floor, &v);
		if (v.kind == AL_FOUND || K == s->ring_len)
			break;
	}
	s->last = v;
	if (v.kind == AL_FOUND)
		s->found = v;
}

/* Returns 1 when size s carries at least 1/share of the observed bytes. */
static int al_share(const struct al_size *s, unsigned share)
{
	return s->bytes * share >= al.observed_bytes;
}

/*
 * Returns 1 when s comes at most half as often as a size whose row was
 * found (the last, partial batch of an epoch): waiting for its next copy
 * would take too long.
 */
static int al_rare(const struct al_size *s)
{
	for (int i = 0; i < AL_MAX_SIZES; i++) {
		const struct al_size *f = al.size[i];

		if (f && f != s && f->found.kind == AL_FOUND && s->copies * 2 <= f->copies)
			return 1;
	}
	return 0;
}

/*
 * Returns 1 when the settling is over: every active size (seen in the last
 * AL_RECENT copies) that could get a spec has found its row, repeated rows
 * of a size that did, comes rarely (al_rare: a partial batch), or
 * had AL_SETTLE copies.
 */
static int al_settled(void)
{
	uint32_t found = 0;

	if (al.seq - al.settle_seq >= AL_SETTLE_MAX)
		return 1;
	for (int i = 0; i < AL_MAX_SIZES; i++)
		if (al.size[i] && al.size[i]->found.kind == AL_FOUND)
			found |= 1u << i;
	for (int i = 0; i < AL_MAX_SIZES; i++) {
		struct al_size *s = al.size[i];

		if (!s || (found >> i & 1) || !al_share(s, AL_SPEC_SHARE) ||
		    s->last_seq + AL_RECENT < al.settle_seq || (s->shares & found) ||
		    al_rare(s) || s->copies - s->settle_base >= AL_SETTLE)
			continue;
		return 0;
	}
	return 1;
}

/* Appends printf-style text to buf (size cap) at *len, truncating safely. */
static void al_append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void al_append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (*len + 1 >= cap)
		return;
	va_start(ap, fmt);
	w = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (w < 0)
		return;
	*len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
}

/* Returns the percentage k/n, rounded down (0 when n is 0). */
static unsigned al_pct(uint32_t k, uint32_t n)
{
	return n ? (unsigned)((uint64_t)k * 100 / n) : 0;
}

/*
 * Fills al.found and its evidence from the sizes with a row and enough
 * bytes (largest first). Returns the number of specs.
 */
static int al_fill_found(void)
{
	struct al_size *by[AL_MAX_SIZES];
	int nby = 0;
	size_t len = 0;
	struct layout *l = &al.found;

	memset(l, 0, sizeof(*l));
	for (int i = 0; i < AL_MAX_SIZES; i++)
		if (al.size[i] && al.size[i]->found.kind == AL_FOUND && al_share(al.size[i], AL_SPEC_SHARE))
			by[nby++] = al.size[i];
	al_size_sort(by, nby);
	al.found_evidence[0] = '\0';
	for (int i = 0; i < nby && l->nrows < LAYOUT_MAX_SPECS; i++) {
		const struct al_verdict *v = &by[i]->found;
		int dup = 0;

		for (int j = 0; j < l->nrows; j++)
			dup |= l->rows[j] == v->row;
		if (dup)
			continue;
		l->rows[l->nrows++] = v->row;
		al_append(al.found_evidence, sizeof(al.found_evidence), &len,
			  "%srows of %llu bytes repeated in %u%% of %u sampled rows of %llu-byte copies",
			  len ? "; " : "", (unsigned long long)v->row, al_pct(v->k, v->n), v->n,
			  (unsigned long long)by[i]->size);
		if (v->next)
			al_append(al.found_evidence, sizeof(al.found_evidence), &len, " (%llu: %u%% of %u)",
				  (unsigned long long)v->next, al_pct(v->next_k, v->next_n), v->next_n);
	}
	for (int i = 1; i < l->nrows; i++)     /* largest row first */
		for (int j = i; j > 0 && l->rows[j] > l->rows[j - 1]; j--) {
			uint64_t t = l->rows[j];

			l->rows[j] = l->rows[j - 1];
			l->rows[j - 1] = t;
		}
	if (l->nrows) {
		layout_format(l);
		al_append(al.found_evidence, sizeof(al.found_evidence), &len,
			  "; %llu copies observed (%.1f MiB)", (unsigned long long)al.observed_copies,
			  (double)al.observed_bytes / (1 << 20));
	}
	return l->nrows;
}

/* Switches observation to the byte share (after NOTHING in POOL mode). */
static void al_share_from_now(void)
{
	atomic_store(&al.base_offered, atomic_load(&al.offered));
	atomic_store(&al.base_seen, atomic_load(&al.seen));
	atomic_store(&al.free_bytes, 0);
	atomic_store(&al.share_on, 1);
}

/* Returns 1 when some size's latest verdict saw repeats (a regime, settled or not). */
static int al_any_regime(void)
{
	for (int i = 0; i < AL_MAX_SIZES; i++)
		if (al.size[i] && al.size[i]->last.kind != AL_NONE)
			return 1;
	return 0;
}

/* Takes the module-wide decision after a copy. Returns 1 when the state changed. */
int al_decide(void)
{
	int state = atomic_load(&al.state);

	if (state == AUTOLAYOUT_FOUND)
		return 0;
	if (!al.settle_seq) {
		for (int i = 0; i < AL_MAX_SIZES; i++) {
			struct al_size *s = al.size[i];

			if (s && s->found.kind == AL_FOUND && al_share(s, AL_SPEC_SHARE)) {
				al.settle_seq = al.seq;
				break;
			}
		}
		if (al.settle_seq)
			for (int i = 0; i < AL_MAX_SIZES; i++)
				if (al.size[i])
					al.size[i]->settle_base = al.size[i]->copies;
	}
	if (al.settle_seq) {
		if (!al_settled())
			return 0;
		if (al_fill_found()) {
			atomic_store(&al.state, AUTOLAYOUT_FOUND);
			return 1;
		}
		al.settle_seq = 0;
	}
	if (state == AUTOLAYOUT_LOOKING && al.observed_copies >= AL_NOTHING_COPIES &&
	    atomic_load(&al.offered) >= AL_NOTHING_BYTES && !al_any_regime()) {
		atomic_store(&al.state, AUTOLAYOUT_NOTHING);
		if (al.mode == AUTOLAYOUT_POOL)
			al_share_from_now();
		return 1;
	}
	return 0;
}

void al_evidence_so_far(char *buf, size_t cap, enum autolayout_state state)
{
	int regime = al_any_regime();
	size_t len = 0;

	buf[0] = '\0';
	if (state == AUTOLAYOUT_NOTHING) {
		al_append(buf, cap, &len,
			  "no row size repeated in %llu copies (%.1f MiB observed): every copy is new; "
			  "host-side random augmentation is the usual cause",
			  (unsigned long long)al.observed_copies, (double)al.observed_bytes / (1 << 20));
	} else {
		al_append(buf, cap, &len,
			  "%s in %llu copies (%.1f MiB observed)%s",
			  regime ? "rows repeat, the row size is not settled yet" : "no row repeated yet",
			  (unsigned long long)al.observed_copies, (double)al.observed_bytes / (1 << 20),
			  regime ? "" : "; rows of a reshuffled dataset repeat from the second epoch on");
	}
}
