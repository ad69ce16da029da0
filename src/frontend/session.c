/* The frontend's singleton: start, stop, and the one-tracing-thread check.
 * See session.h. */
#include "frontend/session.h"

#include <stdlib.h>

#include "base/text.h"
#include "frontend/api.h"

static kiln_fe_session *g_fs; /* the frontend's singleton */
/* Above every tensor generation of the frontends already stopped: a new one
 * starts its slots there, so a handle kept across kiln_shutdown and
 * kiln_init is stale instead of naming another tensor. */
static uint32_t g_gen_base = 1;

static kiln_buf *upload(void *ctx, const void *host, size_t bytes, kiln_loc loc) {
  return kiln_runtime_upload(ctx, host, bytes, loc);
}

kiln_status kiln_frontend_start(void) {
  kiln_runtime *rt = kiln_runtime_peek();
  if (!rt || g_fs)
    return kiln_error(KILN_ERR_INTERNAL, (kiln_loc){0, 0}, "kiln_init: the frontend starts once, over a started runtime");
  kiln_fe_session *S = calloc(1, sizeof *S);
  kiln_status s = S ? kiln_frontend_init(&S->fe, (kiln_device_hooks){rt, upload}) : KILN_ERR_OUT_OF_MEMORY;
  if (s != KILN_OK) {
    free(S);
    return kiln_error(s, (kiln_loc){0, 0}, "kiln_init: cannot start the runtime");
  }
  S->fe.gen_base = g_gen_base;
  S->rt = rt;
  g_fs = S;
  return KILN_OK;
}

void kiln_frontend_stop(void) {
  kiln_fe_session *S = g_fs;
  if (!S) return;
  kiln_wait(); /* no queued execution still uses a tensor's buffer */
  uint32_t top = kiln_fe_max_gen(&S->fe);
  if (top >= g_gen_base) g_gen_base = top + 1 ? top + 1 : 1; /* wraps after 2^32 restarts' worth of slots */
  kiln_frontend_destroy(&S->fe);
  kiln_lin_free(&S->lin);
  free(S->inputs);
  free(S);
  g_fs = NULL;
}

kiln_fe_session *kiln_fe_peek(void) { return g_fs; }

kiln_fe_session *kiln_fe_get(void) {
  /* the lazy start goes through the public entry point (src/init/), which
   * registers the observers and starts the runtime, then the frontend */
  if (!g_fs && kiln_init(NULL) != KILN_OK) return NULL;
  return g_fs;
}

/* Two threads tracing at once would corrupt the frontend's tables: the
 * first thread to trace in a step owns the step until its marker; a call
 * from another thread is refused (an error naming both calls, a null
 * result), cheaply: one thread-local address compared per call. */
static __thread char tl_tracer_id __attribute__((tls_model("initial-exec")));

kiln_fe_session *kiln_fe_tracer(kiln_loc loc) {
  kiln_fe_session *S = kiln_fe_get();
  if (!S) return NULL;
  uintptr_t me = (uintptr_t)&tl_tracer_id, cur = __atomic_load_n(&S->trace_owner, __ATOMIC_ACQUIRE);
  if (cur == me) return S;
  if (cur == 0 && __atomic_compare_exchange_n(&S->trace_owner, &cur, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&S->trace_owner_file, loc.file, __ATOMIC_RELEASE);
    __atomic_store_n(&S->trace_owner_line, loc.line, __ATOMIC_RELEASE);
    return S;
  }
  const char *of = __atomic_load_n(&S->trace_owner_file, __ATOMIC_ACQUIRE);
  int ol = __atomic_load_n(&S->trace_owner_line, __ATOMIC_ACQUIRE);
  kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
             "tracing from two threads at once: another thread is tracing this step (its first call at %s:%d); "
             "this call comes from a second thread. The tracing API is for one thread at a time (kiln.h): trace "
             "on one thread, or hand over after a kiln_mark_step()",
             of ? kiln_fmt_file(of) : "(no location)", ol);
  return NULL;
}

void kiln_fe_trace_release(kiln_fe_session *S) {
  uintptr_t me = (uintptr_t)&tl_tracer_id;
  __atomic_compare_exchange_n(&S->trace_owner, &me, (uintptr_t)0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

kiln_frontend *kiln_api_frontend_at(kiln_loc loc) {
  /* every traced op passes here: the owner's own calls take one compare */
  kiln_fe_session *S = g_fs;
  if (S && __atomic_load_n(&S->trace_owner, __ATOMIC_RELAXED) == (uintptr_t)&tl_tracer_id) return &S->fe;
  S = kiln_fe_tracer(loc);
  return S ? &S->fe : NULL;
}
