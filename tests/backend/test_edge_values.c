/* Edge-case values on the ref backend and the backend under test, each op
 * alone and with its input and output fused into elementwise kernels
 * (where(true, x, 0) around it), for the corners an edge-value audit found
 * wrong: 16-bit float scans, the dtypes of scans of 8-bit integers, argmin of
 * u8, float aranges, -0.0 and -NaN constants in compiled kernels, tril/triu with far
 * diagonals, integer powers, means and softmax of 16-bit floats, kiln_item_i64 of NaN and out-of-range floats, and
 * cross_entropy's ignored rows with infinite losses.
 * The expected values are literals; the comment above each case names the
 * PyTorch 1.13 expression that produced them (or the documented rule of
 * docs/semantics.md where kiln differs). */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include "backend/backend_compare.h"

/* A case builds its output from inputs made by in(); fused: the inputs and
 * the output pass through an elementwise select, so the op is computed in
 * a kernel with them (or next to them) instead of alone. */
static int g_fused;
/* NaNs must match in sign too (constants the user wrote; an op's NaN has no defined sign) */
static int g_nan_sign;

static kiln_tensor in(const void *data, kiln_dtype dt, int rank, const int64_t *shape) {
  kiln_tensor x = kiln_from_host(data, dt, rank, shape);
  if (!g_fused) return x;
  return kiln_where(kiln_ne_c(kiln_zeros(KILN_I32, rank, shape), 1.0), x, kiln_zeros(dt, rank, shape));
}
static kiln_tensor out(kiln_tensor y) {
  if (!g_fused) return y;
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(y, s);
  kiln_dtype dt = kiln_dtype_of(y);
  return kiln_where(kiln_ne_c(kiln_zeros(KILN_I32, r, s), 1.0), y, kiln_zeros(dt, r, s));
}

/* Element i of host data of dtype dt as a double (16-bit floats decoded from
 * their bits by bc_half_bits) and as an int64. */
static double host_f(const void *p, kiln_dtype dt, int64_t i) {
  bc_out o = {.dt = dt, .data = (void *)p};
  return bc_get_f(&o, i);
}
static int64_t host_i(const void *p, kiln_dtype dt, int64_t i) {
  bc_out o = {.dt = dt, .data = (void *)p};
  return bc_get_i(&o, i);
}

typedef kiln_tensor (*case_fn)(void);

/* Run f on ref and on the backend under test, alone and fused, and check the
 * dtype, the element count and every value: floats exactly (NaN matches
 * NaN, of the same sign under g_nan_sign; -0 and +0 differ), integers exactly (wi when given, else w). */
