/* bf16 GEMM with f32 accumulation on CPUs with AVX512_BF16 (vdpbf16ps).
 *
 * Why kiln's own kernel: Debian 12's oneDNN 2.6.3 has dnnl_gemm_bf16bf16f32,
 * but without AMX it measured ~85 GFLOP/s on one core against ~145 for its
 * own sgemm (docs/gemm.md; with AMX it is the faster, and used: gemm.c,
 * kiln_gemm_bf16_onednn), and Debian's OpenBLAS 0.3.21 is built without
 * sbgemm.
 * vdpbf16ps does 32 multiply-adds per instruction where an f32 FMA does 16:
 * where it issues at the FMA's rate (AMD Zen 4: 232 vs 114 GFLOP/s on one
 * core, register-only loops) the kernel beats the f32 library; where it
 * issues at half of it (Intel Sapphire Rapids: 78.5 vs 156.8) it does not.
 * kiln_gemm_bf16_preferred() says which (docs/gemm.md, "bf16").
 *
 * C comes out in f32 or, rounded to nearest even, in bf16: with K in one
 * block (K <= KC, the common case) the micro-kernel rounds its registers
 * and stores 16-bit values, so a bf16 GEMM needs no f32 copy of C.
 *
 * Layout (BLIS-style): B is packed per K-block into panels of NR = 32
 * columns, each k-pair (k, k+1) of a column stored adjacent (the VNNI order
 * vdpbf16ps reads: lane j gets a(2p)·b(2p, j) + a(2p+1)·b(2p+1, j)); A into
 * panels of MR = 12 rows, one 32-bit (k, k+1) pair per row and k-pair,
 * broadcast to all lanes. An odd K is padded with a zero. Products of two
 * bf16 values are exact in f32; only the order of the f32 sums differs from
 * the f32 GEMM of the same (rounded) inputs.
 *
 * vdpbf16ps treats subnormal inputs and results as zero (its DAZ and FTZ are
 * fixed, whatever MXCSR says), where f32 arithmetic, ref and PyTorch keep
 * them: a tile whose packed A and B blocks hold a subnormal, or values small
 * enough that a product or a partial sum could be one, is computed by the
 * library's sgemm on f32 copies instead (exact_tile; counter
 * Bf16GemmExactTiles). Real data almost never gets there. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/gemm.h"
#include "base/config.h"
#include "base/counters.h"
#include "ir/scalar.h"          /* kf32_bf16 */
#include "toolchain/compiler.h" /* kiln_cpu_features, kiln_cpu_is_amd */

#if defined(__x86_64__) && defined(__GNUC__) && (__GNUC__ >= 10 || defined(__clang__))
#include <immintrin.h>
#define KILN_HAVE_BF16_KERNEL 1
#endif

/* KC even: k-pairs stay inside a block. K up to KC is one block: the packed
 * A block (MC x KC) stays in L2 and one B panel (KC x NR, 128 KiB at most)
 * is read from L2 by every micro-kernel call of a column panel. MR x NR: 24
 * accumulators of 16 lanes; 6 x 64 and 14 x 32 measured the same on Zen 4
 * (190-206 GFLOP/s on one core, 85-89% of vdpbf16ps's peak), 8 x 48 slower,
 * K blocks of 256 or 512 slower than one block, MC of 144 or 192 slower. */
enum { MR = 12, NR = 32, NV = NR / 16, KC = 2048, MC = 8 * MR, NC = 512 };
/* how a micro-kernel stores C: f32, added to f32, rounded to bf16, or as the
 * f32 update C0 + alpha·bf16(sum) */
enum { ST_F32, ST_F32_ACC, ST_BF16, ST_UPD };

static inline int64_t at(int t, int64_t i, int64_t j, int64_t ld) { return t ? j * ld + i : i * ld + j; }

int kiln_gemm_bf16_available(void) {
#ifdef KILN_HAVE_BF16_KERNEL
  static int avail = -1; /* a benign race: every thread computes the same value */
  int v = __atomic_load_n(&avail, __ATOMIC_RELAXED);
  if (v < 0) {
    const char *f = kiln_cpu_features();
    v = strstr(f, "avx512bf16") && strstr(f, "avx512f") && strstr(f, "avx512bw") && strstr(f, "avx512vl") ? 1 : 0;
    __atomic_store_n(&avail, v, __ATOMIC_RELAXED);
  }
  return v;
#else
  return 0;
#endif
}

