/* Dynamic shapes at edge sizes (docs/dynamic-shapes.md): programs whose
 * input dimensions are marked dynamic, traced at one size (the family's
 * compile) and then at sizes 0, 1, 2, 3, primes, powers of two +-1, around
 * the vector widths (8, 16) and the row cache (4096), and sizes above every
 * size seen before, small first and large first, in one session; each size's
 * values against the "ref" backend (the oracle: every size specialised).
 * Ops whose sizes follow a symbol arithmetically: concats of two dynamic
 * inputs, pads and slices by constants, reshapes merging and splitting a
 * dynamic dim, expand, matmul contracting a dynamic K, reductions (a mean's
 * 1/n at run time), argmax, softmax and a layer norm over a dynamic row,
 * cumsum and sort, index_select of a dynamic count, conv and pool over a
 * dynamic spatial size, and the gradient of a mean (1/n backwards). */
#include "backend/backend_compare.h"
#include "codegen/codegen.h" /* kiln_cg_sym_lt_always */
#include "kiln/autograd.h"
#include "kiln/nn.h"

typedef struct ecase {
  int probe; /* the step after the last: reads the counters, traces nothing */
  int which;
  int64_t T, U;
} ecase;

/* [rows, cols] f32, dims in `marks` (bit per axis) marked dynamic. */
static kiln_tensor din(int64_t rows, int64_t cols, unsigned marks, uint64_t seed) {
  int64_t sh[2] = {rows, cols};
  kiln_tensor t = bc_input(KILN_F32, 2, sh, seed, 0);
  for (int a = 0; a < 2; a++)
    if (marks & (1u << a)) t = kiln_dynamic(t, a);
  return t;
}

/* Reductions over a dynamic axis: the columns' (axis 0 of [T, 5]) and the
 * rows' (axis 1 of [3, T]: a row of T elements, T up to past the row cache). */
static void prog_reduce(bc_result *r, int64_t T) {
  kiln_tensor x = din(T, 5, 1, 51), y = din(3, T, 2, 52);
  int a0[1] = {0}, a1[1] = {1};
  bc_emit(r, kiln_sum(x, 1, a0, 0), 1e-5, 1e-5, "sum over T");
  bc_emit(r, kiln_mean(x, 1, a0, 1), 1e-5, 1e-6, "mean over T");
  bc_emit(r, kiln_sum(y, 1, a1, 0), 1e-5, 1e-4, "row sum");
  bc_emit(r, kiln_mean(y, 1, a1, 1), 1e-5, 1e-6, "row mean");
  bc_emit(r, kiln_mean(kiln_mul(y, y), 0, NULL, 0), 1e-5, 1e-6, "mean of all 3T");
  if (T > 0) {
    bc_emit(r, kiln_max(x, 1, a0, 0), 0, 0, "max over T");
    bc_emit(r, kiln_max(y, 1, a1, 1), 0, 0, "row max");
    bc_emit(r, kiln_argmax(x, 0, 0), 0, 0, "argmax over T");
    bc_emit(r, kiln_argmax(y, 1, 1), 0, 0, "row argmax");
    bc_emit(r, kiln_argmin(y, 1, 0), 0, 0, "row argmin");
    bc_emit(r, kiln_softmax(y, 1), 1e-5, 1e-7, "row softmax"); /* an error over an empty axis */
    bc_emit(r, kiln_log_softmax(x, 0), 1e-5, 1e-6, "log_softmax over T");
  }
  kiln_tensor m = kiln_mean(y, 1, a1, 1), d = kiln_sub(y, m);
  kiln_tensor var = kiln_mean(kiln_mul(d, d), 1, a1, 1);
  bc_emit(r, kiln_div(d, kiln_sqrt(kiln_add_c(var, 1e-5))), 1e-4, 1e-5, "layer norm of a row");
  bc_emit(r, kiln_cumsum(y, 1), 1e-5, 1e-4, "row cumsum");
  bc_emit(r, kiln_cumsum(x, 0), 1e-5, 1e-5, "cumsum over T");
  kiln_tensor sv;
  kiln_sort(y, 1, 0, &sv, NULL);
  bc_emit(r, sv, 0, 0, "row sort");
  bc_emit(r, kiln_argsort(x, 0, 1), 0, 0, "argsort over T");
}

