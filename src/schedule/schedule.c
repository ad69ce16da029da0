#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

/* ───────────── small helpers ───────────── */

typedef struct ivec {
  int32_t *v;
  int32_t n, cap;
} ivec;

static int ivec_push(ivec *a, int32_t x) {
  if (a->n == a->cap) {
    int32_t cap = a->cap ? a->cap * 2 : 8;
    int32_t *v = realloc(a->v, sizeof *v * (size_t)cap);
    if (!v) return -1;
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = x;
  return 0;
}

static const kiln_gnode *N(const kiln_graph *g, int32_t i) { return &g->nodes[i]; }
static int32_t IN(const kiln_graph *g, int32_t n, int k) { return kiln_gnode_inputs(g, N(g, n))[k]; }

static int is_reduce(int op) { return kiln_op_table[op].kind == KILN_KIND_REDUCE; }

static uint32_t reduce_mask(const kiln_gnode *n) {
  if (n->op == KILN_OP_ARGMAX) return 1u << n->iattr[0];
  return (uint32_t)n->iattr[0] & ((1u << n->rank) - 1);
}

static int same_shape(int ra, const int64_t *a, int rb, const int64_t *b) {
  return ra == rb && memcmp(a, b, sizeof *a * (size_t)ra) == 0;
}

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

/* ───────────── the builder ───────────── */

typedef struct bld {
  const kiln_graph *g;
  kiln_sched *s;
  int32_t *uses;
  int32_t *cost;
  /* walk state */
  int32_t kid, seed;
  int ok, touches;
  ivec *loads; /* when non-NULL, record (node, ctx) pairs */
  int32_t *upd; /* per node: MATMUL + 1 when a GEMM update computes it (see gemm_update), -1 for
                 * that MATMUL, else 0 */
} bld;

/* Walk the inlined tree of n (evaluated in context c) on behalf of kernel
 * b->kid, checking that members are read only where their value is at hand
 * and that every other materialized node was computed before the kernel. */
static void walk(bld *b, int32_t n, kiln_sctx c, int root) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  const kiln_skernel *k = &s->kernels[b->kid];
  const kiln_gnode *x = N(g, n);
  if (!b->ok) return;
  if (!root) {
    if (s->owner[n] == b->kid) {
      b->touches = 1;
      if (is_reduce(x->op) ? c != KILN_SCTX_RS : !kiln_sched_shape_is(g, k, n, c) || c == KILN_SCTX_OTHER) b->ok = 0;
      return;
    }
    if (s->mat[n] || x->op == KILN_OP_LEAF || x->op == KILN_OP_SCALAR) {
      if (x->op != KILN_OP_LEAF && x->op != KILN_OP_SCALAR && n >= b->seed) {
        b->ok = 0;
        return;
      }
      if (b->loads && (ivec_push(b->loads, n) || ivec_push(b->loads, (int32_t)c))) b->ok = 0;
      return;
    }
  }
  for (int i = 0; i < x->n_in; i++) walk(b, IN(g, n, i), kiln_sched_input_ctx(g, k, n, i, c), 0);
}

/* Walk a member root: a reduction's input in F, another node in its own ctx. */
static void walk_member(bld *b, int32_t m) {
  const kiln_skernel *k = &b->s->kernels[b->kid];
  const kiln_gnode *x = N(b->g, m);
  if (k->row && is_reduce(x->op)) {
    walk(b, IN(b->g, m, 0), KILN_SCTX_F, 0);
    return;
  }
  kiln_sctx c = kiln_sched_shape_is(b->g, k, m, KILN_SCTX_F) ? KILN_SCTX_F : KILN_SCTX_RS;
  walk(b, m, c, 1);
}

static int kernel_add_member(kiln_skernel *k, int32_t m, int32_t *cap) {
  if (k->n_members == *cap) {
    *cap = *cap ? *cap * 2 : 4;
    int32_t *v = realloc(k->members, sizeof *v * (size_t)*cap);
    if (!v) return -1;
    k->members = v;
  }
  k->members[k->n_members++] = m;
  return 0;
}

