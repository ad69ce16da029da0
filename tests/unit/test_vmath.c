/* kiln's own f32 transcendental functions (src/ir/scalar.inc: kexpf, klogf,
 * ktanhf, kerff, ksinf, kcosf), which the op table uses instead of libm so
 * that generated loops vectorize (docs/codegen.md §4b).
 *
 * 1. Accuracy, against the double-precision libm as the oracle: every 2039th
 *    f32 bit pattern (both signs, subnormals, the whole exponent range, so
 *    sin/cos up to 3.4e38), dense sweeps around each range split and
 *    reduction boundary, and the special values. The error is in ulps of
 *    the exact result rounded to f32; the bounds are the ones documented in
 *    docs/codegen.md. NaN, infinities and the sign of zero must be exact.
 * 2. The cpu backend's compiled (vectorized) kernels give the same bits as
 *    the ref backend, which evaluates the same C scalar by scalar, for each
 *    op built on these functions.
 * 3. kbf16_bits, the generated kernels' bf16 store, is kf32_bf16, and
 *    kbf16q, their rounding of values known exact, is kbf16r, on every
 *    value a bf16 node can hold (all 65536 bf16 values, NaNs of every
 *    payload and sign included, and kbf16r of f32 values across the range).
 * 4. kf32_bf16, kf32_f16 and kf16_f32 against a rounding done in double
 *    (and against F16C where the CPU has it). */
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ir/scalar.h"
#include "kiln/doctor.h"
#include "kiln/kiln.h"
#include "kt.h"

static float f_of(uint32_t b) {
  float x;
  memcpy(&x, &b, sizeof x);
  return x;
}
static uint32_t bits_of(float x) {
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

/* ulp of the f32 nearest y: 2^-149 in the subnormal range */
static double ulp_f32(double y) {
  y = fabs(y);
  if (y < 0x1p-126) return 0x1p-149;
  if (y >= 0x1p127) return 0x1p104;
  int e;
  frexp(y, &e);
  return ldexp(1.0, e - 24);
}

typedef struct acc {
  const char *name;
  float (*f)(float);
  double (*oracle)(double);
  double bound; /* ulps */
  double worst;
  float worst_x;
  int bad; /* special-value or bound failures reported */
} acc;

static void acc_check(acc *a, float x) {
  float r = a->f(x);
  double want = a->oracle((double)x);
  int fail = 0;
  double err = 0;
  if (isnan(want) || isnan(r)) {
    fail = isnan(want) != isnan(r);
  } else if (isinf(want) || isinf(r) || fabs(want) >= 0x1p128) {
    fail = (double)r != (double)(float)want;
  } else if (want == 0.0) {
    fail = r != 0.0f || !signbit(r) != !signbit(want);
  } else {
    err = fabs((double)r - want) / ulp_f32(want);
    fail = !(err <= a->bound);
  }
  if (err > a->worst) {
    a->worst = err;
    a->worst_x = x;
  }
  if (fail && a->bad++ < 5)
    KT_FAIL("%s(%a) = %a, want %a (%.3g ulp, bound %g)", a->name, (double)x, (double)r, want, err, a->bound);
}

static void acc_sweep(acc *a, float lo, float hi) { /* [lo, hi], both signs: every float, or 2^17 */
  uint32_t step = (bits_of(hi) - bits_of(lo)) / 131072 + 1;
  for (uint32_t b = bits_of(lo); b <= bits_of(hi); b += step) {
    acc_check(a, f_of(b));
    acc_check(a, -f_of(b));
  }
}

static void acc_run(acc *a) {
  for (uint64_t b = 0; b < (1ull << 32); b += 2039) acc_check(a, f_of((uint32_t)b));
  static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, -0x1p-149f,
                                   0x1.fffffcp-127f, 0x1p-126f, 1.0f, -1.0f, 2.0f, 0.5f, 3.4028235e38f,
                                   -3.4028235e38f, 88.7228394f, 88.72284f, -103.972084f, -103.97209f,
                                   0.625f, 1.0f, 3.92f, 4.0f, 120.0f, -120.0f, 119.99999f};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) acc_check(a, specials[i]);
  fprintf(stderr, "  %-4s max %.3f ulp (at %a), bound %g\n", a->name, a->worst, (double)a->worst_x, a->bound);
}

