/* The step driver: cutting the graph, looking it up or compiling it, and
 * enqueueing its execution; value reads; step markers. */
#include <stdlib.h>
#include <string.h>

#include "base/counters.h"
#include "base/hash.h"
#include "base/spans.h"
#include "base/text.h"
#include "passes/passes.h"
#include "runtime/events.h"
#include "runtime/runtime_internal.h"

#define KILN_CUT_STACK 64

static const char *const g_cut_counters[KILN_CUT_REASON_COUNT] = {"StepMarkerCut", "ValueReadCut",
                                                                   "DataDependentCut", "ExplicitCompileCut"};

/* The passes and the backend's compile of a traced graph (kept); obs:
 * NULL, or who wants the compile's plan. */
static kiln_status build_exe(kiln_runtime *rt, const kiln_graph *g, const kiln_compile_observer *obs,
                             kiln_executable **exe, kiln_err *err) {
  kiln_graph *opt = NULL;
  kiln_status s = KILN_OK;
  *exe = NULL;
  if (rt->skip_passes) {
    opt = kiln_graph_clone(g);
    if (!opt) s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  } else {
    kiln_pass_stats ps = {0};
    uint64_t tp = kiln_prof_span_begin();
    s = kiln_passes_run(g, &opt, &ps, err);
    kiln_prof_span_end(tp, KILN_PROF_COMPILE, "compile: passes", -1);
  }
  if (s == KILN_OK) s = rt->backend->vt->compile(rt->backend, opt, obs, exe, err);
  kiln_graph_free(opt);
  return s;
}

/* A hit on an entry whose executable was evicted (more graphs in use than
 * KILN_GRAPH_CACHE_SIZE): build it again from the kept graph; the disk
 * cache usually holds its kernels. */
static kiln_status reload_entry(kiln_runtime *rt, kiln_cache_entry *e, kiln_loc loc) {
  uint64_t t0 = kiln_now_ns();
  kiln_err err = {0};
  kiln_status s = build_exe(rt, e->graph, NULL, &e->exe, &err);
  if (s != KILN_OK)
    return kiln_error(s, loc, "while rebuilding an evicted graph of %d nodes: %s", e->graph->n_nodes, err.msg);
  double ns = (double)(kiln_now_ns() - t0);
  kiln_metric_record("CompileTime", ns);
  kiln_counter_add("GraphCacheReload", 1);
  if (kiln_prof_on()) kiln_prof_record(KILN_PROF_COMPILE, "rebuild evicted graph", t0, t0 + (uint64_t)ns, e->graph->n_nodes, 0, 0);
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

/* Compile the linearized graph (cache miss). */
static kiln_status compile_entry(kiln_runtime *rt, uint64_t key, int n_out, kiln_node *const *outs,
                                 const int32_t *alias, const kiln_cut_cause *cause, kiln_cache_entry **out) {
  kiln_loc loc = cause->loc;
  uint64_t t0 = kiln_now_ns();
  kiln_graph *g = kiln_lin_build(&rt->lin, n_out, outs, alias);
  if (!g) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory building the graph");
  kiln_err err = {0};
  kiln_executable *exe = NULL;
  /* the plan is made only for an observer that asks (graph dumps) */
  int want_plan = 0;
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_COMPILE_BEGIN, .rt = rt, .cause = cause, .graph = g, .key = key,
                                 .compile_no = rt->n_compiles + 1, .want_plan = &want_plan});
  plan_fwd fwd = {rt, cause, g, key};
  const kiln_compile_observer obs = {forward_plan, &fwd};
  kiln_status s = build_exe(rt, g, want_plan ? &obs : NULL, &exe, &err);
  if (s != KILN_OK) {
    int nodes = g->n_nodes;
    kiln_graph_free(g);
    return kiln_error(s, loc, "while compiling a graph of %d nodes: %s", nodes, err.msg);
  }
  kiln_cache_entry *e = calloc(1, sizeof *e);
  if (e) {
    e->key = key;
    e->graph = g;
    e->exe = exe;
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
  kiln_metric_record("CompileTime", ns);
  if (kiln_prof_on()) kiln_prof_record(KILN_PROF_COMPILE, "compile graph", t0, t0 + (uint64_t)ns, g->n_nodes, 0, 0);
  kiln_metric_record("GraphNodes", (double)g->n_nodes);
  kiln_counter_add("UncachedCompile", 1);
  rt->n_compiles++;
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_COMPILED, .rt = rt, .cause = cause, .entry = e, .graph = g,
                                 .key = key, .ns = ns});
  kiln_cache_loaded(rt, e, 1);
  *out = e;
  return KILN_OK;
}

