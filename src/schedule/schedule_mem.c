/* Memory planning for the fused kernels (schedule_fuse.c): what each kernel
 * reads, a buffer for every node some kernel or output reads (an input's
 * own, a donated input's when computing in place is safe, an output's, or
 * scratch), the copies at the end of a step, the lifetime of each buffer in
 * kernel positions, and the scratch arena.
 *
 * The lifetimes decide which scratch buffers may share arena bytes, so a
 * read missed here is a wrong value, not a crash: every buffer a kernel
 * reads must have last >= that kernel's position (see store_and_liveness). */
#include <stdlib.h>
#include <string.h>

#include "base/sort.h"
#include "schedule/schedule_internal.h"

static kiln_status oom(bld *b) { return kiln_err_set(b->err, KILN_ERR_OUT_OF_MEMORY, "schedule: out of memory"); }

/* A new buffer holding node's bytes (bytes: what they are here). */
static int32_t new_buf(bld *b, kiln_sbuf_kind kind, int32_t index, size_t bytes, int32_t node) {
  kiln_sched *s = b->s;
  if (s->n_bufs == b->bcap) {
    int32_t cap = b->bcap ? b->bcap * 2 : 64;
    kiln_sbuf *v = realloc(s->bufs, sizeof *v * (size_t)cap);
    if (v) s->bufs = v;
    int32_t *w = v ? realloc(s->buf_node, sizeof *w * (size_t)cap) : NULL;
    if (w) s->buf_node = w;
    if (!v || !w) return -1;
    b->bcap = cap;
  }
  s->buf_node[s->n_bufs] = node;
  kiln_sbuf *bf = &s->bufs[s->n_bufs];
  memset(bf, 0, sizeof *bf);
  bf->kind = kind;
  bf->index = index;
  bf->bytes = bytes;
  bf->first = INT32_MAX;
  bf->last = -1;
  bf->parent = -1;
  return s->n_bufs++;
}

/* ───── concatenations computed in place ─────
 *
 * A concatenation each of whose inputs is one contiguous block of it (every
 * dimension before the axis is 1), computed by a kernel for it alone, is
 * not computed: each input is computed straight into its block of the
 * concatenation's buffer, as PyTorch DDP's gradients are views of their
 * bucket (the DDP helper concatenates the gradients for the all-reduce).
 * An input qualifies when it is materialized, read by nothing but this
 * concatenation (through reshapes, which read the same bytes), not a graph
 * input or output and not a collective; the concatenation must be a kernel
 * of its own and not a graph output. Its kernel then stores nothing and is
 * no step. */

/* The node whose buffer input x of a concatenation reads (through reshapes
 * read only there), when it can be computed in place; else -1. */
static int32_t view_source(const bld *b, int32_t x) {
  const kiln_graph *g = b->g;
  const kiln_sched *s = b->s;
  while (N(g, x)->op == KILN_OP_RESHAPE && !s->mat[x] && b->uses[x] == 1) x = IN(g, x, 0);
  const kiln_gnode *p = N(g, x);
  if (!s->mat[x] || b->uses[x] != 1 || s->owner[x] < 0 || p->op == KILN_OP_LEAF || p->op == KILN_OP_SCALAR ||
      is_coll(p->op) || b->view_of[x])
    return -1;
  for (int32_t o = 0; o < g->n_outputs; o++)
    if (g->output_node[o] == x) return -1;
  return x;
}

static void find_view_concats(bld *b) {
  const kiln_graph *g = b->g;
  const kiln_sched *s = b->s;
  for (int32_t c = 0; c < g->n_nodes; c++) {
    const kiln_gnode *x = N(g, c);
    if (x->op != KILN_OP_CONCAT || !s->mat[c] || s->owner[c] < 0) continue;
    const kiln_skernel *k = &s->kernels[s->owner[c]];
    if (k->kind != KILN_SK_LOOP || k->n_members != 1 || k->members[0] != c) continue;
    int ok = 1;
    for (int64_t d = 0; d < x->iattr[0] && ok; d++) ok = x->shape[d] == 1;
    for (int32_t o = 0; o < g->n_outputs && ok; o++) ok = g->output_node[o] != c;
    int32_t src[64];
    for (int i = 0; i < x->n_in && ok; i++) {
      ok = x->n_in <= 64 && (src[i] = view_source(b, IN(g, c, i))) >= 0;
      for (int j = 0; j < i && ok; j++) ok = src[j] != src[i];
    }
    if (!ok) continue;
    size_t at = 0;
    for (int i = 0; i < x->n_in; i++) {
      b->view_of[src[i]] = c + 1;
      b->view_at[src[i]] = at;
      b->need[src[i]] = 1; /* its kernel stores it, into the block */
      at += kiln_gnode_bytes(N(g, src[i]));
    }
    b->view_of[c] = -1;
  }
}

static int view_kernel(const bld *b, const kiln_skernel *k) {
  return k->kind == KILN_SK_LOOP && k->n_members == 1 && b->view_of[k->members[0]] < 0;
}

