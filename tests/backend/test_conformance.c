/* Backend conformance through the public API: every op over many shapes
 * (broadcasting, size-1, size-0 and 0-d, non-contiguous views made by
 * permute/slice/expand) and every dtype each op accepts, run once on "ref"
 * and once on the backend under test ($KILN_TEST_BACKEND, default "cpu"),
 * compared with tolerances per dtype. A few results are also checked against
 * values computed here in plain C, so the oracle itself is checked. Last,
 * tracing errors: poisoned tensors and the sticky message.
 *
 * Each program emits many outputs in one step, so one compile covers a
 * whole family of ops (see docs/testing.md). */
#include "backend/backend_compare.h"

static const kiln_dtype k_all_dt[] = {KILN_F32, KILN_F64, KILN_I32, KILN_I64, KILN_BOOL};

typedef struct shp {
  int rank;
  int64_t s[4];
} shp;

static const char *shp_str(const shp *s, char *buf) {
  int k = sprintf(buf, "[");
  for (int d = 0; d < s->rank; d++) k += sprintf(buf + k, d ? ",%lld" : "%lld", (long long)s->s[d]);
  sprintf(buf + k, "]");
  return buf;
}

typedef struct ccase {
  kiln_dtype dt, dt2;
  shp a, b, c;
  int variant;
} ccase;

static int is_float(kiln_dtype dt) { return dt == KILN_F32 || dt == KILN_F64; }

/* ───────────── unary ───────────── */

static const shp k_shapes[] = {{0, {0}},    {1, {1}},       {1, {7}},       {2, {3, 4}},  {3, {2, 3, 5}}, {2, {1, 1}},
                               {1, {0}},    {2, {3, 0}},    {4, {2, 1, 3, 1}}, {1, {67}}, {2, {17, 33}}};

static void prog_unary(bc_result *r, const void *arg) {
  const ccase *c = arg;
  kiln_tensor x = bc_input(c->dt, c->a.rank, c->a.s, 11, 0);
  kiln_tensor views[2] = {x, x};
  int nv = 1;
  if (c->a.rank >= 2) views[nv++] = kiln_transpose(x, 0, c->a.rank - 1); /* non-contiguous */
  for (int v = 0; v < nv; v++) {
    kiln_tensor t = views[v];
    if (c->dt != KILN_BOOL) {
      bc_emit(r, kiln_neg(t), 0, 0, "neg/v%d", v);
      bc_emit(r, kiln_abs(t), 0, 0, "abs/v%d", v);
      bc_emit(r, kiln_relu(t), 0, 0, "relu/v%d", v);
      kiln_tensor p = kiln_add_c(kiln_abs(t), 0.25);
      bc_emit(r, kiln_log(p), 1e-5, 1e-6, "log/v%d", v);
      bc_emit(r, kiln_sqrt(p), 0, 0, "sqrt/v%d", v);
      bc_emit(r, kiln_rsqrt(p), 1e-5, 1e-6, "rsqrt/v%d", v);
    }
    bc_emit(r, kiln_logical_not(t), 0, 0, "not/v%d", v);
    bc_emit(r, kiln_exp(t), 1e-5, 1e-6, "exp/v%d", v);
    bc_emit(r, kiln_tanh(t), 1e-5, 1e-6, "tanh/v%d", v);
    bc_emit(r, kiln_sigmoid(t), 1e-5, 1e-6, "sigmoid/v%d", v);
    bc_emit(r, kiln_gelu(t), 1e-5, 1e-6, "gelu/v%d", v);
    bc_emit(r, kiln_gelu_tanh(t), 1e-5, 1e-6, "gelu_tanh/v%d", v);
  }
}

KT_TEST(unary_ops) {
  char sb[64], what[128];
  for (size_t s = 0; s < sizeof k_shapes / sizeof k_shapes[0]; s++)
    for (int d = 0; d < 5; d++) {
      ccase c = {.dt = k_all_dt[d], .a = k_shapes[s]};
      snprintf(what, sizeof what, "unary %s%s", kiln_dtype_name(c.dt), shp_str(&c.a, sb));
      bc_check(what, prog_unary, &c, NULL);
    }
}

/* ───────────── binary, broadcasting, promotion, scalar forms ───────────── */

typedef kiln_tensor (*binfn)(kiln_tensor, kiln_tensor, kiln_loc);
static const struct {
  const char *name;
  binfn fn;
  int no_bool;
} k_bin[] = {{"add", kiln_add_at, 0},       {"sub", kiln_sub_at, 1},     {"mul", kiln_mul_at, 0},
             {"div", kiln_div_at, 1},       {"maximum", kiln_maximum_at, 0}, {"minimum", kiln_minimum_at, 0},
             {"eq", kiln_eq_at, 0},         {"ne", kiln_ne_at, 0},       {"lt", kiln_lt_at, 0},
             {"le", kiln_le_at, 0},         {"gt", kiln_gt_at, 0},       {"ge", kiln_ge_at, 0},
             {"logical_and", kiln_logical_and_at, 0}, {"logical_or", kiln_logical_or_at, 0}};

