/*
 * fuzz_layout.c: the layout grammar (shim/core/layout.c, sizes through
 * size.c): VRAMPOOL_LAYOUT as a program's environment may hold it.
 *
 * Promises checked (layout.h): a parse is 0 or -EINVAL with a one-line
 * reason, and a failed parse leaves an empty layout; a good one has 1 to
 * LAYOUT_MAX_SPECS distinct nonzero rows, largest first, priorities 0..9,
 * terminated text, or is "auto"; layout_format writes the canonical text
 * (rows, "@P" when P > 0, "whole:MIN[@P]") whenever it fits, and parsing
 * that text gives the same layout back; a match is a row that divides the
 * copy (or the copy itself for whole:MIN, never below MIN), the largest
 * such row, and layout_match agrees with layout_match_hit; the smallest
 * row is at most the largest.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/layout.h"
#include "fuzz.h"

/* The canonical text of l, unbounded (the fuzz target's own reading of layout.h). */
static size_t fuzz_canonical(const struct layout *l, char *out, size_t len)
{
	size_t k = 0;
	int i;

	out[0] = '\0';
	for (i = 0; i < l->nrows; i++) {
		k += (size_t)snprintf(out + k, len - k, "%s%llu", k ? "," : "", (unsigned long long)l->rows[i]);
		if (l->prio[i])
			k += (size_t)snprintf(out + k, len - k, "@%u", l->prio[i]);
	}
	if (l->has_whole) {
		k += (size_t)snprintf(out + k, len - k, "%swhole:%llu", k ? "," : "",
				      (unsigned long long)l->whole_min);
		if (l->whole_prio)
			k += (size_t)snprintf(out + k, len - k, "@%u", l->whole_prio);
	}
	return k;
}

static int fuzz_same(const struct layout *a, const struct layout *b)
{
	return a->nrows == b->nrows && a->has_whole == b->has_whole && a->is_auto == b->is_auto &&
	       memcmp(a->rows, b->rows, (size_t)a->nrows * sizeof(a->rows[0])) == 0 &&
	       memcmp(a->prio, b->prio, (size_t)a->nrows) == 0 &&
	       (!a->has_whole || (a->whole_min == b->whole_min && a->whole_prio == b->whole_prio));
}

/* Checks one copy size against the layout's matching rule. */
static void fuzz_match(const struct layout *l, uint64_t n, const uint8_t *data, size_t size)
{
	struct layout_hit hit;
	uint64_t row = layout_match(l, n);
	int matched = layout_match_hit(l, n, &hit), i;

	if (matched != (row != 0) || (matched && hit.row != row))
		fuzz_fail("layout_match and layout_match_hit disagree", data, size);
	if (!matched) {
		for (i = 0; i < l->nrows; i++)
			if (n && n % l->rows[i] == 0)
				fuzz_fail("a row that divides the copy did not match", data, size);
		if (n && l->has_whole && n >= l->whole_min)
			fuzz_fail("a copy of at least whole:MIN did not match", data, size);
		return;
	}
	if (hit.spec >= 0) {
		if (hit.spec >= l->nrows || l->rows[hit.spec] != row || n % row || hit.prio != l->prio[hit.spec])
			fuzz_fail("a matched row that does not divide the copy", data, size);
		for (i = 0; i < hit.spec; i++)
			if (n % l->rows[i] == 0)
				fuzz_fail("a smaller row won over a larger one that divides the copy", data, size);
	} else if (!l->has_whole || row != n || n < l->whole_min || hit.prio != l->whole_prio) {
		fuzz_fail("a whole:MIN match that is not the whole copy", data, size);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct layout empty;
	char *text = fuzz_string(data, size);
	struct layout l, again;
	char err[256], canon[1024];
	size_t clen;
	int rc, i;

	memset(err, 'x', sizeof(err));
	rc = layout_parse(&l, text, err, sizeof(err));
	if (rc != 0) {
		if (rc != -EINVAL || !err[0] || !fuzz_terminated(err, sizeof(err)) || strchr(err, '\n') ||
		    memcmp(&l, &empty, sizeof(l)) != 0)
			fuzz_fail("a failed parse without a one-line reason, or a half-filled layout", data, size);
		goto out;
	}
	if (!fuzz_terminated(l.text, sizeof(l.text)))
		fuzz_fail("the layout's text is not terminated", data, size);
	if (l.is_auto) {
		if (l.nrows || l.has_whole || strcmp(l.text, "auto") != 0)
			fuzz_fail("\"auto\" with specs", data, size);
		goto out;
	}
	if (l.nrows < 0 || l.nrows > LAYOUT_MAX_SPECS || (l.nrows == 0 && !l.has_whole) ||
	    (l.has_whole && (l.whole_min == 0 || l.whole_prio > LAYOUT_MAX_PRIO)))
		fuzz_fail("a good parse with no spec or a spec out of range", data, size);
	for (i = 0; i < l.nrows; i++)
		if (l.rows[i] == 0 || l.prio[i] > LAYOUT_MAX_PRIO || (i && l.rows[i] >= l.rows[i - 1]))
			fuzz_fail("rows not distinct, nonzero and largest first", data, size);
	if (layout_min_row(&l) > layout_max_row(&l) || layout_min_row(&l) == 0)
		fuzz_fail("the smallest row is above the largest", data, size);
	for (i = 0; i < l.nrows; i++) {
		fuzz_match(&l, l.rows[i], data, size);
		fuzz_match(&l, l.rows[i] * 3, data, size);
		fuzz_match(&l, l.rows[i] + 1, data, size);
		fuzz_match(&l, l.rows[i] - 1, data, size);
	}
	if (l.has_whole) {
		fuzz_match(&l, l.whole_min, data, size);
		fuzz_match(&l, l.whole_min - 1, data, size);
	}
	fuzz_match(&l, 0, data, size);
	fuzz_match(&l, UINT64_MAX, data, size);
	/* The canonical text, and the round trip through it. */
	clen = fuzz_canonical(&l, canon, sizeof(canon));
	again = l;
	layout_format(&again);
	if (!fuzz_terminated(again.text, sizeof(again.text)) ||
	    (clen < sizeof(l.text) && strcmp(again.text, canon) != 0))
		fuzz_fail("layout_format did not write the canonical text", data, size);
	if (clen < sizeof(l.text)) {
		if (layout_parse(&again, canon, err, sizeof(err)) != 0 || !fuzz_same(&l, &again))
			fuzz_fail("the canonical text does not parse back to the same layout", data, size);
	}
out:
	free(text);
	return 0;
}
