/*
 * link: the meter of link.h.
 */
#include "pool/link.h"

#include <errno.h>

double link_rate(const struct link_meter *m)
{
	double best = 0;
	unsigned k = m->n < LINK_KEEP ? m->n : LINK_KEEP;

	for (unsigned i = 0; i < k; i++)
		if (m->rate[i] > best)
			best = m->rate[i];
	return best;
}

void link_get(const struct link_meter *m, const struct link_meter *serve, double stated_gbps,
	      struct ledger_link *out)
{
	/* A serving figure needs a full set: the emulated device's events come late when its worker waits for a core. */
	out->serve_gbps = serve && serve->n >= LINK_FIRST && stated_gbps <= 0 ? link_rate(serve) : 0;
	if (stated_gbps > 0) {
		out->gbps = stated_gbps;
		out->source = LEDGER_LINK_STATED;
		return;
	}
	out->gbps = link_rate(m);
	out->source = out->gbps > 0 ? LEDGER_LINK_MEASURED : LEDGER_LINK_NONE;
}

/* Whether measuring a copy of bytes bytes is possible at all now. */
static int link_can(const struct link_meter *m, double stated_gbps, uint64_t bytes)
{
	return stated_gbps <= 0 && bytes >= LINK_MIN_BYTES && m->fails < LINK_FAIL_MAX && m->phase == LINK_IDLE;
}

int link_plain_due(struct link_meter *m, double stated_gbps, uint64_t bytes)
{
	m->plain++;
	if (!link_can(m, stated_gbps, bytes))
		return 0;
	return m->n < LINK_FIRST || m->plain >= LINK_REFRESH;
}

int link_pool_due(struct link_meter *m, double stated_gbps, uint64_t bytes, int clear)
{
	m->pooled++;
	if (!link_can(m, stated_gbps, bytes))
		return 0;
	return m->pooled >= (m->n < LINK_FIRST && !clear ? LINK_GAP : LINK_POOL_REFRESH);
}

int link_serve_due(struct link_meter *m, double stated_gbps, uint64_t bytes)
{
	m->plain++;
	if (stated_gbps > 0 || bytes < LINK_MIN_BYTES || m->fails >= LINK_FAIL_MAX || m->phase != LINK_IDLE)
		return 0;
	return m->n < LINK_FIRST || m->plain >= LINK_REFRESH;
}

int link_begin(struct link_meter *m, dev_stream s)
{
	int err;

	if (m->phase != LINK_IDLE)
		return -EBUSY;
	if (!m->a && (err = device_event_new_timed(&m->a)) != 0)
		goto out_fail;
	if (!m->b && (err = device_event_new_timed(&m->b)) != 0)
		goto out_fail;
	err = device_event_record_meter(m->a, s);
	if (err)
		goto out_fail;
	m->phase = LINK_CLAIMED;
	m->plain = m->pooled = 0;
	return 0;

out_fail:
	m->fails++;
	return err;
}

void link_end(struct link_meter *m, dev_stream s, uint64_t bytes, uint64_t wait_ns, int pageable, int ok)
{
	if (m->phase != LINK_CLAIMED)
		return;
	if (!ok || device_event_record_meter(m->b, s) != 0) {
		m->fails += ok;
		m->phase = LINK_IDLE;
		return;
	}
	m->bytes = bytes;
	m->wait_ns = wait_ns;
	m->pageable = pageable;
	m->phase = LINK_INFLIGHT;
}

void link_poll(struct link_meter *m, uint64_t min_ns)
{
	uint64_t ns = 0;
	int err;

	if (m->phase != LINK_INFLIGHT)
		return;
	err = device_event_elapsed_ns(m->a, m->b, &ns);
	if (err == -EBUSY)
		return;
	m->phase = LINK_IDLE;
	if (err) {
		m->fails++;
		return;
	}
	if (m->pageable && m->wait_ns > ns)
		ns = m->wait_ns;
	if (ns < min_ns)
		return;         /* too short to tell the link from the events */
	if (!ns)
		ns = 1;
	m->rate[m->n % LINK_KEEP] = (double)m->bytes / (double)ns;
	m->n++;
}

void link_release(struct link_meter *m)
{
	device_event_free(m->a);
	device_event_free(m->b);
	m->a = m->b = NULL;
	m->phase = LINK_IDLE;
}