/* Shapes that follow T arithmetically. */
static void prog_shapes(bc_result *r, int64_t T) {
  kiln_tensor x = din(T, 4, 1, 61), x2 = din(T, 4, 1, 62);
  kiln_tensor two[2] = {kiln_tanh(x), kiln_mul_c(x2, 2.0)};
  bc_emit(r, kiln_concat(2, two, 0), 0, 0, "concat of two [T, 4]");
  bc_emit(r, kiln_concat(2, two, 1), 0, 0, "concat across of two [T, 4]");
  int64_t lo[2] = {2, 0}, hi[2] = {3, 1};
  bc_emit(r, kiln_pad(x, lo, hi, 0.5), 0, 0, "pad T by 2, 3");
  kiln_tensor pd = kiln_pad(kiln_exp(x), lo, hi, -1.0);
  bc_emit(r, kiln_slice(pd, 0, 1, T + 4, 1), 1e-6, 1e-6, "rows 1..T+3 of padded");
  bc_emit(r, kiln_slice(pd, 0, 0, 5, 1), 1e-6, 1e-6, "rows 0..4 of padded");
  int64_t m1[1] = {4 * T}, m2[3] = {T, 2, 2};
  kiln_tensor fl = kiln_reshape(kiln_add_c(x, 1.0), 1, m1);
  bc_emit(r, fl, 0, 0, "flatten [T, 4]");
  bc_emit(r, kiln_reshape(kiln_mul_c(fl, 3.0), 3, m2), 0, 0, "split back [T, 2, 2]");
  bc_emit(r, kiln_slice(kiln_neg(fl), 0, 0, 6, 1), 0, 0, "the first 6 of the flatten");
  int64_t us[3] = {1, T, 4}, es[3] = {3, T, 4};
  bc_emit(r, kiln_expand(kiln_reshape(kiln_abs(x), 3, us), 3, es), 0, 0, "expand [1, T, 4] to [3, T, 4]");
  kiln_tensor a = din(3, T, 2, 63);
  bc_emit(r, kiln_matmul(a, x), 1e-4, 1e-4, "[3, T] @ [T, 4] (K = T)");
  bc_emit(r, kiln_matmul(x, kiln_transpose(x2, 0, 1)), 1e-4, 1e-4, "[T, 4] @ [4, T]");
  int64_t is[1] = {T};
  int64_t *idx = malloc((size_t)(T > 0 ? T : 1) * sizeof *idx);
  for (int64_t i = 0; i < T; i++) idx[i] = (i * 7 + 3) % (T > 0 ? T : 1);
  kiln_tensor ix = kiln_dynamic(kiln_from_host(idx, KILN_I64, 1, is), 0);
  free(idx);
  bc_emit(r, kiln_index_select(x, 0, ix), 0, 0, "index_select T rows by T indices");
  int64_t ws[2] = {3, 4};
  kiln_tensor w = bc_input(KILN_F32, 2, ws, 64, 0);
  int64_t i3[1] = {T};
  int64_t *id3 = malloc((size_t)(T > 0 ? T : 1) * sizeof *id3);
  for (int64_t i = 0; i < T; i++) id3[i] = (i * 5 + 1) % 3;
  kiln_tensor ix3 = kiln_dynamic(kiln_from_host(id3, KILN_I64, 1, i3), 0);
  free(id3);
  bc_emit(r, kiln_index_select(w, 0, ix3), 0, 0, "index_select of a [3, 4] by T indices");
}

/* conv and pool over a dynamic spatial size: [1, 2, T, 7]. */
static void prog_conv(bc_result *r, int64_t T) {
  int64_t xs[4] = {1, 2, T, 7}, ws[4] = {3, 2, 3, 3}, bs[1] = {3};
  kiln_tensor x = kiln_dynamic(bc_input(KILN_F32, 4, xs, 71, 0), 2);
  kiln_tensor w = bc_input(KILN_F32, 4, ws, 72, 0), b = bc_input(KILN_F32, 1, bs, 73, 0);
  if (T >= 3) bc_emit(r, kiln_conv2d_apply(x, w, b, 1, 0, 1, 1), 1e-4, 1e-4, "conv 3x3");
  if (T >= 1) bc_emit(r, kiln_conv2d_apply(x, w, b, 1, 1, 1, 1), 1e-4, 1e-4, "conv 3x3 pad 1");
  if (T >= 2) {
    bc_emit(r, kiln_max_pool2d(x, 2, 2, 0), 0, 0, "max pool 2");
    bc_emit(r, kiln_avg_pool2d(x, 2, 2, 0), 1e-5, 1e-6, "avg pool 2");
  }
}

/* The gradient of a mean over a dynamic axis: 1/n with the run-time n. */
static void prog_grad(bc_result *r, int64_t T) {
  kiln_tensor x = din(T, 3, 1, 81);
  kiln_requires_grad(x);
  kiln_tensor t = kiln_tanh(x);
  int a0[1] = {0};
  kiln_tensor loss = kiln_add(kiln_mean(kiln_mul(t, t), 0, NULL, 0),
                              kiln_sum(kiln_mean(t, 1, a0, 0), 0, NULL, 0));
  kiln_backward(loss);
  bc_emit(r, loss, 1e-5, 1e-6, "loss");
  bc_emit(r, kiln_grad(x), 1e-5, 1e-7, "d loss / dx");
}

/* Two symbols varying independently: [T, 3] and [U, 3] concatenated, and
 * a [T, U] matrix's row and column means. */