KT_TEST(exp_within_2_ulp) {
  acc a = {"exp", kexpf, exp, 2.0, 0, 0, 0};
  acc_run(&a);
  acc_sweep(&a, 87.0f, 89.0f);       /* overflow edge */
  acc_sweep(&a, 100.0f, 104.5f);     /* negative side: subnormal results, underflow */
  acc_sweep(&a, 0.0f, 0x1p-20f);     /* tiny arguments */
}

KT_TEST(log_within_1_ulp) {
  acc a = {"log", klogf, log, 1.0, 0, 0, 0};
  acc_run(&a);
  acc_sweep(&a, 0.99f, 1.01f);       /* near 1: the result is small */
  acc_sweep(&a, 0.70f, 0.72f);       /* the sqrt(1/2) split */
  acc_sweep(&a, 0.0f, 0x1p-120f);    /* subnormals */
}

KT_TEST(tanh_within_2_ulp) {
  acc a = {"tanh", ktanhf, tanh, 2.0, 0, 0, 0};
  acc_run(&a);
  acc_sweep(&a, 0.6f, 0.65f);        /* the polynomial / exp split at 0.625 */
  acc_sweep(&a, 8.0f, 10.0f);        /* rounding to 1 */
  acc_sweep(&a, 0.0f, 0x1p-100f);
}

KT_TEST(erf_within_2_ulp) {
  acc a = {"erf", kerff, erf, 2.0, 0, 0, 0};
  acc_run(&a);
  acc_sweep(&a, 0.95f, 1.05f);       /* the polynomial / erfc split at 1 */
  acc_sweep(&a, 3.8f, 4.2f);         /* rounding to 1, the clamp at 4 */
  acc_sweep(&a, 0.0f, 0x1p-100f);
}

static void sweep_multiples_of_pi_2(acc *a) { /* arguments near k pi/2: tiny results */
  for (int k = 1; k < 4000; k += (k < 100 ? 1 : 37)) {
    float c = (float)(k * 1.57079632679489661923);
    uint32_t b = bits_of(c);
    for (uint32_t d = b - 64; d <= b + 64; d++) {
      acc_check(a, f_of(d));
      acc_check(a, -f_of(d));
    }
  }
}

KT_TEST(sin_within_1_ulp) {
  acc a = {"sin", ksinf, sin, 1.0, 0, 0, 0};
  acc_run(&a);
  sweep_multiples_of_pi_2(&a);
  acc_sweep(&a, 119.9f, 120.1f);     /* the two reductions' boundary */
  acc_sweep(&a, 0x1.8p127f, 0x1.80008p127f);
}

KT_TEST(cos_within_1_ulp) {
  acc a = {"cos", kcosf, cos, 1.0, 0, 0, 0};
  acc_run(&a);
  sweep_multiples_of_pi_2(&a);
  acc_sweep(&a, 119.9f, 120.1f);
  acc_sweep(&a, 0x1.8p127f, 0x1.80008p127f);
}

/* Compiled elementwise loops call ksinf_small/kcosf_small for a block whose
 * arguments are all below 120 in magnitude (codegen.c, loop_f): the same
 * bits as the full functions there, for every 61st bit pattern of both signs
 * and every pattern around the multiples of pi/2 up to 120. */
