/* The debug observer: what debug/ learns from the runtime's events
 * (runtime/events.h) — the KILN_DEBUG analysis (created when the runtime
 * starts, destroyed when it stops), the per-source-line tables of cuts and
 * reads (sites.c), and the graph dumps of KILN_SAVE_GRAPHS (dump.c). */
#ifndef KILN_DEBUG_OBSERVE_H
#define KILN_DEBUG_OBSERVE_H

/* Register the observer and the exit reports (KILN_METRICS, KILN_DEBUG's
 * summary for programs that never call kiln_shutdown). Idempotent; called
 * by kiln_init before the runtime starts. */
void kiln_debug_attach(void);

#endif
