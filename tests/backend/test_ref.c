/* The ref backend checked directly (below the frontend) against values
 * computed here in plain C: the oracle of the other backend tests must
 * itself be checked against an independent computation. Also covers the
 * exact corner semantics of ops.def (integer division by zero, out-of-range
 * indices as errors, NaN in argmax/max, CAST rules, donation aliasing). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/graph_builder.h"
#include "backends/backend.h"
#include "base/rng.h"
#include "kt.h"

/* Compile g on a fresh ref backend and run it once. Returns the status. */
static kiln_status run(kiln_graph *g, void *const *inputs, void *const *outputs, char *msg) {
  kiln_backend *be = NULL;
  kiln_err err = {0};
  kiln_status s = kiln_backend_ref_create(&(kiln_backend_config){0}, &be, &err);
  if (s != KILN_OK) return s;
  kiln_executable *e = NULL;
  s = be->vt->compile(be, g, NULL, &e, &err);
  if (s == KILN_OK) s = be->vt->execute(be, e, inputs, outputs, &err);
  if (msg) strcpy(msg, s == KILN_OK ? "" : err.msg);
  if (e) be->vt->executable_free(be, e);
  be->vt->destroy(be);
  kiln_graph_free(g);
  return s;
}

static float frand(unsigned *st) {
  *st = *st * 1103515245u + 12345u;
  return (float)((*st >> 8) & 0xffff) / 65536.0f * 4.0f - 2.0f; /* [-2, 2) */
}

KT_TEST(unary_binary_f32) {
  enum { N = 64 };
  float x[N], y[N], o[16][N];
  unsigned st = 1;
  for (int i = 0; i < N; i++) x[i] = frand(&st), y[i] = frand(&st) + 3.0f;
  x[5] = NAN;
  gb b = gb_new();
  int a = leaf(&b, KILN_F32, SH(N)), c = leaf(&b, KILN_F32, SH(N));
  int ops[] = {KILN_OP_NEG, KILN_OP_ABS, KILN_OP_EXP, KILN_OP_TANH, KILN_OP_SIGMOID, KILN_OP_RELU,
               KILN_OP_GELU, KILN_OP_GELU_TANH, KILN_OP_LOG, KILN_OP_RSQRT};
  for (int k = 0; k < 8; k++) out(&b, nd(&b, ops[k], KILN_F32, SH(N), IN(a), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_LOG, KILN_F32, SH(N), IN(c), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_RSQRT, KILN_F32, SH(N), IN(c), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_DIV, KILN_F32, SH(N), IN(a, c), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_POW, KILN_F32, SH(N), IN(c, a), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_MAX, KILN_F32, SH(N), IN(a, c), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_MIN, KILN_F32, SH(N), IN(c, a), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_SUB, KILN_F32, SH(N), IN(a, c), AT0, 0), -1);
  void *outs[16];
  for (int k = 0; k < 15; k++) outs[k] = o[k];
  KT_EQ_INT(run(b.g, (void *[]){x, y}, outs, NULL), KILN_OK);
  for (int i = 0; i < N; i++) {
    if (i == 5) continue;
    double v = x[i], w = y[i];
    double want[15] = {-v, fabs(v), exp(v), tanh(v), 1 / (1 + exp(-v)), v > 0 ? v : 0,
                       0.5 * v * (1 + erf(v / sqrt(2.0))),
                       0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), log(w), 1 / sqrt(w),
                       v / w, pow(w, v), v > w ? v : w, v < w ? v : w, v - w};
    for (int k = 0; k < 15; k++) KT_NEAR(o[k][i], want[k], 2e-6 * fabs(want[k]) + 1e-6);
  }
  /* NaN: propagates through max/min (either side) and relu */
  KT_CHECK(isnan(o[5][5]) && isnan(o[12][5]) && isnan(o[13][5]) && isnan(o[0][5]));
}

