/* Shared by test_passes.c: a tiny builder of kiln_graphs by hand, the ref
 * backend as the oracle (ref(before) == ref(after)), and the invariants
 * kiln_passes_run guarantees. Static functions: include from one test. */
#ifndef KILN_TESTS_PASSES_HARNESS_H
#define KILN_TESTS_PASSES_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "ir/graph.h"
#include "kt.h"
#include "passes/passes.h"

/* ───────────── a tiny graph builder ───────────── */

#define TB_MAX 16384
typedef struct tb {
  kiln_gnode nodes[TB_MAX];
  int32_t in_idx[4 * TB_MAX];
  int32_t n, n_in_idx;
  int32_t inputs[32], n_inputs;
  int32_t outputs[32], alias[32], n_outputs;
} tb;

static tb *tb_new(void) { return calloc(1, sizeof(tb)); }

static const char *k_file = "model.c";

/* A node; line = 1000 + index so locations can be traced through rewrites. */
static int tb_node(tb *b, int op, int dt, int rank, const int64_t *shape, const int32_t *in, int n_in,
                   const int64_t *iattr, int n_iattr, double fattr) {
  kiln_gnode *n = &b->nodes[b->n];
  memset(n, 0, sizeof *n);
  n->op = (uint16_t)op;
  n->dtype = (uint8_t)dt;
  n->rank = (uint8_t)rank;
  for (int d = 0; d < rank; d++) n->shape[d] = shape[d];
  n->n_in = n_in;
  n->in_off = b->n_in_idx;
  for (int k = 0; k < n_in; k++) b->in_idx[b->n_in_idx++] = in[k];
  n->n_iattr = n_iattr;
  for (int k = 0; k < n_iattr; k++) n->iattr[k] = iattr[k];
  n->fattr = fattr;
  n->loc = (kiln_loc){k_file, 1000 + b->n};
  return b->n++;
}
static const kiln_gnode *tb_at(tb *b, int x) { return &b->nodes[x]; }
static int tb_leaf(tb *b, int dt, int rank, const int64_t *shape) {
  int64_t k = b->n_inputs;
  int x = tb_node(b, KILN_OP_LEAF, dt, rank, shape, NULL, 0, &k, 1, 0);
  b->inputs[b->n_inputs++] = x;
  return x;
}
static int tb_scalar(tb *b, int dt) {
  int64_t k = b->n_inputs;
  int x = tb_node(b, KILN_OP_SCALAR, dt, 0, NULL, NULL, 0, &k, 1, 0);
  b->inputs[b->n_inputs++] = x;
  return x;
}
static int tb_const(tb *b, int dt, int rank, const int64_t *shape, double v) {
  return tb_node(b, KILN_OP_CONST, dt, rank, shape, NULL, 0, NULL, 0, v);
}
static int tb_un(tb *b, int op, int a) {
  const kiln_gnode *x = tb_at(b, a);
  return tb_node(b, op, x->dtype, x->rank, x->shape, &a, 1, NULL, 0, 0);
}
static int tb_cast(tb *b, int a, int dt) {
  const kiln_gnode *x = tb_at(b, a);
  return tb_node(b, KILN_OP_CAST, dt, x->rank, x->shape, &a, 1, NULL, 0, 0);
}
static int tb_bin(tb *b, int op, int a, int c) {
  const kiln_gnode *x = tb_at(b, a);
  int32_t in[2] = {a, c};
  int dt = (kiln_op_is_predicate(op) || (kiln_op_table[op].flags & OPF_LOGICAL)) ? KILN_BOOL : x->dtype;
  return tb_node(b, op, dt, x->rank, x->shape, in, 2, NULL, 0, 0);
}
static int tb_where(tb *b, int c, int x, int y) {
  int32_t in[3] = {c, x, y};
  return tb_node(b, KILN_OP_WHERE, tb_at(b, x)->dtype, tb_at(b, x)->rank, tb_at(b, x)->shape, in, 3, NULL, 0, 0);
}
static int tb_reshape(tb *b, int a, int rank, const int64_t *shape) {
  return tb_node(b, KILN_OP_RESHAPE, tb_at(b, a)->dtype, rank, shape, &a, 1, NULL, 0, 0);
}
static int tb_expand(tb *b, int a, int rank, const int64_t *shape) {
  return tb_node(b, KILN_OP_EXPAND, tb_at(b, a)->dtype, rank, shape, &a, 1, NULL, 0, 0);
}
static int tb_permute(tb *b, int a, const int64_t *perm) {
  const kiln_gnode *x = tb_at(b, a);
  int64_t shape[KILN_MAX_RANK];
  for (int d = 0; d < x->rank; d++) shape[d] = x->shape[perm[d]];
  return tb_node(b, KILN_OP_PERMUTE, x->dtype, x->rank, shape, &a, 1, perm, x->rank, 0);
}
static int tb_reduce(tb *b, int op, int a, int64_t mask) {
  const kiln_gnode *x = tb_at(b, a);
  int64_t shape[KILN_MAX_RANK];
  /* argmax: iattr[0] is the axis; the others: a bitmask of axes */
  for (int d = 0; d < x->rank; d++)
    shape[d] = (op == KILN_OP_ARGMAX ? d == mask : (mask >> d) & 1) ? 1 : x->shape[d];
  return tb_node(b, op, op == KILN_OP_ARGMAX ? KILN_I64 : x->dtype, x->rank, shape, &a, 1, &mask, 1, 0);
}
static int tb_pad(tb *b, int a, const int64_t *lohi, double v) {
  const kiln_gnode *x = tb_at(b, a);
  int64_t shape[KILN_MAX_RANK];
  for (int d = 0; d < x->rank; d++) shape[d] = x->shape[d] + lohi[d] + lohi[x->rank + d];
  return tb_node(b, KILN_OP_PAD, x->dtype, x->rank, shape, &a, 1, lohi, 2 * x->rank, v);
}
static int tb_slice(tb *b, int a, const int64_t *start_step, const int64_t *shape) {
  const kiln_gnode *x = tb_at(b, a);
  return tb_node(b, KILN_OP_SLICE, x->dtype, x->rank, shape, &a, 1, start_step, 2 * x->rank, 0);
}
static int tb_concat(tb *b, const int32_t *ins, int n, int64_t axis) {
  const kiln_gnode *x = tb_at(b, ins[0]);
  int64_t shape[KILN_MAX_RANK];
  memcpy(shape, x->shape, sizeof shape);
  shape[axis] = 0;
  for (int k = 0; k < n; k++) shape[axis] += tb_at(b, ins[k])->shape[axis];
  return tb_node(b, KILN_OP_CONCAT, x->dtype, x->rank, shape, ins, n, &axis, 1, 0);
}
static void tb_out(tb *b, int x, int alias) {
  b->outputs[b->n_outputs] = x;
  b->alias[b->n_outputs++] = alias;
}
static kiln_graph *tb_graph(const tb *b) {
  kiln_graph *g = kiln_graph_alloc(b->n, b->n_in_idx, b->n_inputs, b->n_outputs);
  memcpy(g->nodes, b->nodes, sizeof *g->nodes * (size_t)b->n);
  memcpy(g->in_idx, b->in_idx, sizeof *g->in_idx * (size_t)b->n_in_idx);
  memcpy(g->input_node, b->inputs, sizeof *g->input_node * (size_t)b->n_inputs);
  memcpy(g->output_node, b->outputs, sizeof *g->output_node * (size_t)b->n_outputs);
  memcpy(g->output_alias, b->alias, sizeof *g->output_alias * (size_t)b->n_outputs);
  g->hash = kiln_graph_hash(g);
  return g;
}

