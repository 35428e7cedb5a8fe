/*
 * layout: parsing VRAMPOOL_LAYOUT and matching copy sizes against it.
 *
 * Fixed row sizes are kept sorted from largest to smallest and without
 * duplicates, so layout_match returns the first row that divides the copy:
 * that is the largest matching row, as the contract asks. Sizes with a
 * suffix use size_parse (core/size.h), so the layout and the other
 * variables share one size grammar; its keywords (auto, whole, the dtype
 * names) are read in any case, as config reads every keyword.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/layout.h"
#include "core/size.h"

#define LAYOUT_SPEC_MAX 128	/* longest single spec accepted */
#define LAYOUT_SHOW_MAX 48	/* longest spec quoted in an error */

struct dtype {
	const char *name;
	unsigned size;
};

static const struct dtype dtypes[] = {
	{ "u8", 1 }, { "i8", 1 }, { "u16", 2 }, { "i16", 2 }, { "f16", 2 },
	{ "bf16", 2 }, { "u32", 4 }, { "i32", 4 }, { "f32", 4 }, { "u64", 8 },
	{ "i64", 8 }, { "f64", 8 },
};

#define DTYPE_LIST "u8, i8, u16, i16, f16, bf16, u32, i32, f32, u64, i64, f64"

/*
 * Copies s into out for quoting in an error message: at most
 * LAYOUT_SHOW_MAX characters, anything unprintable shown as '?', so the
 * message stays one readable line whatever the environment held.
 */
static void layout_show(char *out, size_t outlen, const char *s, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n && k + 4 < outlen && i < LAYOUT_SHOW_MAX; i++)
		out[k++] = isprint((unsigned char)s[i]) ? s[i] : '?';
	if (i < n && k + 4 < outlen) {
		memcpy(out + k, "...", 3);
		k += 3;
	}
	out[k] = '\0';
}

/* Looks up a dtype name of n characters; returns its element size or 0. */
static unsigned layout_dtype_size(const char *name, size_t n)
{
	size_t i;

	for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (strlen(dtypes[i].name) == n && strncasecmp(dtypes[i].name, name, n) == 0)
			return dtypes[i].size;
	return 0;
}

/*
 * Parses "D1xD2x..." (decimal dims, each at least 1) and multiplies them
 * with elem. Returns 0 and *out, or -EINVAL / -ERANGE with err filled.
 */
static int layout_parse_shape(const char *dims, unsigned elem, const char *show,
			      uint64_t *out, char *err, size_t errlen)
{
	uint64_t total = elem;
	const char *p = dims;

	for (;;) {
		uint64_t d = 0;
		const char *start = p;

		while (*p >= '0' && *p <= '9') {
			unsigned digit = (unsigned)(*p - '0');

			if (d > (UINT64_MAX - digit) / 10)
				goto out_range;
			d = d * 10 + digit;
			p++;
		}
		if (p == start || d == 0) {
			snprintf(err, errlen, "bad shape in '%s' (expected dims >= 1 like 3x224x224)", show);
			return -EINVAL;
		}
		if (total > UINT64_MAX / d)
			goto out_range;
		total *= d;
		if (*p == '\0')
			break;
		if (*p != 'x') {
			snprintf(err, errlen, "bad shape in '%s' (expected dims >= 1 like 3x224x224)", show);
			return -EINVAL;
		}
		p++;
	}
	*out = total;
	return 0;

out_range:
	snprintf(err, errlen, "'%s' is too large (the row size overflows 64 bits)", show);
	return -ERANGE;
}

/*
 * Parses a size spec (a row or whole:MIN's MIN) that must be at least 1.
 * what names it in the message ("row size", "whole:MIN").
 */
static int layout_parse_bytes(const char *s, const char *show, const char *what,
			      uint64_t *out, char *err, size_t errlen)
{
	int rc = size_parse(s, out);

	if (rc == -ERANGE) {
		snprintf(err, errlen, "'%s' is too large (the %s overflows 64 bits)", show, what);
		return rc;
	}
	if (rc < 0 || *out == 0) {
		snprintf(err, errlen, "bad %s '%s' (expected a size >= 1 like 150528 or 147K, "
			 "DTYPE:D1xD2x... or whole:MIN)", what, show);
		return -EINVAL;
	}
	return 0;
}

