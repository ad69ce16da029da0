/* The runtime's events: how observers (the debug analysis, the per-line
 * tables, graph dumps, autograd's reset) learn what the pipeline did,
 * without the runtime calling them by name.
 *
 * An observer registers a function once (kiln_events_observe, at kiln_init
 * in src/init/); the runtime calls every registered observer, in
 * registration order, with an event of one of the fixed kinds below. With
 * no observer an emit costs one load and a branch; events happen a few
 * times per graph cut, never per traced op.
 *
 * Threads: every event is emitted on the thread that calls into the
 * runtime (the tracing thread; for START and STOP the caller of kiln_init
 * and kiln_shutdown), never on the executor or pool threads. The
 * registry is a process-wide singleton that outlives runtime restarts;
 * registration takes a mutex and is meant for start-up. */
#ifndef KILN_RUNTIME_EVENTS_H
#define KILN_RUNTIME_EVENTS_H

#include <stdint.h>

#include "runtime/runtime.h"

typedef enum kiln_event_kind {
  KILN_EV_START = 0, /* the runtime started (rt is usable) */
  KILN_EV_COMPILE_BEGIN, /* a cache miss is about to compile: key, cause, compile_no (graph
                          * NULL: not built yet); an observer that wants the compile's plan
                          * (the graph after the passes, the kernels, their C) sets
                          * *want_plan = 1 */
  KILN_EV_COMPILE_PLAN,  /* what the compile produced, when an observer asked at COMPILE_BEGIN
                          * and the compile succeeded: graph, key, cause, compile_no, plan
                          * (valid during the call only; emitted before COMPILED) */
  KILN_EV_COMPILED,  /* a graph was compiled on a cache miss: graph (as traced, before
                      * the passes; NULL for a new size of a dynamic family planned from
                      * the trace: kiln_cache_entry_graph(entry) makes it), key, cause,
                      * entry (in the cache, numbered), ns */
  KILN_EV_CUT,       /* a cut finished: cause, entry, hit, ns = host time from the cut
                      * to the enqueue (explicit compiles: to the end of the compile),
                      * step_tensors */
  KILN_EV_READ,      /* a device-to-host read: loc, bytes, ns = wait + copy, wait_ns */
  KILN_EV_STEP,      /* a step marker finished (rt->step is the new step) */
  KILN_EV_FIRST_RUN, /* a graph with collectives (across processes) is about to run for the
                      * first time: graph, key, cause, entry. The executor is drained (no
                      * collective of an earlier graph is in flight), so an observer may run
                      * its own collectives in the same order on every rank: the debug layer
                      * checks that every rank traced the same graph. An observer that finds
                      * a reason not to run sets *verdict (kiln_err_set); the run is then
                      * refused with that error, and asks again on the next run */
  KILN_EV_DROPPED,   /* entry is about to leave the graph cache for good (past twice
                      * KILN_GRAPH_CACHE_SIZE entries, the least recently used one that
                      * holds no executable and no pin): observers forget the pointer */
  KILN_EV_STOP,      /* kiln_shutdown: the executor is drained and the frontend freed
                      * (frontend/session.h); the cache and the backend still exist:
                      * they are freed after the observers */
  KILN_EV_KIND_COUNT
} kiln_event_kind;

typedef struct kiln_event {
  kiln_event_kind kind;
  kiln_runtime *rt;
  const kiln_cut_cause *cause; /* COMPILED, CUT */
  kiln_cache_entry *entry;     /* COMPILED, CUT, DROPPED */
  const kiln_graph *graph;     /* COMPILE_BEGIN, COMPILE_PLAN, COMPILED */
  uint64_t key;                /* COMPILE_BEGIN, COMPILE_PLAN, COMPILED */
  int compile_no;              /* COMPILE_BEGIN, COMPILE_PLAN: the entry's compile_no to be */
  int *want_plan;              /* COMPILE_BEGIN */
  const kiln_compile_plan *plan; /* COMPILE_PLAN (backends/backend.h) */
  int hit;                     /* CUT: found in the cache */
  kiln_loc loc;                /* READ */
  int64_t bytes;               /* READ */
  double ns, wait_ns;          /* COMPILED, CUT, READ; READ */
  uint32_t step_tensors;       /* CUT: tensors created since the last step marker */
  kiln_err *verdict;           /* FIRST_RUN: code KILN_OK; an observer may set an error */
} kiln_event;

typedef void (*kiln_event_fn)(void *ctx, const kiln_event *ev);

/* Register an observer (the same fn and ctx twice: once). Returns 0, or -1
 * when the table (16 observers) is full. */
int kiln_events_observe(kiln_event_fn fn, void *ctx);

/* Emit an event to every observer. */
extern int kiln_events_n_; /* observers registered (read without a lock: set at start-up) */
void kiln_events_emit_(const kiln_event *ev);
static inline void kiln_event_emit(const kiln_event *ev) {
  if (__atomic_load_n(&kiln_events_n_, __ATOMIC_ACQUIRE)) kiln_events_emit_(ev);
}

#endif
