/* The passes of a new size of a family (docs/dynamic-shapes.md, "What a
 * new size costs"): the graph through the passes taken from the family's,
 * at the new sizes, instead of running the passes again.
 *
 * When a graph whose input dimensions vary first goes through the passes,
 * a memo keeps it (traced: t0, and its symbolic sizes st) beside its result
 * (o0, so). The memo serves only when the passes commute with the sizes:
 * the traced graph is instantiated at two sets of symbol values that are
 * distinct primes above every size (no size coincides with another or with
 * a constant, kiln_symshape_primes), each instance goes through the passes,
 * and the result must be o0 at those sizes (kiln_symshape_bind: every node,
 * op, attribute, constant and size). A pass whose result depends on a size
 * other than through the family's symbols (a constant folded from a size,
 * a rewrite that holds at one size only) fails the check, and the memo then
 * only says "run the passes".
 *
 * A later graph that binds to a memo's traced graph (the same check, on the
 * traced graph) is an instance of t0 at its own symbol values; its result is
 * o0 instantiated at the values of o0's symbols, read from the new graph's
 * inputs. A size at which two sizes happen to coincide may let the passes
 * find more to simplify: the instance skips that simplification, it does
 * not compute anything else. The backend binds the result to its family as
 * before. */
#include <stdlib.h>
#include <string.h>

#include "base/counters.h"
#include "passes/passes.h"
#include "runtime/runtime_internal.h"

typedef struct pass_memo {
  kiln_graph *t0, *o0;
  kiln_symshape st, so;
  int ok; /* the passes commute with the sizes: later instances take o0's */
  const void *backend_family; /* the backend's family o0's compile made (kiln_family_hint), or NULL */
  /* o0 taken to each new size in place and lent to that size's compile
   * (kiln_dyn_family.lent), instead of a new instance per size: only the
   * sized nodes' sizes are rewritten */
  kiln_graph *scratch;
  kiln_sym_resize *sized; /* what a resize rewrites (kiln_symshape_resize_list) */
  int32_t n_sized;
  int busy;
  int inputs_alike; /* 1: o0's inputs are t0's, dimension for dimension (inputs_alike) */
} pass_memo;

/* Memos kept; beyond, graphs go through the passes as before. */
#define KILN_PASS_MEMOS 64

struct kiln_pass_memos {
  pass_memo v[KILN_PASS_MEMOS];
  int n;
};

static void memo_clear(pass_memo *m) {
  kiln_graph_free(m->t0);
  kiln_graph_free(m->o0);
  kiln_graph_free(m->scratch);
  free(m->sized);
  kiln_symshape_clear(&m->st);
  kiln_symshape_clear(&m->so);
  memset(m, 0, sizeof *m);
}

void kiln_pass_memos_free(kiln_pass_memos *p) {
  if (!p) return;
  for (int i = 0; i < p->n; i++) memo_clear(&p->v[i]);
  free(p);
}

/* Whether o (through the passes) reads inputs of g's sizes and writes
 * outputs of g's: what the runtime binds to its buffers. Commuting passes
 * ensure it; checked anyway, since a size that differed would be a buffer
 * of another size. */
static int same_ends(const kiln_graph *o, const kiln_graph *g) {
  if (o->n_inputs != g->n_inputs || o->n_outputs != g->n_outputs) return 0;
  for (int32_t k = 0; k < g->n_inputs + g->n_outputs; k++) {
    const kiln_gnode *a = k < g->n_inputs ? &o->nodes[o->input_node[k]] : &o->nodes[o->output_node[k - g->n_inputs]];
    const kiln_gnode *b = k < g->n_inputs ? &g->nodes[g->input_node[k]] : &g->nodes[g->output_node[k - g->n_inputs]];
    if (a->rank != b->rank || a->dtype != b->dtype || memcmp(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->rank))
      return 0;
  }
  return 1;
}

/* Whether the passes of t0 at the symbol values vt give o0 at its own. */
static int commutes_at(const pass_memo *m, const int64_t *vt) {
  kiln_graph *t = kiln_symshape_instance(m->t0, &m->st, vt), *o = NULL;
  int ok = 0;
  kiln_pass_stats ps = {0};
  kiln_err e = {0};
  int64_t vo[KILN_SYM_MAX], got[KILN_SYM_MAX];
  if (t && kiln_passes_run(t, &o, &ps, &e) == KILN_OK && kiln_symshape_values(&m->so, t, vo) &&
      kiln_symshape_bind(m->o0, &m->so, o, got, NULL)) {
    ok = 1;
    for (int k = 0; k < m->so.n_syms; k++) ok &= got[k] == vo[k];
  }
  kiln_graph_free(t);
  kiln_graph_free(o);
  return ok;
}

void kiln_pass_memo_made_family(pass_memo *m, const void *family) { m->backend_family = family; }

void kiln_pass_memo_give_back(kiln_dyn_family *fam) {
  if (fam && fam->lent) fam->lent->busy = 0;
  if (fam) fam->lent = NULL;
}