static int count_op(const kiln_graph *g, int op) {
  int c = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) c += g->nodes[i].op == op;
  return c;
}
static const kiln_gnode *out_node(const kiln_graph *g, int o) { return &g->nodes[g->output_node[o]]; }

/* ───────────── the oracle: run on the ref backend ───────────── */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static int is_float_dt(int dt) { return dt == KILN_F32 || dt == KILN_F64; }

/* Input data for graph input k: deterministic in (seed, k), so a graph and
 * its optimized version see the same values. Floats are small multiples of
 * 1/4 including 0, so most arithmetic is exact and inf/NaN still appear
 * through division by zero and sqrt of negatives. */
static void fill_input(void *dst, const kiln_gnode *n, uint64_t seed, int k) {
  uint64_t s = seed * 1000003u + (uint64_t)k;
  if (n->op == KILN_OP_SCALAR) {
    int64_t r = (int64_t)(splitmix(&s) % 9) - 4;
    if (is_float_dt(n->dtype)) {
      double d = (double)r / 4;
      memcpy(dst, &d, 8);
    } else {
      memcpy(dst, &r, 8);
    }
    return;
  }
  int64_t e = kiln_gnode_numel(n);
  for (int64_t i = 0; i < e; i++) {
    int64_t r = (int64_t)(splitmix(&s) % 17) - 8;
    switch (n->dtype) {
      case KILN_F32: ((float *)dst)[i] = (float)r / 4; break;
      case KILN_F64: ((double *)dst)[i] = (double)r / 4; break;
      case KILN_I32: ((int32_t *)dst)[i] = (int32_t)r; break;
      case KILN_I64: ((int64_t *)dst)[i] = r; break;
      default: ((uint8_t *)dst)[i] = r > 0; break;
    }
  }
}

