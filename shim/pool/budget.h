/*
 * budget: the pool's budget arithmetic, pure (no device, no lock, no
 * global state), so the unit tests check every rule without a device.
 *
 * Rules (DESIGN.md "Budget"):
 * - The budget is decided once, by the probe: VRAMPOOL_BUDGET=SIZE is
 *   taken as asked, capped at the free memory then; N% is that share of
 *   the free memory; auto is the free memory less the reserve
 *   (VRAMPOOL_RESERVE_BATCHES times the largest matched copy) less the
 *   margin (VRAMPOOL_MARGIN).
 * - Any budget of at least one row is honoured: the pool is dormant only
 *   when the budget is below the smallest row the layout can produce.
 * - A slab is at most VRAMPOOL_SLAB and at most what the budget still
 *   allows; a row larger than VRAMPOOL_SLAB (whole:MIN) gets a slab of its
 *   own size when the budget allows it.
 */
#ifndef VRAMPOOL_BUDGET_H
#define VRAMPOOL_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

/* What limited the budget the probe decided. */
enum budget_limit {
	BUDGET_LIMIT_NONE,      /* auto or a share: nothing beyond the rule itself */
	BUDGET_LIMIT_ASKED,     /* VRAMPOOL_BUDGET=SIZE, granted in full */
	BUDGET_LIMIT_FREE,      /* VRAMPOOL_BUDGET=SIZE, capped at the free memory */
	BUDGET_LIMIT_RESERVE,   /* auto: the reserve for in-flight batches took what was free */
	BUDGET_LIMIT_MARGIN,    /* auto: the margin took what the reserve left */
	BUDGET_LIMIT_PROGRAM,   /* nothing free: the program holds the device's memory */
	BUDGET_LIMIT_ROW,       /* the budget is below one row */
};

/* The probe's inputs and its decision. */
struct budget_probe {
	uint64_t free;          /* device memory free at the probe */
	uint64_t total;         /* device memory in all */
	uint64_t largest_copy;  /* the largest matched copy seen so far */
	uint64_t min_row;       /* the smallest row the layout can produce (>= 1) */
	/* Decided by budget_decide: */
	uint64_t budget;        /* 0: the pool stays dormant */
	uint64_t reserve;       /* held back for in-flight batches (auto) */
	uint64_t margin;        /* held back as a safety margin (auto) */
	enum budget_limit limit;
};

/*
 * Decides p->budget, reserve, margin and limit from p's inputs under c.
 * Returns the budget (0 when it is below p->min_row: dormant).
 */
uint64_t budget_decide(const struct config *c, struct budget_probe *p);

/*
 * Writes one line saying why a decided budget leaves the pool dormant, or
 * what limited it, with what to set ("set VRAMPOOL_BUDGET=..."), into buf.
 */
void budget_explain(const struct config *c, const struct budget_probe *p, char *buf, size_t len);

/*
 * The size of a new slab for a row of row bytes when remaining bytes of
 * the budget are unused: min(slab, remaining), or row itself for a row
 * larger than slab. Returns 0 when the row does not fit what remains.
 */
uint64_t budget_slab_size(uint64_t slab, uint64_t remaining, uint64_t row);

#endif
