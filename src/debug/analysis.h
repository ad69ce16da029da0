/* The KILN_DEBUG analysis: compile and execution records, too-frequent
 * warnings, the per-call-site compile history behind "what changed", the
 * fixed cost of an execution, and kiln_explain's report.
 *
 * One analysis belongs to the runtime singleton (created by kiln_init,
 * destroyed by kiln_shutdown) and is used from the tracing thread, except
 * kiln_analysis_explain and the exit summary, which take its mutex like
 * every other entry point. The history keeps pointers to cache entries:
 * the graph cache never frees an entry while the runtime lives, and the
 * analysis is destroyed before the cache. */
#ifndef KILN_DEBUG_ANALYSIS_H
#define KILN_DEBUG_ANALYSIS_H

#include "runtime/runtime.h"

typedef struct kiln_analysis kiln_analysis;

/* Read KILN_DEBUG, KILN_DEBUG_FILE, KILN_DEBUG_WARMUP once. NULL on out of
 * memory (the runtime then runs without the analysis). */
kiln_analysis *kiln_analysis_create(void);
/* Print the exit summary (KILN_DEBUG >= 1, once) and free. NULL: no-op. */
void kiln_analysis_destroy(kiln_analysis *a, kiln_runtime *rt);
/* The KILN_DEBUG level (0 when a is NULL). */
int kiln_analysis_level(const kiln_analysis *a);

/* A graph was compiled for cause (e is in the cache, numbered and tagged):
 * record it in the site history (every compile number of the site). At
 * KILN_DEBUG 2 print its record and what changed since the closest earlier
 * graph of the same site; at KILN_DEBUG 1 each cause once: the site's
 * records until its pattern is named (or 4 were printed), then one line per
 * pattern not printed before and one note that the rest are counted (the
 * exit summary has the counts). */
/* The graph cache drops e for good (KILN_EV_DROPPED): keep what the graph
 * table shows of it, forget the pointer. */
void kiln_analysis_dropped(kiln_analysis *a, const kiln_cache_entry *e);
void kiln_analysis_compiled(kiln_analysis *a, kiln_runtime *rt, const kiln_cut_cause *cause, kiln_cache_entry *e);
/* A cut finished: host_ns from the cut's start to the enqueue (or to the
 * end of the compile for explicit compiles); hit = found in the cache;
 * step_tensors = tensors created since the last step marker. At
 * KILN_DEBUG 2 prints an execution record. */
void kiln_analysis_cut_done(kiln_analysis *a, kiln_runtime *rt, const kiln_cut_cause *cause,
                            const kiln_cache_entry *e, int hit, double host_ns, uint32_t step_tensors);
/* A device-to-host read happened (counted for the transfer warning). */
void kiln_analysis_read(kiln_analysis *a);
/* A step marker finished: check the too-frequent warnings. */
void kiln_analysis_step(kiln_analysis *a, kiln_runtime *rt);
/* kiln_explain's text (owned by a, valid until the next call). */
const char *kiln_analysis_explain(kiln_analysis *a, kiln_runtime *rt);
/* Print the summary now if KILN_DEBUG >= 1 and it was not printed yet (at
 * process exit while the runtime lives): kiln_explain's text, its graph
 * table cut at 10 rows at KILN_DEBUG 1. */
void kiln_analysis_exit_summary(kiln_analysis *a, kiln_runtime *rt);

#endif
