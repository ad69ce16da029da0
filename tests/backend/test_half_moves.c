/* 16-bit floats moved without arithmetic keep their bits on every backend:
 * a NaN's sign, payload and signaling bit, infinities, subnormals and -0
 * come out as they went in through permute, flip, slice, concat, pad,
 * gather, index_select, where, expand, scatter, tril and roll, alone, fused
 * with a select on both sides, and chained; and beside computed values in
 * one where or concat, in a loop kernel and in a reduction's row kernel.
 * PyTorch moves bf16 and f16 tensors by copying their bits, and so does
 * ref; the compiled kernels compute 16-bit floats in f32, and stored a
 * bf16 NaN moved this way as the canonical 0x7fc0 and an f16 one quieted
 * (docs/semantics.md).
 *
 * The oracle is independent of kiln: each case's expected bits are the
 * source's, picked by the index arithmetic that defines the op, written out
 * here in plain loops. */
#include <kiln/kiln.h>
#include <math.h>
#include <stdlib.h>

#include "backend/backend_compare.h"

#define R 4
#define C 6
#define MAXN 64

static uint16_t g_x[R * C], g_y[R * C], g_z[R * C];
static kiln_dtype g_dt;
static int g_fused;

/* bf16 and f16 bit patterns that a trip through f32 would change or that
 * border on them: signaling and quiet NaNs of both signs with payloads,
 * infinities, subnormals, -0, the largest finite values */
static const uint16_t kBf16[] = {0x7f81, 0xffc1, 0x7fa5, 0xff80, 0x0001, 0x8000, 0x3f80, 0xc2f7,
                                 0x7f80, 0xff81, 0x7fff, 0x807f, 0x7f7f, 0xffff, 0x7fc0, 0xffc0};
static const uint16_t kF16[] = {0x7c01, 0xfe33, 0x7d55, 0xfc00, 0x0001, 0x8000, 0x3c00, 0xc5b0,
                                0x7c00, 0xfc01, 0x7fff, 0x83ff, 0x7bff, 0xffff, 0x7e00, 0xfe00};

static void fill(kiln_dtype dt) {
  const uint16_t *sp = dt == KILN_BF16 ? kBf16 : kF16;
  uint32_t s = 12345;
  for (int i = 0; i < R * C; i++) {
    s = s * 1103515245u + 12345u;
    /* specials at scattered places, ordinary finite values between them */
    uint16_t plain = (uint16_t)(dt == KILN_BF16 ? 0x3c00u + (s >> 20) % 0x0600u : 0x3000u + (s >> 20) % 0x1800u);
    g_x[i] = i % 3 != 1 ? sp[(i * 5) % 16] : plain;
    g_y[i] = i % 2 ? sp[(i * 7 + 3) % 16] : (uint16_t)(plain ^ 0x8000u);
    g_z[i] = plain;
  }
}

/* x or y as a tensor; fused: behind a select that the kernel computes with
 * the op (where(zeros != 1, x, 0)) */
static kiln_tensor src(const uint16_t *d, int rank, const int64_t *shape) {
  kiln_tensor t = kiln_from_host(d, g_dt, rank, shape);
  if (!g_fused) return t;
  return kiln_where(kiln_ne_c(kiln_zeros(KILN_I32, rank, shape), 1.0), t, kiln_zeros(g_dt, rank, shape));
}
static const int64_t kRC[2] = {R, C};
static kiln_tensor X(void) { return src(g_x, 2, kRC); }
static kiln_tensor Y(void) { return src(g_y, 2, kRC); }
static kiln_tensor ids(const int64_t *v, int rank, const int64_t *shape) {
  return kiln_from_host(v, KILN_I64, rank, shape);
}
static kiln_tensor mask(void) {
  uint8_t m[R * C];
  for (int i = 0; i < R * C; i++) m[i] = (uint8_t)((i / C + i % C) % 3 == 0);
  return kiln_from_host(m, KILN_BOOL, 2, kRC);
}
static int mask_at(int i, int j) { return (i + j) % 3 == 0; }
static uint16_t xa(int i, int j) { return g_x[i * C + j]; }
static uint16_t ya(int i, int j) { return g_y[i * C + j]; }

/* ───────────── the cases: a tensor, and its expected bits ───────────── */

typedef kiln_tensor (*build_fn)(void);
typedef int (*want_fn)(uint16_t *w); /* fills w, returns the element count */

