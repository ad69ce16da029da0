/* The frontend's singleton: the tensor table and trace (kiln_frontend), the
 * linearization scratch of its cuts, the runtime it hands graphs to, and
 * the one-tracing-thread check.
 *
 * Started by kiln_init() right after the runtime and stopped by
 * kiln_shutdown() right before it (src/init/); a call that needs it first
 * starts both through the public kiln_init(), like a program would. Used
 * from the tracing thread only: the first thread to trace in a step owns
 * the step until its marker (kiln_fe_tracer). */
#ifndef KILN_FRONTEND_SESSION_H
#define KILN_FRONTEND_SESSION_H

#include "frontend/linearize.h"
#include "frontend/trace.h"
#include "runtime/runtime.h"

typedef struct kiln_fe_session {
  kiln_frontend fe; /* first: kiln_api_frontend_at returns its address */
  kiln_lin lin;
  kiln_runtime *rt;
  kiln_run_input *inputs; /* a cut's graph inputs, as the runtime takes them */
  uint32_t cap_inputs;
  /* The thread tracing this step (the address of a thread-local, 0: none)
   * and where it first traced; atomics: another thread's call reads them to
   * refuse itself. Released at the step marker, so tracing may move to
   * another thread between steps. */
  uintptr_t trace_owner;
  const char *trace_owner_file;
  int trace_owner_line;
} kiln_fe_session;

/* Start the frontend over the started runtime (kiln_init's work after
 * kiln_runtime_start). Errors as kiln_init. */
kiln_status kiln_frontend_start(void);
/* Drain the executor and free the frontend if started (kiln_shutdown's
 * work before kiln_runtime_stop): every tensor and node is released. */
void kiln_frontend_stop(void);
/* The singleton if started, else NULL (never starts it). */
kiln_fe_session *kiln_fe_peek(void);
/* The singleton, started (kiln_init with defaults) if needed; NULL if it
 * cannot start. */
kiln_fe_session *kiln_fe_get(void);
/* kiln_fe_get for a tracing call (an op, a read, a step marker): NULL, with
 * an error naming both calls, when another thread is tracing this step. */
kiln_fe_session *kiln_fe_tracer(kiln_loc loc);
/* The step marker ends the calling thread's hold on tracing. */
void kiln_fe_trace_release(kiln_fe_session *S);

/* Cut the graph of n pending tensors (frontend/cut.c): number the graph
 * they reach, pick donations, key it, and have the runtime find or compile
 * it and run it (kiln_runtime_run); the slots become computed, or for
 * KILN_CUT_EXPLICIT_COMPILE stay pending (the graph only compiled and
 * cached). On an error the slots are poisoned, except inside a full-graph
 * region, where any reason but the step marker is refused with
 * KILN_ERR_GRAPH_CUT and the slots are left untouched. */
kiln_status kiln_fe_cut(kiln_fe_session *S, uint32_t n, kiln_tslot **slots, kiln_cut_cause cause);

#endif
