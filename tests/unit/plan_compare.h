/* Tests' comparison of two memory plans of one graph (schedule/schedule.h):
 * a later size's plan resized from its family's template
 * (kiln_sched_build_like) against the plan its own schedule makes. */
#ifndef KILN_TESTS_PLAN_COMPARE_H
#define KILN_TESTS_PLAN_COMPARE_H

#include "kt.h"
#include "schedule/schedule.h"

/* like and full are one plan: the same structure, arena size, and per
 * buffer the same bytes, block offset, lifetime and arena offset; per kernel
 * the same copy size and collective wait point. what: the case, for
 * messages. Returns the number of buffers with a block offset past 0. */
static inline int kt_same_plan(const kiln_sched *like, const kiln_sched *full, const char *what) {
  int blocks = 0;
  KT_CHECK_MSG(kiln_sched_same_structure(like, full), "%s: the structures differ", what);
  KT_CHECK_MSG(like->scratch_bytes == full->scratch_bytes, "%s: arena %zu / %zu", what, like->scratch_bytes,
               full->scratch_bytes);
  for (int32_t i = 0; i < like->n_bufs && i < full->n_bufs; i++) {
    const kiln_sbuf *x = &like->bufs[i], *y = &full->bufs[i];
    KT_CHECK_MSG(x->bytes == y->bytes && x->offset == y->offset && x->delta == y->delta && x->first == y->first &&
                     x->last == y->last,
                 "%s: buffer %d: bytes %zu/%zu offset %zu/%zu delta %zu/%zu live %d-%d/%d-%d", what, (int)i, x->bytes,
                 y->bytes, x->offset, y->offset, x->delta, y->delta, x->first, x->last, y->first, y->last);
    blocks += x->parent >= 0 && x->delta > 0;
  }
  for (int32_t p = 0; p < like->n_kernels && p < full->n_kernels; p++)
    KT_CHECK_MSG(like->kernels[p].bytes == full->kernels[p].bytes && like->kernels[p].wait_at == full->kernels[p].wait_at,
                 "%s: kernel %d: bytes %zu/%zu", what, (int)p, like->kernels[p].bytes, full->kernels[p].bytes);
  return blocks;
}

#endif