static kiln_tensor b_permute(void) { return kiln_transpose(X(), 0, 1); }
static int w_permute(uint16_t *w) {
  for (int i = 0; i < C; i++)
    for (int j = 0; j < R; j++) w[i * R + j] = xa(j, i);
  return R * C;
}

static kiln_tensor b_flip(void) { return kiln_flip(X(), 1, (int[]){1}); }
static int w_flip(uint16_t *w) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) w[i * C + j] = xa(i, C - 1 - j);
  return R * C;
}

static kiln_tensor b_slice(void) { return kiln_slice(X(), 1, 1, C, 2); }
static int w_slice(uint16_t *w) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C / 2; j++) w[i * (C / 2) + j] = xa(i, 1 + 2 * j);
  return R * C / 2;
}

static kiln_tensor b_concat(void) {
  kiln_tensor p[2] = {X(), Y()};
  return kiln_concat(2, p, 0);
}
static int w_concat(uint16_t *w) {
  for (int i = 0; i < R * C; i++) w[i] = g_x[i], w[R * C + i] = g_y[i];
  return 2 * R * C;
}

/* the pad value 2.5 is 0x4020 in bf16, 0x4100 in f16 */
static const int64_t kLo[2] = {0, 1}, kHi[2] = {0, 2};
static kiln_tensor b_pad(void) { return kiln_pad(X(), kLo, kHi, 2.5); }
static int w_pad(uint16_t *w) {
  uint16_t p = g_dt == KILN_BF16 ? 0x4020 : 0x4100;
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C + 3; j++) w[i * (C + 3) + j] = j == 0 || j > C ? p : xa(i, j - 1);
  return R * (C + 3);
}

/* a NaN pad value is a constant: bf16's canonical 0x7fc0, f16's keeps the sign (F.pad(x, (1, 2), value=-nan)
 * in PyTorch 1.13: 0x7fc0 / 0xfe00; docs/semantics.md) */
static kiln_tensor b_pad_nan(void) { return kiln_pad(X(), kLo, kHi, -NAN); }
static int w_pad_nan(uint16_t *w) {
  uint16_t p = g_dt == KILN_BF16 ? 0x7fc0 : 0xfe00;
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C + 3; j++) w[i * (C + 3) + j] = j == 0 || j > C ? p : xa(i, j - 1);
  return R * (C + 3);
}

static const int64_t kG[R * 3] = {5, 0, 3, 1, 1, 4, 2, 5, 0, 3, 3, 3};
static kiln_tensor b_gather(void) { return kiln_gather(X(), 1, ids(kG, 2, (int64_t[]){R, 3})); }
static int w_gather(uint16_t *w) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < 3; j++) w[i * 3 + j] = xa(i, (int)kG[i * 3 + j]);
  return R * 3;
}

static const int64_t kS[3] = {3, 0, 2};
static kiln_tensor b_index_select(void) { return kiln_index_select(X(), 0, ids(kS, 1, (int64_t[]){3})); }
static int w_index_select(uint16_t *w) {
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < C; j++) w[i * C + j] = xa((int)kS[i], j);
  return 3 * C;
}

static kiln_tensor b_where(void) { return kiln_where(mask(), X(), Y()); }
static int w_where(uint16_t *w) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) w[i * C + j] = mask_at(i, j) ? xa(i, j) : ya(i, j);
  return R * C;
}

static const int64_t k3C[2] = {3, C};
static kiln_tensor b_expand(void) { return kiln_expand(kiln_slice(X(), 0, 0, 1, 1), 2, k3C); }
static int w_expand(uint16_t *w) {
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < C; j++) w[i * C + j] = xa(0, j); /* row 0 holds NaNs */
  return 3 * C;
}

/* every column's two targets differ, so no write depends on the order */
static const int64_t kT[2 * C] = {1, 3, 0, 2, 3, 1, 2, 0, 3, 3, 1, 0};
static kiln_tensor b_scatter(void) {
  return kiln_scatter(X(), 0, ids(kT, 2, (int64_t[]){2, C}), kiln_slice(Y(), 0, 0, 2, 1));
}
static int w_scatter(uint16_t *w) {
  for (int i = 0; i < R * C; i++) w[i] = g_x[i];
  for (int p = 0; p < 2; p++)
    for (int j = 0; j < C; j++) w[kT[p * C + j] * C + j] = ya(p, j);
  return R * C;
}

