/*
 * autolayout_judge: what the evidence says, per copy size and for the
 * module, and the evidence line of the result. INTERNAL to the auto-layout
 * room (autolayout_impl.h lists its files); it calls only
 * autolayout_sizes.c (and layout_format of core/layout.h).
 *
 * Verdicts. Each copy size keeps, per candidate, the sampled rows and
 * repeats of its last AL_RING copies (autolayout.c fills the ring from
 * each pass). A verdict over the last K copies (K = 1, 2, 4, ...: the most
 * recent evidence first; all candidates over the same copies, so a window
 * that straddles the start of the second epoch dilutes them alike) takes b,
 * the best lower bound (Wilson, z^2 = AL_Z2) of a candidate's repeat rate,
 * and finds the row when b is at least AL_R_MIN times the share of bytes
 * observed and some candidate is "high" (rate >= AL_THETA * b, lower bound
 * >= AL_THETA_LO * b, at least AL_MIN_K repeats) while every larger one is
 * "low" (upper bound < AL_THETA_LO * b, or a multiple of a low one: a row
 * that repeats is made of parts that repeat). The row is the largest high
 * candidate. Cut at the true row size, a reshuffled dataset repeats from
 * the first copy of the second epoch, and so do the rows of its divisors,
 * while a larger cut spans samples whose neighbours change, and a smaller
 * one that does not divide it repeats at most half as often (its phase in
 * the sample changes): so the first copy of the second epoch usually
 * decides.
 *
 * Decision. Once a size that carries at least 1/AL_SPEC_SHARE of the
 * observed bytes has a row, the settling begins: every other size with that
 * share, seen in the last AL_RECENT copies, gets AL_SETTLE copies to find
 * its own (another family: masks beside images, another weight buffer),
 * unless it repeated rows of a size with a row or comes at most half as
 * often as one (a partial batch); AL_SETTLE_MAX copies at most. The layout
 * is then the rows of the sizes with that share. NOTHING is stated when
 * AL_NOTHING_COPIES copies and AL_NOTHING_BYTES bytes went by with no
 * repeat at any size; it is not final: the module then observes 1/AL_SHARE
 * of the bytes and may still find rows.
 *
 * Every function runs under al.lock.
 */
#ifndef VRAMPOOL_AUTOLAYOUT_JUDGE_H
#define VRAMPOOL_AUTOLAYOUT_JUDGE_H

#include <stddef.h>

#include "pool/autolayout_impl.h"

/*
 * Updates the verdict of s (s->last; s->found too when it finds a row)
 * from its most recent window of copies that finds a row, else from all
 * the copies in its ring.
 */
void al_size_verdict(struct al_size *s);

/*
 * Takes the module-wide decision after a copy: FOUND (al.found and its
 * evidence filled) once the settling is over, or NOTHING. Returns 1 when
 * the state changed.
 */
int al_decide(void);

/*
 * Writes the evidence line of the state LOOKING or NOTHING into buf (cap
 * bytes, always terminated) from what was observed so far. The line of
 * FOUND is al.found_evidence, written when it was decided.
 */
void al_evidence_so_far(char *buf, size_t cap, enum autolayout_state state);

#endif