/* Can candidate m join kernel kid (seeded at b->seed)? */
static int candidate_fits(bld *b, int32_t m) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  kiln_skernel *k = &s->kernels[b->kid];
  const kiln_gnode *x = N(g, m);
  if (x->op == KILN_OP_MATMUL || x->op == KILN_OP_LEAF || b->upd[m]) return 0;
  if (k->row) {
    if (is_reduce(x->op)) {
      const kiln_gnode *in = N(g, IN(g, m, 0));
      if (!same_shape(in->rank, in->shape, k->rank, k->shape) || reduce_mask(x) != k->mask) return 0;
    } else if (!kiln_sched_shape_is(g, k, m, KILN_SCTX_F) && !kiln_sched_shape_is(g, k, m, KILN_SCTX_RS)) {
      return 0;
    }
  } else if (is_reduce(x->op) || !kiln_sched_shape_is(g, k, m, KILN_SCTX_F)) {
    return 0;
  }
  b->ok = 1;
  b->touches = 0;
  b->loads = NULL;
  walk_member(b, m);
  return b->ok && (b->touches || !k->row);
}

/* The op table's COST column: what recomputing one element costs. */
static int32_t node_cost(const kiln_graph *g, int32_t n) { return kiln_op_table[N(g, n)->op].cost; }

/* Follow a MATMUL operand through a transpose of the last two axes and
 * broadcasts of batch dims down to the node whose buffer the GEMM reads,
 * and then through reshapes: a reshape is the same row-major bytes, so the
 * GEMM reads its producer's buffer with the reshape's shape (an im2col
 * stack [N, C, kh·kw, OH, OW] is read as [N, 1, C·kh·kw, OH·OW]) and the
 * producer keeps its own loop shape, without index division. */
static void gemm_operand(const kiln_graph *g, int32_t in, kiln_sgemm_operand *op) {
  memset(op, 0, sizeof *op);
  int32_t n = in, shape_node = -1;
  for (;;) {
    if (shape_node >= 0) {
      if (N(g, n)->op != KILN_OP_RESHAPE) break;
      n = IN(g, n, 0);
      continue;
    }
    const kiln_gnode *x = N(g, n);
    int r = x->rank;
    if (x->op == KILN_OP_PERMUTE) {
      int ok = x->iattr[r - 1] == r - 2 && x->iattr[r - 2] == r - 1;
      for (int d = 0; d < r - 2 && ok; d++) ok = x->iattr[d] == d;
      if (ok) {
        op->trans ^= 1;
        n = IN(g, n, 0);
        continue;
      }
    } else if (x->op == KILN_OP_EXPAND) {
      const kiln_gnode *y = N(g, IN(g, n, 0));
      if (y->shape[r - 1] == x->shape[r - 1] && y->shape[r - 2] == x->shape[r - 2]) {
        n = IN(g, n, 0);
        continue;
      }
    } else if (x->op == KILN_OP_RESHAPE) {
      shape_node = n;
      n = IN(g, n, 0);
      continue;
    }
    break;
  }
  op->node = n;
  const kiln_gnode *base = N(g, shape_node >= 0 ? shape_node : n);
  int64_t st = base->shape[base->rank - 1] * base->shape[base->rank - 2];
  for (int d = base->rank - 3; d >= 0; d--) {
    op->batch_stride[d] = base->shape[d] == 1 ? 0 : st;
    st *= base->shape[d];
  }
}

/* ───────────── GEMM updates ─────────────
 *
 * An optimizer step often reads a weight's gradient once, right after the
 * GEMM that produced it: `W - lr·dW` (plain SGD), `acc + dW` (a gradient
 * accumulated over micro-batches). Computed as written, the gradient makes
 * a round trip through memory and the update is one more pass over the
 * weight; the GEMM library's C = alpha·(A·B) + beta·C with beta = 1 does
 * both in the GEMM's own stores, in place when the output is donated to L
 * (kernel fields node, mm, c_node, alpha_c, alpha_node, beta). Recognized
 * (n materialized, all of one float dtype and shape, no broadcast):
 *   n = add(X, Y) | add(Y, X) | sub(X, Y)
 *   X = L                                  L a graph input (LEAF)
 *   Y = M | mul(M, s) | mul(s, M)          M a MATMUL read only here,
 *                                          s a constant or a float SCALAR input
 * The matmul and the factors are not materialized; the kernel reads L's
 * buffer (copied first into n's buffer when n cannot live in L's). */

