/* The rules of kiln's autograd against PyTorch's (torch.autograd): which
 * uses of a tensor are its gradient's target. requires_grad takes effect
 * from the call on (earlier uses carry no gradient, as PyTorch records it
 * when an op runs); a hash-consed twin of a requiring-grad tensor (a
 * kiln_zeros of its shape, the same expression traced twice) and a tensor
 * sharing its buffer are other tensors; an op that returns its input inside
 * a no-grad region is detached; a value read mid-step keeps its earlier
 * uses; backward twice adds up; a seed is converted to the output's dtype;
 * one leaf through several views; the gradient's dtype. Expected gradients:
 * tests/data/autograd_rules_reference.py (PyTorch), on the ref backend and
 * on the backend under test ($KILN_TEST_BACKEND, default cpu). */
#include <inttypes.h>
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "for_backends.h"
#include "frontend/session.h"
#include "kt.h"

/* ───────────── the reference file ───────────── */
typedef struct arr {
  char name[80];
  int64_t n;
  double *v;
} arr;
static arr g_arr[64];
static int g_narr;

static void load(void) {
  if (g_narr) return;
  const char *dir = getenv("KILN_TEST_DATA");
  char path[512], tok[80];
  snprintf(path, sizeof path, "%s/autograd_rules_reference.txt", dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    KT_FAIL("cannot open %s (run tests/data/autograd_rules_reference.py)", path);
    return;
  }
  while (g_narr < 64 && fscanf(f, "%79s", tok) == 1) {
    if (tok[0] == '#') {
      int c;
      while ((c = fgetc(f)) != '\n' && c != EOF) {}
      continue;
    }
    arr *a = &g_arr[g_narr++];
    snprintf(a->name, sizeof a->name, "%s", tok);
    if (fscanf(f, "%" SCNd64, &a->n) != 1 || a->n < 0 || a->n > 64) break;
    a->v = calloc((size_t)a->n + 1, sizeof(double));
    for (int64_t i = 0; i < a->n; i++)
      if (fscanf(f, "%79s", tok) == 1) a->v[i] = strtod(tok, NULL);
  }
  fclose(f);
}

static const double *A(const char *name, int64_t *n) {
  load();
  for (int i = 0; i < g_narr; i++)
    if (!strcmp(g_arr[i].name, name)) {
      *n = g_arr[i].n;
      return g_arr[i].v;
    }
  KT_FAIL("no reference array %s", name);
  *n = 0;
  return NULL;
}

static const int64_t S6[1] = {6}, S1[1] = {1}, S3[1] = {3}, S23[2] = {2, 3};
static const int PERM10[2] = {1, 0};

/* x or r of the reference file as a (step-owned) f64 tensor of shape [6]. */
static kiln_tensor T(const char *name) {
  int64_t n = 0;
  const double *v = A(name, &n);
  return n == 6 ? kiln_from_host(v, KILN_F64, 1, S6) : kiln_zeros(KILN_F64, 1, S6);
}
static kiln_tensor sum(kiln_tensor t) { return kiln_sum(t, 0, NULL, false); }
/* sum(y * r): the loss of most cases */
static kiln_tensor loss_r(kiln_tensor y) { return sum(kiln_mul(y, T("r"))); }

/* kiln's gradient of w against PyTorch's <c>.g. */
static void check_grad(kiln_tensor w, const char *c) {
  char name[96];
  snprintf(name, sizeof name, "%s.g", c);
  int64_t n = 0;
  const double *want = A(name, &n);
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s on %s: %s", c, g_backend, kiln_last_error());
  kiln_tensor g = kiln_grad(w);
  if (n == 0) {
    KT_CHECK_MSG(g.gen == 0, "%s on %s: a gradient where PyTorch has none", c, g_backend);
    return;
  }
  if (!g.gen) {
    KT_FAIL("%s on %s: no gradient (%s)", c, g_backend, kiln_last_error());
    return;
  }
  double got[6] = {0};
  KT_CHECK(kiln_to_host(kiln_cast(g, KILN_F64), got, sizeof got) == KILN_OK);
  for (int i = 0; i < 6 && i < n; i++)
    KT_CHECK_MSG(fabs(got[i] - want[i]) <= 1e-12 + 1e-10 * fabs(want[i]), "%s on %s: [%d] = %.17g, PyTorch %.17g",
                 c, g_backend, i, got[i], want[i]);
}


