/* The runtime singleton: the one documented piece of global state.
 *
 * It owns the backend, the frontend (tensor table and trace), the graph
 * cache (graph hash -> compiled executable, every hit verified
 * structurally), and the executor. Created by kiln_init() or lazily on first
 * use; destroyed by kiln_shutdown() (both in src/init/, which register the
 * observers of runtime/events.h). Used from the tracing thread only. */
#ifndef KILN_RUNTIME_RUNTIME_H
#define KILN_RUNTIME_RUNTIME_H

#include "backends/backend.h"
#include "ir/graph.h"

typedef struct kiln_cache_entry {
  uint64_t key;
  kiln_graph *graph;      /* the traced graph (before passes), with source locations */
  kiln_executable *exe;   /* NULL when evicted (kiln_cache_loaded): rebuilt from graph on the next hit */
  uint64_t last_use;      /* rt->use_clock at the last compile or hit (least recently used goes first) */
  kiln_exec_info info;
  uint64_t hits;       /* cache hits (lookups that found it) */
  uint64_t execs;      /* executions enqueued */
  int compile_no;      /* 1 for the first graph compiled by this runtime, ... */
  uint64_t compile_step;
  char tag[32];        /* kiln_graph_tag at compile time ("" none) */
  struct kiln_cache_entry *next;
} kiln_cache_entry;

/* Why a graph was cut; each has its counter (StepMarkerCut, ValueReadCut,
 * DataDependentCut, ExplicitCompileCut) and its kiln_site_kind. */
typedef enum kiln_cut_reason {
  KILN_CUT_STEP_MARKER = 0,
  KILN_CUT_VALUE_READ,       /* a read of a pending tensor */
  KILN_CUT_DATA_DEPENDENT,   /* an op whose output shape depends on values */
  KILN_CUT_EXPLICIT_COMPILE, /* kiln_compile: compile and cache, do not execute */
  KILN_CUT_REASON_COUNT
} kiln_cut_reason;

/* A cut's cause: the reason, the user's line and the public function that
 * made it ("kiln_item_f64", NULL when the reason says it all). */
typedef struct kiln_cut_cause {
  kiln_cut_reason why;
  kiln_loc loc;
  const char *api;
} kiln_cut_cause;

/* "step marker at train.c:80", "value read at model.c:57 (kiln_item_f64)"
 * (runtime/events.c). */
const char *kiln_cut_cause_str(const kiln_cut_cause *c, char *buf, size_t cap);

/* The runtime singleton; its fields are private to runtime/
 * (runtime/runtime_internal.h): other layers use the functions below and
 * the events of runtime/events.h. */
typedef struct kiln_runtime kiln_runtime;

/* Start the singleton (kiln_init's work once the observers are registered,
 * src/init/): emits KILN_EV_START. Errors as kiln_init. */
kiln_status kiln_runtime_start(const kiln_options *opts);
/* Stop and free the singleton if started (kiln_shutdown's work): drains the
 * executor, emits KILN_EV_STOP, then frees everything. */
void kiln_runtime_stop(void);
/* The singleton, started with defaults if needed; NULL if it cannot start. */
kiln_runtime *kiln_runtime_get(void);
/* The singleton if started, else NULL (never starts it). */
kiln_runtime *kiln_runtime_peek(void);
/* Steps finished (step markers) since the runtime started. */
uint64_t kiln_runtime_steps(const kiln_runtime *rt);
/* Tensors created since the last step marker (released at the next one). */
uint32_t kiln_runtime_step_tensors(const kiln_runtime *rt);

/* Test hook (tests only): force every graph-cache key to `key` (0: off) so
 * that distinct graphs collide; a hit must still be verified. */
void kiln_runtime_test_force_key(uint64_t key);

#endif
