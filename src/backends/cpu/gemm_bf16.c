/* bf16 GEMM with f32 accumulation on CPUs with AVX512_BF16 (vdpbf16ps).
 *
 * Why kiln's own kernel: Debian 12's oneDNN 2.6.3 has dnnl_gemm_bf16bf16f32,
 * but on the Sapphire Rapids machines it measured ~85 GFLOP/s on one core
 * against ~145 for its own sgemm (docs/gemm.md), and Debian's OpenBLAS
 * 0.3.21 is built without sbgemm. vdpbf16ps does 32 multiply-adds per
 * instruction where an f32 FMA does 16, so a plain register-blocked kernel
 * beats the f32 library.
 *
 * Layout (BLIS-style): B is packed per K-block into panels of NR = 32
 * columns, each k-pair (k, k+1) of a column stored adjacent (the VNNI order
 * vdpbf16ps reads: lane j gets a(2p)·b(2p, j) + a(2p+1)·b(2p+1, j)); A into
 * panels of MR = 12 rows, one 32-bit (k, k+1) pair per row and k-pair,
 * broadcast to all lanes. An odd K is padded with a zero. Products of two
 * bf16 values are exact in f32; only the order of the f32 sums differs from
 * the f32 GEMM of the same (rounded) inputs. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/gemm.h"
#include "toolchain/compiler.h" /* kiln_cpu_features */

#if defined(__x86_64__) && defined(__GNUC__) && (__GNUC__ >= 10 || defined(__clang__))
#include <immintrin.h>
#define KILN_HAVE_BF16_KERNEL 1
#endif

enum { MR = 12, NR = 32, KC = 384, MC = 96, NC = 1024 }; /* KC even: k-pairs stay inside a block */

static inline int64_t at(int t, int64_t i, int64_t j, int64_t ld) { return t ? j * ld + i : i * ld + j; }

int kiln_gemm_bf16_available(void) {
#ifdef KILN_HAVE_BF16_KERNEL
  static int avail = -1; /* a benign race: every thread computes the same value */
  int v = __atomic_load_n(&avail, __ATOMIC_RELAXED);
  if (v < 0) {
    const char *f = kiln_cpu_features();
    v = strstr(f, "avx512bf16") && strstr(f, "avx512f") && strstr(f, "avx512bw") ? 1 : 0;
    __atomic_store_n(&avail, v, __ATOMIC_RELAXED);
  }
  return v;
#else
  return 0;
#endif
}

#ifdef KILN_HAVE_BF16_KERNEL
/* rows [i0, i0+mc) x k [k0, k0+kc) of op(A) into MR-row panels of k-pairs */
static void pack_a(int ta, const uint16_t *a, int64_t lda, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                   uint16_t *pa) {
  int64_t kp = (kc + 1) / 2;
  for (int64_t r0 = 0; r0 < mc; r0 += MR) {
    uint16_t *p = pa + r0 * kp * 2;
    if (!ta && r0 + MR <= mc && kc % 2 == 0) { /* a (k, k+1) pair is one 32-bit word */
      uint32_t *w = (uint32_t *)(void *)p;
      for (int64_t r = 0; r < MR; r++) {
        const uint16_t *row = a + (i0 + r0 + r) * lda + k0;
        for (int64_t q = 0; q < kp; q++) memcpy(&w[q * MR + r], row + 2 * q, 4);
      }
      continue;
    }
    for (int64_t q = 0; q < kp; q++)
      for (int64_t r = 0; r < MR; r++, p += 2) {
        int64_t i = i0 + r0 + r, k = k0 + 2 * q;
        int in = r0 + r < mc;
        p[0] = in ? a[at(ta, i, k, lda)] : 0;
        p[1] = in && 2 * q + 1 < kc ? a[at(ta, i, k + 1, lda)] : 0;
      }
  }
}

/* One NR-column panel, k-pairs [0, kp) of a full block (2·kp == kc, all
 * NR columns in range). B not transposed: rows k and k+1 are interleaved
 * 16 columns at a time; transposed: a (k, k+1) pair is one 32-bit word. */
__attribute__((target("avx512f,avx512bw"))) static void pack_b_full(int tb, const uint16_t *b, int64_t ldb,
                                                                    int64_t k0, int64_t kp, int64_t j,
                                                                    uint16_t *p) {
  if (!tb) {
    for (int64_t q = 0; q < kp; q++, p += 2 * NR) {
      const uint16_t *r0 = b + (k0 + 2 * q) * ldb + j, *r1 = r0 + ldb;
      for (int h = 0; h < NR; h += 16) {
        __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(r0 + h)));
        __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(r1 + h)));
        _mm512_storeu_si512(p + 2 * h, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
      }
    }
    return;
  }
  uint32_t *w = (uint32_t *)(void *)p;
  for (int c = 0; c < NR; c++) {
    const uint16_t *col = b + (j + c) * ldb + k0;
    for (int64_t q = 0; q < kp; q++) memcpy(&w[q * NR + c], col + 2 * q, 4);
  }
}

