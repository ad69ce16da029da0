/* The one median rule of kiln's reports: kiln_explain, the metrics report
 * (p50, "50%="), the profiler's summary and `kiln profile summary` all take
 * the median this way, so that one set of samples has one median everywhere.
 * (bench/ computes its own, the same way, with bench_util.h's kb_median: the
 * benchmarks link only the public API.) */
#ifndef KILN_BASE_STATS_H
#define KILN_BASE_STATS_H

#include <stddef.h>

/* The median of v[0..n), sorted ascending: the middle value for an odd n,
 * the mean of the middle two for an even n; 0 when n is 0. */
static inline double kiln_median_sorted(const double *v, size_t n) {
  if (!n) return 0;
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
