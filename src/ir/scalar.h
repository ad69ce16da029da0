/* The op table's scalar helpers (ir/scalar.inc) compiled into kiln, and the
 * op table's per-op scalar functions built from the semantics columns of
 * include/kiln/ops.def: the one definition the ref backend and constant
 * folding evaluate, and the generated kernels inline (codegen/prelude.c). */
#ifndef KILN_IR_SCALAR_H
#define KILN_IR_SCALAR_H

#include <math.h>
#include <stdint.h>

#ifndef KU
#define KU __attribute__((unused))
#endif
#define KILN_SCALAR_FN(...) __VA_ARGS__
#include "ir/scalar.inc"
#undef KILN_SCALAR_FN

#endif