KT_TEST(small_reduction_same_bits_below_120) {
  int bad = 0;
  for (uint32_t b = 0; b < 0x42f00000u && bad < 5; b += 61)
    for (int neg = 0; neg < 2; neg++) {
      float x = f_of(b | (uint32_t)neg << 31);
      KT_CHECK(!ksincos_large(x));
      if (bits_of(ksinf_small(x)) != bits_of(ksinf(x)) && bad++ < 5) KT_FAIL("sin_small(%a) differs", (double)x);
      if (bits_of(kcosf_small(x)) != bits_of(kcosf(x)) && bad++ < 5) KT_FAIL("cos_small(%a) differs", (double)x);
    }
  for (int k = 1; k <= 76; k++) {
    uint32_t c = bits_of((float)(k * 1.5707963267948966));
    for (uint32_t d = c - 300; d <= c + 300; d++) {
      float x = f_of(d);
      if (bits_of(ksinf_small(x)) != bits_of(ksinf(x)) || bits_of(kcosf_small(x)) != bits_of(kcosf(x)))
        if (bad++ < 5) KT_FAIL("sin/cos_small(%a) differs", (double)x);
    }
  }
  KT_CHECK(ksincos_large(120.0f) && ksincos_large(-120.0f) && ksincos_large(INFINITY) && ksincos_large(NAN));
}

/* GELU: the cancellation in 1 + erf(x / sqrt 2) for negative x costs as
 * much with libm's erff; bound 4 ulp of the result plus 2^-23 |x|. */
KT_TEST(gelu_close_to_double) {
  int bad = 0;
  for (uint64_t b = 0; b < (1ull << 32); b += 65521) {
    float x = f_of((uint32_t)b);
    if (!isfinite(x)) continue;
    double xd = x, g = xd * 0.5 * (1.0 + erf(xd / sqrt(2.0)));
    double gt = 0.5 * xd * (1.0 + tanh(sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd)));
    double tol = 4 * ulp_f32(g) + 0x1p-23 * fabs(xd);
    if (!(fabs(kgelu_f32(x) - g) <= tol) && bad++ < 5) KT_FAIL("gelu(%a) = %a, want %a", xd, kgelu_f32(x), g);
    tol = 4 * ulp_f32(gt) + 0x1p-23 * fabs(xd);
    if (fabs(xd) < 1e12 && !(fabs(kgelut_f32(x) - gt) <= tol) && bad++ < 5)
      KT_FAIL("gelu_tanh(%a) = %a, want %a", xd, kgelut_f32(x), gt);
  }
}

/* ── compiled kernels against ref, bit for bit ── */

enum { NV = 1 << 16 };
typedef kiln_tensor (*unary_fn)(kiln_tensor, kiln_loc);
static const struct {
  const char *name;
  unary_fn fn;
} k_ops[] = {{"exp", kiln_exp_at},   {"log", kiln_log_at},   {"tanh", kiln_tanh_at},
             {"erf", kiln_erf_at},   {"sin", kiln_sin_at},   {"cos", kiln_cos_at},
             {"gelu", kiln_gelu_at}, {"gelu_tanh", kiln_gelu_tanh_at}, {"sigmoid", kiln_sigmoid_at}};
enum { NOPS = sizeof k_ops / sizeof k_ops[0] };

static int run_ops(const char *backend, const float *in, float *out /* NOPS * NV */) {
  if (kiln_init(&(kiln_options){.backend = backend}) != KILN_OK) return -1;
  int64_t shape[1] = {NV};
  kiln_tensor x = kiln_from_host(in, KILN_F32, 1, shape);
  kiln_tensor y[NOPS];
  for (int i = 0; i < NOPS; i++) y[i] = kiln_keep(k_ops[i].fn(x, KILN_HERE));
  int rc = kiln_mark_step() == KILN_OK ? 0 : -1;
  for (int i = 0; i < NOPS && rc == 0; i++)
    if (kiln_to_host(y[i], out + (size_t)i * NV, sizeof(float) * NV) != KILN_OK) rc = -1;
  kiln_shutdown();
  return rc;
}

