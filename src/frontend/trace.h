/* The frontend's internal state: the tensor table, trace-time IR nodes and
 * their hash-consing table.
 *
 * Trace-time nodes live in an arena that is reset at each step marker: by
 * then every kept tensor has been computed (it became a LEAF-backed tensor)
 * and every other tensor of the step has been released, so no node survives.
 *
 * Each node carries its structural hash, computed incrementally when it is
 * made (O(1) per op), so hashing a step's graph costs O(outputs).
 * Hash-consing makes identical (op, attrs, inputs) the same node: common
 * subexpressions are shared at trace time. LEAF nodes are consed by buffer;
 * SCALAR nodes never (each call is its own graph input, so the graph's
 * structure never depends on scalar values).
 *
 * Single-threaded: only the tracing thread touches this state.
 */
#ifndef KILN_FRONTEND_TRACE_H
#define KILN_FRONTEND_TRACE_H

#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/status.h"
#include "ir/graph.h"
#include "ir/op.h"

typedef struct kiln_node kiln_node;
struct kiln_node {
  uint64_t hash; /* structural: op, dtype, shape, attrs, input hashes */
  uint16_t op;
  uint8_t dtype;
  uint8_t rank;
  uint8_t no_grad; /* made inside a no-grad region: backward does not pass through it */
  uint8_t dyn;     /* LEAF: the dimensions marked dynamic (kiln_dynamic), bit d; not hashed */
  uint8_t own;     /* a copy made by kiln_fe_own_node (not hash-consed); not hashed */
  uint16_t n_in;
  uint16_t n_iattr;
  int64_t shape[KILN_MAX_RANK];
  kiln_node **in;
  int64_t *iattr;
  double fattr;   /* CONST value; SCALAR value for float dtypes */
  int64_t ival;   /* SCALAR value for integer dtypes */
  kiln_buf *buf;  /* LEAF: the data (a reference is held) */
  kiln_node *tape; /* LEAF of a value read this step: the node that computed it
                    * (autograd passes gradients on to it); else NULL */
  kiln_loc loc;
  uint32_t scope; /* innermost annotation scope at creation (kiln_prof_scope_current);
                   * names kernels in traces; not hashed, not compared */
  /* linearization scratch */
  uint32_t mark;  /* == frontend mark epoch when lin is valid */
  int32_t lin;
  kiln_node *cons_next; /* hash-consing chain */
};

/* One tensor slot. A slot is pending (node != NULL, not a LEAF), computed
 * (buf != NULL), or poisoned. */
typedef struct kiln_tslot {
  uint32_t gen;     /* live generation; bumped on release */
  uint8_t live;
  uint8_t kept;
  uint8_t poisoned;
  uint8_t dtype;
  uint8_t rank;
  uint8_t dyn;          /* dimensions marked dynamic (kiln_dynamic), bit d */
  uint8_t grad_own;     /* requires grad: its node is its own (kiln_fe_own_node), never a
                         * hash-consed twin another tensor also uses */
  int64_t shape[KILN_MAX_RANK];
  kiln_node *node;      /* pending computation, or this step's LEAF for buf */
  kiln_buf *buf;        /* computed value */
  kiln_buf *donor;      /* old buffer given up by kiln_assign, may be reused */
  kiln_node *traced;    /* the pending node a value read computed this step: the
                         * tape kiln_backward follows after the read (dies with
                         * the step's nodes, cleared at the step marker) */
  uint32_t next_free;
  int32_t kept_pos;     /* index in the kept list, -1 if not kept */
  kiln_loc loc;
} kiln_tslot;

/* Services the runtime gives the frontend (dependency inversion: the
 * frontend never calls stages to its right directly). */
typedef struct kiln_device_hooks {
  void *ctx;
  /* Allocate a device buffer and copy host bytes in (NULL data: zero-size ok). */
  kiln_buf *(*upload)(void *ctx, const void *host, size_t bytes, kiln_loc loc);
} kiln_device_hooks;

/* A value kiln_assign replaced this step: the tensor's node before the
 * assign (autograd refuses a backward that reaches it from a tensor that
 * requires grad: its gradient would miss that use). */
typedef struct kiln_replaced {
  kiln_node *old;
  uint32_t index, gen; /* the tensor's handle */
  kiln_loc loc;        /* the kiln_assign */
} kiln_replaced;

typedef struct kiln_frontend {
  kiln_tslot *slots;
  uint32_t n_slots, cap_slots;
  uint32_t free_head; /* 0: none (slot 0 is reserved for the null tensor) */
  uint32_t *step_list; /* tensors created this step */
  uint32_t n_step, cap_step;
  uint32_t *kept_list;
  uint32_t n_kept, cap_kept;

  kiln_arena arena;  /* nodes of this step */
  kiln_node **leaves; /* LEAF nodes of this step (each holds a buffer reference) */
  uint32_t n_leaves, cap_leaves;
  kiln_node **created; /* every node of this step in creation order: a topological order */
  uint32_t n_created, cap_created;
  kiln_node **cons;  /* hash-consing buckets */
  uint32_t cons_cap;
  uint32_t n_nodes;  /* nodes made this step */
  uint32_t mark_epoch;
  uint32_t no_grad_depth; /* > 0 inside kiln_no_grad_begin/end (autograd) */
  uint8_t autocast[16];   /* kiln_autocast_begin's dtypes, innermost last (autocast.c) */
  uint32_t autocast_depth;
  kiln_replaced *replaced; /* this step's, in order; die with the step's nodes */
  uint32_t n_replaced, cap_replaced;

  kiln_device_hooks hooks;
  uint64_t ops_traced;
  uint32_t gen_base; /* generation of never-used slots: above every generation of
                      * the previous runtime, so its handles stay stale */
} kiln_frontend;

