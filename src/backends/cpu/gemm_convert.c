/* GEMM on the dtypes the GEMM library is not asked for: bf16/f16 (converted
 * to f32 while packing, multiplied by the library's sgemm, rounded to
 * nearest even on the way out: f32 accumulation, as PyTorch's CPU kernels
 * do) and i32/i64 (accumulated in the output dtype, wrapping: the modulo
 * 2^32 sum ref computes in int64 and narrows). */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/gemm.h"
#include "ir/scalar.h"
#include "kiln/kiln.h"

/* Element (i, j) of op(X), X row-major with leading dimension ld. */
static inline int64_t at(int t, int64_t i, int64_t j, int64_t ld) { return t ? j * ld + i : i * ld + j; }

static inline float ld_half(int dt, const uint16_t *p, int64_t i) {
  return dt == KILN_BF16 ? kbf16_f32(p[i]) : kf16_f32(p[i]);
}

/* Element (i, j) of op(A) op(B) as f32 sums, in order: the fallback
 * without memory for the widened copies (another order than the library's). */
float kiln_gemm_half_dot(int dt, int ta, int tb, int64_t i, int64_t j, int64_t k, const uint16_t *a,
                         int64_t lda, const uint16_t *b, int64_t ldb) {
  float s = 0.0f;
  for (int64_t q = 0; q < k; q++) s += ld_half(dt, a, at(ta, i, q, lda)) * ld_half(dt, b, at(tb, q, j, ldb));
  return s;
}

/* X (r x c as stored, bf16/f16, leading dimension ld) into dense f32 rows;
 * bf16 as a plain shift loop the compiler vectorizes. */
static void widen(int dt, int64_t r, int64_t c, const uint16_t *x, int64_t ld, float *out) {
  if (dt == KILN_BF16) {
    for (int64_t i = 0; i < r; i++) {
      const uint16_t *xr = x + i * ld;
      uint32_t *o = (uint32_t *)(void *)(out + i * c);
      for (int64_t j = 0; j < c; j++) o[j] = (uint32_t)xr[j] << 16;
    }
    return;
  }
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) out[i * c + j] = kf16_f32(x[i * ld + j]);
}

/* fc (m x n, dense) = op(A) op(B): bf16 by oneDNN's bf16 GEMM where that
 * is wanted (AMX, kiln_gemm_bf16_onednn), else by the library's sgemm on
 * copies widened to f32. 0, or -1 without memory for the copies. */
int kiln_gemm_half_products(int dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                            int64_t lda, const uint16_t *b, int64_t ldb, float *fc) {
  if (k <= 0) { /* sums of nothing, without asking the library about K = 0 */
    memset(fc, 0, sizeof *fc * (size_t)(m * n));
    return 0;
  }
  if (dt == KILN_BF16 && kiln_gemm_bf16_onednn(ta, tb, m, n, k, a, lda, b, ldb, fc, n) == 0) return 0;
  float *fa = malloc(((size_t)(m * k + k * n) + 1) * sizeof(float));
  if (!fa) return -1;
  float *fb = fa + m * k;
  /* widened as stored; the library applies the transposes */
  int64_t ac = ta ? m : k, bc = tb ? k : n;
  widen(dt, ta ? k : m, ac, a, lda, fa);
  widen(dt, tb ? n : k, bc, b, ldb, fb);
  kiln_gemm_sgemm(ta, tb, m, n, k, 1.0f, fa, ac, fb, bc, 0.0f, fc, n);
  free(fa);
  return 0;
}

/* bf16/f16 C = op(A) op(B) in f32 sums. bf16 where kiln's vdpbf16ps kernel
 * is the faster (gemm_bf16.c, kiln_gemm_bf16_preferred): straight from the
 * 16-bit operands into 16-bit C. Otherwise the library's sgemm on copies
 * widened to f32, and C rounded to nearest even. */