static const shp k_pairs[][2] = {
    {{2, {3, 4}}, {2, {3, 4}}},       {{2, {3, 4}}, {1, {4}}},    {{2, {3, 1}}, {2, {1, 4}}},
    {{3, {2, 3, 4}}, {2, {3, 1}}},    {{0, {0}}, {1, {5}}},       {{2, {0, 4}}, {1, {4}}},
    {{1, {1}}, {1, {0}}},             {{1, {67}}, {1, {67}}},     {{3, {2, 1, 4}}, {2, {3, 1}}},
    {{1, {5}}, {0, {0}}},
};

static void prog_binary(bc_result *r, const void *arg) {
  const ccase *c = arg;
  kiln_tensor a = bc_input(c->dt, c->a.rank, c->a.s, 21, 0);
  kiln_tensor b = bc_input(c->dt2, c->b.rank, c->b.s, 22, 0);
  int any_bool = c->dt == KILN_BOOL || c->dt2 == KILN_BOOL;
  for (size_t k = 0; k < sizeof k_bin / sizeof k_bin[0]; k++) {
    if (k_bin[k].no_bool && c->dt == KILN_BOOL && c->dt2 == KILN_BOOL) continue;
    bc_emit(r, k_bin[k].fn(a, b, KILN_HERE), 0, 0, "%s", k_bin[k].name);
  }
  if (!any_bool) { /* pow on a positive base (a negative one gives NaN on both sides anyway) */
    bc_emit(r, kiln_pow(kiln_add_c(kiln_abs(a), 0.25), b), 2e-5, 1e-6, "pow");
    bc_emit(r, kiln_pow(kiln_add_c(kiln_abs(b), 0.25), kiln_mul_c(a, 0.5)), 2e-5, 1e-6, "pow2");
  }
  /* the same with the operands swapped and through a non-contiguous view */
  bc_emit(r, kiln_sub_at(b, any_bool ? kiln_cast(a, KILN_I32) : a, KILN_HERE), 0, 0, "sub_swapped");
  if (c->a.rank >= 2) {
    kiln_tensor at = kiln_transpose(kiln_transpose(a, 0, 1), 0, 1);
    bc_emit(r, kiln_mul(at, b), 0, 0, "mul_view");
  }
}

static void prog_scalar_forms(bc_result *r, const void *arg) {
  const ccase *c = arg;
  kiln_tensor x = bc_input(c->dt, c->a.rank, c->a.s, 31, 0);
  if (c->dt != KILN_BOOL) {
    bc_emit(r, kiln_add_s(x, 2.5), 0, 0, "add_s 2.5");
    bc_emit(r, kiln_add_s(x, 3), 0, 0, "add_s 3");
    bc_emit(r, kiln_sub_c(x, 1.25), 0, 0, "sub_c");
    bc_emit(r, kiln_div_c(x, 2), 0, 0, "div_c 2");
    bc_emit(r, kiln_div_s(x, 0), 0, 0, "div_s 0");
    bc_emit(r, kiln_pow_c(kiln_abs(x), 2), 1e-5, 1e-6, "pow_c 2");
    bc_emit(r, kiln_pow_s(kiln_add_c(kiln_abs(x), 0.5), 0.5), 1e-5, 1e-6, "pow_s 0.5");
  }
  bc_emit(r, kiln_mul_c(x, 3), 0, 0, "mul_c 3");
  bc_emit(r, kiln_maximum_s(x, 0.5), 0, 0, "maximum_s");
  bc_emit(r, kiln_minimum_c(x, -1), 0, 0, "minimum_c");
  bc_emit(r, kiln_gt_c(x, 0.5), 0, 0, "gt_c");
  bc_emit(r, kiln_lt_c(x, 1), 0, 0, "lt_c");
  bc_emit(r, kiln_eq_c(x, 1), 0, 0, "eq_c");
}

