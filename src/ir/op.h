/* The IR op enumeration and the op table, generated from the one table in
 * include/kiln/ops.def (its header comment defines every column). */
#ifndef KILN_IR_OP_H
#define KILN_IR_OP_H

#include <stdint.h>

#include "kiln/kiln.h"

typedef enum kiln_op_kind {
  KILN_KIND_SOURCE,
  KILN_KIND_UNARY,
  KILN_KIND_BINARY,
  KILN_KIND_TERNARY,
  KILN_KIND_REDUCE,
  KILN_KIND_MOVE,
  KILN_KIND_MATMUL,
  KILN_KIND_SCAN,
  KILN_KIND_COLLECTIVE, /* across processes (src/dist): a kernel of its own that calls the dist service */
} kiln_op_kind;

/* The IN column: dtype masks (bit = 1 << kiln_dtype). */
enum {
  KILN_DT_NONE = 0,
  KILN_DT_BOOL = 1 << KILN_BOOL,
  KILN_DT_INDEX = (1 << KILN_I32) | (1 << KILN_I64),
  KILN_DT_FLOAT = (1 << KILN_F32) | (1 << KILN_F64) | (1 << KILN_BF16) | (1 << KILN_F16),
  /* u8 and i8 are integers but not index dtypes */
  KILN_DT_NUM = KILN_DT_FLOAT | KILN_DT_INDEX | (1 << KILN_U8) | (1 << KILN_I8),
  KILN_DT_ANY = KILN_DT_NUM | KILN_DT_BOOL,
  /* matmul: floats, and i32/i64 accumulating in themselves (the frontend
   * widens u8/i8 operands to i32 first) */
  KILN_DT_CONTRACT = KILN_DT_FLOAT | KILN_DT_INDEX,
};

/* Dtype classes. bf16 and f16 are floats stored in 16 bits and computed in
 * f32 (kiln_dt_compute); u8 and i8 are integers computed in int64 and
 * wrapped by the store, as i32 is. */
static inline int kiln_dt_is_half(int dt) { return dt == KILN_BF16 || dt == KILN_F16; }
static inline int kiln_dt_is_float(int dt) { return dt == KILN_F32 || dt == KILN_F64 || kiln_dt_is_half(dt); }
/* The dtype a float op is evaluated in: f32 for the 16-bit floats. */
static inline int kiln_dt_compute(int dt) { return kiln_dt_is_half(dt) ? KILN_F32 : dt; }

/* The OUT column. */
typedef enum kiln_op_out { KILN_OUT_SAME, KILN_OUT_BOOL, KILN_OUT_CONVERT, KILN_OUT_RULE } kiln_op_out;

/* The FLAGS column. */
enum {
  OPF_PROMOTE = 1 << 0,
  OPF_LOGICAL = 1 << 1,
  OPF_FOLD_FLOAT = 1 << 2,
  OPF_FOLD_INT = 1 << 3,
  OPF_RUNTIME_CHECK = 1 << 4,
};

typedef enum kiln_op {
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, IN, OUT, FLAGS, COST, F32, F64, INT, VJP, DOC) KILN_OP_##NAME,
#include "kiln/ops.def"
#undef KILN_OP
  KILN_OP_COUNT
} kiln_op;

/* The scalar semantics of an elementwise op (F32 / F64 / INT columns), as
 * functions: b is ignored by unary ops; a column of 0 gives a function
 * returning 0 (kiln_op_scalar_defined says which are real). */
typedef float (*kiln_scalar_f32)(float a, float b);
typedef double (*kiln_scalar_f64)(double a, double b);
typedef int64_t (*kiln_scalar_int)(int64_t a, int64_t b);

typedef struct kiln_op_info {
  const char *name;
  kiln_op_kind kind;
  int arity;      /* -1: variadic */
  unsigned in;    /* KILN_DT_* mask */
  kiln_op_out out;
  unsigned flags; /* OPF_* */
  int cost;
  kiln_scalar_f32 f32;
  kiln_scalar_f64 f64;
  kiln_scalar_int i64;
  /* the same expressions as C text in a and b, for generated code */
  const char *f32_src, *f64_src, *int_src;
  const char *vjp; /* NULL, "@" or formulas (ops.def) */
  const char *doc;
} kiln_op_info;

extern const kiln_op_info kiln_op_table[KILN_OP_COUNT];

static inline const char *kiln_op_name(int op) {
  return (op >= 0 && op < KILN_OP_COUNT) ? kiln_op_table[op].name : "?";
}
static inline int kiln_op_is_elementwise(int op) {
  kiln_op_kind k = kiln_op_table[op].kind;
  return k == KILN_KIND_UNARY || k == KILN_KIND_BINARY || k == KILN_KIND_TERNARY;
}
/* 1 when op is an elementwise op whose semantics on float operands
 * (float_class 1) or integer and bool operands (0) is its scalar function
 * (not a CAST or WHERE, and the column is not 0). */
int kiln_op_scalar_defined(int op, int float_class);
/* Ops whose output is bool whatever the inputs (comparisons). */
static inline int kiln_op_is_predicate(int op) { return kiln_op_table[op].out == KILN_OUT_BOOL; }
/* The op named s (as in ops.def's name column), or -1. */
int kiln_op_by_name(const char *s, int len);

#endif