static void prog_two(bc_result *r, int64_t T, int64_t U) {
  kiln_tensor x = din(T, 3, 1, 91), y = din(U, 3, 1, 92), z = din(T, U, 3, 93);
  kiln_tensor two[2] = {kiln_exp(x), kiln_neg(y)};
  int a0[1] = {0}, a1[1] = {1};
  kiln_tensor c = kiln_concat(2, two, 0);
  bc_emit(r, c, 1e-6, 1e-6, "concat [T + U, 3]");
  bc_emit(r, kiln_mean(c, 1, a0, 0), 1e-5, 1e-6, "its mean over T + U");
  bc_emit(r, kiln_mean(z, 1, a0, 0), 1e-5, 1e-6, "[T, U] mean over T");
  bc_emit(r, kiln_mean(z, 1, a1, 0), 1e-5, 1e-6, "[T, U] mean over U");
  bc_emit(r, kiln_softmax(z, 1), 1e-5, 1e-7, "[T, U] softmax over U");
  bc_emit(r, kiln_matmul(z, y), 1e-4, 1e-4, "[T, U] @ [U, 3]");
}

/* A program's own constants that equal a size's 1/n, 2/n or n - 1 where the
 * family is made (T = 8: 0.125, 0.25, 7; 5T = 40: 0.025), beside a mean over
 * T that holds the real 1/T: at other sizes they stay what they are. */
static void prog_lookalike(bc_result *r, int64_t T) {
  kiln_tensor x = din(T, 5, 1, 101);
  int a0[1] = {0};
  bc_emit(r, kiln_add(kiln_mul_c(x, 0.125), kiln_mean(x, 1, a0, 1)), 1e-5, 1e-6, "x/8 + mean over T");
  bc_emit(r, kiln_add_c(kiln_mul_c(kiln_mean(x, 0, NULL, 0), 0.025), 0.25), 1e-5, 1e-6, "mean/40 + 1/4");
  bc_emit(r, kiln_add_c(kiln_mul_c(x, 7.0), 2.0), 1e-5, 1e-6, "7 x + 2");
  int64_t is[1] = {3};
  int64_t idx[3] = {7, 0, 6};
  kiln_tensor ix = kiln_from_host(idx, KILN_I64, 1, is);
  if (T >= 8) bc_emit(r, kiln_index_select(x, 0, ix), 0, 0, "rows 7, 0, 6");
  kiln_tensor sq = kiln_mul(x, x);
  kiln_tensor loss = kiln_mean(sq, 0, NULL, 0);
  bc_emit(r, kiln_mul_c(loss, 0.05), 1e-5, 1e-7, "mean square / 20");
}

/* Along T: rolls by shifts above small sizes (the shift mod T changes),
 * strided slices (ceil(T / 2) rows), topk of a constant k, triangles with
 * offsets beyond small sizes, scatter_add and gather of T indices, batch
 * norm statistics over a dynamic H. */
static void prog_misc(bc_result *r, int64_t T, int64_t part) {
  kiln_tensor x = din(T, 5, 1, 111);
  kiln_tensor v;
  int64_t is[2] = {T, 5}, zs[2] = {4, 5}, bs[4] = {2, 3, T, 4};
  int64_t *idx;
  kiln_tensor ix, sq = kiln_matmul(x, kiln_transpose(x, 0, 1));
  int red[3] = {0, 2, 3};
  switch (part) {
  case 0:
    if (T >= 2) bc_emit(r, kiln_roll(x, 7, 0), 0, 0, "roll T by 7");
    break;
  case 1:
    if (T >= 2) bc_emit(r, kiln_roll(x, -3, 0), 0, 0, "roll T by -3");
    break;
  case 2: bc_emit(r, kiln_slice(x, 0, 0, T, 2), 0, 0, "x[::2]"); break;
  case 3: bc_emit(r, kiln_slice(x, 0, 1, T, 3), 0, 0, "x[1::3]"); break;
  case 4:
    if (T < 3) break;
    kiln_topk(x, 3, 0, 1, &v, NULL);
    bc_emit(r, v, 0, 0, "top 3 over T");
    break;
  case 5:
    bc_emit(r, kiln_tril(sq, 4), 1e-4, 1e-4, "tril +4 of T x T");
    bc_emit(r, kiln_triu(sq, -3), 1e-4, 1e-4, "triu -3 of T x T");
    break;
  case 6:
  case 7:
    idx = malloc((size_t)(T > 0 ? 5 * T : 1) * sizeof *idx);
    for (int64_t i = 0; i < 5 * T; i++) idx[i] = (i * 3 + 1) % 4;
    ix = kiln_dynamic(kiln_from_host(idx, KILN_I64, 2, is), 0);
    free(idx);
    if (part == 6)
      bc_emit(r, kiln_scatter_add(kiln_zeros(KILN_F32, 2, zs), 0, ix, x), 1e-5, 1e-5, "scatter_add T rows");
    else bc_emit(r, kiln_gather(bc_input(KILN_F32, 2, zs, 112, 0), 0, ix), 0, 0, "gather T rows of 4");
    break;
  default: {
    kiln_tensor b = kiln_dynamic(bc_input(KILN_F32, 4, bs, 113, 0), 2);
    kiln_tensor m = kiln_mean(b, 3, red, 1), d = kiln_sub(b, m);
    bc_emit(r, kiln_mean(kiln_mul(d, d), 3, red, 0), 1e-5, 1e-6, "batch norm variance over N, H, W");
  }
  }
}

