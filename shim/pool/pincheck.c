/*
 * pincheck: the record and host function of pincheck.h.
 */
#include "pool/pincheck.h"

#include <stdlib.h>

struct pincheck *pincheck_new(uint64_t n, uint64_t row)
{
	struct pincheck *c;
	char *mem;

	if (n > (SIZE_MAX - sizeof(*c)) / (sizeof(*c->src) + sizeof(*c->fps) + sizeof(*c->slab) +
					     sizeof(*c->off)))
		return NULL;
	mem = malloc(sizeof(*c) + n * (sizeof(*c->src) + sizeof(*c->fps) + sizeof(*c->slab) +
				       sizeof(*c->off)));
	if (!mem)
		return NULL;
	c = (struct pincheck *)mem;
	c->fps = (struct fp *)(mem + sizeof(*c));
	c->src = (const unsigned char **)(c->fps + n);
	c->off = (uint64_t *)(c->src + n);
	c->slab = (uint32_t *)(c->off + n);
	c->row = row;
	c->n = n;
	c->refs = 0;
	atomic_init(&c->result, 0);
	return c;
}

void pincheck_run(void *arg)
{
	struct pincheck *c = arg;
	int result = 1;

	for (uint64_t i = 0; i < c->n && result > 0; i++) {
		struct fp now = fingerprint_one(c->src[i], c->row);

		if (!fp_equal(&now, &c->fps[i]))
			result = -1;
	}
	atomic_store(&c->result, result);
}

int pincheck_result(struct pincheck *c)
{
	return atomic_load(&c->result);
}

void pincheck_put(struct pincheck *c)
{
	if (c && --c->refs <= 0)
		free(c);
}
