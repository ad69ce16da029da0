/* The schedule builder's driver, and which nodes must be materialized
 * (kernel boundaries). Fusion is in schedule_fuse.c, memory planning in
 * schedule_mem.c; schedule_internal.h describes the stages. */
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "base/counters.h"
#include "schedule/schedule_internal.h"

int kiln_sched_shape_is(const kiln_graph *g, const kiln_skernel *k, int32_t n, kiln_sctx c) {
  const kiln_gnode *x = N(g, n);
  if (x->rank != k->rank) return 0;
  for (int d = 0; d < k->rank; d++) {
    int64_t want = (c == KILN_SCTX_RS && (k->mask >> d & 1)) ? 1 : k->shape[d];
    if (x->shape[d] != want) return 0;
  }
  return 1;
}

kiln_sctx kiln_sched_input_ctx(const kiln_graph *g, const kiln_skernel *k, int32_t n, int input_no, kiln_sctx c) {
  const kiln_gnode *x = N(g, n);
  int32_t in = IN(g, n, input_no);
  if (c == KILN_SCTX_OTHER) return c;
  if (kiln_op_is_elementwise(x->op)) return c;
  if (x->op == KILN_OP_RESHAPE || x->op == KILN_OP_EXPAND) {
    const kiln_gnode *y = N(g, in);
    if (same_shape(x->rank, x->shape, y->rank, y->shape)) return c;
    /* a broadcast of a row value over the inner axes stays on the row */
    if (x->op == KILN_OP_EXPAND && c == KILN_SCTX_F && k->row && kiln_sched_shape_is(g, k, in, KILN_SCTX_RS))
      return KILN_SCTX_RS;
  }
  return KILN_SCTX_OTHER;
}

/* ───────────── what must be materialized ───────────── */

/* dead nodes (not reaching an output) are ignored: the passes usually
 * remove them, but the backend must not depend on it */
static kiln_status mark_live(bld *b) {
  const kiln_graph *g = b->g;
  for (int32_t o = 0; o < g->n_outputs; o++) b->live[g->output_node[o]] = 1;
  for (int32_t n = g->n_nodes - 1; n >= 0; n--) {
    const kiln_gnode *x = N(g, n);
    if (x->op >= KILN_OP_COUNT) return kiln_err_set(b->err, KILN_ERR_UNSUPPORTED, "schedule: unknown op");
    if (b->live[n])
      for (int i = 0; i < x->n_in; i++) b->live[IN(g, n, i)] = 1;
  }
  return KILN_OK;
}

/* uses, and the nodes that must be materialized: outputs, leaves,
 * reductions, scans, matmuls and the buffers their GEMM reads */
static kiln_status mark_uses(bld *b) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    const kiln_gnode *x = N(g, n);
    if (!b->live[n]) continue;
    for (int i = 0; i < x->n_in; i++) b->uses[IN(g, n, i)]++;
    if (x->op == KILN_OP_MATMUL) {
      if (!(KILN_DT_CONTRACT >> x->dtype & 1))
        return kiln_err_set(b->err, KILN_ERR_UNSUPPORTED, "schedule: matmul on %s", kiln_dtype_name(x->dtype));
      s->mat[n] = 1;
      for (int i = 0; i < 2; i++) {
        kiln_sgemm_operand op;
        kiln_sched_gemm_operand(g, IN(g, n, i), &op);
        s->mat[op.node] = 1;
      }
    }
    if (is_reduce(x->op) || is_scan(x->op) || x->op == KILN_OP_LEAF || is_line(x->op)) s->mat[n] = 1;
    if (is_coll(x->op)) s->mat[n] = s->mat[IN(g, n, 0)] = 1;
  }
  for (int32_t o = 0; o < g->n_outputs; o++) {
    b->uses[g->output_node[o]]++;
    s->mat[g->output_node[o]] = 1;
  }
  return KILN_OK;
}

/* The op table's COST column: what recomputing one element costs. */
static int32_t node_cost(const kiln_graph *g, int32_t n) { return kiln_op_table[N(g, n)->op].cost; }

