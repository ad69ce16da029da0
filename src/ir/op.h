/* The IR op enumeration and its static table, generated from ops.def. */
#ifndef KILN_IR_OP_H
#define KILN_IR_OP_H

#include <stdint.h>

typedef enum kiln_op_kind {
  KILN_KIND_SOURCE,
  KILN_KIND_UNARY,
  KILN_KIND_BINARY,
  KILN_KIND_TERNARY,
  KILN_KIND_REDUCE,
  KILN_KIND_MOVE,
  KILN_KIND_MATMUL,
} kiln_op_kind;

typedef enum kiln_op {
#define X(NAME, KIND, ARITY, STR) KILN_OP_##NAME,
#include "ir/ops.def"
#undef X
  KILN_OP_COUNT
} kiln_op;

typedef struct kiln_op_info {
  const char *name;
  kiln_op_kind kind;
  int arity; /* -1: variadic */
} kiln_op_info;

extern const kiln_op_info kiln_op_table[KILN_OP_COUNT];

static inline const char *kiln_op_name(int op) {
  return (op >= 0 && op < KILN_OP_COUNT) ? kiln_op_table[op].name : "?";
}
static inline int kiln_op_is_elementwise(int op) {
  kiln_op_kind k = kiln_op_table[op].kind;
  return k == KILN_KIND_UNARY || k == KILN_KIND_BINARY || k == KILN_KIND_TERNARY;
}
/* Comparisons and logic ops produce bool. */
static inline int kiln_op_is_predicate(int op) {
  return op >= KILN_OP_EQ && op <= KILN_OP_OR;
}

#endif
