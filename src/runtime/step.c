/* The step driver: the runtime's half of a graph cut (looking the graph up
 * or compiling it, and enqueueing its execution), of a value read and of a
 * step marker. The frontend's half (frontend/cut.c) walks the tensors and
 * the trace and describes the graph (kiln_run_request, runtime/runtime.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/counters.h"
#include "base/spans.h"
#include "base/text.h"
#include "ir/op.h"
#include "passes/passes.h"
#include "runtime/events.h"
#include "runtime/runtime_internal.h"

static const char *const g_cut_counters[KILN_CUT_REASON_COUNT] = {"StepMarkerCut", "ValueReadCut",
                                                                   "DataDependentCut", "ExplicitCompileCut"};

/* The backend's compile of opt (the graph through the passes; freed, or
 * given back to the pass memo that lent it); obs: NULL, or who wants the
 * compile's plan. */
static kiln_status compile_opt(kiln_runtime *rt, kiln_graph *opt, const kiln_compile_observer *obs, int n_dyn,
                               const kiln_sym_origin *dyn, kiln_executable **exe, kiln_dyn_family *fam,
                               kiln_err *err) {
  const kiln_backend_vtable *vt = rt->backend->vt;
  /* a size served by the pass memo is, by construction, the memo's result
   * at its values: the backend family that result made needs no binding
   * (kiln_family_hint) */
  kiln_family_hint hint = {0};
  if (fam && fam->g && fam->backend_family) {
    hint.family = fam->backend_family;
    memcpy(hint.values, fam->vo, sizeof hint.values);
  }
  kiln_status s = n_dyn > 0 && vt->compile_dynamic
                      ? vt->compile_dynamic(rt->backend, opt, obs, n_dyn, dyn, hint.family ? &hint : NULL, exe, err)
                      : vt->compile(rt->backend, opt, obs, exe, err);
  if (s == KILN_OK && fam && fam->made && vt->executable_info) {
    kiln_exec_info in = {0};
    vt->executable_info(rt->backend, *exe, &in);
    if (in.family == 1) kiln_pass_memo_made_family(fam->made, in.family_id);
  }
  if (fam && fam->lent) kiln_pass_memo_give_back(fam); /* the memo's graph, lent for the compile */
  else kiln_graph_free(opt);
  return s;
}

/* The passes and the backend's compile of a traced graph (kept); obs:
 * NULL, or who wants the compile's plan. */
static kiln_status build_exe(kiln_runtime *rt, const kiln_graph *g, const kiln_compile_observer *obs, int n_dyn,
                             const kiln_sym_origin *dyn, kiln_executable **exe, kiln_dyn_family *fam,
                             kiln_err *err) {
  kiln_graph *opt = NULL;
  kiln_status s = KILN_OK;
  *exe = NULL;
  if (rt->skip_passes) {
    opt = kiln_graph_clone(g);
    if (!opt) s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  } else {
    kiln_pass_stats ps = {0};
    uint64_t tp = kiln_prof_span_begin();
    s = n_dyn > 0 ? kiln_dynamic_passes(rt, g, n_dyn, dyn, &opt, fam, err) : kiln_passes_run(g, &opt, &ps, err);
    kiln_prof_span_end(tp, KILN_PROF_COMPILE, "compile: passes", -1);
  }
  if (s != KILN_OK) {
    if (fam && fam->lent) kiln_pass_memo_give_back(fam);
    else kiln_graph_free(opt);
    return s;
  }
  return compile_opt(rt, opt, obs, n_dyn, dyn, exe, fam, err);
}

/* A hit on an entry whose executable was evicted (more graphs in use than
 * KILN_GRAPH_CACHE_SIZE): build it again from the kept graph; the disk
 * cache usually holds its kernels. */