kiln_status kiln_frontend_init(kiln_frontend *fe, kiln_device_hooks hooks);
/* The highest generation any slot has had (0 when none): a new frontend
 * started with gen_base above it never accepts an old handle. */
uint32_t kiln_fe_max_gen(const kiln_frontend *fe);
/* Releases every tensor and node. */
void kiln_frontend_destroy(kiln_frontend *fe);
/* Resolve a handle: NULL (with a sticky error naming `op` and loc) when stale
 * or null. Poisoned slots are returned (check ->poisoned). */
kiln_tslot *kiln_fe_slot(kiln_frontend *fe, kiln_tensor t, const char *op, kiln_loc loc);
/* The node for a tensor used as an op input (its pending node or a LEAF on
 * its buffer). NULL if poisoned. */
kiln_node *kiln_fe_node_of(kiln_frontend *fe, kiln_tslot *s);
/* 1 if every size is >= 0 and the product of the non-zero sizes times the
 * dtype's size fits in int64 (element count and bytes never overflow). */
int kiln_fe_shape_check(kiln_dtype dt, int rank, const int64_t *shape);
static inline int kiln_fe_shape_ok(kiln_dtype dt, int rank, const int64_t *shape) {
  /* every new node passes here: sizes below 2^16 in at most 3 dimensions
   * (2^48 elements of at most 8 bytes) need no multiplication; negative
   * sizes set the high bits and take the full check */
  uint64_t any = 0;
  for (int i = 0; i < rank; i++) any |= (uint64_t)shape[i];
  return (rank <= 3 && any < (1u << 16)) || kiln_fe_shape_check(dt, rank, shape);
}
/* Make (or find) a node. inputs are nodes; iattr copied. NULL on OOM, or
 * when the shape fails kiln_fe_shape_ok (the error, naming the op, the
 * shapes and loc, is recorded). */
kiln_node *kiln_fe_node(kiln_frontend *fe, int op, kiln_dtype dt, int rank, const int64_t *shape, int n_in,
                        kiln_node *const *in, int n_iattr, const int64_t *iattr, double fattr, kiln_loc loc);
/* A SCALAR input node (never consed). */
kiln_node *kiln_fe_scalar_node(kiln_frontend *fe, kiln_dtype dt, double fv, int64_t iv, kiln_loc loc);
/* A new node computing n's value that no other tensor shares: a copy of n
 * outside the hash-consing table (a LEAF on the same buffer, without n's
 * tape). A tensor that requires grad uses one, so that the gradient target
 * is that tensor's uses made after kiln_requires_grad and nothing else: not
 * uses made before (PyTorch records requires_grad when an op runs), not a
 * twin (a kiln_zeros of the same shape, another tensor on the same buffer).
 * no_grad: the copy is detached (a no-grad region's result). NULL on OOM. */
kiln_node *kiln_fe_own_node(kiln_frontend *fe, const kiln_node *n, int no_grad);
/* New step-owned tensor for a node (or a poisoned tensor if node NULL).
 * Inside a no-grad region, a node made outside it (an op that returned its
 * input) is replaced by a detached copy (kiln_fe_own_node). */
kiln_tensor kiln_fe_tensor(kiln_frontend *fe, kiln_node *node, kiln_loc loc);
/* New step-owned tensor holding a computed buffer (reference taken over). */
kiln_tensor kiln_fe_tensor_buf(kiln_frontend *fe, kiln_buf *buf, kiln_dtype dt, int rank, const int64_t *shape,
                               kiln_loc loc);
/* A poisoned tensor (the error is already recorded). */
kiln_tensor kiln_fe_poison(kiln_frontend *fe, kiln_loc loc);
/* Free slot i now: drop its buffers, bump its generation (handles to it
 * become stale). */
void kiln_fe_slot_free(kiln_frontend *fe, uint32_t i);
/* The tensor's slot index from a live handle. */
static inline uint32_t kiln_fe_index(kiln_tensor t) { return t.index; }

/* Step end: release non-kept tensors made this step, reset the arena.
 * Every kept tensor must already be computed or poisoned. */
void kiln_fe_end_step(kiln_frontend *fe);
/* Record that kiln_assign at loc replaced t's node old (see kiln_replaced).
 * 0, or -1 when out of memory (recorded). */
int kiln_fe_note_replaced(kiln_frontend *fe, kiln_tensor t, kiln_node *old, kiln_loc loc);
/* A computed value for a slot: replaces its pending node. */
void kiln_fe_set_computed(kiln_frontend *fe, kiln_tslot *s, kiln_buf *buf);
void kiln_fe_set_poisoned(kiln_frontend *fe, kiln_tslot *s);

/* Format a shape like "[2,3]" into buf (returns buf). */
const char *kiln_fe_shape_str(int rank, const int64_t *shape, char *buf, size_t len);

#endif
