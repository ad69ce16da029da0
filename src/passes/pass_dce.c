/* Dead-code elimination: a node is live if an output depends on it, or if
 * it is a graph input's LEAF/SCALAR node (inputs keep their count and order
 * even when unused). One backward sweep marks (inputs always precede their
 * users), one forward walk copies the live nodes: O(nodes + edges).
 */
#include <string.h>

#include "passes/pass_graph.h"

static int32_t dce_rule(kiln_pass_walk *w, int32_t i, const kiln_gnode *n, const int32_t *in) {
  if (!w->ctx->live[i]) {
    w->changes++;
    return KILN_PASS_DROP;
  }
  return kiln_pass_keep(w, n, in);
}

kiln_status kiln_pass_dce(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, int *changes,
                              int *rebuilt) {
  if (KILN_PASS_RESERVE(ctx->live, &ctx->cap_live, src->n_nodes + 1)) return KILN_ERR_OUT_OF_MEMORY;
  uint8_t *live = ctx->live;
  memset(live, 0, (size_t)src->n_nodes);
  for (int32_t o = 0; o < src->n_outputs; o++) live[src->output_node[o]] = 1;
  for (int32_t k = 0; k < src->n_inputs; k++) live[src->input_node[k]] = 1;
  for (int32_t i = src->n_nodes - 1; i >= 0; i--) {
    if (!live[i]) continue;
    const kiln_gnode *n = &src->nodes[i];
    const int32_t *in = kiln_gnode_inputs(src, n);
    for (int32_t k = 0; k < n->n_in; k++) live[in[k]] = 1;
  }
  return kiln_pass_walk_run(src, dst, ctx, dce_rule, changes, rebuilt);
}
