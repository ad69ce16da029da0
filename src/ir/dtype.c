/* The dtype table: names and element sizes (public in kiln.h). It lives in
 * the IR, the lowest layer that has dtypes, so that the IR, codegen and
 * the backends read it without reaching up to the frontend. */
#include "kiln/kiln.h"

static const char *const k_dtype_names[KILN_DTYPE_COUNT] = {"f32", "f64", "i32", "i64", "bool",
                                                                   "bf16", "f16", "u8",  "i8"};
static const size_t k_dtype_sizes[KILN_DTYPE_COUNT] = {4, 8, 4, 8, 1, 2, 2, 1, 1};

const char *kiln_dtype_name(kiln_dtype dt) { return (unsigned)dt < KILN_DTYPE_COUNT ? k_dtype_names[dt] : "?"; }
size_t kiln_dtype_size(kiln_dtype dt) { return (unsigned)dt < KILN_DTYPE_COUNT ? k_dtype_sizes[dt] : 0; }