static kiln_tensor b_tril(void) { return kiln_tril(X(), 0); }
static int w_tril(uint16_t *w) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) w[i * C + j] = j <= i ? xa(i, j) : 0;
  return R * C;
}

static kiln_tensor b_roll(void) { return kiln_roll(X(), 2, 1); }
static int w_roll(uint16_t *w) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) w[i * C + (j + 2) % C] = xa(i, j);
  return R * C;
}

/* transpose(concat(flip(x, 1), where(m, y, x)), 0, 1): [C, 2R] */
static kiln_tensor b_chain(void) {
  kiln_tensor p[2] = {kiln_flip(X(), 1, (int[]){1}), kiln_where(mask(), Y(), X())};
  return kiln_transpose(kiln_concat(2, p, 0), 0, 1);
}
static int w_chain(uint16_t *w) {
  for (int j = 0; j < C; j++)
    for (int i = 0; i < 2 * R; i++)
      w[j * 2 * R + i] = i < R ? xa(i, C - 1 - j) : mask_at(i - R, j) ? ya(i - R, j) : xa(i - R, j);
  return 2 * R * C;
}

/* Moves with a computed input: the moved elements keep their bits, the
 * computed ones are what their values round to. z holds finite positive
 * values, so -z flips the sign bit and the largest of a row is the largest
 * bit pattern. */
static kiln_tensor Z(void) { return kiln_from_host(g_z, g_dt, 2, kRC); }
static uint16_t za(int i, int j) { return g_z[i * C + j]; }
static kiln_tensor b_where_computed(void) { return kiln_where(mask(), X(), kiln_mul_s(Z(), -1.0)); }
static int w_where_computed(uint16_t *w) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) w[i * C + j] = mask_at(i, j) ? xa(i, j) : (uint16_t)(za(i, j) ^ 0x8000u);
  return R * C;
}
static kiln_tensor b_concat_computed(void) {
  kiln_tensor p[2] = {kiln_mul_s(Z(), -1.0), X()};
  return kiln_concat(2, p, 0);
}
static int w_concat_computed(uint16_t *w) {
  for (int i = 0; i < 2 * R; i++)
    for (int j = 0; j < C; j++) w[i * C + j] = i < R ? (uint16_t)(za(i, j) ^ 0x8000u) : xa(i - R, j);
  return 2 * R * C;
}
/* a SCALAR input (a graph input, not a constant) beside the moved value */
static kiln_tensor b_where_scalar(void) { return kiln_where(mask(), X(), kiln_scalar(g_dt, 2.5)); }
static int w_where_scalar(uint16_t *w) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) w[i * C + j] = mask_at(i, j) ? xa(i, j) : g_dt == KILN_BF16 ? 0x4020 : 0x4100;
  return R * C;
}
/* a reduction's row kernel storing the moved value: where(m, x, max of z's row) */
static kiln_tensor b_where_row_max(void) { return kiln_where(mask(), X(), kiln_max(Z(), 1, (int[]){1}, true)); }
static int w_where_row_max(uint16_t *w) {
  for (int i = 0; i < R; i++) {
    uint16_t mx = 0;
    for (int j = 0; j < C; j++) mx = za(i, j) > mx ? za(i, j) : mx;
    for (int j = 0; j < C; j++) w[i * C + j] = mask_at(i, j) ? xa(i, j) : mx;
  }
  return R * C;
}

typedef struct {
  const char *name;
  build_fn b;
  want_fn w;
} half_case;

static const half_case kCases[] = {
    {"transpose", b_permute, w_permute}, {"flip", b_flip, w_flip},       {"slice", b_slice, w_slice},
    {"concat", b_concat, w_concat},      {"pad", b_pad, w_pad},          {"pad_nan", b_pad_nan, w_pad_nan}, {"gather", b_gather, w_gather},
    {"index_select", b_index_select, w_index_select},                    {"where", b_where, w_where},
    {"expand", b_expand, w_expand},      {"scatter", b_scatter, w_scatter}, {"tril", b_tril, w_tril},
    {"roll", b_roll, w_roll},            {"chain", b_chain, w_chain},
    {"where_computed", b_where_computed, w_where_computed},              {"concat_computed", b_concat_computed, w_concat_computed},
    {"where_row_max", b_where_row_max, w_where_row_max},                 {"where_scalar", b_where_scalar, w_where_scalar},
};

