/* kiln_init and kiln_shutdown: the public entry points that assemble the
 * layers. The runtime drives the pipeline and emits events
 * (runtime/events.h); the observers live above it (debug's analysis, line
 * tables and dumps; autograd's reset) and cannot be named by it, so the
 * one place that knows all of them registers them here, before the
 * runtime starts. The runtime's lazy start (the first call that needs it)
 * comes through kiln_init too. This folder may include any other
 * (docs/architecture.md, "Layers"); nothing includes it. */
#include <pthread.h>

#include "autograd/autograd_internal.h"
#include "base/exit.h"
#include "debug/diverge.h"
#include "debug/observe.h"
#include "dist/dist.h"
#include "runtime/events.h"
#include "dist/agree.h"
#include "kiln/kiln.h"
#include "profiler/capture.h"
#include "profiler/server/server.h"
#include "frontend/session.h"
#include "runtime/runtime.h"

/* dist names the step a rank is at in its timeout and SIGTERM messages */
static void dist_on_event(void *ctx, const kiln_event *ev) {
  (void)ctx;
  if (ev->kind == KILN_EV_STEP) kiln_dist_note_step((int64_t)kiln_runtime_steps(ev->rt));
}

static pthread_once_t g_observers_once = PTHREAD_ONCE_INIT;

/* The profiler names a capture by the process's rank (dist sits beside the
 * toolchain, not below the profiler): starting the world is dist's once. */
static void prof_world(int *rank, int *world) {
  if (kiln_dist_world(KILN_HERE, rank, world) != KILN_OK) *rank = 0, *world = 1;
}

static void observers_register(void) {
  kiln_debug_attach();
  kiln_autograd_attach();
  kiln_events_observe(dist_on_event, NULL);
  /* the rank-divergence check (debug) exchanges through the dist service */
  kiln_diverge_attach(&(kiln_diverge_comm){kiln_dist_agree_world, kiln_dist_agree_gather});
  kiln_prof_set_world_fn(prof_world);
}

/* At exit, the steps still executing finish first (base/exit.h): the
 * libraries they run in are not destroyed under them. */
static void drain_at_exit(void) {
  kiln_runtime *rt = kiln_runtime_peek();
  if (rt) kiln_wait();
}

static pthread_once_t g_drain_once = PTHREAD_ONCE_INIT;
static void drain_register(void) {
  kiln_exit_drain_set(drain_at_exit);
  kiln_exit_drain_arm(); /* after the runtime's start loaded the GEMM library */
}

kiln_status kiln_init(const kiln_options *opts) {
  pthread_once(&g_observers_once, observers_register);
  kiln_status s = kiln_runtime_start(opts);
  if (s != KILN_OK) return s;
  pthread_once(&g_drain_once, drain_register);
  /* the frontend sits on the runtime: started after it, stopped before it */
  s = kiln_frontend_start();
  if (s != KILN_OK) kiln_runtime_stop();
  return s;
}

void kiln_shutdown(void) {
  /* "stop the threads" (kiln.h) includes the profiler server's and gRPC's,
   * even when the runtime never started (a capture client): threads still
   * running when the process exits crash LeakSanitizer's check. */
  kiln_profsrv_stop();
  kiln_frontend_stop();
  kiln_runtime_stop();
}