static kiln_status reload_entry(kiln_runtime *rt, kiln_cache_entry *e, kiln_loc loc) {
  uint64_t t0 = kiln_now_ns();
  kiln_err err = {0};
  const kiln_graph *g = kiln_cache_entry_graph(e); /* a planned size's: its family's at its sizes */
  if (!g) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory rebuilding an evicted graph");
  kiln_status s = build_exe(rt, g, NULL, e->n_dyn, e->dyn, &e->exe, NULL, &err);
  if (s != KILN_OK)
    return kiln_error(s, loc, "while rebuilding an evicted graph of %d nodes: %s", g->n_nodes, err.msg);
  double ns = (double)(kiln_now_ns() - t0);
  kiln_metric_record("CompileTime", ns);
  kiln_counter_add("GraphCacheReload", 1);
  if (kiln_prof_on()) kiln_prof_record(KILN_PROF_COMPILE, "rebuild evicted graph", t0, t0 + (uint64_t)ns, g->n_nodes, 0, 0);
  kiln_cache_loaded(rt, e, 1);
  return KILN_OK;
}

/* A compile's plan, forwarded to the observers as KILN_EV_COMPILE_PLAN. */
typedef struct plan_fwd {
  kiln_runtime *rt;
  const kiln_cut_cause *cause;
  const kiln_graph *g;
  uint64_t key;
} plan_fwd;

static void forward_plan(void *ctx, const kiln_compile_plan *p) {
  const plan_fwd *f = ctx;
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_COMPILE_PLAN, .rt = f->rt, .cause = f->cause, .graph = f->g,
                                 .key = f->key, .compile_no = f->rt->n_compiles + 1, .plan = p});
}

/* Compile the caller's graph (cache miss). A new size of a dynamic family
 * that the pass memo serves is planned from the trace itself: the graph is
 * never built (kiln_dynamic_plan_from_trace); anything else builds it. */