/* s: a constant splat, or a float SCALAR input (*sn), possibly reshaped and
 * broadcast. */
static int scale_factor(const kiln_graph *g, int32_t n, double *v, int32_t *sn) {
  while (N(g, n)->op == KILN_OP_EXPAND || N(g, n)->op == KILN_OP_RESHAPE) n = IN(g, n, 0);
  const kiln_gnode *x = N(g, n);
  *v = x->op == KILN_OP_CONST ? x->fattr : 1;
  *sn = x->op == KILN_OP_SCALAR ? n : -1;
  return x->op == KILN_OP_CONST || (x->op == KILN_OP_SCALAR && (x->dtype == KILN_F32 || x->dtype == KILN_F64));
}

static int same_node_shape(const kiln_graph *g, int32_t a, int32_t b) {
  const kiln_gnode *x = N(g, a), *y = N(g, b);
  return x->dtype == y->dtype && same_shape(x->rank, x->shape, y->rank, y->shape);
}

/* X = L, a graph input of n's shape and dtype. (A scaled L, as in a
 * momentum buffer's 0.9·buf + dW, would be beta = 0.9: measured slower
 * fused than not, since the library scales C in a pass of its own and the
 * update that follows reads the buffer again anyway.) */
static int leaf_term(const kiln_graph *g, int32_t n, int32_t x, int32_t *leaf) {
  if (N(g, x)->op != KILN_OP_LEAF || !same_node_shape(g, n, x)) return 0;
  *leaf = x;
  return 1;
}

/* Y = M | M·s | s·M, with M and the product read only here */
static int mm_term(const bld *b, int32_t n, int32_t y, int32_t *mm, double *alpha, int32_t *sn) {
  const kiln_graph *g = b->g;
  const kiln_gnode *yn = N(g, y);
  if (!same_node_shape(g, n, y) || b->uses[y] != 1) return 0;
  if (yn->op == KILN_OP_MATMUL) {
    *mm = y;
    *alpha = 1;
    *sn = -1;
    return 1;
  }
  if (yn->op != KILN_OP_MUL) return 0;
  for (int i = 0; i < 2; i++) {
    int32_t m = IN(g, y, i), f = IN(g, y, 1 - i);
    if (N(g, m)->op == KILN_OP_MATMUL && b->uses[m] == 1 && same_node_shape(g, n, m) && scale_factor(g, f, alpha, sn)) {
      *mm = m;
      return 1;
    }
  }
  return 0;
}

/* The GEMM update computing node n, into k's fields (k may be NULL); the
 * MATMUL, or -1. */
static int32_t gemm_update(const bld *b, int32_t n, kiln_skernel *k) {
  const kiln_graph *g = b->g;
  const kiln_gnode *x = N(g, n);
  if ((x->op != KILN_OP_ADD && x->op != KILN_OP_SUB) || (x->dtype != KILN_F32 && x->dtype != KILN_F64)) return -1;
  for (int i = 0; i < 2; i++) {
    if (x->op == KILN_OP_SUB && i == 1) break; /* sub(X, Y) only: X - alpha·(A·B) */
    int32_t xi = IN(g, n, i), yi = IN(g, n, 1 - i), leaf, mm, sn;
    double alpha;
    if (!leaf_term(g, n, xi, &leaf) || !mm_term(b, n, yi, &mm, &alpha, &sn)) continue;
    if (!k) return mm;
    k->c_node = leaf;
    k->beta = 1;
    k->alpha_c = x->op == KILN_OP_SUB ? -alpha : alpha;
    k->alpha_node = sn;
    return mm;
  }
  return -1;
}

