/* Gradient checks: for every differentiable op and for composite layers,
 * the analytic gradients from kiln_backward (f64) are compared with
 * central finite differences computed by re-running the forward through
 * kiln in f64. Non-scalar outputs are reduced with fixed, distinct weights
 * (loss = sum(out * R)) so every output element's gradient path is seen. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <math.h>

#include "autograd/autograd_internal.h"
#include "kt.h"

#define MAXP 4
#define MAXE 256

typedef kiln_tensor (*fwd_fn)(const kiln_tensor *p);

typedef struct gc_param {
  int rank;
  int64_t shape[KILN_MAX_RANK];
  double v[MAXE];
  int n;
} gc_param;

static void start(void) {
  kiln_shutdown();
  kiln_autograd_reset();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

static uint64_t rng_state = 12345;
static double urand(double lo, double hi) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

/* A parameter of the given shape with values in [lo, hi]; away (> 0.2)
 * from 0 when avoid0, so kinks of abs/relu are not straddled. */
static gc_param P(int rank, const int64_t *shape, double lo, double hi, int avoid0) {
  gc_param p = {.rank = rank, .n = 1};
  for (int i = 0; i < rank; i++) {
    p.shape[i] = shape[i];
    p.n *= (int)shape[i];
  }
  for (int i = 0; i < p.n; i++) {
    double v = urand(lo, hi);
    if (avoid0 && fabs(v) < 0.2) v = v < 0 ? v - 0.3 : v + 0.3;
    p.v[i] = v;
  }
  return p;
}

/* loss = sum(out * R) with R[k] distinct, or out itself if one element. */
static kiln_tensor weighted(kiln_tensor out) {
  int64_t n = kiln_numel(out), s[KILN_MAX_RANK];
  int r = kiln_shape(out, s);
  if (n == 1) return kiln_sum(out, 0, NULL, 0);
  static double w[4096];
  for (int64_t k = 0; k < n && k < 4096; k++) w[k] = 0.5 + 0.4 * sin(1.3 * (double)k + 0.2);
  kiln_tensor R = kiln_from_host(w, KILN_F64, r, s);
  return kiln_sum(kiln_mul(out, R), 0, NULL, 0);
}

static double eval_loss(fwd_fn f, int np, gc_param *ps) {
  kiln_tensor t[MAXP];
  for (int i = 0; i < np; i++) t[i] = kiln_from_host(ps[i].v, KILN_F64, ps[i].rank, ps[i].shape);
  double L = kiln_item_f64(weighted(f(t)));
  kiln_mark_step();
  return L;
}

