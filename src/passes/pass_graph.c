#include "passes/pass_graph.h"

#include <stdlib.h>
#include <string.h>

void *kiln_pass_grow(void *buf, int32_t *cap, int32_t n, size_t elem) {
  if (n <= *cap && buf) return buf;
  int64_t want = *cap > 16 ? *cap : 16;
  while (want < n) want *= 2;
  if (want > INT32_MAX) want = INT32_MAX;
  if (want < n) return NULL;
  void *p = realloc(buf, (size_t)want * elem);
  if (p) *cap = (int32_t)want;
  return p;
}

void kiln_pgraph_destroy(kiln_pgraph *p) {
  free(p->g.nodes);
  free(p->g.in_idx);
  free(p->g.input_node);
  free(p->g.output_node);
  free(p->g.output_alias);
  memset(p, 0, sizeof *p);
}

/* Size the fixed-count arrays (inputs/outputs never change in a pass) and
 * clear the node list. */
static kiln_status pgraph_reset(kiln_pgraph *p, int32_t n_inputs, int32_t n_outputs, int32_t n_nodes,
                                int32_t n_in_idx) {
  kiln_graph *g = &p->g;
  if (KILN_PASS_RESERVE(g->nodes, &p->cap_nodes, n_nodes + 1) ||
      KILN_PASS_RESERVE(g->in_idx, &p->cap_in_idx, n_in_idx + 1) ||
      KILN_PASS_RESERVE(g->input_node, &p->cap_inputs, n_inputs + 1) ||
      KILN_PASS_RESERVE(g->output_node, &p->cap_outputs, n_outputs + 1) ||
      KILN_PASS_RESERVE(g->output_alias, &p->cap_alias, n_outputs + 1))
    return KILN_ERR_OUT_OF_MEMORY;
  g->n_nodes = 0;
  g->n_in_idx = 0;
  g->n_inputs = n_inputs;
  g->n_outputs = n_outputs;
  g->hash = 0;
  return KILN_OK;
}

int32_t kiln_pgraph_emit(kiln_pgraph *p, const kiln_gnode *proto, const int32_t *in) {
  kiln_graph *g = &p->g;
  if (KILN_PASS_RESERVE(g->nodes, &p->cap_nodes, g->n_nodes + 1) ||
      KILN_PASS_RESERVE(g->in_idx, &p->cap_in_idx, g->n_in_idx + proto->n_in))
    return -1;
  kiln_gnode *n = &g->nodes[g->n_nodes];
  *n = *proto;
  n->in_off = g->n_in_idx;
  if (proto->n_in) memcpy(g->in_idx + g->n_in_idx, in, sizeof *in * (size_t)proto->n_in);
  g->n_in_idx += proto->n_in;
  return g->n_nodes++;
}

void kiln_pass_ctx_destroy(kiln_pass_ctx *c) {
  free(c->map);
  free(c->in_map);
  free(c->table);
  free(c->live);
  memset(c, 0, sizeof *c);
}

/* Leave clean mode: copy source nodes [0, w->cur) into dst (repacking their
 * input lists) and read from dst from now on. */
static int materialize(kiln_pass_walk *w) {
  const kiln_graph *src = w->src;
  kiln_pgraph *dst = w->dst;
  int32_t upto = w->cur;
  if (pgraph_reset(dst, src->n_inputs, src->n_outputs, src->n_nodes, src->n_in_idx) != KILN_OK) {
    w->status = KILN_ERR_OUT_OF_MEMORY;
    return -1;
  }
  memcpy(dst->g.nodes, src->nodes, sizeof *src->nodes * (size_t)upto);
  int32_t off = 0;
  for (int32_t i = 0; i < upto; i++) {
    kiln_gnode *n = &dst->g.nodes[i];
    memcpy(dst->g.in_idx + off, src->in_idx + n->in_off, sizeof(int32_t) * (size_t)n->n_in);
    n->in_off = off;
    off += n->n_in;
  }
  dst->g.n_nodes = upto;
  dst->g.n_in_idx = off;
  w->view = &dst->g;
  w->clean = 0;
  return 0;
}