void kiln_sched_free(kiln_sched *s) {
  if (!s) return;
  for (int32_t i = 0; i < s->n_kernels; i++) {
    free(s->kernels[i].members);
    free(s->kernels[i].stores);
  }
  free(s->kernels);
  free(s->buf_of);
  free(s->input_buf);
  free(s->owner);
  free(s->mat);
  free(s->bufs);
  free(s);
}

static kiln_skernel *new_kernel(kiln_sched *s, int32_t *cap) {
  if (s->n_kernels == *cap) {
    *cap = *cap ? *cap * 2 : 16;
    kiln_skernel *v = realloc(s->kernels, sizeof *v * (size_t)*cap);
    if (!v) return NULL;
    s->kernels = v;
  }
  kiln_skernel *k = &s->kernels[s->n_kernels++];
  memset(k, 0, sizeof *k);
  return k;
}

static int32_t new_buf(kiln_sched *s, int32_t *cap, kiln_sbuf_kind kind, int32_t index, size_t bytes) {
  if (s->n_bufs == *cap) {
    *cap = *cap ? *cap * 2 : 16;
    kiln_sbuf *v = realloc(s->bufs, sizeof *v * (size_t)*cap);
    if (!v) return -1;
    s->bufs = v;
  }
  kiln_sbuf *bf = &s->bufs[s->n_bufs];
  memset(bf, 0, sizeof *bf);
  bf->kind = kind;
  bf->index = index;
  bf->bytes = bytes;
  bf->first = INT32_MAX;
  bf->last = -1;
  return s->n_bufs++;
}


/* Output o's node is safe to compute in place in input i's buffer: nothing
 * reads input i after its kernel writes, and inside that kernel every read
 * of input i is at the index being written. */
static int alias_safe(bld *b, ivec *loads, int32_t n, int32_t i) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  int32_t leaf = g->input_node[i];
  const kiln_gnode *x = N(g, n), *l = N(g, leaf);
  if (l->op != KILN_OP_LEAF || l->dtype != x->dtype || kiln_gnode_bytes(l) != kiln_gnode_bytes(x)) return 0;
  int32_t w = s->owner[n];
  const kiln_skernel *kw = &s->kernels[w];
  /* a GEMM update reads L only as its C, element for element */
  int gemm_in_place = kw->kind == KILN_SK_GEMM && kw->c_node == leaf && kw->a.node != leaf && kw->b.node != leaf;
  if (kw->kind != KILN_SK_LOOP && !gemm_in_place) return 0;
  kiln_sctx want = kw->kind == KILN_SK_LOOP && kiln_sched_shape_is(g, kw, n, KILN_SCTX_F) ? KILN_SCTX_F : KILN_SCTX_RS;
  for (int32_t o = 0; o < g->n_outputs; o++)
    if (g->output_node[o] == leaf) return 0; /* an end copy reads it */
  for (int32_t p = 0; p < s->n_kernels; p++) {
    const kiln_skernel *k = &s->kernels[p];
    if (k->kind == KILN_SK_GEMM) {
      if ((k->a.node == leaf || k->b.node == leaf) && p >= w) return 0;
      if (k->c_node == leaf && p > w) return 0;
      continue;
    }
    for (int32_t j = 0; j < loads[p].n; j += 2) {
      if (loads[p].v[j] != leaf) continue;
      if (p > w || (p == w && (kiln_sctx)loads[p].v[j + 1] != want)) return 0;
    }
  }
  return 1;
}

static kiln_status fail(kiln_sched *s, kiln_err *err, kiln_status st, const char *msg) {
  kiln_sched_free(s);
  return kiln_err_set(err, st, "schedule: %s", msg);
}

/* Place scratch buffers in one arena: largest first, each at the lowest
 * offset that does not overlap a placed buffer whose lifetime overlaps. */