static size_t node_bytes(const kiln_node *n) {
  size_t b = kiln_dtype_size((kiln_dtype)n->dtype);
  for (int i = 0; i < n->rank; i++) b *= (size_t)n->shape[i];
  return b;
}

static kiln_buf *scalar_buffer(kiln_runtime *rt, const kiln_node *n) {
  kiln_buf *b = kiln_runtime_buffer(rt, 8);
  if (!b) return NULL;
  unsigned char v[8];
  if (n->dtype == KILN_F32 || n->dtype == KILN_F64)
    memcpy(v, &n->fattr, 8);
  else
    memcpy(v, &n->ival, 8);
  rt->backend->vt->copy_to_device(rt->backend, b->data, v, 8);
  return b;
}

kiln_status kiln_runtime_cut(kiln_runtime *rt, uint32_t n, kiln_tslot **slots, kiln_cut_cause cause) {
  kiln_frontend *fe = &rt->fe;
  kiln_cut_reason why = cause.why;
  kiln_loc loc = cause.loc;
  if (rt->full_graph_depth > 0 && why != KILN_CUT_STEP_MARKER) {
    char cs[256];
    return kiln_error(KILN_ERR_GRAPH_CUT, loc, "graph cut inside a full-graph region: %s (region opened at %s:%d)",
                      kiln_cut_cause_str(&cause, cs, sizeof cs), kiln_fmt_file(rt->full_graph_loc.file),
                      rt->full_graph_loc.line);
  }
  uint64_t t_cut = kiln_now_ns();
  int hit = 0;
  kiln_node *outs_stack[KILN_CUT_STACK] = {0};
  int32_t alias_stack[KILN_CUT_STACK], slot_out_stack[KILN_CUT_STACK];
  kiln_node **outs = outs_stack;
  int32_t *alias = alias_stack, *slot_out = slot_out_stack;
  if (n > KILN_CUT_STACK) {
    outs = malloc(n * sizeof *outs);
    alias = malloc(n * sizeof *alias);
    slot_out = malloc(n * sizeof *slot_out);
    if (!outs || !alias || !slot_out) {
      free(outs), free(alias), free(slot_out);
      return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory at a graph cut");
    }
  }
  kiln_status st = KILN_OK;
  kiln_counter_add(g_cut_counters[why < KILN_CUT_REASON_COUNT ? why : 0], 1);
  /* unique output nodes, in slot order */
  uint32_t mark = ++fe->mark_epoch;
  int n_out = 0;
  for (uint32_t i = 0; i < n; i++) {
    kiln_node *nd = slots[i]->node;
    if (nd->mark != mark) {
      nd->mark = mark;
      nd->lin = n_out;
      outs[n_out] = nd;
      alias[n_out] = -1;
      n_out++;
    }
    slot_out[i] = nd->lin;
  }
  uint64_t tl = kiln_prof_span_begin();
  if (kiln_lin_run(fe, &rt->lin, n_out, outs)) {
    st = kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory at a graph cut");
    goto done;
  }
  kiln_prof_span_end(tl, KILN_PROF_TRACING, "trace: linearize graph", (int64_t)rt->lin.n);
  /* Donation: an output whose tensor gave up a buffer that is an input of
   * this graph and that nothing else on the host holds (the tensor's donor
   * reference and the LEAF node's) may be written in place. Only at a step
   * marker: there every pending computation that can still be used is an
   * output of this graph (the rest of the step is dropped). A value read in
   * the middle of a step computes a part of the step; nodes outside it that
   * read the donated buffer through the same LEAF (a dependent traced before
   * kiln_assign, a kept gradient) run later and must see the old value, so
   * the read writes a fresh buffer. (An explicit compile runs nothing: it
   * gets the step marker's aliasing, so the step finds its graph.) */
  int may_donate = why == KILN_CUT_STEP_MARKER || why == KILN_CUT_EXPLICIT_COMPILE;
  for (uint32_t i = 0; may_donate && i < n; i++) {
    kiln_buf *d = slots[i]->donor;
    int o = slot_out[i];
    if (!d || alias[o] >= 0 || kiln_buf_host_refs(d) != 2) continue;
    for (uint32_t k = 0; k < rt->lin.n_inputs; k++) {
      if (rt->lin.inputs[k]->buf != d) continue;
      int used = 0;
      for (int q = 0; q < n_out; q++) used |= alias[q] == (int32_t)k;
      if (!used && d->bytes == node_bytes(outs[o]))
        alias[o] = (int32_t)k;
      break;
    }
  }
  uint64_t th = kiln_prof_span_begin();
  uint64_t key = kiln_hash_combine(0x6b696c6e2d677261ULL, (uint64_t)n_out);
  for (int o = 0; o < n_out; o++) {
    key = kiln_hash_combine(key, outs[o]->hash);
    key = kiln_hash_combine(key, (uint64_t)(int64_t)alias[o]);
  }
  key = kiln_hash_combine(key, rt->lin.n);
  if (rt->test_force_key) key = rt->test_force_key;
  kiln_cache_entry *e = kiln_cache_find(rt, key, n_out, outs, alias);
  kiln_prof_span_end(th, KILN_PROF_HASH, e ? "graph hash + cache lookup (hit)" : "graph hash + cache lookup (miss)", -1);
  if (e) {
    hit = 1;
    if (why != KILN_CUT_EXPLICIT_COMPILE) { /* a warm-up that finds its graph is not a use of it */
      e->hits++;
      kiln_counter_add("CachedCompile", 1);
    }
    if (!e->exe) {
      st = reload_entry(rt, e, loc);
      if (st != KILN_OK) goto done;
    } else {
      e->last_use = ++rt->use_clock;
    }
  } else {
    st = compile_entry(rt, key, n_out, outs, alias, &cause, &e);
    if (st != KILN_OK) goto done;
  }
  if (why == KILN_CUT_EXPLICIT_COMPILE) { /* compiled and cached: the slots stay pending */
    double ns = (double)(kiln_now_ns() - t_cut);
    kiln_event_emit(&(kiln_event){.kind = KILN_EV_CUT, .rt = rt, .cause = &cause, .entry = e, .hit = hit, .ns = ns});
    goto cleanup;
  }
  /* the job: inputs (LEAF buffers, SCALAR values), outputs */
  uint64_t td = kiln_prof_span_begin();
  kiln_job *job = kiln_job_alloc((int32_t)rt->lin.n_inputs, n_out);
  if (!job) {
    st = kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory at a graph cut");
    goto done;
  }
  job->exe = e->exe;
  job->loc = loc;
  for (uint32_t k = 0; k < rt->lin.n_inputs; k++) {
    kiln_node *in = rt->lin.inputs[k];
    kiln_buf *b = in->op == KILN_OP_LEAF ? in->buf : scalar_buffer(rt, in);
    if (!b) {
      for (uint32_t q = 0; q < k; q++) kiln_buf_unpin(job->bufs[q]);
      free(job);
      st = kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory for graph inputs");
      goto done;
    }
    kiln_buf_pin(b);
    if (in->op == KILN_OP_SCALAR) kiln_buf_unref(b); /* the job's pin keeps it */
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
      b = kiln_runtime_buffer(rt, node_bytes(outs[o]));
    }
    if (!b) {
      for (int q = 0; q < ni + o; q++) kiln_buf_unpin(job->bufs[q]);
      free(job);
      st = kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory for graph outputs");
      goto done;
    }
    kiln_buf_pin(b);
    job->bufs[ni + o] = b;
    job->ptrs[ni + o] = b->data;
  }
  uint64_t seq = kiln_executor_last_seq(rt->exec) + 1;
  for (int o = 0; o < n_out; o++) __atomic_store_n(&job->bufs[ni + o]->ready_seq, seq, __ATOMIC_RELEASE);
  for (uint32_t i = 0; i < n; i++) {
    kiln_buf *b = job->bufs[ni + slot_out[i]];
    kiln_buf_ref(b);
    kiln_fe_set_computed(fe, slots[i], b);
    /* A read mid-step keeps the node it computed: kiln_backward of a loss
     * that was read (logged) first still follows the step's tape. */
    if (why != KILN_CUT_STEP_MARKER) slots[i]->traced = outs[slot_out[i]];
  }
  /* drop the local references taken above (the slots and the pins hold theirs) */
  for (int o = 0; o < n_out; o++) kiln_buf_unref(job->bufs[ni + o]);
  uint64_t got = kiln_executor_submit(rt->exec, job);
  KILN_ASSERT(got == seq);
  kiln_prof_span_end(td, KILN_PROF_DISPATCH, "enqueue execution", -1);
  rt->execs_this_step++;
  e->execs++;
  {
    double ns = (double)(kiln_now_ns() - t_cut);
    kiln_event_emit(&(kiln_event){.kind = KILN_EV_CUT, .rt = rt, .cause = &cause, .entry = e, .hit = hit, .ns = ns});
  }