KT_TEST(binary_ops) {
  char sa[64], sb[64], what[160];
  for (size_t p = 0; p < sizeof k_pairs / sizeof k_pairs[0]; p++)
    for (int d = 0; d < 5; d++) {
      ccase c = {.dt = k_all_dt[d], .dt2 = k_all_dt[d], .a = k_pairs[p][0], .b = k_pairs[p][1]};
      snprintf(what, sizeof what, "binary %s%s %s", kiln_dtype_name(c.dt), shp_str(&c.a, sa), shp_str(&c.b, sb));
      bc_check(what, prog_binary, &c, NULL);
    }
  /* dtype promotion between operands */
  const kiln_dtype mixed[][2] = {{KILN_I32, KILN_F32}, {KILN_BOOL, KILN_I64}, {KILN_I64, KILN_F64},
                                 {KILN_BOOL, KILN_F32}, {KILN_I32, KILN_I64}, {KILN_F32, KILN_F64}};
  for (size_t m = 0; m < sizeof mixed / sizeof mixed[0]; m++) {
    ccase c = {.dt = mixed[m][0], .dt2 = mixed[m][1], .a = k_pairs[3][0], .b = k_pairs[3][1]};
    snprintf(what, sizeof what, "binary mixed %s,%s", kiln_dtype_name(c.dt), kiln_dtype_name(c.dt2));
    bc_check(what, prog_binary, &c, NULL);
  }
  for (int d = 0; d < 5; d++) {
    ccase c = {.dt = k_all_dt[d], .a = {2, {3, 5}}};
    snprintf(what, sizeof what, "scalar forms %s", kiln_dtype_name(c.dt));
    bc_check(what, prog_scalar_forms, &c, NULL);
  }
}

/* ───────────── where and cast ───────────── */

static void prog_where_cast(bc_result *r, const void *arg) {
  const ccase *c = arg;
  kiln_tensor cond = bc_input(KILN_BOOL, 2, (int64_t[]){3, 1}, 41, 0);
  kiln_tensor a = bc_input(c->dt, 2, (int64_t[]){1, 4}, 42, 0);
  kiln_tensor b = bc_input(c->dt2, 2, (int64_t[]){3, 4}, 43, 0);
  bc_emit(r, kiln_where(cond, a, b), 0, 0, "where bcast");
  bc_emit(r, kiln_where(b, a, kiln_constant(c->dt, 1)), 0, 0, "where nonbool cond");
  bc_emit(r, kiln_where(kiln_constant(KILN_BOOL, 1), kiln_transpose(b, 0, 1), kiln_zeros(c->dt, 1, (int64_t[]){3})),
          0, 0, "where view");
  /* every cast pair, from data with specials (NaN, inf, -0, huge) */
  kiln_tensor x = bc_input(c->dt, 1, (int64_t[]){40}, 44, 2);
  for (int i = 0; i < 5; i++) {
    kiln_tensor xi = kiln_cast(x, k_all_dt[i]);
    bc_emit(r, xi, 0, 0, "cast %s->%s", kiln_dtype_name(c->dt), kiln_dtype_name(k_all_dt[i]));
    for (int j = 0; j < 5; j++)
      bc_emit(r, kiln_cast(xi, k_all_dt[j]), 0, 0, "cast %s->%s->%s", kiln_dtype_name(c->dt),
              kiln_dtype_name(k_all_dt[i]), kiln_dtype_name(k_all_dt[j]));
  }
}

KT_TEST(where_and_cast) {
  char what[96];
  for (int d = 0; d < 5; d++)
    for (int e = 0; e < 5; e++) {
      ccase c = {.dt = k_all_dt[d], .dt2 = k_all_dt[e]};
      snprintf(what, sizeof what, "where/cast %s,%s", kiln_dtype_name(c.dt), kiln_dtype_name(c.dt2));
      bc_check(what, prog_where_cast, &c, NULL);
    }
}

/* ───────────── reductions ───────────── */

static const shp k_red_shapes[] = {{1, {7}},    {2, {3, 4}},       {3, {2, 3, 5}}, {3, {4, 1, 6}},
                                   {2, {3, 0}}, {1, {1}},          {0, {0}},       {4, {2, 3, 4, 5}},
                                   {2, {1, 300}}};

