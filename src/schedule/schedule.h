/* The schedule: a kiln_graph grouped into kernels plus a memory plan.
 *
 * Fusion model (see docs/codegen.md):
 *   - Elementwise ops, CAST, CONST, IOTA, RANDOM, SCALAR reads and the MOVE
 *     ops are inlined into their consumers as index expressions.
 *   - A node is materialized (gets a buffer) when it is a graph output, a
 *     MATMUL operand that cannot be folded into the GEMM call, a MATMUL, a
 *     reduction read by another kernel, or a multi-use node that is not
 *     cheap to recompute.
 *   - A LOOP kernel has a domain F (a shape) and a mask of "inner" axes.
 *     mask == 0: an elementwise kernel over F writing one or more F-shaped
 *     nodes. mask != 0: a row kernel: for each row (an index over the outer
 *     axes) it computes its reductions over the inner axes into locals and
 *     then writes its F-shaped and row-shaped (Rs) nodes.
 *   - GEMM kernels call the GEMM library with transposes and broadcast batch
 *     dims folded, and absorb an update `L + alpha·(A·B)` of a graph input L
 *     (an optimizer step, in place when L is donated); COPY steps move whole
 *     buffers (outputs that are inputs, duplicated outputs, aliased outputs
 *     computed into a temporary).
 * Kernels run in the order of the array; that order is topological because
 * every cross-kernel read of node d by kernel K satisfies d < K.seed (a
 * COLL kernel, moved earlier, still follows the kernel computing its input).
 *
 * Thread-safety: a schedule is immutable after kiln_sched_build.
 */
#ifndef KILN_SCHEDULE_SCHEDULE_H
#define KILN_SCHEDULE_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "ir/graph.h"

/* COLL: a collective node (ALL_REDUCE, BROADCAST, ALL_GATHER), run by the
 * backend through the dist service: `node` from the buffer of its input
 * (materialized) into its own. A backend may start it and run the next
 * kernels while it is in flight, waiting for it before kernel `wait_at`
 * (the first that reads its result; n_kernels: the end). Collectives are
 * issued early: each right after the kernel computing its input (keeping
 * their order among themselves), so the gradients of the last layers are
 * all-reduced while the backward of the first ones runs. The memory plan
 * keeps its input and result buffers live until wait_at. */
typedef enum kiln_skind { KILN_SK_LOOP, KILN_SK_GEMM, KILN_SK_COPY, KILN_SK_COLL } kiln_skind;

/* Where a buffer lives at run time. */
typedef enum kiln_sbuf_kind { KILN_SBUF_INPUT, KILN_SBUF_OUTPUT, KILN_SBUF_SCRATCH } kiln_sbuf_kind;

typedef struct kiln_sbuf {
  kiln_sbuf_kind kind;
  int32_t index;   /* graph input / output number (INPUT, OUTPUT) */
  size_t offset;   /* byte offset in the scratch arena (SCRATCH) */
  size_t bytes;
  int32_t first, last; /* kernel positions of the first write / last read (liveness) */
  /* SCRATCH: -1, or the buffer this one is a block of, at byte `delta`
   * (offset = the parent's offset + delta): an input computed in place in
   * its concatenation (schedule_mem.c); the parent's lifetime covers it */
  int32_t parent;
  size_t delta;
} kiln_sbuf;

/* One GEMM operand: a buffer read as [batch..., rows, cols], row-major. */
typedef struct kiln_sgemm_operand {
  int32_t node;                     /* the materialized node (or LEAF) holding the data */
  int trans;                        /* 1: the matmul reads its transpose */
  int64_t batch_stride[KILN_MAX_RANK]; /* element stride per batch dim (0: broadcast) */
} kiln_sgemm_operand;

typedef struct kiln_skernel {
  kiln_skind kind;
  int32_t seed; /* node that started the kernel */
  /* LOOP */
  int row;  /* 1: row kernel (seeded by a reduction), 0: elementwise */
  int rank;
  int64_t shape[KILN_MAX_RANK]; /* domain F */
  uint32_t mask;                /* inner (reduced) axes of F (row kernels) */
  int line; /* 1: a line kernel (row = 1, mask = one axis): its one member, an
             * ARGSORT or SCATTER(_ADD), is computed line by line along the
             * axis (codegen_line.c); nothing else joins it */
  int32_t n_members, *members;  /* nodes computed here, increasing; reductions are locals */
  int32_t n_stores, *stores;    /* members written to their buffers */
  /* GEMM: node = the value written, mm = the MATMUL. They differ when an
   * update is fused into the call (see "GEMM updates" in schedule_fuse.c):
   * node = alpha · (A·B) + beta · c_node, alpha = alpha_c times the float
   * SCALAR alpha_node's value at run time (when alpha_node >= 0). Plain:
   * node == mm, c_node == alpha_node == -1, alpha_c == 1, beta == 0. */
  int32_t node, mm;
  kiln_sgemm_operand a, b;
  int32_t c_node, alpha_node;
  double alpha_c, beta;
  /* GEMM: 1 when this kernel, the row kernel after it and the GEMM after
   * that compute softmax-like rows of a batched product and their product
   * with another operand (attention's S = Q·Kᵀ, P = rows(S), O = P·V), each
   * of S and P read by the next kernel alone: a backend may run the three
   * one batch entry at a time, S and P of an entry staying in its cache
   * (schedule_fuse.c, "Attention tiles"). The memory plan takes the three
   * as one: what they read lives until the last, what they write from the
   * first (schedule_mem.c, tile_span). */
  int tile;
  int32_t wait_at; /* COLL: see KILN_SK_COLL */
  /* COPY: buffer src_buf -> buffer dst_buf, `bytes` bytes (node: the output copied) */
  int32_t src_buf, dst_buf;
  size_t bytes;
} kiln_skernel;

