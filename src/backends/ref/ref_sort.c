/* ref backend: the per-line ops (ARGSORT, SCATTER, SCATTER_ADD), written
 * as plainly as possible: an insertion sort per line, and scatters in the
 * row-major order of the index tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/ref/ref_ops.h"

/* Element a comes strictly before element b in the sorted order (NaN is
 * the largest value; equal elements keep their order). */
static int before(const kiln_ref_val *x, int64_t a, int64_t b, int desc) {
  if (kiln_ref_is_float(x->dtype)) {
    double va = kiln_ref_get_f(x, a), vb = kiln_ref_get_f(x, b);
    int gt = (isnan(va) && !isnan(vb)) || va > vb, lt = (isnan(vb) && !isnan(va)) || va < vb;
    return desc ? gt : lt;
  }
  int64_t va = kiln_ref_get_i(x, a), vb = kiln_ref_get_i(x, b);
  return desc ? va > vb : va < vb;
}

static int eval_argsort(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *x) {
  const int axis = (int)n->iattr[0], desc = (int)n->iattr[1];
  const int64_t L = x->shape[axis];
  int64_t stride = 1, coord[KILN_MAX_RANK];
  for (int d = axis + 1; d < x->rank; d++) stride *= x->shape[d];
  int64_t *p = malloc(sizeof *p * (size_t)(L + 1));
  if (!p) return -1;
  for (int64_t o = 0; o < x->numel; o++) {
    kiln_ref_unravel(o, x->rank, x->shape, coord);
    if (coord[axis] != 0) continue; /* o starts a line */
    /* insertion sort of the positions: an element moves left past the
     * elements it comes strictly before, so ties keep their order */
    for (int64_t j = 0; j < L; j++) {
      int64_t k = j;
      while (k > 0 && before(x, o + j * stride, o + p[k - 1] * stride, desc)) {
        p[k] = p[k - 1];
        k--;
      }
      p[k] = j;
    }
    for (int64_t j = 0; j < L; j++) kiln_ref_set_i(out, o + j * stride, p[j]);
  }
  free(p);
  return 0;
}

/* out = x, then for each index position q (row-major, so along the axis in
 * increasing order: the last duplicate wins) out[q with axis = idx[q]] is
 * set to (or incremented by) src[q]. */
static int eval_scatter(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins, int64_t *bad) {
  const kiln_ref_val *x = &ins[0], *idx = &ins[1], *src = &ins[2];
  const int axis = (int)n->iattr[0], add = n->op == KILN_OP_SCATTER_ADD;
  int nbad = 0;
  int64_t qc[KILN_MAX_RANK];
  memcpy(out->data, x->data, kiln_gnode_bytes(n));
  for (int64_t q = 0; q < idx->numel; q++) {
    kiln_ref_unravel(q, idx->rank, idx->shape, qc);
    int64_t s = kiln_ref_ravel(qc, src->rank, src->shape), v = kiln_ref_get_i(idx, q);
    if ((uint64_t)v >= (uint64_t)x->shape[axis]) {
      if (!nbad++) *bad = v;
      v = v < 0 ? 0 : x->shape[axis] - 1;
    }
    qc[axis] = v;
    int64_t o = kiln_ref_ravel(qc, out->rank, out->shape);
    if (!add)
      kiln_ref_copy_elem(out, o, src, s);
    else if (kiln_ref_is_float(out->dtype)) /* f32: the double sum rounds once, as a float add */
      kiln_ref_set_f(out, o, kiln_ref_get_f(out, o) + kiln_ref_get_f(src, s));
    else
      kiln_ref_set_i(out, o, (int64_t)((uint64_t)kiln_ref_get_i(out, o) + (uint64_t)kiln_ref_get_i(src, s)));
  }
  return nbad != 0;
}

int kiln_ref_eval_line(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins, int64_t *bad) {
  if (n->op == KILN_OP_ARGSORT) return eval_argsort(n, out, &ins[0]);
  return eval_scatter(n, out, ins, bad);
}
