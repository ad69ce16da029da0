/* A tiny hand-written kiln_graph builder for tests that exercise the IR and
 * the backends below the frontend (tests/unit/test_graph.c,
 * tests/backend/test_ref.c). Not thread-safe; test code only.
 *
 *   gb b = gb_new();
 *   int x = leaf(&b, KILN_F32, SH(4, 8));
 *   int y = nd(&b, KILN_OP_NEG, KILN_F32, SH(4, 8), IN(x), AT0, 0.0);
 *   out(&b, y, -1);
 *
 * Node locations are (the including .c file, 1000 + node index).
 */
#ifndef KILN_TESTS_GRAPH_BUILDER_H
#define KILN_TESTS_GRAPH_BUILDER_H

#include "ir/graph.h"

typedef struct gb {
  kiln_graph *g;
} gb;

static inline gb gb_new(void) {
  gb b = {kiln_graph_alloc(64, 192, 16, 16)};
  b.g->n_nodes = b.g->n_in_idx = b.g->n_inputs = b.g->n_outputs = 0;
  return b;
}

#define SH(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}
#define S0 0, NULL
#define IN(...) (int)(sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t)), (const int32_t[]){__VA_ARGS__}
#define IN0 0, NULL
#define AT(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}
#define AT0 0, NULL

static inline int nd(gb *b, int op, int dt, int rank, const int64_t *shape, int n_in, const int32_t *ins, int n_iattr,
              const int64_t *iattr, double f) {
  kiln_graph *g = b->g;
  int i = g->n_nodes++;
  kiln_gnode *n = &g->nodes[i];
  n->op = (uint16_t)op;
  n->dtype = (uint8_t)dt;
  n->rank = (uint8_t)rank;
  for (int d = 0; d < rank; d++) n->shape[d] = shape[d];
  n->n_in = n_in;
  n->in_off = g->n_in_idx;
  for (int k = 0; k < n_in; k++) g->in_idx[g->n_in_idx++] = ins[k];
  n->n_iattr = n_iattr;
  for (int k = 0; k < n_iattr; k++) n->iattr[k] = iattr[k];
  n->fattr = f;
  n->loc = (kiln_loc){__BASE_FILE__, 1000 + i};
  return i;
}

static inline int leaf(gb *b, int dt, int rank, const int64_t *shape) {
  int k = b->g->n_inputs++;
  int64_t at = k;
  int i = nd(b, KILN_OP_LEAF, dt, rank, shape, 0, NULL, 1, &at, 0);
  b->g->input_node[k] = i;
  return i;
}

static inline int scalar(gb *b, int dt, double v) {
  int k = b->g->n_inputs++;
  int64_t at = k;
  int i = nd(b, KILN_OP_SCALAR, dt, 0, NULL, 0, NULL, 1, &at, v);
  b->g->input_node[k] = i;
  return i;
}

static inline void out(gb *b, int node, int alias) {
  int o = b->g->n_outputs++;
  b->g->output_node[o] = node;
  b->g->output_alias[o] = alias;
}

#endif