KT_TEST(compiled_kernels_match_ref_bitwise) {
  static float in[NV], got[NOPS * NV], want[NOPS * NV];
  static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f, 1e30f, -1e30f, 120.0f, 0.625f};
  for (int i = 0; i < NV; i++) /* a spread of bit patterns, then small values, then specials */
    in[i] = i < NV / 2 ? f_of((uint32_t)i * 65537u + 12345u) : (float)(i - 3 * NV / 4) / 1024.0f;
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) in[i * 7] = specials[i];
  /* compiled sin/cos take the small reduction alone for a block of 256 below 120 (codegen.c, loop_f): blocks of
   * small values with one value that needs the full function (first, middle, last of a block; both sides of 120) */
  static const struct { int at; float v; } lone[] = {{NV / 2 + 256, 1e30f}, {NV / 2 + 3 * 256 + 128, 120.0f},
                                                     {NV / 2 + 5 * 256 + 255, -NAN}, {NV / 2 + 7 * 256 + 9, -INFINITY},
                                                     {NV / 2 + 9 * 256 + 17, 119.99999f}, {NV - 1, -7e5f}};
  for (size_t i = 0; i < sizeof lone / sizeof lone[0]; i++) in[lone[i].at] = lone[i].v;
  KT_CHECK(run_ops("ref", in, want) == 0);
  KT_CHECK(run_ops("cpu", in, got) == 0);
  for (int o = 0; o < NOPS; o++) {
    int bad = 0;
    for (int i = 0; i < NV; i++) {
      float w = want[(size_t)o * NV + i], g = got[(size_t)o * NV + i];
      int same = isnan(w) ? isnan(g) != 0 : bits_of(w) == bits_of(g);
      if (!same && bad++ < 3) KT_FAIL("%s(%a): cpu %a, ref %a", k_ops[o].name, (double)in[i], (double)g, (double)w);
    }
  }
}

/* sin and cos inside a loop over rows (a broadcast bias: the kernel's inner
 * loop runs along a row, in blocks of 256 within it): rows of 300 and a
 * partial block, rows all below 120 and rows with one element above, against
 * ref bit for bit, for sin(x + b), cos(x + b) and sin(x + b) * cos(x) */
enum { SR = 37, SC = 300 };
static int run_rows(const char *backend, const float *x, const float *b, float *out /* 3 * SR * SC */) {
  if (kiln_init(&(kiln_options){.backend = backend}) != KILN_OK) return -1;
  int64_t xs[2] = {SR, SC}, bs[1] = {SC};
  kiln_tensor tx = kiln_from_host(x, KILN_F32, 2, xs), tb = kiln_from_host(b, KILN_F32, 1, bs);
  kiln_tensor xb = kiln_add(tx, tb);
  kiln_tensor y[3] = {kiln_keep(kiln_sin(xb)), kiln_keep(kiln_cos(xb)),
                      kiln_keep(kiln_mul(kiln_sin(xb), kiln_cos(tx)))};
  int rc = kiln_mark_step() == KILN_OK ? 0 : -1;
  for (int i = 0; i < 3 && rc == 0; i++)
    if (kiln_to_host(y[i], out + (size_t)i * SR * SC, sizeof(float) * SR * SC) != KILN_OK) rc = -1;
  kiln_shutdown();
  return rc;
}

KT_TEST(sin_cos_in_row_loops_match_ref_bitwise) {
  static float x[SR * SC], b[SC], got[3 * SR * SC], want[3 * SR * SC];
  for (int i = 0; i < SR * SC; i++) x[i] = (float)sin(0.7 * i) * 50.0f;
  for (int j = 0; j < SC; j++) b[j] = (float)(j % 17) * 0.25f;
  x[3 * SC + 10] = 1e6f;    /* first block of row 3 */
  x[5 * SC + 290] = 130.0f; /* the partial block of row 5 */
  x[9 * SC + 255] = NAN;    /* last element of a full block */
  x[SR * SC - 1] = -3e9f;
  KT_CHECK(run_rows("ref", x, b, want) == 0);
  KT_CHECK(run_rows("cpu", x, b, got) == 0);
  int bad = 0;
  for (int i = 0; i < 3 * SR * SC; i++) {
    int same = isnan(want[i]) ? isnan(got[i]) != 0 : bits_of(want[i]) == bits_of(got[i]);
    if (!same && bad++ < 3)
      KT_FAIL("output %d element %d: cpu %a, ref %a", i / (SR * SC), i % (SR * SC), (double)got[i], (double)want[i]);
  }
}

