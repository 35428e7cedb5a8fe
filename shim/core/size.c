/*
 * size: the one size grammar of every VRAMPOOL_* variable that takes a
 * size (VRAMPOOL_BUDGET, VRAMPOOL_SLAB, VRAMPOOL_MARGIN, the row sizes of
 * VRAMPOOL_LAYOUT). It stands below both config and layout, so neither
 * calls the other for it.
 */
#include "core/size.h"

#include <errno.h>
#include <stddef.h>

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)
#define TIB (1024ULL * GIB)

/*
 * Reads the decimal digits at *p (at least one) into *v and moves *p past
 * them. Returns 0, -EINVAL (no digit) or -ERANGE (more than 64 bits).
 */
static int size_digits(const char **p, uint64_t *v)
{
	const char *q = *p;

	if (q == NULL || !(*q >= '0' && *q <= '9'))
		return -EINVAL;
	for (*v = 0; *q >= '0' && *q <= '9'; q++) {
		unsigned d = (unsigned)(*q - '0');

		if (*v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		*v = *v * 10 + d;
	}
	*p = q;
	return 0;
}

int size_parse_uint(const char *s, uint64_t *out)
{
	uint64_t v;
	int rc = size_digits(&s, &v);

	if (rc < 0)
		return rc;
	if (*s != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

int size_parse(const char *s, uint64_t *out)
{
	uint64_t v, mult = 1;
	const char *p = s;
	int rc = size_digits(&p, &v);

	if (rc < 0)
		return rc;
	switch (*p) {
	case 'K': case 'k': mult = KIB; p++; break;
	case 'M': case 'm': mult = MIB; p++; break;
	case 'G': case 'g': mult = GIB; p++; break;
	case 'T': case 't': mult = TIB; p++; break;
	default: break;
	}
	if (mult > 1 && *p == 'i' && p[1] == 'B')
		p += 2;
	else if (*p == 'B')
		p++;
	if (*p != '\0')
		return -EINVAL;
	if (mult > 1 && v > UINT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}