static void prog_reduce(bc_result *r, const void *arg) {
  const ccase *c = arg;
  kiln_tensor x = bc_input(c->dt, c->a.rank, c->a.s, 51, c->variant);
  const int R = c->a.rank;
  int64_t n = 1;
  for (int d = 0; d < R; d++) n *= c->a.s[d];
  /* f32 sums may be reassociated: tolerance grows with the count */
  double atol = c->dt == KILN_F32 ? 4e-6 * (double)(n + 1) : 1e-12 * (double)(n + 1);
  const int axes_sets[][3] = {{0}, {1, 0}, {1, -1}, {2, 0, -1}, {1, 1}};
  for (int k = 0; k < 5; k++) {
    int na = axes_sets[k][0];
    const int *ax = &axes_sets[k][1];
    int ok = 1, empty = n == 0;
    for (int i = 0; i < na; i++) {
      int a = ax[i] < 0 ? ax[i] + R : ax[i];
      if (a < 0 || a >= R) ok = 0;
      if (ok && c->a.s[a] == 0) empty = 1;
    }
    if (!ok || (na == 2 && (ax[0] < 0 ? ax[0] + R : ax[0]) == (ax[1] < 0 ? ax[1] + R : ax[1]))) continue;
    for (int keep = 0; keep < 2; keep++) {
      bc_emit(r, kiln_sum(x, na, ax, keep), 1e-5, atol, "sum set%d keep%d", k, keep);
      if (is_float(c->dt)) bc_emit(r, kiln_mean(x, na, ax, keep), 1e-5, atol, "mean set%d keep%d", k, keep);
      if (!empty) {
        bc_emit(r, kiln_max(x, na, ax, keep), 0, 0, "max set%d keep%d", k, keep);
        bc_emit(r, kiln_min(x, na, ax, keep), 0, 0, "min set%d keep%d", k, keep);
      }
    }
  }
  if (R >= 1 && n > 0) {
    bc_emit(r, kiln_argmax(x, -1, 0), 0, 0, "argmax -1");
    bc_emit(r, kiln_argmax(x, 0, 1), 0, 0, "argmax 0 keep");
    if (c->dt != KILN_BOOL) {
      bc_emit(r, kiln_softmax(x, -1), 1e-5, 1e-6, "softmax");
      bc_emit(r, kiln_log_softmax(x, 0), 1e-5, 1e-5, "log_softmax");
    }
  }
  if (R >= 2) { /* reductions of a non-contiguous view */
    kiln_tensor t = kiln_transpose(x, 0, R - 1);
    bc_emit(r, kiln_sum(t, 1, (int[]){0}, 0), 1e-5, atol, "sum view");
    if (n > 0) bc_emit(r, kiln_argmax(t, 0, 0), 0, 0, "argmax view");
  }
}

KT_TEST(reductions) {
  char sb[64], what[128];
  for (size_t s = 0; s < sizeof k_red_shapes / sizeof k_red_shapes[0]; s++)
    for (int d = 0; d < 5; d++)
      for (int v = 0; v < (is_float(k_all_dt[d]) ? 2 : 1); v++) { /* v1: with NaN/inf */
        ccase c = {.dt = k_all_dt[d], .a = k_red_shapes[s], .variant = v ? 2 : 0};
        snprintf(what, sizeof what, "reduce %s%s%s", kiln_dtype_name(c.dt), shp_str(&c.a, sb), v ? " specials" : "");
        bc_check(what, prog_reduce, &c, NULL);
      }
}

/* ───────────── shape ops, each followed by arithmetic ───────────── */

static kiln_tensor touch(kiln_tensor t) {
  return kiln_dtype_of(t) == KILN_BOOL ? kiln_logical_not(t) : kiln_mul_c(t, 3);
}

static void prog_shape(bc_result *r, const void *arg) {
  const ccase *c = arg;
  kiln_tensor x = bc_input(c->dt, 3, (int64_t[]){2, 3, 4}, 61, 0);
  kiln_tensor y = bc_input(c->dt, 2, (int64_t[]){3, 1}, 62, 0);
  kiln_tensor p = kiln_permute(x, ((int[]){2, 0, 1}));
  bc_emit(r, touch(kiln_reshape(x, 2, ((int64_t[]){4, -1}))), 0, 0, "reshape");
  bc_emit(r, touch(kiln_reshape(p, 2, ((int64_t[]){4, 6}))), 0, 0, "reshape of permute");
  bc_emit(r, touch(p), 0, 0, "permute");
  bc_emit(r, touch(kiln_transpose(x, 0, 2)), 0, 0, "transpose");
  bc_emit(r, touch(kiln_expand(y, 3, ((int64_t[]){2, 3, 4}))), 0, 0, "expand");
  bc_emit(r, kiln_add(x, kiln_expand(y, 3, ((int64_t[]){2, 3, 4}))), 0, 0, "add expand");
  bc_emit(r, touch(kiln_slice(x, 2, 1, -1, 2)), 0, 0, "slice step");
  bc_emit(r, touch(kiln_slice(x, 0, -1, 100, 1)), 0, 0, "slice neg start");
  bc_emit(r, touch(kiln_slice(x, 1, 2, 1, 1)), 0, 0, "slice empty");
  bc_emit(r, touch(kiln_slice(kiln_slice(p, 0, 1, 4, 2), 2, 0, 3, 2)), 0, 0, "slice of slice of permute");
  kiln_tensor parts[3] = {x, kiln_slice(x, 1, 0, 1, 1), kiln_slice(x, 1, 3, 3, 1)};
  bc_emit(r, touch(kiln_concat(3, parts, 1)), 0, 0, "concat axis 1 with empty");
  kiln_tensor parts2[2] = {kiln_transpose(x, 0, 1), kiln_expand(kiln_reshape(y, 3, ((int64_t[]){3, 1, 1})),
                                                                3, ((int64_t[]){3, 2, 4}))};
  bc_emit(r, touch(kiln_concat(2, parts2, -1)), 0, 0, "concat of views");
  bc_emit(r, touch(kiln_concat(1, &x, 0)), 0, 0, "concat single");
  bc_emit(r, touch(kiln_pad(x, ((int64_t[]){1, 0, 2}), ((int64_t[]){0, 2, 1}), -1.5)), 0, 0, "pad");
  bc_emit(r, touch(kiln_pad(p, ((int64_t[]){0, 0, 0}), ((int64_t[]){1, 1, 1}), 7)), 0, 0, "pad of permute");
  bc_emit(r, kiln_sum(kiln_pad(x, ((int64_t[]){1, 1, 1}), ((int64_t[]){1, 1, 1}), 0), 0, NULL, 0), 1e-5, 1e-5,
          "sum of pad");
}

