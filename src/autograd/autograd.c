/* Reverse-mode autograd over the step's trace: the requiring-grad table,
 * gradient accumulation, no-grad regions and the backward driver.
 *
 * Backward works on trace nodes, not tensors: the frontend lists every node
 * of the step in creation order (a topological order), so
 *   1. a forward sweep marks the nodes that depend on a requiring-grad
 *      tensor's node (only those need gradients),
 *   2. a reverse sweep from the loss applies each node's VJP rule (vjp.c),
 *      summing the gradients of nodes used several times,
 *   3. the gradient reaching a requiring-grad tensor's node is added into
 *      its kept gradient tensor.
 * Node positions live in a side table (a pointer hash map), not in the
 * nodes' linearization scratch fields, which the cut uses. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"
#include "kiln/autograd.h"
#include "runtime/events.h"

typedef struct ag_entry {
  kiln_tensor t;    /* the requiring-grad tensor */
  kiln_tensor grad; /* its gradient (kept), or {0,0} */
} ag_entry;

static struct {
  ag_entry *e;
  uint32_t n, cap;
  kiln_frontend *fe; /* the frontend the table belongs to */
} g_ag;

void kiln_autograd_reset(void) {
  free(g_ag.e);
  memset(&g_ag, 0, sizeof g_ag);
}

static void on_event(void *ctx, const kiln_event *ev) {
  (void)ctx;
  if (ev->kind == KILN_EV_STOP) kiln_autograd_reset();
}

void kiln_autograd_attach(void) { kiln_events_observe(on_event, NULL); }

static int handle_live(kiln_frontend *fe, kiln_tensor t) {
  return t.gen && t.index < fe->n_slots && fe->slots[t.index].live && fe->slots[t.index].gen == t.gen;
}

/* The frontend, with the table brought up to date: entries of released
 * tensors are dropped (with their gradients), and a table left from another
 * runtime instance is forgotten. */
static kiln_frontend *ag_frontend(void) {
  kiln_frontend *fe = kiln_api_frontend_at((kiln_loc){0});
  if (!fe) return NULL;
  if (g_ag.fe != fe) {
    g_ag.n = 0;
    g_ag.fe = fe;
  }
  uint32_t w = 0;
  for (uint32_t i = 0; i < g_ag.n; i++) {
    ag_entry *e = &g_ag.e[i];
    if (handle_live(fe, e->t)) {
      g_ag.e[w++] = *e;
    } else if (handle_live(fe, e->grad)) {
      kiln_release(e->grad);
    }
  }
  g_ag.n = w;
  return fe;
}

static ag_entry *find(kiln_tensor t) {
  for (uint32_t i = 0; i < g_ag.n; i++)
    if (g_ag.e[i].t.index == t.index && g_ag.e[i].t.gen == t.gen) return &g_ag.e[i];
  return NULL;
}

void kiln_requires_grad_at(kiln_tensor t, kiln_loc loc) {
  kiln_frontend *fe = ag_frontend();
  if (!fe) return;
  kiln_tslot *s = kiln_fe_slot(fe, t, "requires_grad", loc);
  if (!s || s->poisoned || find(t)) return;
  if (!kiln_dtype_is_float((kiln_dtype)s->dtype)) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "requires_grad: only floating-point tensors can require gradients, got %s",
               kiln_dtype_name(s->dtype));
    return;
  }
  if (g_ag.n == g_ag.cap) {
    uint32_t nc = g_ag.cap ? g_ag.cap * 2 : 32;
    ag_entry *ne = realloc(g_ag.e, nc * sizeof *ne);
    if (!ne) {
      kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "requires_grad: out of memory");
      return;
    }
    g_ag.e = ne;
    g_ag.cap = nc;
  }
  /* PyTorch records requires_grad when an op runs: the tensor's uses from now on are its gradient's
   * target, and nothing else. So it gets a node of its own (kiln_fe_own_node): uses traced before this
   * call keep the old node (no gradient), and no hash-consed twin (a kiln_zeros of the same shape,
   * another tensor on the same buffer) shares its node. A value read earlier in the step keeps its tape:
   * the gradient of the uses from now on still flows into what computed it (the earlier uses are not
   * collected: mark_needs follows only a tape that is the tensor's own node). A tensor whose node is
   * already an own node (another requiring-grad tensor's, when an op returned that tensor unchanged: a
   * reshape to the same shape, a full slice; or a detached copy) gets an identity node of its own on top
   * of it: sharing the node would give each of the two tensors the other's uses too, and the identity
   * still passes its uses' gradient on. */
  if (s->node) {
    kiln_node *base = s->node, *own = NULL;
    if (!base->own) {
      own = kiln_fe_own_node(fe, base, 0);
      if (own) own->tape = base->tape;
    } else {
      kiln_node *id = kiln_fe_node(fe, KILN_OP_RESHAPE, (kiln_dtype)base->dtype, base->rank, base->shape, 1,
                                   &base, 0, NULL, 0.0, loc);
      own = id ? kiln_fe_own_node(fe, id, 0) : NULL;
    }
    if (!own) {
      kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "requires_grad: out of memory");
      return;
    }
    s->node = own;
  }
  s->grad_own = 1;
  g_ag.e[g_ag.n++] = (ag_entry){t, {0, 0}};
}

