/* The pass driver: fold -> simplify -> cse -> dce, repeated until a round
 * changes nothing. A pass that changes something rebuilds the graph into
 * the other of two buffers (no allocation once they have grown); one that
 * changes nothing copies nothing (pass_graph.h). Each rebuilt graph is
 * verified when verification is on.
 */
#include "passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "passes/pass_graph.h"

/* Verification is always on in builds with assertions; NDEBUG builds check
 * only when asked (KILN_VERIFY=1), since it costs about as much as a pass. */
static int verify_enabled(void) {
#ifndef NDEBUG
  return 1;
#else
  const char *v = kiln_cfg()->verify;
  return v && v[0] == '1' && v[1] == 0;
#endif
}

/* Structural checks the passes themselves rely on for memory safety (the
 * full semantic check is kiln_graph_verify). A failure is a frontend bug. */
static kiln_status check_structure(const kiln_graph *g, kiln_err *err) {
  if (g->n_nodes < 0 || g->n_in_idx < 0 || g->n_inputs < 0 || g->n_outputs < 0 ||
      (g->n_nodes && !g->nodes) || (g->n_in_idx && !g->in_idx) || (g->n_inputs && !g->input_node) ||
      (g->n_outputs && (!g->output_node || !g->output_alias)))
    return kiln_err_set(err, KILN_ERR_INTERNAL, "passes: malformed input graph: bad counts or arrays");
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kiln_gnode *n = &g->nodes[i];
    if (n->op >= KILN_OP_COUNT || n->rank > KILN_MAX_RANK || n->n_iattr < 0 || n->n_iattr > KILN_MAX_IATTR ||
        n->n_in < 0 || n->in_off < 0 || (int64_t)n->in_off + n->n_in > g->n_in_idx)
      return kiln_err_set(err, KILN_ERR_INTERNAL, "passes: malformed input graph: node %d (%s) has bad fields", i,
                          kiln_op_name(n->op));
    int arity = kiln_op_table[n->op].arity;
    if (arity >= 0 ? n->n_in != arity : n->n_in < 1)
      return kiln_err_set(err, KILN_ERR_INTERNAL, "passes: malformed input graph: node %d (%s) has %d inputs", i,
                          kiln_op_name(n->op), n->n_in);
    for (int d = 0; d < n->rank; d++)
      if (n->shape[d] < 0)
        return kiln_err_set(err, KILN_ERR_INTERNAL, "passes: malformed input graph: node %d has a negative dim", i);
    const int32_t *in = kiln_gnode_inputs(g, n);
    for (int32_t k = 0; k < n->n_in; k++)
      if (in[k] < 0 || in[k] >= i)
        return kiln_err_set(err, KILN_ERR_INTERNAL,
                            "passes: malformed input graph: node %d (%s) input %d is %d (not topological)", i,
                            kiln_op_name(n->op), k, in[k]);
  }
  for (int32_t k = 0; k < g->n_inputs; k++) {
    int32_t x = g->input_node[k];
    if (x < 0 || x >= g->n_nodes ||
        (g->nodes[x].op != KILN_OP_LEAF && g->nodes[x].op != KILN_OP_SCALAR))
      return kiln_err_set(err, KILN_ERR_INTERNAL, "passes: malformed input graph: input %d is node %d", k, x);
  }
  for (int32_t o = 0; o < g->n_outputs; o++)
    if (g->output_node[o] < 0 || g->output_node[o] >= g->n_nodes)
      return kiln_err_set(err, KILN_ERR_INTERNAL, "passes: malformed input graph: output %d is node %d", o,
                          g->output_node[o]);
  return KILN_OK;
}

static kiln_status verify(const kiln_graph *g, const char *when, kiln_err *err) {
  char msg[512];
  msg[0] = 0;
  if (kiln_graph_verify(g, msg, sizeof msg) == 0) return KILN_OK;
  return kiln_err_set(err, KILN_ERR_INTERNAL, "passes: graph invalid %s: %s", when, msg);
}

/* Copy the working graph into an exactly sized, independently owned graph. */
static kiln_graph *finish(const kiln_graph *w) {
  kiln_graph *g = kiln_graph_clone(w);
  if (g) g->hash = kiln_graph_hash(g);
  return g;
}

static kiln_status run(const kiln_graph *in, kiln_graph **out, kiln_pass_stats *st, kiln_err *err) {
  static const struct {
    const char *name;
    kiln_pass_fn fn;
  } passes[] = {{"fold", kiln_pass_fold}, {"simplify", kiln_pass_simplify}, {"cse", kiln_pass_cse},
                {"dce", kiln_pass_dce}};
  kiln_status s = check_structure(in, err);
  if (s != KILN_OK) return s;
  int check = verify_enabled();
  if (check && (s = verify(in, "before the passes (frontend bug)", err)) != KILN_OK) return s;

  /* Double buffering: a pass reads the current graph and writes the other
   * buffer (only when it changes something). */
  kiln_pgraph buf[2];
  kiln_pass_ctx ctx;
  memset(buf, 0, sizeof buf);
  memset(&ctx, 0, sizeof ctx);
  /* The current graph: `in` itself until a pass rebuilds it into buf[]. */
  const kiln_graph *cur_g = in;
  int next = 0;
  for (int iter = 0; iter < KILN_PASSES_MAX_ITERS; iter++) {
    int round_changes = 0;
    for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) {
      int changes = 0, rebuilt = 0;
      s = passes[p].fn(cur_g, &buf[next], &ctx, &changes, &rebuilt);
      if (s != KILN_OK) {
        kiln_err_set(err, s, "passes: out of memory in pass %s", passes[p].name);
        goto done;
      }
      if (rebuilt) {
        cur_g = &buf[next].g;
        next ^= 1;
      }
      round_changes += changes;
      switch (p) {
        case 0: st->folded += changes; break;
        case 1: st->simplified += changes; break;
        case 2: st->cse_merged += changes; break;
        default: st->dce_removed += changes; break;
      }
      if (check && rebuilt) {
        char when[64];
        snprintf(when, sizeof when, "after pass %s", passes[p].name);
        if ((s = verify(cur_g, when, err)) != KILN_OK) goto done;
      }
    }
    if (!round_changes) break;
  }
  *out = finish(cur_g);
  if (!*out) {
    s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "passes: out of memory");
    goto done;
  }
  st->nodes_after = (*out)->n_nodes;
done:
  kiln_pgraph_destroy(&buf[0]);
  kiln_pgraph_destroy(&buf[1]);
  kiln_pass_ctx_destroy(&ctx);
  return s;
}

kiln_status kiln_passes_run(const kiln_graph *in, kiln_graph **out, kiln_pass_stats *stats, kiln_err *err) {
  kiln_err local_err;
  kiln_pass_stats local_stats;
  if (!err) err = &local_err;
  if (!stats) stats = &local_stats;
  memset(stats, 0, sizeof *stats);
  if (out) *out = NULL;
  if (!in || !out) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "kiln_passes_run: NULL graph argument");
  double t0 = (double)kiln_now_ns();
  stats->nodes_before = in->n_nodes;
  kiln_status s = run(in, out, stats, err);
  stats->ns = (double)kiln_now_ns() - t0;
  return s;
}
