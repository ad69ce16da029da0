/* Random matmuls in every dtype the cpu backend multiplies itself or hands
 * to a library: f32/f64 (the library), bf16 (kiln's vdpbf16ps kernel where
 * the CPU has it, else the library on widened copies), f16 (widened), i32,
 * i64, u8 and i8 (kiln's wrapping loops), against ref. The differential
 * test (tests/diff) draws f32/f64 matmuls only; these are the GEMM paths it
 * never reaches. Each case draws the sizes (edges of the kernel's 12 x 32
 * tiles and of its K blocks of 2048 included), a batch shape broadcast on
 * either side or both, transposed operands (a GEMM that reads them with its
 * transpose flags), and the values: ordinary, with specials (NaN, inf, -0,
 * huge), or bf16 subnormals in a times large values in b (products of
 * ordinary size, which vdpbf16ps's flush of subnormal inputs lost).
 * Floats: ref sums in f64 and rounds once; cpu in f32 in another order, so
 * each case's tolerance is relative to the sum of |products|
 * (bc_emit's rtol/atol from the case's magnitudes); integers exactly. */
#include <kiln/kiln.h>

#include "backend/backend_compare.h"

typedef struct mm_case {
  kiln_dtype dt;
  int64_t m, n, k, batch;
  int bcast;  /* 0: both batched, 1: only a, 2: only b, 3: none (2-D) */
  int ta, tb; /* operands built transposed, then transposed back (strided) */
  int kind;   /* 0 ordinary, 2 specials, 3 tiny (a subnormal, b large: products normal) */
  uint64_t seed;
} mm_case;

static kiln_tensor operand(const mm_case *c, int which, int64_t rows, int64_t cols, int batched, int trans) {
  int64_t s[3];
  int r = 0;
  if (batched) s[r++] = c->batch;
  s[r++] = trans ? cols : rows;
  s[r++] = trans ? rows : cols;
  kiln_dtype src = c->dt == KILN_BF16 || c->dt == KILN_F16 ? KILN_F32 : c->dt;
  kiln_tensor x = bc_input(src, r, s, c->seed * 2 + (uint64_t)which, c->kind == 3 ? 0 : c->kind);
  /* tiny: a's values subnormal in bf16 (2^-130 of ordinary ones), b's 2^20 times: normal products */
  if (c->kind == 3 && src == KILN_F32) x = kiln_mul_c(x, ldexp(1.0, which == 0 ? -130 : 20));
  if (src != c->dt) x = kiln_cast(x, c->dt);
  if (trans) x = kiln_transpose(x, r - 2, r - 1);
  return x;
}

static void prog(bc_result *r, const void *arg) {
  const mm_case *c = arg;
  kiln_tensor a = operand(c, 0, c->m, c->k, c->bcast == 0 || c->bcast == 1, c->ta);
  kiln_tensor b = operand(c, 1, c->k, c->n, c->bcast == 0 || c->bcast == 2, c->tb);
  kiln_tensor y = kiln_matmul(a, b);
  int f = c->dt == KILN_F32 || c->dt == KILN_F64 || c->dt == KILN_BF16 || c->dt == KILN_F16;
  if (!f) {
    bc_emit(r, y, 0, 0, "matmul");
    return;
  }
  /* |a|·|b| in f64: the scale of each element's rounding error */
  kiln_tensor mag = kiln_matmul(kiln_abs(kiln_cast(a, KILN_F64)), kiln_abs(kiln_cast(b, KILN_F64)));
  bc_emit(r, y, 0, 0, "matmul");
  bc_emit(r, mag, 1e-12, 1e-300, "magnitude");
}

/* Compare with a tolerance from the magnitudes: |cpu - ref| <= eps·mag +
 * floor, eps one ulp of a 16-bit output (two f32 sums a hair apart can
 * round to neighbours) or K ulps of f32/f64 sums, floor the output dtype's
 * smallest subnormal plus K of f32's (each subnormal product rounded). */