kiln_tensor kiln_grad(kiln_tensor t) {
  kiln_frontend *fe = ag_frontend();
  ag_entry *e = fe ? find(t) : NULL;
  return e && handle_live(fe, e->grad) ? e->grad : (kiln_tensor){0, 0};
}

void kiln_zero_grad(kiln_tensor t) {
  kiln_frontend *fe = ag_frontend();
  ag_entry *e = fe ? find(t) : NULL;
  if (!e) return;
  if (handle_live(fe, e->grad)) kiln_release(e->grad);
  e->grad = (kiln_tensor){0, 0};
}

void kiln_no_grad_begin_at(kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (fe) fe->no_grad_depth++;
}

void kiln_no_grad_end_at(kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return;
  if (!fe->no_grad_depth) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "no_grad_end: not inside a no-grad region");
    return;
  }
  fe->no_grad_depth--;
}

bool kiln_grad_enabled(void) {
  kiln_frontend *fe = kiln_api_frontend_at((kiln_loc){0});
  return !fe || fe->no_grad_depth == 0;
}

/* ── backward ── */

/* Open-addressing map node -> position in fe->created. */
typedef struct posmap {
  kiln_node **key;
  uint32_t *val;
  uint32_t mask;
} posmap;

static uint32_t ptr_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (uint32_t)x;
}

static int posmap_build(posmap *m, kiln_node *const *nodes, uint32_t n) {
  uint32_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  m->key = calloc(cap, sizeof *m->key);
  m->val = malloc(cap * sizeof *m->val);
  m->mask = cap - 1;
  if (!m->key || !m->val) return -1;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t h = ptr_hash(nodes[i]) & m->mask;
    while (m->key[h] && m->key[h] != nodes[i]) h = (h + 1) & m->mask;
    m->key[h] = nodes[i];
    m->val[h] = i;
  }
  return 0;
}

static int64_t posmap_get(const posmap *m, const kiln_node *n) {
  uint32_t h = ptr_hash(n) & m->mask;
  while (m->key[h]) {
    if (m->key[h] == n) return m->val[h];
    h = (h + 1) & m->mask;
  }
  return -1;
}

static int64_t numel(const kiln_node *n) {
  int64_t e = 1;
  for (int i = 0; i < n->rank; i++) e *= n->shape[i];
  return e;
}

/* The state of one reverse sweep over the nodes created so far. */
typedef struct sweep {
  kiln_frontend *fe;
  uint32_t n;          /* nodes made by this pass come later and are not visited */
  posmap pm;           /* node -> position in created */
  uint8_t *needs;      /* per position: depends on a requiring-grad tensor */
  kiln_node **grads;   /* per position: the gradient so far */
  int64_t *epos;       /* per autograd entry: its node's position, or -1 */
  uint8_t *collect;    /* per position: some entry's gradient is collected there */
  kiln_loc loc;
} sweep;