/* o0 at the values vo: the memo's scratch graph resized and lent (fam->lent),
 * when the caller can give it back and it is free; else a new instance. */
static kiln_graph *instance_of(pass_memo *m, const int64_t *vo, kiln_dyn_family *fam) {
  if (fam && !m->busy) {
    if (!m->scratch) {
      int32_t n = kiln_symshape_resize_list(&m->so, NULL);
      free(m->sized); /* of a scratch that overflowed */
      m->sized = malloc(sizeof *m->sized * ((size_t)n + 1));
      m->scratch = m->sized ? kiln_graph_clone(m->o0) : NULL;
      if (m->scratch) m->n_sized = kiln_symshape_resize_list(&m->so, m->sized);
    }
    if (m->scratch && kiln_symshape_resize(m->scratch, &m->so, m->sized, m->n_sized, vo)) {
      m->busy = 1;
      fam->lent = m;
      return m->scratch;
    }
    kiln_graph_free(m->scratch); /* a size overflowed: made again next time */
    m->scratch = NULL;
  }
  return kiln_symshape_instance(m->o0, &m->so, vo);
}

static int inputs_alike(const pass_memo *m);

/* A memo for traced graph g and its result opt (dyn: the varying input
 * dimensions), returned; NULL when out of memory or without a symbol (the
 * passes run). */
static pass_memo *memo_add(kiln_runtime *rt, const kiln_graph *g, const kiln_graph *opt, int n_dyn,
                           const kiln_sym_origin *dyn) {
  if (!rt->pmemo) rt->pmemo = calloc(1, sizeof *rt->pmemo);
  kiln_pass_memos *p = rt->pmemo;
  if (!p || p->n >= KILN_PASS_MEMOS) return NULL;
  pass_memo *m = &p->v[p->n];
  kiln_err e = {0};
  m->t0 = kiln_graph_clone(g);
  m->o0 = kiln_graph_clone(opt);
  if (!m->t0 || !m->o0 || kiln_symshape_infer(g, n_dyn, dyn, &m->st, &e) != KILN_OK ||
      kiln_symshape_infer(opt, n_dyn, dyn, &m->so, &e) != KILN_OK || m->st.n_syms == 0 || m->so.n_syms == 0) {
    memo_clear(m);
    return NULL;
  }
  int64_t pa[KILN_SYM_MAX], pb[KILN_SYM_MAX];
  kiln_symshape_primes(g, &m->st, 0, pa, pb);
  m->ok = commutes_at(m, pa) && commutes_at(m, pb);
  m->inputs_alike = inputs_alike(m);
  p->n++; /* kept either way: a failed memo answers its family's later graphs at once */
  return m;
}

kiln_status kiln_dynamic_passes(kiln_runtime *rt, const kiln_graph *g, int n_dyn, const kiln_sym_origin *dyn,
                                kiln_graph **out, kiln_dyn_family *fam, kiln_err *err) {
  *out = NULL;
  if (fam) fam->g = NULL, fam->backend_family = NULL, fam->made = NULL, fam->lent = NULL;
  kiln_pass_memos *p = rt->pmemo;
  pass_memo *found = NULL;
  int64_t vt[KILN_SYM_MAX];
  for (int i = 0; p && i < p->n && !found; i++) {
    pass_memo *m = &p->v[i];
    if (m->t0->n_nodes == g->n_nodes && m->t0->n_inputs == g->n_inputs && kiln_symshape_bind(m->t0, &m->st, g, vt, NULL))
      found = m;
  }
  int64_t vo[KILN_SYM_MAX];
  if (found && found->ok && kiln_symshape_values(&found->so, g, vo)) {
    *out = instance_of(found, vo, fam);
    if (*out && !same_ends(*out, g)) {
      if (fam && fam->lent) kiln_pass_memo_give_back(fam);
      else kiln_graph_free(*out);
      *out = NULL;
    }
    if (*out) {
      kiln_counter_add("DynamicPassesReused", 1);
      if (fam) {
        fam->g = found->t0;
        fam->s = &found->st;
        memcpy(fam->v, vt, sizeof vt[0] * (size_t)found->st.n_syms);
        fam->backend_family = found->backend_family;
        memcpy(fam->vo, vo, sizeof vo[0] * (size_t)found->so.n_syms);
      }
      return KILN_OK;
    } /* else a size overflows, or out of memory: the passes decide */
  }
  kiln_pass_stats ps = {0};
  kiln_status s = kiln_passes_run(g, out, &ps, err);
  if (s == KILN_OK && n_dyn > 0 && !found) {
    pass_memo *m = memo_add(rt, g, *out, n_dyn, dyn);
    if (fam) fam->made = m;
  }
  return s;
}

/* The symbol values of s read from the request's graph inputs (the trace);
 * 0 when an origin is not a LEAF input's dimension or a value is < 2. */
