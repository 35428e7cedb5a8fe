/*
 * whatif: placeholder until the curve lands (whatif.h is the contract).
 */
#include "whatif.h"

#include <string.h>

void whatif_setup(uint64_t max_bytes)
{
	(void)max_bytes;
}

void whatif_observe(const struct fp *fps, const uint8_t *skip, uint64_t nrows, uint64_t row,
		    uint64_t *pos)
{
	(void)fps;
	(void)skip;
	(void)row;
	if (pos)
		memset(pos, 0, nrows * sizeof(*pos));
}

void whatif_repeat(uint64_t pos, uint64_t bytes)
{
	(void)pos;
	(void)bytes;
}

void whatif_snapshot(struct whatif_snapshot *s, uint64_t extra_budget)
{
	(void)extra_budget;
	memset(s, 0, sizeof(*s));
}

uint64_t whatif_served_at(uint64_t b)
{
	(void)b;
	return 0;
}

void whatif_reset(void)
{
}
