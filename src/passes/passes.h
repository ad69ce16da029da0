/* Graph optimization passes: the stage between the frontend (which builds a
 * kiln_graph at a cut) and the schedulers/backends.
 *
 * kiln_passes_run rewrites a graph with four semantics-preserving passes,
 * repeated until nothing changes (at most KILN_PASSES_MAX_ITERS rounds):
 *   fold      constant folding over CONST (a uniform fill): elementwise ops
 *             whose result is exactly defined (IEEE basic ops, comparisons,
 *             casts, where), data movement and reductions of a CONST;
 *   simplify  algebraic identities (x*1, x+0, x-0, x/1, neg(neg x),
 *             reshape/permute/expand chains, no-op reshape/permute/expand/
 *             cast/slice/pad/concat, where with a constant condition);
 *   cse       common-subexpression elimination (hash-consing);
 *   dce       dead-code elimination (nodes unreachable from the outputs).
 * See docs/passes.md for the exact rules and what is deliberately not done.
 *
 * Guarantees on the result: graph inputs keep their count, order and their
 * LEAF/SCALAR nodes (input i's node still has iattr[0] == i, even unused);
 * outputs keep their count, order, dtype, shape and output_alias; nodes stay
 * in topological order; every node keeps its source location and a node
 * that replaces another takes the replaced node's location.
 */
#ifndef KILN_PASSES_PASSES_H
#define KILN_PASSES_PASSES_H

#include "base/status.h"
#include "ir/graph.h"

/* Upper bound on fold→simplify→cse→dce rounds. Every rewrite strictly
 * shrinks the graph or shortens a chain, so real graphs converge in 2-3. */
#define KILN_PASSES_MAX_ITERS 16

/* What one kiln_passes_run did (counters summed over all rounds). */
typedef struct kiln_pass_stats {
  int nodes_before, nodes_after;
  int folded;     /* nodes replaced by a CONST */
  int simplified; /* algebraic rewrites applied */
  int cse_merged; /* nodes merged into an identical earlier node */
  int dce_removed;/* dead nodes removed */
  double ns;      /* wall time of the whole call */
} kiln_pass_stats;

/* Run DCE, CSE, constant folding and algebraic simplification to a fixed
 * point (bounded iterations).
 *
 * in:    the graph to optimize; not modified (read only, may be shared with
 *        other readers).
 * out:   on success *out is a new graph owned by the caller (free it with
 *        kiln_graph_free), with its structural hash filled in; on failure
 *        *out is NULL.
 * stats: optional (NULL); cleared on entry, filled on success.
 * err:   optional (NULL); receives the message on failure.
 *
 * The result is checked with kiln_graph_verify after every pass that changed
 * something when the build is not an NDEBUG build, or when the environment
 * variable KILN_VERIFY=1 (the input graph is then checked too).
 *
 * Errors: KILN_ERR_INVALID_ARGUMENT (NULL in/out); KILN_ERR_OUT_OF_MEMORY;
 * KILN_ERR_INTERNAL when the input graph is malformed (a frontend bug) or a
 * pass produced a graph that fails verification (the message names the
 * pass).
 *
 * Thread-safety: reentrant; no global state (only reads the environment).
 * Cost: linear in the graph size per round (hash maps, no quadratic scans).
 */
kiln_status kiln_passes_run(const kiln_graph *in, kiln_graph **out, kiln_pass_stats *stats, kiln_err *err);

#endif
