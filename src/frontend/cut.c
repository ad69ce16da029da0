/* The frontend's half of a graph cut, of the step marker and of value
 * reads: it walks the tensors and the trace, describes the graph to the
 * runtime (kiln_run_request, runtime/runtime.h), which finds or compiles and
 * runs it (runtime/step.c), and writes the results into the tensor slots. */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/spans.h"
#include "frontend/api.h"
#include "frontend/session.h"
#include "ir/scalar.h"

#define KILN_CUT_STACK 64

static size_t node_bytes(const kiln_node *n) {
  size_t b = kiln_dtype_size((kiln_dtype)n->dtype);
  for (int i = 0; i < n->rank; i++) b *= (size_t)n->shape[i];
  return b;
}

/* Room for n graph inputs in S->inputs; -1 on out-of-memory. */
static int grow_inputs(kiln_fe_session *S, uint32_t n) {
  if (n <= S->cap_inputs) return 0;
  uint32_t nc = S->cap_inputs ? S->cap_inputs : 64;
  while (nc < n) nc *= 2;
  kiln_run_input *p = realloc(S->inputs, nc * sizeof *p);
  if (!p) return -1;
  S->inputs = p;
  S->cap_inputs = nc;
  return 0;
}

/* The graph the runtime verifies a cache hit against, or builds on a miss:
 * the linearized trace. */
typedef struct cut_graph {
  const kiln_lin *lin;
  int n_out;
  kiln_node *const *outs;
  const int32_t *alias;
} cut_graph;

static int cut_matches(void *ctx, const kiln_graph *g) {
  const cut_graph *c = ctx;
  return kiln_lin_matches(c->lin, c->n_out, c->outs, c->alias, g);
}

static int cut_binds(void *ctx, const kiln_graph *g, const kiln_symshape *s, const int64_t *v) {
  const cut_graph *c = ctx;
  return kiln_lin_binds(c->lin, c->n_out, c->outs, c->alias, g, s, v);
}

static void cut_input_node(void *ctx, uint32_t k, kiln_gnode *out) {
  const cut_graph *c = ctx;
  const kiln_node *n = c->lin->inputs[k];
  out->op = n->op;
  out->dtype = n->dtype;
  out->rank = n->rank;
  memcpy(out->shape, n->shape, sizeof(int64_t) * n->rank);
}

static kiln_graph *cut_build(void *ctx) {
  const cut_graph *c = ctx;
  return kiln_lin_build(c->lin, c->n_out, c->outs, c->alias);
}

/* The per-cut arrays: on the caller's stack up to KILN_CUT_STACK slots, on
 * the heap past that. */
typedef struct cut_arrays {
  kiln_node **outs;    /* the unique output nodes, in slot order */
  int32_t *alias;      /* per output: the graph input it is written into, or -1 */
  int32_t *slot_out;   /* per slot: its output */
  size_t *out_bytes;   /* per output */
  kiln_buf **out_bufs; /* per output: what the runtime hands back */
} cut_arrays;

/* The heap arrays for a cut of n slots; -1 on out-of-memory (nothing held).
 * Cold and out of line: the cuts of a cached step fit on the stack. */
__attribute__((cold, noinline)) static int cut_arrays_alloc(cut_arrays *a, uint32_t n) {
  a->outs = malloc(n * sizeof *a->outs);
  a->alias = malloc(n * sizeof *a->alias);
  a->slot_out = malloc(n * sizeof *a->slot_out);
  a->out_bytes = malloc(n * sizeof *a->out_bytes);
  a->out_bufs = malloc(n * sizeof *a->out_bufs);
  if (a->outs && a->alias && a->slot_out && a->out_bytes && a->out_bufs) return 0;
  free(a->outs), free(a->alias), free(a->slot_out), free(a->out_bytes), free(a->out_bufs);
  return -1;
}

static void cut_arrays_free(cut_arrays *a) {
  free(a->outs);
  free(a->alias);
  free(a->slot_out);
  free(a->out_bytes);
  free(a->out_bufs);
}

/* The unique output nodes, in slot order, and each slot's output; returns
 * the output count. */
static int cut_outputs(kiln_frontend *fe, uint32_t n, kiln_tslot **slots, cut_arrays *a) {
  uint32_t mark = ++fe->mark_epoch;
  int n_out = 0;
  for (uint32_t i = 0; i < n; i++) {
    kiln_node *nd = slots[i]->node;
    if (nd->mark != mark) {
      nd->mark = mark;
      nd->lin = n_out;
      a->outs[n_out] = nd;
      a->alias[n_out] = -1;
      n_out++;
    }
    a->slot_out[i] = nd->lin;
  }
  return n_out;
}

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
static void cut_donate(const kiln_lin *lin, uint32_t n, kiln_tslot **slots, cut_arrays *a, int n_out) {
  for (uint32_t i = 0; i < n; i++) {
    kiln_buf *d = slots[i]->donor;
    int o = a->slot_out[i];
    if (!d || a->alias[o] >= 0 || kiln_buf_host_refs(d) != 2) continue;
    for (uint32_t k = 0; k < lin->n_inputs; k++) {
      if (lin->inputs[k]->buf != d) continue;
      int used = 0;
      for (int q = 0; q < n_out; q++) used |= a->alias[q] == (int32_t)k;
      if (!used && d->bytes == node_bytes(a->outs[o]))
        a->alias[o] = (int32_t)k;
      break;
    }
  }
}

