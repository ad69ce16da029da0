/* Common-subexpression elimination by hash-consing: nodes are visited in
 * topological order with inputs already merged, so two nodes compute the
 * same values when they have the same op, dtype, shape, attributes (iattr
 * and the bits of fattr) and the same (merged) inputs. The later one is
 * replaced by the earlier one, whose source location is kept.
 *
 * LEAF and SCALAR nodes are graph inputs and never merged (the walk keeps
 * them). RANDOM nodes are pure functions of their seed input and attributes,
 * so two with the same seed node are the same tensor; different seeds are
 * different inputs and never compare equal.
 *
 * One open-addressing table of destination node indices: O(nodes + edges).
 */
#include <string.h>

#include "base/hash.h"
#include "passes/pass_graph.h"

/* Multiply-xor accumulation with one final mix: a table key only (the
 * structural graph hash is kiln_graph_hash), so speed beats strength; a
 * collision costs one node_same comparison. */
static inline uint64_t key_add(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }

static uint64_t node_key(const kiln_gnode *n, const int32_t *in) {
  uint64_t h = 0xcbf29ce484222325ULL;
  h = key_add(h, (uint64_t)n->op | (uint64_t)n->dtype << 16 | (uint64_t)n->rank << 24 |
                     (uint64_t)(uint32_t)n->n_iattr << 32);
  for (int d = 0; d < n->rank; d++) h = key_add(h, (uint64_t)n->shape[d]);
  for (int k = 0; k < n->n_iattr; k++) h = key_add(h, (uint64_t)n->iattr[k]);
  uint64_t fb;
  memcpy(&fb, &n->fattr, sizeof fb);
  h = key_add(h, fb);
  for (int32_t k = 0; k < n->n_in; k++) h = key_add(h, (uint64_t)(uint32_t)in[k] + 0x9e3779b97f4a7c15ULL * (uint64_t)k);
  return kiln_mix64(h);
}

static int node_same(const kiln_gnode *a, const int32_t *ain, const kiln_gnode *b, const int32_t *bin) {
  if (a->op != b->op || a->dtype != b->dtype || a->rank != b->rank || a->n_in != b->n_in || a->n_iattr != b->n_iattr)
    return 0;
  if (memcmp(a->shape, b->shape, sizeof a->shape[0] * a->rank)) return 0;
  if (memcmp(a->iattr, b->iattr, sizeof a->iattr[0] * (size_t)a->n_iattr)) return 0;
  /* Bitwise: -0.0 and 0.0 are different fills; a NaN equals itself. */
  if (memcmp(&a->fattr, &b->fattr, sizeof a->fattr)) return 0;
  return memcmp(ain, bin, sizeof *ain * (size_t)a->n_in) == 0;
}

/* The table lives in the shared ctx; its capacity is a power of two. */
static int32_t cse_rule(kiln_pass_walk *w, int32_t i, const kiln_gnode *n, const int32_t *in) {
  (void)i;
  int32_t *table = w->ctx->table;
  uint32_t mask = (uint32_t)w->ctx->cap_table - 1;
  const kiln_graph *g = w->view;
  uint32_t slot = (uint32_t)node_key(n, in) & mask;
  for (;; slot = (slot + 1) & mask) {
    int32_t e = table[slot];
    if (e < 0) break;
    if (node_same(&g->nodes[e], kiln_gnode_inputs(g, &g->nodes[e]), n, in)) {
      w->changes++;
      return e;
    }
  }
  int32_t r = kiln_pass_keep(w, n, in);
  if (r >= 0) table[slot] = r;
  return r;
}

kiln_status kiln_pass_cse(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, int *changes,
                              int *rebuilt) {
  /* Power of two at least twice the node count: load factor <= 1/2. */
  int64_t want = 16;
  while (want < 2 * (int64_t)src->n_nodes) want *= 2;
  if (want > INT32_MAX / 2) return KILN_ERR_OUT_OF_MEMORY;
  if (ctx->cap_table < want) {
    /* Grown from 16 by doubling: the capacity is exactly a power of two,
     * as the probe mask needs. */
    int32_t cap = 0;
    if (KILN_PASS_RESERVE(ctx->table, &cap, (int32_t)want)) return KILN_ERR_OUT_OF_MEMORY;
    ctx->cap_table = cap;
  }
  memset(ctx->table, 0xff, sizeof *ctx->table * (size_t)ctx->cap_table);
  return kiln_pass_walk_run(src, dst, ctx, cse_rule, changes, rebuilt);
}