/* Vendor rule, not a timing: a choice made by measuring at run time could
 * differ between two runs of one program on a busy machine, and the two
 * paths sum in different orders (different last bits). Every AMD CPU with
 * AVX512_BF16 (Zen 4 on) issues vdpbf16ps at the FMA's rate (twice its
 * flops); the Intel ones measured (Sapphire Rapids) at a quarter of it.
 * Where oneDNN's bf16 GEMM runs on AMX it is preferred to both (gemm.c).
 * KILN_GEMM_BF16=kernel|library|onednn overrides. */
int kiln_gemm_bf16_preferred(void) {
  if (!kiln_gemm_bf16_available()) return 0;
  const char *want = kiln_cfg()->gemm_bf16;
  if (want && !strcmp(want, "kernel")) return 1;
  if (want && (!strcmp(want, "library") || !strcmp(want, "onednn"))) return 0;
  if (kiln_gemm_bf16_onednn_wanted()) return 0; /* AMX (gemm.c) */
  if (!strcmp(kiln_gemm_library(), "naive")) return 1;
  return kiln_cpu_is_amd();
}

/* Whether vdpbf16ps (and AMX) computes a tile of blocks with smallest exponent fields
 * ea, eb as f32 arithmetic does: no subnormal input (field 0), and every
 * nonzero product and partial sum normal. A bf16 value with field e is a
 * multiple of 2^(e-134), so products and their sums (exact, or rounded to
 * an ulp at least as large) are multiples of 2^(ea+eb-268): at least 2^-126
 * when ea + eb >= 142. */
static inline int kernel_exact(int ea, int eb) { return ea > 0 && eb > 0 && ea + eb >= 142; }

#ifdef KILN_HAVE_BF16_KERNEL
/* 16 x 16 32-bit words: r[i] holds 16 words of row i in, r[x] of the
 * output holds word x of the 16 rows; the unpacks leave the words q+1 and
 * q+2 of a 4-group swapped and the lane shuffles keep order, so output x
 * is word qof[x] (transpose16_word) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void transpose16(__m512i *r) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) { /* 2x2 blocks of words */
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) /* 4x4 */
    for (int h = 0; h < 2; h++) {
      r[i + h] = _mm512_unpacklo_epi64(t[i + h], t[i + h + 2]);
      r[i + h + 2] = _mm512_unpackhi_epi64(t[i + h], t[i + h + 2]);
    }
  for (int i = 0; i < 16; i += 8) /* 8x8: 128-bit lanes */
    for (int h = 0; h < 4; h++) {
      t[i + h] = _mm512_shuffle_i32x4(r[i + h], r[i + h + 4], 0x88);
      t[i + h + 4] = _mm512_shuffle_i32x4(r[i + h], r[i + h + 4], 0xdd);
    }
  for (int h = 0; h < 8; h++) { /* 16x16 */
    r[h] = _mm512_shuffle_i32x4(t[h], t[h + 8], 0x88);
    r[h + 8] = _mm512_shuffle_i32x4(t[h], t[h + 8], 0xdd);
  }
}
static const int transpose16_word[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};

/* Source lines asked for this far ahead (64-byte lines): the packs walk
 * rows a line at a time, rows 2 KiB or more apart, which the hardware
 * prefetchers follow poorly (a pack ran at ~5 GB/s) */
enum { PF_LINES = 4 };

