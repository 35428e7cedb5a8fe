/*
 * budget: the probe's decision and slab sizing, as budget.h states them.
 */
#include "pool/budget.h"

#include <stdio.h>

#include "core/log.h"

/* a * b, or UINT64_MAX when it overflows. */
static uint64_t budget_mul(uint64_t a, uint64_t b)
{
	if (a && b > UINT64_MAX / a)
		return UINT64_MAX;
	return a * b;
}

/*
 * The budget c's rule gives at p's probe, before the one-row check:
 * sets p->reserve, margin and limit (budget_decide's) and returns it.
 */
static uint64_t budget_rule(const struct config *c, struct budget_probe *p)
{
	uint64_t left;

	p->budget = 0;
	p->reserve = 0;
	p->margin = 0;
	p->limit = BUDGET_LIMIT_NONE;
	switch (c->budget_kind) {
	case BUDGET_BYTES:
		if (c->budget_bytes <= p->free) {
			p->budget = c->budget_bytes;
			p->limit = BUDGET_LIMIT_ASKED;
		} else {
			p->budget = p->free;
			p->limit = p->free ? BUDGET_LIMIT_FREE : BUDGET_LIMIT_PROGRAM;
		}
		break;
	case BUDGET_SHARE:
		p->budget = (uint64_t)((double)p->free * c->budget_share);
		if (p->free == 0)
			p->limit = BUDGET_LIMIT_PROGRAM;
		break;
	case BUDGET_AUTO:
		p->reserve = budget_mul(c->reserve_batches, p->largest_copy);
		p->margin = c->margin;
		if (p->free == 0) {
			p->limit = BUDGET_LIMIT_PROGRAM;
			break;
		}
		if (p->reserve >= p->free) {
			p->limit = BUDGET_LIMIT_RESERVE;
			break;
		}
		left = p->free - p->reserve;
		if (p->margin >= left) {
			p->limit = BUDGET_LIMIT_MARGIN;
			break;
		}
		p->budget = left - p->margin;
		break;
	}
	return p->budget;
}

uint64_t budget_decide(const struct config *c, struct budget_probe *p)
{
	uint64_t min_row = p->min_row ? p->min_row : 1;

	if (budget_rule(c, p) < min_row) {
		if (p->limit == BUDGET_LIMIT_NONE || p->limit == BUDGET_LIMIT_ASKED)
			p->limit = BUDGET_LIMIT_ROW;
		p->budget = 0;
	}
	return p->budget;
}

/*
 * BUDGET_LIMIT_ROW, and BUDGET_LIMIT_FREE when what was free is below one
 * row: the budget the rule gave (the size or share asked for, or what auto
 * left; never the 0 the pool is left with), why no row fits it, and what
 * to set.
 */
static void budget_explain_row(const struct config *c, const struct budget_probe *p, char *buf, size_t len)
{
	struct budget_probe q = *p;
	uint64_t asked = budget_rule(c, &q);
	char a[32], f[32], r[32], m[32], row[32];

	log_bytes(a, sizeof(a), asked);
	log_bytes(f, sizeof(f), p->free);
	log_bytes(r, sizeof(r), p->reserve);
	log_bytes(m, sizeof(m), p->margin);
	log_bytes(row, sizeof(row), p->min_row);
	switch (c->budget_kind) {
	case BUDGET_BYTES:
		if (c->budget_bytes > p->free)
			snprintf(buf, len, "VRAMPOOL_BUDGET asked for %s, more than the %s free at the probe, and "
				 "what was free is below one row (%s): no row fits, nothing is pooled",
				 log_bytes(a, sizeof(a), c->budget_bytes), f, row);
		else
			snprintf(buf, len, "the budget VRAMPOOL_BUDGET asked for, %s, is below one row (%s): no row "
				 "fits, nothing is pooled; set VRAMPOOL_BUDGET to at least one row", a, row);
		break;
	case BUDGET_SHARE:
		snprintf(buf, len, "the budget VRAMPOOL_BUDGET asked for, %.4g%% of the %s free at the probe "
			 "(%s), is below one row (%s): no row fits, nothing is pooled; set a larger share or "
			 "VRAMPOOL_BUDGET=SIZE of at least one row", c->budget_share * 100.0, f, a, row);
		break;
	case BUDGET_AUTO:
		snprintf(buf, len, "the budget auto gives, %s (%s free at the probe less the reserve for %llu "
			 "in-flight batches, %s, and the margin, %s), is below one row (%s): no row fits, nothing "
			 "is pooled; set VRAMPOOL_BUDGET=SIZE of at least one row", a, f,
			 (unsigned long long)c->reserve_batches, r, m, row);
		break;
	}
}

void budget_explain(const struct config *c, const struct budget_probe *p, char *buf, size_t len)
{
	char f[32], t[32], r[32], m[32], b[32], used[32];

	log_bytes(f, sizeof(f), p->free);
	log_bytes(t, sizeof(t), p->total);
	log_bytes(r, sizeof(r), p->reserve);
	log_bytes(m, sizeof(m), p->margin);
	log_bytes(b, sizeof(b), p->budget);
	log_bytes(used, sizeof(used), p->total > p->free ? p->total - p->free : 0);
	switch (p->limit) {
	case BUDGET_LIMIT_PROGRAM:
		snprintf(buf, len, "no device memory was free at the probe (the program holds %s of %s); "
			 "nothing is pooled", used, t);
		break;
	case BUDGET_LIMIT_RESERVE:
		snprintf(buf, len, "the reserve for %llu in-flight batches (%s) took all %s free at the "
			 "probe; set VRAMPOOL_BUDGET=SIZE or lower VRAMPOOL_RESERVE_BATCHES",
			 (unsigned long long)c->reserve_batches, r, f);
		break;
	case BUDGET_LIMIT_MARGIN:
		snprintf(buf, len, "the margin (VRAMPOOL_MARGIN=%s) took the %s left after the reserve "
			 "of %s (%s free at the probe); set VRAMPOOL_BUDGET=SIZE or lower VRAMPOOL_MARGIN",
			 m, log_bytes(t, sizeof(t), p->free - p->reserve), r, f);
		break;
	case BUDGET_LIMIT_ROW:
		budget_explain_row(c, p, buf, len);
		break;
	case BUDGET_LIMIT_FREE:
		if (p->budget == 0)
			budget_explain_row(c, p, buf, len);
		else
			snprintf(buf, len, "VRAMPOOL_BUDGET asked for more than the %s free at the probe; the "
				 "budget is what was free (%s)", f, b);
		break;
	case BUDGET_LIMIT_ASKED:
		snprintf(buf, len, "budget %s as VRAMPOOL_BUDGET asked (%s free at the probe)", b, f);
		break;
	case BUDGET_LIMIT_NONE:
		if (c->budget_kind == BUDGET_SHARE)
			snprintf(buf, len, "budget %s: %.4g%% of the %s free at the probe", b,
				 c->budget_share * 100.0, f);
		else
			snprintf(buf, len, "budget %s: %s free at the probe, less the reserve for %llu "
				 "in-flight batches (%s) and the margin (%s)", b, f,
				 (unsigned long long)c->reserve_batches, r, m);
		break;
	}
}

uint64_t budget_slab_size(uint64_t slab, uint64_t remaining, uint64_t row)
{
	uint64_t size = slab < remaining ? slab : remaining;

	if (row > size)
		size = row <= remaining ? row : 0;
	return size;
}
