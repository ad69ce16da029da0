#include "frontend/linearize.h"

#include <stdlib.h>
#include <string.h>

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return 0;
  uint32_t nc = *cap ? *cap : 256;
  while (nc < need) nc *= 2;
  void *np = realloc(*p, nc * elem);
  if (!np) return -1;
  *p = np;
  *cap = nc;
  return 0;
}

struct kiln_lin_frame {
  kiln_node *n;
  int k; /* next operand to visit */
};

static inline void emit(kiln_lin *L, kiln_node *x, uint32_t *n, uint32_t *n_inputs) {
  x->lin = (int32_t)*n;
  L->order[(*n)++] = x;
  if (x->op == KILN_OP_LEAF || x->op == KILN_OP_SCALAR) L->inputs[(*n_inputs)++] = x;
}

/* Iterative depth-first post-order from each output in turn, operands in
 * order: the numbering is a function of the graph's structure (and the
 * order of the outputs) only. An output itself is numbered as late as it
 * can be: when another node needs it, or else after everything the outputs
 * need. A parameter update (an output written in place over the parameter)
 * then comes after every reader of the old value, as it does in the
 * program's own order, and the schedule can keep it in place. Each reached
 * node is pushed and popped once; every array is sized once up front by the
 * step's node count (a bound on what the outputs can reach), so the loop
 * makes no calls. Runs at every cut, cached or not. */
int kiln_lin_run(kiln_frontend *fe, kiln_lin *L, int n_out, kiln_node *const *outs) {
  uint32_t bound = fe->n_created + 1;
  if (grow((void **)&L->stack, &L->cap_stack, bound, sizeof *L->stack) ||
      grow((void **)&L->order, &L->cap, bound, sizeof *L->order) ||
      grow((void **)&L->inputs, &L->cap_inputs, bound, sizeof *L->inputs))
    return -1;
  /* node states by mark: seen (numbered, or on the stack), deferred (an
   * output whose operands are numbered, itself not yet), anything else new */
  uint32_t deferred = ++fe->mark_epoch, seen = ++fe->mark_epoch;
  struct kiln_lin_frame *stk = L->stack;
  uint32_t n = 0, n_inputs = 0;
  for (int o = 0; o < n_out; o++) {
    if (outs[o]->mark == seen || outs[o]->mark == deferred) continue;
    uint32_t sp = 0;
    outs[o]->mark = seen;
    stk[sp++] = (struct kiln_lin_frame){outs[o], 0};
    while (sp) {
      struct kiln_lin_frame *f = &stk[sp - 1];
      kiln_node *x = f->n;
      int k = f->k;
      while (k < x->n_in && x->in[k]->mark == seen) k++;
      if (k < x->n_in) {
        kiln_node *c = x->in[k];
        f->k = k + 1;
        if (c->mark == deferred) { /* an output another node needs: now */
          c->mark = seen;
          emit(L, c, &n, &n_inputs);
          continue;
        }
        c->mark = seen;
        stk[sp++] = (struct kiln_lin_frame){c, 0};
        continue;
      }
      if (--sp == 0)
        x->mark = deferred; /* the output itself: as late as possible */
      else
        emit(L, x, &n, &n_inputs);
    }
  }
  for (int o = 0; o < n_out; o++)
    if (outs[o]->mark == deferred) {
      outs[o]->mark = seen;
      emit(L, outs[o], &n, &n_inputs);
    }
  L->n = n;
  L->n_inputs = n_inputs;
  return 0;
}

/* Runs at every cached step over every node: plain loops, no calls. */
int kiln_lin_matches(const kiln_lin *L, int n_out, kiln_node *const *outs, const int32_t *alias, const kiln_graph *g) {
  if ((uint32_t)g->n_nodes != L->n || (uint32_t)g->n_inputs != L->n_inputs || g->n_outputs != n_out) return 0;
  int32_t next_input = 0;
  const kiln_gnode *m = g->nodes;
  for (uint32_t i = 0; i < L->n; i++, m++) {
    const kiln_node *n = L->order[i];
    if (m->op != n->op || m->dtype != n->dtype || m->rank != n->rank || m->n_in != n->n_in) return 0;
    for (int d = 0; d < n->rank; d++)
      if (m->shape[d] != n->shape[d]) return 0;
    if (n->op == KILN_OP_LEAF || n->op == KILN_OP_SCALAR) {
      if (m->iattr[0] != next_input++) return 0;
      continue;
    }
    if (m->n_iattr != n->n_iattr) return 0;
    for (int k = 0; k < n->n_iattr; k++)
      if (m->iattr[k] != n->iattr[k]) return 0;
    uint64_t fa, fb;
    memcpy(&fa, &m->fattr, 8);
    memcpy(&fb, &n->fattr, 8);
    if (fa != fb) return 0;
    const int32_t *in = g->in_idx + m->in_off;
    for (int k = 0; k < n->n_in; k++)
      if (in[k] != n->in[k]->lin) return 0;
  }
  for (int o = 0; o < n_out; o++)
    if (g->output_node[o] != outs[o]->lin || g->output_alias[o] != alias[o]) return 0;
  return 1;
}