static kiln_status compile_entry(kiln_runtime *rt, uint64_t key, const kiln_run_request *rq,
                                 kiln_cache_entry **out) {
  const kiln_cut_cause *cause = &rq->cause;
  kiln_loc loc = cause->loc;
  uint64_t t0 = kiln_now_ns();
  kiln_err err = {0};
  kiln_executable *exe = NULL;
  /* the plan is made only for an observer that asks (graph dumps) */
  int want_plan = 0;
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_COMPILE_BEGIN, .rt = rt, .cause = cause, .key = key,
                                 .compile_no = rt->n_compiles + 1, .want_plan = &want_plan});
  kiln_sym_origin dyn[KILN_SYM_MAX];
  kiln_dyn_family fam = {0};
  kiln_graph *g = NULL, *opt = NULL;
  int n_dyn = 0;
  kiln_status s;
  if (!want_plan && !rt->skip_passes && rq->input_node) {
    kiln_input_view iv = kiln_request_inputs(rq);
    n_dyn = kiln_dynamic_origins(rt, rq, &iv, dyn);
    if (n_dyn == 0 || !kiln_dynamic_plan_from_trace(rt, rq, &opt, &fam)) opt = NULL;
  }
  if (opt) {
    s = compile_opt(rt, opt, NULL, n_dyn, dyn, &exe, &fam, &err);
  } else {
    g = rq->build(rq->ctx);
    if (!g) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory building the graph");
    kiln_input_view iv = kiln_graph_inputs(g);
    n_dyn = kiln_dynamic_origins(rt, rq, &iv, dyn); /* again: the same sizes, the same answer */
    plan_fwd fwd = {rt, cause, g, key};
    const kiln_compile_observer obs = {forward_plan, &fwd};
    s = build_exe(rt, g, want_plan ? &obs : NULL, n_dyn, dyn, &exe, &fam, &err);
  }
  const kiln_graph *shape = g ? g : fam.g; /* the traced graph, or its family's (as many nodes) */
  if (s != KILN_OK) {
    int nodes = shape ? shape->n_nodes : 0;
    kiln_graph_free(g);
    return kiln_error(s, loc, "while compiling a graph of %d nodes: %s", nodes, err.msg);
  }
  kiln_cache_entry *e = calloc(1, sizeof *e);
  if (e) {
    e->key = key;
    e->graph = g;
    e->exe = exe;
    e->n_dyn = n_dyn;
    memcpy(e->dyn, dyn, sizeof dyn[0] * (size_t)n_dyn);
  }
  if (e) {
    e->compile_no = rt->n_compiles + 1;
    e->compile_step = rt->step;
    memcpy(e->tag, rt->tag, sizeof e->tag);
  }
  if (!e || kiln_cache_insert(rt, e) != KILN_OK) {
    free(e);
    rt->backend->vt->executable_free(rt->backend, exe);
    kiln_graph_free(g);
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory caching a graph");
  }
  if (rt->backend->vt->executable_info) rt->backend->vt->executable_info(rt->backend, exe, &e->info);
  double ns = (double)(kiln_now_ns() - t0);
  e->info.compile_ns = ns;
  /* a new size of a dynamic family is planned, not compiled: no code was
   * generated (docs/dynamic-shapes.md) */
  int planned = e->info.family == 2;
  kiln_metric_record(planned ? "DynamicPlanTime" : "CompileTime", ns);
  if (kiln_prof_on())
    kiln_prof_record(KILN_PROF_COMPILE, planned ? "plan graph (dynamic family)" : "compile graph", t0,
                     t0 + (uint64_t)ns, shape->n_nodes, 0, 0);
  kiln_metric_record("GraphNodes", (double)shape->n_nodes);
  kiln_counter_add(planned ? "DynamicPlan" : "UncachedCompile", 1);
  /* a graph whose code all came from the disk cache (PersistentCacheHit counts objects: a large graph is
   * compiled as several) */
  if (!planned && e->info.from_disk_cache) kiln_counter_add("PersistentCacheGraphHit", 1);
  if (e->info.family == 1) kiln_counter_add("DynamicFamily", 1);
  rt->n_compiles++;
  if (planned && fam.g) { /* the family's graph stands for it until the size recurs (kiln_cache_entry) */
    e->fam_graph = fam.g;
    e->fam_shape = fam.s;
    memcpy(e->fam_vals, fam.v, sizeof e->fam_vals);
  }
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_COMPILED, .rt = rt, .cause = cause, .entry = e, .graph = g,
                                 .key = key, .ns = ns});
  if (planned && fam.g) {
    e->graph = NULL;
    kiln_graph_free(g);
  }
  kiln_cache_loaded(rt, e, 1);
  *out = e;
  return KILN_OK;
}

static kiln_buf *scalar_buffer(kiln_runtime *rt, uint64_t bits) {
  kiln_buf *b = kiln_runtime_buffer(rt, 8);
  if (!b) return NULL;
  unsigned char v[8];
  memcpy(v, &bits, 8);
  rt->backend->vt->copy_to_device(rt->backend, b->data, v, 8);
  return b;
}

kiln_status kiln_runtime_cut_open(kiln_runtime *rt, const kiln_cut_cause *cause, uint64_t *t_cut) {
  if (rt->full_graph_depth > 0 && cause->why != KILN_CUT_STEP_MARKER) {
    char cs[256];
    return kiln_error(KILN_ERR_GRAPH_CUT, cause->loc,
                      "graph cut inside a full-graph region: %s (region opened at %s:%d)",
                      kiln_cut_cause_str(cause, cs, sizeof cs), kiln_fmt_file(rt->full_graph_loc.file),
                      rt->full_graph_loc.line);
  }
  *t_cut = kiln_now_ns();
  kiln_counter_add(g_cut_counters[cause->why < KILN_CUT_REASON_COUNT ? cause->why : 0], 1);
  return KILN_OK;
}

/* Before the first run of a graph with collectives: the observers may
 * check that every rank traced the same graph (KILN_EV_FIRST_RUN), so that
 * ranks that disagree get an error instead of a collective that never
 * matches (a hang). Once per cache entry; a graph without collectives
 * needs nothing. */
