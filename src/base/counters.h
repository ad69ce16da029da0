/* Counters and sampled metrics: the registry every layer counts into (the
 * public queries are in kiln.h and kiln/debug.h; the reports that print it
 * are debug/metrics.c). Thread-safe and cheap: a counter bump is one hash
 * lookup of a string literal (cached by pointer) plus an atomic add. */
#ifndef KILN_BASE_COUNTERS_H
#define KILN_BASE_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"

enum { KILN_METRICS_WINDOW = 1024 /* retained recent samples per metric */ };

void kiln_counter_add(const char *name, int64_t delta);
/* Record one sample of a metric. Timed metrics are in nanoseconds and their
 * name ends in "Time". */
void kiln_metric_record(const char *name, double value);

/* ── for the reports ── */

/* A consistent copy of one metric, taken under its mutex. */
typedef struct kiln_metric_snapshot {
  int64_t count;
  double sum, min, max;
  size_t n;                           /* retained samples */
  double window[KILN_METRICS_WINDOW]; /* sorted ascending */
  double window_sum;
  uint64_t t_first, t_last;
} kiln_metric_snapshot;

/* Copy metric `name` into *s; -1 when it was never recorded. */
int kiln_metric_snapshot_take(const char *name, kiln_metric_snapshot *s);
/* Nearest-rank percentile of the sorted window; p = 50: the median (the
 * mean of the middle two for an even count, base/stats.h). */
double kiln_metric_percentile(const kiln_metric_snapshot *s, double p);
/* Every name of the counters (metrics = 0) or metrics (1), sorted, with or
 * without a value: *names is malloc'd (the caller frees the array, not the
 * names, which live for the process). Returns the count (0 on failure). */
int kiln_counters_sorted(int metrics, const char ***names);
/* Reset every counter and metric. */
void kiln_counters_reset_all(void);

#endif