/* What each kernel reads (b->loads_of); which nodes need a buffer (b->need). */
static kiln_status collect_loads(bld *b) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  b->n_loads = s->n_kernels; /* copy steps come later and read no loads */
  b->loads_of = calloc((size_t)b->n_loads + 1, sizeof *b->loads_of);
  if (!b->loads_of) return oom(b);
  kiln_status st = KILN_OK;
  for (int32_t p = 0; p < s->n_kernels && st == KILN_OK; p++) {
    kiln_skernel *k = &s->kernels[p];
    if (k->kind == KILN_SK_GEMM) {
      b->need[k->a.node] = b->need[k->b.node] = 1;
      if (k->c_node >= 0) b->need[k->c_node] = 1;
      continue;
    }
    if (k->kind == KILN_SK_COLL) { /* from its input's buffer into its own */
      b->need[IN(g, k->node, 0)] = b->need[k->node] = 1;
      continue;
    }
    if (view_kernel(b, k)) continue; /* a concatenation computed in place: no step */
    b->kid = p;
    b->seed = k->seed;
    b->loads = &b->loads_of[p];
    b->ok = 1;
    for (int32_t j = 0; j < k->n_members; j++) kiln_sched_walk_member(b, k->members[j]);
    if (!b->ok) st = kiln_err_set(b->err, KILN_ERR_INTERNAL, "schedule: kernel %d reads a value it cannot see", p);
    for (int32_t j = 0; j < b->loads_of[p].n; j += 2) b->need[b->loads_of[p].v[j]] = 1;
  }
  b->loads = NULL;
  for (int32_t o = 0; o < g->n_outputs; o++) b->need[g->output_node[o]] = 1;
  return st;
}

static void tile_span(const kiln_sched *s, int32_t p, int32_t *w, int32_t *r);

/* Output o's node is safe to compute in place in input i's buffer: nothing
 * reads input i after its kernel writes, and inside that kernel every read
 * of input i is at the index being written; in an attention tile (whose
 * kernels may run interleaved), no kernel of the tile reads input i. */
static int alias_safe(bld *b, int32_t n, int32_t i) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  const ivec *loads = b->loads_of;
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
  int32_t tw, tr;
  tile_span(s, w, &tw, &tr);
  for (int32_t p = 0; p < s->n_kernels; p++) {
    const kiln_skernel *k = &s->kernels[p];
    int tiled = tr > tw && p >= tw && p <= tr; /* in the writer's tile */
    if (k->kind == KILN_SK_GEMM) {
      if ((k->a.node == leaf || k->b.node == leaf) && (p >= w || tiled)) return 0;
      if (k->c_node == leaf && (p > w || tiled)) return 0;
      continue;
    }
    if (k->kind == KILN_SK_COLL) { /* it may still be in flight at any later kernel */
      if (IN(g, k->node, 0) == leaf) return 0;
      continue;
    }
    for (int32_t j = 0; j < loads[p].n; j += 2) {
      if (loads[p].v[j] != leaf) continue;
      if (p > w || tiled || (p == w && (kiln_sctx)loads[p].v[j + 1] != want)) return 0;
    }
  }
  return 1;
}

/* A buffer per graph input: the tensor's bytes, or a SCALAR's 8-byte double. */
static kiln_status place_inputs(bld *b) {
  const kiln_graph *g = b->g;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    int32_t ln = g->input_node[i];
    size_t bytes = N(g, ln)->op == KILN_OP_LEAF ? kiln_gnode_bytes(N(g, ln)) : 8;
    int32_t id = new_buf(b, KILN_SBUF_INPUT, i, bytes, ln);
    if (id < 0) return oom(b);
    b->s->buf_of[ln] = b->s->input_buf[i] = id;
  }
  return KILN_OK;
}

/* A collective computed in its input's buffer (the MPI library's in-place
 * form: no copy of the input into the result first): an all-reduce or a
 * broadcast (a result of the input's size) whose input is a scratch value
 * read by nothing else, and which is not itself a graph output. Nothing
 * else writes that buffer while the collective is in flight: its input's
 * kernel ran before it, and its readers wait for it (coll_liveness). */
static int coll_in_place(bld *b, int32_t n) {
  const kiln_graph *g = b->g;
  const kiln_gnode *x = N(g, n);
  if (x->op != KILN_OP_ALL_REDUCE && x->op != KILN_OP_BROADCAST) return 0;
  int32_t in = IN(g, n, 0);
  const kiln_gnode *y = N(g, in);
  if (y->op == KILN_OP_LEAF || y->op == KILN_OP_SCALAR || b->uses[in] != 1 || y->dtype != x->dtype ||
      kiln_gnode_bytes(y) != kiln_gnode_bytes(x))
    return 0;
  int32_t id = b->s->buf_of[in];
  if (id < 0 || b->s->bufs[id].kind != KILN_SBUF_SCRATCH) return 0;
  for (int32_t o = 0; o < g->n_outputs; o++)
    if (g->output_node[o] == n || g->output_node[o] == in) return 0;
  return 1;
}