KT_TEST(integer_semantics) {
  int32_t a[8] = {7, -7, 7, INT32_MIN, INT32_MAX, 0, 5, -9};
  int32_t c[8] = {2, 2, 0, -1, 1, 0, -3, 4};
  int32_t div[8], add[8], mul[8], neg[8], pw[8];
  gb b = gb_new();
  int x = leaf(&b, KILN_I32, SH(8)), y = leaf(&b, KILN_I32, SH(8));
  out(&b, nd(&b, KILN_OP_DIV, KILN_I32, SH(8), IN(x, y), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_ADD, KILN_I32, SH(8), IN(x, y), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_MUL, KILN_I32, SH(8), IN(x, x), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_NEG, KILN_I32, SH(8), IN(x), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_POW, KILN_I32, SH(8), IN(y, x), AT0, 0), -1);
  KT_EQ_INT(run(b.g, (void *[]){a, c}, (void *[]){div, add, mul, neg, pw}, NULL), KILN_OK);
  int32_t want_div[8] = {3, -3, 0, INT32_MIN, INT32_MAX, 0, -1, -2};
  int32_t want_add[8] = {9, -5, 7, INT32_MAX, INT32_MIN, 0, 2, -5};
  for (int i = 0; i < 8; i++) {
    KT_EQ_INT(div[i], want_div[i]);
    KT_EQ_INT(add[i], want_add[i]);
    KT_EQ_INT(mul[i], (int32_t)((uint32_t)a[i] * (uint32_t)a[i]));
    KT_EQ_INT(neg[i], (int32_t)(0u - (uint32_t)a[i]));
  }
  /* pow(y, x): 2^7, 2^-7 -> 0, 0^7, (-1)^MIN -> 1, 1^MAX, 0^0 = 1, (-3)^5, 4^-9 -> 0 */
  int32_t want_pw[8] = {128, 0, 0, 1, 1, 1, -243, 0};
  for (int i = 0; i < 8; i++) KT_EQ_INT(pw[i], want_pw[i]);
  /* bool add/mul are or/and and stay 0/1 */
  uint8_t p[4] = {0, 0, 1, 1}, q[4] = {0, 1, 0, 1}, bo[4], ba[4], bn[4];
  b = gb_new();
  x = leaf(&b, KILN_BOOL, SH(4));
  y = leaf(&b, KILN_BOOL, SH(4));
  out(&b, nd(&b, KILN_OP_ADD, KILN_BOOL, SH(4), IN(x, y), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_MUL, KILN_BOOL, SH(4), IN(x, y), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_NOT, KILN_BOOL, SH(4), IN(x), AT0, 0), -1);
  KT_EQ_INT(run(b.g, (void *[]){p, q}, (void *[]){bo, ba, bn}, NULL), KILN_OK);
  for (int i = 0; i < 4; i++) {
    KT_EQ_INT(bo[i], p[i] | q[i]);
    KT_EQ_INT(ba[i], p[i] & q[i]);
    KT_EQ_INT(bn[i], !p[i]);
  }
}

KT_TEST(cast_rules) {
  float f[8] = {-2.7f, 2.7f, NAN, 1e10f, -0.0f, 0.5f, -3e9f, 16777217.0f};
  int64_t l[4] = {(1LL << 32) + 5, -1, (1LL << 53) + 1, 16777217};
  int32_t fi[8];
  int64_t fl[8];
  uint8_t fb[8];
  int32_t li[4];
  float lf[4];
  double ld[4];
  gb b = gb_new();
  int x = leaf(&b, KILN_F32, SH(8)), y = leaf(&b, KILN_I64, SH(4));
  out(&b, nd(&b, KILN_OP_CAST, KILN_I32, SH(8), IN(x), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_CAST, KILN_I64, SH(8), IN(x), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_CAST, KILN_BOOL, SH(8), IN(x), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_CAST, KILN_I32, SH(4), IN(y), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_CAST, KILN_F32, SH(4), IN(y), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_CAST, KILN_F64, SH(4), IN(y), AT0, 0), -1);
  KT_EQ_INT(run(b.g, (void *[]){f, l}, (void *[]){fi, fl, fb, li, lf, ld}, NULL), KILN_OK);
  int32_t want_fi[8] = {-2, 2, INT32_MIN, INT32_MIN, 0, 0, INT32_MIN, 16777216};
  int64_t want_fl[8] = {-2, 2, INT64_MIN, 10000000000LL, 0, 0, -3000000000LL, 16777216};
  uint8_t want_fb[8] = {1, 1, 1, 1, 0, 1, 1, 1};
  for (int i = 0; i < 8; i++) {
    KT_EQ_INT(fi[i], want_fi[i]);
    KT_EQ_INT(fl[i], want_fl[i]);
    KT_EQ_INT(fb[i], want_fb[i]);
  }
  int32_t want_li[4] = {5, -1, 1, 16777217};
  for (int i = 0; i < 4; i++) {
    KT_EQ_INT(li[i], want_li[i]);
    KT_CHECK(lf[i] == (float)l[i]); /* one rounding, int64 -> float */
    KT_CHECK(ld[i] == (double)l[i]);
  }
}