/* Parses one trimmed spec of n characters, the position-th of the text, into l. */
static int layout_parse_spec(struct layout *l, const char *s, size_t n, int position, char *err, size_t errlen)
{
	char spec[LAYOUT_SPEC_MAX + 1];
	char show[LAYOUT_SHOW_MAX + 8];
	const char *colon;
	char *at;
	unsigned prio = 0;
	uint64_t row;
	unsigned elem;
	int rc, i;

	layout_show(show, sizeof(show), s, n);
	if (n == 0) {
		snprintf(err, errlen, "empty spec (expected a size like 150528, DTYPE:D1xD2x... or whole:MIN)");
		return -EINVAL;
	}
	if (n > LAYOUT_SPEC_MAX) {
		snprintf(err, errlen, "spec '%s' is longer than %d characters", show, LAYOUT_SPEC_MAX);
		return -EINVAL;
	}
	memcpy(spec, s, n);
	spec[n] = '\0';

	at = strchr(spec, '@');
	if (at != NULL) {
		if (at[1] < '0' || at[1] > '0' + LAYOUT_MAX_PRIO || at[2] != '\0') {
			snprintf(err, errlen, "bad priority in '%s' (expected @0 to @%d at the end of a spec)",
				 show, LAYOUT_MAX_PRIO);
			return -EINVAL;
		}
		prio = (unsigned)(at[1] - '0');
		*at = '\0';
	}

	colon = strchr(spec, ':');
	if (colon == NULL) {
		rc = layout_parse_bytes(spec, show, "row size", &row, err, errlen);
		if (rc < 0)
			return rc;
	} else if (colon - spec == 5 && strncasecmp(spec, "whole", 5) == 0) {
		if (l->has_whole) {
			snprintf(err, errlen, "second whole: spec '%s' (expected at most one whole:MIN)", show);
			return -EINVAL;
		}
		rc = layout_parse_bytes(colon + 1, show, "whole:MIN", &l->whole_min, err, errlen);
		if (rc < 0)
			return rc;
		l->has_whole = 1;
		l->whole_prio = (uint8_t)prio;
		return 0;
	} else {
		char name[LAYOUT_SHOW_MAX + 8];

		elem = layout_dtype_size(spec, (size_t)(colon - spec));
		if (elem == 0) {
			layout_show(name, sizeof(name), spec, (size_t)(colon - spec));
			snprintf(err, errlen, "bad dtype '%s' in '%s' (expected " DTYPE_LIST " or whole)",
				 name, show);
			return -EINVAL;
		}
		rc = layout_parse_shape(colon + 1, elem, show, &row, err, errlen);
		if (rc < 0)
			return rc;
	}

	/* Insert keeping rows sorted largest first; a duplicate is dropped. */
	for (i = 0; i < l->nrows && l->rows[i] > row; i++)
		;
	if (i < l->nrows && l->rows[i] == row) {
		if (prio > l->prio[i])
			l->prio[i] = (uint8_t)prio;
		return 0;
	}
	memmove(&l->rows[i + 1], &l->rows[i], (size_t)(l->nrows - i) * sizeof(l->rows[0]));
	memmove(&l->prio[i + 1], &l->prio[i], (size_t)(l->nrows - i) * sizeof(l->prio[0]));
	memmove(&l->pos[i + 1], &l->pos[i], (size_t)(l->nrows - i) * sizeof(l->pos[0]));
	l->rows[i] = row;
	l->prio[i] = (uint8_t)prio;
	l->pos[i] = (uint8_t)position;
	l->nrows++;
	return 0;
}

/*
 * Appends a trimmed spec to l->text, comma-separated. A list too long for
 * the field ends in "..."; text is for display only, matching never reads it.
 */
static void layout_append_text(struct layout *l, const char *s, size_t n)
{
	size_t used = strlen(l->text);
	size_t cap = sizeof(l->text) - 1;

	if (used >= cap)
		return;
	if (used > 0)
		l->text[used++] = ',';
	if (used + n > cap) {
		size_t keep = cap > used + 3 ? cap - used - 3 : 0;

		memcpy(l->text + used, s, keep);
		memcpy(l->text + used + keep, "...", cap - used - keep);
		l->text[cap] = '\0';
		return;
	}
	memcpy(l->text + used, s, n);
	l->text[used + n] = '\0';
}