done:
  if (st != KILN_OK)
    for (uint32_t i = 0; i < n; i++) kiln_fe_set_poisoned(fe, slots[i]);
cleanup:
  if (outs != outs_stack) {
    free(outs);
    free(alias);
    free(slot_out);
  }
  return st;
}

kiln_status kiln_mark_step_at(kiln_loc loc) {
  kiln_runtime *rt = kiln_runtime_tracer(loc);
  if (!rt) return kiln_last_status();
  uint64_t tm = kiln_prof_span_begin(); /* "StepMarker", as PyTorch/XLA's traces name it */
  kiln_frontend *fe = &rt->fe;
  kiln_tslot *stack[KILN_CUT_STACK], **slots = stack;
  if (fe->n_kept > KILN_CUT_STACK) slots = malloc(fe->n_kept * sizeof *slots);
  uint32_t n = 0;
  if (slots) {
    for (uint32_t k = 0; k < fe->n_kept; k++) {
      kiln_tslot *s = &fe->slots[fe->kept_list[k]];
      if (s->node && s->node->op != KILN_OP_LEAF && !s->poisoned) slots[n++] = s;
    }
    if (n) kiln_runtime_cut(rt, n, slots, (kiln_cut_cause){KILN_CUT_STEP_MARKER, loc, NULL});
    if (slots != stack) free(slots);
  } else {
    kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "mark_step: out of memory");
    for (uint32_t k = 0; k < fe->n_kept; k++) {
      kiln_tslot *s = &fe->slots[fe->kept_list[k]];
      if (s->node && s->node->op != KILN_OP_LEAF) kiln_fe_set_poisoned(fe, s);
    }
  }
  kiln_metric_record("ExecutionsPerStep", (double)rt->execs_this_step);
  rt->execs_this_step = 0;
  kiln_fe_end_step(fe);
  kiln_counter_add("MarkStep", 1);
  rt->step++;
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_STEP, .rt = rt});
  kiln_prof_span_end(tm, KILN_PROF_DISPATCH, "StepMarker", (int64_t)rt->step);
  kiln_runtime_trace_release(rt);
  return kiln_last_status();
}