KT_TEST(reductions) {
  float x[2 * 3 * 4];
  for (int i = 0; i < 24; i++) x[i] = (float)((i * 7) % 11) - 5.0f;
  float s02[3], mx1[2 * 4], all[1];
  int64_t am[2 * 3];
  gb b = gb_new();
  int a = leaf(&b, KILN_F32, SH(2, 3, 4));
  out(&b, nd(&b, KILN_OP_REDUCE_SUM, KILN_F32, SH(1, 3, 1), IN(a), AT(5), 0), -1);
  out(&b, nd(&b, KILN_OP_REDUCE_MAX, KILN_F32, SH(2, 1, 4), IN(a), AT(2), 0), -1);
  out(&b, nd(&b, KILN_OP_REDUCE_MIN, KILN_F32, SH(1, 1, 1), IN(a), AT(7), 0), -1);
  out(&b, nd(&b, KILN_OP_ARGMAX, KILN_I64, SH(2, 3, 1), IN(a), AT(2), 0), -1);
  KT_EQ_INT(run(b.g, (void *[]){x}, (void *[]){s02, mx1, all, am}, NULL), KILN_OK);
  float mn = INFINITY;
  for (int j = 0; j < 3; j++) {
    double s = 0;
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) s += x[(i * 3 + j) * 4 + k];
    KT_NEAR(s02[j], s, 1e-6);
  }
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) {
      float m = -INFINITY;
      for (int j = 0; j < 3; j++) m = fmaxf(m, x[(i * 3 + j) * 4 + k]);
      KT_NEAR(mx1[i * 4 + k], m, 0);
    }
  for (int i = 0; i < 24; i++) mn = fminf(mn, x[i]);
  KT_NEAR(all[0], mn, 0);
  for (int r = 0; r < 6; r++) {
    int best = 0;
    for (int k = 1; k < 4; k++)
      if (x[r * 4 + k] > x[r * 4 + best]) best = k;
    KT_EQ_INT(am[r], best);
  }
  /* ties -> first index; NaN counts as the maximum (first NaN); NaN
   * propagates through reduce_max; empty sums are 0, empty max is -inf */
  float t[3 * 4] = {1, 3, 3, 0, 1, NAN, 9, NAN, 2, 2, 2, 2};
  int64_t ta[3];
  float tm[3], es[3], em[3];
  b = gb_new();
  a = leaf(&b, KILN_F32, SH(3, 4));
  int e = leaf(&b, KILN_F32, SH(3, 0));
  out(&b, nd(&b, KILN_OP_ARGMAX, KILN_I64, SH(3, 1), IN(a), AT(1), 0), -1);
  out(&b, nd(&b, KILN_OP_REDUCE_MAX, KILN_F32, SH(3, 1), IN(a), AT(2), 0), -1);
  out(&b, nd(&b, KILN_OP_REDUCE_SUM, KILN_F32, SH(3, 1), IN(e), AT(2), 0), -1);
  out(&b, nd(&b, KILN_OP_REDUCE_MAX, KILN_F32, SH(3, 1), IN(e), AT(2), 0), -1);
  float dummy[1];
  KT_EQ_INT(run(b.g, (void *[]){t, dummy}, (void *[]){ta, tm, es, em}, NULL), KILN_OK);
  KT_EQ_INT(ta[0], 1);
  KT_EQ_INT(ta[1], 1);
  KT_EQ_INT(ta[2], 0);
  KT_CHECK(tm[0] == 3 && isnan(tm[1]) && tm[2] == 2);
  for (int i = 0; i < 3; i++) KT_CHECK(es[i] == 0 && em[i] == -INFINITY);
  /* integer sums are exact past 2^53 and wrap */
  int64_t big[3] = {(1LL << 53) + 1, 1, INT64_MAX}, bs[1];
  b = gb_new();
  a = leaf(&b, KILN_I64, SH(3));
  out(&b, nd(&b, KILN_OP_REDUCE_SUM, KILN_I64, SH(1), IN(a), AT(1), 0), -1);
  KT_EQ_INT(run(b.g, (void *[]){big}, (void *[]){bs}, NULL), KILN_OK);
  KT_CHECK(bs[0] == (int64_t)((uint64_t)big[0] + 1u + (uint64_t)INT64_MAX));
}

