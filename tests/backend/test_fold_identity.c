/* Cache identity and graph-rewriting passes: a rewrite (constant folding,
 * simplification) must compute what the graph computes without it, and two
 * graphs that differ in one thing must never share a compiled graph.
 *
 * Each case runs on three configurations: the ref interpreter with the
 * passes off (KILN_PASSES=0: the oracle, the graph exactly as traced), and
 * ref and the backend under test with the passes on. Every value must equal
 * the oracle and the literal beside the case (the PyTorch 1.13 expression or
 * the hand computation in its comment) bit for bit: NaN matches NaN, -0 and
 * +0 differ. The cache cases trace several graphs that differ in exactly one
 * constant or attribute in one process, each twice (the second a graph-cache
 * hit), and check every result. */
#include <kiln/kiln.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_compare.h"
#include "kt.h"

#define MAXV 8

/* The values of y (f32, f64 or i64) as doubles / int64. */
typedef struct vals {
  int ok, n;
  kiln_dtype dt;
  double f[MAXV];
  int64_t i[MAXV];
} vals;

static vals read_vals(kiln_tensor y) {
  vals v = {0};
  v.dt = kiln_dtype_of(y);
  v.n = (int)kiln_numel(y);
  if (!kiln_is_valid(y) || v.n > MAXV) return v;
  if (v.dt == KILN_F32) {
    float b[MAXV];
    v.ok = kiln_to_host(y, b, sizeof b) == KILN_OK;
    for (int k = 0; k < v.n; k++) v.f[k] = b[k];
  } else if (v.dt == KILN_F64) {
    v.ok = kiln_to_host(y, v.f, sizeof v.f) == KILN_OK;
  } else if (v.dt == KILN_I64) {
    v.ok = kiln_to_host(y, v.i, sizeof v.i) == KILN_OK;
  }
  return v;
}

static int same_f(double a, double b) { return isnan(a) ? isnan(b) : a == b && signbit(a) == signbit(b); }

static int same_vals(const vals *a, const vals *b) {
  if (!a->ok || !b->ok || a->n != b->n || a->dt != b->dt) return 0;
  for (int k = 0; k < a->n; k++)
    if (a->dt == KILN_I64 ? a->i[k] != b->i[k] : !same_f(a->f[k], b->f[k])) return 0;
  return 1;
}

typedef kiln_tensor (*case_fn)(void);

static vals run_on(const char *backend, int passes, case_fn f) {
  if (passes)
    unsetenv("KILN_PASSES");
  else
    setenv("KILN_PASSES", "0", 1);
  vals v = {0};
  kiln_clear_error();
  if (kiln_init(&(kiln_options){.backend = backend}) != KILN_OK) return v;
  v = read_vals(f());
  kiln_shutdown();
  unsetenv("KILN_PASSES");
  return v;
}

/* f on the oracle and on both backends with the passes; each must give
 * want (n floats, or n integers when wi). */
static void check(const char *what, case_fn f, int n, const double *want, const int64_t *wi) {
  vals w = {.ok = 1, .n = n, .dt = wi ? KILN_I64 : KILN_F32};
  for (int k = 0; k < n; k++) {
    if (wi) w.i[k] = wi[k];
    else w.f[k] = want[k];
  }
  const char *names[3] = {"ref without passes (oracle)", "ref", bc_backend_under_test()};
  vals got[3] = {run_on("ref", 0, f), run_on("ref", 1, f), run_on(bc_backend_under_test(), 1, f)};
  for (int c = 0; c < 3; c++) {
    w.dt = got[c].dt == KILN_F64 ? KILN_F64 : w.dt; /* the literal is a double either way */
    if (same_vals(&got[c], &w)) continue;
    KT_FAIL("%s on %s: %s", what, names[c], got[c].ok ? "" : kiln_last_error());
    for (int k = 0; k < got[c].n && k < MAXV; k++)
      if (wi)
        fprintf(stderr, "    [%d] %lld, want %lld\n", k, (long long)got[c].i[k], (long long)wi[k]);
      else
        fprintf(stderr, "    [%d] %.17g, want %.17g\n", k, got[c].f[k], want[k]);
  }
}

static const int64_t S4 = 4;
static kiln_tensor specials(void) {
  static const float x[4] = {-0.0f, 1.0f, NAN, INFINITY};
  return kiln_from_host(x, KILN_F32, 1, &S4);
}

/* ── simplification ── */

/* x - (-0.0): -0.0 - (-0.0) is +0.0 (torch.tensor([-0.0]) - (-0.0) is 0.);
 * simplify took x - (-0) for x - 0 and returned x. */
static kiln_tensor sub_neg_zero(void) { return kiln_sub_c(specials(), -0.0); }
/* x - (+0.0) and x + (-0.0) are x exactly, -0 included */
static kiln_tensor sub_pos_zero(void) { return kiln_sub_c(specials(), 0.0); }
static kiln_tensor add_neg_zero(void) { return kiln_add_c(specials(), -0.0); }