int layout_parse(struct layout *l, const char *text, char *err, size_t errlen)
{
	const char *p = text;
	int nspecs = 0;
	int rc = 0;

	memset(l, 0, sizeof(*l));
	if (errlen > 0)
		err[0] = '\0';
	if (text == NULL || text[strspn(text, " \t\r\n")] == '\0') {
		snprintf(err, errlen, "empty layout (expected a size like 150528, DTYPE:D1xD2x... or whole:MIN)");
		rc = -EINVAL;
		goto out_clear;
	}
	{
		size_t b = strspn(text, " \t\r\n"), e = strlen(text);

		while (e > b && isspace((unsigned char)text[e - 1]))
			e--;
		if (e - b == 4 && strncasecmp(text + b, "auto", 4) == 0) {
			l->is_auto = 1;
			memcpy(l->text, "auto", 5);
			return 0;
		}
	}
	for (;;) {
		const char *end = strchr(p, ',');
		const char *b = p, *e;

		if (end == NULL)
			end = p + strlen(p);
		e = end;
		while (b < e && isspace((unsigned char)*b))
			b++;
		while (e > b && isspace((unsigned char)e[-1]))
			e--;
		if (++nspecs > LAYOUT_MAX_SPECS) {
			snprintf(err, errlen, "more than %d specs (expected at most %d)",
				 LAYOUT_MAX_SPECS, LAYOUT_MAX_SPECS);
			rc = -EINVAL;
			goto out_clear;
		}
		rc = layout_parse_spec(l, b, (size_t)(e - b), nspecs - 1, err, errlen);
		if (rc < 0) {
			rc = -EINVAL;
			goto out_clear;
		}
		layout_append_text(l, b, (size_t)(e - b));
		if (*end == '\0')
			break;
		p = end + 1;
	}
	l->user_order = 1;
	return 0;

out_clear:
	/* A failed parse leaves an empty layout, never a half-filled one. */
	memset(l, 0, sizeof(*l));
	return rc;
}

int layout_match_hit(const struct layout *l, uint64_t n, struct layout_hit *hit)
{
	int i;

	if (n == 0)
		return 0;
	for (i = 0; i < l->nrows; i++) {
		if (n % l->rows[i] == 0) {
			*hit = (struct layout_hit){ .row = l->rows[i], .prio = l->prio[i], .spec = i };
			return 1;
		}
	}
	if (l->has_whole && n >= l->whole_min) {
		*hit = (struct layout_hit){ .row = n, .prio = l->whole_prio, .spec = -1 };
		return 1;
	}
	return 0;
}

uint64_t layout_match(const struct layout *l, uint64_t n)
{
	struct layout_hit h;

	return layout_match_hit(l, n, &h) ? h.row : 0;
}

int layout_position(const struct layout *l, int spec)
{
	if (!l || !l->user_order || spec < 0 || spec >= l->nrows)
		return spec;
	return l->pos[spec];
}

uint64_t layout_min_row(const struct layout *l)
{
	uint64_t m = l->nrows > 0 ? l->rows[l->nrows - 1] : 0;

	if (l->has_whole && (m == 0 || l->whole_min < m))
		m = l->whole_min;
	return m;
}

void layout_format(struct layout *l)
{
	size_t k = 0, cap = sizeof(l->text);
	int i;

	l->text[0] = '\0';
	for (i = 0; i < l->nrows && k < cap; i++) {
		int w = snprintf(l->text + k, cap - k, "%s%llu", k ? "," : "", (unsigned long long)l->rows[i]);

		if (w < 0 || (size_t)w >= cap - k)
			break;
		k += (size_t)w;
		if (l->prio[i]) {
			w = snprintf(l->text + k, cap - k, "@%u", l->prio[i]);
			if (w < 0 || (size_t)w >= cap - k)
				break;
			k += (size_t)w;
		}
	}
	if (l->has_whole && k < cap)
		snprintf(l->text + k, cap - k, "%swhole:%llu%s", k ? "," : "",
			 (unsigned long long)l->whole_min, l->whole_prio ? "@" : "");
	if (l->has_whole && l->whole_prio) {
		size_t n = strlen(l->text);

		if (n + 1 < cap) {
			l->text[n] = (char)('0' + l->whole_prio);
			l->text[n + 1] = '\0';
		}
	}
}

uint64_t layout_max_row(const struct layout *l)
{
	uint64_t max = l->nrows > 0 ? l->rows[0] : 0;

	if (l->has_whole && l->whole_min > max)
		max = l->whole_min;
	return max;
}
