/* The helpers shared by every generated kernel: the op table's scalar
 * helpers (the same text kiln compiles, src/ir/scalar.inc), the index
 * checks, and the RNG of src/base/rng.h verbatim so RANDOM is bit-identical
 * across backends. */
#include "codegen/codegen.h"

static const char k_prelude[] =
    "#include <math.h>\n"
    "#include <stdint.h>\n"
    "#include <stdlib.h>\n"
    "#define KU __attribute__((unused))\n"
    /* the op table's scalar helpers (src/ir/scalar.inc), the text kiln
     * compiles for the ref backend and constant folding */
#define KILN_SCALAR_FN(...) #__VA_ARGS__ "\n"
#include "ir/scalar.inc"
#undef KILN_SCALAR_FN
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
    /* ARGSORT's line kernels (codegen_line.c): a stable bottom-up merge
     * sort of the positions p[0, n) by the keys kf (doubles, NaN the
     * largest) or ki (int64); t is scratch of n. An element from the right
     * run is taken first only when it comes strictly before: ties keep
     * their order, ascending or descending (ref_sort.c's order) */
    "static inline KU int kbefore(const double *kf, const int64_t *ki, int64_t a, int64_t b, int desc) {\n"
    "  if (kf) { double x = kf[a], y = kf[b];\n"
    "    return desc ? ((x != x && y == y) || x > y) : ((y != y && x == x) || x < y); }\n"
    "  return desc ? ki[a] > ki[b] : ki[a] < ki[b]; }\n"
    "static KU void ksort(const double *kf, const int64_t *ki, int64_t *p, int64_t *t, int64_t n, int desc) {\n"
    "  for (int64_t i = 0; i < n; i++) p[i] = i;\n"
    "  int64_t *s = p, *d = t;\n"
    "  for (int64_t w = 1; w < n; w *= 2) {\n"
    "    for (int64_t lo = 0; lo < n; lo += 2 * w) {\n"
    "      int64_t m = lo + w < n ? lo + w : n, h = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = m, o = lo;\n"
    "      while (i < m && j < h) d[o++] = kbefore(kf, ki, s[j], s[i], desc) ? s[j++] : s[i++];\n"
    "      while (i < m) d[o++] = s[i++];\n"
    "      while (j < h) d[o++] = s[j++]; }\n"
    "    int64_t *x = s; s = d; d = x; }\n"
    "  if (s != p) for (int64_t i = 0; i < n; i++) p[i] = s[i]; }\n"
    /* src/base/rng.h */
    /* always_inline, as kexpf and the other functions every kernel loop
     * calls: a call left out of line in a large unit keeps its loop scalar */
    "static inline KU __attribute__((always_inline)) uint64_t krng_bits(uint64_t seed, uint64_t k) {\n"
    "  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + (k + 1) * 0xd1b54a32d192ed03ULL;\n"
    "  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;\n"
    "  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;\n"
    "  return z ^ (z >> 31); }\n"
    /* (double)r, exactly, for 0 <= r < 2^53, written without an int64 ->
     * double conversion: AVX2 has none (vcvtqq2pd is AVX-512DQ) and gcc
     * left every dropout-mask loop scalar on such CPUs ("unsupported
     * data-type int64_t"; 2.5x slower). Each half is an integer below 2^52
     * placed in the mantissa of 2^52, so every step is exact and the value
     * is rng.h's, bit for bit. */
    "static inline KU __attribute__((always_inline)) double ku53_f64(uint64_t r) {\n"
    "  uint64_t hb = (r >> 1) | 0x4330000000000000ULL, lb = (r & 1) | 0x4330000000000000ULL;\n"
    "  double h, l;\n"
    "  __builtin_memcpy(&h, &hb, 8);\n"
    "  __builtin_memcpy(&l, &lb, 8);\n"
    "  return (h - 0x1p52) * 2.0 + (l - 0x1p52); }\n"
    "static inline KU double krng_uniform(uint64_t seed, uint64_t k) {\n"
    "  return ku53_f64(krng_bits(seed, k) >> 11) * 0x1.0p-53; }\n"
    "static inline KU __attribute__((always_inline)) double krng_uniform_below(uint64_t seed, uint64_t k,\n"
    "                                                                          int64_t top) {\n"
    "  int64_t r = (int64_t)(krng_bits(seed, k) >> 11);\n"
    "  r -= (r - top) & -(int64_t)(r > top);\n"
    "  return ku53_f64((uint64_t)r) * 0x1.0p-53; }\n"
    "static inline KU double krng_normal(uint64_t seed, uint64_t k) {\n"
    "  double u1 = ((double)(krng_bits(seed, 2 * k) >> 11) + 1.0) * 0x1.0p-53;\n"
    "  double u2 = (double)(krng_bits(seed, 2 * k + 1) >> 11) * 0x1.0p-53;\n"
    "  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2); }\n";

const char *kiln_codegen_prelude(void) { return k_prelude; }