static int check(const mm_case *c) {
  static bc_result ref, got;
  char what[160];
  snprintf(what, sizeof what, "%s [%lld]x(%lldx%lldx%lld) bcast %d ta %d tb %d kind %d seed %llu",
           kiln_dtype_name(c->dt), (long long)c->batch, (long long)c->m, (long long)c->n, (long long)c->k,
           c->bcast, c->ta, c->tb, c->kind, (unsigned long long)c->seed);
  bc_run_oracle(prog, c, &ref);
  bc_run(bc_backend_under_test(), prog, c, &got);
  int bad = 0;
  if (ref.status != KILN_OK || got.status != KILN_OK || ref.n != got.n) {
    KT_FAIL("%s: %s / %s", what, ref.err, got.err);
    bad = 1;
  } else if (ref.n == 1) {
    bad = bc_compare(what, &ref, &got);
  } else {
    const bc_out *w = &ref.o[0], *g = &got.o[0], *mg = &ref.o[1];
    double kk = (double)c->k + 1;
    double eps = c->dt == KILN_BF16 ? ldexp(1, -7) : c->dt == KILN_F16 ? ldexp(1, -10)
                 : c->dt == KILN_F32 ? kk * ldexp(1, -23) : kk * ldexp(1, -51);
    double fl = c->dt == KILN_BF16 ? ldexp(1, -133) : c->dt == KILN_F16 ? ldexp(1, -24)
                : c->dt == KILN_F32 ? kk * ldexp(1, -149) : 0;
    if (c->dt == KILN_BF16 || c->dt == KILN_F16) fl += kk * ldexp(1, -149), eps += kk * ldexp(1, -23);
    for (int64_t i = 0; i < w->numel && !bad; i++) {
      double x = bc_get_f(g, i), want = bc_get_f(w, i), m = bc_get_f(mg, i);
      int ok = isnan(want) || isnan(x) ? isnan(want) && isnan(x)
               : isinf(want) || isinf(x) || isinf(m) ? x == want || (isinf(m) && !isfinite(x) == !isfinite(want))
                                                     : fabs(x - want) <= eps * m + fl;
      /* an overflow to inf in f32 sums (ref sums in f64) is the dtype's range, not an error */
      if (!ok && isinf(x) && !isinf(want) && fabs(want) > 3.4e38) ok = 1;
      if (!ok) {
        KT_FAIL("%s: element %lld: %s gives %.9g, ref %.9g (|products| %.3g)", what, (long long)i, got.backend, x,
                want, m);
        bad = 1;
      }
    }
  }
  bc_result_free(&ref);
  bc_result_free(&got);
  return bad;
}

static int64_t pick(uint64_t seed, uint64_t k, const int64_t *v, int n) {
  return v[(int)(kiln_rng_uniform(seed, k) * n) % n];
}

KT_TEST(random_matmuls_of_every_dtype_match_ref) {
  static const kiln_dtype dts[8] = {KILN_F32, KILN_F64, KILN_BF16, KILN_F16, KILN_I32, KILN_I64, KILN_U8, KILN_I8};
  static const int64_t mn[] = {1, 2, 11, 12, 13, 31, 32, 33, 64, 97, 130};
  static const int64_t ks[] = {1, 2, 3, 16, 33, 64, 127, 300};
  static const int64_t bs[] = {1, 2, 3, 5};
  int failed = 0;
  for (int i = 0; i < 96 && failed < 4; i++) {
    uint64_t seed = 20261127u + (uint64_t)i * 7919u;
    mm_case c = {dts[i % 8], pick(seed, 1, mn, 11), pick(seed, 2, mn, 11), pick(seed, 3, ks, 8),
                 pick(seed, 4, bs, 4), (int)(kiln_rng_uniform(seed, 5) * 4), kiln_rng_uniform(seed, 6) < 0.4,
                 kiln_rng_uniform(seed, 7) < 0.4, 0, seed};
    int f = bc_is_float(c.dt);
    double u = kiln_rng_uniform(seed, 8);
    c.kind = !f ? 0 : u < 0.2 ? 2 : (c.dt == KILN_BF16 && u < 0.5) ? 3 : 0;
    failed += check(&c);
  }
  /* K past the bf16 kernel's block of 2048, and M, N past its 96 x 512 blocks */
  mm_case big[3] = {{KILN_BF16, 37, 45, 2100, 1, 3, 0, 1, 0, 11}, {KILN_BF16, 200, 530, 40, 1, 3, 1, 0, 0, 12},
                    {KILN_BF16, 100, 600, 64, 2, 1, 0, 0, 3, 13}};
  for (int i = 0; i < 3; i++) failed += check(&big[i]);
  KT_CHECK_MSG(failed == 0, "%d random matmuls differ from ref", failed);
}

KT_MAIN(KT_CASE(random_matmuls_of_every_dtype_match_ref))
