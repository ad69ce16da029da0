/* Every structural, indexing, sorting, scattering, reduction and scan op on
 * every dtype, on the backend under test against ref.
 *
 * The kernels of these ops are generated per dtype (a sort's comparisons, a
 * scatter-add's wrapping sum, a pad's fill, a 16-bit load and store), and
 * their conformance tests pick a few dtypes each: a u8 scatter-add once
 * generated C that did not compile (`uuint8_t`). Here each op of the list
 * runs on f32, f64, i32, i64, bool, bf16, f16, u8 and i8, alone and fused
 * (its input a where of the input and a roll of it, its output read through
 * a flip), on plain data and on data with NaN, infinities, -0 and huge values
 * (floats) or the extremes of the integer range. An op that a dtype does not
 * have is an error when it is built, the same on both backends (skipped);
 * whatever builds must run on both and give the same values (exact for
 * integers and bool, the dtype's tolerance for floats). The test also
 * requires each op to build on the dtypes it is documented for, so that a
 * builder that wrongly rejects a dtype cannot pass by being skipped. */
#include "backend_compare.h"

#define R 4
#define C 6
static const int64_t kShape[2] = {R, C};

static kiln_tensor idx(int rank, const int64_t *shape, const int64_t *v) {
  return kiln_from_host(v, KILN_I64, rank, shape);
}
static kiln_tensor sl(kiln_tensor x, int axis, int64_t a, int64_t b) { return kiln_slice(x, axis, a, b, 1); }
static kiln_tensor flip1(kiln_tensor x) { return kiln_flip(x, 1, ((int[]){-1})); }