KT_TEST(bf16_store_is_the_rounding_on_bf16_values) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float x = kbf16_f32((uint16_t)h);
    if (kbf16_bits(x) != kf32_bf16(x) && bad++ < 3)
      KT_FAIL("bf16 %04x: kbf16_bits %04x, kf32_bf16 %04x", (unsigned)h, (unsigned)kbf16_bits(x),
              (unsigned)kf32_bf16(x));
    float q = kbf16q(x), r = kbf16r(x);
    if (memcmp(&q, &r, 4) && bad++ < 3) KT_FAIL("bf16 %04x: kbf16q %a, kbf16r %a", (unsigned)h, (double)q, (double)r);
  }
  for (uint64_t u = 0; u < 0x100000000ull; u += 2039) { /* f32 patterns, rounded as a bf16 node's value is */
    uint32_t b = (uint32_t)u;
    float f;
    memcpy(&f, &b, 4);
    float x = kbf16r(f);
    if (kbf16_bits(x) != kf32_bf16(f) && bad++ < 3)
      KT_FAIL("f32 %08x: kbf16_bits(kbf16r) %04x, kf32_bf16 %04x", (unsigned)b, (unsigned)kbf16_bits(x),
              (unsigned)kf32_bf16(f));
  }
  KT_CHECK(bad == 0);
}

/* ───────────── 16-bit float conversions against an independent rounding ─────────────
 *
 * kf32_bf16, kf32_f16 and kf16_f32 are written on the bits, branch-free (so
 * the loops around them vectorize); the oracle here rounds in double: the
 * value divided by its 16-bit format's spacing (a power of two, exact),
 * nearbyint (round to nearest even), times the spacing, overflow to inf,
 * then encoded from frexp. Every 2039th f32 pattern and, for every upper
 * half, the low halves around both formats' rounding ties. Where the CPU has
 * F16C, its vcvtps2ph / vcvtph2ps too. */
static uint16_t enc16(double h, int neg, int mant, int bias) { /* a value of the format (or inf), encoded */
  uint16_t sign = neg ? 0x8000u : 0u, inf = (uint16_t)(((1u << (15 - mant)) - 1u) << mant);
  if (isinf(h)) return sign | inf;
  if (h == 0) return sign;
  int k;
  double f = frexp(h, &k); /* h = f 2^k, f in [0.5, 1) */
  int field = k - 1 + bias;
  if (field <= 0) return sign | (uint16_t)ldexp(h, bias - 1 + mant); /* subnormal: h / 2^(1-bias-mant) */
  return sign | (uint16_t)(field << mant) | (uint16_t)(ldexp(f * 2.0 - 1.0, mant));
}
static uint16_t round16(float x, int mant, int bias) { /* finite or infinite x */
  double a = fabs((double)x), maxf = ldexp(2.0 - ldexp(1.0, -mant), (1 << (15 - mant)) - 2 - bias);
  if (isinf(a)) return enc16(a, signbit(x) != 0, mant, bias);
  int k;
  frexp(a == 0 ? 1.0 : a, &k);
  int e = k - 1 < 1 - bias ? 1 - bias : k - 1; /* the exponent of a's binade, at least the smallest normal's */
  double sp = ldexp(1.0, e - mant), h = nearbyint(a / sp) * sp;
  return enc16(h > maxf ? INFINITY : h, signbit(x) != 0, mant, bias);
}
#if defined(__x86_64__)
__attribute__((target("f16c"))) static uint16_t f16c_narrow(float x) {
  return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) static float f16c_widen(uint16_t h) { return _cvtsh_ss(h); }
/* kiln's feature string (the OS's AVX state checked); no other name in it contains "f16c" */
static int have_f16c(void) { return strstr(kiln_cpu_features(), "f16c") != NULL; }
#else
static uint16_t f16c_narrow(float x) { return (uint16_t)(x * 0); }
static float f16c_widen(uint16_t h) { return (float)h; }
static int have_f16c(void) { return 0; }
#endif

