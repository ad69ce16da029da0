/* Internal side of the metrics registry (public side in kiln.h).
 * Thread-safe and cheap: a counter bump is one hash lookup of a string
 * literal (cached by pointer) plus an atomic add. */
#ifndef KILN_DEBUG_METRICS_H
#define KILN_DEBUG_METRICS_H

#include "base/clock.h"
#include <stdint.h>

#include "debug/text.h"

void kiln_counter_add(const char *name, int64_t delta);
/* Record one sample of a metric. Timed metrics are in nanoseconds and their
 * name ends in "Time". */
void kiln_metric_record(const char *name, double value);
/* Monotonic clock in nanoseconds. */
/* Called once at runtime start: sets up KILN_METRICS=1 report at exit. */
void kiln_metrics_install_exit_report(void);
/* Append the short report (kiln_metrics_report_short's text) to t. */
void kiln_metrics_format_short(kiln_text *t);

#endif