/* The home of computed node n: a donated input's buffer when an aliased
 * output computes in place safely, else an output's buffer, else scratch.
 * done[o]: output o is in place (no end copy). -1 when out of memory. */
static int32_t home_of(bld *b, int32_t n, uint8_t *done) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  const kiln_gnode *x = N(g, n);
  if (kiln_op_table[x->op].kind == KILN_KIND_COLLECTIVE && coll_in_place(b, n)) return s->buf_of[IN(g, n, 0)];
  int32_t home = -1;
  for (int32_t o = 0; o < g->n_outputs; o++) {
    int32_t a = g->output_alias[o];
    if (g->output_node[o] != n || a < 0 || home >= 0) continue;
    if (alias_safe(b, n, a)) {
      home = s->buf_of[g->input_node[a]];
      s->aliased_bytes += kiln_gnode_bytes(x);
      done[o] = 1;
    }
  }
  for (int32_t o = 0; o < g->n_outputs && home < 0; o++) {
    if (g->output_node[o] != n || g->output_alias[o] >= 0) continue;
    home = new_buf(b, KILN_SBUF_OUTPUT, o, kiln_gnode_bytes(x), n);
    done[o] = 1;
  }
  if (home < 0) home = new_buf(b, KILN_SBUF_SCRATCH, -1, kiln_gnode_bytes(x), n);
  return home;
}

static kiln_status place_computed(bld *b, uint8_t *done) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    const kiln_gnode *x = N(g, n);
    if (!b->need[n] || x->op == KILN_OP_LEAF) continue;
    if (x->op == KILN_OP_SCALAR && !s->mat[n]) continue; /* only read: its input buffer */
    if (b->view_of[n] < 0 && s->buf_of[n] >= 0) continue; /* made with its first block */
    if (b->view_of[n] > 0) { /* a block of its concatenation's buffer */
      int32_t c = b->view_of[n] - 1;
      if (s->buf_of[c] < 0) s->buf_of[c] = new_buf(b, KILN_SBUF_SCRATCH, -1, kiln_gnode_bytes(N(g, c)), c);
      int32_t id = s->buf_of[c] < 0 ? -1 : new_buf(b, KILN_SBUF_SCRATCH, -1, kiln_gnode_bytes(x), n);
      if (id < 0) return oom(b);
      s->bufs[id].parent = s->buf_of[c];
      s->bufs[id].delta = b->view_at[n];
      s->buf_of[n] = id;
      continue;
    }
    s->buf_of[n] = home_of(b, n, done);
    if (s->buf_of[n] < 0) return oom(b);
  }
  return KILN_OK;
}

/* The end copy of output o in pass `pass` (see add_end_copies), if any. */
static kiln_status add_end_copy(bld *b, int pass, int32_t o, const uint8_t *done, int32_t *tmp_of) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  int32_t n = g->output_node[o], a = g->output_alias[o];
  int is_leaf = N(g, n)->op == KILN_OP_LEAF;
  if (done[o] || is_leaf != (pass < 2)) return KILN_OK;
  if (is_leaf && a >= 0 && g->input_node[a] == n) return KILN_OK; /* already there */
  if (a >= 0 && s->bufs[s->buf_of[n]].kind == KILN_SBUF_INPUT && s->bufs[s->buf_of[n]].index == a) return KILN_OK;
  if (pass == 1 && a < 0) return KILN_OK;
  size_t bytes = kiln_gnode_bytes(N(g, n));
  int32_t src = s->buf_of[n], dst;
  if (pass == 1) {
    src = tmp_of[o];
    dst = s->input_buf[a];
  } else if (a >= 0) {
    dst = is_leaf ? new_buf(b, KILN_SBUF_SCRATCH, -1, bytes, n) : s->input_buf[a];
    tmp_of[o] = dst;
  } else {
    dst = new_buf(b, KILN_SBUF_OUTPUT, o, bytes, n);
  }
  kiln_skernel *k = dst >= 0 ? kiln_sched_new_kernel(b) : NULL;
  if (!k) return oom(b);
  k->kind = KILN_SK_COPY;
  k->seed = g->n_nodes;
  k->node = n;
  k->src_buf = src;
  k->dst_buf = dst;
  k->bytes = bytes;
  return KILN_OK;
}

/* End copies, in three passes so no copy reads an input another copy
 * already overwrote: (0) inputs that are outputs into fresh outputs, and
 * into a temporary when the destination is itself a donated input (a
 * swap would otherwise lose data); (1) those temporaries into their
 * donated inputs; (2) computed values not yet in place. */
static kiln_status add_end_copies(bld *b, const uint8_t *done) {
  const kiln_graph *g = b->g;
  int32_t *tmp_of = calloc((size_t)g->n_outputs + 1, sizeof *tmp_of);
  if (!tmp_of) return oom(b);
  kiln_status st = KILN_OK;
  for (int pass = 0; pass < 3 && st == KILN_OK; pass++)
    for (int32_t o = 0; o < g->n_outputs && st == KILN_OK; o++) st = add_end_copy(b, pass, o, done, tmp_of);
  free(tmp_of);
  return st;
}