/* Two symbols whose order where the family is made (U < T) changes later:
 * the first U elements of x^T flattened ([U, T] -> [U T]) are x[i % T,
 * i / T], not x[i, 0] (i < U < T holds at the family's sizes only; before,
 * T = 3, U = 29 read rows past x's 3). */
static void prog_order(bc_result *r, int64_t T, int64_t U, int marked) {
  kiln_tensor x = din(T, U, marked ? 3 : 0, 121);
  int64_t ys[1] = {U}, fl[1] = {U * T};
  kiln_tensor y = bc_input(KILN_F32, 1, ys, 122, 0);
  if (marked) y = kiln_dynamic(y, 0);
  kiln_tensor f = kiln_reshape(kiln_transpose(kiln_mul_c(x, 2.0), 0, 1), 1, fl);
  bc_emit(r, kiln_exp(kiln_add(kiln_slice(f, 0, 0, U, 1), y)), 1e-6, 1e-6, "exp(the first U of x^T flattened + y)");
}

/* The first U rows of a concat of T rows and U rows (inside the first part
 * where U < T, across both where U > T), plus z [U, 5]; and the rows T - 1 ..
 * T + U - 2 (across both parts at any order). */
static void prog_concat_slices(bc_result *r, int64_t T, int64_t U) {
  kiln_tensor x = din(T, 5, 1, 131), y = din(U, 5, 1, 132), z = din(U, 5, 1, 133);
  kiln_tensor parts[2] = {kiln_tanh(x), kiln_exp(y)};
  kiln_tensor cat = kiln_concat(2, parts, 0);
  bc_emit(r, kiln_add(kiln_slice(cat, 0, 0, U, 1), z), 1e-6, 1e-6, "the first U rows of [T + U] plus z");
  bc_emit(r, kiln_mul(kiln_slice(cat, 0, T - 1, T + U - 1, 1), z), 1e-6, 1e-6, "rows T - 1 .. T + U - 2, times z");
  kiln_tensor two[2] = {z, kiln_neg(z)};
  kiln_tensor c2 = kiln_concat(2, two, 0); /* [2U, 5] */
  bc_emit(r, kiln_add(kiln_slice(c2, 0, 0, U, 1), y), 0, 0, "the first U rows of [2U] plus y");
}

/* The gradients of means over T + U rows and over a [T, U] matrix. */
static void prog_grad_two(bc_result *r, int64_t T, int64_t U) {
  kiln_tensor x = din(T, 3, 1, 141), y = din(U, 3, 1, 142), z = din(T, U, 3, 143);
  kiln_requires_grad(x);
  kiln_requires_grad(y);
  kiln_requires_grad(z);
  kiln_tensor parts[2] = {kiln_tanh(x), kiln_mul(y, y)};
  kiln_tensor c = kiln_concat(2, parts, 0);
  int a0[1] = {0};
  kiln_tensor loss = kiln_add(kiln_sum(kiln_mean(kiln_mul(c, c), 1, a0, 0), 0, NULL, 0),
                              kiln_mean(kiln_exp(kiln_mul_c(z, 0.5)), 0, NULL, 0));
  kiln_backward(loss);
  bc_emit(r, loss, 1e-5, 1e-6, "loss");
  bc_emit(r, kiln_grad(x), 1e-5, 1e-7, "dx");
  bc_emit(r, kiln_grad(y), 1e-5, 1e-7, "dy");
  bc_emit(r, kiln_grad(z), 1e-5, 1e-8, "dz");
}

/* Three symbols (V = the third, passed as T + U + 1 scrambled): z [T, U] @ w
 * [U, V], its transpose flattened and the first V of it plus y [V]; a mean
 * over all of z @ w. */
static void prog_three(bc_result *r, int64_t T, int64_t U) {
  int64_t V = (T * 7 + U * 3) % 23 + 2;
  kiln_tensor z = din(T, U, 3, 161), w = din(U, V, 3, 162);
  int64_t ys[1] = {V}, fl[1] = {T * V};
  kiln_tensor y = kiln_dynamic(bc_input(KILN_F32, 1, ys, 163, 0), 0);
  kiln_tensor p = kiln_matmul(z, w);
  kiln_tensor f = kiln_reshape(kiln_transpose(kiln_tanh(p), 0, 1), 1, fl);
  /* p sums U products of values in [-2, 2] in f32 (ref sums in double): at
   * U = 4099 an element is the cancellation of terms whose partial sums reach
   * ~60, so its error is about eps_f32 * sqrt(U) * 60 ~ 2e-4 whatever the
   * result's size. Measured against an f64 matmul: the AVX2 sgemm (a host
   * without AVX-512) is off by up to 1.2e-4 (2.5e-5 at the element this
   * compared against 1e-5, which held by the luck of the AVX-512 kernel's
   * order); ref by 1.4e-5. tanh' <= 1 passes it on. */
  double tol = 1e-5 + 1e-7 * (double)U;
  bc_emit(r, kiln_add(kiln_slice(f, 0, 0, V, 1), y), 1e-5, tol, "the first V of (z w)^T flattened, plus y");
  bc_emit(r, kiln_mean(p, 0, NULL, 0), 1e-4, 1e-5, "mean of z w");
}