static kiln_tensor param(kiln_tensor v) {
  kiln_tensor w = kiln_keep(v);
  kiln_requires_grad(w);
  return w;
}

/* ───────────── when requires_grad takes effect ───────────── */

KT_TEST(requires_grad_after_use_gives_that_use_no_gradient) {
  FOR_BACKENDS(b) {
    kiln_tensor w = kiln_keep(T("x"));
    kiln_tensor early = kiln_mul(w, w);
    kiln_requires_grad(w);
    KT_CHECK(kiln_backward(loss_r(kiln_add(early, w))) == KILN_OK);
    check_grad(w, "after_use");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    /* the next step: every use counts */
    KT_CHECK(kiln_backward(sum(kiln_mul(w, w))) == KILN_OK);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(read_then_requires_grad_gives_the_earlier_use_none) {
  FOR_BACKENDS(b) {
    kiln_tensor w = kiln_keep(kiln_mul_c(T("x"), 1.0));
    double tmp[6];
    KT_CHECK(kiln_to_host(w, tmp, sizeof tmp) == KILN_OK);
    kiln_tensor a = loss_r(kiln_mul(w, w));
    kiln_requires_grad(w);
    KT_CHECK(kiln_backward(kiln_add(a, loss_r(w))) == KILN_OK);
    check_grad(w, "read_then_requires");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(only_loss_from_earlier_uses_is_an_error) {
  FOR_BACKENDS(b) {
    kiln_tensor w = kiln_keep(T("x"));
    kiln_tensor early = sum(kiln_mul(w, w));
    kiln_requires_grad(w);
    KT_CHECK(kiln_backward(early) == KILN_ERR_INVALID_ARGUMENT); /* PyTorch: does not require grad */
    KT_STR_CONTAINS(kiln_last_error(), "does not depend on any tensor that requires grad");
    kiln_clear_error();
    KT_CHECK(kiln_grad(w).gen == 0);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(read_computed_tensor_then_requires_grad_still_reaches_its_inputs) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_tensor t = kiln_mul_c(w, 2.0);
    double tmp[6];
    KT_CHECK(kiln_to_host(t, tmp, sizeof tmp) == KILN_OK);
    kiln_tensor a = loss_r(kiln_mul(t, t));
    kiln_requires_grad(t);
    KT_CHECK(kiln_backward(kiln_add(a, loss_r(kiln_mul(kiln_mul(t, t), t)))) == KILN_OK);
    check_grad(w, "read_computed_then_requires");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

/* ───────────── twins: other tensors with the same value ───────────── */

KT_TEST(hash_consed_twin_is_another_tensor) {
  FOR_BACKENDS(b) {
    kiln_tensor x = T("x");
    kiln_tensor w = param(kiln_mul_c(x, 2.0)); /* pending: the node kiln_mul_c(x, 2) */
    kiln_tensor c = kiln_mul_c(x, 2.0);        /* the same expression again: hash-consed */
    KT_CHECK(kiln_backward(loss_r(kiln_mul(w, c))) == KILN_OK);
    check_grad(w, "cse_twin");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(zero_initialised_parameter_and_other_zeros) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(kiln_zeros(KILN_F64, 1, S6));
    kiln_tensor c = kiln_zeros(KILN_F64, 1, S6);
    kiln_tensor x = T("x");
    KT_CHECK(kiln_backward(loss_r(kiln_mul(kiln_add(w, x), kiln_add(c, x)))) == KILN_OK);
    check_grad(w, "zeros_twin");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(tensor_sharing_the_buffer_is_another_tensor) {
  FOR_BACKENDS(b) {
    for (int how = 0; how < 2; how++) {
      kiln_tensor w = param(T("x"));
      kiln_tensor c = kiln_keep(kiln_zeros(KILN_F64, 1, S6));
      if (how == 0) kiln_assign(c, w);               /* a computed value: the buffer is shared */
      else kiln_assign(c, kiln_reshape(w, 1, S6));  /* a view */
      KT_CHECK(kiln_mark_step() == KILN_OK);
      KT_CHECK(kiln_backward(loss_r(kiln_mul(w, c))) == KILN_OK);
      check_grad(w, "shared_buffer");
      /* the update still sees the old w in c */
      kiln_assign(w, kiln_sub(w, kiln_grad(w)));
      KT_CHECK(kiln_mark_step() == KILN_OK);
      int64_t n;
      const double *x = A("x", &n), *g = A("shared_buffer.g", &n);
      double cv[6], wv[6];
      KT_CHECK(kiln_to_host(c, cv, sizeof cv) == KILN_OK && kiln_to_host(w, wv, sizeof wv) == KILN_OK);
      for (int i = 0; i < 6; i++) {
        KT_CHECK_MSG(cv[i] == x[i], "c changed with w's update on %s", g_backend);
        KT_NEAR(wv[i], x[i] - g[i], 1e-12);
      }
      kiln_release(c);
      kiln_release(w);
    }
  }
}

KT_TEST(assigned_source_is_another_tensor) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_tensor v = kiln_mul_c(T("x"), 3.0);
    kiln_no_grad_begin();
    kiln_assign(w, v);
    kiln_no_grad_end();
    KT_CHECK(kiln_backward(loss_r(kiln_mul(w, v))) == KILN_OK);
    check_grad(w, "assign_twin");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

/* ───────────── values read mid-step ───────────── */

KT_TEST(read_mid_step_keeps_uses_before_the_read) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(kiln_mul_c(T("x"), 1.0)); /* pending */
    kiln_tensor a = loss_r(kiln_mul(w, w));
    double tmp[6];
    KT_CHECK(kiln_to_host(w, tmp, sizeof tmp) == KILN_OK);
    KT_CHECK(kiln_backward(kiln_add(a, loss_r(w))) == KILN_OK);
    check_grad(w, "read_mid");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

/* ───────────── no-grad regions ───────────── */

KT_TEST(no_grad_detaches_ops_that_return_their_input) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_no_grad_begin();
    kiln_tensor c = kiln_reshape(w, 1, S6);
    kiln_tensor d = kiln_slice(w, 0, 0, 6, 1);
    kiln_tensor e = kiln_cast(w, KILN_F64);
    kiln_no_grad_end();
    kiln_tensor y = kiln_add(kiln_mul(kiln_mul(w, c), T("r")), kiln_mul(w, d));
    KT_CHECK(kiln_backward(kiln_add(sum(y), kiln_mul_c(sum(kiln_sub(e, w)), 0.0))) == KILN_OK);
    check_grad(w, "nograd_identity");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(no_grad_op_mixing_inputs_is_a_constant) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_no_grad_begin();
    kiln_no_grad_begin(); /* nested */
    kiln_tensor y = kiln_mul(w, T("x"));
    kiln_no_grad_end();
    KT_CHECK(!kiln_grad_enabled());
    kiln_no_grad_end();
    KT_CHECK(kiln_grad_enabled());
    KT_CHECK(kiln_backward(loss_r(kiln_mul(w, y))) == KILN_OK);
    check_grad(w, "nograd_mixed");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(tensor_made_in_no_grad_then_required) {
  FOR_BACKENDS(b) {
    kiln_no_grad_begin();
    kiln_tensor w = kiln_keep(kiln_mul_c(T("x"), 2.0));
    kiln_no_grad_end();
    kiln_requires_grad(w);
    KT_CHECK(kiln_backward(loss_r(kiln_mul(w, w))) == KILN_OK);
    check_grad(w, "made_in_nograd");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(no_grad_region_spanning_a_step_marker) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_no_grad_begin();
    KT_CHECK(kiln_mark_step() == KILN_OK);
    KT_CHECK(!kiln_grad_enabled()); /* a region is the program's, not the step's */
    KT_CHECK(kiln_backward(sum(kiln_mul(w, w))) == KILN_ERR_INVALID_ARGUMENT);
    kiln_clear_error();
    kiln_no_grad_end();
    KT_CHECK(kiln_backward(loss_r(kiln_mul(kiln_mul_c(w, 2.0), w))) == KILN_OK);
    check_grad(w, "made_in_nograd"); /* 4 w r with w = x: made_in_nograd's 2 w r with w = 2x */
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(no_grad_region_spanning_a_value_read) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_tensor t = kiln_mul_c(w, 2.0);
    kiln_no_grad_begin();
    double tmp[6];
    KT_CHECK(kiln_to_host(t, tmp, sizeof tmp) == KILN_OK);
    kiln_tensor u = kiln_mul(t, T("x"));
    kiln_no_grad_end();
    KT_CHECK(kiln_backward(loss_r(kiln_mul(t, u))) == KILN_OK);
    check_grad(w, "nograd_read");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(integer_tensor_cannot_require_grad) {
  FOR_BACKENDS(b) {
    kiln_tensor i = kiln_keep(kiln_cast(T("x"), KILN_I32));
    kiln_requires_grad(i);
    KT_CHECK(kiln_last_status() == KILN_ERR_INVALID_ARGUMENT); /* PyTorch: only floating point tensors */
    KT_STR_CONTAINS(kiln_last_error(), "test_autograd_rules.c:");
    KT_STR_CONTAINS(kiln_last_error(), "i32");
    kiln_clear_error();
    KT_CHECK(kiln_grad(i).gen == 0);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(i);
  }
}

/* ───────────── paths without a gradient, views ───────────── */

KT_TEST(integer_casts_comparisons_and_argmax_carry_none) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_tensor t = kiln_cast(kiln_cast(w, KILN_I32), KILN_F64);
    kiln_tensor m = kiln_where(kiln_gt_c(w, 0.0), w, kiln_mul_c(w, 0.5));
    kiln_tensor k = kiln_cast(kiln_argmax(w, 0, false), KILN_F64);
    kiln_tensor y = kiln_add(kiln_add(kiln_mul(t, w), m), kiln_expand(kiln_reshape(k, 1, S1), 1, S6));
    KT_CHECK(kiln_backward(loss_r(y)) == KILN_OK);
    check_grad(w, "nondiff_paths");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(one_leaf_through_several_views) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x")), r = T("r");
    kiln_tensor a = kiln_mul(kiln_slice(w, 0, 0, 3, 1), kiln_slice(w, 0, 3, 6, 1));
    kiln_tensor bb = kiln_mul_c(kiln_reshape(kiln_slice(kiln_reshape(w, 2, S23), 0, 1, 2, 1), 1, S3), 2.0);
    kiln_tensor c = kiln_slice(w, 0, 0, 6, 2); /* elements 0, 2, 4 */
    kiln_tensor e = kiln_expand(kiln_slice(w, 0, 0, 1, 1), 1, S3);
    kiln_tensor l1 = sum(kiln_mul(kiln_add(a, bb), kiln_slice(r, 0, 0, 3, 1)));
    kiln_tensor l2 = sum(kiln_mul(kiln_mul(c, e), kiln_slice(r, 0, 3, 6, 1)));
    KT_CHECK(kiln_backward(kiln_add(l1, l2)) == KILN_OK);
    check_grad(w, "views");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

/* ───────────── backward calls, seeds ───────────── */

KT_TEST(backward_twice_in_a_step_adds_up) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_tensor loss = loss_r(kiln_mul(w, w));
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    KT_CHECK(kiln_backward(loss) == KILN_OK); /* PyTorch needs retain_graph=True for this */
    check_grad(w, "backward_twice");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

KT_TEST(backward_of_a_loss_from_an_earlier_step_is_an_error) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_tensor loss = kiln_keep(sum(kiln_mul(w, w)));
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    KT_CHECK(kiln_backward(loss) == KILN_ERR_INVALID_ARGUMENT);
    KT_STR_CONTAINS(kiln_last_error(), "no graph in this step");
    KT_STR_CONTAINS(kiln_last_error(), "test_autograd_rules.c:");
    kiln_clear_error();
    kiln_release(loss);
    kiln_release(w);
  }
}

KT_TEST(seed_is_converted_and_checked) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_tensor y = kiln_mul(w, w);
    KT_CHECK(kiln_backward_with(y, kiln_cast(T("r"), KILN_F32)) == KILN_OK);
    check_grad(w, "seed_f32");
    /* PyTorch: a seed must have the output's shape (no broadcasting) */
    KT_CHECK(kiln_backward_with(y, kiln_full(KILN_F64, 1, S1, 1.0)) == KILN_ERR_INVALID_ARGUMENT);
    KT_STR_CONTAINS(kiln_last_error(), "seed");
    kiln_clear_error();
    KT_CHECK(kiln_backward_with(y, kiln_full(KILN_I32, 1, S6, 1.0)) == KILN_ERR_INVALID_ARGUMENT);
    kiln_clear_error();
    KT_CHECK(kiln_backward(y) == KILN_ERR_INVALID_ARGUMENT); /* six elements, no seed */
    KT_STR_CONTAINS(kiln_last_error(), "kiln_backward_with");
    kiln_clear_error();
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

/* PyTorch: requires_grad_() on a tensor that already requires grad is a no-op (its gradient is only kept
 * with retain_grad()). kiln keeps its gradient too, and its uses still reach w. A reshape of w to its own
 * shape returns w's node: v's gradient is still only v's uses', w's only w's and v's. */
KT_TEST(requires_grad_on_a_computed_tensor_keeps_its_gradient_too) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_tensor c = kiln_mul_c(w, 3.0), v = kiln_reshape(w, 1, S6);
    kiln_requires_grad(c);
    kiln_requires_grad(v);
    KT_CHECK(kiln_backward(kiln_add(kiln_add(loss_r(kiln_mul(c, c)), loss_r(v)), sum(kiln_mul(w, w)))) == KILN_OK);
    check_grad(w, "nonleaf");
    check_grad(v, "nonleaf_v");
    int64_t n = 0;
    const double *want = A("nonleaf.cg", &n);
    double got[6] = {0};
    KT_CHECK(n == 6 && kiln_to_host(kiln_grad(c), got, sizeof got) == KILN_OK);
    for (int i = 0; i < 6 && i < n; i++) KT_NEAR(got[i], want[i], 1e-12 + 1e-10 * fabs(want[i]));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

/* A kept transpose of w used in a matmul: the matmul's gradient reaches t as well as w (the matmul
 * gradient that goes to a plain transpose's input directly, as one GEMM, must not skip a kept one). */
KT_TEST(requires_grad_on_a_transpose_used_in_a_matmul_keeps_its_gradient) {
  static const int64_t S32[2] = {3, 2};
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    kiln_tensor t = kiln_transpose(kiln_reshape(w, 2, S23), 0, 1);
    kiln_requires_grad(t);
    kiln_tensor y = kiln_matmul(kiln_reshape(T("r"), 2, S23), t);
    kiln_tensor loss = kiln_add(sum(kiln_mul(y, y)), sum(kiln_mul(t, kiln_reshape(T("r"), 2, S32))));
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    check_grad(w, "transposed_nonleaf");
    check_grad(t, "transposed_nonleaf_t");
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(w);
  }
}

/* A requiring-grad parameter has a LEAF of its own each step; its update is
 * still written into its own buffer (donated), not a new one. */
KT_TEST(sgd_update_of_a_requiring_grad_parameter_is_donated) {
  FOR_BACKENDS(b) {
    kiln_tensor w = param(T("x"));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_frontend *fe = &kiln_fe_peek()->fe;
    void *p0 = fe->slots[w.index].buf->data;
    for (int i = 0; i < 3; i++) {
      kiln_zero_grad(w);
      KT_CHECK(kiln_backward(loss_r(kiln_mul(w, w))) == KILN_OK);
      if (i == 2) kiln_no_grad_begin(); /* PyTorch's habit: the update under no_grad */
      kiln_assign(w, kiln_sub(w, kiln_mul_c(kiln_grad(w), 0.1)));
      if (i == 2) kiln_no_grad_end();
      KT_CHECK(kiln_mark_step() == KILN_OK);
      KT_CHECK_MSG(fe->slots[w.index].buf->data == p0, "step %d on %s: the update was not donated", i, g_backend);
    }
    int64_t n;
    const double *x = A("x", &n), *r = A("r", &n);
    double wv[6];
    KT_CHECK(kiln_to_host(w, wv, sizeof wv) == KILN_OK);
    for (int i = 0; i < 6; i++) {
      double e = x[i];
      for (int k = 0; k < 3; k++) e -= 0.1 * 2 * e * r[i];
      KT_NEAR(wv[i], e, 1e-12);
    }
    kiln_release(w);
  }
}

/* ───────────── the gradient's dtype ───────────── */

KT_TEST(gradient_has_the_leaf_dtype) {
  FOR_BACKENDS(b) {
    const kiln_dtype dts[3] = {KILN_F32, KILN_BF16, KILN_F64};
    for (int i = 0; i < 3; i++) {
      kiln_tensor w = param(kiln_cast(T("x"), dts[i]));
      kiln_tensor m = kiln_reshape(w, 2, S23);
      kiln_autocast_begin(KILN_BF16);
      kiln_tensor y = kiln_matmul(m, kiln_permute(m, PERM10));
      kiln_autocast_end();
      KT_CHECK(kiln_backward(sum(kiln_cast(y, KILN_F32))) == KILN_OK);
      KT_CHECK_MSG(kiln_dtype_of(kiln_grad(w)) == dts[i], "grad of a %s leaf on %s: %s", kiln_dtype_name(dts[i]),
                   g_backend, kiln_dtype_name(kiln_dtype_of(kiln_grad(w))));
      KT_CHECK(kiln_mark_step() == KILN_OK);
      kiln_release(w);
    }
  }
}

KT_MAIN(KT_CASE(requires_grad_after_use_gives_that_use_no_gradient),
        KT_CASE(read_then_requires_grad_gives_the_earlier_use_none), KT_CASE(only_loss_from_earlier_uses_is_an_error),
        KT_CASE(read_computed_tensor_then_requires_grad_still_reaches_its_inputs),
        KT_CASE(hash_consed_twin_is_another_tensor), KT_CASE(zero_initialised_parameter_and_other_zeros),
        KT_CASE(tensor_sharing_the_buffer_is_another_tensor), KT_CASE(assigned_source_is_another_tensor),
        KT_CASE(read_mid_step_keeps_uses_before_the_read), KT_CASE(no_grad_detaches_ops_that_return_their_input),
        KT_CASE(no_grad_op_mixing_inputs_is_a_constant), KT_CASE(tensor_made_in_no_grad_then_required),
        KT_CASE(no_grad_region_spanning_a_step_marker), KT_CASE(no_grad_region_spanning_a_value_read),
        KT_CASE(integer_tensor_cannot_require_grad), KT_CASE(integer_casts_comparisons_and_argmax_carry_none),
        KT_CASE(one_leaf_through_several_views), KT_CASE(backward_twice_in_a_step_adds_up),
        KT_CASE(backward_of_a_loss_from_an_earlier_step_is_an_error), KT_CASE(seed_is_converted_and_checked),
        KT_CASE(requires_grad_on_a_computed_tensor_keeps_its_gradient_too),
        KT_CASE(requires_grad_on_a_transpose_used_in_a_matmul_keeps_its_gradient),
        KT_CASE(sgd_update_of_a_requiring_grad_parameter_is_donated),
        KT_CASE(gradient_has_the_leaf_dtype))
