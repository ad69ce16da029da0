/* The controls of include/kiln/debug.h that walk the tensors: explicit
 * compile and discarding a step (the remedies that debugging.md
 * prescribes). Tracing-thread calls, like the rest of the tracing API. (The
 * runtime's controls, full-graph regions and graph tags, are
 * runtime/controls.c.) */
#include <stdlib.h>

#include "frontend/api.h"
#include "frontend/session.h"

kiln_status kiln_compile_at(int n, const kiln_tensor *tensors, kiln_loc loc) {
  kiln_fe_session *S = kiln_fe_get();
  if (!S) return kiln_last_status();
  kiln_frontend *fe = &S->fe;
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
  if (st == KILN_OK && m) st = kiln_fe_cut(S, m, slots, (kiln_cut_cause){KILN_CUT_EXPLICIT_COMPILE, loc, NULL});
  free(slots);
  return st != KILN_OK ? st : kiln_last_status();
}

kiln_status kiln_discard_step_at(kiln_loc loc) {
  kiln_fe_session *S = kiln_fe_get();
  if (!S) return kiln_last_status();
  kiln_frontend *fe = &S->fe;
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
  kiln_fe_end_step(fe);
  kiln_runtime_step_discarded(S->rt);
  (void)loc;
  return kiln_last_status();
}