static int64_t g_compiles, g_plans;

static void prog(bc_result *r, const void *arg) {
  const ecase *c = arg;
  if (c->probe) {
    g_compiles = kiln_counter_value("UncachedCompile");
    g_plans = kiln_counter_value("DynamicPlan");
    return;
  }
  switch (c->which) {
  case 0: prog_reduce(r, c->T); break;
  case 1: prog_shapes(r, c->T); break;
  case 2: prog_conv(r, c->T); break;
  case 3: prog_grad(r, c->T); break;
  case 5: prog_lookalike(r, c->T); break;
  case 6: prog_misc(r, c->T, c->U); break;
  case 7: prog_order(r, c->T, c->U, 1); break;
  case 11: prog_three(r, c->T, c->U); break;
  case 10: prog_order(r, c->T, c->U, 0); break; /* the automatic rule: dynamic from the second size */
  case 8: prog_concat_slices(r, c->T, c->U); break;
  case 9: prog_grad_two(r, c->T, c->U); break;
  default: prog_two(r, c->T, c->U); break;
  }
}

enum { MAX_SIZES = 32 };

/* Program `which` at the sizes given, in order, in one session on ref and
 * on the backend under test; each size against ref. */
static void check_sizes(int which, const char *what, const int64_t *T, const int64_t *U, int n) {
  static bc_result ref[MAX_SIZES + 1], got[MAX_SIZES + 1];
  ecase cs[MAX_SIZES + 1];
  const void *args[MAX_SIZES + 1];
  for (int k = 0; k <= n; k++) {
    cs[k] = k < n ? (ecase){0, which, T[k], U ? U[k] : 0} : (ecase){1, which, 0, 0};
    args[k] = &cs[k];
  }
  KT_CHECK(bc_run_oracle_steps(prog, args, n + 1, ref) == 0);
  kiln_metrics_clear();
  KT_CHECK_MSG(bc_run_steps(bc_backend_under_test(), prog, args, n + 1, got) == 0, "%s: %s", what, got[0].err);
  if (getenv("KT_VERBOSE"))
    fprintf(stderr, "%s: %lld compiles, %lld sizes planned\n", what, (long long)g_compiles, (long long)g_plans);
  for (int k = 0; k < n; k++) {
    char name[96];
    snprintf(name, sizeof name, "%s at T = %lld, U = %lld (step %d)", what, (long long)T[k],
             (long long)(U ? U[k] : 0), k);
    if (got[k].status != KILN_OK) KT_FAIL("%s: %s", name, got[k].err);
    else KT_EQ_INT(bc_compare(name, &ref[k], &got[k]), 0);
  }
  for (int k = 0; k <= n; k++) {
    bc_result_free(&ref[k]);
    bc_result_free(&got[k]);
  }
}

static const int64_t k_small_first[] = {37, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 1, 0, 4095, 4096, 4097, 5003};
static const int64_t k_large_first[] = {4099, 2, 3, 7, 8, 9, 16, 17, 0, 1, 63, 65, 4097, 6007};
static const int64_t k_from_two[] = {2, 3, 17, 1, 8, 4097, 5, 16};
#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

KT_TEST(reductions_small_first) { check_sizes(0, "reduce", k_small_first, NULL, N_OF(k_small_first)); }
KT_TEST(reductions_large_first) { check_sizes(0, "reduce", k_large_first, NULL, N_OF(k_large_first)); }
KT_TEST(reductions_from_two) { check_sizes(0, "reduce", k_from_two, NULL, N_OF(k_from_two)); }
/* sizes that recur: a planned size's hits bind to the family, and from the
 * 4th keep a graph of their own (KILN_FAMILY_KEEP_HITS) */
static const int64_t k_recur[] = {37, 5, 9, 5, 9, 5, 9, 5, 9, 5, 37, 5, 2, 9, 2, 2, 2, 2, 9};
KT_TEST(reductions_at_recurring_sizes) { check_sizes(0, "reduce", k_recur, NULL, N_OF(k_recur)); }
KT_TEST(shapes_at_recurring_sizes) { check_sizes(1, "shapes", k_recur, NULL, N_OF(k_recur)); }
KT_TEST(lookalike_at_recurring_sizes) { check_sizes(5, "lookalike", k_recur, NULL, N_OF(k_recur)); }
KT_TEST(shapes_small_first) { check_sizes(1, "shapes", k_small_first, NULL, N_OF(k_small_first)); }
KT_TEST(shapes_large_first) { check_sizes(1, "shapes", k_large_first, NULL, N_OF(k_large_first)); }
KT_TEST(shapes_from_two) { check_sizes(1, "shapes", k_from_two, NULL, N_OF(k_from_two)); }

