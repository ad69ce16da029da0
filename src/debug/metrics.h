/* The metrics reports (public side in kiln.h and kiln/debug.h). The
 * registry they print, and kiln_counter_add / kiln_metric_record, are the
 * primitive in base/counters.h. */
#ifndef KILN_DEBUG_METRICS_H
#define KILN_DEBUG_METRICS_H

#include "base/counters.h"
#include "base/text.h"

/* Called once at start: sets up the KILN_METRICS=1 report at exit. */
void kiln_metrics_install_exit_report(void);
/* Append the short report (kiln_metrics_report_short's text) to t. */
void kiln_metrics_format_short(kiln_text *t);

#endif