static kiln_status read_value(kiln_tensor t, void *dst, size_t bytes, const char *op, const char *api, kiln_loc loc,
                              kiln_tslot **out) {
  kiln_runtime *rt = kiln_runtime_tracer(loc);
  if (!rt) return kiln_last_status();
  kiln_tslot *s = kiln_fe_slot(&rt->fe, t, op, loc);
  if (!s) return KILN_ERR_STALE_HANDLE;
  if (s->poisoned)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: the tensor is poisoned by an earlier error", op);
  size_t need = kiln_dtype_size((kiln_dtype)s->dtype);
  for (int i = 0; i < s->rank; i++) need *= (size_t)s->shape[i];
  if (out) *out = s;
  if (!dst && need) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: destination is NULL", op);
  if (bytes < need)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: destination has %zu bytes, the tensor needs %zu", op,
                      bytes, need);
  if (s->node && s->node->op != KILN_OP_LEAF) {
    kiln_status st = kiln_runtime_cut(rt, 1, &s, (kiln_cut_cause){KILN_CUT_VALUE_READ, loc, api});
    if (st != KILN_OK) return st;
  }
  uint64_t t0 = kiln_now_ns();
  kiln_executor_wait(rt->exec, __atomic_load_n(&s->buf->ready_seq, __ATOMIC_ACQUIRE));
  uint64_t t1 = kiln_now_ns();
  if (need) rt->backend->vt->copy_to_host(rt->backend, dst, s->buf->data, need);
  kiln_counter_add("TransferFromDevice", 1);
  kiln_counter_add("TransferFromDeviceBytes", (int64_t)need);
  uint64_t t2 = kiln_now_ns();
  if (kiln_prof_on()) kiln_prof_record(KILN_PROF_TRANSFER, "transfer to host", t1, t2, (int64_t)need, 0, 0);
  kiln_metric_record("TransferFromDeviceTime", (double)(t2 - t1));
  kiln_metric_record("DeviceWaitTime", (double)(t1 - t0));
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_READ, .rt = rt, .loc = loc, .bytes = (int64_t)need,
                                 .ns = (double)(t2 - t0), .wait_ns = (double)(t1 - t0)});
  return KILN_OK;
}