KT_TEST(movement) {
  int32_t x[2 * 3 * 4];
  for (int i = 0; i < 24; i++) x[i] = i;
  int32_t per[24], exp_[2 * 3 * 4], sl[2 * 2], cat[3 * 4 * 3], pad[4 * 5];
  int32_t row[4] = {10, 20, 30, 40};
  gb b = gb_new();
  int a = leaf(&b, KILN_I32, SH(2, 3, 4));
  int r = leaf(&b, KILN_I32, SH(1, 1, 4));
  out(&b, nd(&b, KILN_OP_PERMUTE, KILN_I32, SH(4, 2, 3), IN(a), AT(2, 0, 1), 0), -1);
  out(&b, nd(&b, KILN_OP_EXPAND, KILN_I32, SH(2, 3, 4), IN(r), AT0, 0), -1);
  int m = nd(&b, KILN_OP_RESHAPE, KILN_I32, SH(6, 4), IN(a), AT0, 0);
  out(&b, nd(&b, KILN_OP_SLICE, KILN_I32, SH(2, 2), IN(m), AT(1, 1, 3, 2), 0), -1);
  int p = nd(&b, KILN_OP_PERMUTE, KILN_I32, SH(4, 6), IN(m), AT(1, 0), 0);
  int s1 = nd(&b, KILN_OP_SLICE, KILN_I32, SH(4, 3), IN(p), AT(0, 0, 1, 2), 0);
  int rr = nd(&b, KILN_OP_RESHAPE, KILN_I32, SH(4, 1), IN(r), AT0, 0);
  int e0 = nd(&b, KILN_OP_SLICE, KILN_I32, SH(4, 0), IN(p), AT(0, 6, 1, 1), 0);
  int c2 = nd(&b, KILN_OP_CONCAT, KILN_I32, SH(4, 4), IN(s1, e0, rr), AT(1), 0);
  int c3 = nd(&b, KILN_OP_SLICE, KILN_I32, SH(3, 3), IN(c2), AT(1, 1, 1, 1), 0);
  out(&b, nd(&b, KILN_OP_CONCAT, KILN_I32, SH(3, 4, 3), IN(nd(&b, KILN_OP_RESHAPE, KILN_I32, SH(3, 1, 3), IN(c3), AT0, 0),
                                                         nd(&b, KILN_OP_EXPAND, KILN_I32, SH(3, 3, 3),
                                                            IN(nd(&b, KILN_OP_RESHAPE, KILN_I32, SH(3, 1, 3), IN(c3), AT0, 0)),
                                                            AT0, 0)),
                 AT(1), 0),
      -1);
  out(&b, nd(&b, KILN_OP_PAD, KILN_I32, SH(4, 5), IN(nd(&b, KILN_OP_SLICE, KILN_I32, SH(2, 2), IN(m), AT(0, 0, 1, 1), 0)),
             AT(1, 2, 1, 1), -7), -1);
  KT_EQ_INT(run(b.g, (void *[]){x, row}, (void *[]){per, exp_, sl, cat, pad}, NULL), KILN_OK);
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) KT_EQ_INT(per[(k * 2 + i) * 3 + j], x[(i * 3 + j) * 4 + k]);
  for (int i = 0; i < 24; i++) KT_EQ_INT(exp_[i], row[i % 4]);
  /* m[6,4]; rows 1,4 (start 1 step 3), cols 1,3 (start 1 step 2) */
  int32_t want_sl[4] = {5, 7, 17, 19};
  for (int i = 0; i < 4; i++) KT_EQ_INT(sl[i], want_sl[i]);
  /* c2[i] = [p[i][0], p[i][2], p[i][4], row[i]], p = m^T: p[i][j] = m[j][i] = 4j + i
   * c3 = c2[1:4, 1:4]; cat = concat([c3 rows as [3,1,3]], expand of the same to [3,3,3]) */
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 4; k++)
      for (int j = 0; j < 3; j++) {
        int ci = i + 1, cj = j + 1;
        int32_t v = cj < 3 ? 4 * (2 * cj) + ci : row[ci];
        KT_EQ_INT(cat[(i * 4 + k) * 3 + j], v);
      }
  /* pad of m[0:2, 0:2] = [[0,1],[4,5]] with lo (1,2) hi (1,1), value -7 */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 5; j++) {
      int si = i - 1, sj = j - 2;
      int32_t v = (si >= 0 && si < 2 && sj >= 0 && sj < 2) ? si * 4 + sj : -7;
      KT_EQ_INT(pad[i * 5 + j], v);
    }
}