/* Full MR-row panels of A stored [M][K] (not transposed), k-pairs [0, kp)
 * from k0, rows i..i+rows (a multiple of MR): a (k, k+1) pair is one
 * 32-bit word, the panel the transpose of the rows' words, 16 at a time
 * (the 16 x 16 transpose with MR of its rows) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void pack_a_rows(const uint16_t *a, int64_t lda,
                                                                             int64_t i, int64_t rows, int64_t k0,
                                                                             int64_t kp, uint16_t *p) {
  for (int64_t r0 = 0; r0 < rows; r0 += MR) {
    uint32_t *w = (uint32_t *)(void *)(p + r0 * kp * 2);
    const uint16_t *base = a + (i + r0) * lda + k0;
    int64_t q0 = 0;
    for (; q0 + 16 <= kp; q0 += 16) {
      __m512i r[16];
      for (int x = 0; x < MR; x++) {
        const uint16_t *row = base + x * lda + 2 * q0;
        _mm_prefetch((const char *)(row + 32 * PF_LINES), _MM_HINT_T0);
        r[x] = _mm512_loadu_si512(row);
      }
      for (int x = MR; x < 16; x++) r[x] = _mm512_setzero_si512();
      transpose16(r);
      for (int x = 0; x < 16; x++) _mm512_mask_storeu_epi32(w + (q0 + transpose16_word[x]) * MR, (1u << MR) - 1, r[x]);
    }
    for (int64_t x = 0; x < MR; x++)
      for (int64_t q = q0; q < kp; q++) memcpy(&w[q * MR + x], base + x * lda + 2 * q, 4);
  }
}

/* Full MR-row panels [i, i+rows) (rows a multiple of MR) of a transposed
 * A (stored [K][M]): rows k and k+1 of the stored matrix interleaved, MR
 * (12) values at a time, a pair of rows into every panel before the next
 * pair (the rows are read in order, not a 24-byte column down K) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void pack_a_trans(const uint16_t *a, int64_t lda,
                                                                              int64_t i, int64_t rows, int64_t k0,
                                                                              int64_t kp, uint16_t *p) {
  for (int64_t q = 0; q < kp; q++) {
    const uint16_t *r0 = a + (k0 + 2 * q) * lda + i, *r1 = r0 + lda;
    for (int64_t x = 0; x < rows; x += MR) {
      __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16((1u << MR) - 1, r0 + x));
      __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16((1u << MR) - 1, r1 + x));
      _mm512_mask_storeu_epi32(p + x * kp * 2 + q * 2 * MR, (1u << MR) - 1,
                               _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

/* rows [i0, i0+mc) x k [k0, k0+kc) of op(A) into MR-row panels of k-pairs */
static void pack_a(int ta, const uint16_t *a, int64_t lda, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                   uint16_t *pa) {
  int64_t kp = (kc + 1) / 2, full = kc % 2 == 0 ? mc / MR * MR : 0;
  if (full) (ta ? pack_a_trans : pack_a_rows)(a, lda, i0, full, k0, kp, pa);
  for (int64_t r0 = full; r0 < mc; r0 += MR) {
    uint16_t *p = pa + r0 * kp * 2;
    for (int64_t q = 0; q < kp; q++)
      for (int64_t r = 0; r < MR; r++, p += 2) {
        int64_t i = i0 + r0 + r, k = k0 + 2 * q;
        int in = r0 + r < mc;
        p[0] = in ? a[at(ta, i, k, lda)] : 0;
        p[1] = in && 2 * q + 1 < kc ? a[at(ta, i, k + 1, lda)] : 0;
      }
  }
}

