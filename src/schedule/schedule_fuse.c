/* Fusion: the materialized nodes (schedule.c) grouped into kernels.
 *
 * Kernels are formed in node order. A materialized MATMUL, or a GEMM update
 * absorbing one (below), is a GEMM kernel of its own. Any other
 * materialized node seeds a LOOP kernel (a row kernel when it is a
 * reduction or a scan; a scan's kernel is its alone) and later materialized nodes join it while they fit: same
 * domain, and every value they read is at hand (walk). */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule_internal.h"

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
void kiln_sched_walk_member(bld *b, int32_t m) {
  const kiln_skernel *k = &b->s->kernels[b->kid];
  const kiln_gnode *x = N(b->g, m);
  if (k->row && (is_reduce(x->op) || is_scan(x->op))) {
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
  if (x->op == KILN_OP_MATMUL || x->op == KILN_OP_LEAF || b->upd[m] || is_line(x->op) || is_coll(x->op) || k->line) return 0;
  if (is_scan(x->op) || is_scan(N(g, k->seed)->op)) return 0; /* a scan is a kernel of its own */
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
  kiln_sched_walk_member(b, m);
  return b->ok && (b->touches || !k->row);
}

/* Follow a MATMUL operand through a transpose of the last two axes and
 * broadcasts of batch dims down to the node whose buffer the GEMM reads,
 * and then through reshapes: a reshape is the same row-major bytes, so the
 * GEMM reads its producer's buffer with the reshape's shape (an im2col
 * stack [N, C, kh·kw, OH, OW] is read as [N, 1, C·kh·kw, OH·OW]) and the
 * producer keeps its own loop shape, without index division. */
void kiln_sched_gemm_operand(const kiln_graph *g, int32_t in, kiln_sgemm_operand *op) {
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
 *   M = cast(M16)                          also: f32 L, Y from a bf16 MATMUL
 *                                          M16 and its cast read only here
 *                                          (mixed precision: a weight gradient
 *                                          in bf16, the weight in f32); the
 *                                          kernel rounds the product to bf16
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

/* c = cast(M16) to f32, M16 a bf16 MATMUL of c's shape read only here:
 * M16, or -1 */
static int32_t bf16_product(const bld *b, int32_t c) {
  const kiln_graph *g = b->g;
  const kiln_gnode *x = N(g, c);
  if (x->op != KILN_OP_CAST || x->dtype != KILN_F32) return -1;
  int32_t m = IN(g, c, 0);
  const kiln_gnode *y = N(g, m);
  if (y->op != KILN_OP_MATMUL || y->dtype != KILN_BF16 || b->uses[m] != 1) return -1;
  return same_shape(x->rank, x->shape, y->rank, y->shape) ? m : -1;
}

/* Y = M | M·s | s·M, with M and the product read only here */
static int mm_term(const bld *b, int32_t n, int32_t y, int32_t *mm, double *alpha, int32_t *sn) {
  const kiln_graph *g = b->g;
  const kiln_gnode *yn = N(g, y);
  if (!same_node_shape(g, n, y) || b->uses[y] != 1) return 0;
  int32_t m16 = bf16_product(b, y);
  if (yn->op == KILN_OP_MATMUL || m16 >= 0) {
    *mm = m16 >= 0 ? m16 : y;
    *alpha = 1;
    *sn = -1;
    return 1;
  }
  if (yn->op != KILN_OP_MUL) return 0;
  for (int i = 0; i < 2; i++) {
    int32_t m = IN(g, y, i), f = IN(g, y, 1 - i);
    if (!same_node_shape(g, n, m) || b->uses[m] != 1) continue;
    if (N(g, m)->op != KILN_OP_MATMUL && (m = bf16_product(b, m)) < 0) continue;
    if (scale_factor(g, f, alpha, sn)) {
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

/* Mark the GEMM updates among the materialized nodes: the matmul is
 * computed by the update's kernel (its operands stay materialized). */
static void find_gemm_updates(bld *b) {
  const kiln_sched *s = b->s;
  for (int32_t n = 0; n < b->g->n_nodes; n++) {
    if (!b->live[n] || !s->mat[n]) continue;
    int32_t mm = gemm_update(b, n, NULL);
    if (mm >= 0 && !b->upd[mm]) {
      b->upd[n] = mm + 1;
      b->upd[mm] = -1; /* absorbed: no kernel of its own */
    }
  }
}

int kiln_sched_gemm_refresh(bld *b, kiln_skernel *k) {
  const kiln_graph *g = b->g;
  int32_t a = k->a.node, bn = k->b.node;
  if (k->node != k->mm && gemm_update(b, k->node, k) != k->mm) return 0;
  kiln_sched_gemm_operand(g, IN(g, k->mm, 0), &k->a);
  kiln_sched_gemm_operand(g, IN(g, k->mm, 1), &k->b);
  return k->a.node == a && k->b.node == bn;
}

kiln_skernel *kiln_sched_new_kernel(bld *b) {
  kiln_sched *s = b->s;
  if (s->n_kernels == b->kcap) {
    b->kcap = b->kcap ? b->kcap * 2 : 16;
    kiln_skernel *v = realloc(s->kernels, sizeof *v * (size_t)b->kcap);
    if (!v) return NULL;
    s->kernels = v;
  }
  kiln_skernel *k = &s->kernels[s->n_kernels++];
  memset(k, 0, sizeof *k);
  return k;
}

/* Kernel k (number kid) computes MATMUL n, or the GEMM update n. */
static void init_gemm_kernel(bld *b, kiln_skernel *k, int32_t kid, int32_t n) {
  const kiln_graph *g = b->g;
  k->kind = KILN_SK_GEMM;
  k->node = n;
  k->mm = n;
  k->c_node = k->alpha_node = -1;
  k->alpha_c = 1;
  if (b->upd[n] > 0) {
    k->mm = gemm_update(b, n, k);
    KILN_ASSERT(k->mm == b->upd[n] - 1); /* the update find_gemm_updates recognized */
    b->s->owner[k->mm] = kid;
  }
  kiln_sched_gemm_operand(g, IN(g, k->mm, 0), &k->a);
  kiln_sched_gemm_operand(g, IN(g, k->mm, 1), &k->b);
  b->s->n_gemm_calls++;
}

/* Loop kernel kid, seeded by node n, takes in the later materialized nodes
 * that fit, until 64 candidates in a row did not (or, for an elementwise
 * kernel, it has 8 members). */
static kiln_status fill_loop_kernel(bld *b, int32_t kid, int32_t n) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  kiln_skernel *k = &s->kernels[kid];
  const kiln_gnode *x = N(g, n);
  int32_t mcap = 0;
  k->kind = KILN_SK_LOOP;
  if (is_line(x->op)) { /* its own kernel, one task per line along the axis */
    k->row = k->line = 1;
    k->rank = x->rank;
    memcpy(k->shape, x->shape, sizeof k->shape);
    k->mask = 1u << x->iattr[0];
    return kernel_add_member(k, n, &mcap) ? kiln_err_set(b->err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory")
                                          : KILN_OK;
  }
  k->row = is_reduce(x->op) || is_scan(x->op);
  const kiln_gnode *dom = k->row ? N(g, IN(g, n, 0)) : x;
  k->rank = dom->rank;
  memcpy(k->shape, dom->shape, sizeof k->shape);
  k->mask = k->row ? reduce_mask(x) : 0;
  if (kernel_add_member(k, n, &mcap)) return kiln_err_set(b->err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  b->kid = kid;
  b->seed = n;
  for (int32_t m = n + 1, misses = 0; m < g->n_nodes && misses < 64 && !is_scan(x->op); m++) {
    if (!s->mat[m] || s->owner[m] >= 0) continue;
    if (!k->row && k->n_members >= 8) break; /* many streams in one loop stop paying off */
    if (candidate_fits(b, m)) {
      s->owner[m] = kid;
      if (kernel_add_member(&s->kernels[kid], m, &mcap))
        return kiln_err_set(b->err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
      misses = 0;
    } else {
      misses++;
    }
    k = &s->kernels[kid];
  }
  return KILN_OK;
}

/* Move kernel `from` to position `to` (< from), shifting the kernels
 * between up by one, and renumber the owners. */
static void move_kernel(kiln_sched *s, const kiln_graph *g, int32_t from, int32_t to) {
  kiln_skernel k = s->kernels[from];
  memmove(&s->kernels[to + 1], &s->kernels[to], sizeof k * (size_t)(from - to));
  s->kernels[to] = k;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    int32_t o = s->owner[n];
    if (o == from) s->owner[n] = to;
    else if (o >= to && o < from) s->owner[n] = o + 1;
  }
}

/* What loop kernel kid reads, as (node, kiln_sctx) pairs into *loads (the
 * caller frees loads->v); 0 when a walk failed (out of memory). */
static int kernel_loads(bld *b, int32_t kid, ivec *loads) {
  const kiln_skernel *k = &b->s->kernels[kid];
  b->kid = kid;
  b->seed = k->seed;
  b->loads = loads;
  b->ok = 1;
  for (int32_t j = 0; j < k->n_members; j++) kiln_sched_walk_member(b, k->members[j]);
  b->loads = NULL;
  return b->ok;
}

/* The earliest position loop kernel kid could take: after the kernels
 * computing every value it reads (its readers all come after it already).
 * -1 when out of memory (it then stays where it is). */
static int32_t earliest_position(bld *b, int32_t kid) {
  kiln_sched *s = b->s;
  ivec loads = {0};
  kernel_loads(b, kid, &loads);
  int32_t at = 0;
  for (int32_t j = 0; j < loads.n; j += 2)
    if (s->owner[loads.v[j]] >= at) at = s->owner[loads.v[j]] + 1;
  free(loads.v);
  return b->ok ? at : -1;
}

/* Issue each collective as early as it can start: right after the kernel
 * computing its input (or first, for a graph input), never before an
 * earlier collective (every rank issues them in the same order). When that
 * input is a loop kernel traced late (a DDP bucket: the concatenation of
 * gradients computed long before), the loop kernel moves up first, to
 * right after the kernels it reads. The consumers stay where they are, so
 * the kernels in between run while the collective is in flight
 * (schedule.h, KILN_SK_COLL). */
static void hoist_collectives(bld *b) {
  kiln_sched *s = b->s;
  const kiln_graph *g = b->g;
  int32_t floor = 0;
  for (int32_t p = 0; p < s->n_kernels; p++) {
    if (s->kernels[p].kind != KILN_SK_COLL) continue;
    int32_t in = IN(g, s->kernels[p].node, 0), kin = s->owner[in];
    if (kin >= 0 && s->kernels[kin].kind == KILN_SK_LOOP) {
      int32_t at = earliest_position(b, kin);
      if (at >= 0 && at < kin) move_kernel(s, g, kin, at);
    }
    int32_t q = s->owner[in] + 1; /* owner -1: a graph input */
    if (q < floor) q = floor;
    if (q < p) move_kernel(s, g, p, q);
    floor = (q < p ? q : p) + 1;
  }
}

/* ───────────── Attention tiles ─────────────
 *
 * S = Q·Kᵀ (a batched GEMM), P = rows(S) (a row kernel over S's last axis:
 * attention's scaled, masked softmax), O = P·V (a batched GEMM). Run kernel
 * after kernel, S and P make a round trip through memory ([B, heads, L, L]
 * each, 22 MB for 32 sentences of 120 tokens) and the second GEMM reads P
 * cold. When S is read by that row kernel alone, at the kernel's own index,
 * and P by that GEMM alone, as its left operand laid out batch entry after
 * batch entry like S, entry b of O needs entry b of S and P only: the three
 * kernels are moved next to each other (the kernels between them read
 * neither, so they go first) and the first is marked (kiln_skernel.tile); a
 * backend may then run them one batch entry at a time. The memory plan takes
 * the three as one (schedule_mem.c, tile_span): what they read lives through
 * all three, what they write from the first, so either way of running them
 * is correct. */

/* rd[n]: the kernel reading node n (-1: none, -2: several or an output);
 * other[n]: some loop kernel reads it at another index than its own. 0, or
 * -1 when a walk failed (out of memory): then nothing is tiled. */
static void note_reader(int32_t *rd, uint8_t *other, int32_t n, int32_t p, int not_own) {
  if (n < 0) return;
  rd[n] = rd[n] == -1 || rd[n] == p ? p : -2;
  other[n] |= (uint8_t)not_own;
}
static int kernel_readers(bld *b, int32_t *rd, uint8_t *other) {
  kiln_sched *s = b->s;
  const kiln_graph *g = b->g;
  for (int32_t n = 0; n < g->n_nodes; n++) rd[n] = -1, other[n] = 0;
  for (int32_t o = 0; o < g->n_outputs; o++) rd[g->output_node[o]] = -2;
  for (int32_t p = 0; p < s->n_kernels; p++) {
    const kiln_skernel *k = &s->kernels[p];
    if (k->kind == KILN_SK_GEMM) {
      int32_t rs[4] = {k->a.node, k->b.node, k->c_node, k->alpha_node};
      for (int i = 0; i < 4; i++) note_reader(rd, other, rs[i], p, 1);
      continue;
    }
    if (k->kind == KILN_SK_COLL) {
      note_reader(rd, other, IN(g, k->node, 0), p, 1);
      continue;
    }
    ivec loads = {0};
    int ok = kernel_loads(b, p, &loads);
    for (int32_t j = 0; j + 1 < loads.n; j += 2) note_reader(rd, other, loads.v[j], p, loads.v[j + 1] != KILN_SCTX_F);
    free(loads.v);
    if (!ok) return -1;
  }
  return 0;
}

/* A plain GEMM kernel (no update fused in) of rank >= 3 in f32 or f64 */
static int plain_batched_gemm(const kiln_graph *g, const kiln_skernel *k) {
  const kiln_gnode *x = N(g, k->mm);
  return k->kind == KILN_SK_GEMM && k->node == k->mm && k->c_node < 0 && k->alpha_node < 0 && x->rank >= 3 &&
         (x->dtype == KILN_F32 || x->dtype == KILN_F64);
}

/* What GEMM kernel p2's own shapes say: it may be O = P·V of a tile, P
 * computed by the row kernel it returns (else -1). Cheap: the readers'
 * walk (kernel_readers) is made only for such a kernel. */
static int32_t tile_row_kernel(const bld *b, int32_t p2) {
  const kiln_sched *s = b->s;
  const kiln_graph *g = b->g;
  const kiln_skernel *k2 = &s->kernels[p2];
  if (k2->kind != KILN_SK_GEMM || !plain_batched_gemm(g, k2) || k2->a.trans) return -1;
  const kiln_gnode *o = N(g, k2->mm), *pn = N(g, k2->a.node);
  int32_t r = o->rank, q = s->owner[k2->a.node];
  if (q < 0 || q >= p2) return -1;
  const kiln_skernel *kr = &s->kernels[q];
  if (kr->kind != KILN_SK_LOOP || !kr->row || kr->line || kr->rank != r || kr->mask != 1u << (r - 1) ||
      !same_shape(pn->rank, pn->shape, kr->rank, kr->shape) || pn->dtype != o->dtype ||
      o->shape[r - 2] != pn->shape[r - 2])
    return -1;
  /* O's batch is P's, read entry after entry */
  int64_t st = pn->shape[r - 2] * pn->shape[r - 1], nb = 1;
  for (int d = r - 3; d >= 0; d--) {
    if (o->shape[d] != pn->shape[d] || (pn->shape[d] != 1 && k2->a.batch_stride[d] != st)) return -1;
    st *= pn->shape[d];
    nb *= pn->shape[d];
  }
  return nb < 2 ? -1 : q;
}

/* GEMM kernel p2, with row kernel q (tile_row_kernel), is O = P·V of a
 * tile: the GEMM *p1 computing S (see above). 1 when it is. */
static int tile_at(bld *b, const int32_t *rd, const uint8_t *other, int32_t p2, int32_t q, int32_t *p1) {
  const kiln_sched *s = b->s;
  const kiln_graph *g = b->g;
  const kiln_skernel *k2 = &s->kernels[p2], *kr = &s->kernels[q];
  const kiln_gnode *o = N(g, k2->mm);
  if (rd[k2->a.node] != p2) return 0;
  /* S: the one plain batched GEMM output the row kernel reads, at its own index */
  int32_t sn = -1;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    if (rd[n] != q || s->owner[n] < 0 || s->kernels[s->owner[n]].kind != KILN_SK_GEMM) continue;
    if (sn >= 0) return 0;
    sn = n;
  }
  if (sn < 0 || other[sn]) return 0;
  const kiln_skernel *k1 = &s->kernels[s->owner[sn]];
  const kiln_gnode *sx = N(g, sn);
  if (!plain_batched_gemm(g, k1) || k1->node != sn || s->owner[sn] >= q || sx->dtype != o->dtype ||
      !same_shape(sx->rank, sx->shape, kr->rank, kr->shape))
    return 0;
  /* nothing between the three reads what the first two compute; no collective moves */
  for (int32_t n = 0; n < g->n_nodes; n++) {
    int32_t w = s->owner[n];
    if ((w == s->owner[sn] || w == q) && n != sn && n != k2->a.node && rd[n] != -1 &&
        (rd[n] < 0 || (rd[n] > s->owner[sn] && rd[n] < p2)))
      return 0;
  }
  for (int32_t x = s->owner[sn] + 1; x < p2; x++)
    if (s->kernels[x].kind == KILN_SK_COLL) return 0;
  /* S's GEMM ends an earlier tile: tiles do not overlap */
  if (s->owner[sn] >= 2 && s->kernels[s->owner[sn] - 2].tile) return 0;
  *p1 = s->owner[sn];
  return 1;
}

static kiln_status tile_attention(bld *b) {
  kiln_sched *s = b->s;
  const kiln_graph *g = b->g;
  int32_t *rd = NULL;
  uint8_t *other = NULL;
  int fresh = 0;
  kiln_status st = KILN_OK;
  for (int32_t p2 = 0; p2 < s->n_kernels && st == KILN_OK; p2++) {
    int32_t pr = tile_row_kernel(b, p2), p1;
    if (pr < 0) continue;
    if (!rd) { /* the first candidate */
      rd = malloc(sizeof *rd * ((size_t)g->n_nodes + 1));
      other = malloc((size_t)g->n_nodes + 1);
      if (!rd || !other) {
        st = kiln_err_set(b->err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
        break;
      }
    }
    if (!fresh && kernel_readers(b, rd, other)) break; /* untiled: the kernels as they are */
    fresh = 1;
    if (!tile_at(b, rd, other, p2, pr, &p1)) continue;
    /* each kernel between them (in order) to just before the first */
    for (int32_t x = p1 + 1; x < p2; x++) {
      if (x == pr) continue;
      move_kernel(s, g, x, p1);
      if (pr < x) pr++;
      p1++;
    }
    s->kernels[p1].tile = 1; /* p1 = p2 - 2, pr = p2 - 1 */
    fresh = 0; /* positions moved */
  }
  free(rd);
  free(other);
  return st;
}

kiln_status kiln_sched_fuse(bld *b) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  find_gemm_updates(b);
  /* form kernels in node order */
  for (int32_t n = 0; n < g->n_nodes; n++) {
    const kiln_gnode *x = N(g, n);
    if (!s->mat[n] || s->owner[n] >= 0 || x->op == KILN_OP_LEAF) continue;
    if (b->upd[n] < 0) continue; /* a matmul computed by a later update's kernel */
    kiln_skernel *k = kiln_sched_new_kernel(b);
    if (!k) return kiln_err_set(b->err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    int32_t kid = s->n_kernels - 1;
    k->seed = n;
    s->owner[n] = kid;
    if (x->op == KILN_OP_MATMUL || b->upd[n] > 0) {
      init_gemm_kernel(b, k, kid, n);
      continue;
    }
    if (is_coll(x->op)) {
      k->kind = KILN_SK_COLL;
      k->node = n;
      continue;
    }
    kiln_status st = fill_loop_kernel(b, kid, n);
    if (st != KILN_OK) return st;
  }
  hoist_collectives(b);
  return tile_attention(b);
}