typedef struct kiln_sched {
  const kiln_graph *g; /* borrowed */
  int32_t n_kernels;
  kiln_skernel *kernels;
  int32_t *buf_of;   /* per node: buffer id or -1 (not stored); see kiln_sched_read_buf */
  int32_t *input_buf; /* per graph input: its buffer id */
  int32_t *owner;    /* per node: kernel computing it, -1 for inputs/inlined nodes */
  uint8_t *mat;      /* per node: 1 if materialized (a kernel boundary) */
  int32_t n_bufs;
  kiln_sbuf *bufs;
  int32_t *buf_node; /* per buffer: the node whose bytes it holds (a SCALAR input: its 8-byte double); what
                      * a later size of a dynamic family sizes its buffers by (kiln_sched_build_like) */
  size_t scratch_bytes; /* peak scratch (arena size) */
  int n_loop_kernels, n_gemm_calls;
  size_t aliased_bytes;
  int32_t borrowed; /* kernels [0, borrowed) share their members with the template schedule
                     * (kiln_sched_build_like), which must outlive this one */
  int stores_borrowed; /* and their stores (the template's memory plan, taken at new sizes) */
  int resizable;       /* a full memory plan that later sizes of its family may take resized
                        * (schedule_mem.c, kiln_sched_plan_like) */
  int32_t *node_uses;  /* per node: its readers (kiln_sched_build's; NULL otherwise), which the later
                        * sizes of a family take instead of counting them again */
  int32_t n_sharers;   /* a resizable plan: the nodes whose buffer is sized by another node (an */
  int32_t *sharers;    /* output in its donated input's buffer...), which a resized plan checks */
  int arena_scaled;    /* a resized plan whose arena is the template's scaled (every scratch buffer
                        * grew by one ratio: kiln_sched_plan_like), not placed again */
  /* A template's spare: the schedule its later sizes are made in, one at a
   * time, instead of a new one each (kiln_sched_build_like); a schedule
   * that is a spare (lent_by) goes back to its template when freed. */
  struct kiln_sched_spare *spare, *lent_by;
} kiln_sched;

/* Build the schedule of g (g must outlive it and pass kiln_graph_verify).
 * Errors: KILN_ERR_OUT_OF_MEMORY, KILN_ERR_UNSUPPORTED for ops this
 * scheduler cannot handle. */
kiln_status kiln_sched_build(const kiln_graph *g, kiln_sched **out, kiln_err *err);
/* The schedule of g, an instance of t's graph's family (the same nodes,
 * ops, attributes and inputs; other sizes and size-derived constants:
 * ir/symshape.h), with t's kernels: t's fusion, not decided again; each
 * kernel's domain, GEMM strides and factors made at g's sizes; t's memory
 * plan (buffers, stores, end copies, lifetimes) with every buffer sized at
 * g's sizes and the arena planned again (schedule_mem.c,
 * kiln_sched_plan_like), or, where a size breaks what t's plan rests on,
 * the whole memory plan made at g's sizes; that may differ from t's (an
 * in-place output): the caller compares the structure (cpu_family.c). The
 * kernels' member lists and stores are t's (t must outlive the result). */
kiln_status kiln_sched_build_like(const kiln_sched *t, const kiln_graph *g, kiln_sched **out, kiln_err *err);
void kiln_sched_free(kiln_sched *s);
/* 1 when a and b have one structure, not necessarily one size: the same
 * kernels (kind, members, stores, operands), buffers (kind, graph input or
 * output number, parent) and node-to-buffer map; what a dynamic family's
 * later sizes must share with it (backends/cpu/cpu_family.c). */
int kiln_sched_same_structure(const kiln_sched *a, const kiln_sched *b);

/* The buffer a kernel reads for node n: a SCALAR reads its input's 8-byte
 * buffer even when the node is also computed into an output. */
static inline int32_t kiln_sched_read_buf(const kiln_sched *s, int32_t n) {
  const kiln_gnode *x = &s->g->nodes[n];
  return x->op == KILN_OP_SCALAR ? s->input_buf[x->iattr[0]] : s->buf_of[n];
}

/* Expression contexts while walking a kernel's inlined trees (shared with
 * codegen so both agree on what may be read where). */
typedef enum kiln_sctx {
  KILN_SCTX_F,     /* the kernel's canonical index over its domain F */
  KILN_SCTX_RS,    /* the canonical row index (F with inner axes at 0) */
  KILN_SCTX_OTHER, /* any other index (behind a move op) */
} kiln_sctx;

/* The context in which `in` (input number k of node n) is evaluated when n is
 * evaluated in context c of kernel k. */
kiln_sctx kiln_sched_input_ctx(const kiln_graph *g, const kiln_skernel *k, int32_t n, int input_no, kiln_sctx c);
/* 1 if node n has the shape of F (RS: of F with inner axes 1). */
int kiln_sched_shape_is(const kiln_graph *g, const kiln_skernel *k, int32_t n, kiln_sctx c);

#endif