/* The smallest nonzero magnitude (the bits below the sign) of bf16 values,
 * kept while packing as its value minus 1 in 16-bit lanes, so that a zero
 * (0 - 1 = 0xffff) never wins: one and, one subtract, one min per 32
 * values. mag_field turns it into the smallest exponent field (255 when
 * every value is zero; 0: a subnormal). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m512i mag_add(__m512i lo, __m512i v) {
  return _mm512_min_epu16(lo, _mm512_sub_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x7fff)), _mm512_set1_epi16(1)));
}
static inline unsigned mag_one(unsigned lo, uint16_t h) {
  unsigned m = (unsigned)(uint16_t)((h & 0x7fffu) - 1u);
  return m < lo ? m : lo;
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) static int mag_field(__m512i lo, unsigned m) {
  uint16_t w[32];
  _mm512_storeu_si512(w, lo);
  for (int x = 0; x < 32; x++) m = w[x] < m ? w[x] : m;
  return m == 0xffffu ? 0xff : (int)((m + 1) >> 7);
}

/* NR-column panels [j, j+cols) (cols a multiple of NR), k-pairs [0, kp)
 * of a full block (2·kp == kc). B not transposed: rows k and k+1 are
 * interleaved 16 columns at a time, a pair of rows into every panel before
 * the next pair (the rows are read in order); transposed: a (k, k+1) pair
 * is one 32-bit word, a panel the transpose of NR rows of those words. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static int pack_b_full(int tb, const uint16_t *b, int64_t ldb,
                                                                            int64_t k0, int64_t kp, int64_t j,
                                                                            int64_t cols, uint16_t *p) {
  __m512i em = _mm512_set1_epi16(-1);
  unsigned m = 0xffffu;
  if (!tb) {
    for (int64_t q = 0; q < kp; q++) {
      const uint16_t *r0 = b + (k0 + 2 * q) * ldb + j, *r1 = r0 + ldb;
      for (int64_t c0 = 0; c0 < cols; c0 += NR) {
        uint16_t *o = p + c0 * kp * 2 + q * 2 * NR;
        for (int h = 0; h < NR; h += 16) {
          __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(r0 + c0 + h)));
          __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(r1 + c0 + h)));
          __m512i w = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
          em = mag_add(em, w);
          _mm512_storeu_si512(o + 2 * h, w);
        }
      }
    }
    return mag_field(em, m);
  }
  for (int64_t c0 = 0; c0 < cols; c0 += NR) {
    uint32_t *w = (uint32_t *)(void *)(p + c0 * kp * 2);
    int64_t q0 = 0;
    for (int c = 0; c < NR; c += 16)
      for (q0 = 0; q0 + 16 <= kp; q0 += 16) {
        __m512i r[16];
        for (int i = 0; i < 16; i++) {
          const uint16_t *row = b + (j + c0 + c + i) * ldb + k0 + 2 * q0;
          _mm_prefetch((const char *)(row + 32 * PF_LINES), _MM_HINT_T0);
          r[i] = _mm512_loadu_si512(row);
          em = mag_add(em, r[i]);
        }
        transpose16(r);
        for (int x = 0; x < 16; x++) _mm512_storeu_si512(w + (q0 + transpose16_word[x]) * NR + c, r[x]);
      }
    for (int c = 0; c < NR; c++) {
      const uint16_t *col = b + (j + c0 + c) * ldb + k0;
      for (int64_t q = q0; q < kp; q++) {
        memcpy(&w[q * NR + c], col + 2 * q, 4);
        m = mag_one(mag_one(m, col[2 * q]), col[2 * q + 1]);
      }
    }
  }
  return mag_field(em, m);
}

/* k [k0, k0+kc) x columns [j0, j0+nc) of op(B) into NR-column panels;
 * returns the block's smallest exponent field (mag_field) */
static int pack_b(int tb, const uint16_t *b, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                  uint16_t *pb) {
  int64_t kp = (kc + 1) / 2, full = kc % 2 == 0 ? nc / NR * NR : 0;
  int m = full ? pack_b_full(tb, b, ldb, k0, kp, j0, full, pb) : 0xff;
  unsigned mm = 0xffffu;
  for (int64_t c0 = full; c0 < nc; c0 += NR) {
    uint16_t *p = pb + c0 * kp * 2;
    for (int64_t q = 0; q < kp; q++)
      for (int64_t c = 0; c < NR; c++, p += 2) {
        int64_t j = j0 + c0 + c, k = k0 + 2 * q;
        int in = c0 + c < nc;
        p[0] = in ? b[at(tb, k, j, ldb)] : 0;
        p[1] = in && 2 * q + 1 < kc ? b[at(tb, k + 1, j, ldb)] : 0;
        mm = mag_one(mag_one(mm, p[0]), p[1]);
      }
  }
  int f = mm == 0xffffu ? 0xff : (int)((mm + 1) >> 7);
  return f < m ? f : m;
}

