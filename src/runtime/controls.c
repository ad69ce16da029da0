/* The runtime's controls of include/kiln/debug.h (the remedies that
 * debugging.md prescribes): explicit compile, discarding a step,
 * full-graph regions, graph tags. Tracing-thread calls, like the rest of
 * the tracing API. (kiln_explain, the report, is debug/observe.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/counters.h"
#include "frontend/api.h"
#include "runtime/runtime_internal.h"

kiln_status kiln_compile_at(int n, const kiln_tensor *tensors, kiln_loc loc) {
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt) return kiln_last_status();
  kiln_frontend *fe = &rt->fe;
  if (n < 0 || (n > 0 && !tensors))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "compile: %d tensors at %p", n, (const void *)tensors);
  uint32_t cap = n > 0 ? (uint32_t)n : fe->n_kept;
  kiln_tslot **slots = malloc((cap ? cap : 1) * sizeof *slots);
  if (!slots) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "compile: out of memory");
  uint32_t m = 0;
  kiln_status st = KILN_OK;
  if (n == 0) { /* what kiln_mark_step would compute now, in its order */
    for (uint32_t k = 0; k < fe->n_kept; k++) {
      kiln_tslot *s = &fe->slots[fe->kept_list[k]];
      if (s->node && s->node->op != KILN_OP_LEAF && !s->poisoned) slots[m++] = s;
    }
  } else {
    for (int i = 0; i < n && st == KILN_OK; i++) {
      kiln_tslot *s = kiln_fe_slot(fe, tensors[i], "compile", loc);
      if (!s)
        st = KILN_ERR_STALE_HANDLE;
      else if (s->poisoned)
        st = kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "compile: tensor %d is poisoned by an earlier error", i);
      else if (s->node && s->node->op != KILN_OP_LEAF)
        slots[m++] = s; /* computed tensors need no graph */
    }
  }
  if (st == KILN_OK && m) st = kiln_runtime_cut(rt, m, slots, (kiln_cut_cause){KILN_CUT_EXPLICIT_COMPILE, loc, NULL});
  free(slots);
  return st != KILN_OK ? st : kiln_last_status();
}

kiln_status kiln_discard_step_at(kiln_loc loc) {
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt) return kiln_last_status();
  kiln_frontend *fe = &rt->fe;
  /* Backwards: kiln_release moves the last kept entry into the freed place. */
  for (uint32_t k = fe->n_kept; k-- > 0;) {
    uint32_t i = fe->kept_list[k];
    kiln_tslot *s = &fe->slots[i];
    if (!s->node || s->node->op == KILN_OP_LEAF) continue; /* computed: nothing pending */
    if (s->donor) { /* kiln_assign gave it a pending value: take the old one back */
      kiln_buf_unref(s->buf);
      s->buf = s->donor;
      s->donor = NULL;
      s->node = NULL;
      s->poisoned = 0;
    } else if (!s->buf) { /* made this step and never computed */
      kiln_release((kiln_tensor){i, s->gen});
    } else {
      s->node = NULL;
    }
  }
  rt->execs_this_step = 0;
  kiln_fe_end_step(fe);
  kiln_counter_add("DiscardedStep", 1);
  (void)loc;
  return kiln_last_status();
}

void kiln_full_graph_begin_at(kiln_loc loc) {
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt) return;
  if (rt->full_graph_depth++ == 0) rt->full_graph_loc = loc;
}

void kiln_full_graph_end_at(kiln_loc loc) {
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt) return;
  if (rt->full_graph_depth <= 0) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "full_graph_end: no full-graph region is open");
    return;
  }
  rt->full_graph_depth--;
}

void kiln_graph_tag_at(const char *tag, kiln_loc loc) {
  (void)loc;
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt) return;
  snprintf(rt->tag, sizeof rt->tag, "%s", tag ? tag : "");
}