static void check_narrow(uint32_t b, int f16c, int *bad) {
  float x = f_of(b);
  if (isnan(x)) { /* bf16: the quiet NaN 0x7fc0; f16: quiet, sign and the payload's top bits kept */
    uint16_t want16 = (uint16_t)(((b >> 16) & 0x8000u) | 0x7e00u | ((b >> 13) & 0x3ffu));
    if ((kf32_bf16(x) != 0x7fc0u || kf32_f16(x) != want16) && (*bad)++ < 3)
      KT_FAIL("NaN %08x: bf16 %04x, f16 %04x (want %04x)", (unsigned)b, kf32_bf16(x), kf32_f16(x), want16);
    return;
  }
  uint16_t wb = round16(x, 7, 127), wh = round16(x, 10, 15);
  if (kf32_bf16(x) != wb && (*bad)++ < 3) KT_FAIL("bf16 of %08x: %04x, want %04x", (unsigned)b, kf32_bf16(x), wb);
  if (kf32_f16(x) != wh && (*bad)++ < 3) KT_FAIL("f16 of %08x: %04x, want %04x", (unsigned)b, kf32_f16(x), wh);
  if (f16c && kf32_f16(x) != f16c_narrow(x) && (*bad)++ < 3)
    KT_FAIL("f16 of %08x: %04x, F16C %04x", (unsigned)b, kf32_f16(x), f16c_narrow(x));
}

KT_TEST(half_conversions_round_to_nearest_even) {
  int bad = 0, f16c = have_f16c();
  /* ties and their neighbours: bf16's (0x8000), f16's normal ones (0x1000 of the low 13 bits) and
   * its subnormals' (0x2000 ... 0xe000: |x| in [2^-16, 2^-14), both parities) */
  static const uint16_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x4000, 0x5000,
                                  0x6000, 0x7fff, 0x8000, 0x8001, 0x9000, 0xc000, 0xe000, 0xefff, 0xf000, 0xffff};
  for (uint64_t u = 0; u < 0x100000000ull; u += 2039) check_narrow((uint32_t)u, f16c, &bad);
  for (uint32_t hi = 0; hi < 65536; hi++)
    for (size_t l = 0; l < sizeof lows / sizeof lows[0]; l++) check_narrow(hi << 16 | lows[l], f16c, &bad);
  for (uint32_t h = 0; h < 65536; h++) { /* f16 -> f32, every value */
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, sign = (h & 0x8000u) << 16;
    double v = e == 0 ? ldexp((double)m, -24) : ldexp(1.0 + m / 1024.0, (int)e - 15);
    uint32_t want = e == 31 ? sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u) : sign | bits_of((float)v);
    float got = kf16_f32((uint16_t)h);
    if (bits_of(got) != want && bad++ < 3) KT_FAIL("f16 %04x: %08x, want %08x", (unsigned)h, bits_of(got), want);
    if (f16c && bits_of(got) != bits_of(f16c_widen((uint16_t)h)) && bad++ < 3)
      KT_FAIL("f16 %04x: %08x, F16C %08x", (unsigned)h, bits_of(got), bits_of(f16c_widen((uint16_t)h)));
  }
  KT_CHECK(bad == 0);
}

KT_MAIN(KT_CASE(exp_within_2_ulp), KT_CASE(log_within_1_ulp), KT_CASE(tanh_within_2_ulp),
        KT_CASE(erf_within_2_ulp), KT_CASE(sin_within_1_ulp), KT_CASE(cos_within_1_ulp),
        KT_CASE(small_reduction_same_bits_below_120), KT_CASE(gelu_close_to_double),
        KT_CASE(compiled_kernels_match_ref_bitwise), KT_CASE(sin_cos_in_row_loops_match_ref_bitwise),
        KT_CASE(bf16_store_is_the_rounding_on_bf16_values), KT_CASE(half_conversions_round_to_nearest_even))