static void check_case(const char *what, case_fn f, kiln_dtype want_dt, int64_t n, const double *w,
                       const int64_t *wi) {
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++)
    for (int fused = 0; fused < 2; fused++) {
      g_fused = fused;
      kiln_clear_error();
      if (kiln_init(&(kiln_options){.backend = backends[b]}) != KILN_OK) {
        KT_FAIL("%s: kiln_init(%s): %s", what, backends[b], kiln_last_error());
        continue;
      }
      kiln_tensor y = out(f());
      kiln_dtype dt = kiln_dtype_of(y);
      void *got = calloc((size_t)(n > 0 ? n : 1), 8);
      if (!kiln_is_valid(y) || kiln_numel(y) != n) {
        KT_FAIL("%s on %s%s: %s (%lld elements)", what, backends[b], fused ? " fused" : "", kiln_last_error(),
                (long long)kiln_numel(y));
      } else if (dt != want_dt) {
        KT_FAIL("%s on %s%s: dtype %s, want %s", what, backends[b], fused ? " fused" : "", kiln_dtype_name(dt),
                kiln_dtype_name(want_dt));
      } else if (kiln_to_host(y, got, (size_t)n * kiln_dtype_size(dt)) != KILN_OK) {
        KT_FAIL("%s on %s%s: %s", what, backends[b], fused ? " fused" : "", kiln_last_error());
      } else {
        for (int64_t i = 0; i < n; i++) {
          int ok;
          if (bc_is_float(dt)) {
            double g = host_f(got, dt, i);
            ok = isnan(w[i]) ? isnan(g) && (!g_nan_sign || signbit(g) == signbit(w[i]))
                             : g == w[i] && signbit(g) == signbit(w[i]);
          } else {
            ok = host_i(got, dt, i) == (wi ? wi[i] : (int64_t)w[i]);
          }
          if (!ok) {
            KT_FAIL("%s on %s%s: element %lld is %.17g, want %.17g", what, backends[b], fused ? " fused" : "",
                    (long long)i, host_f(got, dt, i), wi ? (double)wi[i] : w[i]);
            break;
          }
        }
      }
      free(got);
      kiln_shutdown();
    }
}
#define CHECK(f, dt, ...)                                                  \
  do {                                                                     \
    static const double w_[] = {__VA_ARGS__};                              \
    check_case(#f, f, dt, (int64_t)(sizeof w_ / sizeof w_[0]), w_, NULL);  \
  } while (0)
#define CHECK_I(f, dt, ...)                                                \
  do {                                                                     \
    static const int64_t w_[] = {__VA_ARGS__};                             \
    check_case(#f, f, dt, (int64_t)(sizeof w_ / sizeof w_[0]), NULL, w_);  \
  } while (0)

static const int64_t S24[2] = {2, 4};
static const float kF[8] = {NAN, 1.0f, -INFINITY, 3.0f, -0.0f, 0.0f, 3.0f, INFINITY};
static const float kG[8] = {1.5f, -2.0f, 0.25f, 3.0f, 0.0f, 65504.0f, 32.0f, -1.0f};
static const uint8_t kU8[8] = {200, 100, 255, 0, 1, 128, 3, 255};
static const int8_t kI8[8] = {127, -128, 100, -1, 0, 127, -128, 50};

/* ───────────── scans ───────────── */

/* cumsum / cumprod of bf16 and f16 on a compiled backend stored f32 values
 * into the 16-bit output (every other element garbage, the rest past its
 * end). */
static kiln_tensor bf(const float *v) { return kiln_cast(in(v, KILN_F32, 2, S24), KILN_BF16); }
static kiln_tensor hf(const float *v) { return kiln_cast(in(v, KILN_F32, 2, S24), KILN_F16); }
static kiln_tensor cumsum_bf16(void) { return kiln_cumsum(bf(kG), 1); }
static kiln_tensor cumprod_bf16(void) { return kiln_cumprod(bf(kG), 1); }
static kiln_tensor cumsum_f16(void) { return kiln_cumsum(hf(kG), 1); }
static kiln_tensor cumprod_f16(void) { return kiln_cumprod(hf(kG), 0); }
static kiln_tensor cumsum_bf16_specials(void) { return kiln_cumsum(bf(kF), 1); }
static kiln_tensor cumprod_f16_specials(void) { return kiln_cumprod(hf(kF), 1); }

KT_TEST(scans_of_16_bit_floats) {
  /* torch.tensor(kG).reshape(2, 4).bfloat16().cumsum(1) */
  CHECK(cumsum_bf16, KILN_BF16, 1.5, -0.5, -0.25, 2.75, 0.0, 65536.0, 65536.0, 65536.0);
  /* .bfloat16().cumprod(1) */
  CHECK(cumprod_bf16, KILN_BF16, 1.5, -3.0, -0.75, -2.25, 0.0, 0.0, 0.0, -0.0);
  /* .half().cumsum(1): 65504 + 32 rounds to inf in f16 */
  CHECK(cumsum_f16, KILN_F16, 1.5, -0.5, -0.25, 2.75, 0.0, 65504.0, INFINITY, INFINITY);
  /* .half().cumprod(0) */
  CHECK(cumprod_f16, KILN_F16, 1.5, -2.0, 0.25, 3.0, 0.0, -INFINITY, 8.0, -3.0);
  /* torch.tensor(kF).reshape(2, 4).bfloat16().cumsum(1) */
  CHECK(cumsum_bf16_specials, KILN_BF16, NAN, NAN, NAN, NAN, 0.0, 0.0, 3.0, INFINITY);
  /* .half().cumprod(1) */
  CHECK(cumprod_f16_specials, KILN_F16, NAN, NAN, NAN, NAN, -0.0, -0.0, -0.0, NAN);
}

/* cumsum / cumprod of u8 and i8 kept the 8-bit dtype and wrapped (200 + 100
 * gave 44); PyTorch gives i64 for every integer dtype, as kiln's sum/prod. */
static kiln_tensor cumsum_u8(void) { return kiln_cumsum(in(kU8, KILN_U8, 2, S24), 1); }
static kiln_tensor cumprod_u8(void) { return kiln_cumprod(in(kU8, KILN_U8, 2, S24), 1); }
static kiln_tensor cumsum_i8(void) { return kiln_cumsum(in(kI8, KILN_I8, 2, S24), 0); }
static kiln_tensor cumprod_i8(void) { return kiln_cumprod(in(kI8, KILN_I8, 2, S24), 1); }

KT_TEST(scans_of_8_bit_integers_are_i64) {
  /* torch.tensor(kU8, dtype=torch.uint8).reshape(2, 4).cumsum(1) */
  CHECK_I(cumsum_u8, KILN_I64, 200, 300, 555, 555, 1, 129, 132, 387);
  /* .cumprod(1) */
  CHECK_I(cumprod_u8, KILN_I64, 200, 20000, 5100000, 0, 1, 128, 384, 97920);
  /* torch.tensor(kI8, dtype=torch.int8).reshape(2, 4).cumsum(0) */
  CHECK_I(cumsum_i8, KILN_I64, 127, -128, 100, -1, 127, -1, -28, 49);
  /* .cumprod(1) */
  CHECK_I(cumprod_i8, KILN_I64, 127, -16256, -1625600, 1625600, 0, 0, 0, 0);
}

/* ───────────── argmin ───────────── */

/* argmin of u8 failed: it built -1 - x, and -1 is no u8 */
static kiln_tensor argmin_u8_1(void) { return kiln_argmin(in(kU8, KILN_U8, 2, S24), 1, false); }
static kiln_tensor argmin_u8_0(void) { return kiln_argmin(in(kU8, KILN_U8, 2, S24), 0, false); }
static kiln_tensor argmin_i8_1(void) { return kiln_argmin(in(kI8, KILN_I8, 2, S24), 1, false); }

KT_TEST(argmin_of_8_bit_integers) {
  /* torch.tensor(kU8, dtype=torch.uint8).reshape(2, 4).argmin(1) */
  CHECK_I(argmin_u8_1, KILN_I64, 3, 0);
  /* .argmin(0) */
  CHECK_I(argmin_u8_0, KILN_I64, 1, 0, 1, 0);
  /* torch.tensor(kI8, dtype=torch.int8).reshape(2, 4).argmin(1) */
  CHECK_I(argmin_i8_1, KILN_I64, 1, 2);
}

/* ───────────── arange ───────────── */

/* float aranges were computed in their own dtype: i * f32(step) + start,
 * rounded twice (0.900000036 for 0.899999976); now start + i * step in
 * PyTorch's accumulation type (double; float for bf16/f16), rounded once */
static kiln_tensor arange_f32_a(void) { return kiln_arange(KILN_F32, 0, 1, 0.3); }
static kiln_tensor arange_f32_b(void) { return kiln_arange(KILN_F32, -3, 1.9, 0.7); }
static kiln_tensor arange_bf16(void) { return kiln_arange(KILN_BF16, 1, 2, 0.1); }
static kiln_tensor arange_f16(void) { return kiln_arange(KILN_F16, 1, 2, 0.1); }
/* an integer arange with a fractional step gave zeros: now an error */
static kiln_tensor arange_i64_frac(void) { return kiln_arange(KILN_I64, 0, 2.5, 0.5); }

KT_TEST(arange_rounds_once) {
  /* torch.arange(0, 1, 0.3) */
  CHECK(arange_f32_a, KILN_F32, 0.0, 0.300000012f, 0.600000024f, 0.899999976f);
  /* torch.arange(-3, 1.9, 0.7) (8 elements: 4.9 / 0.7 is above 7 in double) */
  CHECK(arange_f32_b, KILN_F32, -3.0, -2.29999995f, -1.60000002f, -0.899999976f, -0.200000003f, 0.5, 1.20000005f,
        1.89999998f);
  /* torch.arange(1, 2, 0.1, dtype=torch.bfloat16) */
  CHECK(arange_bf16, KILN_BF16, 1.0, 1.1015625, 1.203125, 1.296875, 1.3984375, 1.5, 1.6015625, 1.703125, 1.796875,
        1.8984375);
  /* torch.arange(1, 2, 0.1, dtype=torch.float16) */
  CHECK(arange_f16, KILN_F16, 1.0, 1.099609375, 1.2001953125, 1.2998046875, 1.400390625, 1.5, 1.599609375,
        1.7001953125, 1.7998046875, 1.900390625);
  kiln_init(NULL);
  kiln_tensor t = arange_i64_frac();
  KT_CHECK_MSG(!kiln_is_valid(t) && strstr(kiln_last_error(), "arange"), "arange(i64, 0, 2.5, 0.5): %s",
               kiln_last_error());
  kiln_clear_error();
  kiln_shutdown();
}

/* ───────────── constants ───────────── */

/* a compiled kernel wrote the constant -0.0 as the C literal (-0), the int
 * 0: x / -0.0 was x / +0.0, x * -0.0 lost its sign, and a -0.0 pad was +0 */
static const float kS[4] = {1.0f, -1.0f, INFINITY, 0.0f};
static const int64_t S4[1] = {4}, P1[1] = {1};
static kiln_tensor div_c_neg0(void) { return kiln_div_c(in(kS, KILN_F32, 1, S4), -0.0); }
static kiln_tensor mul_c_neg0(void) { return kiln_mul_c(in(kS, KILN_F32, 1, S4), -0.0); }
static kiln_tensor add_c_neg0_f64(void) {
  return kiln_add_c(kiln_neg(kiln_cast(in(kS, KILN_F32, 1, S4), KILN_F64)), -0.0);
}
static kiln_tensor pad_neg0(void) { return kiln_pad(in(kS, KILN_F32, 1, S4), P1, P1, -0.0); }
static kiln_tensor full_neg0_bf16(void) {
  return kiln_add(kiln_full(KILN_BF16, 1, S4, -0.0), kiln_mul_c(kiln_cast(in(kS, KILN_F32, 1, S4), KILN_BF16), 0.0));
}

KT_TEST(negative_zero_constants) {
  /* torch.tensor(kS) / -0.0 */
  CHECK(div_c_neg0, KILN_F32, -INFINITY, INFINITY, -INFINITY, NAN);
  /* torch.tensor(kS) * -0.0 */
  CHECK(mul_c_neg0, KILN_F32, -0.0, 0.0, NAN, -0.0);
  /* -torch.tensor(kS).double() + -0.0 */
  CHECK(add_c_neg0_f64, KILN_F64, -1.0, 1.0, -INFINITY, -0.0);
  /* F.pad(torch.tensor(kS), (1, 1), value=-0.0) */
  CHECK(pad_neg0, KILN_F32, -0.0, 1.0, -1.0, INFINITY, 0.0, -0.0);
  /* torch.full((4,), -0.0, dtype=torch.bfloat16) + torch.tensor(kS).bfloat16() * 0.0 */
  CHECK(full_neg0_bf16, KILN_BF16, 0.0, -0.0, NAN, 0.0);
}

/* a NaN constant in a compiled kernel was written as __builtin_nan(""), a
 * positive NaN: a -NaN fill or full lost its sign bit (ref keeps it, as
 * torch.full and F.pad do) */
static kiln_tensor pad_neg_nan(void) { return kiln_pad(in(kS, KILN_F32, 1, S4), P1, P1, -NAN); }
static kiln_tensor pad_neg_nan_bf16(void) {
  return kiln_pad(kiln_cast(in(kS, KILN_F32, 1, S4), KILN_BF16), P1, P1, -NAN);
}
static kiln_tensor pad_neg_nan_f16(void) {
  return kiln_pad(kiln_cast(in(kS, KILN_F32, 1, S4), KILN_F16), P1, P1, -NAN);
}
static kiln_tensor full_neg_nan_f64(void) {
  return kiln_where(kiln_ne_c(in(kS, KILN_F32, 1, S4), 1.0), kiln_full(KILN_F64, 1, S4, -NAN),
                    kiln_full(KILN_F64, 1, S4, NAN));
}

KT_TEST(nan_constants_keep_their_sign) {
  g_nan_sign = 1;
  /* F.pad(torch.tensor(kS), (1, 1), value=-nan): the border's sign bit set */
  CHECK(pad_neg_nan, KILN_F32, -NAN, 1.0, -1.0, INFINITY, 0.0, -NAN);
  /* the same in bf16: PyTorch's bf16 constant is its canonical NaN, 0x7fc0 (positive); kiln's too */
  CHECK(pad_neg_nan_bf16, KILN_BF16, NAN, 1.0, -1.0, INFINITY, 0.0, NAN);
  /* f16 keeps the sign: F.pad(torch.tensor(kS).half(), (1, 1), value=-nan) is 0xfe00 */
  CHECK(pad_neg_nan_f16, KILN_F16, -NAN, 1.0, -1.0, INFINITY, 0.0, -NAN);
  /* torch.where(t != 1, torch.full((4,), -nan), torch.full((4,), nan)) */
  CHECK(full_neg_nan_f64, KILN_F64, NAN, -NAN, -NAN, -NAN);
  g_nan_sign = 0;
}

/* ───────────── tril / triu ───────────── */

/* a diagonal beyond a double's integers (INT64_MAX) was an error ("le: value
 * 9.22337e+18 is not representable as i64"); it keeps everything or nothing */
static const float kM[6] = {1, 2, 3, 4, 5, 6};
static const int64_t S23[2] = {2, 3};
static kiln_tensor tril_max(void) { return kiln_tril(in(kM, KILN_F32, 2, S23), INT64_MAX); }
static kiln_tensor triu_min(void) { return kiln_triu(in(kM, KILN_F32, 2, S23), INT64_MIN); }
static kiln_tensor tril_min(void) { return kiln_tril(in(kM, KILN_F32, 2, S23), INT64_MIN); }
static kiln_tensor triu_big(void) { return kiln_triu(in(kM, KILN_F32, 2, S23), 1LL << 62); }

KT_TEST(tril_triu_far_diagonals) {
  /* numpy.tril(m, 2**63 - 1) (PyTorch 1.13 overflows: zeros) */
  CHECK(tril_max, KILN_F32, 1, 2, 3, 4, 5, 6);
  /* numpy.triu(m, -2**63) */
  CHECK(triu_min, KILN_F32, 1, 2, 3, 4, 5, 6);
  /* torch.tril(m, -2**63) */
  CHECK(tril_min, KILN_F32, 0, 0, 0, 0, 0, 0);
  /* torch.triu(m, 2**62) */
  CHECK(triu_big, KILN_F32, 0, 0, 0, 0, 0, 0);
}

/* ───────────── means of 16-bit floats ───────────── */

/* a mean of bf16 / f16 rounded its sum to 16 bits before dividing (an f16
 * sum above 65504 became inf) and divided by 1 / count rounded to 16 bits;
 * now computed in f32 and rounded once (NumPy's float16 mean) */
static const float kMb[6] = {1.0f, 2.0f, 2.5f, 3.0f, 0.0078125f, 7.0f};
static const float kMh[6] = {60000.0f, 60000.0f, 60000.0f, 1.5f, 2.5f, 0.1f};
static kiln_tensor mean_bf16(void) {
  static const int ax[1] = {1};
  return kiln_mean(kiln_cast(in(kMb, KILN_F32, 2, S23), KILN_BF16), 1, ax, false);
}
static kiln_tensor mean_f16(void) {
  static const int ax[1] = {1};
  return kiln_mean(kiln_cast(in(kMh, KILN_F32, 2, S23), KILN_F16), 1, ax, false);
}
static kiln_tensor mean_f16_long(void) {
  static const int64_t n[1] = {1000000};
  return kiln_mean(kiln_full(KILN_F16, 1, n, 0.1), 0, NULL, false);
}

KT_TEST(means_of_16_bit_floats) {
  /* torch.tensor(kMb).bfloat16().reshape(2, 3).float().mean(1).bfloat16()
   * (PyTorch's own bf16 mean rounds the sum first: 3.328125) */
  CHECK(mean_bf16, KILN_BF16, 1.8359375, 3.34375);
  /* numpy.array(kMh, numpy.float16).reshape(2, 3).mean(1) (PyTorch: inf) */
  CHECK(mean_f16, KILN_F16, 60000.0, 1.3662109375);
  /* numpy.full(10**6, 0.1, numpy.float16).mean() */
  CHECK(mean_f16_long, KILN_F16, 0.0999755859375);
}

/* ───────────── softmax of 16-bit floats ───────────── */

/* softmax / log_softmax of bf16 rounded after every node (shift, exp, sum,
 * divide): up to 8 bf16 ulps off; now computed in f32, rounded once */
static const float kSm[16] = {4.875f, -1.8359375f, -1.5859375f, -3.21875f, 2.59375f, -6.90625f, 5.25f, -2.28125f,
                              0.95703125f, -0.75f, 4.375f, -6.1875f, -0.96875f, -1.1484375f, 3.40625f, -3.296875f};
static const int64_t S28[2] = {2, 8};
static kiln_tensor softmax_bf16(void) { return kiln_softmax(kiln_cast(in(kSm, KILN_F32, 2, S28), KILN_BF16), 1); }
static kiln_tensor log_softmax_bf16(void) {
  return kiln_cast(kiln_log_softmax(kiln_cast(in(kSm, KILN_F32, 2, S28), KILN_BF16), 1), KILN_F32);
}

KT_TEST(softmax_of_16_bit_floats) {
  /* torch.softmax(torch.tensor(kSm).bfloat16().reshape(2, 8), 1) */
  CHECK(softmax_bf16, KILN_BF16, 0.390625, 0.0004749298095703125, 0.0006103515625, 0.00011920928955078125,
        0.039794921875, 2.9802322387695312e-06, 0.56640625, 0.00030517578125, 0.02294921875, 0.004150390625,
        0.69921875, 1.811981201171875e-05, 0.0033416748046875, 0.0027923583984375, 0.265625,
        0.0003261566162109375);
  /* torch.log_softmax(torch.tensor(kSm).bfloat16().reshape(2, 8), 1): every element within one bf16 ulp of
   * PyTorch's (kiln's f32 exp and log differ from its by an f32 ulp) */
  static const double want[16] = {-0.9375, -7.65625, -7.40625, -9.0, -3.21875, -12.75, -0.5625, -8.125,
                                  -3.78125, -5.46875, -0.357421875, -10.9375, -5.6875, -5.875, -1.328125, -8.0};
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++) {
    KT_CHECK(kiln_init(&(kiln_options){.backend = backends[b]}) == KILN_OK);
    float got[16];
    KT_CHECK(kiln_to_host(log_softmax_bf16(), got, sizeof got) == KILN_OK);
    for (int i = 0; i < 16; i++) {
      double ulp = ldexp(1.0, ilogb(want[i]) - 7);
      KT_CHECK_MSG(fabs(got[i] - want[i]) <= ulp, "log_softmax bf16 on %s [%d]: %.9g, want %.9g", backends[b], i,
                   got[i], want[i]);
    }
    kiln_shutdown();
  }
}

/* ───────────── dropout of 16-bit floats ───────────── */

/* kiln_dropout of bf16 / f16 returned f32 (its zero was an f32 constant);
 * torch.nn.functional.dropout keeps the dtype: every element 0 or x / (1 - p)
 * rounded to the dtype */
KT_TEST(dropout_keeps_16_bit_dtypes) {
  static const float xv[8] = {1.0f, -2.0f, 3.0f, 0.5f, 7.0f, -0.25f, 100.0f, 1.5f};
  static const int64_t s8[1] = {8};
  const kiln_dtype dts[2] = {KILN_BF16, KILN_F16};
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      KT_CHECK(kiln_init(&(kiln_options){.backend = backends[b]}) == KILN_OK);
      kiln_tensor x = kiln_cast(kiln_from_host(xv, KILN_F32, 1, s8), dts[d]);
      kiln_tensor y = kiln_dropout(x, 0.5, 7, true);
      KT_CHECK_MSG(kiln_dtype_of(y) == dts[d], "dropout of %s on %s is %s", kiln_dtype_name(dts[d]), backends[b],
                   kiln_dtype_name(kiln_dtype_of(y)));
      float got[8], want[8];
      KT_CHECK(kiln_to_host(kiln_cast(y, KILN_F32), got, sizeof got) == KILN_OK);
      KT_CHECK(kiln_to_host(kiln_cast(kiln_mul_c(x, 2.0), KILN_F32), want, sizeof want) == KILN_OK);
      int kept = 0;
      for (int i = 0; i < 8; i++) {
        KT_CHECK_MSG(got[i] == 0.0f || got[i] == want[i], "dropout %s [%d]: %g", backends[b], i, got[i]);
        kept += got[i] != 0.0f;
      }
      KT_CHECK(kept > 0 && kept < 8); /* seed 7 keeps some and drops some */
      kiln_shutdown();
    }
}

