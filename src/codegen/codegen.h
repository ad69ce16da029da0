/* C code generation for the LOOP kernels of a schedule.
 *
 * Each kernel becomes one self-contained C function
 *     void k_<hash>(void *const *args, int64_t begin, int64_t end)
 * that processes items [begin, end) of its parallel loop (elements of an
 * elementwise kernel, rows of a row kernel). Shapes are baked in as
 * constants; buffers are reached through args[] in an order given by
 * `args` (buffer ids of the schedule), so the text does not depend on the
 * graph it came from and <hash> (of the text) names identical kernels
 * identically across graphs. The functions rely on the helpers of
 * kiln_codegen_prelude(), which must precede them in the translation unit.
 *
 * Thread-safety: pure functions of their arguments.
 */
#ifndef KILN_CODEGEN_CODEGEN_H
#define KILN_CODEGEN_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "schedule/schedule.h"

typedef struct kiln_kernel_src {
  char *src;          /* the function's text (malloc'd, NUL-terminated) */
  size_t len;
  char name[24];      /* "k_" + 16 hex digits of hash */
  uint64_t hash;      /* of the text */
  int32_t n_args;
  int32_t *args;      /* buffer id of each argument (malloc'd) */
  int64_t items;      /* parallel loop size */
  int64_t grain;      /* minimum items per task */
  /* Index checks (INDEX_SELECT, GATHER): site k of the kernel is node
   * sites[k] of the schedule's graph. A kernel with sites takes the
   * execution's error word as the argument whose buffer id is
   * KILN_CG_ERR_ARG: int64_t[2], zeroed before the run; the first
   * out-of-range index stores {site + 1, the index} (first error wins). */
  int32_t n_sites;
  int32_t *sites;     /* malloc'd */
} kiln_kernel_src;

/* The buffer id of the error-word argument (no real buffer has it). */
#define KILN_CG_ERR_ARG (-1)

/* Generate the source of LOOP kernel `kid` of s into *out (owned by the
 * caller: kiln_kernel_src_clear). Errors: KILN_ERR_OUT_OF_MEMORY,
 * KILN_ERR_UNSUPPORTED (an op/dtype combination codegen does not know). */
kiln_status kiln_codegen_kernel(const kiln_sched *s, int32_t kid, kiln_kernel_src *out, kiln_err *err);
void kiln_kernel_src_clear(kiln_kernel_src *k);

/* Helpers every kernel uses (includes, conversions, NaN-aware min/max, the
 * RNG of src/base/rng.h). Static string. */
const char *kiln_codegen_prelude(void);

#endif
