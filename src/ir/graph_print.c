/* kiln_graph_print: a human-readable dump, one line per node:
 *
 *   graph 0x1f2e3d4c5b6a7988: 8 nodes, 2 inputs, 1 output
 *   %0 = leaf f32[4,8] input#0   # train.c:40
 *   %3 = add f32[4,8] %0, %2   # train.c:42
 *   %4 = reduce_sum f32[4,1] %3 axes=[1]   # train.c:43
 *   inputs: #0=%0 #1=%1
 *   outputs: %4 (aliases input #0)
 *
 * Attributes are printed by name for each op so a dump reads like the code
 * that built it. Safe on malformed graphs (prints "?" for bad indices).
 */
#include <inttypes.h>
#include <string.h>

#include "ir/graph.h"

static const char *dt_name(int dt) { return dt < KILN_DTYPE_COUNT ? kiln_dtype_name((kiln_dtype)dt) : "?"; }

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static void print_list(FILE *f, const char *name, const int64_t *v, int n) {
  fprintf(f, " %s=[", name);
  for (int k = 0; k < n; k++) fprintf(f, k ? ",%" PRId64 : "%" PRId64, v[k]);
  fputc(']', f);
}

/* Named attributes of node n (rank r). */
static void print_attrs(FILE *f, const kiln_gnode *n) {
  const int r = n->rank <= KILN_MAX_RANK ? n->rank : KILN_MAX_RANK;
  const int ni = n->n_iattr >= 0 && n->n_iattr <= KILN_MAX_IATTR ? n->n_iattr : 0;
  switch (n->op) {
    case KILN_OP_LEAF:
    case KILN_OP_SCALAR:
      if (ni >= 1) fprintf(f, " input#%" PRId64, n->iattr[0]);
      return;
    case KILN_OP_CONST: fprintf(f, " value=%.17g", n->fattr); return;
    case KILN_OP_RANDOM:
      if (ni >= 1) fprintf(f, " dist=%s", n->iattr[0] == 1 ? "normal" : n->iattr[0] == 0 ? "uniform" : "?");
      return;
    case KILN_OP_REDUCE_SUM:
    case KILN_OP_REDUCE_MAX:
    case KILN_OP_REDUCE_MIN:
    case KILN_OP_REDUCE_PROD:
      if (ni >= 1) {
        fprintf(f, " axes=[");
        int first = 1;
        for (int d = 0; d < 64; d++)
          if (((uint64_t)n->iattr[0] >> d) & 1) {
            fprintf(f, first ? "%d" : ",%d", d);
            first = 0;
          }
        fputc(']', f);
      }
      return;
    case KILN_OP_IOTA:
    case KILN_OP_ARGMAX:
    case KILN_OP_CUMSUM:
    case KILN_OP_CUMPROD:
    case KILN_OP_CONCAT:
    case KILN_OP_INDEX_SELECT:
    case KILN_OP_GATHER:
    case KILN_OP_SCATTER:
    case KILN_OP_SCATTER_ADD:
      if (ni >= 1) fprintf(f, " axis=%" PRId64, n->iattr[0]);
      return;
    case KILN_OP_ARGSORT:
      if (ni >= 2) fprintf(f, " axis=%" PRId64 " descending=%" PRId64, n->iattr[0], n->iattr[1]);
      return;
    case KILN_OP_PERMUTE: print_list(f, "perm", n->iattr, ni < r ? ni : r); return;
    case KILN_OP_SLICE:
      if (ni >= 2 * r) {
        print_list(f, "start", n->iattr, r);
        print_list(f, "step", n->iattr + r, r);
      }
      return;
    case KILN_OP_PAD:
      if (ni >= 2 * r) {
        print_list(f, "lo", n->iattr, r);
        print_list(f, "hi", n->iattr + r, r);
      }
      fprintf(f, " value=%.17g", n->fattr);
      return;
    default:
      if (ni) print_list(f, "iattr", n->iattr, ni);
      return;
  }
}

void kiln_graph_print(const kiln_graph *g, FILE *f) {
  if (!g) {
    fprintf(f, "graph (null)\n");
    return;
  }
  fprintf(f, "graph 0x%016" PRIx64 ": %d nodes, %d inputs, %d outputs\n", g->hash ? g->hash : kiln_graph_hash(g),
          (int)g->n_nodes,
          (int)g->n_inputs, (int)g->n_outputs);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kiln_gnode *n = &g->nodes[i];
    fprintf(f, "%%%d = %s %s[", (int)i, kiln_op_name(n->op), dt_name(n->dtype));
    for (int d = 0; d < n->rank && d < KILN_MAX_RANK; d++) fprintf(f, d ? ",%" PRId64 : "%" PRId64, n->shape[d]);
    fputc(']', f);
    if (n->n_in > 0 && n->in_off >= 0 && n->in_off + n->n_in <= g->n_in_idx) {
      const int32_t *in = kiln_gnode_inputs(g, n);
      for (int k = 0; k < n->n_in; k++) fprintf(f, k ? ", %%%d" : " %%%d", (int)in[k]);
    } else if (n->n_in > 0) {
      fprintf(f, " ?inputs");
    }
    print_attrs(f, n);
    if (n->loc.file) fprintf(f, "   # %s:%d", base_name(n->loc.file), n->loc.line);
    fputc('\n', f);
  }
  fprintf(f, "inputs:");
  for (int32_t k = 0; k < g->n_inputs; k++) fprintf(f, " #%d=%%%d", (int)k, (int)g->input_node[k]);
  fprintf(f, "\noutputs:");
  for (int32_t o = 0; o < g->n_outputs; o++) {
    fprintf(f, o ? ", %%%d" : " %%%d", (int)g->output_node[o]);
    if (g->output_alias[o] >= 0) fprintf(f, " (aliases input #%d)", (int)g->output_alias[o]);
  }
  fputc('\n', f);
}