int kiln_lin_binds(const kiln_lin *L, int n_out, kiln_node *const *outs, const int32_t *alias, const kiln_graph *g,
                   const kiln_symshape *s, const int64_t *v) {
  if ((uint32_t)g->n_nodes != L->n || (uint32_t)g->n_inputs != L->n_inputs || g->n_outputs != n_out ||
      s->n_nodes != g->n_nodes)
    return 0;
  for (int o = 0; o < n_out; o++)
    if (g->output_node[o] != outs[o]->lin || g->output_alias[o] != alias[o]) return 0;
  int64_t next_input = 0;
  for (uint32_t i = 0; i < L->n; i++) {
    const kiln_node *n = L->order[i];
    const kiln_gnode *a = &g->nodes[i];
    if (a->op != n->op || a->n_in != n->n_in || a->rank != n->rank) return 0;
    /* the node as kiln_lin_build would make it, read in place */
    kiln_node_view b = {n->op, n->dtype, n->rank, n->n_in, n->n_iattr, n->shape, n->iattr, n->fattr};
    if (n->op == KILN_OP_LEAF || n->op == KILN_OP_SCALAR) {
      b.n_iattr = 1;
      b.iattr = &next_input; /* its input number */
      b.fattr = 0.0; /* a SCALAR's value is an input, not compared; a LEAF's is 0 */
    }
    int ok = kiln_symshape_node_binds(g, s, v, (int32_t)i, &b, NULL);
    next_input += b.iattr == &next_input;
    if (!ok) return 0;
    const int32_t *in = g->in_idx + a->in_off;
    for (int k = 0; k < n->n_in; k++)
      if (in[k] != n->in[k]->lin) return 0;
  }
  return 1;
}

kiln_graph *kiln_lin_build(const kiln_lin *L, int n_out, kiln_node *const *outs, const int32_t *alias) {
  int32_t n_in_idx = 0;
  for (uint32_t i = 0; i < L->n; i++) n_in_idx += L->order[i]->n_in;
  kiln_graph *g = kiln_graph_alloc_unset((int32_t)L->n, n_in_idx, (int32_t)L->n_inputs, n_out);
  if (!g) return NULL;
  int32_t off = 0, next_input = 0;
  for (uint32_t i = 0; i < L->n; i++) {
    const kiln_node *n = L->order[i];
    kiln_gnode *m = &g->nodes[i];
    memset(m, 0, sizeof *m); /* the whole node, in the same pass as its fields */
    m->op = n->op;
    m->dtype = n->dtype;
    m->rank = n->rank;
    m->n_in = n->n_in;
    m->in_off = off;
    memcpy(m->shape, n->shape, sizeof(int64_t) * n->rank);
    m->loc = n->loc;
    m->scope = n->scope;
    if (n->op == KILN_OP_LEAF || n->op == KILN_OP_SCALAR) {
      m->n_iattr = 1;
      m->iattr[0] = next_input;
      g->input_node[next_input++] = (int32_t)i;
      m->fattr = n->op == KILN_OP_SCALAR
                     ? (kiln_dt_is_float(n->dtype) ? n->fattr : (double)n->ival)
                     : 0.0;
    } else {
      m->n_iattr = n->n_iattr;
      memcpy(m->iattr, n->iattr, sizeof(int64_t) * n->n_iattr);
      m->fattr = n->fattr;
    }
    for (int k = 0; k < n->n_in; k++) g->in_idx[off++] = n->in[k]->lin;
  }
  for (int o = 0; o < n_out; o++) {
    g->output_node[o] = outs[o]->lin;
    g->output_alias[o] = alias[o];
  }
  return g; /* hash 0: the runtime keys graphs by the trace's own hash */
}

void kiln_lin_free(kiln_lin *L) {
  free(L->order);
  free(L->inputs);
  free(L->stack);
  memset(L, 0, sizeof *L);
}