/* spread[n]: n is read through a broadcast that repeats each element
 * (an EXPAND, possibly behind reshapes and permutes), e.g. a pooling
 * window's gradient spread over the window. Fused there, every element
 * would be recomputed once per repeat. */
static void mark_spread(bld *b) {
  const kiln_graph *g = b->g;
  for (int32_t n = g->n_nodes - 1; n >= 0; n--) {
    const kiln_gnode *x = N(g, n);
    if (!b->live[n] || x->n_in < 1) continue;
    int32_t in = IN(g, n, 0);
    if (x->op == KILN_OP_EXPAND && kiln_gnode_numel(x) >= 2 * kiln_gnode_numel(N(g, in))) b->spread[in] = 1;
    if ((x->op == KILN_OP_RESHAPE || x->op == KILN_OP_PERMUTE) && b->spread[n]) b->spread[in] = 1;
  }
}

/* Materialize the inlined nodes too costly to recompute where read. */
static void mark_costly(bld *b) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    if (s->mat[n] || !b->live[n]) continue;
    const kiln_gnode *x = N(g, n);
    int32_t c = node_cost(g, n);
    for (int i = 0; i < x->n_in; i++) {
      int32_t in = IN(g, n, i);
      if (!s->mat[in]) c += b->cost[in];
    }
    b->cost[n] = c;
    /* recomputing a shared subtree is cheaper than a round trip through
     * memory only while it is small; the cap also bounds expression size */
    if ((b->uses[n] >= 2 && c > 8) || c > 64 || (b->spread[n] && c > 8)) s->mat[n] = 1;
  }
}

/* ───────────── the driver ───────────── */

void kiln_sched_free(kiln_sched *s) {
  if (!s) return;
  if (s->lent_by) { /* a template's spare: back to it */
    __atomic_store_n(&s->lent_by->busy, 0, __ATOMIC_RELEASE);
    return;
  }
  if (s->spare) {
    if (s->spare->s) s->spare->s->lent_by = NULL;
    kiln_sched_free(s->spare->s);
    free(s->spare);
  }
  for (int32_t i = 0; i < s->n_kernels; i++) {
    if (i >= s->borrowed) free(s->kernels[i].members);
    if (i >= s->borrowed || !s->stores_borrowed) free(s->kernels[i].stores);
  }
  free(s->kernels);
  free(s->buf_of);
  free(s->input_buf);
  free(s->owner);
  free(s->mat);
  free(s->bufs);
  free(s->buf_node);
  free(s->node_uses);
  free(s->sharers);
  free(s);
}

/* A schedule of g with its per-node arrays, and its builder (tmp: the
 * builder's per-node scratch, freed by the caller; tmp NULL: no scratch,
 * for a later size of a family, which copies the arrays from its template
 * and reads the template's reader counts). */
static kiln_status sched_alloc(const kiln_graph *g, kiln_err *err, kiln_sched **sp, bld *b, int32_t **tmp) {
  const int32_t nn = g->n_nodes;
  *sp = NULL;
  kiln_sched *s = calloc(1, sizeof *s);
  if (!s) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  s->g = g;
  s->buf_of = malloc(sizeof *s->buf_of * (size_t)(nn + 1));
  s->owner = malloc(sizeof *s->owner * (size_t)(nn + 1));
  s->mat = tmp ? calloc((size_t)nn + 1, 1) : malloc((size_t)nn + 1);
  s->input_buf = calloc((size_t)g->n_inputs + 1, sizeof *s->input_buf);
  int32_t *t = tmp ? calloc((size_t)nn * 6 + 1, sizeof *t) : NULL;
  if (!s->buf_of || !s->owner || !s->mat || !s->input_buf || (tmp && !t)) {
    free(t);
    kiln_sched_free(s);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  }
  *b = (bld){.g = g, .s = s, .err = err};
  if (tmp) {
    *tmp = t;
    b->uses = t, b->cost = t + nn, b->need = t + 2 * nn, b->live = t + 3 * nn, b->spread = t + 4 * nn;
    b->upd = t + 5 * nn;
    for (int32_t i = 0; i < nn; i++) s->buf_of[i] = s->owner[i] = -1;
  }
  *sp = s;
  return KILN_OK;
}