/* Outputs of g on the ref backend for the inputs of seed: an array of
 * n_outputs malloc'ed host buffers (free with free_results), or NULL after
 * recording a failure. Aliased outputs get their input's buffer, as the
 * runtime would pass them. */
static void **ref_run(const kiln_graph *g, uint64_t seed) {
  kiln_backend *be = NULL;
  kiln_err err = {0};
  kiln_executable *ex = NULL;
  if (kiln_backend_ref_create(NULL, &be, &err) != KILN_OK) {
    KT_FAIL("ref backend: %s", err.msg);
    return NULL;
  }
  if (be->vt->compile(be, g, NULL, &ex, &err) != KILN_OK) {
    KT_FAIL("ref compile: %s", err.msg);
    be->vt->destroy(be);
    return NULL;
  }
  void *ins[32] = {0}, *outs[32] = {0};
  for (int32_t k = 0; k < g->n_inputs; k++) {
    const kiln_gnode *n = &g->nodes[g->input_node[k]];
    size_t bytes = n->op == KILN_OP_SCALAR ? 8 : kiln_gnode_bytes(n);
    void *host = malloc(bytes + 8);
    fill_input(host, n, seed, k);
    ins[k] = be->vt->buffer_alloc(be, bytes);
    be->vt->copy_to_device(be, ins[k], host, bytes);
    free(host);
  }
  for (int32_t o = 0; o < g->n_outputs; o++)
    outs[o] = g->output_alias[o] >= 0 ? ins[g->output_alias[o]] : be->vt->buffer_alloc(be, kiln_gnode_bytes(out_node(g, o)));
  void **res = NULL;
  if (be->vt->execute(be, ex, ins, outs, &err) != KILN_OK) {
    KT_FAIL("ref execute: %s", err.msg);
  } else {
    res = calloc((size_t)g->n_outputs + 1, sizeof *res);
    for (int32_t o = 0; o < g->n_outputs; o++) {
      size_t bytes = kiln_gnode_bytes(out_node(g, o));
      res[o] = malloc(bytes + 1);
      be->vt->copy_to_host(be, res[o], outs[o], bytes);
    }
  }
  for (int32_t o = 0; o < g->n_outputs; o++)
    if (g->output_alias[o] < 0) be->vt->buffer_free(be, outs[o]);
  for (int32_t k = 0; k < g->n_inputs; k++) be->vt->buffer_free(be, ins[k]);
  be->vt->executable_free(be, ex);
  be->vt->destroy(be);
  return res;
}

static void free_results(void **r, int n) {
  if (!r) return;
  for (int i = 0; i < n; i++) free(r[i]);
  free(r);
}

/* Element i of a buffer of dtype dt equal in both? Floats: == or both NaN
 * (x + 0 -> x may turn a +0 into -0, which compares equal). */
static int elem_equal(int dt, const void *a, const void *b, int64_t i) {
  switch (dt) {
    case KILN_F32: {
      float x = ((const float *)a)[i], y = ((const float *)b)[i];
      return x == y || (isnan(x) && isnan(y));
    }
    case KILN_F64: {
      double x = ((const double *)a)[i], y = ((const double *)b)[i];
      return x == y || (isnan(x) && isnan(y));
    }
    case KILN_I32: return ((const int32_t *)a)[i] == ((const int32_t *)b)[i];
    case KILN_I64: return ((const int64_t *)a)[i] == ((const int64_t *)b)[i];
    default: return ((const uint8_t *)a)[i] == ((const uint8_t *)b)[i];
  }
}