/* 1. Which nodes depend on a requiring-grad tensor. */
static void mark_needs(sweep *w) {
  for (uint32_t k = 0; k < g_ag.n; k++) {
    kiln_tslot *s = &w->fe->slots[g_ag.e[k].t.index];
    w->epos[k] = s->poisoned || !s->node ? -1 : posmap_get(&w->pm, s->node);
    /* read this step after kiln_requires_grad: its LEAF stands for the tensor's own node the read
     * computed, which uses before the read reached; the gradient is collected there (the LEAF's passes
     * on to it). A tape that is not its own node was traced before kiln_requires_grad. */
    int64_t tp = w->epos[k] >= 0 && s->node->tape && s->node->tape->own ? posmap_get(&w->pm, s->node->tape) : -1;
    if (tp >= 0) w->epos[k] = tp;
    if (w->epos[k] >= 0) w->needs[w->epos[k]] = w->collect[w->epos[k]] = 1;
  }
  for (uint32_t i = 0; i < w->n; i++) {
    kiln_node *x = w->fe->created[i];
    uint8_t *needs = w->needs;
    if (x->op == KILN_OP_LEAF && x->tape) { /* a value read this step stands for its tape */
      int64_t p = posmap_get(&w->pm, x->tape);
      needs[i] = needs[i] || (p >= 0 && needs[p]);
      continue;
    }
    if (needs[i] || x->no_grad || !kiln_dtype_is_float((kiln_dtype)x->dtype) || !kiln_ag_differentiable(x->op))
      continue;
    for (int k = 0; k < x->n_in && !needs[i]; k++) {
      int64_t p = posmap_get(&w->pm, x->in[k]);
      needs[i] = p >= 0 && needs[p];
    }
  }
}

/* 1b. A value a requiring-grad tensor had before a kiln_assign of this
 * step is not a gradient target (the tensor's current value is): a loss
 * that depends on it would get a gradient without that use's part. Refuse
 * it, as PyTorch refuses a backward through a tensor modified in place.
 * Dependence is traced as in mark_needs, stopping at the tensors' current
 * values (an update p = p - lr * g is the new value, not a use of the old). */
static kiln_status check_replaced(sweep *w, int64_t po) {
  kiln_frontend *fe = w->fe;
  uint32_t *from = NULL; /* per position: 1 + the kiln_replaced entry it depends on, or 0 */
  kiln_status st = KILN_OK;
  for (uint32_t r = 0; r < fe->n_replaced; r++) {
    const kiln_replaced *rp = &fe->replaced[r];
    if (!find((kiln_tensor){rp->index, rp->gen})) continue;
    int64_t p = posmap_get(&w->pm, rp->old);
    if (p < 0 || p > po) continue;
    if (!from && !(from = calloc((size_t)po + 1, sizeof *from)))
      return kiln_error(KILN_ERR_OUT_OF_MEMORY, w->loc, "backward: out of memory");
    if (!from[p]) from[p] = r + 1;
  }
  if (!from) return KILN_OK;
  uint8_t *current = calloc((size_t)po + 1, 1);
  if (!current) {
    free(from);
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, w->loc, "backward: out of memory");
  }
  for (uint32_t k = 0; k < g_ag.n; k++)
    if (w->epos[k] >= 0 && w->epos[k] <= po) current[w->epos[k]] = 1;
  for (int64_t i = 0; i <= po; i++) {
    kiln_node *x = fe->created[i];
    if (from[i] || current[i]) continue;
    if (x->op == KILN_OP_LEAF && x->tape) {
      int64_t p = posmap_get(&w->pm, x->tape);
      if (p >= 0 && p < i) from[i] = from[p];
      continue;
    }
    if (x->no_grad || !kiln_dtype_is_float((kiln_dtype)x->dtype) || !kiln_ag_differentiable(x->op)) continue;
    for (int k = 0; k < x->n_in && !from[i]; k++) {
      int64_t p = posmap_get(&w->pm, x->in[k]);
      if (p >= 0 && p < i) from[i] = from[p];
    }
  }
  if (from[po]) {
    const kiln_replaced *rp = &fe->replaced[from[po] - 1];
    const kiln_tslot *s = &fe->slots[rp->index];
    char sa[128];
    st = kiln_error(KILN_ERR_INVALID_ARGUMENT, w->loc,
                    "backward: the output depends on the value a tensor that requires grad (%s %s) had before "
                    "kiln_assign at %s:%d replaced it; its gradient would miss that use (call kiln_backward before "
                    "assigning new values to what it differentiates)",
                    kiln_dtype_name(s->dtype), kiln_fe_shape_str(s->rank, s->shape, sa, sizeof sa),
                    rp->loc.file ? rp->loc.file : "?", rp->loc.line);
  }
  free(from);
  free(current);
  return st;
}

/* Add gradient g into position p's (the first one is taken as is). 0, or -1
 * when out of memory. */