/* ───────────── integer powers ───────────── */

/* pow of integers was computed in f32 (exact only below 2^24: 3**39 came
 * out 4.05255522e+18); now integer, by squaring, wrapping, as PyTorch's */
static const int64_t kA[8] = {3, 1LL << 40, -7, 123456789, 0, 1, -1, 2};
static const int64_t kE[8] = {39, 1, 2, 2, -1, -5, -3, 62};
static const int32_t kI32[4] = {46341, -3, 7, 2};
static const int64_t kE4[4] = {2, 3, 11, 31};
static const int64_t S8[1] = {8}, S4b[1] = {4};
static kiln_tensor pow_i64(void) { return kiln_pow(in(kA, KILN_I64, 1, S8), in(kE, KILN_I64, 1, S8)); }
static kiln_tensor pow_c_i64(void) { return kiln_pow_c(in(kA, KILN_I64, 1, S8), 3); }
static kiln_tensor pow_s_u8(void) { return kiln_pow_s(in(kU8, KILN_U8, 2, S24), 2); }
static kiln_tensor pow_s_i32(void) { return kiln_pow_s(in(kI32, KILN_I32, 1, S4b), 2); }
static kiln_tensor pow_i32_i64(void) { return kiln_pow(in(kI32, KILN_I32, 1, S4b), in(kE4, KILN_I64, 1, S4b)); }
static kiln_tensor pow_s_i32_half(void) { return kiln_pow_s(in(kI32, KILN_I32, 1, S4b), 0.5); }
static kiln_tensor div_c_i64_neg0(void) { return kiln_div_c(in(kA, KILN_I64, 1, S8), -0.0); }