/* The memory plan of b's fused kernels (when st is OK so far), the
 * builder's scratch freed, and the schedule in *out or freed. */
static kiln_status sched_finish(kiln_status st, bld *b, int32_t *tmp, kiln_sched **out) {
  if (st == KILN_OK) st = kiln_sched_plan_memory(b);
  free(tmp);
  if (st != KILN_OK) {
    kiln_sched_free(b->s);
    return st;
  }
  *out = b->s;
  return KILN_OK;
}

kiln_status kiln_sched_build(const kiln_graph *g, kiln_sched **out, kiln_err *err) {
  *out = NULL;
  kiln_sched *s;
  bld b;
  int32_t *tmp;
  kiln_status st = sched_alloc(g, err, &s, &b, &tmp);
  if (st != KILN_OK) return st;
  st = mark_live(&b);
  if (st == KILN_OK) st = mark_uses(&b);
  if (st == KILN_OK) { /* kept for the later sizes of a family (kiln_sched_build_like) */
    s->node_uses = malloc(sizeof *s->node_uses * ((size_t)g->n_nodes + 1));
    if (s->node_uses) memcpy(s->node_uses, b.uses, sizeof *s->node_uses * (size_t)g->n_nodes);
    s->spare = calloc(1, sizeof *s->spare); /* none: each later size a schedule of its own */
  }
  if (st == KILN_OK) {
    mark_spread(&b);
    mark_costly(&b);
    st = kiln_sched_fuse(&b);
  }
  return sched_finish(st, &b, tmp, out);
}

/* kiln_sched_build_like with t's memory plan resized (like: see
 * kiln_sched_plan_like; *fits 0 when it does not fit, nothing made) or made
 * from scratch (like 0). */
static kiln_status build_like(const kiln_sched *t, const kiln_graph *g, int like, int *fits, kiln_sched **out,
                              kiln_err *err) {
  *out = NULL;
  *fits = 1;
  const kiln_graph *tg = t->g;
  if (g->n_nodes != tg->n_nodes || g->n_inputs != tg->n_inputs || g->n_outputs != tg->n_outputs)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "schedule: the graph is not an instance of the template's");
  kiln_sched *s;
  bld b;
  int32_t *tmp = NULL;
  /* a plan resized needs a template that keeps its reader counts (GEMM
   * updates read them; they follow the structure) and a plan that resizes:
   * without, *fits 0 (planned from scratch). It takes no builder scratch. */
  if (like && (!t->node_uses || !t->resizable)) {
    *fits = 0;
    return KILN_OK;
  }
  /* a later size is made in the template's spare when no other size holds
   * it (the first such size allocates it); clean, only sizes are rewritten */
  kiln_sched_spare *sp = like ? t->spare : NULL;
  if (sp && __atomic_exchange_n(&sp->busy, 1, __ATOMIC_ACQUIRE)) sp = NULL;
  kiln_status st = KILN_OK;
  if (sp && sp->s) {
    s = sp->s;
    s->g = g;
    b = (bld){.g = g, .s = s, .err = err, .clean = sp->clean, .kcap = sp->kcap};
    sp->clean = 0; /* until this resize is whole */
  } else {
    st = sched_alloc(g, err, &s, &b, like ? NULL : &tmp);
    if (st != KILN_OK) {
      if (sp) __atomic_store_n(&sp->busy, 0, __ATOMIC_RELEASE);
      return st;
    }
    if (sp) {
      sp->s = s;
      s->lent_by = sp;
    }
  }
  int32_t nk = 0; /* the fused kernels: the end copies follow them */
  while (nk < t->n_kernels && t->kernels[nk].kind != KILN_SK_COPY) nk++;
  if (like) {
    b.uses = t->node_uses;
  } else {
    st = mark_live(&b);
    if (st == KILN_OK) st = mark_uses(&b);
  }
  if (st == KILN_OK && !b.clean) {
    memcpy(s->mat, t->mat, (size_t)g->n_nodes);
    memcpy(s->owner, t->owner, sizeof *s->owner * (size_t)g->n_nodes);
    if (!s->kernels) { /* each copied from t below */
      s->kernels = malloc(sizeof *s->kernels * ((size_t)nk + 1));
      b.kcap = nk + 1;
    }
    s->borrowed = nk;
    if (!s->kernels) st = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  }
  s->n_kernels = 0;
  s->n_gemm_calls = 0;
  for (int32_t p = 0; p < nk && st == KILN_OK; p++) {
    kiln_skernel *k = &s->kernels[p];
    if (!b.clean) {
      *k = t->kernels[p]; /* its members borrowed from t (s->borrowed) */
      k->n_stores = 0;
      k->stores = NULL;
    }
    s->n_kernels = p + 1;
    if (k->kind == KILN_SK_GEMM) {
      s->n_gemm_calls++;
      if (!kiln_sched_gemm_refresh(&b, k))
        st = kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "schedule: GEMM %d reads other nodes at these sizes", p);
    } else if (k->kind == KILN_SK_LOOP) { /* the domain at g's sizes (fill_loop_kernel) */
      const kiln_gnode *x = N(g, k->seed);
      const kiln_gnode *dom = k->row && !k->line ? N(g, IN(g, k->seed, 0)) : x;
      if (dom->rank != k->rank)
        st = kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "schedule: kernel %d has another rank", p);
      memcpy(k->shape, dom->shape, sizeof k->shape);
    }
  }
  if (!like) return sched_finish(st, &b, tmp, out);
  if (st == KILN_OK) st = kiln_sched_plan_like(&b, t, nk, fits);
  free(tmp);
  if (sp) sp->kcap = b.kcap;
  if (st != KILN_OK || !*fits) {
    kiln_sched_free(s); /* a spare goes back unclean */
    return st;
  }
  if (sp) sp->clean = 1;
  *out = s;
  return KILN_OK;
}

