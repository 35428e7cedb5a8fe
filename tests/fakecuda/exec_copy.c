/*
 * exec_copy.c: the copy executor of the emulated device. A copy or a
 * memset is validated against the memory it touches and described in a
 * struct fc_xfer when the program asks for it (enqueue.c, graph.c); a
 * stream's worker later performs the description here, through the
 * workers' read-write view of device memory, at the rate of its link in
 * the cost model (FAKECUDA_H2D_GBPS, FAKECUDA_D2D_GBPS).
 */
#include "stream_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- describing copies and memsets ---- */

/* The span in bytes of ROWS rows of WIDTH bytes PITCH apart; 0 on overflow. */
static size_t span_2d(size_t pitch, size_t width, size_t rows)
{
	if (rows > 1 && pitch > (SIZE_MAX - width) / (rows - 1))
		return 0;
	return pitch * (rows - 1) + width;
}

/* The largest pitch a device accepts (cudaDevAttrMaxPitch). */
#define FC_MAX_PITCH ((size_t)INT32_MAX)

/* Validates a pitched copy and describes it in X; *SK gets the source's
 * memory kind. */
int fc_copy_describe(struct fc_xfer *x, void *dst, size_t dpitch, const void *src,
		     size_t spitch, size_t width, size_t height, int kind, int *skp)
{
	size_t sspan, dspan;
	int sk, dk, sdev, ddev;

	if (!dst || !src)
		return -EINVAL;
	if (height > 1 && (width > dpitch || width > spitch))
		return -EINVAL;
	if (height > 1 && (dpitch > FC_MAX_PITCH || spitch > FC_MAX_PITCH))
		return -ERANGE;
	if (height <= 1)
		dpitch = spitch = width;
	sspan = span_2d(spitch, width, height);
	dspan = span_2d(dpitch, width, height);
	if (!sspan || !dspan)
		return -EINVAL;
	sk = fc_mem_classify(src, sspan, NULL);
	dk = fc_mem_classify(dst, dspan, NULL);
	if (sk < 0 || dk < 0)
		return -EINVAL;
	/* Device memory must belong to the caller's context. */
	if ((sk == FC_DEVICE && fc_mem_ctx_check(src, fc_tls_get()->ctx)) ||
	    (dk == FC_DEVICE && fc_mem_ctx_check(dst, fc_tls_get()->ctx)))
		return -EINVAL;
	sdev = sk == FC_DEVICE || sk == FC_MANAGED;
	ddev = dk == FC_DEVICE || dk == FC_MANAGED;
	switch (kind) {
	case cudaMemcpyHostToHost:
		if (sk == FC_DEVICE || dk == FC_DEVICE)
			return -EINVAL;
		break;
	case cudaMemcpyHostToDevice:
		if (sk == FC_DEVICE || !ddev)
			return -EINVAL;
		break;
	case cudaMemcpyDeviceToHost:
		if (!sdev || dk == FC_DEVICE)
			return -EINVAL;
		break;
	case cudaMemcpyDeviceToDevice:
		if (!sdev || !ddev)
			return -EINVAL;
		break;
	case cudaMemcpyDefault:
		break;
	default:
		return -EINVAL;
	}
	*x = (struct fc_xfer){ .kind = OP_COPY, .dst = dst, .src = src, .width = width, .rows = height,
			       .dpitch = dpitch, .spitch = spitch, .n = width * height,
			       .dir = sdev ? (ddev ? DIR_D2D : DIR_D2H) : (ddev ? DIR_H2D : DIR_H2H) };
	*skp = sk;
	return dk;
}

/* Validates a pitched memset (WIDTH in elements) and describes it in X. */
int fc_memset_describe(struct fc_xfer *x, void *dst, size_t pitch, unsigned value,
		       unsigned esize, size_t width, size_t height)
{
	size_t wbytes, span;
	int dk;

	if (esize != 1 && esize != 2 && esize != 4)
		return -EINVAL;
	if (!dst || width > SIZE_MAX / esize)
		return -EINVAL;
	wbytes = width * esize;
	if (height <= 1)
		pitch = wbytes;
	if (wbytes > pitch)
		return -EINVAL;
	if (pitch > FC_MAX_PITCH && height > 1)
		return -ERANGE;
	span = span_2d(pitch, wbytes, height);
	if (!span)
		return -EINVAL;
	dk = fc_mem_classify(dst, span, NULL);
	if (dk != FC_DEVICE && dk != FC_MANAGED)
		return -EINVAL;
	if (dk == FC_DEVICE && fc_mem_ctx_check(dst, fc_tls_get()->ctx))
		return -EINVAL;
	*x = (struct fc_xfer){ .kind = OP_MEMSET, .dst = dst, .width = wbytes, .rows = height, .dpitch = pitch,
			       .spitch = pitch, .n = wbytes * height, .value = value, .esize = esize };
	return 0;
}