KT_TEST(shape_ops) {
  char what[64];
  for (int d = 0; d < 5; d++) {
    ccase c = {.dt = k_all_dt[d]};
    snprintf(what, sizeof what, "shape ops %s", kiln_dtype_name(c.dt));
    bc_check(what, prog_shape, &c, NULL);
  }
}

/* ───────────── indexing ───────────── */

static void prog_index(bc_result *r, const void *arg) {
  const ccase *c = arg;
  kiln_tensor x = bc_input(c->dt, 2, (int64_t[]){5, 4}, 71, 0);
  kiln_dtype it = c->dt2;
  /* the ends of each axis; out-of-range indices are an error (test_index_errors) */
  int64_t raw1[3] = {0, 2, 4}, raw2[4] = {3, 0, 1, 3}, rawg[10] = {0, 3, 1, 1, 3, 0, 2, 2, 3, 0};
  int32_t r1[3], r2[4], rg[10];
  for (int i = 0; i < 10; i++) {
    if (i < 3) r1[i] = (int32_t)raw1[i];
    if (i < 4) r2[i] = (int32_t)raw2[i];
    rg[i] = (int32_t)rawg[i];
  }
  int i64 = it == KILN_I64;
  kiln_tensor i1 = kiln_from_host(i64 ? (void *)raw1 : (void *)r1, it, 1, ((int64_t[]){3}));
  kiln_tensor i2 = kiln_from_host(i64 ? (void *)raw2 : (void *)r2, it, 2, ((int64_t[]){2, 2}));
  kiln_tensor ig = kiln_from_host(i64 ? (void *)rawg : (void *)rg, it, 2, ((int64_t[]){5, 2}));
  bc_emit(r, touch(kiln_index_select(x, 0, i1)), 0, 0, "index_select 0");
  bc_emit(r, touch(kiln_index_select(x, 1, i2)), 0, 0, "index_select 1 2-d idx");
  bc_emit(r, touch(kiln_index_select(kiln_transpose(x, 0, 1), 1, i2)), 0, 0, "index_select of view");
  bc_emit(r, touch(kiln_gather(x, 1, ig)), 0, 0, "gather");
  bc_emit(r, touch(kiln_gather(x, 0, kiln_slice(ig, 0, 0, 2, 1))), 0, 0, "gather axis 0");
  bc_emit(r, kiln_one_hot(i1, 6, c->dt), 0, 0, "one_hot");
  bc_emit(r, kiln_one_hot(ig, 4, KILN_F32), 0, 0, "one_hot 2-d");
}

KT_TEST(index_ops) {
  char what[64];
  for (int d = 0; d < 5; d++)
    for (int i = 0; i < 2; i++) {
      ccase c = {.dt = k_all_dt[d], .dt2 = i ? KILN_I64 : KILN_I32};
      snprintf(what, sizeof what, "index %s idx %s", kiln_dtype_name(c.dt), kiln_dtype_name(c.dt2));
      bc_check(what, prog_index, &c, NULL);
    }
}

/* ───────────── matmul ───────────── */