static void first_write(kiln_sbuf *bf, int32_t p) {
  if (p < bf->first) bf->first = p;
}
static void last_read(kiln_sbuf *bf, int32_t p) {
  if (p > bf->last) bf->last = p;
}

/* Where kernel p writes (*w) and reads (*r) for the lifetimes: p, or for
 * the three kernels of an attention tile (kiln_skernel.tile), which a
 * backend may run interleaved, batch entry by batch entry, the tile's first
 * and last: every buffer the tile reads stays live until its end, none it
 * writes shares bytes with one it reads. */
static void tile_span(const kiln_sched *s, int32_t p, int32_t *w, int32_t *r) {
  int32_t t = p;
  for (int32_t q = p; q >= 0 && q >= p - 2; q--)
    if (s->kernels[q].kind == KILN_SK_GEMM && s->kernels[q].tile && q + 2 >= p) t = q;
  *w = t;
  *r = t == p && !s->kernels[p].tile ? p : t + 2;
}

/* Loop kernel p: its stores (members with a buffer) and its buffers' lifetimes. */
static kiln_status loop_liveness(bld *b, int32_t p) {
  kiln_sched *s = b->s;
  kiln_skernel *k = &s->kernels[p];
  int32_t wp, rp;
  tile_span(s, p, &wp, &rp);
  k->stores = malloc(sizeof *k->stores * (size_t)k->n_members);
  if (!k->stores) return oom(b);
  for (int32_t j = 0; j < k->n_members && !view_kernel(b, k); j++) {
    int32_t m = k->members[j];
    if (s->buf_of[m] < 0) continue;
    KILN_ASSERT(s->buf_of[m] < s->n_bufs);
    k->stores[k->n_stores++] = m;
    first_write(&s->bufs[s->buf_of[m]], wp);
  }
  if (k->n_stores) s->n_loop_kernels++;
  const ivec *ld = &b->loads_of[p];
  for (int32_t j = 0; j < ld->n; j += 2) {
    int32_t id = kiln_sched_read_buf(s, ld->v[j]);
    KILN_ASSERT(id >= 0 && id < s->n_bufs); /* every node read has a buffer (collect_loads sets need) */
    last_read(&s->bufs[id], rp);
  }
  return KILN_OK;
}

static void gemm_liveness(kiln_sched *s, int32_t p) {
  const kiln_skernel *k = &s->kernels[p];
  int32_t wp, rp;
  tile_span(s, p, &wp, &rp);
  KILN_ASSERT(s->buf_of[k->node] >= 0); /* a GEMM's result is always needed */
  first_write(&s->bufs[s->buf_of[k->node]], wp);
  /* The operands are read from their own buffers (cpu's gemm_step): a
   * float SCALAR operand is materialized into a buffer of its dtype,
   * which must live until here, not only its input's double. Only the
   * alpha factor is read as the input's double. */
  int32_t rd[4] = {k->a.node, k->b.node, k->c_node, k->alpha_node};
  for (int i = 0; i < 4; i++) {
    if (rd[i] < 0) continue;
    int32_t id = i == 3 ? kiln_sched_read_buf(s, rd[i]) : s->buf_of[rd[i]];
    KILN_ASSERT(id >= 0 && id < s->n_bufs); /* collect_loads needs every operand */
    last_read(&s->bufs[id], rp);
  }
}

/* Whether kernel q (> the collective) reads buffer id. */
static int kernel_reads(bld *b, int32_t q, int32_t id) {
  const kiln_sched *s = b->s;
  const kiln_skernel *k = &s->kernels[q];
  if (k->kind == KILN_SK_GEMM) {
    int32_t rd[4] = {k->a.node, k->b.node, k->c_node, k->alpha_node};
    for (int i = 0; i < 4; i++)
      if (rd[i] >= 0 && (i == 3 ? kiln_sched_read_buf(s, rd[i]) : s->buf_of[rd[i]]) == id) return 1;
    return 0;
  }
  if (k->kind == KILN_SK_COLL) return s->buf_of[IN(b->g, k->node, 0)] == id;
  if (k->kind == KILN_SK_COPY) return k->src_buf == id;
  const ivec *ld = q < b->n_loads ? &b->loads_of[q] : NULL;
  for (int32_t j = 0; ld && j < ld->n; j += 2)
    if (kiln_sched_read_buf(s, ld->v[j]) == id) return 1;
  return 0;
}

/* Collective p may be in flight until its wait point, the first kernel
 * reading its result or the first end copy (which may write a donated
 * input it reads) (schedule.h): its input and result buffers stay live
 * until then, so no kernel in between reuses their bytes. */
