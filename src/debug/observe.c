/* The debug observer (observe.h) and kiln_explain. */
#include "debug/observe.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/config.h"
#include "base/text.h"
#include "ir/symshape.h"
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

/* The symbols of a graph compiled with varying input sizes, as comment
 * lines of its text dump (malloc'd; NULL when it has none): what each
 * symbol is, what the compile did, and every node's symbolic sizes. */
static char *kiln_dynamic_note(const kiln_cache_entry *e) {
  const char *dir = kiln_cfg()->save_graphs; /* only for a dump: a new size's plan must stay cheap */
  if (!e || !e->n_dyn || !dir || !*dir) return NULL;
  const kiln_graph *g = kiln_cache_entry_graph((kiln_cache_entry *)e); /* a planned size's: its family's */
  kiln_symshape s;
  kiln_err err;
  if (!g || kiln_symshape_infer(g, e->n_dyn, e->dyn, &s, &err) != KILN_OK) return NULL;
  kiln_text t = {0};
  for (int k = 0; k < s.n_syms; k++)
    kiln_text_printf(&t, "# dynamic: s%d = dim %d of input %d (%" PRId64 " here)\n", k, s.origin[k].axis,
                     s.origin[k].input, s.value[k]);
  for (int k = 0; k < s.n_alias; k++)
    kiln_text_printf(&t, "# dynamic: dim %d of input %d = %" PRId64 " * s%d\n", s.alias[k].axis, s.alias[k].input,
                     s.alias_coeff[k], s.alias_sym[k]);
  kiln_text_printf(&t, "# dynamic: %d symbolic sizes, %d constants 1/n of them; %s%s\n", s.n_symbolic, s.n_recip,
                   e->info.family == 1   ? "compiled once for any size"
                   : e->info.family == 2 ? "planned from its family: no code generated"
                                         : "compiled for this size: ",
                   e->info.family ? "" : e->info.family_why);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kiln_gnode *n = &g->nodes[i];
    int any = 0;
    for (int d = 0; d < n->rank; d++) any |= kiln_symshape_dim(&s, i, d)->mask != 0;
    if (!any) continue;
    kiln_text_printf(&t, "# dynamic: %%%d [", (int)i);
    for (int d = 0; d < n->rank; d++) {
      char b[48];
      kiln_symshape_format_dim(&s, i, d, g, b, sizeof b);
      kiln_text_printf(&t, "%s%s", d ? "," : "", b);
    }
    kiln_text_printf(&t, "]\n");
  }
  for (int32_t k = 0; k < s.n_vals; k++) { /* values that are sizes: flip's n - 1, roll's slice start */
    char b[48];
    kiln_symshape_format_expr(&s, &s.vals[k].e, b, sizeof b);
    if (s.vals[k].slot < 0) kiln_text_printf(&t, "# dynamic: value of %%%d = %s\n", (int)s.vals[k].node, b);
    else kiln_text_printf(&t, "# dynamic: attribute %d of %%%d = %s\n", (int)s.vals[k].slot, (int)s.vals[k].node, b);
  }
  kiln_symshape_clear(&s);
  return kiln_text_take(&t);
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
      kiln_dump_graph(ev->graph, ev->plan, ev->key, kiln_cut_cause_str(ev->cause, cs, sizeof cs), ev->compile_no, NULL);
      g_planned = 1;
      break;
    }
    case KILN_EV_COMPILED: {
      kiln_sites_record_compile(site_kind_of(ev->cause->why), ev->cause->loc, ev->ns);
      char cs[256];
      const char *dir = kiln_cfg()->save_graphs;
      if (!g_planned && dir && *dir) { /* text dumps; dot and c when the backend reported no plan */
        char *note = kiln_dynamic_note(ev->entry);
        /* a size planned from its trace has no graph of its own: its family's at its sizes */
        const kiln_graph *g = ev->graph ? ev->graph : kiln_cache_entry_graph(ev->entry);
        kiln_dump_graph(g, NULL, ev->key, kiln_cut_cause_str(ev->cause, cs, sizeof cs), ev->entry->compile_no, note);
        free(note);
      }
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
    case KILN_EV_DROPPED:
      kiln_analysis_dropped(an, ev->entry);
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
