/* Internal to src/schedule: the builder state shared by the stages of
 * kiln_sched_build, in the order they run:
 *
 *   schedule.c       the driver; which nodes must be materialized (kernel
 *                    boundaries: liveness, uses, recompute costs)
 *   schedule_fuse.c  fusion: GEMM updates recognized, materialized nodes
 *                    grouped into LOOP and GEMM kernels
 *   schedule_mem.c   memory planning: what each kernel reads, a buffer per
 *                    stored node, end copies, buffer lifetimes, the
 *                    scratch arena
 *
 * Not thread-safe: one builder per kiln_sched_build call. */
#ifndef KILN_SCHEDULE_SCHEDULE_INTERNAL_H
#define KILN_SCHEDULE_SCHEDULE_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "schedule/schedule.h"

typedef struct ivec {
  int32_t *v;
  int32_t n, cap;
} ivec;

/* A template's spare schedule (kiln_sched.spare): s is lent while busy;
 * clean: s holds a resized plan of the template whole (what a later size
 * rewrites is its sizes only); kcap: the capacity of s->kernels. */
typedef struct kiln_sched_spare {
  kiln_sched *s;
  int busy, clean;
  int32_t kcap;
} kiln_sched_spare;

typedef struct bld {
  const kiln_graph *g;
  kiln_sched *s;
  kiln_err *err;
  int clean; /* a resize in the template's clean spare: its copies of the template are in place */
  /* per node (all zero-initialized): */
  int32_t *uses;   /* readers, an output counting as one */
  int32_t *cost;   /* recompute cost of an inlined node */
  int32_t *live;   /* 1: reaches an output */
  int32_t *spread; /* 1: read through a broadcast that repeats each element */
  int32_t *need;   /* 1: read by some kernel or an output: gets a buffer */
  int32_t *upd;    /* MATMUL + 1 when a GEMM update computes the node (see
                    * schedule_fuse.c), -1 for that MATMUL, else 0 */
  /* memory planning (schedule_mem.c), per node: view_of[n] = c + 1 when n is
   * computed in place in its block of concatenation c, at byte view_at[n];
   * view_of[c] = -1 for such a concatenation (its kernel computes nothing) */
  int32_t *view_of;
  size_t *view_at;
  int32_t kcap, bcap; /* capacities of s->kernels, s->bufs */
  /* what each kernel reads: (node, kiln_sctx) pairs, n_loads + 1 entries
   * (n_loads = the kernels before the end copies, which read none) */
  ivec *loads_of;
  int32_t n_loads;
  /* walk state (kiln_sched_walk_member) */
  int32_t kid, seed;
  int ok, touches;
  ivec *loads; /* when non-NULL, record (node, ctx) pairs */
} bld;

static inline const kiln_gnode *N(const kiln_graph *g, int32_t i) { return &g->nodes[i]; }
static inline int32_t IN(const kiln_graph *g, int32_t n, int k) { return kiln_gnode_inputs(g, N(g, n))[k]; }

static inline int is_reduce(int op) { return kiln_op_table[op].kind == KILN_KIND_REDUCE; }

/* The per-line ops: a LOOP kernel of their own (row = line = 1, mask = the
 * axis), every input read through a load or an inlined expression. */
static inline int is_line(int op) {
  return op == KILN_OP_ARGSORT || op == KILN_OP_SCATTER || op == KILN_OP_SCATTER_ADD;
}
/* A scan (CUMSUM, CUMPROD) is a row kernel of its own: the rows are the
 * lines along its axis (the mask), its input is fused into it in F, and it
 * stores every element (codegen's gen_scan). */
static inline int is_scan(int op) { return kiln_op_table[op].kind == KILN_KIND_SCAN; }

/* A collective: a kernel of its own (KILN_SK_COLL), its input and itself
 * materialized. */
static inline int is_coll(int op) { return kiln_op_table[op].kind == KILN_KIND_COLLECTIVE; }

static inline uint32_t reduce_mask(const kiln_gnode *n) {
  if (n->op == KILN_OP_ARGMAX || is_scan(n->op)) return 1u << n->iattr[0];
  return (uint32_t)n->iattr[0] & ((1u << n->rank) - 1);
}

static inline int same_shape(int ra, const int64_t *a, int rb, const int64_t *b) {
  return ra == rb && memcmp(a, b, sizeof *a * (size_t)ra) == 0;
}

/* schedule_fuse.c */

/* Fill op with the buffer a GEMM reads for MATMUL operand `in`. */
void kiln_sched_gemm_operand(const kiln_graph *g, int32_t in, kiln_sgemm_operand *op);
/* Recognize GEMM updates (b->upd) and form the kernels in node order. */
kiln_status kiln_sched_fuse(bld *b);
/* Walk member m of kernel b->kid (seeded at b->seed): b->ok stays 1 when
 * every value it reads is at hand; records reads in b->loads if set. */
void kiln_sched_walk_member(bld *b, int32_t m);
/* Append a zeroed kernel; NULL when out of memory. */
kiln_skernel *kiln_sched_new_kernel(bld *b);

/* GEMM kernel k, copied from the schedule of another instance of b->g's
 * family (kiln_sched_build_like): its update factors and operand strides
 * at b->g's sizes and constants. 0 when its operands are other nodes. */
int kiln_sched_gemm_refresh(bld *b, kiln_skernel *k);

/* schedule_mem.c */

/* Buffers, end copies, liveness and the arena of the fused kernels. */
kiln_status kiln_sched_plan_memory(bld *b);
/* The memory plan of template t (a schedule of another instance of b's
 * graph's family, with the same kernels) at b's sizes: t's buffers, stores,
 * lifetimes and end copies, each buffer sized by its node here, the blocks
 * of concatenations placed again, and the arena planned again. *fits = 0
 * (nothing changed in b->s's plan fields that matters: the caller plans from
 * scratch) when a size here breaks what t's plan rests on: a node that no
 * longer fits its buffer exactly, a block outside its concatenation. */
kiln_status kiln_sched_plan_like(bld *b, const kiln_sched *t, int32_t nk, int *fits);

#endif
