#include "ir/op.h"

#include <assert.h>

const kiln_op_info kiln_op_table[KILN_OP_COUNT] = {
#define X(NAME, KIND, ARITY, STR) [KILN_OP_##NAME] = {STR, KILN_KIND_##KIND, ARITY},
#include "ir/ops.def"
#undef X
};

/* Keeps the tables in step: adding an op to ops.def without touching this
 * count fails to compile, which is the reminder to add its rules
 * (frontend shape rule, ref interpreter, codegen, gradient). */
static_assert(KILN_OP_COUNT == 47, "ops.def changed: update every op rule table, then this count");