static void prog_matmul(bc_result *r, const void *arg) {
  const ccase *c = arg;
  kiln_tensor a = bc_input(c->dt, c->a.rank, c->a.s, 81, 0);
  kiln_tensor b = bc_input(c->dt, c->b.rank, c->b.s, 82, 0);
  int64_t K = c->a.s[c->a.rank - 1];
  double atol = (c->dt == KILN_F32 ? 1e-5 : 1e-12) * (double)(K + 1);
  bc_emit(r, kiln_matmul(a, b), 1e-5, atol, "matmul");
  if (c->b.rank >= 2) { /* b through a transposed copy: non-contiguous operand */
    kiln_tensor bt = kiln_transpose(kiln_add_c(kiln_transpose(b, -1, -2), 0.5), -1, -2);
    bc_emit(r, kiln_matmul(a, bt), 1e-5, atol * 2, "matmul view");
  }
}

KT_TEST(matmul_ops) {
  static const shp mm[][2] = {
      {{1, {4}}, {1, {4}}},           {{1, {3}}, {2, {3, 5}}},        {{2, {4, 3}}, {1, {3}}},
      {{2, {1, 1}}, {2, {1, 1}}},     {{2, {3, 17}}, {2, {17, 5}}},   {{2, {64, 33}}, {2, {33, 65}}},
      {{4, {2, 1, 3, 4}}, {3, {5, 4, 2}}}, {{2, {3, 0}}, {2, {0, 4}}}, {{2, {0, 3}}, {2, {3, 2}}},
      {{3, {2, 3, 4}}, {2, {4, 6}}},
  };
  char sa[64], sb[64], what[160];
  for (size_t m = 0; m < sizeof mm / sizeof mm[0]; m++)
    for (int d = 0; d < 2; d++) {
      ccase c = {.dt = k_all_dt[d], .a = mm[m][0], .b = mm[m][1]};
      snprintf(what, sizeof what, "matmul %s%s@%s", kiln_dtype_name(c.dt), shp_str(&c.a, sa), shp_str(&c.b, sb));
      bc_check(what, prog_matmul, &c, NULL);
    }
}

/* ───────────── independent checks: results vs plain C ───────────── */

static const float k_xa[12] = {0.5f, -1.25f, 2, 3.5f, -0.75f, 1, 0, -2, 4, 1.5f, -3, 0.25f};
static const float k_xb[4] = {1, -2, 0.5f, 3};
static const int64_t k_ids[3] = {2, 0, 2}; /* out of range is an error: test_index_errors */

static void prog_independent(bc_result *r, const void *arg) {
  (void)arg;
  kiln_tensor a = kiln_from_host(k_xa, KILN_F32, 2, ((int64_t[]){3, 4}));
  kiln_tensor b = kiln_from_host(k_xb, KILN_F32, 1, ((int64_t[]){4}));
  kiln_tensor ids = kiln_from_host(k_ids, KILN_I64, 1, ((int64_t[]){3}));
  bc_emit(r, kiln_add(a, b), 0, 0, "add");                                            /* 0 */
  bc_emit(r, kiln_sum(a, 1, (int[]){0}, 0), 0, 0, "sum0");                             /* 1 */
  bc_emit(r, kiln_argmax(a, 1, 0), 0, 0, "argmax1");                                   /* 2 */
  bc_emit(r, kiln_slice(kiln_transpose(a, 0, 1), 0, 1, 4, 2), 0, 0, "slice of transpose"); /* 3 */
  bc_emit(r, kiln_matmul(a, b), 0, 0, "matvec");                                       /* 4 */
  bc_emit(r, kiln_index_select(a, 0, ids), 0, 0, "index_select");                      /* 5 */
  bc_emit(r, kiln_softmax(a, -1), 0, 0, "softmax");                                    /* 6 */
  bc_emit(r, kiln_rand_uniform(KILN_F32, 1, ((int64_t[]){10}), 1234), 0, 0, "rand");   /* 7 */
  bc_emit(r, kiln_rand_normal(KILN_F64, 1, ((int64_t[]){10}), 99), 0, 0, "randn");     /* 8 */
  bc_emit(r, kiln_arange(KILN_F32, 0, 1, 0.25), 0, 0, "arange");                       /* 9 */
  bc_emit(r, kiln_div(kiln_cast(a, KILN_I32), kiln_cast(b, KILN_I32)), 0, 0, "idiv"); /* 10 */
}