kiln_status kiln_sched_build_like(const kiln_sched *t, const kiln_graph *g, kiln_sched **out, kiln_err *err) {
  int fits = 0;
  kiln_status st = build_like(t, g, 1, &fits, out, err);
  if (st != KILN_OK || fits) return st;
  kiln_counter_add("DynamicPlanMemoryRedone", 1); /* a size the template's plan does not fit: its own plan */
  return build_like(t, g, 0, &fits, out, err);
}

/* Two int32 lists equal (the same pointer counts: borrowed members). */
static int same_list(int32_t n, const int32_t *a, const int32_t *b) {
  return a == b || n == 0 || memcmp(a, b, sizeof *a * (size_t)n) == 0;
}

int kiln_sched_same_structure(const kiln_sched *a, const kiln_sched *b) {
  if (a->n_kernels != b->n_kernels || a->n_bufs != b->n_bufs || a->g->n_nodes != b->g->n_nodes) return 0;
  for (int32_t i = 0; i < a->n_kernels; i++) {
    const kiln_skernel *x = &a->kernels[i], *y = &b->kernels[i];
    if (x->kind != y->kind || x->row != y->row || x->line != y->line || x->rank != y->rank || x->mask != y->mask ||
        x->seed != y->seed || x->n_members != y->n_members || x->n_stores != y->n_stores || x->node != y->node ||
        x->mm != y->mm || x->a.node != y->a.node || x->a.trans != y->a.trans || x->b.node != y->b.node ||
        x->b.trans != y->b.trans || x->c_node != y->c_node || x->alpha_node != y->alpha_node || x->tile != y->tile ||
        x->src_buf != y->src_buf || x->dst_buf != y->dst_buf || !same_list(x->n_members, x->members, y->members) ||
        !same_list(x->n_stores, x->stores, y->stores))
      return 0;
  }
  for (int32_t i = 0; i < a->n_bufs; i++)
    if (a->bufs[i].kind != b->bufs[i].kind || a->bufs[i].index != b->bufs[i].index ||
        a->bufs[i].parent != b->bufs[i].parent)
      return 0;
  size_t nn = (size_t)a->g->n_nodes;
  return memcmp(a->buf_of, b->buf_of, sizeof *a->buf_of * nn) == 0 && memcmp(a->mat, b->mat, nn) == 0;
}