static void gemm_half(int dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                      const uint16_t *b, int64_t ldb, uint16_t *c, int64_t ldc) {
  if (dt == KILN_BF16 && kiln_gemm_bf16_preferred() && kiln_gemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, 1) == 0)
    return;
  float *fc = malloc(((size_t)(m * n) + 1) * sizeof(float));
  if (!fc || kiln_gemm_half_products(dt, ta, tb, m, n, k, a, lda, b, ldb, fc) != 0) {
    free(fc);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        float v = kiln_gemm_half_dot(dt, ta, tb, i, j, k, a, lda, b, ldb);
        c[i * ldc + j] = dt == KILN_BF16 ? kf32_bf16(v) : kf32_f16(v);
      }
    return;
  }
  for (int64_t i = 0; i < m; i++) {
    const float *fr = fc + i * n;
    uint16_t *cr = c + i * ldc;
    if (dt == KILN_BF16)
      for (int64_t j = 0; j < n; j++) cr[j] = kf32_bf16(fr[j]);
    else
      for (int64_t j = 0; j < n; j++) cr[j] = kf32_f16(fr[j]);
  }
  free(fc);
}

void kiln_gemm_bf16_update(int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                           const uint16_t *b, int64_t ldb, float *c, int64_t ldc, const float *c0, float alpha) {
  if (kiln_gemm_bf16_preferred() && kiln_gemm_bf16_upd(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, c0, alpha) == 0)
    return;
  float *fc = malloc(((size_t)(m * n) + 1) * sizeof(float));
  int have = fc && kiln_gemm_half_products(KILN_BF16, ta, tb, m, n, k, a, lda, b, ldb, fc) == 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float v = have ? fc[i * n + j] : kiln_gemm_half_dot(KILN_BF16, ta, tb, i, j, k, a, lda, b, ldb);
      c[i * ldc + j] = c0[i * ldc + j] + kbf16r(v) * alpha; /* the unfused kernels' two roundings */
    }
  free(fc);
}

/* i32: the rows of C accumulate in uint32 (wrapping, vectorizable), a row
 * of op(A) times op(B) read row by row (op(B) transposed: by element). */
static void gemm_i32(int ta, int tb, int64_t m, int64_t n, int64_t k, const int32_t *a, int64_t lda,
                     const int32_t *b, int64_t ldb, int32_t *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++) {
    uint32_t *cr = (uint32_t *)(c + i * ldc);
    memset(cr, 0, sizeof *cr * (size_t)n);
    for (int64_t q = 0; q < k; q++) {
      uint32_t x = (uint32_t)a[at(ta, i, q, lda)];
      if (!x) continue;
      if (!tb) {
        const int32_t *br = b + q * ldb;
        for (int64_t j = 0; j < n; j++) cr[j] += x * (uint32_t)br[j];
      } else {
        for (int64_t j = 0; j < n; j++) cr[j] += x * (uint32_t)b[j * ldb + q];
      }
    }
  }
}

static void gemm_i64(int ta, int tb, int64_t m, int64_t n, int64_t k, const int64_t *a, int64_t lda,
                     const int64_t *b, int64_t ldb, int64_t *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++) {
    uint64_t *cr = (uint64_t *)(c + i * ldc);
    memset(cr, 0, sizeof *cr * (size_t)n);
    for (int64_t q = 0; q < k; q++) {
      uint64_t x = (uint64_t)a[at(ta, i, q, lda)];
      if (!x) continue;
      for (int64_t j = 0; j < n; j++) cr[j] += x * (uint64_t)b[at(tb, q, j, ldb)];
    }
  }
}

void kiln_gemm_other(int dt, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                     const void *b, int64_t ldb, void *c, int64_t ldc) {
  switch (dt) {
    case KILN_BF16:
    case KILN_F16: gemm_half(dt, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc); break;
    case KILN_I32: gemm_i32(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc); break;
    case KILN_I64: gemm_i64(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc); break;
    default: break;
  }
}