static size_t plan_arena(kiln_sched *s) {
  int32_t nb = s->n_bufs, *ord = malloc(sizeof *ord * (size_t)(nb + 1)), n = 0;
  if (!ord) return (size_t)-1;
  for (int32_t i = 0; i < nb; i++)
    if (s->bufs[i].kind == KILN_SBUF_SCRATCH) ord[n++] = i;
  for (int32_t i = 1; i < n; i++) /* insertion sort by size, descending */
    for (int32_t j = i; j > 0 && s->bufs[ord[j]].bytes > s->bufs[ord[j - 1]].bytes; j--) {
      int32_t t = ord[j];
      ord[j] = ord[j - 1];
      ord[j - 1] = t;
    }
  size_t peak = 0;
  for (int32_t i = 0; i < n; i++) {
    kiln_sbuf *bf = &s->bufs[ord[i]];
    size_t sz = (bf->bytes + 63) & ~(size_t)63, off = 0;
    for (int moved = 1; moved;) {
      moved = 0;
      for (int32_t j = 0; j < i; j++) {
        const kiln_sbuf *o = &s->bufs[ord[j]];
        size_t osz = (o->bytes + 63) & ~(size_t)63;
        if (o->last < bf->first || bf->last < o->first) continue; /* disjoint lifetimes */
        if (off < o->offset + osz && o->offset < off + sz) {
          off = o->offset + osz;
          moved = 1;
        }
      }
    }
    bf->offset = off;
    if (off + sz > peak) peak = off + sz;
  }
  free(ord);
  return peak;
}