static kiln_tensor o_sort_v(kiln_tensor x) {
  kiln_tensor v;
  kiln_sort(x, 1, false, &v, NULL);
  return v;
}
static kiln_tensor o_sort_desc0(kiln_tensor x) {
  kiln_tensor v;
  kiln_sort(x, 0, true, &v, NULL);
  return v;
}
static kiln_tensor o_argsort(kiln_tensor x) { return kiln_argsort(x, 1, true); }
static kiln_tensor o_topk_v(kiln_tensor x) {
  kiln_tensor v;
  kiln_topk(x, 3, 1, true, &v, NULL);
  return v;
}
static kiln_tensor o_topk_i(kiln_tensor x) {
  kiln_tensor i;
  kiln_topk(x, 2, 0, false, NULL, &i);
  return i;
}
static const int64_t kI43[12] = {5, 0, 5, 1, 1, 1, 2, 3, 2, 4, 0, 4}, kI26[12] = {3, 0, 3, 1, 2, 3, 0, 0, 1, 1, 3, 3};
static kiln_tensor o_scatter(kiln_tensor x) {
  return kiln_scatter(x, 1, idx(2, (int64_t[]){4, 3}, kI43), flip1(sl(x, 1, 0, 3)));
}
static kiln_tensor o_scatter_add(kiln_tensor x) {
  return kiln_scatter_add(x, 0, idx(2, (int64_t[]){2, 6}, kI26), sl(x, 0, 1, 3));
}
static kiln_tensor o_index_add(kiln_tensor x) {
  return kiln_index_add(x, 1, idx(1, (int64_t[]){3}, (int64_t[]){5, 0, 5}), sl(x, 1, 0, 3));
}
static kiln_tensor o_index_put_acc(kiln_tensor x) {
  return kiln_index_put(x, idx(1, (int64_t[]){3}, (int64_t[]){2, 0, 2}), sl(x, 0, 0, 3), true);
}
static kiln_tensor o_index_put_bcast(kiln_tensor x) {
  kiln_tensor row = kiln_reshape(sl(x, 0, 1, 2), 1, (int64_t[]){C});
  return kiln_index_put(x, idx(1, (int64_t[]){3}, (int64_t[]){3, 1, 3}), row, false);
}
static kiln_tensor o_gather(kiln_tensor x) { return kiln_gather(x, 1, idx(2, (int64_t[]){4, 3}, kI43)); }
static kiln_tensor o_index_select(kiln_tensor x) {
  return kiln_index_select(x, 0, idx(1, (int64_t[]){5}, (int64_t[]){3, 0, 3, 1, 2}));
}
static kiln_tensor o_cumsum(kiln_tensor x) { return kiln_cumsum(x, 1); }
static kiln_tensor o_cumprod(kiln_tensor x) { return kiln_cumprod(x, 0); }
static kiln_tensor o_prod(kiln_tensor x) { return kiln_prod(x, 1, ((int[]){1}), false); }
static kiln_tensor o_sum(kiln_tensor x) { return kiln_sum(x, 0, NULL, false); }
static kiln_tensor o_sum0(kiln_tensor x) { return kiln_sum(x, 1, ((int[]){0}), true); }
static kiln_tensor o_max(kiln_tensor x) { return kiln_max(x, 1, ((int[]){0}), true); }
static kiln_tensor o_min(kiln_tensor x) { return kiln_min(x, 1, ((int[]){1}), false); }
static kiln_tensor o_mean(kiln_tensor x) { return kiln_mean(x, 1, ((int[]){1}), false); }
static kiln_tensor o_argmax(kiln_tensor x) { return kiln_argmax(x, 1, false); }
static kiln_tensor o_argmin(kiln_tensor x) { return kiln_argmin(x, 0, true); }
static kiln_tensor o_concat(kiln_tensor x) { return kiln_concat(2, ((kiln_tensor[]){x, flip1(x)}), 0); }
static kiln_tensor o_stack(kiln_tensor x) { return kiln_stack(2, ((kiln_tensor[]){x, flip1(x)}), 1); }
static kiln_tensor o_pad(kiln_tensor x) { return kiln_pad(x, ((int64_t[]){1, 0}), ((int64_t[]){0, 2}), 1.0); }
static kiln_tensor o_reflect(kiln_tensor x) {
  return kiln_pad_with(x, ((int64_t[]){1, 2}), ((int64_t[]){2, 1}), KILN_PAD_REFLECT, 0);
}
static kiln_tensor o_replicate(kiln_tensor x) {
  return kiln_pad_with(x, ((int64_t[]){2, 0}), ((int64_t[]){1, 3}), KILN_PAD_REPLICATE, 0);
}
static kiln_tensor o_flip(kiln_tensor x) { return kiln_flip(x, 2, ((int[]){0, 1})); }
static kiln_tensor o_roll(kiln_tensor x) { return kiln_roll(x, 4, 1); }
static kiln_tensor o_tril(kiln_tensor x) { return kiln_tril(x, 1); }
static kiln_tensor o_triu(kiln_tensor x) { return kiln_triu(x, -1); }
static const uint8_t kMask[R * C] = {1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1};
static kiln_tensor mask(void) { return kiln_from_host(kMask, KILN_BOOL, 2, kShape); }
static kiln_tensor o_where(kiln_tensor x) { return kiln_where(mask(), flip1(x), x); }
static kiln_tensor o_matmul(kiln_tensor x) { return kiln_matmul(x, kiln_transpose(x, 0, 1)); }
static kiln_tensor o_maximum(kiln_tensor x) { return kiln_maximum(x, flip1(x)); }
static kiln_tensor o_clamp(kiln_tensor x) { return kiln_clamp(x, 0, 100); }
static kiln_tensor o_softmax(kiln_tensor x) { return kiln_softmax(x, 1); }
static kiln_tensor o_log_softmax(kiln_tensor x) { return kiln_log_softmax(x, 0); }
static kiln_tensor o_view(kiln_tensor x) { return kiln_reshape(kiln_transpose(x, 0, 1), 2, ((int64_t[]){3, 8})); }
static kiln_tensor o_slice_step(kiln_tensor x) { return kiln_slice(x, 1, 1, C, 2); }
static kiln_tensor o_expand(kiln_tensor x) {
  return kiln_expand(kiln_reshape(x, 3, ((int64_t[]){R, 1, C})), 3, ((int64_t[]){R, 3, C}));
}
#define CAST(d) \
  static kiln_tensor o_cast_##d(kiln_tensor x) { return kiln_cast(x, KILN_##d); }