static const int64_t k_conv_sizes[] = {37, 3, 4, 5, 8, 9, 17, 2, 1, 0, 64, 101};
static const int64_t k_conv_large[] = {101, 2, 3, 8, 17, 1, 129};
KT_TEST(conv_and_pool) { check_sizes(2, "conv", k_conv_sizes, NULL, N_OF(k_conv_sizes)); }
KT_TEST(conv_and_pool_large_first) { check_sizes(2, "conv", k_conv_large, NULL, N_OF(k_conv_large)); }
KT_TEST(gradient_of_a_mean) { check_sizes(3, "grad", k_small_first, NULL, N_OF(k_small_first)); }
KT_TEST(gradient_of_a_mean_large_first) { check_sizes(3, "grad", k_large_first, NULL, N_OF(k_large_first)); }

static const int64_t k_t2[] = {37, 2, 3, 2, 17, 4097, 8, 1, 5, 300};
static const int64_t k_u2[] = {11, 2, 29, 9, 17, 3, 8, 5, 1, 4099};
KT_TEST(two_symbols) { check_sizes(4, "two", k_t2, k_u2, N_OF(k_t2)); }
KT_TEST(two_symbols_swapped) { check_sizes(4, "two", k_u2, k_t2, N_OF(k_t2)); }
static const int64_t k_t4[] = {37, 20, 5, 9, 64, 3};
static const int64_t k_u4[] = {37, 9, 5, 20, 2, 64};
KT_TEST(two_symbols_equal_where_traced) { check_sizes(4, "two equal", k_t4, k_u4, N_OF(k_t4)); }

static const int64_t k_from_eight[] = {8, 16, 9, 32, 4, 40, 3, 8, 7, 4097};
static const int64_t k_from_four[] = {4, 16, 2, 8, 40, 3, 4};
KT_TEST(lookalike_constants) { check_sizes(5, "lookalike", k_from_eight, NULL, N_OF(k_from_eight)); }
KT_TEST(lookalike_constants_from_four) { check_sizes(5, "lookalike", k_from_four, NULL, N_OF(k_from_four)); }

static void check_misc(const int64_t *T, int n) {
  int64_t part[MAX_SIZES];
  for (int p = 0; p < 9; p++) {
    char what[32];
    snprintf(what, sizeof what, "misc %d", p);
    for (int k = 0; k < n; k++) part[k] = p;
    check_sizes(6, what, T, part, n);
  }
}
KT_TEST(misc_small_first) { check_misc(k_small_first, N_OF(k_small_first)); }
KT_TEST(misc_large_first) { check_misc(k_large_first, N_OF(k_large_first)); }

static const int64_t k_t3[] = {37, 3, 2, 5, 40, 7, 12, 4, 3};
static const int64_t k_u3[] = {11, 29, 5, 3, 9, 40, 11, 3, 2};
KT_TEST(two_symbols_in_another_order) { check_sizes(7, "order", k_t3, k_u3, N_OF(k_t3)); }
KT_TEST(gradients_of_means_over_two_symbols) { check_sizes(9, "grad two", k_t2, k_u2, N_OF(k_t2)); }
static const int64_t k_t5[] = {37, 41, 3, 2, 5, 40, 7, 12};
static const int64_t k_u5[] = {11, 13, 29, 5, 3, 9, 40, 11};
KT_TEST(two_symbols_in_another_order_unmarked) { check_sizes(10, "order auto", k_t5, k_u5, N_OF(k_t5)); }
KT_TEST(three_symbols_in_several_orders) { check_sizes(11, "three", k_t2, k_u2, N_OF(k_t2)); }
KT_TEST(slices_of_a_concat_in_another_order) { check_sizes(8, "concat slices", k_t3, k_u3, N_OF(k_t3)); }

/* The rule behind the index folding of a family's kernels: hi < m at every
 * size, read at an instance where U = 131 and T = 137. */
KT_TEST(an_index_range_below_a_size_at_every_size) {
  const int64_t p[2] = {131, 137}, U = 131, T = 137;
  KT_CHECK(kiln_cg_sym_lt_always(2, p, U, T - 1, T));          /* i < T */
  KT_CHECK(kiln_cg_sym_lt_always(2, p, U, 5 * T - 1, 5 * T));  /* i < 5 T */
  KT_CHECK(kiln_cg_sym_lt_always(2, p, U, T - 1, 5 * T - 5));  /* T - 1 < 5 (T - 1) */
  KT_CHECK(kiln_cg_sym_lt_always(2, p, U, T + 1, T * U));      /* T + 1 < T U: U >= 2, T >= 2 */
  KT_CHECK(!kiln_cg_sym_lt_always(2, p, U, T + 2, T * U));     /* not at T = U = 2 */
  KT_CHECK(kiln_cg_sym_lt_always(2, p, U, 1, T));              /* a constant below every size */
  KT_CHECK(!kiln_cg_sym_lt_always(2, p, U, 2, T));             /* not at T = 2 */
  KT_CHECK(!kiln_cg_sym_lt_always(2, p, U, U - 1, T));         /* not where U > T */
  KT_CHECK(!kiln_cg_sym_lt_always(2, p, U, U + 2, T));         /* not at T = U + 1 */
  KT_CHECK(!kiln_cg_sym_lt_always(2, p, U, 2 * T - 1, 3 * T - 4)); /* not at T = 2 */
  KT_CHECK(!kiln_cg_sym_lt_always(2, p, U, T * U - 1, 2 * T)); /* not at U = 3 */
}