/* f32 lanes to bf16, nearest even, a NaN to the quiet 0x7fc0: kf32_bf16's
 * arithmetic, 16 at a time */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m512i round_bf16_lanes(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  return _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m256i round_bf16(__m512 v) {
  return _mm512_cvtepi32_epi16(round_bf16_lanes(v));
}
/* c0 + alpha·bf16(v) in f32: the unfused kernels' two roundings (a product, a sum) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m512 upd_lanes(__m512 v, __m512 c0,
                                                                                    __m512 alpha) {
  __m512 g = _mm512_castsi512_ps(_mm512_slli_epi32(round_bf16_lanes(v), 16));
  return _mm512_add_ps(c0, _mm512_mul_ps(g, alpha));
}
static inline float upd_one(float v, float c0, float alpha) { return c0 + kbf16r(v) * alpha; }

/* tile[MR][NR] = sum over kp pairs, stored into C (rows mr, cols nr) as st
 * says: f32, added to f32, rounded to bf16, or the update c0 + alpha·bf16 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void micro(int64_t kp, const uint16_t *pa,
                                                                                  const uint16_t *pb, void *cv,
                                                                                  int64_t ldc, int mr, int nr,
                                                                                  int st, const float *c0,
                                                                                  float alpha) {
  /* the tile's rows of C (and of C0) are 4 KiB or more apart, a pattern the
   * hardware prefetchers miss: asked for now, they arrive while the sums
   * run (the fused update's loads of C0 stalled the kernel twice over) */
  size_t es = st == ST_BF16 ? 2 : 4;
  if (mr == MR && nr == NR)
    for (int r = 0; r < MR; r++) {
      const char *row = st == ST_UPD ? (const char *)(c0 + r * ldc) : (const char *)cv + (size_t)(r * ldc) * es;
      for (size_t v = 0; v < NR * es; v += 64) _mm_prefetch(row + v, _MM_HINT_T0);
    }
  __m512 s[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) s[r][v] = _mm512_setzero_ps();
  const int32_t *A = (const int32_t *)(const void *)pa;
  for (int64_t q = 0; q < kp; q++) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = (__m512bh)_mm512_loadu_si512(pb + q * NR * 2 + 32 * v);
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      __m512bh av = (__m512bh)_mm512_set1_epi32(A[q * MR + r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) s[r][v] = _mm512_dpbf16_ps(s[r][v], av, bv[v]);
    }
  }
  /* the rows and columns in range, 16 lanes at a time (masked at an edge) */
  for (int r = 0; r < mr; r++) {
    for (int v = 0; v < NV; v++) {
      int lanes = nr - 16 * v;
      if (lanes <= 0) break;
      __mmask16 k = lanes >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << lanes) - 1);
      if (st == ST_BF16) {
        _mm256_mask_storeu_epi16((uint16_t *)cv + r * ldc + 16 * v, k, round_bf16(s[r][v]));
        continue;
      }
      float *cr = (float *)cv + r * ldc + 16 * v;
      __m512 x = s[r][v];
      if (st == ST_F32_ACC) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, cr));
      if (st == ST_UPD) x = upd_lanes(x, _mm512_maskz_loadu_ps(k, c0 + r * ldc + 16 * v), _mm512_set1_ps(alpha));
      _mm512_mask_storeu_ps(cr, k, x);
    }
  }
}

static void block(int64_t mc, int64_t nc, int64_t kc, const uint16_t *pa, const uint16_t *pb, void *c,
                  int64_t ldc, int st, const float *c0, float alpha) {
  int64_t kp = (kc + 1) / 2;
  size_t es = st == ST_BF16 ? 2 : 4;
  for (int64_t i = 0; i < mc; i += MR)
    for (int64_t j = 0; j < nc; j += NR) {
      int mr = (int)(mc - i < MR ? mc - i : MR), nr = (int)(nc - j < NR ? nc - j : NR);
      micro(kp, pa + i * kp * 2, pb + j * kp * 2, (char *)c + (size_t)(i * ldc + j) * es, ldc, mr, nr, st,
            c0 ? c0 + i * ldc + j : NULL, alpha);
    }
}

/* The smallest exponent field of the nonzero values of n packed bf16 words
 * (255 when all are zero or padding; 0: a subnormal): of a packed A block,
 * which is small (B's is kept while packing, pack_b). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static int min_exponent(const uint16_t *p, int64_t n) {
  __m512i lo = _mm512_set1_epi16(-1);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) lo = mag_add(lo, _mm512_loadu_si512(p + i));
  unsigned m = 0xffffu;
  for (; i < n; i++) m = mag_one(m, p[i]);
  return mag_field(lo, m);
}

/* Rows [i0, i0+mc) x columns [j0, j0+nc) of op(A) op(B) over k [k0, k0+kc)
 * in f32 (the library's sgemm on f32 copies, or f32 dot products without
 * memory for them), stored as the micro-kernel stores a tile (st, c0, alpha;
 * c and c0 at the tile's corner). */
