/* The runtime singleton: the one documented piece of global state below
 * the frontend.
 *
 * It owns the backend, the device buffers, the graph cache (graph hash ->
 * compiled executable, every hit verified structurally by the caller that
 * describes the graph), and the executor. The frontend (tensor table and
 * trace) is a singleton of its own above it (frontend/session.h), which
 * hands the runtime graphs to run (kiln_runtime_run). Created by kiln_init()
 * or lazily on first use; destroyed by kiln_shutdown() (both in src/init/,
 * which register the observers of runtime/events.h). Used from the tracing
 * thread only. */
#ifndef KILN_RUNTIME_RUNTIME_H
#define KILN_RUNTIME_RUNTIME_H

#include "backends/backend.h"
#include "base/buf.h"
#include "ir/graph.h"

typedef struct kiln_cache_entry {
  uint64_t key;
  /* the traced graph (before passes), with source locations; NULL for a
   * planned size of a dynamic family until the size recurs (fam): read it
   * through kiln_cache_entry_graph */
  kiln_graph *graph;
  kiln_executable *exe;   /* NULL when evicted (kiln_cache_loaded): rebuilt from graph on the next hit */
  uint64_t last_use;      /* rt->use_clock at the last compile or hit (least recently used goes first) */
  kiln_exec_info info;
  uint64_t hits;       /* cache hits (lookups that found it) */
  uint64_t execs;      /* executions enqueued */
  int compile_no;      /* 1 for the first graph compiled by this runtime, ... */
  uint64_t compile_step;
  char tag[32];        /* kiln_graph_tag at compile time ("" none) */
  int agreed;          /* 0: not yet run; 1: the ranks agreed on it (KILN_EV_FIRST_RUN), or it has no
                        * collective and needs no agreement */
  int collective;      /* it has collectives (set at its first run): never dropped past the entry cap, since
                        * a graph made again would agree again on the ranks that dropped it only */
  int n_dyn;           /* the graph input dimensions that varied when it was compiled (docs/dynamic-shapes.md) */
  kiln_sym_origin dyn[KILN_SYM_MAX];
  /* A planned size of a dynamic family (docs/dynamic-shapes.md, "What a new
   * size costs") keeps no traced graph of its own: fam_graph and fam_shape
   * are the family's traced graph and symbolic sizes (the pass memo's, kept
   * as long as the runtime), fam_vals this size's symbol values. A hit is
   * verified by binding (kiln_run_request.binds); a size hit
   * KILN_FAMILY_KEEP_HITS times keeps its own traced graph (graph), which
   * the plain check then compares. view: the family's graph at fam_vals,
   * made on demand for the debug layer (kiln_cache_entry_graph). */
  const kiln_graph *fam_graph;
  const kiln_symshape *fam_shape;
  int64_t fam_vals[KILN_SYM_MAX];
  uint32_t fam_hits;
  kiln_graph *view;
  /* > 0: an observer still reads this entry (the debug analysis pins the
   * recent graphs of each call site): never dropped from the cache */
  int pins;
  struct kiln_cache_entry *next;
} kiln_cache_entry;

#define KILN_FAMILY_KEEP_HITS 4

/* The traced graph of e: its own, or for a planned size that keeps none
 * the family's traced graph at its sizes (made once, kept with e; its
 * constants are the family's, within 2 ulps of the size's own, and its
 * source lines the family's first size's). NULL only when out of memory.
 * The tracing thread. */
const kiln_graph *kiln_cache_entry_graph(kiln_cache_entry *e);

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

/* ── the step driver's half of a cut (runtime/step.c) ──
 *
 * The frontend cuts the trace (frontend/cut.c): it numbers the graph its
 * outputs reach, picks donations, computes the key, and describes the
 * graph to the runtime, which never sees trace nodes: */

/* A graph input: a buffer (a reference the caller keeps), or with buf NULL
 * an 8-byte scalar value (its bits; the runtime makes the buffer). */
