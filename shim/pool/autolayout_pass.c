/*
 * autolayout_pass: one copy's rows, hashed once per hashing unit and looked
 * up per candidate (autolayout_pass.h is the contract and says how a row's
 * fingerprint is made).
 *
 * The hot loop of auto-layout: al_pass hashes AL_BLOCK units at a time into
 * al.pbuf, then emits the rows of each candidate that end in the block;
 * al_row, in this file so that it inlines into that loop, mixes each row's
 * fingerprint into a key and looks up only the sampled ones.
 */
#include "pool/autolayout_pass.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "pool/autolayout_sizes.h"

/* Looks up one row of candidate c of s with fingerprint fp and counts the evidence. */
static void al_row(struct al_size *s, struct al_cand *c, uint64_t fp)
{
	struct al_table *t = &al.table[c->table];
	uint64_t key = al_mix(fp ^ c->salt);
	unsigned lz = key ? (unsigned)__builtin_clzll(key) : 64, origin;
	uint32_t id = (uint32_t)key ? (uint32_t)key : 1;
	struct al_entry *e, *hole;

	if (lz < t->level)
		return;
	e = al_find(t, id, &hole);
	if (!e) {
		al_insert(t, id, lz, s->slot, hole);
		if (lz >= t->level)
			c->cur_n++;     /* still sampled after the level rose, if it did */
		return;
	}
	if (e->seq == (uint16_t)al.seq)
		return;                 /* seen earlier in this copy: no evidence */
	e->seq = (uint16_t)al.seq;
	if ((e->tag & 15) >= AL_HOT)
		return;                 /* comes back all the time: no evidence */
	e->tag++;
	c->cur_n++;
	c->cur_k++;
	origin = e->tag >> 4;
	if (origin != (unsigned)s->slot) {
		s->shares |= 1u << origin;
		if (al.size[origin])
			al.size[origin]->shares |= 1u << s->slot;
	}
}

/*
 * Runs the pass of class cls of s over the copy src of n bytes: hashes its
 * units in the window and looks up the rows of the class's candidates.
 * Returns the bytes hashed.
 */
uint64_t al_pass(struct al_size *s, int cls, const unsigned char *src, uint64_t n)
{
	uint64_t a = s->unit[cls], w = n < AL_WINDOW ? n : AL_WINDOW;
	uint64_t nunits = w / a, p = 0, m0 = 0;
	int proxy = 0;

	for (int i = 0; i < s->ncands; i++) {
		struct al_cand *c = &s->cand[i];

		if (c->cls != cls)
			continue;
		c->next = c->q;
		c->start = 0;
		if (c->q > nunits)
			proxy = 1;
	}
	if (nunits == 0) {
		p = XXH3_64bits_withSeed(src, (size_t)w, AL_SEED);
		for (int i = 0; i < s->ncands; i++)
			if (s->cand[i].cls == cls)
				al_row(s, &s->cand[i], p);
		return w;
	}
	for (; m0 < nunits; m0 += AL_BLOCK) {
		uint64_t mb = nunits - m0 < AL_BLOCK ? nunits - m0 : AL_BLOCK;
		const unsigned char *base = src + m0 * a;

		for (uint64_t i = 0; i < mb; i++) {
			p = p * AL_K + XXH3_64bits_withSeed(base + i * a, (size_t)a, AL_SEED);
			al.pbuf[i] = p;
		}
		for (int i = 0; i < s->ncands; i++) {
			struct al_cand *c = &s->cand[i];

			if (c->cls != cls || c->q > nunits)
				continue;
			while (c->next <= m0 + mb) {
				uint64_t end = al.pbuf[c->next - 1 - m0];

				al_row(s, c, end - c->start * c->kq);
				c->start = end;
				c->next += c->q;
			}
		}
	}
	if (proxy)
		for (int i = 0; i < s->ncands; i++)
			if (s->cand[i].cls == cls && s->cand[i].q > nunits)
				al_row(s, &s->cand[i], p);
	return nunits * a;
}