static int trace_values(const kiln_symshape *s, const kiln_input_view *iv, int64_t *v) {
  for (int k = 0; k < s->n_syms; k++) {
    kiln_gnode tmp;
    if (s->origin[k].input < 0 || s->origin[k].input >= iv->n) return 0;
    const kiln_gnode *x = iv->at(iv->ctx, s->origin[k].input, &tmp);
    if (x->op != KILN_OP_LEAF || s->origin[k].axis < 0 || s->origin[k].axis >= x->rank) return 0;
    v[k] = x->shape[s->origin[k].axis];
    if (v[k] < 2) return 0;
  }
  return 1;
}

/* Whether m's result takes the same inputs as its traced graph at every
 * size: the same symbols (from the same input dimensions) and, input for
 * input, the same op, dtype, rank and size expressions. Then a trace that
 * binds to t0 has o's inputs at o's values, and they need no comparing. */
static int inputs_alike(const pass_memo *m) {
  const kiln_graph *t = m->t0, *o = m->o0;
  if (t->n_inputs != o->n_inputs || m->st.n_syms != m->so.n_syms) return 0;
  for (int k = 0; k < m->st.n_syms; k++)
    if (m->st.origin[k].input != m->so.origin[k].input || m->st.origin[k].axis != m->so.origin[k].axis) return 0;
  for (int32_t k = 0; k < t->n_inputs; k++) {
    int32_t ti = t->input_node[k], oi = o->input_node[k];
    const kiln_gnode *a = &t->nodes[ti], *b = &o->nodes[oi];
    if (a->op != b->op || a->dtype != b->dtype || a->rank != b->rank) return 0;
    for (int d = 0; d < a->rank; d++) {
      const kiln_symdim *x = kiln_symshape_dim(&m->st, ti, d), *y = kiln_symshape_dim(&m->so, oi, d);
      if (x->mask != y->mask || x->mask2 != y->mask2 || (x->mask2 && x->coeff2 != y->coeff2) ||
          (x->mask ? x->coeff != y->coeff || x->add != y->add : a->shape[d] != b->shape[d]))
        return 0;
    }
  }
  return 1;
}

/* same_ends against the trace: o's inputs are the request's (op, dtype,
 * sizes; implied when the memo's are alike, inputs_alike) and its outputs
 * have the bytes the request allocates. */
static int same_ends_as_request(const pass_memo *m, const kiln_graph *o, const kiln_run_request *rq,
                                const kiln_input_view *iv) {
  if (o->n_inputs != iv->n || o->n_outputs != rq->n_out) return 0;
  for (int32_t k = 0; k < iv->n && !m->inputs_alike; k++) {
    kiln_gnode tmp;
    const kiln_gnode *a = &o->nodes[o->input_node[k]], *b = iv->at(iv->ctx, k, &tmp);
    if (a->op != b->op || a->rank != b->rank || a->dtype != b->dtype ||
        memcmp(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->rank))
      return 0;
  }
  for (int32_t k = 0; k < o->n_outputs; k++)
    if (kiln_gnode_bytes(&o->nodes[o->output_node[k]]) != rq->out_bytes[k]) return 0;
  return 1;
}

int kiln_dynamic_plan_from_trace(kiln_runtime *rt, const kiln_run_request *rq, kiln_graph **out,
                                 kiln_dyn_family *fam) {
  *out = NULL;
  fam->g = NULL, fam->backend_family = NULL, fam->made = NULL, fam->lent = NULL;
  kiln_pass_memos *p = rt->pmemo;
  if (!p || !rq->binds || !rq->input_node) return 0;
  kiln_input_view iv = kiln_request_inputs(rq);
  for (int i = 0; i < p->n; i++) {
    pass_memo *m = &p->v[i];
    int64_t vt[KILN_SYM_MAX], vo[KILN_SYM_MAX];
    if (m->t0->n_inputs != iv.n || !trace_values(&m->st, &iv, vt) || !rq->binds(rq->ctx, m->t0, &m->st, vt))
      continue;
    /* the first memo the trace binds to, as kiln_dynamic_passes finds it:
     * only one whose result made a backend family serves here */
    if (!m->ok || !m->backend_family || !trace_values(&m->so, &iv, vo)) return 0;
    kiln_graph *o = instance_of(m, vo, fam);
    if (!o) return 0;
    if (!same_ends_as_request(m, o, rq, &iv)) {
      if (fam->lent) kiln_pass_memo_give_back(fam);
      else kiln_graph_free(o);
      return 0;
    }
    kiln_counter_add("DynamicPassesReused", 1);
    fam->g = m->t0;
    fam->s = &m->st;
    memcpy(fam->v, vt, sizeof vt[0] * (size_t)m->st.n_syms);
    fam->backend_family = m->backend_family;
    memcpy(fam->vo, vo, sizeof vo[0] * (size_t)m->so.n_syms);
    *out = o;
    return 1;
  }
  return 0;
}