static void coll_liveness(bld *b, int32_t p) {
  kiln_sched *s = b->s;
  kiln_skernel *k = &s->kernels[p];
  int32_t in = s->buf_of[IN(b->g, k->node, 0)], out = s->buf_of[k->node];
  KILN_ASSERT(out >= 0 && in >= 0); /* collect_loads needs both */
  k->wait_at = s->n_kernels;
  for (int32_t q = p + 1; q < s->n_kernels && k->wait_at == s->n_kernels; q++)
    if (kernel_reads(b, q, out) || s->kernels[q].kind == KILN_SK_COPY) k->wait_at = q; /* a copy may write its input */
  first_write(&s->bufs[out], p);
  last_read(&s->bufs[in], k->wait_at);
  last_read(&s->bufs[out], k->wait_at);
}

/* A concatenation's buffer lives while any of its blocks does: from the
 * first block's write (it is not written itself) past the last read of any
 * block. */
static void cover_blocks(kiln_sched *s) {
  for (int32_t i = 0; i < s->n_bufs; i++) {
    const kiln_sbuf *bf = &s->bufs[i];
    if (bf->parent < 0) continue;
    kiln_sbuf *pb = &s->bufs[bf->parent];
    if (bf->first < pb->first) pb->first = bf->first;
    if (bf->last > pb->last) pb->last = bf->last;
  }
}

/* Stores of loop kernels; the first write and last read of every buffer.
 * A buffer never written is live from 0; one never read until its write. */
static kiln_status store_and_liveness(bld *b) {
  kiln_sched *s = b->s;
  for (int32_t p = 0; p < s->n_kernels; p++) {
    kiln_skernel *k = &s->kernels[p];
    if (k->kind == KILN_SK_LOOP) {
      kiln_status st = loop_liveness(b, p);
      if (st != KILN_OK) return st;
    } else if (k->kind == KILN_SK_GEMM) {
      gemm_liveness(s, p);
    } else if (k->kind == KILN_SK_COLL) {
      coll_liveness(b, p);
    } else {
      KILN_ASSERT(k->src_buf >= 0 && k->dst_buf >= 0);
      last_read(&s->bufs[k->src_buf], p);
      first_write(&s->bufs[k->dst_buf], p);
    }
  }
  cover_blocks(s);
  for (int32_t i = 0; i < s->n_bufs; i++) {
    kiln_sbuf *bf = &s->bufs[i];
    if (bf->first == INT32_MAX) bf->first = 0;
    if (bf->last < bf->first) bf->last = bf->first;
  }
  cover_blocks(s); /* again: the defaults may lengthen a block's lifetime */
  return KILN_OK;
}

/* The arena planner's view of one scratch buffer: its lifetime, and where
 * it was placed (placed 0: not yet). */
typedef struct arena_buf {
  int32_t id, first, last, placed;
  size_t bytes, offset, end;
} arena_buf;

typedef struct arena_span {
  size_t offset, end;
} arena_span;

