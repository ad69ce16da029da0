#include "ir/graph.h"

#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

int64_t kiln_gnode_numel(const kiln_gnode *n) {
  int64_t e = 1;
  for (int i = 0; i < n->rank; i++) e *= n->shape[i];
  return e;
}

size_t kiln_gnode_bytes(const kiln_gnode *n) {
  return (size_t)kiln_gnode_numel(n) * kiln_dtype_size((kiln_dtype)n->dtype);
}

static kiln_graph *graph_alloc(int32_t n_nodes, int32_t n_in_idx, int32_t n_inputs, int32_t n_outputs, int zero) {
  kiln_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->n_nodes = n_nodes;
  g->n_in_idx = n_in_idx;
  g->n_inputs = n_inputs;
  g->n_outputs = n_outputs;
  g->nodes = zero ? calloc((size_t)n_nodes + 1, sizeof *g->nodes) : malloc(sizeof *g->nodes * ((size_t)n_nodes + 1));
  g->in_idx = calloc((size_t)n_in_idx + 1, sizeof *g->in_idx);
  g->input_node = calloc((size_t)n_inputs + 1, sizeof *g->input_node);
  g->output_node = calloc((size_t)n_outputs + 1, sizeof *g->output_node);
  g->output_alias = calloc((size_t)n_outputs + 1, sizeof *g->output_alias);
  if (!g->nodes || !g->in_idx || !g->input_node || !g->output_node || !g->output_alias) {
    kiln_graph_free(g);
    return NULL;
  }
  for (int32_t o = 0; o < n_outputs; o++) g->output_alias[o] = -1;
  return g;
}

kiln_graph *kiln_graph_alloc(int32_t n_nodes, int32_t n_in_idx, int32_t n_inputs, int32_t n_outputs) {
  return graph_alloc(n_nodes, n_in_idx, n_inputs, n_outputs, 1);
}

kiln_graph *kiln_graph_alloc_unset(int32_t n_nodes, int32_t n_in_idx, int32_t n_inputs, int32_t n_outputs) {
  return graph_alloc(n_nodes, n_in_idx, n_inputs, n_outputs, 0);
}

void kiln_graph_free(kiln_graph *g) {
  if (!g) return;
  free(g->nodes);
  free(g->in_idx);
  free(g->input_node);
  free(g->output_node);
  free(g->output_alias);
  free(g);
}

kiln_graph *kiln_graph_clone(const kiln_graph *g) {
  /* not zeroed first: every byte is copied (a graph's bytes are all
   * written: kiln_graph_alloc zeroes them) */
  kiln_graph *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->n_nodes = g->n_nodes;
  c->n_in_idx = g->n_in_idx;
  c->n_inputs = g->n_inputs;
  c->n_outputs = g->n_outputs;
  c->nodes = malloc(sizeof *c->nodes * ((size_t)g->n_nodes + 1));
  c->in_idx = malloc(sizeof *c->in_idx * ((size_t)g->n_in_idx + 1));
  c->input_node = malloc(sizeof *c->input_node * ((size_t)g->n_inputs + 1));
  c->output_node = malloc(sizeof *c->output_node * ((size_t)g->n_outputs + 1));
  c->output_alias = malloc(sizeof *c->output_alias * ((size_t)g->n_outputs + 1));
  if (!c->nodes || !c->in_idx || !c->input_node || !c->output_node || !c->output_alias) {
    kiln_graph_free(c);
    return NULL;
  }
  memcpy(c->nodes, g->nodes, sizeof *g->nodes * (size_t)g->n_nodes);
  memcpy(c->in_idx, g->in_idx, sizeof *g->in_idx * (size_t)g->n_in_idx);
  memcpy(c->input_node, g->input_node, sizeof *g->input_node * (size_t)g->n_inputs);
  memcpy(c->output_node, g->output_node, sizeof *g->output_node * (size_t)g->n_outputs);
  memcpy(c->output_alias, g->output_alias, sizeof *g->output_alias * (size_t)g->n_outputs);
  c->hash = g->hash;
  return c;
}

/* The program-defining part of a node; SCALAR values and locations excluded.
 * symshape.c's node_hash is this hash with symbolic dims and reciprocals:
 * a field added here must be added there, or two programs share a family. */
static uint64_t node_hash(const kiln_graph *g, const kiln_gnode *n) {
  uint64_t h = kiln_hash_combine(n->op, ((uint64_t)n->dtype << 8) | n->rank);
  for (int i = 0; i < n->rank; i++) h = kiln_hash_combine(h, (uint64_t)n->shape[i]);
  h = kiln_hash_combine(h, (uint64_t)n->n_iattr);
  for (int i = 0; i < n->n_iattr; i++) h = kiln_hash_combine(h, (uint64_t)n->iattr[i]);
  if (n->op != KILN_OP_SCALAR) {
    uint64_t fb;
    memcpy(&fb, &n->fattr, sizeof fb);
    h = kiln_hash_combine(h, fb);
  }
  const int32_t *in = kiln_gnode_inputs(g, n);
  h = kiln_hash_combine(h, (uint64_t)n->n_in);
  for (int i = 0; i < n->n_in; i++) h = kiln_hash_combine(h, (uint64_t)in[i]);
  return h;
}

uint64_t kiln_graph_hash(const kiln_graph *g) {
  uint64_t h = kiln_hash_combine(0x6b696c6eULL, (uint64_t)g->n_nodes);
  for (int32_t i = 0; i < g->n_nodes; i++) h = kiln_hash_combine(h, node_hash(g, &g->nodes[i]));
  for (int32_t i = 0; i < g->n_inputs; i++) h = kiln_hash_combine(h, (uint64_t)g->input_node[i]);
  for (int32_t o = 0; o < g->n_outputs; o++) {
    h = kiln_hash_combine(h, (uint64_t)g->output_node[o]);
    h = kiln_hash_combine(h, (uint64_t)(int64_t)g->output_alias[o]);
  }
  return h;
}

static int node_equal(const kiln_graph *ga, const kiln_gnode *a, const kiln_graph *gb, const kiln_gnode *b) {
  if (a->op != b->op || a->dtype != b->dtype || a->rank != b->rank || a->n_in != b->n_in ||
      a->n_iattr != b->n_iattr)
    return 0;
  if (memcmp(a->shape, b->shape, sizeof a->shape[0] * a->rank)) return 0;
  if (memcmp(a->iattr, b->iattr, sizeof a->iattr[0] * (size_t)a->n_iattr)) return 0;
  if (a->op != KILN_OP_SCALAR && memcmp(&a->fattr, &b->fattr, sizeof a->fattr)) return 0;
  return memcmp(kiln_gnode_inputs(ga, a), kiln_gnode_inputs(gb, b), sizeof(int32_t) * (size_t)a->n_in) == 0;
}

int kiln_graph_equal(const kiln_graph *a, const kiln_graph *b) {
  if (a == b) return 1;
  if (a->n_nodes != b->n_nodes || a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs) return 0;
  for (int32_t i = 0; i < a->n_nodes; i++)
    if (!node_equal(a, &a->nodes[i], b, &b->nodes[i])) return 0;
  if (memcmp(a->input_node, b->input_node, sizeof(int32_t) * (size_t)a->n_inputs)) return 0;
  if (memcmp(a->output_node, b->output_node, sizeof(int32_t) * (size_t)a->n_outputs)) return 0;
  if (memcmp(a->output_alias, b->output_alias, sizeof(int32_t) * (size_t)a->n_outputs)) return 0;
  return 1;
}