static void exact_tile(int ta, int tb, const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, int64_t i0,
                       int64_t mc, int64_t j0, int64_t nc, int64_t k0, int64_t kc, void *c, int64_t ldc, int st,
                       const float *c0, float alpha) {
  kiln_counter_add("Bf16GemmExactTiles", 1);
  const uint16_t *at_a = a + at(ta, i0, k0, lda), *at_b = b + at(tb, k0, j0, ldb); /* the tile's blocks */
  float *fc = malloc(sizeof(float) * (size_t)(mc * nc) + 1);
  int have = fc && kiln_gemm_half_products(KILN_BF16, ta, tb, mc, nc, kc, at_a, lda, at_b, ldb, fc) == 0;
  for (int64_t i = 0; i < mc; i++)
    for (int64_t j = 0; j < nc; j++) {
      float v = have ? fc[i * nc + j] : kiln_gemm_half_dot(KILN_BF16, ta, tb, i, j, kc, at_a, lda, at_b, ldb);
      if (st == ST_BF16) ((uint16_t *)c)[i * ldc + j] = kf32_bf16(v);
      else if (st == ST_UPD) ((float *)c)[i * ldc + j] = upd_one(v, c0[i * ldc + j], alpha);
      else if (st == ST_F32_ACC) ((float *)c)[i * ldc + j] += v;
      else ((float *)c)[i * ldc + j] = v;
    }
  free(fc);
}

/* C = op(A) op(B), K in blocks of KC, the packed panels in pa, pb: f32, or
 * stored as st says (ST_BF16, ST_UPD: c0, alpha) only with K in one block
 * (gemm_bf16 sends a longer K through f32 sums) */
static void run_blocks(int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                       const uint16_t *b, int64_t ldb, void *c, int64_t ldc, int st, const float *c0,
                       float alpha, uint16_t *pa, uint16_t *pb) {
  size_t es = st == ST_BF16 ? 2 : 4;
  for (int64_t j0 = 0; j0 < n; j0 += NC) {
    int64_t nc = n - j0 < NC ? n - j0 : NC;
    for (int64_t k0 = 0; k0 < k; k0 += KC) {
      int64_t kc = k - k0 < KC ? k - k0 : KC;
      int64_t kp = (kc + 1) / 2;
      int eb = pack_b(tb, b, ldb, k0, kc, j0, nc, pb);
      for (int64_t i0 = 0; i0 < m; i0 += MC) {
        int64_t mc = m - i0 < MC ? m - i0 : MC;
        int tst = st != ST_F32 ? st : k0 > 0 ? ST_F32_ACC : ST_F32;
        void *ct = (char *)c + (size_t)(i0 * ldc + j0) * es;
        const float *c0t = c0 ? c0 + i0 * ldc + j0 : NULL;
        pack_a(ta, a, lda, i0, mc, k0, kc, pa);
        if (kernel_exact(min_exponent(pa, (mc + MR - 1) / MR * MR * kp * 2), eb))
          block(mc, nc, kc, pa, pb, ct, ldc, tst, c0t, alpha);
        else
          exact_tile(ta, tb, a, lda, b, ldb, i0, mc, j0, nc, k0, kc, ct, ldc, tst, c0t, alpha);
      }
    }
  }
}
#endif

/* The smallest exponent field of a stored bf16 matrix (rows x cols,
 * leading dimension ld) as mag_field gives it: 255 when every value is zero,
 * 0 when one is subnormal; each row by min_exponent where AVX-512 runs */
static int min_field_rows(const uint16_t *x, int64_t rows, int64_t cols, int64_t ld) {
  int lo = 0xff;
#ifdef KILN_HAVE_BF16_KERNEL
  if (kiln_gemm_bf16_available()) {
    for (int64_t r = 0; r < rows && lo; r++) {
      int e = min_exponent(x + r * ld, cols);
      lo = e < lo ? e : lo;
    }
    return lo;
  }
#endif
  for (int64_t r = 0; r < rows && lo; r++)
    for (int64_t c = 0; c < cols; c++) {
      int e = (x[r * ld + c] >> 7) & 0xff;
      if ((x[r * ld + c] & 0x7fff) && e < lo) lo = e;
    }
  return lo;
}

int kiln_gemm_bf16_flush_exact(int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                               const uint16_t *b, int64_t ldb) {
  /* kernel_exact over the whole operands; 255 (all zero, or infinities and
   * NaNs only) is no exception: Inf times a flushed subnormal would be NaN */
  int ea = min_field_rows(a, ta ? k : m, ta ? m : k, lda);
  if (ea == 0) return 0;
  return kernel_exact(ea, min_field_rows(b, tb ? n : k, tb ? k : n, ldb));
}

