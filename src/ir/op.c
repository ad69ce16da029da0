/* The op table: one row of include/kiln/ops.def per op, with each
 * elementwise op's scalar semantics compiled from the row's C expressions
 * (the same text codegen pastes into kernels). */
#include "ir/op.h"

#include <string.h>

#include "ir/scalar.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, IN, OUT, FLAGS, COST, F32, F64, INT, VJP, DOC) \
  static float s32_##NAME(float a, float b) { return (float)(F32); }                \
  static double s64_##NAME(double a, double b) { return (double)(F64); }            \
  static int64_t si_##NAME(int64_t a, int64_t b) { return (int64_t)(INT); }
#include "kiln/ops.def"
#undef KILN_OP
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

const kiln_op_info kiln_op_table[KILN_OP_COUNT] = {
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, IN, OUT, FLAGS, COST, F32, F64, INT, VJP, DOC)                         \
  [KILN_OP_##NAME] = {STR,          KILN_KIND_##KIND, ARITY, KILN_DT_##IN, KILN_OUT_##OUT, FLAGS, COST, s32_##NAME, \
                      s64_##NAME,   si_##NAME,        #F32,  #F64,         #INT,           VJP,   DOC},
#include "kiln/ops.def"
#undef KILN_OP
};

int kiln_op_scalar_defined(int op, int float_class) {
  const kiln_op_info *r = &kiln_op_table[op];
  if (!kiln_op_is_elementwise(op) || r->out == KILN_OUT_CONVERT || r->kind == KILN_KIND_TERNARY) return 0;
  return strcmp(float_class ? r->f32_src : r->int_src, "0") != 0;
}

int kiln_op_by_name(const char *s, int len) {
  for (int op = 0; op < KILN_OP_COUNT; op++)
    if ((int)strlen(kiln_op_table[op].name) == len && !memcmp(kiln_op_table[op].name, s, (size_t)len)) return op;
  return -1;
}