kiln_status kiln_pass_walk_run(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, kiln_pass_rule rule,
                               int *changes, int *rebuilt) {
  *changes = 0;
  *rebuilt = 0;
  if (KILN_PASS_RESERVE(ctx->map, &ctx->cap_map, src->n_nodes + 1) ||
      KILN_PASS_RESERVE(ctx->in_map, &ctx->cap_in_map, src->n_in_idx + 1))
    return KILN_ERR_OUT_OF_MEMORY;
  kiln_pass_walk w = {.src = src, .dst = dst, .ctx = ctx, .view = src, .cur = 0, .clean = 1, .status = KILN_OK};
  for (int32_t i = 0; i < src->n_nodes; i++) {
    const kiln_gnode *n = &src->nodes[i];
    const int32_t *sin = src->in_idx + n->in_off;
    int32_t *in = ctx->in_map + n->in_off;
    for (int32_t k = 0; k < n->n_in; k++) in[k] = ctx->map[sin[k]];
    w.cur = i;
    int32_t r;
    if (n->op == KILN_OP_LEAF || n->op == KILN_OP_SCALAR)
      r = kiln_pass_keep(&w, n, in);
    else
      r = rule(&w, i, n, in);
    /* Replaced by an existing node or dropped: the prefix stops being an
     * identity copy. */
    if (r != -1 && w.clean && r != i && materialize(&w) != 0) r = -1;
    if (r == -1) return w.status != KILN_OK ? w.status : KILN_ERR_OUT_OF_MEMORY;
    ctx->map[i] = r;
  }
  *changes = w.changes;
  if (w.clean) return KILN_OK;
  for (int32_t k = 0; k < src->n_inputs; k++) dst->g.input_node[k] = ctx->map[src->input_node[k]];
  for (int32_t o = 0; o < src->n_outputs; o++) {
    dst->g.output_node[o] = ctx->map[src->output_node[o]];
    dst->g.output_alias[o] = src->output_alias[o];
  }
  *rebuilt = 1;
  return KILN_OK;
}

int32_t kiln_pass_emit(kiln_pass_walk *w, const kiln_gnode *proto, const int32_t *in) {
  if (w->clean && materialize(w) != 0) return -1;
  int32_t r = kiln_pgraph_emit(w->dst, proto, in);
  if (r < 0) w->status = KILN_ERR_OUT_OF_MEMORY;
  return r;
}

int32_t kiln_pass_keep(kiln_pass_walk *w, const kiln_gnode *n, const int32_t *in) {
  /* While clean, in[] are n's own inputs and n is node w->cur already. */
  if (w->clean) return w->cur;
  return kiln_pass_emit(w, n, in);
}

kiln_gnode kiln_pass_node_like(const kiln_gnode *n, int op) {
  kiln_gnode m;
  memset(&m, 0, sizeof m);
  m.op = (uint16_t)op;
  m.dtype = n->dtype;
  m.rank = n->rank;
  memcpy(m.shape, n->shape, sizeof m.shape[0] * n->rank);
  m.loc = n->loc;
  m.scope = n->scope; /* rewritten nodes keep the annotation scope that names their kernel */
  return m;
}

int kiln_pass_same_shape(const kiln_gnode *a, const kiln_gnode *b) {
  if (a->rank != b->rank) return 0;
  for (int d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

int32_t kiln_pass_coerce(kiln_pass_walk *w, const kiln_gnode *n, int32_t x) {
  const kiln_gnode *xn = &w->view->nodes[x];
  if (xn->dtype != n->dtype) return -1;
  if (kiln_pass_same_shape(xn, n)) return x;
  int bcast = xn->rank == n->rank;
  for (int d = 0; bcast && d < n->rank; d++) bcast = xn->shape[d] == n->shape[d] || xn->shape[d] == 1;
  if (!bcast) {
    if (kiln_gnode_numel(xn) != 1) return -1;
    /* A single element: reshape to all-ones of n's rank, then broadcast. */
    kiln_gnode r = kiln_pass_node_like(n, KILN_OP_RESHAPE);
    for (int d = 0; d < r.rank; d++) r.shape[d] = 1;
    r.n_in = 1;
    x = kiln_pass_emit(w, &r, &x);
    if (x < 0) return -1;
    if (kiln_pass_same_shape(&w->view->nodes[x], n)) return x;
  }
  kiln_gnode e = kiln_pass_node_like(n, KILN_OP_EXPAND);
  e.n_in = 1;
  return kiln_pass_emit(w, &e, &x);
}
