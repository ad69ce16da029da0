/* kiln_graph: the linearized, self-contained form of one step's graph.
 *
 * This is the contract between the frontend (which builds it at a cut),
 * the passes, the schedulers/code generators and the backends. Nodes are in
 * topological order: every input index is smaller than the node's own index.
 * A graph owns all its memory (one allocation per array, freed by
 * kiln_graph_free) and holds no pointer into the tracing state, so it can be
 * cached, compared and handed to another thread.
 */
#ifndef KILN_IR_GRAPH_H
#define KILN_IR_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/op.h"
#include "kiln/kiln.h"

#define KILN_MAX_IATTR 16

typedef struct kiln_gnode {
  uint16_t op;    /* kiln_op */
  uint8_t dtype;  /* kiln_dtype */
  uint8_t rank;
  int32_t n_in;
  int32_t in_off; /* inputs are graph->in_idx[in_off .. in_off + n_in) */
  int32_t n_iattr;
  /* what a walk over the graph reads first: the header, fattr and the
   * leading sizes share the node's first cache line */
  double fattr;
  int64_t shape[KILN_MAX_RANK];
  int64_t iattr[KILN_MAX_IATTR];
  kiln_loc loc;   /* user source line that created the node */
  uint32_t scope; /* annotation scope id (kiln_prof_scope_path): names kernels
                   * in profiles; like loc, not hashed nor compared */
} kiln_gnode;

typedef enum kiln_input_kind {
  KILN_INPUT_BUFFER = 0, /* LEAF: device buffer */
  KILN_INPUT_SCALAR = 1, /* SCALAR: a 0-d value, passed as an 8-byte buffer */
} kiln_input_kind;

typedef struct kiln_graph {
  int32_t n_nodes;
  kiln_gnode *nodes;
  int32_t *in_idx;    /* all input indices, see kiln_gnode.in_off */
  int32_t n_in_idx;
  /* Graph inputs: input i is the LEAF/SCALAR node input_node[i]
   * (LEAF/SCALAR nodes have iattr[0] == i). */
  int32_t n_inputs;
  int32_t *input_node;
  /* Outputs: node index of each output (a node may appear twice). */
  int32_t n_outputs;
  int32_t *output_node;
  /* Donation: output_alias[o] = input i whose buffer output o may reuse
   * (the runtime passes the same buffer for both), or -1. The executable
   * must be correct under that aliasing. */
  int32_t *output_alias;
  uint64_t hash; /* structural hash (kiln_graph_hash) where computed (the passes' result, a parsed
                  * graph), else 0: a traced graph and a family's instance leave it to who needs it */
} kiln_graph;

static inline const int32_t *kiln_gnode_inputs(const kiln_graph *g, const kiln_gnode *n) {
  return g->in_idx + n->in_off;
}
int64_t kiln_gnode_numel(const kiln_gnode *n);
size_t kiln_gnode_bytes(const kiln_gnode *n);

/* Allocate an empty graph with room for the given counts (zeroed). NULL on OOM. */
kiln_graph *kiln_graph_alloc(int32_t n_nodes, int32_t n_in_idx, int32_t n_inputs, int32_t n_outputs);
/* The same with the node array not zeroed: for a caller that writes every
 * node whole (zeroing each first) in one pass instead of two. */
kiln_graph *kiln_graph_alloc_unset(int32_t n_nodes, int32_t n_in_idx, int32_t n_inputs, int32_t n_outputs);
/* Deep copy. NULL on OOM. */
kiln_graph *kiln_graph_clone(const kiln_graph *g);
void kiln_graph_free(kiln_graph *g);

/* Structural hash over nodes (op, dtype, shape, attrs except SCALAR values,
 * inputs), inputs, outputs and aliases. Source locations are not hashed. */
uint64_t kiln_graph_hash(const kiln_graph *g);
/* 1 if a and b are the same program (everything kiln_graph_hash covers). */
int kiln_graph_equal(const kiln_graph *a, const kiln_graph *b);
/* Check the invariants (topological order, arity, shapes per op, dtypes).
 * Returns 0 if valid; otherwise -1 and a message in err. */
int kiln_graph_verify(const kiln_graph *g, char *err, size_t err_len);
/* Human-readable dump with source locations. */
void kiln_graph_print(const kiln_graph *g, FILE *f);

#endif
