/* The runtime singleton's fields and the step driver's internal calls:
 * private to runtime/ (other layers see runtime/runtime.h and
 * runtime/events.h; tests and benchmarks may include this). */
#ifndef KILN_RUNTIME_RUNTIME_INTERNAL_H
#define KILN_RUNTIME_RUNTIME_INTERNAL_H

#include <limits.h>

#include "runtime/bufcache.h"
#include "runtime/executor.h"
#include "runtime/runtime.h"

typedef struct kiln_dyn_sites kiln_dyn_sites;
typedef struct kiln_pass_memos kiln_pass_memos;

struct kiln_runtime {
  char backend_name[16];
  int num_threads;
  char cache_dir[PATH_MAX]; /* "" when the disk cache is off */
  kiln_backend *backend;
  kiln_bufcache *bufs; /* device buffers for reuse */
  kiln_executor *exec;
  kiln_cache_entry **buckets;
  uint32_t n_buckets, n_entries;
  /* Executables held (entries with exe != NULL) and their cap
   * (KILN_GRAPH_CACHE_SIZE, default 1024; 0: no cap). Each holds its plan
   * and, on cpu, its kernels' shared objects (mappings the kernel limits):
   * a program that compiles without end must not exhaust them. */
  uint32_t n_loaded, cache_cap;
  /* Entries kept at most (2 * cache_cap; 0: no cap): past it the least
   * recently used entry without an executable (and not pinned) is dropped
   * whole, traced graph and all, so that a program that compiles without
   * end does not grow by a traced graph per compile (KILN_EV_DROPPED,
   * counter GraphCacheDropped). */
  uint32_t entry_cap;
  int skip_passes; /* KILN_PASSES=0 at kiln_init: compile graphs as traced */
  uint64_t use_clock;
  uint64_t step;
  int execs_this_step;
  int n_compiles;              /* graphs compiled (numbering of compile records) */
  int full_graph_depth;        /* > 0 inside kiln_full_graph_begin/end */
  kiln_loc full_graph_loc;     /* where the outermost region was opened */
  char tag[32];                /* kiln_graph_tag ("" none) */
  /* test hook: force every graph key (0 = off) */
  uint64_t test_force_key;
  int dynamic_auto;    /* KILN_DYNAMIC=auto (the default): sizes that vary at a call site become symbols */
  kiln_dyn_sites *dyn; /* per call site: the last compiled graph's inputs, the dimensions that vary (dynamic.c) */
  kiln_pass_memos *pmemo; /* families' graphs through the passes (dynamic_passes.c) */
};

/* The graph input dimensions of g (about to be compiled for rq) that vary:
 * rq's explicit marks, and under KILN_DYNAMIC=auto those that changed at
 * this call site since its last compile (dynamic.c). Returns how many
 * (<= KILN_SYM_MAX) in out. */
/* The graph inputs of a compile, read from its graph or from the request
 * (the trace, before any graph is built): at(ctx, k, tmp) is input k's
 * node (in tmp or the graph's own). Read its op, dtype, rank and shape
 * only: from the request, the rest of tmp is not written. */
typedef struct kiln_input_view {
  int32_t n;
  const kiln_gnode *(*at)(const void *ctx, int32_t k, kiln_gnode *tmp);
  const void *ctx;
} kiln_input_view;
kiln_input_view kiln_graph_inputs(const kiln_graph *g);
kiln_input_view kiln_request_inputs(const kiln_run_request *rq);
int kiln_dynamic_origins(kiln_runtime *rt, const kiln_run_request *rq, const kiln_input_view *iv,
                         kiln_sym_origin *out);
void kiln_dyn_sites_free(kiln_dyn_sites *d);

/* g (traced; its input dimensions dyn[0..n_dyn) vary, n_dyn may be 0)
 * through the passes: for a new size of a family whose passes commute with
 * its sizes, the family's result at g's sizes, without running them
 * (dynamic_passes.c); otherwise kiln_passes_run, remembering g's family
 * when n_dyn > 0. fam (may be NULL): when the family's result served, the
 * family's traced graph, symbolic sizes (kept until the runtime stops) and
 * g's symbol values in it; else fam->g is NULL. */
typedef struct kiln_dyn_family {
  const kiln_graph *g;
  const kiln_symshape *s;
  int64_t v[KILN_SYM_MAX];
  /* the backend's family the memo's result made (or NULL), and the
   * result's symbol values: the backend's hint (kiln_family_hint) */
  const void *backend_family;
  int64_t vo[KILN_SYM_MAX];
  /* a memo made by this call (NULL otherwise): kiln_pass_memo_made_family
   * records the backend's family its result makes */
  struct pass_memo *made;
  /* the result is the memo's own graph, lent (not to be freed): given back
   * with kiln_pass_memo_give_back once the compile is done */
  struct pass_memo *lent;
} kiln_dyn_family;
void kiln_pass_memo_give_back(kiln_dyn_family *fam);
/* A new size of a family planned from the trace itself (no graph built):
 * when the request's graph binds to a pass memo's traced graph whose
 * result made a backend family, *out is that result at the trace's sizes
 * and fam says so (as kiln_dynamic_passes would); returns 1. Else 0 (the
 * caller builds the graph and goes the usual way). */
int kiln_dynamic_plan_from_trace(kiln_runtime *rt, const kiln_run_request *rq, kiln_graph **out,
                                 kiln_dyn_family *fam);
/* The compile of memo m's result made the backend's family `family`
 * (kiln_exec_info.family_id with family 1): later sizes served by m hint it. */
void kiln_pass_memo_made_family(struct pass_memo *m, const void *family);
kiln_status kiln_dynamic_passes(kiln_runtime *rt, const kiln_graph *g, int n_dyn, const kiln_sym_origin *dyn,
                                kiln_graph **out, kiln_dyn_family *fam, kiln_err *err);
void kiln_pass_memos_free(kiln_pass_memos *p);

/* Lookup / insert in the graph cache; a key match is verified with the
 * request's matches. */
kiln_cache_entry *kiln_cache_find(kiln_runtime *rt, uint64_t key, const kiln_run_request *rq);
kiln_status kiln_cache_insert(kiln_runtime *rt, kiln_cache_entry *e);
/* e was compiled or found: mark it used now, and when more than the cap
 * hold an executable, free the least recently used other one (after the
 * executor has finished every job, since one may still run it). */
void kiln_cache_loaded(kiln_runtime *rt, kiln_cache_entry *e, int newly_loaded);
/* Allocate a device buffer as a kiln_buf (NULL on OOM). */
kiln_buf *kiln_runtime_buffer(kiln_runtime *rt, size_t bytes);

#endif