/* The same symbol on two inputs that must agree: a mismatch is an error
 * naming the shapes, not a value. */
KT_TEST(mismatched_sizes_are_an_error) {
  KT_CHECK(kiln_init(&(kiln_options){.backend = bc_backend_under_test()}) == KILN_OK);
  for (int k = 0; k < 3; k++) {
    int64_t T = k == 2 ? 9 : 17 + k;
    kiln_tensor x = din(T, 3, 1, 1), y = din(k == 2 ? 10 : T, 3, 1, 2);
    kiln_tensor s = kiln_keep(kiln_add(x, y));
    kiln_status st = kiln_mark_step();
    if (k < 2) KT_CHECK_MSG(st == KILN_OK, "%s", kiln_last_error());
    else KT_CHECK(!kiln_is_valid(s) || st != KILN_OK || kiln_last_status() != KILN_OK);
    kiln_release(s);
    kiln_clear_error();
  }
  kiln_shutdown();
}

/* A bounded mark: sizes up to the bound (the bound itself included) are
 * planned and right, one above it is an error at the mark, and the sizes
 * after it run again. */
KT_TEST(a_bounded_family_at_and_above_its_bound) {
  KT_CHECK(kiln_init(&(kiln_options){.backend = bc_backend_under_test()}) == KILN_OK);
  static const int64_t sizes[] = {37, 64, 2, 65, 1000, 63, 16};
  static float buf[1000 * 3];
  for (int k = 0; k < 7; k++) {
    int64_t T = sizes[k], sh[2] = {T, 3};
    for (int64_t i = 0; i < 3 * T; i++) buf[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    kiln_tensor x = kiln_dynamic_bounded(kiln_from_host(buf, KILN_F32, 2, sh), 0, 64);
    int ax[1] = {0};
    kiln_tensor m = kiln_keep(kiln_mean(kiln_mul(x, x), 1, ax, 0));
    kiln_status st = kiln_mark_step();
    float got[3] = {0};
    if (T <= 64) {
      KT_CHECK_MSG(st == KILN_OK && kiln_to_host(m, got, sizeof got) == KILN_OK, "T = %lld: %s", (long long)T,
                   kiln_last_error());
      for (int j = 0; j < 3; j++) {
        double want = 0;
        for (int64_t i = 0; i < T; i++) want += (double)buf[i * 3 + j] * buf[i * 3 + j];
        want /= (double)T;
        KT_CHECK_MSG(fabs(got[j] - want) <= 1e-5 * (1 + fabs(want)), "T = %lld: mean %d is %.9g, want %.9g",
                     (long long)T, j, got[j], want);
      }
    } else {
      KT_CHECK_MSG(kiln_last_status() != KILN_OK || st != KILN_OK, "T = %lld above the bound ran", (long long)T);
      KT_STR_CONTAINS(kiln_last_error(), "above its bound 64");
    }
    kiln_release(m);
    kiln_clear_error();
  }
  kiln_shutdown();
}

/* Steps of growing sizes in flight together: nothing is read until the
 * last step, each step's state feeds the next, and every size's
 * intermediates share the family's arena (grown by a later, larger size
 * while an earlier one may still run). */
KT_TEST(sizes_in_flight_then_read) {
  KT_CHECK(kiln_init(&(kiln_options){.backend = bc_backend_under_test()}) == KILN_OK);
  enum { N = 8 };
  static const int64_t sizes[N] = {37, 5003, 2, 200003, 3, 65537, 400009, 17};
  kiln_tensor out[N], acc = kiln_keep(kiln_zeros(KILN_F32, 1, (int64_t[]){5}));
  double want[N][5], wacc[5] = {0};
  for (int k = 0; k < N; k++) {
    int64_t T = sizes[k], sh[2] = {T, 5};
    float *buf = malloc((size_t)(5 * T) * sizeof *buf);
    for (int64_t i = 0; i < 5 * T; i++) buf[i] = (float)((i * 37 + k) % 101) / 50.0f - 1.0f;
    kiln_tensor x = kiln_dynamic(kiln_from_host(buf, KILN_F32, 2, sh), 0);
    int ax[1] = {0};
    kiln_tensor sm = kiln_softmax(kiln_mul_c(x, 2.0), 0); /* [T, 5]: an intermediate of 20 T bytes */
    kiln_tensor m = kiln_add(kiln_mean(kiln_mul(sm, x), 1, ax, 0), acc);
    kiln_release(acc);
    acc = kiln_keep(m);
    out[k] = kiln_keep(kiln_mul_c(m, 1.0));
    KT_CHECK_MSG(kiln_mark_step() == KILN_OK, "T = %lld: %s", (long long)T, kiln_last_error());
    for (int j = 0; j < 5; j++) {
      double mx = -1e300, z = 0, s = 0;
      for (int64_t i = 0; i < T; i++) mx = fmax(mx, 2.0 * buf[i * 5 + j]);
      for (int64_t i = 0; i < T; i++) z += exp(2.0 * buf[i * 5 + j] - mx);
      for (int64_t i = 0; i < T; i++) s += exp(2.0 * buf[i * 5 + j] - mx) / z * buf[i * 5 + j];
      wacc[j] += s / (double)T;
      want[k][j] = wacc[j];
    }
    free(buf);
  }
  for (int k = 0; k < N; k++) {
    float got[5];
    KT_CHECK(kiln_to_host(out[k], got, sizeof got) == KILN_OK);
    for (int j = 0; j < 5; j++)
      KT_CHECK_MSG(fabs(got[j] - want[k][j]) <= 1e-4 * (1 + fabs(want[k][j])), "T = %lld: %d is %.9g, want %.9g",
                   (long long)sizes[k], j, got[j], want[k][j]);
    kiln_release(out[k]);
  }
  kiln_release(acc);
  kiln_shutdown();
}

/* Constant indices into a varying axis: right where they are inside it, an
 * error naming the index where a smaller size puts them past it (the
 * family's kernels check against the run-time size, not the family's). */
KT_TEST(constant_indices_past_a_smaller_size_are_an_error) {
  KT_CHECK(kiln_init(&(kiln_options){.backend = bc_backend_under_test()}) == KILN_OK);
  static const int64_t sizes[] = {37, 16, 5, 9, 2, 8};
  static float buf[37 * 5];
  for (int i = 0; i < 37 * 5; i++) buf[i] = (float)i;
  for (int k = 0; k < 6; k++) {
    int64_t T = sizes[k];
    int64_t sh[2] = {T, 5}, is[1] = {3}, idx[3] = {7, 0, 6};
    kiln_tensor x = kiln_dynamic(kiln_from_host(buf, KILN_F32, 2, sh), 0);
    kiln_tensor ix = kiln_from_host(idx, KILN_I64, 1, is);
    kiln_tensor g = kiln_keep(kiln_mul_c(kiln_index_select(kiln_exp(kiln_mul_c(x, 0.0)), 0, ix), 2.0));
    kiln_tensor h = kiln_keep(kiln_add_c(kiln_index_select(x, 0, ix), 1.0));
    kiln_status st = kiln_mark_step();
    float got[15] = {0};
    if (T > 7) {
      KT_CHECK_MSG(st == KILN_OK && kiln_to_host(h, got, sizeof got) == KILN_OK, "T = %lld: %s", (long long)T,
                   kiln_last_error());
      for (int j = 0; j < 15; j++) KT_CHECK(got[j] == buf[idx[j / 5] * 5 + j % 5] + 1.0f);
    } else {
      int bad = st != KILN_OK || kiln_to_host(h, got, sizeof got) != KILN_OK || kiln_last_status() != KILN_OK;
      KT_CHECK_MSG(bad, "T = %lld: index 7 read (%g)", (long long)T, got[0]);
      KT_STR_CONTAINS(kiln_last_error(), "7");
    }
    kiln_release(g);
    kiln_release(h);
    kiln_clear_error();
  }
  kiln_shutdown();
}

KT_MAIN(KT_CASE(reductions_small_first), KT_CASE(reductions_at_recurring_sizes), KT_CASE(shapes_at_recurring_sizes),
        KT_CASE(lookalike_at_recurring_sizes), KT_CASE(reductions_large_first), KT_CASE(reductions_from_two),
        KT_CASE(shapes_small_first), KT_CASE(shapes_large_first), KT_CASE(shapes_from_two), KT_CASE(conv_and_pool),
        KT_CASE(conv_and_pool_large_first), KT_CASE(gradient_of_a_mean), KT_CASE(gradient_of_a_mean_large_first),
        KT_CASE(two_symbols), KT_CASE(two_symbols_swapped), KT_CASE(two_symbols_equal_where_traced),
        KT_CASE(lookalike_constants), KT_CASE(lookalike_constants_from_four), KT_CASE(misc_small_first),
        KT_CASE(misc_large_first), KT_CASE(two_symbols_in_another_order), KT_CASE(slices_of_a_concat_in_another_order),
        KT_CASE(two_symbols_in_another_order_unmarked), KT_CASE(three_symbols_in_several_orders),
        KT_CASE(gradients_of_means_over_two_symbols), KT_CASE(an_index_range_below_a_size_at_every_size),
        KT_CASE(mismatched_sizes_are_an_error), KT_CASE(a_bounded_family_at_and_above_its_bound),
        KT_CASE(sizes_in_flight_then_read), KT_CASE(constant_indices_past_a_smaller_size_are_an_error))