/* The graph inputs: LEAF buffers, SCALAR values. */
static void cut_inputs(kiln_fe_session *S, const kiln_lin *lin) {
  for (uint32_t k = 0; k < lin->n_inputs; k++) {
    const kiln_node *in = lin->inputs[k];
    kiln_run_input *r = &S->inputs[k];
    r->dyn = in->dyn;
    if (in->op == KILN_OP_LEAF) {
      r->buf = in->buf;
    } else {
      r->buf = NULL;
      if (kiln_dtype_is_float((kiln_dtype)in->dtype))
        memcpy(&r->bits, &in->fattr, 8);
      else
        memcpy(&r->bits, &in->ival, 8);
    }
  }
}

/* Hash the outputs and their aliasing into the graph's cache key, and
 * describe the graph to the runtime, which finds or compiles and runs it. */
static kiln_status cut_run(kiln_fe_session *S, const kiln_cut_cause *cause, uint64_t t_cut, cut_arrays *a,
                           int n_out) {
  const kiln_lin *lin = &S->lin;
  uint64_t th = kiln_prof_span_begin();
  uint64_t key = kiln_hash_combine(0x6b696c6e2d677261ULL, (uint64_t)n_out);
  for (int o = 0; o < n_out; o++) {
    key = kiln_hash_combine(key, a->outs[o]->hash);
    key = kiln_hash_combine(key, (uint64_t)(int64_t)a->alias[o]);
    a->out_bytes[o] = node_bytes(a->outs[o]);
  }
  key = kiln_hash_combine(key, lin->n);
  cut_graph cg = {lin, n_out, a->outs, a->alias};
  const kiln_run_request rq = {.cause = *cause,
                               .t_cut = t_cut,
                               .t_lookup = th,
                               .key = key,
                               .n_out = n_out,
                               .alias = a->alias,
                               .out_bytes = a->out_bytes,
                               .n_inputs = lin->n_inputs,
                               .inputs = S->inputs,
                               .step_tensors = S->fe.n_step,
                               .ctx = &cg,
                               .matches = cut_matches,
                               .binds = cut_binds,
                               .input_node = cut_input_node,
                               .build = cut_build,
                               .out = a->out_bufs};
  return kiln_runtime_run(S->rt, &rq);
}

/* The results into the slots; drops the references the runtime handed over
 * (the slots hold theirs). */
static void cut_write_results(kiln_frontend *fe, uint32_t n, kiln_tslot **slots, const cut_arrays *a, int n_out,
                              kiln_cut_reason why) {
  for (uint32_t i = 0; i < n; i++) {
    kiln_buf *b = a->out_bufs[a->slot_out[i]];
    kiln_buf_ref(b);
    kiln_fe_set_computed(fe, slots[i], b);
    /* A read mid-step keeps the node it computed: kiln_backward of a loss
     * that was read (logged) first still follows the step's tape. */
    if (why != KILN_CUT_STEP_MARKER) slots[i]->traced = a->outs[a->slot_out[i]];
  }
  for (int o = 0; o < n_out; o++) kiln_buf_unref(a->out_bufs[o]);
}

kiln_status kiln_fe_cut(kiln_fe_session *S, uint32_t n, kiln_tslot **slots, kiln_cut_cause cause) {
  kiln_frontend *fe = &S->fe;
  kiln_lin *lin = &S->lin;
  kiln_cut_reason why = cause.why;
  uint64_t t_cut;
  kiln_status st = kiln_runtime_cut_open(S->rt, &cause, &t_cut);
  if (st != KILN_OK) return st; /* refused: the slots stay as they are */
  kiln_node *outs_stack[KILN_CUT_STACK] = {0};
  int32_t alias_stack[KILN_CUT_STACK], slot_out_stack[KILN_CUT_STACK];
  size_t bytes_stack[KILN_CUT_STACK];
  kiln_buf *bufs_stack[KILN_CUT_STACK];
  cut_arrays a = {outs_stack, alias_stack, slot_out_stack, bytes_stack, bufs_stack};
  if (n > KILN_CUT_STACK && cut_arrays_alloc(&a, n))
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, cause.loc, "out of memory at a graph cut");
  int n_out = cut_outputs(fe, n, slots, &a);
  uint64_t tl = kiln_prof_span_begin();
  if (kiln_lin_run(fe, lin, n_out, a.outs) || grow_inputs(S, lin->n_inputs)) {
    st = kiln_error(KILN_ERR_OUT_OF_MEMORY, cause.loc, "out of memory at a graph cut");
    goto done;
  }
  kiln_prof_span_end(tl, KILN_PROF_TRACING, "trace: linearize graph", (int64_t)lin->n);
  if (why == KILN_CUT_STEP_MARKER || why == KILN_CUT_EXPLICIT_COMPILE) cut_donate(lin, n, slots, &a, n_out);
  cut_inputs(S, lin);
  st = cut_run(S, &cause, t_cut, &a, n_out);
  if (st != KILN_OK || why == KILN_CUT_EXPLICIT_COMPILE) goto done; /* an explicit compile: the slots stay pending */
  cut_write_results(fe, n, slots, &a, n_out, why);