KT_TEST(integer_powers) {
  /* torch.pow(torch.tensor(kA), torch.tensor(kE)) */
  CHECK_I(pow_i64, KILN_I64, 4052555153018976267LL, 1099511627776LL, 49, 15241578750190521LL, 0, 1, -1,
          4611686018427387904LL);
  /* torch.tensor(kA) ** 3 */
  CHECK_I(pow_c_i64, KILN_I64, 27, 0, -343, -2204193661661244627LL, 0, 1, -1, 8);
  /* torch.tensor(kU8, dtype=torch.uint8) ** 2 */
  CHECK_I(pow_s_u8, KILN_U8, 64, 16, 1, 0, 1, 0, 9, 1);
  /* torch.tensor(kI32, dtype=torch.int32) ** 2 */
  CHECK_I(pow_s_i32, KILN_I32, -2147479015, 9, 49, 4);
  /* torch.tensor(kI32, dtype=torch.int32) ** torch.tensor(kE4) */
  CHECK_I(pow_i32_i64, KILN_I64, 2147488281LL, -27, 1977326743LL, 2147483648LL);
  /* torch.tensor(kI32, dtype=torch.int32) ** 0.5 */
  CHECK(pow_s_i32_half, KILN_F32, 215.26959228515625, NAN, 2.6457512378692627, 1.4142135381698608);
  /* torch.tensor(kA) / -0.0 (the scalar -0.0 is a float: true division) */
  CHECK(div_c_i64_neg0, KILN_F32, -INFINITY, -INFINITY, INFINITY, -INFINITY, NAN, -INFINITY, INFINITY, -INFINITY);
  /* torch.tensor(kA) ** -1: an error, as PyTorch's */
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  kiln_tensor bad = kiln_pow_s(kiln_from_host(kA, KILN_I64, 1, S8), -1);
  KT_CHECK(!kiln_is_valid(bad) && strstr(kiln_last_error(), "negative integer power"));
  kiln_clear_error();
  kiln_shutdown();
}