KT_TEST(independent_checks) {
  static bc_result ref;
  bc_check("independent", prog_independent, NULL, &ref);
  if (ref.status != KILN_OK || ref.n != 11) {
    KT_FAIL("ref run failed: %s", ref.err);
    bc_result_free(&ref);
    return;
  }
  const bc_out *o = ref.o;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) {
      KT_NEAR(bc_get_f(&o[0], i * 4 + j), k_xa[i * 4 + j] + k_xb[j], 0);
      int rr = (int)k_ids[i];
      KT_NEAR(bc_get_f(&o[5], i * 4 + j), k_xa[rr * 4 + j], 0);
      int32_t ia = (int32_t)k_xa[i * 4 + j], ib = (int32_t)k_xb[j];
      /* integer / is true division, as PyTorch's (docs/semantics.md): f32, x/0 is +-inf or nan */
      double q = bc_get_f(&o[10], i * 4 + j), want = (double)((float)ia / (float)ib);
      KT_CHECK_MSG(o[10].dt == KILN_F32 && (q == want || (isnan(q) && isnan(want))), "idiv %d / %d = %g, want %g", ia,
                   ib, q, want);
    }
  for (int j = 0; j < 4; j++) KT_NEAR(bc_get_f(&o[1], j), (double)k_xa[j] + k_xa[4 + j] + k_xa[8 + j], 1e-6);
  for (int i = 0; i < 3; i++) {
    int best = 0;
    double dot = 0, mx = -INFINITY, den = 0;
    for (int j = 0; j < 4; j++) {
      if (k_xa[i * 4 + j] > k_xa[i * 4 + best]) best = j;
      dot += (double)k_xa[i * 4 + j] * k_xb[j];
      mx = fmax(mx, k_xa[i * 4 + j]);
    }
    KT_EQ_INT(bc_get_i(&o[2], i), best);
    KT_NEAR(bc_get_f(&o[4], i), dot, 1e-6);
    for (int j = 0; j < 4; j++) den += exp(k_xa[i * 4 + j] - mx);
    for (int j = 0; j < 4; j++) KT_NEAR(bc_get_f(&o[6], i * 4 + j), exp(k_xa[i * 4 + j] - mx) / den, 1e-6);
  }
  /* slice(transpose(a))[k][i] = a[i][1 + 2k] */
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 3; i++) KT_NEAR(bc_get_f(&o[3], k * 3 + i), k_xa[i * 4 + 1 + 2 * k], 0);
  for (int k = 0; k < 10; k++) {
    KT_NEAR(bc_get_f(&o[7], k), (float)kiln_rng_uniform(1234, (uint64_t)k), 0);
    KT_NEAR(bc_get_f(&o[8], k), kiln_rng_normal(99, (uint64_t)k), 0);
  }
  KT_EQ_INT(o[9].numel, 4);
  for (int k = 0; k < 4; k++) KT_NEAR(bc_get_f(&o[9], k), 0.25 * k, 0);
  bc_result_free(&ref);
}

/* ───────────── creation ops ───────────── */

static void prog_create(bc_result *r, const void *arg) {
  (void)arg;
  bc_emit(r, kiln_full(KILN_F32, 2, ((int64_t[]){3, 4}), 1.5), 0, 0, "full f32");
  bc_emit(r, kiln_full(KILN_I32, 1, ((int64_t[]){5}), -3), 0, 0, "full i32");
  bc_emit(r, kiln_zeros(KILN_BOOL, 1, ((int64_t[]){2})), 0, 0, "zeros bool");
  bc_emit(r, kiln_ones(KILN_I64, 0, NULL), 0, 0, "ones 0-d");
  bc_emit(r, kiln_arange(KILN_F32, 0, 1, 0.1), 0, 0, "arange f32");
  bc_emit(r, kiln_arange(KILN_I64, 10, 0, -3), 0, 0, "arange i64 down");
  bc_emit(r, kiln_arange(KILN_F64, -1, 2, 0.5), 0, 0, "arange f64");
  bc_emit(r, kiln_rand_uniform(KILN_F32, 2, ((int64_t[]){7, 9}), 5), 0, 0, "rand");
  bc_emit(r, kiln_rand_normal(KILN_F64, 1, ((int64_t[]){33}), 6), 0, 0, "randn");
  kiln_tensor x = bc_input(KILN_F32, 1, ((int64_t[]){6}), 91, 0);
  bc_emit(r, kiln_add(x, kiln_scalar(KILN_F32, 0.3)), 0, 0, "scalar input");
  bc_emit(r, kiln_mul(x, kiln_constant(KILN_I32, 7)), 0, 0, "constant");
  bc_emit(r, kiln_add(kiln_scalar(KILN_I64, -4), kiln_constant(KILN_I64, 2)), 0, 0, "0-d");
}

KT_TEST(creation_ops) { bc_check("creation", prog_create, NULL, NULL); }

/* ───────────── tracing errors ───────────── */

