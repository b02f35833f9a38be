/* posy_clock: monotonic time for latencies and metrics. */
#ifndef POSY_CLOCK_H
#define POSY_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t posy_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double posy_now_s(void) { return (double)posy_now_ns() * 1e-9; }

#endif