KT_TEST(simplify_keeps_signed_zeros) {
  const double w_sub_neg[4] = {0.0, 1.0, NAN, INFINITY}, w_x[4] = {-0.0, 1.0, NAN, INFINITY};
  check("x - (-0.0)", sub_neg_zero, 4, w_sub_neg, NULL);
  check("x - 0.0", sub_pos_zero, 4, w_x, NULL);
  check("x + (-0.0)", add_neg_zero, 4, w_x, NULL);
}

/* pad(a, fill -0) + pad(b, fill -0), adjacent along the axis: the two
 * border elements, where neither pad has data, are -0 + -0 = -0; the
 * rewrite into pad(concat(a, b)) filled them with +0. a = [1], b = [2]:
 * [-0, 1, 2, -0]. */
static kiln_tensor pad_sum_neg_zero(void) {
  static const float a[1] = {1.0f}, b[1] = {2.0f};
  const int64_t one = 1;
  const int64_t alo = 1, ahi = 2, blo = 2, bhi = 1;
  kiln_tensor pa = kiln_pad(kiln_from_host(a, KILN_F32, 1, &one), &alo, &ahi, -0.0);
  kiln_tensor pb = kiln_pad(kiln_from_host(b, KILN_F32, 1, &one), &blo, &bhi, -0.0);
  return kiln_add(pa, pb);
}

/* A chain of two permutations is one permutation on x; the simplifier took
 * one whose result has x's shape (it swaps axes of equal sizes) for the
 * identity and returned x: permute(permute(x, 0,2,1), 2,0,1) of x [2,2,2]
 * is x.transpose(0, 1) (torch: x.permute(0,2,1).permute(2,0,1)). x = arange(8). */
static kiln_tensor cube(void) { return kiln_reshape(kiln_arange(KILN_F32, 0, 8, 1), 3, ((int64_t[]){2, 2, 2})); }
static kiln_tensor perm_swap(void) {
  return kiln_permute(kiln_permute(cube(), ((int[]){0, 2, 1})), ((int[]){2, 0, 1}));
}
static kiln_tensor perm_cycle(void) { /* x.permute(2,1,0).permute(1,2,0): x.permute(1,0,2) */
  return kiln_permute(kiln_permute(cube(), ((int[]){2, 1, 0})), ((int[]){1, 2, 0}));
}
static kiln_tensor perm_identity(void) {
  return kiln_permute(kiln_permute(cube(), ((int[]){1, 0, 2})), ((int[]){1, 0, 2}));
}
static kiln_tensor reshape_back(void) {
  return kiln_reshape(kiln_reshape(cube(), 2, ((int64_t[]){4, 2})), 3, ((int64_t[]){2, 2, 2}));
}