KT_TEST(tracing_errors) {
  KT_EQ_INT(kiln_init(&(kiln_options){.backend = "ref"}), KILN_OK);
  kiln_clear_error();
  kiln_tensor a = kiln_zeros(KILN_F32, 2, ((int64_t[]){3, 4}));
  kiln_tensor b = kiln_zeros(KILN_F32, 1, ((int64_t[]){5}));
  int line = __LINE__ + 1;
  kiln_tensor c = kiln_add(a, b);
  KT_CHECK(!kiln_is_valid(c));
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  char where[64];
  snprintf(where, sizeof where, "test_conformance.c:%d", line);
  const char *msg = kiln_last_error();
  KT_STR_CONTAINS(msg, where);
  KT_STR_CONTAINS(msg, "add");
  KT_STR_CONTAINS(msg, "[3,4]");
  KT_STR_CONTAINS(msg, "[5]");
  /* poison propagates without a new message; the sync point reports it */
  char first[1024];
  snprintf(first, sizeof first, "%s", msg);
  kiln_tensor d = kiln_exp(kiln_mul(c, a));
  KT_CHECK(!kiln_is_valid(d));
  KT_STR_CONTAINS(kiln_last_error(), first);
  KT_EQ_INT(kiln_mark_step(), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  /* every failing builder returns a poisoned tensor (messages: below) */
  kiln_tensor m = kiln_zeros(KILN_F32, 2, ((int64_t[]){2, 3}));
  kiln_tensor bad[] = {
      kiln_matmul(m, m),
      kiln_reshape(m, 1, ((int64_t[]){7})),
      kiln_sum(m, 1, (int[]){2}, 0),
      kiln_index_select(m, 0, m),
      kiln_permute(m, ((int[]){0, 0})),
      kiln_where(m, m, kiln_zeros(KILN_F32, 1, ((int64_t[]){4}))),
      kiln_slice(m, 0, 0, 2, 0),
      kiln_concat(2, ((kiln_tensor[]){m, kiln_zeros(KILN_F32, 2, ((int64_t[]){2, 4}))}), 0),
      kiln_expand(m, 2, ((int64_t[]){4, 3})),
      kiln_gather(m, 1, kiln_zeros(KILN_I64, 1, ((int64_t[]){2}))),
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    KT_CHECK_MSG(!kiln_is_valid(bad[k]), "error case %zu returned a valid tensor", k);
  }
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  /* after clearing, the runtime works again */
  kiln_tensor ok = kiln_keep(kiln_add_c(m, 2));
  KT_EQ_INT(kiln_mark_step(), KILN_OK);
  float h[6];
  KT_EQ_INT(kiln_to_host(ok, h, sizeof h), KILN_OK);
  for (int i = 0; i < 6; i++) KT_CHECK(h[i] == 2.0f);
  kiln_shutdown();
}

KT_TEST(tracing_error_messages) {
  /* one error per init so each message is the sticky one */
  struct {
    const char *needles[3];
  } want[] = {{{"matmul", "[2,3]", "test_conformance.c"}},
              {{"reshape", "[2,3]", "test_conformance.c"}},
              {{"sum", "[2,3]", "test_conformance.c"}},
              {{"index_select", "f32", "test_conformance.c"}}};
  for (int k = 0; k < 4; k++) {
    KT_EQ_INT(kiln_init(&(kiln_options){.backend = "ref"}), KILN_OK);
    kiln_clear_error();
    kiln_tensor m = kiln_zeros(KILN_F32, 2, ((int64_t[]){2, 3}));
    kiln_tensor t;
    switch (k) {
      case 0: t = kiln_matmul(m, m); break;
      case 1: t = kiln_reshape(m, 1, ((int64_t[]){7})); break;
      case 2: t = kiln_sum(m, 1, (int[]){2}, 0); break;
      default: t = kiln_index_select(m, 0, m); break;
    }
    KT_CHECK(!kiln_is_valid(t));
    for (int j = 0; j < 3; j++) KT_STR_CONTAINS(kiln_last_error(), want[k].needles[j]);
    kiln_clear_error();
    kiln_shutdown();
  }
  /* a stale handle is reported, not undefined behaviour */
  KT_EQ_INT(kiln_init(&(kiln_options){.backend = "ref"}), KILN_OK);
  kiln_tensor tmp = kiln_zeros(KILN_F32, 1, ((int64_t[]){3}));
  KT_EQ_INT(kiln_mark_step(), KILN_OK);
  kiln_tensor u = kiln_neg(tmp);
  KT_CHECK(!kiln_is_valid(u));
  KT_EQ_INT(kiln_last_status(), KILN_ERR_STALE_HANDLE);
  kiln_clear_error();
  kiln_shutdown();
}

KT_MAIN(KT_CASE(independent_checks), KT_CASE(unary_ops), KT_CASE(binary_ops), KT_CASE(where_and_cast),
        KT_CASE(reductions), KT_CASE(shape_ops), KT_CASE(index_ops), KT_CASE(matmul_ops), KT_CASE(creation_ops),
        KT_CASE(tracing_errors), KT_CASE(tracing_error_messages))