kiln_status kiln_sched_build(const kiln_graph *g, kiln_sched **out, kiln_err *err) {
  *out = NULL;
  const int32_t nn = g->n_nodes;
  kiln_sched *s = calloc(1, sizeof *s);
  if (!s) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  s->g = g;
  s->buf_of = malloc(sizeof *s->buf_of * (size_t)(nn + 1));
  s->owner = malloc(sizeof *s->owner * (size_t)(nn + 1));
  s->mat = calloc((size_t)nn + 1, 1);
  s->input_buf = calloc((size_t)g->n_inputs + 1, sizeof *s->input_buf);
  int32_t *tmp = calloc((size_t)nn * 6 + 1, sizeof *tmp);
  if (!s->buf_of || !s->owner || !s->mat || !s->input_buf || !tmp) {
    free(tmp);
    return fail(s, err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  }
  bld b = {.g = g, .s = s, .uses = tmp, .cost = tmp + nn, .upd = tmp + 5 * nn};
  int32_t *need = tmp + 2 * nn, *live = tmp + 3 * nn, *spread = tmp + 4 * nn;
  for (int32_t i = 0; i < nn; i++) s->buf_of[i] = s->owner[i] = -1;

  /* dead nodes (not reaching an output) are ignored: the passes usually
   * remove them, but the backend must not depend on it */
  for (int32_t o = 0; o < g->n_outputs; o++) live[g->output_node[o]] = 1;
  for (int32_t n = nn - 1; n >= 0; n--) {
    const kiln_gnode *x = N(g, n);
    if (x->op >= KILN_OP_COUNT) {
      free(tmp);
      return fail(s, err, KILN_ERR_UNSUPPORTED, "unknown op");
    }
    if (live[n])
      for (int i = 0; i < x->n_in; i++) live[IN(g, n, i)] = 1;
  }
  /* uses, and the nodes that must be materialized */
  for (int32_t n = 0; n < nn; n++) {
    const kiln_gnode *x = N(g, n);
    if (!live[n]) continue;
    for (int i = 0; i < x->n_in; i++) b.uses[IN(g, n, i)]++;
    if (x->op == KILN_OP_MATMUL) {
      if (x->dtype != KILN_F32 && x->dtype != KILN_F64) {
        free(tmp);
        return fail(s, err, KILN_ERR_UNSUPPORTED, "matmul supports f32 and f64 only");
      }
      s->mat[n] = 1;
      for (int i = 0; i < 2; i++) {
        kiln_sgemm_operand op;
        gemm_operand(g, IN(g, n, i), &op);
        s->mat[op.node] = 1;
      }
    }
    if (is_reduce(x->op) || x->op == KILN_OP_LEAF) s->mat[n] = 1;
  }
  for (int32_t o = 0; o < g->n_outputs; o++) {
    b.uses[g->output_node[o]]++;
    s->mat[g->output_node[o]] = 1;
  }
  /* spread[n]: n is read through a broadcast that repeats each element
   * (an EXPAND, possibly behind reshapes and permutes), e.g. a pooling
   * window's gradient spread over the window. Fused there, every element
   * would be recomputed once per repeat. */
  for (int32_t n = nn - 1; n >= 0; n--) {
    const kiln_gnode *x = N(g, n);
    if (!live[n] || x->n_in < 1) continue;
    int32_t in = IN(g, n, 0);
    if (x->op == KILN_OP_EXPAND && kiln_gnode_numel(x) >= 2 * kiln_gnode_numel(N(g, in))) spread[in] = 1;
    if ((x->op == KILN_OP_RESHAPE || x->op == KILN_OP_PERMUTE) && spread[n]) spread[in] = 1;
  }
  for (int32_t n = 0; n < nn; n++) {
    if (s->mat[n] || !live[n]) continue;
    const kiln_gnode *x = N(g, n);
    int32_t c = node_cost(g, n);
    for (int i = 0; i < x->n_in; i++) {
      int32_t in = IN(g, n, i);
      if (!s->mat[in]) c += b.cost[in];
    }
    b.cost[n] = c;
    /* recomputing a shared subtree is cheaper than a round trip through
     * memory only while it is small; the cap also bounds expression size */
    if ((b.uses[n] >= 2 && c > 8) || c > 64 || (spread[n] && c > 8)) s->mat[n] = 1;
  }

  /* GEMM updates: the matmul is computed by the update's kernel (its
   * operands stay materialized) */
  for (int32_t n = 0; n < nn; n++) {
    if (!live[n] || !s->mat[n]) continue;
    int32_t mm = gemm_update(&b, n, NULL);
    if (mm >= 0 && !b.upd[mm]) {
      b.upd[n] = mm + 1;
      b.upd[mm] = -1; /* absorbed: no kernel of its own */
    }
  }

  /* form kernels in node order */
  int32_t kcap = 0, bcap = 0;
  for (int32_t n = 0; n < nn; n++) {
    const kiln_gnode *x = N(g, n);
    if (!s->mat[n] || s->owner[n] >= 0 || x->op == KILN_OP_LEAF) continue;
    if (b.upd[n] < 0) continue; /* a matmul computed by a later update's kernel */
    kiln_skernel *k = new_kernel(s, &kcap);
    if (!k) {
      free(tmp);
      return fail(s, err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int32_t kid = s->n_kernels - 1, mcap = 0;
    k->seed = n;
    s->owner[n] = kid;
    if (x->op == KILN_OP_MATMUL || b.upd[n] > 0) {
      k->kind = KILN_SK_GEMM;
      k->node = n;
      k->mm = n;
      k->c_node = k->alpha_node = -1;
      k->alpha_c = 1;
      if (b.upd[n] > 0) {
        k->mm = gemm_update(&b, n, k);
        s->owner[k->mm] = kid;
      }
      gemm_operand(g, IN(g, k->mm, 0), &k->a);
      gemm_operand(g, IN(g, k->mm, 1), &k->b);
      s->n_gemm_calls++;
      continue;
    }
    k->kind = KILN_SK_LOOP;
    k->row = is_reduce(x->op);
    const kiln_gnode *dom = k->row ? N(g, IN(g, n, 0)) : x;
    k->rank = dom->rank;
    memcpy(k->shape, dom->shape, sizeof k->shape);
    k->mask = k->row ? reduce_mask(x) : 0;
    if (kernel_add_member(k, n, &mcap)) {
      free(tmp);
      return fail(s, err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    b.kid = kid;
    b.seed = n;
    for (int32_t m = n + 1, misses = 0; m < nn && misses < 64; m++) {
      if (!s->mat[m] || s->owner[m] >= 0) continue;
      if (!k->row && k->n_members >= 8) break; /* many streams in one loop stop paying off */
      if (candidate_fits(&b, m)) {
        s->owner[m] = kid;
        if (kernel_add_member(&s->kernels[kid], m, &mcap)) {
          free(tmp);
          return fail(s, err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
        misses = 0;
      } else {
        misses++;
      }
      k = &s->kernels[kid];
    }
  }

  /* what each kernel reads; which nodes need a buffer */
  const int32_t n_loads = s->n_kernels; /* copy steps come later and read no loads */
  ivec *loads = calloc((size_t)n_loads + 1, sizeof *loads);
  if (!loads) {
    free(tmp);
    return fail(s, err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  }
  kiln_status st = KILN_OK;
  for (int32_t p = 0; p < s->n_kernels && st == KILN_OK; p++) {
    kiln_skernel *k = &s->kernels[p];
    if (k->kind == KILN_SK_GEMM) {
      need[k->a.node] = need[k->b.node] = 1;
      if (k->c_node >= 0) need[k->c_node] = 1;
      continue;
    }
    b.kid = p;
    b.seed = k->seed;
    b.loads = &loads[p];
    b.ok = 1;
    for (int32_t j = 0; j < k->n_members; j++) walk_member(&b, k->members[j]);
    if (!b.ok) st = kiln_err_set(err, KILN_ERR_INTERNAL, "schedule: kernel %d reads a value it cannot see", p);
    for (int32_t j = 0; j < loads[p].n; j += 2) need[loads[p].v[j]] = 1;
  }
  b.loads = NULL;
  for (int32_t o = 0; o < g->n_outputs; o++) need[g->output_node[o]] = 1;

  /* buffers: inputs, then homes of computed nodes, then end copies */
  for (int32_t i = 0; i < g->n_inputs && st == KILN_OK; i++) {
    int32_t ln = g->input_node[i];
    size_t bytes = N(g, ln)->op == KILN_OP_LEAF ? kiln_gnode_bytes(N(g, ln)) : 8;
    int32_t id = new_buf(s, &bcap, KILN_SBUF_INPUT, i, bytes);
    if (id < 0) st = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    else s->buf_of[ln] = s->input_buf[i] = id;
  }
  uint8_t *done = calloc((size_t)g->n_outputs + 1, 1);
  if (!done && st == KILN_OK) st = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  for (int32_t n = 0; n < nn && st == KILN_OK; n++) {
    const kiln_gnode *x = N(g, n);
    if (!need[n] || x->op == KILN_OP_LEAF) continue;
    if (x->op == KILN_OP_SCALAR && !s->mat[n]) continue; /* only read: its input buffer */
    int32_t home = -1;
    for (int32_t o = 0; o < g->n_outputs; o++) {
      int32_t a = g->output_alias[o];
      if (g->output_node[o] != n || a < 0 || home >= 0) continue;
      if (alias_safe(&b, loads, n, a)) {
        home = s->buf_of[g->input_node[a]];
        s->aliased_bytes += kiln_gnode_bytes(x);
        done[o] = 1;
      }
    }
    for (int32_t o = 0; o < g->n_outputs && home < 0; o++) {
      if (g->output_node[o] != n || g->output_alias[o] >= 0) continue;
      home = new_buf(s, &bcap, KILN_SBUF_OUTPUT, o, kiln_gnode_bytes(x));
      done[o] = 1;
    }
    if (home < 0) home = new_buf(s, &bcap, KILN_SBUF_SCRATCH, -1, kiln_gnode_bytes(x));
    if (home < 0) st = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    s->buf_of[n] = home;
  }
  /* End copies, in three passes so no copy reads an input another copy
   * already overwrote: (0) inputs that are outputs into fresh outputs, and
   * into a temporary when the destination is itself a donated input (a
   * swap would otherwise lose data); (1) those temporaries into their
   * donated inputs; (2) computed values not yet in place. */
  int32_t *tmp_of = calloc((size_t)g->n_outputs + 1, sizeof *tmp_of);
  if (!tmp_of && st == KILN_OK) st = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  for (int pass = 0; pass < 3 && st == KILN_OK; pass++) {
    for (int32_t o = 0; o < g->n_outputs && st == KILN_OK; o++) {
      int32_t n = g->output_node[o], a = g->output_alias[o];
      int is_leaf = N(g, n)->op == KILN_OP_LEAF;
      if (done[o] || is_leaf != (pass < 2)) continue;
      if (is_leaf && a >= 0 && g->input_node[a] == n) continue; /* already there */
      if (a >= 0 && s->bufs[s->buf_of[n]].kind == KILN_SBUF_INPUT && s->bufs[s->buf_of[n]].index == a) continue;
      if (pass == 1 && a < 0) continue;
      size_t bytes = kiln_gnode_bytes(N(g, n));
      int32_t src = s->buf_of[n], dst;
      if (pass == 1) {
        src = tmp_of[o];
        dst = s->input_buf[a];
      } else if (a >= 0) {
        dst = is_leaf ? new_buf(s, &bcap, KILN_SBUF_SCRATCH, -1, bytes) : s->input_buf[a];
        tmp_of[o] = dst;
      } else {
        dst = new_buf(s, &bcap, KILN_SBUF_OUTPUT, o, bytes);
      }
      kiln_skernel *k = dst >= 0 ? new_kernel(s, &kcap) : NULL;
      if (!k) {
        st = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
        break;
      }
      k->kind = KILN_SK_COPY;
      k->seed = nn;
      k->src_buf = src;
      k->dst_buf = dst;
      k->bytes = bytes;
    }
  }
  free(tmp_of);
  free(done);

  /* stores and liveness */
  for (int32_t p = 0; p < s->n_kernels && st == KILN_OK; p++) {
    kiln_skernel *k = &s->kernels[p];
    if (k->kind == KILN_SK_LOOP) {
      k->stores = malloc(sizeof *k->stores * (size_t)k->n_members);
      if (!k->stores) {
        st = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
        break;
      }
      for (int32_t j = 0; j < k->n_members; j++) {
        int32_t m = k->members[j];
        if (s->buf_of[m] < 0) continue;
        k->stores[k->n_stores++] = m;
        kiln_sbuf *bf = &s->bufs[s->buf_of[m]];
        if (p < bf->first) bf->first = p;
      }
      if (k->n_stores) s->n_loop_kernels++;
      for (int32_t j = 0; j < loads[p].n; j += 2) {
        kiln_sbuf *bf = &s->bufs[kiln_sched_read_buf(s, loads[p].v[j])];
        if (p > bf->last) bf->last = p;
      }
    } else if (k->kind == KILN_SK_GEMM) {
      kiln_sbuf *c = &s->bufs[s->buf_of[k->node]];
      if (p < c->first) c->first = p;
      /* The operands are read from their own buffers (cpu's gemm_step): a
       * float SCALAR operand is materialized into a buffer of its dtype,
       * which must live until here, not only its input's double. Only the
       * alpha factor is read as the input's double. */
      int32_t rd[4] = {k->a.node, k->b.node, k->c_node, k->alpha_node};
      for (int i = 0; i < 4; i++) {
        if (rd[i] < 0) continue;
        kiln_sbuf *bf = &s->bufs[i == 3 ? kiln_sched_read_buf(s, rd[i]) : s->buf_of[rd[i]]];
        if (p > bf->last) bf->last = p;
      }
    } else {
      kiln_sbuf *bf = &s->bufs[k->src_buf], *df = &s->bufs[k->dst_buf];
      if (p > bf->last) bf->last = p;
      if (p < df->first) df->first = p;
    }
  }
  for (int32_t p = 0; p <= n_loads; p++) free(loads[p].v);
  free(loads);
  free(tmp);
  if (st != KILN_OK) {
    kiln_sched_free(s);
    return st;
  }
  for (int32_t i = 0; i < s->n_bufs; i++) {
    kiln_sbuf *bf = &s->bufs[i];
    if (bf->first == INT32_MAX) bf->first = 0;
    if (bf->last < bf->first) bf->last = bf->first;
  }
  size_t peak = plan_arena(s);
  if (peak == (size_t)-1) return fail(s, err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  s->scratch_bytes = peak;
  *out = s;
  return KILN_OK;
}
