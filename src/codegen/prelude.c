/* The helpers shared by every generated kernel. They restate the numeric
 * rules of the ref backend (src/backends/ref/ref_ops.h) in C that gcc can
 * inline and vectorize, and embed the RNG of src/base/rng.h verbatim so
 * RANDOM is bit-identical across backends. */
#include "codegen/codegen.h"

static const char k_prelude[] =
    "#include <math.h>\n"
    "#include <stdint.h>\n"
    "#define KU __attribute__((unused))\n"
    /* float -> int: truncation; NaN and out-of-range give the minimum */
    "static inline KU int32_t kf2i32(double x) {\n"
    "  return (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : INT32_MIN; }\n"
    "static inline KU int64_t kf2i64(double x) {\n"
    "  return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (int64_t)x : INT64_MIN; }\n"
    /* integer narrowing wraps */
    "static inline KU int32_t ki2i32(int64_t x) { return (int32_t)(uint32_t)(uint64_t)x; }\n"
    /* NaN-propagating maximum/minimum */
    "static inline KU float kmax_f32(float a, float b) { return a != a ? a : b != b ? b : (a > b ? a : b); }\n"
    "static inline KU float kmin_f32(float a, float b) { return a != a ? a : b != b ? b : (a < b ? a : b); }\n"
    "static inline KU double kmax_f64(double a, double b) { return a != a ? a : b != b ? b : (a > b ? a : b); }\n"
    "static inline KU double kmin_f64(double a, double b) { return a != a ? a : b != b ? b : (a < b ? a : b); }\n"
    "static inline KU float krelu_f32(float x) { return x < 0.0f ? 0.0f : x; }\n"
    "static inline KU double krelu_f64(double x) { return x < 0.0 ? 0.0 : x; }\n"
    "static inline KU float kgelu_f32(float x) { return x * 0.5f * (1.0f + erff(x / 1.41421356237309504880f)); }\n"
    "static inline KU double kgelu_f64(double x) { return x * 0.5 * (1.0 + erf(x / 1.41421356237309504880)); }\n"
    "static inline KU float kgelut_f32(float x) {\n"
    "  return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x))); }\n"
    "static inline KU double kgelut_f64(double x) {\n"
    "  return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x))); }\n"
    /* expf without a libm call, so loops around it vectorize: Cody-Waite
     * reduction, degree-7 polynomial, 2^n applied in two halves so results
     * reach the subnormals. Within ~2 ulp of glibc; NaN, overflow to inf and
     * underflow to 0 are exact. */
    "static inline KU float kexpf(float x) {\n"
    "  float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;\n"
    "  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;\n"
    "  float r = xc - n * 0.693145751953125f;\n"
    "  r = r - n * 1.42860682030941723e-06f;\n"
    "  float p = 1.98412698412698413e-04f;\n"
    "  p = p * r + 1.38888888888888889e-03f;\n"
    "  p = p * r + 8.33333333333333333e-03f;\n"
    "  p = p * r + 4.16666666666666667e-02f;\n"
    "  p = p * r + 1.66666666666666667e-01f;\n"
    "  p = p * r + 0.5f;\n"
    "  p = p * r + 1.0f;\n"
    "  p = p * r + 1.0f;\n"
    "  int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;\n"
    "  union { int32_t i; float f; } s1, s2;\n"
    "  s1.i = (n1 + 127) << 23;\n"
    "  s2.i = (n2 + 127) << 23;\n"
    "  float res = p * s1.f * s2.f;\n"
    "  res = x > 88.7228393554687f ? __builtin_inff() : res;\n"
    "  res = x < -103.972084045410f ? 0.0f : res;\n"
    "  return x != x ? x : res; }\n"
    /* integer arithmetic in wrapping int64 (narrowed by the caller) */
    "static inline KU int64_t kadd_i(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }\n"
    "static inline KU int64_t ksub_i(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }\n"
    "static inline KU int64_t kmul_i(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }\n"
    "static inline KU int64_t kneg_i(int64_t a) { return (int64_t)(0 - (uint64_t)a); }\n"
    "static inline KU int64_t kabs_i(int64_t a) { return a < 0 ? (int64_t)(0 - (uint64_t)a) : a; }\n"
    "static inline KU int64_t kdiv_i(int64_t a, int64_t b) {\n"
    "  return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b; }\n"
    "static inline KU int64_t kpow_i(int64_t a, int64_t b) {\n"
    "  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;\n"
    "  uint64_t r = 1, x = (uint64_t)a, e = (uint64_t)b;\n"
    "  while (e) { if (e & 1) r *= x; x *= x; e >>= 1; }\n"
    "  return (int64_t)r; }\n"
    "static inline KU int64_t kmax_i(int64_t a, int64_t b) { return a > b ? a : b; }\n"
    "static inline KU int64_t kmin_i(int64_t a, int64_t b) { return a < b ? a : b; }\n"
    /* an index out of [0, n): report {site + 1, v} in the error word e
     * (first error wins, any thread) and clamp so the load stays in
     * bounds. The test is one unsigned compare; the report a cold call,
     * declared pure (it only writes e, which no kernel reads) and
     * rechecking v itself, so that gcc may hoist a loop-invariant check
     * out of the loop and unswitch it (KIDX_FN, on kernels with checks):
     * an embedding row copy then vectorizes as it did with a plain clamp */
    "__attribute__((noinline, cold)) static KU void kidx_report(int64_t *e, int site, int64_t v) {\n"
    "  int64_t z = 0;\n"
    "  if (__atomic_compare_exchange_n(&e[0], &z, (int64_t)site + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))\n"
    "    __atomic_store_n(&e[1], v, __ATOMIC_RELAXED); }\n"
    "__attribute__((noinline, cold, pure)) static KU int64_t kidx_bad(int64_t *e, int site, int64_t v, int64_t n) {\n"
    "  if ((uint64_t)v >= (uint64_t)n) kidx_report(e, site, v);\n"
    "  return v < 0 ? 0 : v >= n ? n - 1 : v; }\n"
    "static inline KU int64_t kidx(int64_t v, int64_t n, int64_t *e, int site) {\n"
    "  return __builtin_expect((uint64_t)v >= (uint64_t)n, 0) ? kidx_bad(e, site, v, n) : v; }\n"
    /* the check alone, for a value that does not read the index (a fill,
     * or a broadcast along the indexed axis): not pure, never dropped */
    "static inline KU int kchk(int64_t v, int64_t n, int64_t *e, int site) {\n"
    "  if (__builtin_expect((uint64_t)v >= (uint64_t)n, 0)) kidx_report(e, site, v);\n"
    "  return 0; }\n"
    "#if defined(__GNUC__) && !defined(__clang__)\n"
    "#define KIDX_FN __attribute__((optimize(\"unswitch-loops\")))\n"
    "#else\n"
    "#define KIDX_FN\n"
    "#endif\n"
    /* src/base/rng.h */
    "static inline KU uint64_t krng_bits(uint64_t seed, uint64_t k) {\n"
    "  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + (k + 1) * 0xd1b54a32d192ed03ULL;\n"
    "  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;\n"
    "  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;\n"
    "  return z ^ (z >> 31); }\n"
    "static inline KU double krng_uniform(uint64_t seed, uint64_t k) {\n"
    "  return (double)(krng_bits(seed, k) >> 11) * 0x1.0p-53; }\n"
    "static inline KU double krng_normal(uint64_t seed, uint64_t k) {\n"
    "  double u1 = ((double)(krng_bits(seed, 2 * k) >> 11) + 1.0) * 0x1.0p-53;\n"
    "  double u2 = (double)(krng_bits(seed, 2 * k + 1) >> 11) * 0x1.0p-53;\n"
    "  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2); }\n";

const char *kiln_codegen_prelude(void) { return k_prelude; }