static int add_grad(sweep *w, int64_t p, kiln_node *g) {
  if (!w->grads[p]) {
    w->grads[p] = g;
    return 0;
  }
  kiln_node *in2[2] = {w->grads[p], g};
  w->grads[p] = kiln_fe_node(w->fe, KILN_OP_ADD, (kiln_dtype)g->dtype, g->rank, g->shape, 2, in2, 0, NULL, 0.0, w->loc);
  return w->grads[p] ? 0 : -1;
}

/* Send gradient gk of x's input k on to that input. A matmul gradient
 * headed for a transpose (a Linear layer's weight, used as x @ W^T) goes to
 * the transposed tensor directly as one GEMM in its own layout: otherwise
 * every consumer of the gradient (the optimizer update) would read it
 * through a transpose, with strided loads. The chain rule is linear, so W's
 * other contributions still arrive through the PERMUTE node. Not when the
 * transpose is itself a requiring-grad tensor's node: its gradient is
 * collected there. */
static int send_input_grad(sweep *w, kiln_node *x, int k, kiln_node *gk) {
  kiln_node *dst = x->in[k];
  int64_t pd = posmap_get(&w->pm, dst);
  if (gk->op == KILN_OP_MATMUL && kiln_ag_is_swap_last2(dst) && pd >= 0 && !w->collect[pd]) {
    int64_t pw = posmap_get(&w->pm, dst->in[0]);
    if (pw >= 0 && w->needs[pw]) {
      kiln_node *t = kiln_ag_transposed_matmul(w->fe, gk, w->loc);
      if (t) {
        pd = pw;
        gk = t;
      }
    }
  }
  return add_grad(w, pd, gk);
}

/* x's vector-Jacobian product with its gradient g, sent to the inputs that
 * need one. 0, or -1 (an error is recorded, or it was out of memory). */
static int backprop_node(sweep *w, kiln_node *x, kiln_node *g) {
  uint8_t wbuf[16];
  kiln_node *gbuf[16];
  uint8_t *want = x->n_in <= 16 ? wbuf : malloc(x->n_in);
  kiln_node **gin = x->n_in <= 16 ? gbuf : malloc(sizeof *gin * x->n_in);
  int any = 0, rc = -1;
  if (want && gin) {
    for (int k = 0; k < x->n_in; k++) {
      int64_t p = posmap_get(&w->pm, x->in[k]);
      want[k] = p >= 0 && w->needs[p];
      any |= want[k];
    }
    rc = any ? kiln_ag_vjp(w->fe, x, g, want, gin, w->loc) : 0;
    for (int k = 0; any && !rc && k < x->n_in; k++)
      if (gin[k]) rc = send_input_grad(w, x, k, gin[k]);
  }
  if (want != wbuf) free(want);
  if (gin != gbuf) free(gin);
  return rc;
}

/* 2. The reverse sweep from position po. */
static kiln_status reverse_sweep(sweep *w, int64_t po) {
  for (int64_t i = po; i >= 0; i--) {
    /* through fe: the sweep appends gradient nodes to fe->created, which may move it */
    kiln_node *x = w->fe->created[i], *g = w->grads[i];
    if (g && x->op == KILN_OP_LEAF && x->tape) { /* on to the node the read computed (made earlier) */
      int64_t p = posmap_get(&w->pm, x->tape);
      if (p >= 0 && w->needs[p] && add_grad(w, p, g))
        return kiln_error(KILN_ERR_OUT_OF_MEMORY, w->loc, "backward: out of memory");
      continue;
    }
    if (!g || x->no_grad || !kiln_ag_differentiable(x->op)) continue;
    if (backprop_node(w, x, g))
      return kiln_last_status() != KILN_OK ? kiln_last_status()
                                           : kiln_error(KILN_ERR_OUT_OF_MEMORY, w->loc, "backward: out of memory");
  }
  return KILN_OK;
}

/* 3. Accumulate into the gradient tensors. */
static void accumulate_grads(sweep *w) {
  for (uint32_t k = 0; k < g_ag.n; k++) {
    if (w->epos[k] < 0 || !w->grads[w->epos[k]]) continue;
    ag_entry *e = &g_ag.e[k];
    kiln_tensor g = kiln_fe_tensor(w->fe, w->grads[w->epos[k]], w->loc);
    if (handle_live(w->fe, e->grad)) {
      kiln_assign_at(e->grad, kiln_add_at(e->grad, g, w->loc), w->loc);
    } else {
      e->grad = kiln_keep(g);
    }
  }
}