CAST(F32)
CAST(F64)
CAST(I32)
CAST(I64)
CAST(BOOL)
CAST(BF16)
CAST(F16)
CAST(U8)
CAST(I8)

/* The dtypes each op is documented for (docs/semantics.md): it must build on
 * these; others may be errors. */
#define ALL 0x1ff
#define NOBOOL (ALL & ~(1 << KILN_BOOL))
#define FLOATS ((1 << KILN_F32) | (1 << KILN_F64) | (1 << KILN_BF16) | (1 << KILN_F16))
static const struct {
  const char *name;
  kiln_tensor (*fn)(kiln_tensor);
  unsigned must; /* bit d: must build on dtype d */
} k_ops[] = {
    {"sort", o_sort_v, ALL},          {"sort_desc0", o_sort_desc0, ALL}, {"argsort", o_argsort, ALL},
    {"topk_values", o_topk_v, ALL},   {"topk_indices", o_topk_i, ALL},   {"scatter", o_scatter, ALL},
    {"scatter_add", o_scatter_add, NOBOOL}, {"index_add", o_index_add, NOBOOL},
    {"index_put_acc", o_index_put_acc, NOBOOL},
    {"index_put_bcast", o_index_put_bcast, ALL}, {"gather", o_gather, ALL}, {"index_select", o_index_select, ALL},
    {"cumsum", o_cumsum, ALL},        {"cumprod", o_cumprod, ALL},       {"prod", o_prod, ALL},
    {"sum", o_sum, ALL},              {"sum_axis0", o_sum0, ALL},        {"max", o_max, NOBOOL},
    {"min", o_min, NOBOOL},           {"mean", o_mean, FLOATS},          {"argmax", o_argmax, NOBOOL},
    {"argmin", o_argmin, NOBOOL},     {"concat", o_concat, ALL},         {"stack", o_stack, ALL},
    {"pad", o_pad, ALL},              {"pad_reflect", o_reflect, ALL},   {"pad_replicate", o_replicate, ALL},
    {"flip", o_flip, ALL},            {"roll", o_roll, ALL},             {"tril", o_tril, ALL},
    {"triu", o_triu, ALL},            {"where", o_where, ALL},           {"matmul", o_matmul, NOBOOL},
    {"maximum", o_maximum, NOBOOL},   {"clamp", o_clamp, NOBOOL},        {"softmax", o_softmax, FLOATS},
    {"log_softmax", o_log_softmax, FLOATS}, {"view", o_view, ALL},     {"slice_step", o_slice_step, ALL},
    {"expand", o_expand, ALL},        {"cast_f32", o_cast_F32, ALL},     {"cast_f64", o_cast_F64, ALL},
    {"cast_i32", o_cast_I32, ALL},    {"cast_i64", o_cast_I64, ALL},     {"cast_bool", o_cast_BOOL, ALL},
    {"cast_bf16", o_cast_BF16, ALL},  {"cast_f16", o_cast_F16, ALL},     {"cast_u8", o_cast_U8, ALL},
    {"cast_i8", o_cast_I8, ALL},
};
#define N_OPS ((int)(sizeof k_ops / sizeof k_ops[0]))

typedef struct mcase {
  kiln_dtype dt;
  int fused, kind, dyn, only; /* dyn: rows marked dynamic; only: one op's index, or -1 for every op */
  int variant;
} mcase;

#define N_VARIANTS 6
static unsigned g_built[N_VARIANTS][N_OPS]; /* bit d: the op built on dtype d in that variant */

/* Integer data with the range's extremes (bc_host_data's kind 2 adds
 * specials to floats only); i64's top is 2^62, as kiln_full takes a double
 * (2^63 - 1 is none). */