/* ---- performing them on the worker ---- */

/* Sleeps NS nanoseconds; nothing for NS <= 0. */
void fc_sleep_ns(double ns)
{
	struct timespec t;

	if (ns <= 0)
		return;
	t.tv_sec = (time_t)(ns / 1e9);
	t.tv_nsec = (long)(ns - (double)t.tv_sec * 1e9);
	nanosleep(&t, NULL);
}

/*
 * The cost model's links: two, PCIe and device-to-device. Host-to-device
 * and device-to-host copies share the one PCIe link (half duplex: a
 * simplification, a real PCIe link carries both directions at once, so a
 * program's readbacks slow its uploads here and not on a GPU);
 * device-to-device copies have their own. Each is busy until a time on the
 * monotonic clock. Neither makes a copy faster than this machine's memcpy. A copy occupies its link for n/rate
 * after the link is free; the worker sleeps only when the link has fallen
 * more than LINK_SLACK_NS behind, so that nanosleep's coarse granularity
 * costs no throughput: the average rate is exact, single small copies are
 * not delayed one by one. The time the link finishes a copy is kept for
 * the worker (fc_link_take_done), so that an event behind the copy
 * completes at that time, as on a device, even when the worker went on
 * without sleeping.
 */
#define LINK_SLACK_NS 200000.0

static pthread_mutex_t link_lock = PTHREAD_MUTEX_INITIALIZER;
static double link_busy_until[2];
static __thread double link_done_tls;

double fc_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

void fc_link_occupy(int link, double ns)
{
	double now = fc_now_ns(), until;

	pthread_mutex_lock(&link_lock);
	if (link_busy_until[link] < now)
		link_busy_until[link] = now;
	link_busy_until[link] += ns;
	until = link_busy_until[link];
	pthread_mutex_unlock(&link_lock);
	if (until > link_done_tls)
		link_done_tls = until;
	if (until - now > LINK_SLACK_NS)
		fc_sleep_ns(until - now - LINK_SLACK_NS / 2);
}

double fc_link_take_done(void)
{
	double done = link_done_tls;

	link_done_tls = 0;
	return done;
}

/* Performs a copy's rows, from STAGING (packed) when the source was
 * pageable and read at call time. */
void fc_exec_copy(const struct fc_xfer *x, const void *staging)
{
	const char *src;
	char *dst;
	size_t spitch, r;
	double gbps;

	gbps = x->dir == DIR_D2D ? fc.cfg.d2d_gbps
	       : x->dir == DIR_H2H ? 0 : fc.cfg.h2d_gbps;
	if (gbps > 0)
		fc_link_occupy(x->dir == DIR_D2D, (double)x->n / gbps);
	src = fc_dev_rw(staging ? staging : x->src);
	spitch = staging ? x->width : x->spitch;
	dst = fc_dev_rw(x->dst);
	for (r = 0; r < x->rows; r++)
		memcpy(dst + r * x->dpitch, src + r * spitch, x->width);
}

/* Fills each of X's rows with its element value. */
void fc_exec_memset(const struct fc_xfer *x)
{
	char *row = fc_dev_rw(x->dst);
	uint16_t v16 = (uint16_t)x->value;
	uint32_t v32 = x->value;
	size_t r, i;

	for (r = 0; r < x->rows; r++, row += x->dpitch) {
		if (x->esize == 1) {
			memset(row, (int)(x->value & 0xff), x->width);
			continue;
		}
		for (i = 0; i + x->esize <= x->width; i += x->esize)
			memcpy(row + i, x->esize == 2 ? (const void *)&v16 : (const void *)&v32, x->esize);
	}
}