kiln_status kiln_to_host_at(kiln_tensor t, void *dst, size_t bytes, kiln_loc loc) {
  kiln_status s = read_value(t, dst, bytes, "to_host", "kiln_to_host", loc, NULL);
  return s != KILN_OK ? s : kiln_last_status();
}

static int read_item(kiln_tensor t, const char *op, const char *api, kiln_loc loc, double *f, int64_t *i) {
  kiln_runtime *rt = kiln_runtime_tracer(loc);
  if (!rt) return -1;
  kiln_tslot *s = kiln_fe_slot(&rt->fe, t, op, loc);
  if (!s) return -1;
  int64_t n = 1;
  for (int k = 0; k < s->rank; k++) n *= s->shape[k];
  if (!s->poisoned && n != 1) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: the tensor has %lld elements, expected 1", op, (long long)n);
    return -1;
  }
  union {
    float f32;
    double f64;
    int32_t i32;
    int64_t i64;
    uint8_t b;
  } v;
  if (read_value(t, &v, sizeof v, op, api, loc, NULL) != KILN_OK) return -1;
  switch (s->dtype) {
    case KILN_F32: *f = v.f32, *i = (int64_t)v.f32; break;
    case KILN_F64: *f = v.f64, *i = (int64_t)v.f64; break;
    case KILN_I32: *f = v.i32, *i = v.i32; break;
    case KILN_I64: *f = (double)v.i64, *i = v.i64; break;
    default: *f = v.b, *i = v.b; break;
  }
  return 0;
}

double kiln_item_f64_at(kiln_tensor t, kiln_loc loc) {
  double f;
  int64_t i;
  return read_item(t, "item", "kiln_item_f64", loc, &f, &i) ? 0.0 / 0.0 : f;
}

int64_t kiln_item_i64_at(kiln_tensor t, kiln_loc loc) {
  double f;
  int64_t i;
  return read_item(t, "item", "kiln_item_i64", loc, &f, &i) ? 0 : i;
}

kiln_status kiln_wait(void) {
  kiln_runtime *rt = kiln_runtime_peek();
  if (rt) kiln_executor_wait_all(rt->exec);
  return kiln_last_status();
}