static kiln_status agree_first_run(kiln_runtime *rt, kiln_cache_entry *e, const kiln_cut_cause *cause) {
  /* a planned size has its family's ops: the family's graph says whether
   * it has collectives, without making the size's own */
  const kiln_graph *g = e->graph ? e->graph : e->fam_graph;
  int coll = 0;
  for (int32_t i = 0; i < g->n_nodes && !coll; i++)
    coll = g->nodes[i].op < KILN_OP_COUNT && kiln_op_table[g->nodes[i].op].kind == KILN_KIND_COLLECTIVE;
  if (!coll) {
    e->agreed = 1;
    return KILN_OK;
  }
  e->collective = 1;
  g = kiln_cache_entry_graph(e);
  if (!g) return kiln_error(KILN_ERR_OUT_OF_MEMORY, cause->loc, "out of memory before a graph's first run");
  /* the observers' collectives must not interleave with an earlier graph's */
  kiln_executor_wait_all(rt->exec);
  kiln_err verdict = {0};
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_FIRST_RUN, .rt = rt, .cause = cause, .entry = e, .graph = g,
                                 .key = e->key, .verdict = &verdict});
  if (verdict.code != KILN_OK) return kiln_error(verdict.code, cause->loc, "%s", verdict.msg);
  /* every rank is here for this graph, nothing in flight: the backend may
   * make a collective call (backend.h, first_run: the cpu backend's buffers
   * in memory the node's ranks share) */
  if (e->exe && rt->backend->vt->first_run) rt->backend->vt->first_run(rt->backend, e->exe);
  e->agreed = 1;
  return KILN_OK;
}

kiln_status kiln_runtime_run(kiln_runtime *rt, const kiln_run_request *rq) {
  const kiln_cut_cause *cause = &rq->cause;
  kiln_cut_reason why = cause->why;
  kiln_loc loc = cause->loc;
  int n_out = rq->n_out;
  const int32_t *alias = rq->alias;
  int hit = 0;
  kiln_status st;
  uint64_t key = rq->key;
  if (rt->test_force_key) key = rt->test_force_key;
  kiln_cache_entry *e = kiln_cache_find(rt, key, rq);
  kiln_prof_span_end(rq->t_lookup, KILN_PROF_HASH,
                     e ? "graph hash + cache lookup (hit)" : "graph hash + cache lookup (miss)", -1);
  if (e) {
    hit = 1;
    if (why != KILN_CUT_EXPLICIT_COMPILE) { /* a warm-up that finds its graph is not a use of it */
      e->hits++;
      kiln_counter_add("CachedCompile", 1);
    }
    if (!e->exe) {
      st = reload_entry(rt, e, loc);
      if (st != KILN_OK) return st;
    } else {
      e->last_use = ++rt->use_clock;
    }
    /* a planned size that recurs keeps its own traced graph: the plain
     * check is cheaper than binding (out of memory: it binds again) */
    if (!e->graph && e->fam_graph && ++e->fam_hits >= KILN_FAMILY_KEEP_HITS) e->graph = rq->build(rq->ctx);
  } else {
    st = compile_entry(rt, key, rq, &e);
    if (st != KILN_OK) return st;
  }
  if (why == KILN_CUT_EXPLICIT_COMPILE) { /* compiled and cached: nothing runs */
    double ns = (double)(kiln_now_ns() - rq->t_cut);
    kiln_event_emit(&(kiln_event){.kind = KILN_EV_CUT, .rt = rt, .cause = cause, .entry = e, .hit = hit, .ns = ns,
                                   .step_tensors = rq->step_tensors});
    return KILN_OK;
  }
  if (!e->agreed) {
    st = agree_first_run(rt, e, cause);
    if (st != KILN_OK) return st;
  }
  /* the job: inputs (buffers, scalar values), outputs */
  uint64_t td = kiln_prof_span_begin();
  kiln_job *job = kiln_job_alloc((int32_t)rq->n_inputs, n_out);
  if (!job) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory at a graph cut");
  job->exe = e->exe;
  job->loc = loc;
  for (uint32_t k = 0; k < rq->n_inputs; k++) {
    const kiln_run_input *in = &rq->inputs[k];
    kiln_buf *b = in->buf ? in->buf : scalar_buffer(rt, in->bits);
    if (!b) {
      for (uint32_t q = 0; q < k; q++) kiln_buf_unpin(job->bufs[q]);
      free(job);
      return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory for graph inputs");
    }
    kiln_buf_pin(b);
    if (!in->buf) kiln_buf_unref(b); /* a scalar: the job's pin keeps it */
    job->bufs[k] = b;
    job->ptrs[k] = b->data;
  }
  int32_t ni = job->n_inputs;
  for (int o = 0; o < n_out; o++) {
    kiln_buf *b;
    if (alias[o] >= 0) {
      b = job->bufs[alias[o]];
      kiln_buf_ref(b);
    } else {
      b = kiln_runtime_buffer(rt, rq->out_bytes[o]);
    }
    if (!b) {
      for (int q = 0; q < ni + o; q++) kiln_buf_unpin(job->bufs[q]);
      free(job);
      return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory for graph outputs");
    }
    kiln_buf_pin(b);
    job->bufs[ni + o] = b;
    job->ptrs[ni + o] = b->data;
  }
  uint64_t seq = kiln_executor_last_seq(rt->exec) + 1;
  /* the caller gets the local references taken above (the pins hold theirs) */
  for (int o = 0; o < n_out; o++) {
    __atomic_store_n(&job->bufs[ni + o]->ready_seq, seq, __ATOMIC_RELEASE);
    rq->out[o] = job->bufs[ni + o];
  }
  uint64_t got = kiln_executor_submit(rt->exec, job);
  KILN_ASSERT(got == seq);
  kiln_prof_span_end(td, KILN_PROF_DISPATCH, "enqueue execution", -1);
  rt->execs_this_step++;
  e->execs++;
  double ns = (double)(kiln_now_ns() - rq->t_cut);
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_CUT, .rt = rt, .cause = cause, .entry = e, .hit = hit, .ns = ns,
                                 .step_tensors = rq->step_tensors});
  return KILN_OK;
}

