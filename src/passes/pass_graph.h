/* Internal to src/passes: the growable working graph the passes rewrite and
 * the one walk every pass is built on.
 *
 * A pass is a rule called once per node of the source graph, in topological
 * order, with the node's inputs already mapped to their replacements in the
 * destination graph. The rule emits the node (possibly rewritten) into the
 * destination, or answers with an existing destination node that computes the
 * same values. Because inputs are final before a node is visited, one walk
 * applies chains of rewrites (c1+c2 folded, then that result times c3 too)
 * and every emitted node only refers to earlier ones: topological order holds
 * by construction. Each walk is O(nodes + edges).
 *
 * Not thread-safe: a kiln_pass_ctx belongs to one kiln_passes_run call.
 */
#ifndef KILN_PASSES_PASS_GRAPH_H
#define KILN_PASSES_PASS_GRAPH_H

#include <stdint.h>

#include "base/status.h"
#include "ir/graph.h"

/* A kiln_graph whose node and edge arrays grow. g is a valid kiln_graph
 * view (g.n_nodes etc. are the used counts). */
typedef struct kiln_pgraph {
  kiln_graph g;
  int32_t cap_nodes, cap_in_idx, cap_inputs, cap_outputs, cap_alias;
} kiln_pgraph;

/* Reusable scratch memory of one kiln_passes_run call. */
typedef struct kiln_pass_ctx {
  int32_t *map;    /* source node -> destination node (or KILN_PASS_DROP) */
  int32_t *in_map; /* mapped copy of the source in_idx array */
  int32_t *table;  /* CSE open-addressing table of destination nodes */
  uint8_t *live;   /* DCE marks */
  int32_t cap_map, cap_in_map, cap_table, cap_live;
} kiln_pass_ctx;

/* One walk in progress.
 *
 * Copy on first write: while every node so far is kept unchanged ("clean"),
 * nothing is copied and rules read the source graph; the first rewrite
 * copies the clean prefix into dst and the walk goes on there. A pass that
 * changes nothing is therefore read-only, which makes the last, confirming
 * round of the fixed-point loop (and graphs with nothing to do) cheap. */
typedef struct kiln_pass_walk {
  const kiln_graph *src;
  kiln_pgraph *dst;
  kiln_pass_ctx *ctx;
  const kiln_graph *view; /* where rules read nodes: src while clean, else &dst->g */
  int32_t cur;            /* the source node being visited */
  int clean;
  int changes;            /* rewrites the rule applied */
  kiln_status status;     /* first failure (out of memory) */
} kiln_pass_walk;

/* Returned by a rule for a node that is removed (only DCE: nothing live may
 * refer to it). */
#define KILN_PASS_DROP (-2)

/* A rule: n is source node i, in[] its inputs mapped to destination nodes.
 * Returns the destination node that stands for it, KILN_PASS_DROP, or -1
 * after setting w->status. The returned node must have n's dtype and shape.
 * Rules read destination nodes through w->view only, emit only through
 * kiln_pass_emit/kiln_pass_keep, and hold no node pointer across an emit
 * (the arrays may move). Rules are not called for LEAF/SCALAR nodes (always
 * kept as they are). */
typedef int32_t (*kiln_pass_rule)(kiln_pass_walk *w, int32_t i, const kiln_gnode *n, const int32_t *in);

void kiln_pgraph_destroy(kiln_pgraph *p);
/* Append a copy of proto (its n_in inputs taken from in[]). Returns the new
 * node's index, or -1 on out-of-memory. */
int32_t kiln_pgraph_emit(kiln_pgraph *p, const kiln_gnode *proto, const int32_t *in);

void kiln_pass_ctx_destroy(kiln_pass_ctx *c);
/* buf (capacity *cap elements of elem bytes) grown to hold n: buf itself
 * when big enough, else the reallocated block (*cap updated); NULL on
 * out-of-memory (buf is then still valid and unchanged). */
void *kiln_pass_grow(void *buf, int32_t *cap, int32_t n, size_t elem);
/* KILN_PASS_RESERVE(ptr, cap, n): grow the array ptr in place; 0 or -1. */
#define KILN_PASS_RESERVE(ptr, cap, n)                                   \
  __extension__({                                                        \
    void *t_ = kiln_pass_grow((ptr), (cap), (n), sizeof *(ptr));         \
    if (t_) (ptr) = t_;                                                  \
    t_ ? 0 : -1;                                                         \
  })

/* Rebuild src into dst by applying rule to every node. *changes receives
 * the number of rewrites; *rebuilt is 1 when dst holds the result, 0 when
 * nothing changed (dst is then unused and src is the result). */
kiln_status kiln_pass_walk_run(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, kiln_pass_rule rule,
                               int *changes, int *rebuilt);

/* Helpers for rules. */
/* Emit n unchanged (with its mapped inputs). */
int32_t kiln_pass_keep(kiln_pass_walk *w, const kiln_gnode *n, const int32_t *in);
/* Append a new node (proto with its n_in inputs from in[]). Returns its
 * index, or -1 with w->status set. */
int32_t kiln_pass_emit(kiln_pass_walk *w, const kiln_gnode *proto, const int32_t *in);
/* A node of op with n's dtype, rank, shape and location, no attributes. */
kiln_gnode kiln_pass_node_like(const kiln_gnode *n, int op);
/* Stand-in for node n by destination node x, which computes the same
 * elements (in row-major order) possibly at a broadcastable shape: x itself
 * when its dtype and shape are n's; EXPAND(x) when x has n's rank and size-1
 * dims where they differ; EXPAND(RESHAPE(x)) when x has one element.
 * Inserted nodes take n's location. Returns -1 (no rewrite) when x's dtype
 * differs or the shapes are incompatible; w->status tells OOM apart. */
int32_t kiln_pass_coerce(kiln_pass_walk *w, const kiln_gnode *n, int32_t x);
/* 1 if a and b have the same rank and dims. */
int kiln_pass_same_shape(const kiln_gnode *a, const kiln_gnode *b);

/* The passes (each one walk; arguments as kiln_pass_walk_run's). */
typedef kiln_status (*kiln_pass_fn)(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, int *changes,
                                    int *rebuilt);
kiln_status kiln_pass_fold(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, int *changes, int *rebuilt);
kiln_status kiln_pass_simplify(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, int *changes,
                               int *rebuilt);
kiln_status kiln_pass_cse(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, int *changes, int *rebuilt);
kiln_status kiln_pass_dce(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, int *changes, int *rebuilt);

#endif