/* The reverse sweep proper; out and seed are resolved nodes. */
static kiln_status run_backward(kiln_frontend *fe, kiln_node *out, kiln_node *seed, kiln_loc loc) {
  sweep w = {.fe = fe, .n = fe->n_created, .loc = loc};
  w.needs = calloc(w.n ? w.n : 1, 1);
  w.grads = calloc(w.n ? w.n : 1, sizeof *w.grads);
  w.epos = calloc(g_ag.n ? g_ag.n : 1, sizeof *w.epos);
  w.collect = calloc(w.n ? w.n : 1, 1);
  kiln_status st = KILN_OK;
  if (!w.needs || !w.grads || !w.epos || !w.collect || posmap_build(&w.pm, fe->created, w.n)) {
    st = kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "backward: out of memory");
    goto done;
  }
  mark_needs(&w);
  int64_t po = posmap_get(&w.pm, out);
  if (po >= 0 && !w.needs[po] && out->op == KILN_OP_LEAF && !out->tape) {
    /* data, or a kept value of an earlier step: its graph ended at that step marker */
    st = kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                    "backward: the output is a computed value with no graph in this step (a tensor kept from an "
                    "earlier step: its graph ended at that kiln_mark_step; call kiln_backward before the marker)");
    goto done;
  }
  if (po < 0 || !w.needs[po]) {
    st = kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                    "backward: the output does not depend on any tensor that requires grad (mark parameters with "
                    "kiln_requires_grad; no gradient flows through no-grad regions, integer tensors or comparisons)");
    goto done;
  }
  st = check_replaced(&w, po);
  if (st != KILN_OK) goto done;
  w.grads[po] = seed;
  st = reverse_sweep(&w, po);
  if (st == KILN_OK) accumulate_grads(&w);
done:
  free(w.pm.key);
  free(w.pm.val);
  free(w.needs);
  free(w.grads);
  free(w.epos);
  free(w.collect);
  return st;
}

static kiln_status backward(kiln_tensor out, const kiln_tensor *seed, kiln_loc loc) {
  kiln_frontend *fe = ag_frontend();
  if (!fe) return kiln_last_status();
  kiln_node *on = NULL, *sn = NULL;
  kiln_tslot *os = NULL;
  int r = kiln_api_input(fe, out, "backward", loc, &os, &on);
  if (r) return r < 0 ? kiln_last_status() : kiln_last_status() ? kiln_last_status() : KILN_ERR_INVALID_ARGUMENT;
  (void)os; /* a loss read earlier in this step is a LEAF whose tape leads on */
  char sa[128], sb[128];
  kiln_dtype dt = (kiln_dtype)on->dtype;
  if (!kiln_dtype_is_float(dt))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "backward: the output must be floating-point, got %s",
                      kiln_dtype_name(dt));
  if (!seed) {
    if (numel(on) != 1)
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                        "backward: the loss has shape %s (%lld elements); backward without a seed needs a "
                        "one-element loss (reduce it, or pass a seed gradient with kiln_backward_with)",
                        kiln_fe_shape_str(on->rank, on->shape, sa, sizeof sa), (long long)numel(on));
    sn = kiln_api_const(fe, dt, on->rank, on->shape, 1.0, loc);
  } else {
    r = kiln_api_input(fe, *seed, "backward", loc, NULL, &sn);
    if (r) return kiln_last_status() ? kiln_last_status() : KILN_ERR_INVALID_ARGUMENT;
    if (!kiln_dtype_is_float((kiln_dtype)sn->dtype) || sn->rank != on->rank ||
        memcmp(sn->shape, on->shape, sizeof(int64_t) * on->rank))
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                        "backward: the seed (%s %s) must be a floating-point tensor of the output's shape %s",
                        kiln_dtype_name(sn->dtype), kiln_fe_shape_str(sn->rank, sn->shape, sb, sizeof sb),
                        kiln_fe_shape_str(on->rank, on->shape, sa, sizeof sa));
    sn = kiln_api_cast(fe, sn, dt, loc);
  }
  if (!sn) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "backward: out of memory");
  return run_backward(fe, on, sn, loc);
}

kiln_status kiln_backward_at(kiln_tensor loss, kiln_loc loc) { return backward(loss, NULL, loc); }

kiln_status kiln_backward_with_at(kiln_tensor out, kiln_tensor seed, kiln_loc loc) {
  return backward(out, &seed, loc);
}