uint64_t kiln_runtime_step_done(kiln_runtime *rt) {
  kiln_metric_record("ExecutionsPerStep", (double)rt->execs_this_step);
  rt->execs_this_step = 0;
  kiln_counter_add("MarkStep", 1);
  rt->step++;
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_STEP, .rt = rt});
  return rt->step;
}

void kiln_runtime_step_discarded(kiln_runtime *rt) {
  rt->execs_this_step = 0;
  kiln_counter_add("DiscardedStep", 1);
}

void kiln_runtime_read(kiln_runtime *rt, const kiln_buf *b, void *dst, size_t need, kiln_loc loc) {
  uint64_t t0 = kiln_now_ns();
  kiln_executor_wait(rt->exec, __atomic_load_n(&b->ready_seq, __ATOMIC_ACQUIRE));
  uint64_t t1 = kiln_now_ns();
  if (need) rt->backend->vt->copy_to_host(rt->backend, dst, b->data, need);
  kiln_counter_add("TransferFromDevice", 1);
  kiln_counter_add("TransferFromDeviceBytes", (int64_t)need);
  uint64_t t2 = kiln_now_ns();
  if (kiln_prof_on()) kiln_prof_record(KILN_PROF_TRANSFER, "transfer to host", t1, t2, (int64_t)need, 0, 0);
  kiln_metric_record("TransferFromDeviceTime", (double)(t2 - t1));
  kiln_metric_record("DeviceWaitTime", (double)(t1 - t0));
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_READ, .rt = rt, .loc = loc, .bytes = (int64_t)need,
                                 .ns = (double)(t2 - t0), .wait_ns = (double)(t1 - t0)});
}

kiln_status kiln_wait(void) {
  kiln_runtime *rt = kiln_runtime_peek();
  if (rt) kiln_executor_wait_all(rt->exec);
  return kiln_last_status();
}
