/* kiln_pool: a small pthread pool for data-parallel loops.
 *
 * A pool of T threads in total: the thread that calls kiln_pool_parallel_for
 * participates, so T - 1 workers are created. An idle worker polls for a
 * new loop for a short while (KILN_POOL_SPIN_US, default 200 us) and then
 * blocks on a condition variable; see pool.c for why. GEMM libraries run
 * one thread per call inside the pool's loops, so nothing else competes for
 * the cores while a worker polls.
 *
 * Thread-safety: kiln_pool_parallel_for may be called from any thread. One
 * loop runs on the pool at a time; a call made while another loop is running
 * (another caller, or a nested call from inside a loop body) runs inline on
 * the calling thread, which is always correct, just not parallel.
 */
#ifndef KILN_BASE_POOL_H
#define KILN_BASE_POOL_H

#include <stdint.h>

#include "base/status.h"

typedef struct kiln_pool kiln_pool;

/* Loop body: process items [begin, end). */
typedef void (*kiln_pool_fn)(void *ctx, int64_t begin, int64_t end);

/* Create a pool of num_threads threads in total (the caller included);
 * num_threads <= 0 means $KILN_NUM_THREADS, else the number of online CPUs.
 * On failure returns an error status (out of memory, thread creation) and
 * sets *out to NULL. */
kiln_status kiln_pool_create(int num_threads, kiln_pool **out, kiln_err *err);
/* Stop and join the workers. NULL is accepted. No loop may be running. */
void kiln_pool_destroy(kiln_pool *p);
/* Total threads, the caller included (>= 1). */
int kiln_pool_size(const kiln_pool *p);

/* Run fn over [0, n) split into chunks of at least `grain` items (grain < 1
 * is taken as 1). Returns when every item is processed. Ranges of at most
 * one grain, pools of one thread and nested/concurrent calls run inline. */
void kiln_pool_parallel_for(kiln_pool *p, kiln_pool_fn fn, void *ctx, int64_t n, int64_t grain);

/* What the profiler calls a loop: a kernel name (must outlive the capture:
 * static or interned), the whole loop's FLOPs and bytes moved, and the
 * user's source line behind it ("train.c:88", static or interned; NULL:
 * unknown), read atomically. */
typedef struct kiln_pool_tag {
  const char *name;
  double flops, bytes;
  const char *src;
  /* NULL, or called before an event is recorded: names a tag made without
   * its name (a kernel named only when a capture needs it); it may run on
   * several threads at once and stores name and src atomically */
  void (*resolve)(const struct kiln_pool_tag *tag);
} kiln_pool_tag;

/* kiln_pool_parallel_for that, while a profiler capture runs, records one
 * kernel event per participating thread (its device lane) with the share of
 * the flops/bytes its items account for. tag NULL: no events. Computes
 * exactly what kiln_pool_parallel_for computes. */
void kiln_pool_parallel_for_tagged(kiln_pool *p, kiln_pool_fn fn, void *ctx, int64_t n, int64_t grain,
                                   const kiln_pool_tag *tag);

#endif