/* INDEX_SELECT and GATHER of ids/gidx on x[5,3]; outputs is[2,3,3], ga[5,2]
 * and is1[5] (index_select of x by ids[4] along axis 1). */
static kiln_status run_indexing(const double *w, const int64_t *ids, const int32_t *gidx, double *is, double *ga,
                                double *is1, char *msg) {
  gb b = gb_new();
  int x = leaf(&b, KILN_F64, SH(5, 3));
  int i64 = leaf(&b, KILN_I64, SH(2, 3));
  int i32 = leaf(&b, KILN_I32, SH(5, 2));
  out(&b, nd(&b, KILN_OP_INDEX_SELECT, KILN_F64, SH(2, 3, 3), IN(x, i64), AT(0), 0), -1);
  out(&b, nd(&b, KILN_OP_GATHER, KILN_F64, SH(5, 2), IN(x, i32), AT(1), 0), -1);
  int s0 = nd(&b, KILN_OP_SLICE, KILN_I64, SH(1), IN(nd(&b, KILN_OP_RESHAPE, KILN_I64, SH(6), IN(i64), AT0, 0)),
              AT(4, 1), 0);
  out(&b, nd(&b, KILN_OP_INDEX_SELECT, KILN_F64, SH(5), IN(x, nd(&b, KILN_OP_RESHAPE, KILN_I64, S0, IN(s0), AT0, 0)),
             AT(1), 0),
      -1);
  return run(b.g, (void *[]){(void *)w, (void *)ids, (void *)gidx}, (void *[]){is, ga, is1}, msg);
}

/* An index outside [0, dim), negative included, is an error naming the op,
 * the first bad index and the axis size; in-range indices read exactly. */
KT_TEST(indexing_checks) {
  double w[5 * 3];
  for (int i = 0; i < 15; i++) w[i] = i * 1.5;
  double is[2 * 3 * 3], ga[5 * 2], is1[5];
  char msg[1024];
  const int32_t gidx_ok[5 * 2] = {2, 0, 0, 1, 1, 1, 0, 2, 2, 2};
  const int64_t ids_neg[2 * 3] = {0, 4, -5, 99, 2, 1};
  KT_EQ_INT(run_indexing(w, ids_neg, gidx_ok, is, ga, is1, msg), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(msg, "index_select: index -5 is out of range for axis 0 of size 5");
  const int64_t ids_ok[2 * 3] = {0, 4, 3, 3, 2, 1};
  const int32_t gidx_big[5 * 2] = {2, 0, 1, 3, 1, 1, 0, 2, 2, 2};
  KT_EQ_INT(run_indexing(w, ids_ok, gidx_big, is, ga, is1, msg), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(msg, "gather: index 3 is out of range for axis 1 of size 3");
  KT_EQ_INT(run_indexing(w, ids_ok, gidx_ok, is, ga, is1, msg), KILN_OK);
  for (int k = 0; k < 6; k++)
    for (int j = 0; j < 3; j++) KT_CHECK(is[k * 3 + j] == w[ids_ok[k] * 3 + j]);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 2; j++) KT_CHECK(ga[i * 2 + j] == w[i * 3 + gidx_ok[i * 2 + j]]);
  for (int i = 0; i < 5; i++) KT_CHECK(is1[i] == w[i * 3 + 2]); /* ids[4] = 2 */
}

KT_TEST(matmul_batched) {
  enum { B = 3, M = 4, K = 5, N = 2 };
  float a[B * M * K], c[B * K * N], o[B * M * N];
  unsigned st = 7;
  for (int i = 0; i < B * M * K; i++) a[i] = frand(&st);
  for (int i = 0; i < B * K * N; i++) c[i] = frand(&st);
  gb b = gb_new();
  int x = leaf(&b, KILN_F32, SH(B, M, K)), y = leaf(&b, KILN_F32, SH(B, K, N));
  out(&b, nd(&b, KILN_OP_MATMUL, KILN_F32, SH(B, M, N), IN(x, y), AT0, 0), -1);
  KT_EQ_INT(run(b.g, (void *[]){a, c}, (void *[]){o}, NULL), KILN_OK);
  for (int t = 0; t < B; t++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)a[(t * M + i) * K + k] * c[(t * K + k) * N + j];
        KT_NEAR(o[(t * M + i) * N + j], s, 1e-6);
      }
}