/* ref(before) == ref(after) on `trials` random input sets. */
static void check_same_results(const kiln_graph *before, const kiln_graph *after, int trials) {
  for (int t = 0; t < trials; t++) {
    void **ra = ref_run(before, 1000 + (uint64_t)t), **rb = ref_run(after, 1000 + (uint64_t)t);
    if (ra && rb) {
      for (int32_t o = 0; o < before->n_outputs; o++) {
        const kiln_gnode *n = out_node(before, o);
        int64_t e = kiln_gnode_numel(n);
        for (int64_t i = 0; i < e; i++) {
          if (!elem_equal(n->dtype, ra[o], rb[o], i)) {
            KT_FAIL("output %d element %lld differs after the passes (trial %d)", o, (long long)i, t);
            kiln_graph_print(before, stderr);
            kiln_graph_print(after, stderr);
            free_results(ra, before->n_outputs);
            free_results(rb, after->n_outputs);
            return;
          }
        }
      }
    }
    free_results(ra, before->n_outputs);
    free_results(rb, after->n_outputs);
  }
}

/* The documented guarantees of kiln_passes_run. */
static void check_invariants(const kiln_graph *in, const kiln_graph *out) {
  char msg[512];
  KT_CHECK_MSG(kiln_graph_verify(out, msg, sizeof msg) == 0, "verify: %s", msg);
  KT_EQ_INT(out->n_inputs, in->n_inputs);
  KT_EQ_INT(out->n_outputs, in->n_outputs);
  if (out->n_inputs != in->n_inputs || out->n_outputs != in->n_outputs) return;
  for (int32_t k = 0; k < in->n_inputs; k++) {
    const kiln_gnode *a = &in->nodes[in->input_node[k]], *b = &out->nodes[out->input_node[k]];
    KT_EQ_INT(b->op, a->op);
    KT_EQ_INT(b->iattr[0], k);
    KT_EQ_INT(b->dtype, a->dtype);
    KT_CHECK(b->rank == a->rank && !memcmp(a->shape, b->shape, sizeof a->shape[0] * a->rank));
  }
  for (int32_t o = 0; o < in->n_outputs; o++) {
    const kiln_gnode *a = out_node(in, o), *b = out_node(out, o);
    KT_EQ_INT(b->dtype, a->dtype);
    KT_CHECK_MSG(b->rank == a->rank && !memcmp(a->shape, b->shape, sizeof a->shape[0] * a->rank),
                 "output %d changed shape", o);
    KT_EQ_INT(out->output_alias[o], in->output_alias[o]);
  }
  /* Every node carries a location taken from some node of the input. */
  static uint8_t seen[TB_MAX];
  memset(seen, 0, sizeof seen);
  for (int32_t i = 0; i < in->n_nodes; i++)
    if (in->nodes[i].loc.line >= 1000 && in->nodes[i].loc.line < 1000 + TB_MAX) seen[in->nodes[i].loc.line - 1000] = 1;
  for (int32_t i = 0; i < out->n_nodes; i++) {
    const kiln_loc l = out->nodes[i].loc;
    KT_CHECK_MSG(l.file == k_file && l.line >= 1000 && l.line < 1000 + TB_MAX && seen[l.line - 1000],
                 "node %d lost its location", i);
  }
  KT_CHECK(out->hash == kiln_graph_hash(out));
}

/* Optimize g, checking status and invariants. */
static kiln_graph *opt(const kiln_graph *g, kiln_pass_stats *st) {
  kiln_err err = {0};
  kiln_graph *o = NULL;
  kiln_pass_stats local;
  if (!st) st = &local;
  kiln_status s = kiln_passes_run(g, &o, st, &err);
  KT_CHECK_MSG(s == KILN_OK, "kiln_passes_run: %s", err.msg);
  if (o) {
    check_invariants(g, o);
    KT_EQ_INT(st->nodes_before, g->n_nodes);
    KT_EQ_INT(st->nodes_after, o->n_nodes);
  }
  return o;
}

static const int64_t S23[2] = {2, 3};
#define ENUM_LINE(g, x) ((g)->nodes[x].loc.line)

#endif
