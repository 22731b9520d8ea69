/*
 * benchutil.h - what the C benchmarks share: the clock and the key
 * generator's mixer. Header-only (static inline); included by
 * bench_delete.c, bench_filters.c, bench_grow.c and bench_window.c.
 */
#ifndef BK_BENCHUTIL_H
#define BK_BENCHUTIL_H

#include <stdint.h>
#include <time.h>

/* Monotonic time in nanoseconds. */
static inline double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* SplitMix64: the next value of the sequence whose state is *s. */
static inline uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

#endif