/* ───────────── item ───────────── */

/* kiln_item_i64 (and kiln_item_f64, which computed it too) converted f32 and
 * f64 with a C cast: undefined for NaN and out of range (UBSan's
 * float-cast-overflow); now the cast rule of docs/semantics.md */
KT_TEST(item_of_special_floats) {
  static const float fv[4] = {NAN, 1e30f, -2.75f, -INFINITY};
  static const double dv[3] = {NAN, 9.3e18, -9.3e18};
  static const int64_t want_f[4] = {INT64_MIN, INT64_MIN, -2, INT64_MIN}, want_d[3] = {INT64_MIN, INT64_MIN, INT64_MIN};
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++) {
    KT_CHECK(kiln_init(&(kiln_options){.backend = backends[b]}) == KILN_OK);
    for (int i = 0; i < 4; i++) {
      kiln_tensor t = kiln_from_host(&fv[i], KILN_F32, 0, NULL);
      KT_EQ_INT(kiln_item_i64(t), want_f[i]);
      double f = kiln_item_f64(t);
      KT_CHECK(isnan(fv[i]) ? isnan(f) : f == fv[i]);
    }
    for (int i = 0; i < 3; i++) KT_EQ_INT(kiln_item_i64(kiln_from_host(&dv[i], KILN_F64, 0, NULL)), want_d[i]);
    KT_CHECK(kiln_last_status() == KILN_OK);
    kiln_shutdown();
  }
}