KT_TEST(collapsed_view_chains_keep_their_meaning) {
  const double swap[8] = {0, 1, 4, 5, 2, 3, 6, 7}, same[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  check("permute(permute(x, 0,2,1), 2,0,1)", perm_swap, 8, swap, NULL);
  check("permute(permute(x, 2,1,0), 1,2,0)", perm_cycle, 8, swap, NULL);
  check("permute(permute(x, 1,0,2), 1,0,2)", perm_identity, 8, same, NULL);
  check("reshape(reshape(x, 4,2), 2,2,2)", reshape_back, 8, same, NULL);
}

KT_TEST(pad_sum_keeps_the_fill) {
  const double w[4] = {-0.0, 1.0, 2.0, -0.0};
  check("pad(a, -0) + pad(b, -0)", pad_sum_neg_zero, 4, w, NULL);
}

/* ── constant folding of sums ── */

static const int AX0 = 0;

/* torch.full((3,), -0.0).sum() is 0.: a sum starts at +0 (folded: -0 * 3) */
static kiln_tensor sum_neg_zero_f32(void) {
  const int64_t s = 3;
  return kiln_sum(kiln_full(KILN_F32, 1, &s, -0.0), 1, &AX0, false);
}
static kiln_tensor sum_neg_zero_f64(void) {
  const int64_t s = 3;
  return kiln_sum(kiln_full(KILN_F64, 1, &s, -0.0), 1, &AX0, false);
}
/* torch.full((0, 3), inf).sum(0) is [0., 0., 0.]: the sum of nothing
 * (folded: inf * 0 = NaN); the same for NaN */
static kiln_tensor sum_empty_inf(void) {
  const int64_t s[2] = {0, 3};
  return kiln_sum(kiln_full(KILN_F32, 2, s, INFINITY), 1, &AX0, false);
}
static kiln_tensor sum_empty_nan(void) {
  const int64_t s[2] = {3, 0};
  const int ax = 1;
  return kiln_sum(kiln_full(KILN_F32, 2, s, NAN), 1, &ax, false);
}
/* ten 0.1 in f64 added in order: 0.9999999999999999 (Python sum([0.1]*10));
 * folded as 0.1 * 10 it was 1.0, what no backend's sum gives here */
static kiln_tensor sum_tenth_f64(void) {
  const int64_t s = 10;
  return kiln_sum(kiln_full(KILN_F64, 1, &s, 0.1), 1, &AX0, false);
}
/* a fill whose partial sums are exact still folds: 0.5 * 6 = 3 */
static kiln_tensor sum_half_f64(void) {
  const int64_t s = 6;
  return kiln_sum(kiln_full(KILN_F64, 1, &s, 0.5), 1, &AX0, false);
}

KT_TEST(fold_sum_of_fills) {
  const double pz = 0.0, zeros[3] = {0, 0, 0}, tenth = 0.99999999999999989, three = 3.0;
  check("sum(full(3, -0.0)) f32", sum_neg_zero_f32, 1, &pz, NULL);
  check("sum(full(3, -0.0)) f64", sum_neg_zero_f64, 1, &pz, NULL);
  check("sum over an empty axis of inf", sum_empty_inf, 3, zeros, NULL);
  check("sum over an empty axis of NaN", sum_empty_nan, 3, zeros, NULL);
  check("sum(full(10, 0.1)) f64", sum_tenth_f64, 1, &tenth, NULL);
  check("sum(full(6, 0.5)) f64", sum_half_f64, 1, &three, NULL);
}

/* ── constant folding of i64 beyond 2^53 ── */

/* 2^53 + 1 = 9007199254740993 in i64 (torch.full((1,), 2**53) + 1); the
 * folded CONST held it as the double 2^53 (the range check was made on the
 * rounded double) */
static kiln_tensor i64_past_2p53(void) {
  const int64_t one = 1;
  return kiln_add(kiln_full(KILN_I64, 1, &one, 9007199254740992.0), kiln_full(KILN_I64, 1, &one, 1.0));
}
static kiln_tensor i64_below_m2p53(void) {
  const int64_t one = 1;
  return kiln_sub(kiln_full(KILN_I64, 1, &one, -9007199254740992.0), kiln_full(KILN_I64, 1, &one, 1.0));
}

KT_TEST(fold_i64_past_2p53) {
  const int64_t w1 = 9007199254740993LL, w2 = -9007199254740993LL;
  check("2^53 + 1 in i64", i64_past_2p53, 1, NULL, &w1);
  check("-2^53 - 1 in i64", i64_below_m2p53, 1, NULL, &w2);
}

/* ── one process, graphs that differ in one thing ── */

/* Variant v of a graph over the same input x = specials(): each differs from
 * the others in one constant (its sign of zero, a NaN against a number, a
 * double that rounds to the same f32) or one attribute. */
static int g_variant;
enum { N_VARIANTS = 8 };
static kiln_tensor variant(void) {
  kiln_tensor x = specials();
  const int ax = 0;
  switch (g_variant) {
    case 0: return kiln_mul_c(x, 0.0);
    case 1: return kiln_mul_c(x, -0.0);
    case 2: return kiln_sub_c(x, 0.0);
    case 3: return kiln_sub_c(x, -0.0);
    case 4: return kiln_maximum_c(x, NAN);
    case 5: return kiln_maximum_c(x, 2.0);
    case 6: return kiln_cumsum(x, 0); /* attribute: a scan, not a sum */
    default: return kiln_expand(kiln_sum(x, 1, &ax, true), 1, &S4);
  }
}

KT_TEST(graph_cache_keeps_variants_apart) {
  vals want[N_VARIANTS];
  for (g_variant = 0; g_variant < N_VARIANTS; g_variant++) want[g_variant] = run_on("ref", 0, variant);
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++) {
    kiln_clear_error();
    KT_CHECK(kiln_init(&(kiln_options){.backend = backends[b]}) == KILN_OK);
    for (int round = 0; round < 2; round++) /* the second round hits the graph cache */
      for (g_variant = 0; g_variant < N_VARIANTS; g_variant++) {
        vals got = read_vals(variant());
        KT_CHECK_MSG(want[g_variant].ok && same_vals(&got, &want[g_variant]), "variant %d, round %d, on %s: %s",
                     g_variant, round, backends[b], kiln_last_error());
        kiln_mark_step();
      }
    kiln_shutdown();
  }
}

KT_MAIN(KT_CASE(simplify_keeps_signed_zeros), KT_CASE(collapsed_view_chains_keep_their_meaning),
        KT_CASE(pad_sum_keeps_the_fill), KT_CASE(fold_sum_of_fills),
        KT_CASE(fold_i64_past_2p53), KT_CASE(graph_cache_keeps_variants_apart))