static kiln_tensor input(kiln_dtype dt, int kind, int dyn) {
  kiln_tensor x = bc_input(dt, 2, kShape, 0x5eed + (uint64_t)dt, kind);
  if (dyn) kiln_dynamic(x, 0);
  if (kind != 2 || bc_is_float(dt) || dt == KILN_BOOL) return x;
  static const double lim[][2] = {[KILN_I32] = {-2147483648.0, 2147483647.0},
                                  [KILN_I64] = {-9223372036854775808.0, 4611686018427387904.0},
                                  [KILN_U8] = {0, 255},
                                  [KILN_I8] = {-128, 127}};
  kiln_tensor lo = kiln_full(dt, 2, kShape, lim[dt][0]), hi = kiln_full(dt, 2, kShape, lim[dt][1]);
  kiln_tensor m2 = kiln_eq_c(kiln_remainder_c(kiln_arange(KILN_I32, 0, R * C, 1), 5), 1);
  kiln_tensor m3 = kiln_eq_c(kiln_remainder_c(kiln_arange(KILN_I32, 0, R * C, 1), 7), 3);
  m2 = kiln_reshape(m2, 2, kShape);
  m3 = kiln_reshape(m3, 2, kShape);
  return kiln_where(m2, hi, kiln_where(m3, lo, x));
}

static void prog(bc_result *r, const void *arg) {
  const mcase *c = arg;
  for (int k = 0; k < N_OPS; k++) {
    if (c->only >= 0 && k != c->only) continue;
    kiln_tensor x = input(c->dt, c->kind, c->dyn);
    if (c->fused) x = kiln_where(kiln_logical_not(mask()), x, kiln_roll(x, 1, 1));
    kiln_tensor y = k_ops[k].fn(x);
    if (kiln_last_status() != KILN_OK || !kiln_is_valid(y)) {
      kiln_clear_error();
      continue;
    }
    g_built[c->variant][k] |= 1u << c->dt;
    if (c->fused && kiln_rank(y) >= 1) y = kiln_flip(y, 1, ((int[]){0}));
    bc_emit(r, y, 0, 0, "%s", k_ops[k].name);
  }
}

KT_TEST(every_op_on_every_dtype_matches_ref) {
  static const kiln_dtype dts[] = {KILN_F32, KILN_F64, KILN_I32, KILN_I64, KILN_BOOL,
                                   KILN_BF16, KILN_F16, KILN_U8, KILN_I8};
  /* (fused, data kind, rows dynamic): alone and fused, plain data and specials, and the family kernels
   * of a dynamic row count (docs/dynamic-shapes.md) */
  static const int variants[N_VARIANTS][3] = {{0, 0, 0}, {1, 0, 0}, {0, 2, 0}, {1, 2, 0}, {0, 0, 1}, {1, 2, 1}};
  const int n_var = N_VARIANTS, n_dt = (int)(sizeof dts / sizeof dts[0]);
  int graphs = 0;
  for (int d = 0; d < n_dt; d++)
    for (int v = 0; v < n_var; v++) {
      mcase c = {dts[d], variants[v][0], variants[v][1], variants[v][2], -1, v};
      char what[96];
      snprintf(what, sizeof what, "%s %s%s%s", kiln_dtype_name(dts[d]), c.fused ? "fused" : "alone",
               c.kind ? " with specials" : "", c.dyn ? " dynamic rows" : "");
      if (bc_check(what, prog, &c, NULL) == 0) {
        graphs++;
        continue;
      }
      for (int k = 0; k < N_OPS; k++) { /* name the op(s) */
        mcase one = c;
        one.only = k;
        char w1[160];
        snprintf(w1, sizeof w1, "%s: %s alone in its graph", what, k_ops[k].name);
        bc_check(w1, prog, &one, NULL);
      }
    }
  KT_CHECK_MSG(graphs == n_dt * n_var, "%d of %d graphs matched", graphs, n_dt * n_var);
  for (int v = 0; v < n_var; v++)
    for (int k = 0; k < N_OPS; k++)
      KT_CHECK_MSG((g_built[v][k] & k_ops[k].must) == k_ops[k].must,
                   "%s (variant %d) builds on dtypes 0x%x, must on 0x%x", k_ops[k].name, v, g_built[v][k],
                   k_ops[k].must);
}

KT_MAIN(KT_CASE(every_op_on_every_dtype_matches_ref))