/* Compare analytic and numeric gradients of every parameter. */
static void gradcheck_impl(const char *name, fwd_fn f, int np, gc_param *ps, double tol) {
  start();
  kiln_tensor t[MAXP];
  for (int i = 0; i < np; i++) {
    t[i] = kiln_keep(kiln_from_host(ps[i].v, KILN_F64, ps[i].rank, ps[i].shape));
    kiln_requires_grad(t[i]);
  }
  KT_CHECK_MSG(kiln_backward(weighted(f(t))) == KILN_OK, "%s: backward failed: %s", name, kiln_last_error());
  static double ga[MAXP][MAXE];
  for (int i = 0; i < np; i++) {
    kiln_tensor g = kiln_grad(t[i]);
    KT_CHECK_MSG(g.gen != 0, "%s: parameter %d has no gradient", name, i);
    if (!g.gen) return;
    KT_CHECK(kiln_to_host(g, ga[i], sizeof(double) * ps[i].n) == KILN_OK);
  }
  KT_CHECK_MSG(kiln_mark_step() == KILN_OK, "%s: %s", name, kiln_last_error());
  const double h = 1e-6;
  int bad = 0;
  for (int i = 0; i < np; i++) {
    for (int j = 0; j < ps[i].n; j++) {
      double v0 = ps[i].v[j];
      ps[i].v[j] = v0 + h;
      double lp = eval_loss(f, np, ps);
      ps[i].v[j] = v0 - h;
      double lm = eval_loss(f, np, ps);
      ps[i].v[j] = v0;
      double num = (lp - lm) / (2 * h);
      if (!(fabs(num - ga[i][j]) <= tol * (1 + fabs(num))) && bad++ < 5)
        KT_FAIL("%s: d/dp%d[%d]: analytic %.12g vs numeric %.12g", name, i, j, ga[i][j], num);
    }
  }
  for (int i = 0; i < np; i++) kiln_release(t[i]);
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s: %s", name, kiln_last_error());
}
#define GC(f, ...)                                              \
  do {                                                          \
    gc_param ps_[] = {__VA_ARGS__};                             \
    gradcheck_impl(#f, f, (int)(sizeof ps_ / sizeof ps_[0]), ps_, 1e-6); \
  } while (0)

static const int64_t S23[2] = {2, 3}, S3[1] = {3}, S234[3] = {2, 3, 4}, S31[2] = {3, 1}, S6[1] = {6};

/* ── unary ── */
static kiln_tensor f_neg(const kiln_tensor *p) { return kiln_neg(p[0]); }
static kiln_tensor f_abs(const kiln_tensor *p) { return kiln_abs(p[0]); }
static kiln_tensor f_exp(const kiln_tensor *p) { return kiln_exp(p[0]); }
static kiln_tensor f_log(const kiln_tensor *p) { return kiln_log(p[0]); }
static kiln_tensor f_sqrt(const kiln_tensor *p) { return kiln_sqrt(p[0]); }
static kiln_tensor f_rsqrt(const kiln_tensor *p) { return kiln_rsqrt(p[0]); }
static kiln_tensor f_tanh(const kiln_tensor *p) { return kiln_tanh(p[0]); }
static kiln_tensor f_sigmoid(const kiln_tensor *p) { return kiln_sigmoid(p[0]); }
static kiln_tensor f_relu(const kiln_tensor *p) { return kiln_relu(p[0]); }
static kiln_tensor f_gelu(const kiln_tensor *p) { return kiln_gelu(p[0]); }
static kiln_tensor f_gelu_tanh(const kiln_tensor *p) { return kiln_gelu_tanh(p[0]); }

KT_TEST(unary_ops) {
  GC(f_neg, P(2, S23, -2, 2, 0));
  GC(f_abs, P(2, S23, -2, 2, 1));
  GC(f_exp, P(2, S23, -2, 2, 0));
  GC(f_log, P(2, S23, 0.3, 3, 0));
  GC(f_sqrt, P(2, S23, 0.3, 3, 0));
  GC(f_rsqrt, P(2, S23, 0.3, 3, 0));
  GC(f_tanh, P(2, S23, -2, 2, 0));
  GC(f_sigmoid, P(2, S23, -3, 3, 0));
  GC(f_relu, P(2, S23, -2, 2, 1));
  gc_param x = P(1, S6, -3, 3, 0);
  x.v[0] = 0.0; /* gelu'(0) goes through the x == 0 branch */
  x.v[1] = -6.0;
  GC(f_gelu, x);
  GC(f_gelu_tanh, x);
}

/* ── binary, with broadcasting (exercises EXPAND's rule) ── */
static kiln_tensor f_add(const kiln_tensor *p) { return kiln_add(p[0], p[1]); }
static kiln_tensor f_sub(const kiln_tensor *p) { return kiln_sub(p[0], p[1]); }
static kiln_tensor f_mul(const kiln_tensor *p) { return kiln_mul(p[0], p[1]); }
static kiln_tensor f_div(const kiln_tensor *p) { return kiln_div(p[0], p[1]); }
static kiln_tensor f_pow(const kiln_tensor *p) { return kiln_pow(p[0], p[1]); }
static kiln_tensor f_max(const kiln_tensor *p) { return kiln_maximum(p[0], p[1]); }
static kiln_tensor f_min(const kiln_tensor *p) { return kiln_minimum(p[0], p[1]); }
static kiln_tensor f_square(const kiln_tensor *p) { return kiln_mul(p[0], p[0]); } /* a node used twice */
static kiln_tensor f_scalar_ops(const kiln_tensor *p) {
  return kiln_div_c(kiln_sub_s(kiln_mul_c(kiln_pow_c(p[0], 3.0), 2.0), 0.5), 3.0);
}

KT_TEST(binary_ops) {
  GC(f_add, P(2, S23, -2, 2, 0), P(1, S3, -2, 2, 0));
  GC(f_sub, P(2, S23, -2, 2, 0), P(2, ((int64_t[]){2, 1}), -2, 2, 0));
  GC(f_mul, P(2, S23, -2, 2, 0), P(1, S3, -2, 2, 0));
  GC(f_div, P(2, S23, -2, 2, 0), P(1, S3, 0.5, 2, 0));
  GC(f_pow, P(2, S23, 0.5, 2, 0), P(2, S23, -1.5, 1.5, 0));
  GC(f_max, P(2, S23, -2, 2, 0), P(2, S23, 2.5, 3, 0));
  gc_param a = P(1, S6, -2, 2, 0), b = P(1, S6, -2, 2, 0);
  for (int i = 0; i < 6; i++) a.v[i] = b.v[i] + (i % 2 ? 0.5 : -0.5); /* each side wins somewhere */
  GC(f_max, a, b);
  GC(f_min, a, b);
  GC(f_square, P(2, S23, -2, 2, 0));
  GC(f_scalar_ops, P(2, S23, -2, 2, 0));
}

static kiln_tensor f_where(const kiln_tensor *p) {
  double c[6] = {1, -1, 2, -2, 0.5, -3};
  kiln_tensor ct = kiln_from_host(c, KILN_F64, 2, S23);
  return kiln_where(kiln_gt_c(ct, 0.0), p[0], p[1]);
}
KT_TEST(where_op) { GC(f_where, P(2, S23, -2, 2, 0), P(1, S3, -2, 2, 0)); }

/* ── reductions ── */
static kiln_tensor f_sum_all(const kiln_tensor *p) { return kiln_sum(p[0], 0, NULL, 0); }
static kiln_tensor f_sum_ax(const kiln_tensor *p) { return kiln_sum(p[0], 2, ((int[]){0, 2}), 0); }
static kiln_tensor f_mean_keep(const kiln_tensor *p) { return kiln_mean(p[0], 1, ((int[]){1}), 1); }
static kiln_tensor f_max_ax(const kiln_tensor *p) { return kiln_max(p[0], 1, ((int[]){-1}), 0); }
static kiln_tensor f_min_ax(const kiln_tensor *p) { return kiln_min(p[0], 2, ((int[]){0, 1}), 1); }
static kiln_tensor f_max_all(const kiln_tensor *p) { return kiln_max(p[0], 0, NULL, 0); }

KT_TEST(reductions) {
  GC(f_sum_all, P(3, S234, -2, 2, 0));
  GC(f_sum_ax, P(3, S234, -2, 2, 0));
  GC(f_mean_keep, P(3, S234, -2, 2, 0));
  GC(f_max_ax, P(3, S234, -2, 2, 0));
  GC(f_min_ax, P(3, S234, -2, 2, 0));
  GC(f_max_all, P(3, S234, -2, 2, 0));
}

/* Ties: the gradient of max is spread evenly over the maxima (torch.amax). */
KT_TEST(max_ties_split_evenly) {
  start();
  double x[6] = {1, 3, 3, 2, 3, 0}, g[6];
  kiln_tensor t = kiln_keep(kiln_from_host(x, KILN_F64, 1, S6));
  kiln_requires_grad(t);
  KT_CHECK(kiln_backward(kiln_max(t, 0, NULL, 0)) == KILN_OK);
  KT_CHECK(kiln_to_host(kiln_grad(t), g, sizeof g) == KILN_OK);
  double want[6] = {0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3, 0};
  for (int i = 0; i < 6; i++) KT_NEAR(g[i], want[i], 1e-15);
  kiln_release(t);
}

/* ── shape ops ── */
static kiln_tensor f_reshape(const kiln_tensor *p) {
  return kiln_mul(kiln_reshape(p[0], 2, ((int64_t[]){4, 6})), kiln_reshape(p[0], 2, ((int64_t[]){4, 6})));
}
static kiln_tensor f_permute(const kiln_tensor *p) { return kiln_exp(kiln_permute(p[0], ((int[]){2, 0, 1}))); }
static kiln_tensor f_transpose(const kiln_tensor *p) { return kiln_matmul(kiln_transpose(p[0], 0, 1), p[0]); }
static kiln_tensor f_expand(const kiln_tensor *p) { return kiln_tanh(kiln_expand(p[0], 3, S234)); }
static kiln_tensor f_slice1(const kiln_tensor *p) { return kiln_exp(kiln_slice(p[0], 1, 1, 3, 1)); }
static kiln_tensor f_slice2(const kiln_tensor *p) {
  return kiln_exp(kiln_slice(kiln_slice(p[0], 2, 1, 4, 2), 0, -1, 2, 1));
}
static kiln_tensor f_slice3(const kiln_tensor *p) { return kiln_slice(kiln_slice(p[0], 0, 1, 10, 3), 1, 0, 5, 2); }
static kiln_tensor f_concat(const kiln_tensor *p) {
  kiln_tensor xs[3] = {p[0], kiln_exp(p[1]), p[0]};
  return kiln_concat(3, xs, 1);
}
static kiln_tensor f_pad(const kiln_tensor *p) {
  return kiln_exp(kiln_pad(p[0], ((int64_t[]){1, 0}), ((int64_t[]){2, 3}), 0.5));
}

KT_TEST(shape_ops) {
  GC(f_reshape, P(3, S234, -2, 2, 0));
  GC(f_permute, P(3, S234, -2, 2, 0));
  GC(f_transpose, P(2, S23, -2, 2, 0));
  GC(f_expand, P(2, S31, -2, 2, 0));
  GC(f_slice1, P(3, S234, -2, 2, 0));
  GC(f_slice2, P(3, S234, -2, 2, 0));
  GC(f_slice3, P(2, ((int64_t[]){8, 5}), -2, 2, 0));
  GC(f_concat, P(2, S23, -2, 2, 0), P(2, ((int64_t[]){2, 2}), -2, 2, 0));
  GC(f_pad, P(2, S23, -2, 2, 0));
}

/* ── indexing ── */
static kiln_tensor f_index_select0(const kiln_tensor *p) {
  int64_t ids[5] = {3, 0, 3, 1, 4}; /* repeated, and the last row (out of range is an error: test_index_errors) */
  kiln_tensor ix = kiln_from_host(ids, KILN_I64, 1, ((int64_t[]){5}));
  return kiln_index_select(p[0], 0, ix);
}
static kiln_tensor f_index_select1(const kiln_tensor *p) {
  int32_t ids[4] = {2, 2, 0, 1};
  kiln_tensor ix = kiln_from_host(ids, KILN_I32, 2, ((int64_t[]){2, 2}));
  return kiln_index_select(p[0], 1, ix);
}
static kiln_tensor f_gather(const kiln_tensor *p) {
  int64_t ids[6] = {3, 3, 0, 1, 2, 1}; /* shape [2,3]: narrower than x [3,4] on axis 0 */
  kiln_tensor ix = kiln_from_host(ids, KILN_I64, 2, S23);
  return kiln_gather(p[0], 1, ix);
}
static kiln_tensor f_gather0(const kiln_tensor *p) {
  int64_t ids[4] = {2, 0, 2, 2};
  kiln_tensor ix = kiln_from_host(ids, KILN_I64, 2, ((int64_t[]){2, 2}));
  return kiln_gather(p[0], 0, ix);
}

KT_TEST(indexing_ops) {
  GC(f_index_select0, P(2, ((int64_t[]){5, 3}), -2, 2, 0));
  GC(f_index_select1, P(3, S234, -2, 2, 0));
  GC(f_gather, P(2, ((int64_t[]){3, 4}), -2, 2, 0));
  GC(f_gather0, P(2, ((int64_t[]){3, 4}), -2, 2, 0));
}

/* ── matmul ── */
static kiln_tensor f_matmul(const kiln_tensor *p) { return kiln_matmul(p[0], p[1]); }

KT_TEST(matmul_op) {
  GC(f_matmul, P(2, S23, -2, 2, 0), P(2, ((int64_t[]){3, 4}), -2, 2, 0));
  GC(f_matmul, P(3, S234, -2, 2, 0), P(2, ((int64_t[]){4, 2}), -2, 2, 0)); /* batch broadcast */
  GC(f_matmul, P(1, S3, -2, 2, 0), P(2, ((int64_t[]){3, 4}), -2, 2, 0));  /* vector @ matrix */
  GC(f_matmul, P(2, S23, -2, 2, 0), P(1, S3, -2, 2, 0));                  /* matrix @ vector */
}

/* ── composites ── */
static kiln_tensor f_softmax(const kiln_tensor *p) { return kiln_softmax(p[0], -1); }
static kiln_tensor f_log_softmax(const kiln_tensor *p) { return kiln_log_softmax(p[0], 0); }
static kiln_tensor f_linear_gelu_mean(const kiln_tensor *p) {
  /* x [4,3] @ W [3,5] + b [5] -> gelu -> mean */
  return kiln_mean(kiln_gelu(kiln_add(kiln_matmul(p[0], p[1]), p[2])), 0, NULL, 0);
}
static kiln_tensor f_layernorm(const kiln_tensor *p) {
  int ax[1] = {-1};
  kiln_tensor x = p[0];
  kiln_tensor mu = kiln_mean(x, 1, ax, 1);
  kiln_tensor xc = kiln_sub(x, mu);
  kiln_tensor var = kiln_mean(kiln_mul(xc, xc), 1, ax, 1);
  kiln_tensor y = kiln_mul(xc, kiln_rsqrt(kiln_add_c(var, 1e-5)));
  return kiln_add(kiln_mul(y, p[1]), p[2]);
}
static kiln_tensor f_cross_entropy(const kiln_tensor *p) {
  int64_t labels[4] = {2, 0, 4, 2};
  kiln_tensor lab = kiln_from_host(labels, KILN_I64, 2, ((int64_t[]){4, 1}));
  kiln_tensor lp = kiln_log_softmax(p[0], 1);
  return kiln_neg(kiln_mean(kiln_gather(lp, 1, lab), 0, NULL, 0));
}

KT_TEST(composites) {
  GC(f_softmax, P(2, S23, -2, 2, 0));
  GC(f_log_softmax, P(2, S23, -2, 2, 0));
  GC(f_linear_gelu_mean, P(2, ((int64_t[]){4, 3}), -2, 2, 0), P(2, ((int64_t[]){3, 5}), -1, 1, 0),
     P(1, ((int64_t[]){5}), -1, 1, 0));
  GC(f_layernorm, P(2, ((int64_t[]){3, 5}), -2, 2, 0), P(1, ((int64_t[]){5}), 0.5, 1.5, 0),
     P(1, ((int64_t[]){5}), -1, 1, 0));
  GC(f_cross_entropy, P(2, ((int64_t[]){4, 5}), -2, 2, 0));
}

/* backward_with: the vector-Jacobian product with an explicit seed. */
KT_TEST(backward_with_seed) {
  start();
  double x[6] = {1, 2, 3, 4, 5, 6}, s[6] = {1, -1, 2, 0.5, 0, 3}, g[6];
  kiln_tensor t = kiln_keep(kiln_from_host(x, KILN_F64, 2, S23));
  kiln_requires_grad(t);
  kiln_tensor y = kiln_mul(t, t);
  KT_CHECK(kiln_backward_with(y, kiln_from_host(s, KILN_F64, 2, S23)) == KILN_OK);
  KT_CHECK(kiln_to_host(kiln_grad(t), g, sizeof g) == KILN_OK);
  for (int i = 0; i < 6; i++) KT_NEAR(g[i], 2 * x[i] * s[i], 1e-12);
  kiln_release(t);
}

/* CAST between float dtypes passes the gradient through, converted. */
KT_TEST(cast_passes_gradient) {
  start();
  double x[3] = {1, 2, 3}, g[3];
  float w[3] = {0.5f, -2, 4};
  kiln_tensor t = kiln_keep(kiln_from_host(x, KILN_F64, 1, S3));
  kiln_requires_grad(t);
  kiln_tensor y = kiln_mul(kiln_cast(t, KILN_F32), kiln_from_host(w, KILN_F32, 1, S3));
  KT_CHECK(kiln_backward(kiln_sum(y, 0, NULL, 0)) == KILN_OK);
  KT_EQ_INT(kiln_dtype_of(kiln_grad(t)), KILN_F64);
  KT_CHECK(kiln_to_host(kiln_grad(t), g, sizeof g) == KILN_OK);
  for (int i = 0; i < 3; i++) KT_NEAR(g[i], w[i], 0);
  kiln_release(t);
}

KT_MAIN(KT_CASE(unary_ops), KT_CASE(binary_ops), KT_CASE(where_op), KT_CASE(reductions),
        KT_CASE(max_ties_split_evenly), KT_CASE(shape_ops), KT_CASE(indexing_ops), KT_CASE(matmul_op),
        KT_CASE(composites), KT_CASE(backward_with_seed), KT_CASE(cast_passes_gradient))
