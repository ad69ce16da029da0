/* kiln's performance-debugging API: where the time goes, and the remedies.
 * Reference: docs/metrics.md; walkthrough: docs/debugging.md.
 *
 * Environment (read once, when the runtime starts):
 *   KILN_METRICS=1          print the metrics report at exit (stderr)
 *   KILN_METRICS_FILE=path  write it to path at exit (%p: the process id, %r: the rank)
 *   KILN_DEBUG=1|2          1: a record per compile, too-frequent warnings,
 *                           a summary at exit; 2: also a record per execution
 *   KILN_DEBUG_FILE=path    append the KILN_DEBUG output there (default stderr)
 *   KILN_DEBUG_WARMUP=N     steps before the warnings start (default 5)
 *
 * Thread-safety: the metrics and report functions are thread-safe. The
 * remedies (kiln_compile, kiln_discard_step, full-graph regions, graph tags)
 * are tracing calls: the tracing thread only, like the rest of kiln.h.
 */
#ifndef KILN_DEBUG_H
#define KILN_DEBUG_H

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ───────────── metrics: more views of the registry ───────────── */

/* The few figures that matter, one per line ("compiles: 3 (cached 97)", ...;
 * see docs/metrics.md). Owned by kiln, valid until the next call. */
const char *kiln_metrics_report_short(void);
/* Every counter, metric and source-line record as one JSON object:
 * {"counters":{name:value,...},"metrics":{name:{"count":..,"sum":..,"min":..,
 * "max":..,"p50":..,"p90":..,"p99":..},...},"sites":[{...},...]}.
 * Times in nanoseconds. Owned by kiln, valid until the next call. */
const char *kiln_metrics_report_json(void);
/* Names of the counters / metrics that have a value, sorted. Writes at most
 * cap pointers (owned by kiln, valid for the life of the process) and
 * returns how many there are in all (may exceed cap). names may be NULL
 * when cap is 0. */
int kiln_counter_names(const char **names, int cap);
int kiln_metric_names(const char **names, int cap);
/* Reset one counter / metric (unknown names: no-op). */
void kiln_counter_clear(const char *name);
void kiln_metric_clear(const char *name);

/* ───────────── source lines: graph cuts and device-to-host reads ───────────── */

typedef enum kiln_site_kind {
  KILN_SITE_READ = 0,             /* a device-to-host read (kiln_to_host, kiln_item_*) */
  KILN_SITE_CUT_STEP_MARKER,      /* kiln_mark_step */
  KILN_SITE_CUT_VALUE_READ,       /* a read that had to execute pending work */
  KILN_SITE_CUT_DATA_DEPENDENT,   /* an op whose output shape depends on values */
  KILN_SITE_CUT_EXPLICIT_COMPILE, /* kiln_compile */
  KILN_SITE_KIND_COUNT
} kiln_site_kind;

/* Totals of one (source line, kind) since the start or kiln_metrics_clear(). */
typedef struct kiln_site_stats {
  const char *file; /* as the caller's __FILE__ (owned by the program) */
  int line;
  kiln_site_kind kind;
  int64_t count;    /* events */
  int64_t bytes;    /* reads: bytes copied to the host */
  double time_ns;   /* reads: wait + copy; cuts: host time of the cut (compile included) */
  double wait_ns;   /* reads: time spent waiting for the device */
  int64_t compiles; /* cuts: graphs compiled at this line (cache misses) */
  double compile_ns;
} kiln_site_stats;

/* Name of a kind ("read", "step marker", "value read", ...). Never NULL. */
const char *kiln_site_kind_name(kiln_site_kind k);
/* Copy up to cap records into out, most frequent first; returns how many
 * records there are in all (may exceed cap). out may be NULL when cap is 0.
 * Thread-safe. */
int kiln_site_list(kiln_site_stats *out, int cap);
/* The totals at file:line for one kind (file compared by content; the
 * directory part is ignored when one side has none). Returns 0 and fills
 * out when found, -1 (out zeroed) when not. */
int kiln_site_find(const char *file, int line, kiln_site_kind kind, kiln_site_stats *out);

/* ───────────── explain ───────────── */

/* The analogue of torch._dynamo.explain: steps, graphs compiled and their
 * causes, graph cuts by source line, nodes per graph (with each graph's
 * tag), executions per step, the fixed host cost of one execution, device-
 * to-host reads by line, and bucket advice for inputs whose shape varies.
 * Works at any KILN_DEBUG level (graph details need KILN_DEBUG >= 1 only for
 * the "what changed" history). Owned by kiln, valid until the next call;
 * "" before the runtime starts. */
const char *kiln_explain(void);

/* ───────────── remedies ───────────── */

/* Compile, without executing, the graph that computes these tensors and
 * keep it in the graph cache; the tensors stay pending and nothing is
 * computed. n == 0 (tensors NULL) compiles the graph kiln_mark_step() would
 * run now (every kept tensor with pending work), the usual warm-up. Counts
 * as an explicit-compile cut (ExplicitCompileCut) attributed to the caller's
 * line. Returns the sticky status; stale or poisoned tensors are errors. */
#define kiln_compile(n, tensors) kiln_compile_at((n), (tensors), KILN_HERE)
kiln_status kiln_compile_at(int n, const kiln_tensor *tensors, kiln_loc loc);

/* Throw the step's pending work away instead of running it: every kept
 * tensor that kiln_assign gave a pending value this step gets back the value
 * it had (parameters, optimizer state), kept tensors made this step that
 * were never computed are released, and the step's other tensors are
 * released as kiln_mark_step() would. A kept tensor that was computed during
 * the step (by a value read, or assigned an already-computed value) keeps
 * that value. With kiln_compile it makes a warm-up loop over bucket shapes
 * that compiles every graph and leaves the model untouched. Does not count
 * as a step. Returns the sticky status. */
#define kiln_discard_step() kiln_discard_step_at(KILN_HERE)
kiln_status kiln_discard_step_at(kiln_loc loc);

/* A full-graph region (nestable): between begin and end, any graph cut
 * other than a step marker (a value read that must execute pending work, a
 * data-dependent op, an explicit compile) is an error: the sticky status
 * becomes KILN_ERR_GRAPH_CUT with a message naming the cut's line and the
 * line that opened the outermost region, the read returns that status and
 * nothing is executed for it. Reads of already computed tensors are fine.
 * An end without a begin is an error (KILN_ERR_INVALID_ARGUMENT). */
#define kiln_full_graph_begin() kiln_full_graph_begin_at(KILN_HERE)
#define kiln_full_graph_end() kiln_full_graph_end_at(KILN_HERE)
void kiln_full_graph_begin_at(kiln_loc loc);
void kiln_full_graph_end_at(kiln_loc loc);

/* Tag the graphs cut from now on (e.g. "train", "eval"); NULL or "" clears
 * it. The tag is shown in KILN_DEBUG records and per graph in kiln_explain,
 * so training and evaluation graphs are told apart. The string is copied
 * (at most 31 characters kept). */
#define kiln_graph_tag(tag) kiln_graph_tag_at((tag), KILN_HERE)
void kiln_graph_tag_at(const char *tag, kiln_loc loc);

#ifdef __cplusplus
}
#endif

#endif