#ifdef KILN_HAVE_BF16_KERNEL
/* The packed panels, kept per thread between calls: a fresh aligned_alloc
 * of ~2 MiB per call was returned to the system and faulted in again page
 * by page (~7% of a [128 x 1024 x 1024] GEMM). At most (MC+MR)·(KC+2) +
 * (NC+NR)·(KC+2) 16-bit values (~2.7 MiB) a thread that ran a bf16 GEMM;
 * freed when the thread ends (the key's destructor). */
typedef struct pack_scratch {
  uint16_t *p[2];
  size_t cap[2];
  int keyed;
} pack_scratch;
static __thread pack_scratch tl_pack;
static pthread_key_t g_pack_key;
static pthread_once_t g_pack_once = PTHREAD_ONCE_INIT;
static int g_pack_key_ok;

static void pack_scratch_free(void *v) {
  pack_scratch *s = v;
  for (int i = 0; i < 2; i++) free(s->p[i]), s->p[i] = NULL, s->cap[i] = 0;
}
static void pack_key_make(void) { g_pack_key_ok = pthread_key_create(&g_pack_key, pack_scratch_free) == 0; }

/* this thread's buffer i of at least bytes (64-aligned), NULL when out of memory */
static uint16_t *pack_buffer(int i, size_t bytes) {
  pack_scratch *s = &tl_pack;
  if (!s->keyed) {
    pthread_once(&g_pack_once, pack_key_make);
    if (g_pack_key_ok && pthread_setspecific(g_pack_key, s) == 0) s->keyed = 1;
  }
  if (s->cap[i] >= bytes) return s->p[i];
  bytes = (bytes + 63) / 64 * 64;
  uint16_t *p = aligned_alloc(64, bytes);
  if (!p) return NULL;
  free(s->p[i]);
  s->p[i] = p, s->cap[i] = bytes;
  return p;
}
#endif

/* The driver: C (ldc) stored as st says; past one K block through an f32
 * copy of the sums, finished element by element */
static int gemm_bf16(int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                     const uint16_t *b, int64_t ldb, void *c, int64_t ldc, int st, const float *c0, float alpha) {
#ifdef KILN_HAVE_BF16_KERNEL
  if (!kiln_gemm_bf16_available()) return -1;
  if (m <= 0 || n <= 0) return 0;
  int split = st != ST_F32 && k > KC;
  float *fc = split || k <= 0 ? malloc(sizeof(float) * (size_t)(m * n) + 1) : NULL;
  if ((split || k <= 0) && !fc) return -1;
  if (k <= 0) {
    memset(fc, 0, sizeof(float) * (size_t)(m * n));
  } else {
    int64_t mcap = (m < MC ? m : MC) + MR, ncap = (n < NC ? n : NC) + NR, kcap = (k < KC ? k : KC) + 2;
    uint16_t *pa = pack_buffer(0, (size_t)(mcap * kcap * 2));
    uint16_t *pb = pa ? pack_buffer(1, (size_t)(ncap * kcap * 2)) : NULL;
    if (!pa || !pb) {
      free(fc);
      return -1;
    }
    if (fc) run_blocks(ta, tb, m, n, k, a, lda, b, ldb, fc, n, ST_F32, NULL, 0, pa, pb);
    else run_blocks(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, st, c0, alpha, pa, pb);
  }
  if (fc) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        float v = fc[i * n + j];
        if (st == ST_BF16) ((uint16_t *)c)[i * ldc + j] = kf32_bf16(v);
        else if (st == ST_UPD) ((float *)c)[i * ldc + j] = upd_one(v, c0[i * ldc + j], alpha);
        else ((float *)c)[i * ldc + j] = v;
      }
    free(fc);
  }
  return 0;
#else
  (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc,
      (void)st, (void)c0, (void)alpha;
  return -1;
#endif
}

int kiln_gemm_bf16(int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                   const uint16_t *b, int64_t ldb, void *c, int64_t ldc, int c_bf16) {
  return gemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, c_bf16 ? ST_BF16 : ST_F32, NULL, 0);
}

int kiln_gemm_bf16_upd(int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                       const uint16_t *b, int64_t ldb, float *c, int64_t ldc, const float *c0, float alpha) {
  return gemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, ST_UPD, c0, alpha);
}
