/* Tagged parallel loops: how the thread pool (src/runtime/pool.c) reports
 * kernels to the profiler. Declared here, defined in pool.c.
 *
 * Thread-safety: as kiln_pool_parallel_for.
 */
#ifndef KILN_PROFILER_POOL_TAG_H
#define KILN_PROFILER_POOL_TAG_H

#include <stdint.h>

#include "runtime/pool.h"

/* What the profiler calls a loop: a kernel name (must outlive the capture:
 * static or interned) and the whole loop's FLOPs and bytes moved. */
typedef struct kiln_pool_tag {
  const char *name;
  double flops, bytes;
} kiln_pool_tag;

/* kiln_pool_parallel_for that, while a capture runs, records one kernel
 * event per participating thread (its device lane) with the share of the
 * flops/bytes its items account for. tag NULL: no events. Computes exactly
 * what kiln_pool_parallel_for computes. */
void kiln_pool_parallel_for_tagged(kiln_pool *p, kiln_pool_fn fn, void *ctx, int64_t n, int64_t grain,
                                   const kiln_pool_tag *tag);

#endif