/* Placing order: larger first, then lower buffer number (ctx: the arena_bufs). */
static int by_size(int32_t a, int32_t b, void *ctx) {
  const arena_buf *x = (const arena_buf *)ctx + a, *y = (const arena_buf *)ctx + b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int by_first(int32_t a, int32_t b, void *ctx) {
  const arena_buf *x = (const arena_buf *)ctx + a, *y = (const arena_buf *)ctx + b;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int by_offset(const void *a, const void *b) {
  const arena_span *x = a, *y = b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Lifetimes longer than this (in kernel positions) are checked against
 * every buffer; shorter ones are found by their first position. */
#define ARENA_SHORT 32

/* Place scratch buffers in one arena: largest first, each at the lowest
 * offset that does not overlap a placed buffer whose lifetime overlaps.
 * The placed buffers whose lifetime overlaps are found without looking at
 * every buffer (short lifetimes by their first position, the few long ones
 * by a scan), sorted by offset, and one sweep finds the first gap that fits:
 * the lowest such offset, as moving past each overlapping buffer until none
 * overlaps would. Blocks of a buffer (parent >= 0) are placed with it. */
static size_t plan_arena(kiln_sched *s) {
  int32_t nb = s->n_bufs, n = 0, n_short = 0, n_long = 0, reach = 0; /* reach: the longest short lifetime */
  /* one block for the planner's arrays */
  size_t n1 = (size_t)nb + 1;
  char *blk = malloc(n1 * (sizeof(arena_buf) + sizeof(arena_span) + 4 * sizeof(int32_t)));
  arena_buf *ab = (arena_buf *)blk;
  arena_span *live = blk ? (arena_span *)(ab + n1) : NULL;
  int32_t *ord = blk ? (int32_t *)(live + n1) : NULL, *shorts = ord ? ord + n1 : NULL;
  int32_t *longs = shorts ? shorts + n1 : NULL, *tmp = longs ? longs + n1 : NULL;
  size_t peak = (size_t)-1;
  if (!blk) goto out;
  for (int32_t i = 0; i < nb; i++) {
    const kiln_sbuf *bf = &s->bufs[i];
    if (bf->kind != KILN_SBUF_SCRATCH || bf->parent >= 0) continue;
    ab[n] = (arena_buf){.id = i, .first = bf->first, .last = bf->last, .bytes = bf->bytes};
    ord[n] = n;
    if (bf->last - bf->first > ARENA_SHORT) {
      longs[n_long++] = n;
    } else {
      shorts[n_short++] = n;
      if (bf->last - bf->first > reach) reach = bf->last - bf->first;
    }
    n++;
  }
  kiln_sort_idx(ord, tmp, n, by_size, ab);
  kiln_sort_idx(shorts, tmp, n_short, by_first, ab);
  peak = 0;
  for (int32_t i = 0; i < n; i++) {
    arena_buf *a = &ab[ord[i]];
    size_t sz = (a->bytes + 63) & ~(size_t)63, off = 0;
    int32_t nl = 0, lo = 0, hi = n_short;
    while (lo < hi) { /* the first short lifetime that may reach a->first */
      int32_t mid = lo + (hi - lo) / 2;
      if (ab[shorts[mid]].first < a->first - reach) lo = mid + 1;
      else hi = mid;
    }
    for (int32_t j = lo; j < n_short && ab[shorts[j]].first <= a->last; j++) {
      const arena_buf *o = &ab[shorts[j]];
      if (o->placed && o->last >= a->first) live[nl++] = (arena_span){o->offset, o->end};
    }
    for (int32_t j = 0; j < n_long; j++) {
      const arena_buf *o = &ab[longs[j]];
      if (o->placed && o->last >= a->first && o->first <= a->last) live[nl++] = (arena_span){o->offset, o->end};
    }
    if (nl > 24) {
      qsort(live, (size_t)nl, sizeof *live, by_offset);
    } else { /* the usual few: by insertion (the order of equal offsets does not matter to the sweep) */
      for (int32_t q = 1; q < nl; q++)
        for (int32_t r = q; r > 0 && live[r - 1].offset > live[r].offset; r--) {
          arena_span tmp_span = live[r];
          live[r] = live[r - 1];
          live[r - 1] = tmp_span;
        }
    }
    for (int32_t j = 0; j < nl && live[j].offset < off + sz; j++) /* past it, every later one fits too */
      if (off < live[j].end) off = live[j].end;
    a->placed = 1;
    a->offset = off;
    a->end = off + sz;
    s->bufs[a->id].offset = off;
    if (off + sz > peak) peak = off + sz;
  }
  for (int32_t i = 0; i < nb; i++)
    if (s->bufs[i].parent >= 0) s->bufs[i].offset = s->bufs[s->bufs[i].parent].offset + s->bufs[i].delta;
out:
  free(blk);
  return peak;
}

static int plan_is_resizable(const kiln_graph *g, const kiln_sched *s);
static int find_sharers(const kiln_graph *g, kiln_sched *s);

kiln_status kiln_sched_plan_memory(bld *b) {
  size_t nn = (size_t)b->g->n_nodes + 1;
  b->view_of = calloc(nn, sizeof *b->view_of);
  b->view_at = calloc(nn, sizeof *b->view_at);
  if (!b->view_of || !b->view_at) {
    free(b->view_of);
    free(b->view_at);
    return oom(b);
  }
  find_view_concats(b);
  kiln_status st = collect_loads(b);
  /* buffers: inputs, then homes of computed nodes, then end copies */
  if (st == KILN_OK) st = place_inputs(b);
  uint8_t *done = st == KILN_OK ? calloc((size_t)b->g->n_outputs + 1, 1) : NULL;
  if (st == KILN_OK && !done) st = oom(b);
  if (st == KILN_OK) st = place_computed(b, done);
  if (st == KILN_OK) st = add_end_copies(b, done);
  free(done);
  if (st == KILN_OK) st = store_and_liveness(b);
  if (b->loads_of)
    for (int32_t p = 0; p <= b->n_loads; p++) free(b->loads_of[p].v);
  free(b->loads_of);
  b->loads_of = NULL;
  free(b->view_of);
  free(b->view_at);
  b->view_of = NULL;
  b->view_at = NULL;
  if (st != KILN_OK) return st;
  size_t peak = plan_arena(b->s);
  if (peak == (size_t)-1) return oom(b);
  b->s->scratch_bytes = peak;
  b->s->resizable = plan_is_resizable(b->g, b->s) && find_sharers(b->g, b->s);
  return KILN_OK;
}

/* ───── a later size of a dynamic family: the template's plan, resized ─────
 *
 * Which node gets which buffer, the end copies and every lifetime follow
 * from the kernels and what they read, not from sizes: at a later size of a
 * family (the same kernels, kiln_sched_build_like) they are the template's.
 * What depends on sizes is each buffer's bytes, the offset of each block of
 * a concatenation in it, and so the arena. Two decisions of the full plan
 * compare sizes (an output computed in its donated input's buffer, a
 * collective in its input's: equal bytes); each node is checked to fit its
 * buffer exactly here, as it did in the template, or the size is planned
 * from scratch. */

static size_t buf_bytes(const kiln_graph *g, const kiln_sched *s, int32_t i) {
  const kiln_gnode *x = N(g, s->buf_node[i]);
  return s->bufs[i].kind == KILN_SBUF_INPUT && x->op == KILN_OP_SCALAR ? 8 : kiln_gnode_bytes(x);
}

/* The byte offset of block blk in concatenation c's buffer: the bytes of
 * c's inputs before the one computed into blk (through the reshapes that
 * read it: view_source); (size_t)-1 when none is. */
static size_t block_delta(const kiln_graph *g, const kiln_sched *s, int32_t c, int32_t blk) {
  size_t at = 0;
  for (int j = 0; j < N(g, c)->n_in; j++) {
    int32_t x = IN(g, c, j);
    while (s->buf_of[x] < 0 && N(g, x)->op == KILN_OP_RESHAPE) x = IN(g, x, 0);
    if (s->buf_of[x] == blk) return at;
    at += kiln_gnode_bytes(N(g, IN(g, c, j)));
  }
  return (size_t)-1;
}

/* Node n fills its buffer exactly (a SCALAR input: its 8-byte double). */
static int node_fits(const kiln_graph *g, const kiln_sched *s, int32_t n) {
  int32_t id = s->buf_of[n];
  if (id < 0) return 1;
  const kiln_gnode *x = N(g, n);
  size_t have = s->bufs[id].bytes;
  return kiln_gnode_bytes(x) == have || (x->op == KILN_OP_SCALAR && s->bufs[id].kind == KILN_SBUF_INPUT && have == 8);
}

/* Every node with a buffer fills it exactly, as the full plan leaves them. */
static int nodes_fit(const kiln_graph *g, const kiln_sched *s) {
  for (int32_t n = 0; n < g->n_nodes; n++)
    if (!node_fits(g, s, n)) return 0;
  return 1;
}

/* The nodes of a resizable plan whose buffer is sized by another node:
 * the only ones a resized plan must check (each buffer is sized by its
 * own node there). 0 when out of memory. */
static int find_sharers(const kiln_graph *g, kiln_sched *s) {
  int32_t n_sh = 0;
  for (int32_t n = 0; n < g->n_nodes; n++) n_sh += s->buf_of[n] >= 0 && s->buf_node[s->buf_of[n]] != n;
  s->sharers = malloc(sizeof *s->sharers * ((size_t)n_sh + 1));
  if (!s->sharers) return 0;
  s->n_sharers = 0;
  for (int32_t n = 0; n < g->n_nodes; n++)
    if (s->buf_of[n] >= 0 && s->buf_node[s->buf_of[n]] != n) s->sharers[s->n_sharers++] = n;
  return 1;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The arena of s, a resized plan of template t, as the template's scaled:
 * plan_arena orders buffers by their bytes and places each at the end of
 * another or at 0, comparing sums of rounded sizes only; when every scratch
 * buffer's bytes and rounded size are the template's times one ratio r, it
 * makes the same choices at every step, and every offset and the peak are
 * the template's times r. Returns 1 with s's offsets and scratch_bytes so
 * set, 0 (nothing changed) when the sizes do not scale alike: the caller
 * places them (the usual case for a size that enters quadratically, or
 * with a constant term). */
static int arena_scaled(const kiln_sched *t, kiln_sched *s) {
  unsigned __int128 num = 0, den = 0; /* r = num / den: the first scratch buffer with bytes */
  for (int32_t i = 0; i < s->n_bufs; i++) {
    const kiln_sbuf *x = &s->bufs[i], *y = &t->bufs[i];
    if (x->kind != KILN_SBUF_SCRATCH || x->parent >= 0) continue;
    if (!den && y->bytes) num = x->bytes, den = y->bytes;
    if (!den) { /* none with bytes so far: equal (zero) sizes scale by any ratio */
      if (x->bytes) return 0;
      continue;
    }
    if ((unsigned __int128)x->bytes * den != (unsigned __int128)y->bytes * num ||
        (unsigned __int128)round64(x->bytes) * den != (unsigned __int128)round64(y->bytes) * num)
      return 0;
  }
  if (!den || !num) return 0;
  for (int32_t i = 0; i < s->n_bufs; i++) { /* each offset a sum of rounded sizes: r times it is whole */
    const kiln_sbuf *y = &t->bufs[i];
    if (y->kind == KILN_SBUF_SCRATCH && y->parent < 0 && (unsigned __int128)y->offset * num % den) return 0;
  }
  if ((unsigned __int128)t->scratch_bytes * num % den) return 0;
  for (int32_t i = 0; i < s->n_bufs; i++) {
    kiln_sbuf *x = &s->bufs[i];
    if (x->kind == KILN_SBUF_SCRATCH && x->parent < 0)
      x->offset = (size_t)((unsigned __int128)t->bufs[i].offset * num / den);
  }
  for (int32_t i = 0; i < s->n_bufs; i++)
    if (s->bufs[i].parent >= 0) s->bufs[i].offset = s->bufs[s->bufs[i].parent].offset + s->bufs[i].delta;
  s->scratch_bytes = (size_t)((unsigned __int128)t->scratch_bytes * num / den);
  return 1;
}

kiln_status kiln_sched_plan_like(bld *b, const kiln_sched *t, int32_t nk, int *fits) {
  const kiln_graph *g = b->g;
  kiln_sched *s = b->s;
  *fits = 0;
  int32_t nb = t->n_bufs;
  if (!t->resizable) return KILN_OK;
  if (!b->clean) { /* the template's buffers (a clean spare holds them: what changes is rewritten below) */
    if (!s->bufs) s->bufs = malloc(sizeof *s->bufs * ((size_t)nb + 1));
    if (!s->buf_node) s->buf_node = malloc(sizeof *s->buf_node * ((size_t)nb + 1));
    if (!s->bufs || !s->buf_node) return oom(b);
    memcpy(s->bufs, t->bufs, sizeof *s->bufs * (size_t)nb);
    memcpy(s->buf_node, t->buf_node, sizeof *s->buf_node * (size_t)nb);
    memcpy(s->buf_of, t->buf_of, sizeof *s->buf_of * (size_t)g->n_nodes);
    memcpy(s->input_buf, t->input_buf, sizeof *s->input_buf * (size_t)g->n_inputs);
  }
  s->n_bufs = nb;
  b->bcap = nb + 1;
  for (int32_t i = 0; i < nb; i++) s->bufs[i].bytes = buf_bytes(g, s, i);
  int ok = 1; /* each buffer's own node fits it (sized by it): the others are checked */
  for (int32_t k = 0; k < t->n_sharers && ok; k++) ok = node_fits(g, s, t->sharers[k]);
  for (int32_t i = 0; i < nb && ok; i++) {
    int32_t p = s->bufs[i].parent;
    if (p < 0) continue;
    int32_t c = s->buf_node[p];
    size_t d = block_delta(g, s, c, i);
    ok = d != (size_t)-1 && d + s->bufs[i].bytes <= s->bufs[p].bytes;
    s->bufs[i].delta = d;
  }
  if (!ok) return KILN_OK; /* the caller plans from scratch (fits 0) */
  for (int32_t p = 0; p < nk && !b->clean; p++) { /* the fused kernels' stores and wait points */
    kiln_skernel *k = &s->kernels[p];
    const kiln_skernel *tk = &t->kernels[p];
    k->n_stores = tk->n_stores;
    k->stores = tk->stores;
    k->wait_at = tk->wait_at;
  }
  s->stores_borrowed = 1;
  for (int32_t p = nk; p < t->n_kernels; p++) { /* the end copies, of their output's bytes here */
    const kiln_skernel *tk = &t->kernels[p];
    kiln_skernel *k = kiln_sched_new_kernel(b);
    if (!k) return oom(b);
    *k = *tk;
    k->bytes = kiln_gnode_bytes(N(g, k->node));
    if (k->bytes > s->bufs[k->src_buf].bytes || k->bytes > s->bufs[k->dst_buf].bytes) {
      s->n_kernels--; /* back to the fused kernels: planned from scratch */
      return KILN_OK;
    }
  }
  s->n_loop_kernels = t->n_loop_kernels;
  s->aliased_bytes = 0;
  for (int32_t o = 0; o < g->n_outputs; o++) {
    int32_t a = g->output_alias[o], n = g->output_node[o];
    if (a >= 0 && N(g, n)->op != KILN_OP_LEAF && s->buf_of[n] == s->input_buf[a])
      s->aliased_bytes += kiln_gnode_bytes(N(g, n));
  }
  s->arena_scaled = arena_scaled(t, s);
  size_t peak = s->arena_scaled ? s->scratch_bytes : plan_arena(s);
  if (peak == (size_t)-1) return oom(b);
  s->scratch_bytes = peak;
  *fits = 1;
  return KILN_OK;
}

/* Whether a full plan is what kiln_sched_plan_like assumes of a template
 * (checked once, when the plan is made): every node fills its buffer
 * exactly, the blocks' offsets are the sums block_delta finds, and each end
 * copy moves its output's bytes. */
static int plan_is_resizable(const kiln_graph *g, const kiln_sched *s) {
  if (!s->buf_node || !nodes_fit(g, s)) return 0;
  for (int32_t i = 0; i < s->n_bufs; i++)
    if (s->bufs[i].parent >= 0 && block_delta(g, s, s->buf_node[s->bufs[i].parent], i) != s->bufs[i].delta) return 0;
  for (int32_t p = 0; p < s->n_kernels; p++)
    if (s->kernels[p].kind == KILN_SK_COPY && s->kernels[p].bytes != kiln_gnode_bytes(N(g, s->kernels[p].node)))
      return 0;
  return 1;
}