/* k [k0, k0+kc) x columns [j0, j0+nc) of op(B) into NR-column panels */
static void pack_b(int tb, const uint16_t *b, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                   uint16_t *pb) {
  int64_t kp = (kc + 1) / 2;
  for (int64_t c0 = 0; c0 < nc; c0 += NR) {
    uint16_t *p = pb + c0 * kp * 2;
    if (c0 + NR <= nc && kc % 2 == 0) {
      pack_b_full(tb, b, ldb, k0, kp, j0 + c0, p);
      continue;
    }
    for (int64_t q = 0; q < kp; q++)
      for (int64_t c = 0; c < NR; c++, p += 2) {
        int64_t j = j0 + c0 + c, k = k0 + 2 * q;
        int in = c0 + c < nc;
        p[0] = in ? b[at(tb, k, j, ldb)] : 0;
        p[1] = in && 2 * q + 1 < kc ? b[at(tb, k + 1, j, ldb)] : 0;
      }
  }
}

/* tile[MR][NR] = sum over kp pairs; acc: add to C (rows mr, cols nr) */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void micro(int64_t kp, const uint16_t *pa,
                                                                         const uint16_t *pb, float *c, int64_t ldc,
                                                                         int mr, int nr, int acc) {
  __m512 s[MR][2];
#pragma GCC unroll 12
  for (int r = 0; r < MR; r++) s[r][0] = s[r][1] = _mm512_setzero_ps();
  const int32_t *A = (const int32_t *)(const void *)pa;
  for (int64_t q = 0; q < kp; q++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(pb + q * NR * 2);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(pb + q * NR * 2 + 32);
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
      __m512bh av = (__m512bh)_mm512_set1_epi32(A[q * MR + r]);
      s[r][0] = _mm512_dpbf16_ps(s[r][0], av, b0);
      s[r][1] = _mm512_dpbf16_ps(s[r][1], av, b1);
    }
  }
  if (mr == MR && nr == NR) {
    for (int r = 0; r < MR; r++) {
      float *cr = c + r * ldc;
      if (acc) {
        s[r][0] = _mm512_add_ps(s[r][0], _mm512_loadu_ps(cr));
        s[r][1] = _mm512_add_ps(s[r][1], _mm512_loadu_ps(cr + 16));
      }
      _mm512_storeu_ps(cr, s[r][0]);
      _mm512_storeu_ps(cr + 16, s[r][1]);
    }
    return;
  }
  float t[MR][NR];
  for (int r = 0; r < MR; r++) {
    _mm512_storeu_ps(t[r], s[r][0]);
    _mm512_storeu_ps(t[r] + 16, s[r][1]);
  }
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nr; j++) c[r * ldc + j] = acc ? c[r * ldc + j] + t[r][j] : t[r][j];
}

static void block(int64_t mc, int64_t nc, int64_t kc, const uint16_t *pa, const uint16_t *pb, float *c,
                  int64_t ldc, int acc) {
  int64_t kp = (kc + 1) / 2;
  for (int64_t j = 0; j < nc; j += NR)
    for (int64_t i = 0; i < mc; i += MR) {
      int mr = (int)(mc - i < MR ? mc - i : MR), nr = (int)(nc - j < NR ? nc - j : NR);
      micro(kp, pa + i * kp * 2, pb + j * kp * 2, c + i * ldc + j, ldc, mr, nr, acc);
    }
}
#endif

int kiln_gemm_bf16(int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                   const uint16_t *b, int64_t ldb, float *c, int64_t ldc) {
#ifdef KILN_HAVE_BF16_KERNEL
  if (!kiln_gemm_bf16_available()) return -1;
  if (m <= 0 || n <= 0) return 0;
  if (k <= 0) {
    for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, sizeof *c * (size_t)n);
    return 0;
  }
  int64_t mcap = (m < MC ? m : MC) + MR, ncap = (n < NC ? n : NC) + NR, kcap = (k < KC ? k : KC) + 2;
  uint16_t *pa = aligned_alloc(64, (size_t)((mcap * kcap * 2 + 63) / 64 * 64));
  uint16_t *pb = aligned_alloc(64, (size_t)((ncap * kcap * 2 + 63) / 64 * 64));
  if (!pa || !pb) {
    free(pa);
    free(pb);
    return -1;
  }
  for (int64_t j0 = 0; j0 < n; j0 += NC) {
    int64_t nc = n - j0 < NC ? n - j0 : NC;
    for (int64_t k0 = 0; k0 < k; k0 += KC) {
      int64_t kc = k - k0 < KC ? k - k0 : KC;
      pack_b(tb, b, ldb, k0, kc, j0, nc, pb);
      for (int64_t i0 = 0; i0 < m; i0 += MC) {
        int64_t mc = m - i0 < MC ? m - i0 : MC;
        pack_a(ta, a, lda, i0, mc, k0, kc, pa);
        block(mc, nc, kc, pa, pb, c + i0 * ldc + j0, ldc, k0 > 0);
      }
    }
  }
  free(pa);
  free(pb);
  return 0;
#else
  (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
  return -1;
#endif
}