typedef struct kiln_run_input {
  kiln_buf *buf;
  uint64_t bits;
  uint8_t dyn; /* the dimensions marked dynamic (kiln_dynamic): bit d */
} kiln_run_input;

typedef struct kiln_run_request {
  kiln_cut_cause cause;
  uint64_t t_cut;          /* kiln_now_ns() from kiln_runtime_cut_open: the CUT event's host time */
  uint64_t t_lookup;       /* kiln_prof_span_begin() before the key: the "graph hash + cache lookup" span */
  uint64_t key;            /* hash of the graph's structure (a hit is still verified) */
  int n_out;
  const int32_t *alias;    /* per output: the input it is written over (donated), or -1 */
  const size_t *out_bytes; /* per output: its size */
  uint32_t n_inputs;
  const kiln_run_input *inputs;
  uint32_t step_tensors;   /* tensors created since the last step marker (the CUT event) */
  /* The caller's graph, which only it can see: matches says whether it is
   * exactly g (a cached graph whose key matched; 0 makes it a collision),
   * build makes it as a kiln_graph on a miss (NULL: out of memory). One
   * indirect call per cut that finds its graph. */
  void *ctx;
  int (*matches)(void *ctx, const kiln_graph *g);
  kiln_graph *(*build)(void *ctx);
  /* whether the caller's graph is an instance of the family (g, s) at the
   * symbol values v (kiln_symshape_bind's check): a hit on a planned size,
   * which keeps no traced graph of its own (kiln_cache_entry) */
  int (*binds)(void *ctx, const kiln_graph *g, const kiln_symshape *s, const int64_t *v);
  /* graph input k (k < n_inputs) as kiln_graph's node would hold it: op,
   * dtype, rank and shape into *out, its other fields left as they were
   * (kiln_input_view's readers read only these; a cut checks every input,
   * so the call stays small); a new size of a family is planned from these
   * and binds, without building the graph */
  void (*input_node)(void *ctx, uint32_t k, kiln_gnode *out);
  kiln_buf **out;          /* filled with n_out buffers, one reference each for the caller */
} kiln_run_request;

/* A cut begins: inside a full-graph region any reason but the step marker
 * is refused with KILN_ERR_GRAPH_CUT (the error recorded, nothing counted;
 * the caller leaves its tensors untouched); else the cut is counted by its
 * reason and *t_cut set. */
kiln_status kiln_runtime_cut_open(kiln_runtime *rt, const kiln_cut_cause *cause, uint64_t *t_cut);
/* Find the graph in the cache (rq->matches verifies a key match) or build
 * and compile it (rq->build), then, unless the cause is an explicit
 * compile, allocate the outputs (an aliased output is its input's buffer),
 * fill rq->out and enqueue the execution; emits the compile events and
 * KILN_EV_CUT. On an error (recorded) rq->out is untouched. */
kiln_status kiln_runtime_run(kiln_runtime *rt, const kiln_run_request *rq);
/* A device-to-host read of bytes of b into dst once the execution that
 * writes b is done: counters, metrics, KILN_EV_READ. */
void kiln_runtime_read(kiln_runtime *rt, const kiln_buf *b, void *dst, size_t bytes, kiln_loc loc);
/* A step marker ends the step (after the frontend released the step's
 * tensors): ExecutionsPerStep, MarkStep, the step count, KILN_EV_STEP.
 * Returns the new step count. */
uint64_t kiln_runtime_step_done(kiln_runtime *rt);
/* kiln_discard_step ends the step without running it (after the frontend
 * dropped its pending work): DiscardedStep. */
void kiln_runtime_step_discarded(kiln_runtime *rt);
/* Allocate a device buffer and copy bytes of host into it (NULL, with the
 * error recorded, on out-of-memory): the frontend's upload hook. */
kiln_buf *kiln_runtime_upload(kiln_runtime *rt, const void *host, size_t bytes, kiln_loc loc);

/* Test hook (tests only): force every graph-cache key to `key` (0: off) so
 * that distinct graphs collide; a hit must still be verified. */
void kiln_runtime_test_force_key(uint64_t key);

#endif