KT_TEST(sources) {
  double sv = 2.25;
  int64_t iv = -3, seed = 42;
  float cf[6], sf[2], rn[5], ru[5];
  int32_t io[6], si[2];
  gb b = gb_new();
  int s = scalar(&b, KILN_F32, 0), t = scalar(&b, KILN_I32, 0), sd = scalar(&b, KILN_I64, 0);
  out(&b, nd(&b, KILN_OP_CONST, KILN_F32, SH(2, 3), IN0, AT0, 0.1), -1);
  out(&b, nd(&b, KILN_OP_IOTA, KILN_I32, SH(2, 3), IN0, AT(1), 0), -1);
  out(&b, nd(&b, KILN_OP_EXPAND, KILN_F32, SH(2), IN(nd(&b, KILN_OP_RESHAPE, KILN_F32, SH(1), IN(s), AT0, 0)), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_EXPAND, KILN_I32, SH(2), IN(nd(&b, KILN_OP_RESHAPE, KILN_I32, SH(1), IN(t), AT0, 0)), AT0, 0), -1);
  out(&b, nd(&b, KILN_OP_RANDOM, KILN_F32, SH(5), IN(sd), AT(1), 0), -1);
  out(&b, nd(&b, KILN_OP_RANDOM, KILN_F32, SH(5), IN(sd), AT(0), 0), -1);
  KT_EQ_INT(run(b.g, (void *[]){&sv, &iv, &seed}, (void *[]){cf, io, sf, si, rn, ru}, NULL), KILN_OK);
  for (int i = 0; i < 6; i++) {
    KT_CHECK(cf[i] == 0.1f);
    KT_EQ_INT(io[i], i % 3);
  }
  KT_CHECK(sf[0] == 2.25f && sf[1] == 2.25f);
  KT_CHECK(si[0] == -3 && si[1] == -3);
  for (int k = 0; k < 5; k++) {
    KT_CHECK(rn[k] == (float)kiln_rng_normal(42, (uint64_t)k));
    KT_CHECK(ru[k] == (float)kiln_rng_uniform(42, (uint64_t)k));
  }
}

KT_TEST(donation_aliasing) {
  /* outputs 0 and 1 both read x; output 0 is written into x's own buffer */
  float x[4] = {1, 2, 3, 4}, o1[4];
  gb b = gb_new();
  int a = leaf(&b, KILN_F32, SH(4));
  int one = nd(&b, KILN_OP_CONST, KILN_F32, SH(4), IN0, AT0, 1.0);
  out(&b, nd(&b, KILN_OP_ADD, KILN_F32, SH(4), IN(a, one), AT0, 0), 0);
  out(&b, nd(&b, KILN_OP_MUL, KILN_F32, SH(4), IN(a, a), AT0, 0), -1);
  KT_EQ_INT(run(b.g, (void *[]){x}, (void *[]){x, o1}, NULL), KILN_OK);
  for (int i = 0; i < 4; i++) {
    KT_CHECK(x[i] == i + 2.0f);
    KT_CHECK(o1[i] == (i + 1.0f) * (i + 1.0f));
  }
}

