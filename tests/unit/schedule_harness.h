/* The hand-built graphs of the scheduler tests (test_schedule.c,
 * test_schedule_lines.c): a tiny graph builder, the cpu backend, compile and
 * run. Test code only. */
#ifndef KILN_TESTS_SCHEDULE_HARNESS_H
#define KILN_TESTS_SCHEDULE_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "base/rng.h"
#include "kt.h"
#include "schedule/schedule.h"

/* ───────────── a tiny graph builder ───────────── */

typedef struct gb {
  kiln_gnode nodes[64];
  int32_t in_idx[256];
  int n, n_in_idx, n_inputs, input_node[8];
  int n_outputs, output_node[8], alias[8];
} gb;

static inline int add(gb *b, int op, int dt, int rank, const int64_t *shape, int n_in, const int *ins, int n_iattr,
               const int64_t *iattr, double f) {
  kiln_gnode *x = &b->nodes[b->n];
  memset(x, 0, sizeof *x);
  x->op = (uint16_t)op;
  x->dtype = (uint8_t)dt;
  x->rank = (uint8_t)rank;
  if (rank) memcpy(x->shape, shape, sizeof *shape * (size_t)rank);
  x->n_in = n_in;
  x->in_off = b->n_in_idx;
  for (int i = 0; i < n_in; i++) b->in_idx[b->n_in_idx++] = ins[i];
  x->n_iattr = n_iattr;
  if (n_iattr) memcpy(x->iattr, iattr, sizeof *iattr * (size_t)n_iattr);
  x->fattr = f;
  return b->n++;
}
static inline int leaf(gb *b, int dt, int rank, const int64_t *shape) {
  int64_t ia = b->n_inputs;
  int id = add(b, KILN_OP_LEAF, dt, rank, shape, 0, NULL, 1, &ia, 0);
  b->input_node[b->n_inputs++] = id;
  return id;
}
static inline int scalar(gb *b, int dt) {
  int64_t ia = b->n_inputs;
  int id = add(b, KILN_OP_SCALAR, dt, 0, NULL, 0, NULL, 1, &ia, 0);
  b->input_node[b->n_inputs++] = id;
  return id;
}
static inline int un(gb *b, int op, int a) {
  const kiln_gnode *x = &b->nodes[a];
  return add(b, op, x->dtype, x->rank, x->shape, 1, &a, 0, NULL, 0);
}
static inline int bin(gb *b, int op, int a, int c) {
  const kiln_gnode *x = &b->nodes[a];
  int ins[2] = {a, c};
  int dt = kiln_op_is_predicate(op) ? KILN_BOOL : x->dtype;
  return add(b, op, dt, x->rank, x->shape, 2, ins, 0, NULL, 0);
}
static inline int cnst(gb *b, int dt, int rank, const int64_t *shape, double v) {
  return add(b, KILN_OP_CONST, dt, rank, shape, 0, NULL, 0, NULL, v);
}
static inline int reduce(gb *b, int op, int a, uint32_t mask) {
  const kiln_gnode *x = &b->nodes[a];
  int64_t sh[KILN_MAX_RANK], ia = op == KILN_OP_ARGMAX ? (int64_t)__builtin_ctz(mask) : (int64_t)mask;
  for (int d = 0; d < x->rank; d++) sh[d] = (mask >> d & 1) ? 1 : x->shape[d];
  return add(b, op, op == KILN_OP_ARGMAX ? KILN_I64 : x->dtype, x->rank, sh, 1, &a, 1, &ia, 0);
}
static inline int expand(gb *b, int a, int rank, const int64_t *shape) {
  return add(b, KILN_OP_EXPAND, b->nodes[a].dtype, rank, shape, 1, &a, 0, NULL, 0);
}
static inline void output(gb *b, int n, int alias) {
  b->output_node[b->n_outputs] = n;
  b->alias[b->n_outputs++] = alias;
}

static inline kiln_graph *finish(gb *b) {
  kiln_graph *g = kiln_graph_alloc(b->n, b->n_in_idx, b->n_inputs, b->n_outputs);
  memcpy(g->nodes, b->nodes, sizeof *b->nodes * (size_t)b->n);
  memcpy(g->in_idx, b->in_idx, sizeof *b->in_idx * (size_t)b->n_in_idx);
  for (int i = 0; i < b->n_inputs; i++) g->input_node[i] = b->input_node[i];
  for (int o = 0; o < b->n_outputs; o++) {
    g->output_node[o] = b->output_node[o];
    g->output_alias[o] = b->alias[o];
  }
  g->hash = kiln_graph_hash(g);
  return g;
}

static kiln_backend *be;

static inline kiln_backend *backend(void) {
  if (!be) {
    kiln_backend_config cfg = {.num_threads = 2, .cache_dir = NULL};
    kiln_err err = {0};
    if (kiln_backend_cpu_create(&cfg, &be, &err) != KILN_OK) {
      fprintf(stderr, "cpu backend: %s\n", err.msg);
      exit(1);
    }
  }
  return be;
}

/* Compile and run g; returns the info (and checks both succeed). */
/* The previous run's executable, freed once the next one is compiled: the
 * runtime's graph cache holds executables in the same way, and a kernel
 * stays loaded while an executable uses it (the cpu backend unloads an
 * object when the last executable calling into it is freed). */
static kiln_executable *g_prev;

static inline kiln_exec_info run(kiln_graph *g, void *const *in, void *const *out) {
  kiln_backend *be = backend();
  kiln_executable *e = NULL;
  kiln_err err = {0};
  kiln_exec_info info = {0};
  kiln_status st = be->vt->compile(be, g, NULL, &e, &err);
  KT_CHECK_MSG(st == KILN_OK, "compile: %s", err.msg);
  if (g_prev) be->vt->executable_free(be, g_prev);
  g_prev = NULL;
  if (st != KILN_OK) return info;
  st = be->vt->execute(be, e, in, out, &err);
  KT_CHECK_MSG(st == KILN_OK, "execute: %s", err.msg);
  be->vt->executable_info(be, e, &info);
  g_prev = e;
  return info;
}

static inline float frand(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((*s >> 40) & 0xffff) / 32768.0f - 1.0f;
}

/* Free the backend (the last test of each program). */
static inline void harness_teardown(void) {
  if (be) be->vt->destroy(be);
  be = NULL;
}

#endif
