/* The asynchronous executor: one worker thread runs queued executions in
 * order (FIFO), so the tracing thread can trace step N+1 while step N runs.
 *
 * A job holds pinned references (kiln_buf_pin) on its input and output
 * buffers until it completes. Completion is tracked by a sequence number:
 * kiln_executor_wait(ex, seq) returns once every job up to seq is done.
 *
 * Thread-safety: submit/wait/destroy from the tracing thread; the worker
 * is internal. */
#ifndef KILN_RUNTIME_EXECUTOR_H
#define KILN_RUNTIME_EXECUTOR_H

#include <stdint.h>

#include "backends/backend.h"
#include "base/buf.h"

typedef struct kiln_executor kiln_executor;

typedef struct kiln_job {
  kiln_executable *exe;
  int32_t n_inputs, n_outputs;
  kiln_buf **bufs; /* n_inputs inputs, then n_outputs outputs (pinned) */
  void **ptrs;     /* the same as data pointers */
  kiln_loc loc;    /* the sync point that made it, for error messages */
  uint64_t seq;    /* set by submit */
  struct kiln_job *next;
} kiln_job;

kiln_status kiln_executor_create(kiln_backend *b, int synchronous, kiln_executor **out);
/* Drains the queue, stops the worker. NULL is a no-op. */
void kiln_executor_destroy(kiln_executor *ex);
/* Allocate a job with room for the buffers (zeroed). NULL on OOM. */
kiln_job *kiln_job_alloc(int32_t n_inputs, int32_t n_outputs);
/* Queue a job (ownership passes to the executor). Returns its sequence
 * number. In synchronous mode it runs before returning. */
uint64_t kiln_executor_submit(kiln_executor *ex, kiln_job *job);
/* Wait until job seq (and every earlier one) is done. seq 0 returns at once. */
void kiln_executor_wait(kiln_executor *ex, uint64_t seq);
/* Wait for everything queued. */
void kiln_executor_wait_all(kiln_executor *ex);
/* The last submitted sequence number. */
uint64_t kiln_executor_last_seq(const kiln_executor *ex);

#endif
