/* The one monotonic clock: nanoseconds of CLOCK_MONOTONIC. Metrics, the
 * profiler's events, compile and pass timings, the thread pool's spin limit
 * and the profiler server's waits all read it, so their figures compare. */
#ifndef KILN_BASE_CLOCK_H
#define KILN_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t kiln_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
