/* clock.h - the one clock urnic's timers, deadlines and stamps are read from. */
#ifndef URNIC_CLOCK_H
#define URNIC_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns (a vDSO call, about 25 ns here). */
static inline uint64_t urnic_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