KT_TEST(empty_dead_and_repeated) {
  float e[1], o0[1], d[3] = {1, 2, 3}, r1[3], r2[3];
  gb b = gb_new();
  int x = leaf(&b, KILN_F32, SH(0, 3)), y = leaf(&b, KILN_F32, SH(3));
  out(&b, nd(&b, KILN_OP_NEG, KILN_F32, SH(0, 3), IN(x), AT0, 0), -1);
  nd(&b, KILN_OP_EXP, KILN_F32, SH(3), IN(y), AT0, 0); /* dead node */
  int n = nd(&b, KILN_OP_NEG, KILN_F32, SH(3), IN(y), AT0, 0);
  out(&b, n, -1);
  out(&b, n, -1);
  KT_EQ_INT(run(b.g, (void *[]){e, d}, (void *[]){o0, r1, r2}, NULL), KILN_OK);
  for (int i = 0; i < 3; i++) KT_CHECK(r1[i] == -d[i] && r2[i] == -d[i]);
}

KT_TEST(rejects_invalid_and_buffers) {
  gb b = gb_new();
  int x = leaf(&b, KILN_F32, SH(4));
  nd(&b, KILN_OP_EXP, KILN_I32, SH(4), IN(x), AT0, 0);
  char msg[1024];
  KT_EQ_INT(run(b.g, (void *[]){NULL}, NULL, msg), KILN_ERR_INTERNAL);
  KT_STR_CONTAINS(msg, "ref: invalid graph: node %1 (exp");
  kiln_backend *be = NULL;
  kiln_err err = {0};
  KT_EQ_INT(kiln_backend_ref_create(NULL, &be, &err), KILN_OK);
  KT_EQ_INT(be->vt->api_version, KILN_BACKEND_API_VERSION);
  void *p0 = be->vt->buffer_alloc(be, 0), *p1 = be->vt->buffer_alloc(be, 0), *p2 = be->vt->buffer_alloc(be, 100);
  KT_CHECK(p0 && p1 && p2 && p0 != p1);
  KT_EQ_INT((uintptr_t)p2 % 64, 0);
  for (int i = 0; i < 100; i++) KT_EQ_INT(((unsigned char *)p2)[i], 0);
  char h[5] = "abcd", back[5] = {0};
  be->vt->copy_to_device(be, p2, h, 5);
  be->vt->copy_to_host(be, back, p2, 5);
  KT_STR_CONTAINS(back, "abcd");
  be->vt->buffer_free(be, p0);
  be->vt->buffer_free(be, p1);
  be->vt->buffer_free(be, p2);
  KT_CHECK(strstr(be->vt->describe(be), "ref") != NULL);
  be->vt->destroy(be);
}

/* The contract between the verifier and every backend: a graph that passes
 * kiln_graph_verify must be safe to run. Random node soups (random ops,
 * dtypes, shapes, attributes, wiring; half the nodes copy an input's type
 * so more of them verify) are verified, and every accepted one is executed
 * on random input bytes. Under AddressSanitizer any out-of-bounds access
 * fails the test. */