/* One case on backend be: its dtype, count and every element's bits. */
static void check(const half_case *hc, const char *be, const uint16_t *want, int n) {
  const char *what = hc->name, *fu = g_fused ? " fused" : "", *dn = kiln_dtype_name(g_dt);
  uint16_t got[MAXN];
  kiln_tensor y = hc->b();
  if (!kiln_is_valid(y) || kiln_numel(y) != n || kiln_dtype_of(y) != g_dt) {
    KT_FAIL("%s %s on %s%s: %s (%lld elements)", dn, what, be, fu, kiln_last_error(), (long long)kiln_numel(y));
    return;
  }
  if (kiln_to_host(y, got, (size_t)n * 2) != KILN_OK) {
    KT_FAIL("%s %s on %s%s: %s", dn, what, be, fu, kiln_last_error());
    return;
  }
  int bad = 0;
  for (int i = 0; i < n; i++)
    if (got[i] != want[i] && bad++ < 3)
      KT_FAIL("%s %s on %s%s: element %d is 0x%04x, want 0x%04x", dn, what, be, fu, i, got[i], want[i]);
}

static void run_dtype(kiln_dtype dt) {
  g_dt = dt;
  fill(dt);
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (size_t k = 0; k < sizeof kCases / sizeof kCases[0]; k++) {
    uint16_t want[MAXN];
    int n = kCases[k].w(want);
    for (int b = 0; b < 2; b++)
      for (int fused = 0; fused < 2; fused++) {
        g_fused = fused;
        kiln_clear_error();
        if (kiln_init(&(kiln_options){.backend = backends[b]}) != KILN_OK) {
          KT_FAIL("kiln_init(%s): %s", backends[b], kiln_last_error());
          continue;
        }
        check(&kCases[k], backends[b], want, n);
        kiln_shutdown();
      }
  }
}

KT_TEST(bf16_moves_keep_bits) { run_dtype(KILN_BF16); }
KT_TEST(f16_moves_keep_bits) { run_dtype(KILN_F16); }

/* One family for every row count (kiln_dynamic): its kernels, read back
 * from two instances, keep the bits too. transpose(concat(x, flip(x, 0)))
 * of a bf16 [rows, 5] with NaN payloads, rows 3..9, on the backend under test. */
KT_TEST(moves_keep_bits_in_a_dynamic_family) {
  if (kiln_init(&(kiln_options){.backend = bc_backend_under_test()}) != KILN_OK) {
    KT_FAIL("kiln_init: %s", kiln_last_error());
    return;
  }
  int bad = 0;
  for (int rows = 3; rows <= 9; rows++) {
    uint16_t x[9 * 5], want[5 * 18], got[5 * 18];
    for (int i = 0; i < rows * 5; i++)
      x[i] = (uint16_t)(i % 3 == 0 ? 0x7f81 + i : i % 3 == 1 ? 0xffc1 + (i & 7) : 0x3f80 + i);
    const int64_t s[2] = {rows, 5};
    kiln_tensor t = kiln_dynamic(kiln_from_host(x, KILN_BF16, 2, s), 0);
    kiln_tensor p[2] = {t, kiln_flip(t, 1, (int[]){0})};
    kiln_tensor y = kiln_transpose(kiln_concat(2, p, 0), 0, 1); /* [5, 2 rows] */
    for (int j = 0; j < 5; j++)
      for (int i = 0; i < 2 * rows; i++)
        want[j * 2 * rows + i] = i < rows ? x[i * 5 + j] : x[(2 * rows - 1 - i) * 5 + j];
    if (kiln_to_host(y, got, (size_t)(10 * rows) * 2) != KILN_OK) {
      KT_FAIL("rows %d: %s", rows, kiln_last_error());
      continue;
    }
    for (int k = 0; k < 10 * rows; k++)
      if (got[k] != want[k] && bad++ < 3) KT_FAIL("rows %d: element %d is 0x%04x, want 0x%04x", rows, k, got[k], want[k]);
  }
  KT_CHECK(kiln_counter_value("DynamicFamily") >= 1); /* the sizes after the first ran as one family */
  kiln_shutdown();
}

KT_MAIN(KT_CASE(bf16_moves_keep_bits), KT_CASE(f16_moves_keep_bits), KT_CASE(moves_keep_bits_in_a_dynamic_family))