/* ───────────── cross_entropy ───────────── */

/* ignored targets were masked by multiplying their loss by 0: an ignored
 * row whose logit at class 0 is -inf has an infinite loss, and inf * 0 made
 * the whole loss NaN; now they are selected away */
KT_TEST(cross_entropy_ignored_rows_with_inf_logits) {
  static const float lg[6] = {1000, 0, -1000, -INFINITY, 0, -INFINITY};
  static const int64_t tg[2] = {2, -100}, S2[1] = {2};
  /* F.cross_entropy(lg, tg, label_smoothing=ls) and lg.grad, for ls = 0 and 0.1 */
  static const double want_loss[2] = {2000.0, 1900.0};
  static const double want_grad[2][6] = {{1, 0, -1, 0, 0, 0},
                                         {0.9666666388511658, -0.03333333507180214, -0.9333333373069763, 0, 0, 0}};
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++)
    for (int k = 0; k < 2; k++) {
      KT_CHECK(kiln_init(&(kiln_options){.backend = backends[b]}) == KILN_OK);
      kiln_tensor x = kiln_keep(kiln_from_host(lg, KILN_F32, 2, S23));
      kiln_requires_grad(x);
      kiln_tensor loss = kiln_cross_entropy(x, kiln_from_host(tg, KILN_I64, 1, S2), -100, k ? 0.1 : 0.0);
      KT_CHECK(kiln_backward(loss) == KILN_OK);
      float g[6] = {0};
      double l = kiln_item_f64(loss);
      KT_CHECK_MSG(fabs(l - want_loss[k]) <= 1e-3, "cross_entropy on %s, ls %d: %g, want %g", backends[b], k, l,
                   want_loss[k]);
      KT_CHECK(kiln_to_host(kiln_grad(x), g, sizeof g) == KILN_OK);
      for (int i = 0; i < 6; i++)
        KT_CHECK_MSG(fabs(g[i] - want_grad[k][i]) <= 1e-6, "cross_entropy grad on %s, ls %d, [%d]: %g, want %g",
                     backends[b], k, i, g[i], want_grad[k][i]);
      KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s", kiln_last_error());
      kiln_clear_error();
      kiln_shutdown();
    }
}

