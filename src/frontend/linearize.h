/* Linearization of the trace-time graph at a cut: the nodes the outputs
 * reach, numbered in a canonical topological order (depth-first post-order
 * from the outputs, operands in order), and the graph inputs (LEAF and
 * SCALAR nodes) in that order. The order depends only on the graph's
 * structure, never on when its nodes were made: a loop that never marks a
 * step reuses nodes of earlier passes (hash-consing), and a creation-order
 * numbering would then number the same graph differently each pass. The same order is used to verify a cache
 * hit against a cached kiln_graph without building a new one, and to build
 * the kiln_graph on a miss. Single-threaded (the tracing thread). */
#ifndef KILN_FRONTEND_LINEARIZE_H
#define KILN_FRONTEND_LINEARIZE_H

#include "frontend/trace.h"
#include "ir/symshape.h"

typedef struct kiln_lin {
  kiln_node **order; /* canonical topological order */
  uint32_t n, cap;
  struct kiln_lin_frame *stack; /* depth-first scratch */
  uint32_t cap_stack;
  kiln_node **inputs;
  uint32_t n_inputs, cap_inputs;
} kiln_lin;

/* Number the graph of outs. Returns 0, or -1 on out-of-memory. */
int kiln_lin_run(kiln_frontend *fe, kiln_lin *L, int n_out, kiln_node *const *outs);
/* 1 if the numbered graph (outs, alias) is exactly g. */
int kiln_lin_matches(const kiln_lin *L, int n_out, kiln_node *const *outs, const int32_t *alias, const kiln_graph *g);
/* 1 if the numbered graph is an instance of the family (g, s) at the symbol
 * values v: what kiln_symshape_bind would say of the graph kiln_lin_build
 * makes (every node, input, output and alias), without making it. A cache
 * hit on a planned size of a dynamic family (runtime/runtime.c). */
int kiln_lin_binds(const kiln_lin *L, int n_out, kiln_node *const *outs, const int32_t *alias, const kiln_graph *g,
                   const kiln_symshape *s, const int64_t *v);
/* Build the kiln_graph (NULL on out-of-memory). */
kiln_graph *kiln_lin_build(const kiln_lin *L, int n_out, kiln_node *const *outs, const int32_t *alias);
void kiln_lin_free(kiln_lin *L);

#endif
