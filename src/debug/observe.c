/* The debug observer (observe.h) and kiln_explain. */
#include "debug/observe.h"

#include <pthread.h>
#include <stdlib.h>

#include "debug/analysis.h"
#include "debug/dump.h"
#include "debug/metrics.h"
#include "debug/sites.h"
#include "runtime/events.h"

/* The running runtime's analysis (NULL: none, or out of memory: the
 * runtime then runs without it). Set at KILN_EV_START and cleared at
 * KILN_EV_STOP on the thread that starts or stops the runtime; read by
 * kiln_explain and the exit summary, whose analysis calls take its mutex. */
static kiln_analysis *g_an;

/* 1 when this compile's plan was dumped (KILN_EV_COMPILE_PLAN): a compile
 * emits COMPILE_BEGIN, COMPILE_PLAN and COMPILED on one thread, in order. */
static _Thread_local int g_planned;

static kiln_site_kind site_kind_of(kiln_cut_reason why) {
  switch (why) {
    case KILN_CUT_VALUE_READ: return KILN_SITE_CUT_VALUE_READ;
    case KILN_CUT_DATA_DEPENDENT: return KILN_SITE_CUT_DATA_DEPENDENT;
    case KILN_CUT_EXPLICIT_COMPILE: return KILN_SITE_CUT_EXPLICIT_COMPILE;
    default: return KILN_SITE_CUT_STEP_MARKER;
  }
}

static void on_event(void *ctx, const kiln_event *ev) {
  (void)ctx;
  kiln_analysis *an = __atomic_load_n(&g_an, __ATOMIC_ACQUIRE);
  switch (ev->kind) {
    case KILN_EV_START:
      __atomic_store_n(&g_an, kiln_analysis_create(), __ATOMIC_RELEASE);
      break;
    case KILN_EV_COMPILE_BEGIN: /* dot and c dumps are drawn from the compile's plan */
      g_planned = 0;
      if (kiln_dump_wants_plan()) *ev->want_plan = 1;
      break;
    case KILN_EV_COMPILE_PLAN: {
      char cs[256];
      kiln_dump_graph(ev->graph, ev->plan, ev->key, kiln_cut_cause_str(ev->cause, cs, sizeof cs), ev->compile_no);
      g_planned = 1;
      break;
    }
    case KILN_EV_COMPILED: {
      kiln_sites_record_compile(site_kind_of(ev->cause->why), ev->cause->loc, ev->ns);
      char cs[256];
      if (!g_planned) /* text dumps; dot and c when the backend reported no plan */
        kiln_dump_graph(ev->graph, NULL, ev->key, kiln_cut_cause_str(ev->cause, cs, sizeof cs), ev->entry->compile_no);
      kiln_analysis_compiled(an, ev->rt, ev->cause, ev->entry);
      break;
    }
    case KILN_EV_CUT:
      kiln_sites_record(site_kind_of(ev->cause->why), ev->cause->loc, 0, ev->ns, 0);
      kiln_analysis_cut_done(an, ev->rt, ev->cause, ev->entry, ev->hit, ev->ns, ev->step_tensors);
      break;
    case KILN_EV_READ:
      kiln_sites_record(KILN_SITE_READ, ev->loc, ev->bytes, ev->ns, ev->wait_ns);
      kiln_analysis_read(an);
      break;
    case KILN_EV_STEP:
      kiln_analysis_step(an, ev->rt);
      break;
    case KILN_EV_STOP:
      __atomic_store_n(&g_an, NULL, __ATOMIC_RELEASE);
      kiln_analysis_destroy(an, ev->rt); /* prints the summary (KILN_DEBUG >= 1) */
      break;
    default:
      break;
  }
}

const char *kiln_explain(void) {
  kiln_runtime *rt = kiln_runtime_peek();
  return rt ? kiln_analysis_explain(__atomic_load_n(&g_an, __ATOMIC_ACQUIRE), rt) : "";
}

/* KILN_DEBUG's summary at exit, for programs that never call kiln_shutdown
 * (kiln_shutdown prints it itself). */
static void exit_summary(void) {
  kiln_runtime *rt = kiln_runtime_peek();
  if (rt) kiln_analysis_exit_summary(__atomic_load_n(&g_an, __ATOMIC_ACQUIRE), rt);
}

static pthread_once_t g_attach_once = PTHREAD_ONCE_INIT;
static void attach_once(void) {
  kiln_events_observe(on_event, NULL);
  kiln_metrics_install_exit_report();
  atexit(exit_summary);
}

void kiln_debug_attach(void) { pthread_once(&g_attach_once, attach_once); }
