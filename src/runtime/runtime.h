/* The runtime singleton: the one documented piece of global state.
 *
 * It owns the backend, the frontend (tensor table and trace), the graph
 * cache (graph hash -> compiled executable, every hit verified
 * structurally), and the executor. Created by kiln_init() or lazily on first
 * use; destroyed by kiln_shutdown() (both in src/init/, which register the
 * observers of runtime/events.h). Used from the tracing thread only. */
#ifndef KILN_RUNTIME_RUNTIME_H
#define KILN_RUNTIME_RUNTIME_H

#include <limits.h>

#include "backends/backend.h"
#include "frontend/linearize.h"
#include "frontend/trace.h"
#include "runtime/bufcache.h"
#include "runtime/executor.h"

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

typedef struct kiln_runtime {
  char backend_name[16];
  int num_threads;
  char cache_dir[PATH_MAX]; /* "" when the disk cache is off */
  kiln_backend *backend;
  kiln_bufcache *bufs; /* device buffers for reuse */
  kiln_frontend fe;
  kiln_lin lin;
  kiln_executor *exec;
  kiln_cache_entry **buckets;
  uint32_t n_buckets, n_entries;
  /* Executables held (entries with exe != NULL) and their cap
   * (KILN_GRAPH_CACHE_SIZE, default 1024; 0: no cap). Each holds its plan
   * and, on cpu, its kernels' shared objects (mappings the kernel limits):
   * a program that compiles without end must not exhaust them. */
  uint32_t n_loaded, cache_cap;
  int skip_passes; /* KILN_PASSES=0 at kiln_init: compile graphs as traced */
  uint64_t use_clock;
  uint64_t step;
  int execs_this_step;
  /* The thread tracing this step (the address of a thread-local, 0: none)
   * and where it first traced; atomics: another thread's call reads them to
   * refuse itself. Released at the step marker, so tracing may move to
   * another thread between steps. */
  uintptr_t trace_owner;
  const char *trace_owner_file;
  int trace_owner_line;
  int n_compiles;              /* graphs compiled (numbering of compile records) */
  int full_graph_depth;        /* > 0 inside kiln_full_graph_begin/end */
  kiln_loc full_graph_loc;     /* where the outermost region was opened */
  char tag[32];                /* kiln_graph_tag ("" none) */
  /* test hook: force every graph key (0 = off) */
  uint64_t test_force_key;
} kiln_runtime;

/* Start the singleton (kiln_init's work once the observers are registered,
 * src/init/): emits KILN_EV_START. Errors as kiln_init. */
kiln_status kiln_runtime_start(const kiln_options *opts);
/* Stop and free the singleton if started (kiln_shutdown's work): drains the
 * executor, emits KILN_EV_STOP, then frees everything. */
void kiln_runtime_stop(void);
/* The singleton, started with defaults if needed; NULL if it cannot start. */
kiln_runtime *kiln_runtime_get(void);
/* kiln_runtime_get for a tracing call (an op, a read, a step marker): NULL,
 * with an error naming both calls, when another thread is tracing this step. */
kiln_runtime *kiln_runtime_tracer(kiln_loc loc);
/* The step marker ends the calling thread's hold on tracing. */
void kiln_runtime_trace_release(kiln_runtime *rt);
/* The singleton if started, else NULL (never starts it). */
kiln_runtime *kiln_runtime_peek(void);
/* Lookup / insert in the graph cache. */
kiln_cache_entry *kiln_cache_find(kiln_runtime *rt, uint64_t key, int n_out, kiln_node *const *outs,
                                  const int32_t *alias);
kiln_status kiln_cache_insert(kiln_runtime *rt, kiln_cache_entry *e);
/* e was compiled or found: mark it used now, and when more than the cap
 * hold an executable, free the least recently used other one (after the
 * executor has finished every job, since one may still run it). */
void kiln_cache_loaded(kiln_runtime *rt, kiln_cache_entry *e, int newly_loaded);
/* Cut the graph: compute outputs (tensor slots) and enqueue, or for
 * KILN_CUT_EXPLICIT_COMPILE only find or compile the graph (the slots stay
 * pending). Inside a full-graph region any reason but the step marker is
 * refused with KILN_ERR_GRAPH_CUT (slots untouched). */
kiln_status kiln_runtime_cut(kiln_runtime *rt, uint32_t n, kiln_tslot **outs, kiln_cut_cause cause);
/* Allocate a device buffer as a kiln_buf (NULL on OOM). */
kiln_buf *kiln_runtime_buffer(kiln_runtime *rt, size_t bytes);

/* Test hook (tests only): force every graph-cache key to `key` (0: off) so
 * that distinct graphs collide; a hit must still be verified. */
void kiln_runtime_test_force_key(uint64_t key);

#endif
