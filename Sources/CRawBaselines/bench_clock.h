// Clocks the raw baselines read (private to this target).
#ifndef BENCH_CLOCK_H
#define BENCH_CLOCK_H

#include <time.h>

// Monotonic seconds.
static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

// CPU time of the whole process so far (every thread, user and system), in seconds.
static inline double process_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#endif
