/* posy_clock: monotonic time for latencies and metrics, and the pause of a
 * busy-polling loop. */
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

/* ~1 us of waiting without a system call, between two looks of a
 * busy-polling thread (--busy-poll-us): PAUSE spares the sibling
 * hyperthread and the memory bus. */
static inline void posy_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    for (int i = 0; i < 32; i++) __builtin_ia32_pause();
#endif
}

#endif