done:
  if (st != KILN_OK)
    for (uint32_t i = 0; i < n; i++) kiln_fe_set_poisoned(fe, slots[i]);
  if (a.outs != outs_stack) cut_arrays_free(&a);
  return st;
}

kiln_status kiln_mark_step_at(kiln_loc loc) {
  kiln_fe_session *S = kiln_fe_tracer(loc);
  if (!S) return kiln_last_status();
  uint64_t tm = kiln_prof_span_begin(); /* "StepMarker", as PyTorch/XLA's traces name it */
  kiln_frontend *fe = &S->fe;
  kiln_tslot *stack[KILN_CUT_STACK], **slots = stack;
  if (fe->n_kept > KILN_CUT_STACK) slots = malloc(fe->n_kept * sizeof *slots);
  uint32_t n = 0;
  if (slots) {
    for (uint32_t k = 0; k < fe->n_kept; k++) {
      kiln_tslot *s = &fe->slots[fe->kept_list[k]];
      if (s->node && s->node->op != KILN_OP_LEAF && !s->poisoned) slots[n++] = s;
    }
    if (n) kiln_fe_cut(S, n, slots, (kiln_cut_cause){KILN_CUT_STEP_MARKER, loc, NULL});
    if (slots != stack) free(slots);
  } else {
    kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "mark_step: out of memory");
    for (uint32_t k = 0; k < fe->n_kept; k++) {
      kiln_tslot *s = &fe->slots[fe->kept_list[k]];
      if (s->node && s->node->op != KILN_OP_LEAF) kiln_fe_set_poisoned(fe, s);
    }
  }
  kiln_fe_end_step(fe);
  uint64_t step = kiln_runtime_step_done(S->rt);
  kiln_prof_span_end(tm, KILN_PROF_DISPATCH, "StepMarker", (int64_t)step);
  kiln_fe_trace_release(S);
  return kiln_last_status();
}

static kiln_status read_value(kiln_tensor t, void *dst, size_t bytes, const char *op, const char *api, kiln_loc loc,
                              kiln_tslot **out) {
  kiln_fe_session *S = kiln_fe_tracer(loc);
  if (!S) return kiln_last_status();
  kiln_tslot *s = kiln_fe_slot(&S->fe, t, op, loc);
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
    kiln_status st = kiln_fe_cut(S, 1, &s, (kiln_cut_cause){KILN_CUT_VALUE_READ, loc, api});
    if (st != KILN_OK) return st;
  }
  kiln_runtime_read(S->rt, s->buf, dst, need, loc);
  return KILN_OK;
}

kiln_status kiln_to_host_at(kiln_tensor t, void *dst, size_t bytes, kiln_loc loc) {
  kiln_status s = read_value(t, dst, bytes, "to_host", "kiln_to_host", loc, NULL);
  return s != KILN_OK ? s : kiln_last_status();
}

static int read_item(kiln_tensor t, const char *op, const char *api, kiln_loc loc, double *f, int64_t *i) {
  kiln_fe_session *S = kiln_fe_tracer(loc);
  if (!S) return -1;
  kiln_tslot *s = kiln_fe_slot(&S->fe, t, op, loc);
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
    uint16_t h;
    uint8_t b;
    int8_t i8;
  } v;
  if (read_value(t, &v, sizeof v, op, api, loc, NULL) != KILN_OK) return -1;
  switch (s->dtype) {
    /* kf2i64, the cast rule (NaN, out of range: INT64_MIN): a C cast of
     * those is undefined, and ran even for kiln_item_f64 */
    case KILN_F32: *f = v.f32, *i = kf2i64(v.f32); break;
    case KILN_F64: *f = v.f64, *i = kf2i64(v.f64); break;
    case KILN_I32: *f = v.i32, *i = v.i32; break;
    case KILN_I64: *f = (double)v.i64, *i = v.i64; break;
    case KILN_BF16: *f = kbf16_f32(v.h), *i = kf2i64(*f); break;
    case KILN_F16: *f = kf16_f32(v.h), *i = kf2i64(*f); break;
    case KILN_U8: *f = v.b, *i = v.b; break;
    case KILN_I8: *f = v.i8, *i = v.i8; break;
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