/* ───────────── maximum / minimum of specials, vectorized ───────────── */

/* Every pair of {+0, -0, NaN, -NaN, 1, -1, inf, -inf, 2.5}: 81 elements, so
 * the generated loop runs vector iterations and a tail (the f32 kernels
 * select by masks, scalar.inc kmax_f32). kiln's rule (docs/semantics.md):
 * a NaN operand wins, a's first, with its sign; else the larger (smaller);
 * equal values give b (maximum(+0, -0) = -0). */
static float g_pa[81], g_pb[81];
static const int64_t S81[1] = {81};
static kiln_tensor max_pairs(void) {
  return out(kiln_maximum(in(g_pa, KILN_F32, 1, S81), in(g_pb, KILN_F32, 1, S81)));
}
static kiln_tensor min_pairs(void) {
  return out(kiln_minimum(in(g_pa, KILN_F32, 1, S81), in(g_pb, KILN_F32, 1, S81)));
}

KT_TEST(maximum_minimum_of_specials) {
  const float v[9] = {0.0f, -0.0f, NAN, -NAN, 1.0f, -1.0f, INFINITY, -INFINITY, 2.5f};
  double wmax[81], wmin[81];
  for (int i = 0; i < 81; i++) {
    float a = v[i / 9], b = v[i % 9];
    g_pa[i] = a, g_pb[i] = b;
    wmax[i] = a != a ? a : b != b ? b : a > b ? a : b;
    wmin[i] = a != a ? a : b != b ? b : a < b ? a : b;
  }
  g_nan_sign = 1;
  check_case("max_pairs", max_pairs, KILN_F32, 81, wmax, NULL);
  check_case("min_pairs", min_pairs, KILN_F32, 81, wmin, NULL);
  g_nan_sign = 0;
}

KT_MAIN(KT_CASE(scans_of_16_bit_floats), KT_CASE(scans_of_8_bit_integers_are_i64), KT_CASE(argmin_of_8_bit_integers),
        KT_CASE(arange_rounds_once), KT_CASE(negative_zero_constants), KT_CASE(nan_constants_keep_their_sign),
        KT_CASE(tril_triu_far_diagonals), KT_CASE(integer_powers), KT_CASE(means_of_16_bit_floats), KT_CASE(softmax_of_16_bit_floats), KT_CASE(dropout_keeps_16_bit_dtypes), KT_CASE(item_of_special_floats),
        KT_CASE(cross_entropy_ignored_rows_with_inf_logits), KT_CASE(maximum_minimum_of_specials))
