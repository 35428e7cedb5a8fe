/*
 * clock: reading the monotonic clock in nanoseconds, header only.
 *
 * Every measured interval of the shim (time spent fingerprinting, a wait
 * for a worker, a spin's deadline) is a difference of two readings of
 * CLOCK_MONOTONIC: it never goes back, and a changed wall clock does not
 * bend it. Safe from any thread; makes no CUDA call and takes no lock.
 */
#ifndef VRAMPOOL_CLOCK_H
#define VRAMPOOL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Returns CLOCK_MONOTONIC in nanoseconds. Inline: it runs on hot paths. */
static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