KT_TEST(verified_graphs_never_crash) {
  uint64_t ctr = 0;
#define R(n) ((int)(kiln_rng_bits(77, ctr++) % (uint64_t)(n)))
  int accepted = 0, per_op[KILN_OP_COUNT] = {0};
  static const double fvals[] = {0, 1.5, -1, 1e20, NAN, 3};
  for (int attempt = 0; attempt < 200000; attempt++) {
    gb b = gb_new();
    int n_in = 1 + R(3);
    for (int k = 0; k < n_in; k++) {
      int64_t sh[3];
      for (int d = 0; d < 3; d++) sh[d] = R(4);
      int dt = R(5), rank = R(4);
      if (R(4) == 0)
        scalar(&b, dt, 0);
      else
        leaf(&b, dt, rank, sh);
    }
    int n_nodes = 1 + R(4);
    for (int k = 0; k < n_nodes; k++) {
      kiln_graph *g = b.g;
      int op = R(KILN_OP_COUNT);
      if (op == KILN_OP_LEAF || op == KILN_OP_SCALAR) op = KILN_OP_NEG;
      int arity = kiln_op_table[op].arity < 0 ? 1 + R(3) : kiln_op_table[op].arity;
      int32_t ins[3];
      for (int j = 0; j < arity; j++) ins[j] = g->n_nodes - 1 - R(g->n_nodes > 2 ? 2 : g->n_nodes);
      const kiln_gnode *src = &g->nodes[arity > 0 ? ins[0] : 0];
      int64_t sh[4], at[8];
      for (int d = 0; d < 4; d++) sh[d] = R(5);
      int rank = R(4), dt = R(5);
      if (arity > 0 && R(2)) {
        rank = src->rank;
        for (int d = 0; d < rank; d++) sh[d] = src->shape[d] + (R(4) == 0 ? R(3) - 1 : 0);
        dt = R(3) ? src->dtype : dt;
      }
      int n_at = R(9);
      for (int j = 0; j < n_at; j++) at[j] = R(8) - 2;
      nd(&b, op, dt, rank, sh, arity, ins, n_at, at, fvals[R(6)]);
    }
    out(&b, b.g->n_nodes - 1, -1);
    if (kiln_graph_verify(b.g, NULL, 0) != 0) {
      kiln_graph_free(b.g);
      continue;
    }
    accepted++;
    for (int i = n_in; i < b.g->n_nodes; i++) per_op[b.g->nodes[i].op]++;
    void *ins[4] = {0}, *outs[1];
    for (int k = 0; k < n_in; k++) {
      const kiln_gnode *n = &b.g->nodes[b.g->input_node[k]];
      size_t bytes = n->op == KILN_OP_SCALAR ? 8 : kiln_gnode_bytes(n);
      unsigned char *p = malloc(bytes + 1);
      for (size_t j = 0; j < bytes; j++) p[j] = (unsigned char)R(256);
      ins[k] = p;
    }
    outs[0] = malloc(kiln_gnode_bytes(&b.g->nodes[b.g->n_nodes - 1]) + 1);
    /* random bytes as indices are out of range: an error, never a crash */
    int indexed = 0;
    for (int i = 0; i < b.g->n_nodes; i++)
      indexed |= kiln_op_table[b.g->nodes[i].op].flags & OPF_RUNTIME_CHECK;
    /* a collective traced for another world than this process's (a world of
     * 1): refused when it runs, never a crash */
    int collective = 0;
    for (int i = 0; i < b.g->n_nodes; i++)
      collective |= kiln_op_table[b.g->nodes[i].op].kind == KILN_KIND_COLLECTIVE && b.g->nodes[i].iattr[1] != 1;
    char msg[1024];
    kiln_status rs = run(b.g, ins, outs, msg);
    int allowed = (indexed && rs == KILN_ERR_INVALID_ARGUMENT && strstr(msg, " is out of range for axis ")) ||
                  (collective && rs != KILN_OK && strstr(msg, " was traced for a world of "));
    if (!allowed) KT_CHECK_MSG(rs == KILN_OK, "attempt %d: %s", attempt, msg);
    for (int k = 0; k < n_in; k++) free(ins[k]);
    free(outs[0]);
  }
#undef R
  int ops_seen = 0;
  for (int op = 0; op < KILN_OP_COUNT; op++) ops_seen += per_op[op] > 0;
  fprintf(stderr, "  %d random graphs verified and executed, %d ops covered\n", accepted, ops_seen);
  KT_CHECK(accepted > 1000);
  KT_CHECK(ops_seen >= KILN_OP_COUNT - 4); /* all but leaf/scalar and the hardest to hit */
}

KT_MAIN(KT_CASE(unary_binary_f32), KT_CASE(integer_semantics), KT_CASE(cast_rules), KT_CASE(reductions),
        KT_CASE(movement), KT_CASE(indexing_checks), KT_CASE(matmul_batched), KT_CASE(sources),
        KT_CASE(donation_aliasing), KT_CASE(empty_dead_and_repeated), KT_CASE(rejects_invalid_and_buffers),
        KT_CASE(verified_graphs_never_crash))
