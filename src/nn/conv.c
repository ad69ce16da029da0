/* Conv2d, pooling and BatchNorm2d (NCHW).
 *
 * im2col stacks one strided slice of the padded input per window offset,
 * giving the columns [N, C, kh·kw, OH·OW] (stride, dilation and padding are
 * in the slices); the slices and their gradients are fused data movement. A convolution is then one batched matmul per group,
 * W [g, O/g, C/g·kh·kw] @ cols [N, g, C/g·kh·kw, L], with no transposes; a
 * pooling is a max/mean over the window axis. */
#include <math.h>
#include <stdlib.h>

#include "base/status.h"
#include "nn/nn_internal.h"

static int is_null(kiln_tensor t) { return t.index == 0 && t.gen == 0; }

/* The im2col of x [N, C, H, W] -> [N, C, kh·kw, OH·OW]; sets *oh, *ow.
 * pad_value fills the padding. Poisoned (error recorded) on bad geometry. */
static kiln_tensor im2col(kiln_tensor x, int kh, int kw, int stride, int pad, int dil, double pad_value, int64_t *oh,
                          int64_t *ow, const char *op, kiln_loc loc) {
  int64_t s[KILN_MAX_RANK];
  if (kiln_shape(x, s) != 4) return kiln_nn_fail(loc, "%s: input must be [N, C, H, W]", op);
  if (kh <= 0 || kw <= 0 || stride <= 0 || pad < 0 || dil <= 0)
    return kiln_nn_fail(loc, "%s: bad kernel %dx%d, stride %d, padding %d or dilation %d", op, kh, kw, stride, pad,
                        dil);
  int64_t N = s[0], C = s[1], Hp = s[2] + 2 * pad, Wp = s[3] + 2 * pad;
  int64_t OH = (Hp - (int64_t)dil * (kh - 1) - 1) / stride + 1;
  int64_t OW = (Wp - (int64_t)dil * (kw - 1) - 1) / stride + 1;
  if (Hp - (int64_t)dil * (kh - 1) - 1 < 0 || Wp - (int64_t)dil * (kw - 1) - 1 < 0 || OH <= 0 || OW <= 0)
    return kiln_nn_fail(loc, "%s: window %dx%d (dilation %d) larger than the padded input %lldx%lld", op, kh, kw, dil,
                        (long long)Hp, (long long)Wp);
  int64_t KK = (int64_t)kh * kw, L = OH * OW;
  if (KK > 4096) return kiln_nn_fail(loc, "%s: window %dx%d is too large", op, kh, kw);
  if (pad) {
    int64_t lo[4] = {0, 0, pad, pad}, hi[4] = {0, 0, pad, pad};
    x = kiln_pad_at(x, lo, hi, pad_value, loc);
  }
  /* One strided slice per window offset, stacked: every op here is
   * elementwise data movement that fuses, and so is its gradient (slices
   * pad, concat slices). A gather with an index tensor would need a
   * scatter-add in the backward pass. */
  kiln_tensor stack_buf[64], *parts = KK <= 64 ? stack_buf : malloc(sizeof *parts * (size_t)KK);
  if (!parts) return kiln_nn_fail(loc, "%s: out of host memory", op);
  /* parts [N, C, 1, OH, OW], stacked on axis 2 and then viewed as
   * [N, C, kh·kw, OH·OW]: the stack's loops keep OH and OW as axes (no
   * index division), and the GEMM reads it through the reshape */
  int64_t ps[5] = {N, C, 1, OH, OW}, cs[4] = {N, C, KK, L};
  for (int ki = 0; ki < kh; ki++)
    for (int kj = 0; kj < kw; kj++) {
      int64_t r0 = (int64_t)ki * dil, c0 = (int64_t)kj * dil;
      kiln_tensor t = kiln_slice_at(x, 2, r0, r0 + (OH - 1) * stride + 1, stride, loc);
      t = kiln_slice_at(t, 3, c0, c0 + (OW - 1) * stride + 1, stride, loc);
      parts[ki * kw + kj] = kiln_reshape_at(t, 5, ps, loc);
    }
  kiln_tensor cols = kiln_reshape_at(kiln_concat_at((int)KK, parts, 2, loc), 4, cs, loc);
  if (parts != stack_buf) free(parts);
  *oh = OH;
  *ow = OW;
  return cols;
}

kiln_tensor kiln_conv2d_apply_at(kiln_tensor x, kiln_tensor w, kiln_tensor b, int stride, int padding, int dilation,
                              int groups, kiln_loc loc) {
  KILN_NN_CHECK("conv2d", loc, 2, x, w, b);
  int64_t ws[KILN_MAX_RANK], xs[KILN_MAX_RANK];
  if (kiln_shape(w, ws) != 4 || kiln_shape(x, xs) != 4)
    return kiln_nn_fail(loc, "conv2d: weight must be [O, C/g, kh, kw] and input [N, C, H, W]");
  int64_t O = ws[0], N = xs[0], C = xs[1], g = groups;
  if (O == 0) /* PyTorch: "expected weight to be at least 1 at dimension 0" (kiln gave an empty output) */
    return kiln_nn_fail(loc,
                        "conv2d: weight [0, %lld, %lld, %lld] has no output channel (input [%lld, %lld, %lld, %lld])",
                        (long long)ws[1], (long long)ws[2], (long long)ws[3], (long long)N, (long long)C,
                        (long long)xs[2], (long long)xs[3]);
  if (g <= 0 || C % g || O % g || ws[1] != C / g)
    return kiln_nn_fail(
        loc, "conv2d: %lld input channels, %lld output channels and weight [%lld, %lld, ..] do not fit %d groups",
        (long long)C, (long long)O, (long long)O, (long long)ws[1], groups);
  int64_t OH = 0, OW = 0;
  kiln_tensor cols = im2col(x, (int)ws[2], (int)ws[3], stride, padding, dilation, 0.0, &OH, &OW, "conv2d", loc);
  if (!kiln_is_valid(cols)) return cols;
  int64_t CK = C / g * ws[2] * ws[3];
  int64_t cs[4] = {N, g, CK, OH * OW}, wr[3] = {g, O / g, CK}, os[4] = {N, O, OH, OW};
  kiln_tensor y = kiln_matmul_at(kiln_reshape_at(w, 3, wr, loc), kiln_reshape_at(cols, 4, cs, loc), loc);
  y = kiln_reshape_at(y, 4, os, loc);
  if (!is_null(b)) {
    int64_t bs[4] = {1, O, 1, 1};
    y = kiln_add_at(y, kiln_reshape_at(kiln_nn_autocast_bias(y, b, loc), 4, bs, loc), loc);
  }
  return y;
}

kiln_status kiln_conv2d_create_at(int in_ch, int out_ch, int kh, int kw, int stride, int padding, int dilation,
                                  int groups, bool bias, uint64_t seed, kiln_conv2d **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "conv2d");
  if (in_ch <= 0 || out_ch <= 0 || kh <= 0 || kw <= 0 || stride <= 0 || padding < 0 || dilation <= 0 ||
      groups <= 0 || in_ch % groups || out_ch % groups) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
               "conv2d: bad arguments in=%d out=%d kernel=%dx%d stride=%d padding=%d dilation=%d groups=%d", in_ch,
               out_ch, kh, kw, stride, padding, dilation, groups);
  }
  kiln_conv2d *c = calloc(1, sizeof *c);
  if (!c) {
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "conv2d: out of host memory");
  }
  *c = (kiln_conv2d){.in_ch = in_ch, .out_ch = out_ch, .kh = kh, .kw = kw, .stride = stride, .padding = padding,
                     .dilation = dilation, .groups = groups};
  double bound = 1.0 / sqrt((double)(in_ch / groups) * kh * kw);
  int64_t ws[4] = {out_ch, in_ch / groups, kh, kw}, bs[1] = {out_ch};
  c->weight = kiln_nn_uniform(4, ws, bound, kiln_nn_seed(seed, 0), loc);
  kiln_nn_add(&c->m, "weight", c->weight, 0);
  if (bias) {
    c->bias = kiln_nn_uniform(1, bs, bound, kiln_nn_seed(seed, 1), loc);
    kiln_nn_add(&c->m, "bias", c->bias, 0);
  }
  kiln_status chk = kiln_nn_create_check(&c->m, "conv2d", loc);
  if (chk != KILN_OK) {
    kiln_conv2d_destroy(c);
    return chk;
  }
  *out = c;
  return KILN_OK;
}

kiln_tensor kiln_conv2d_forward_at(const kiln_conv2d *c, kiln_tensor x, kiln_loc loc) {
  if (!c) return kiln_nn_fail(loc, "conv2d: layer is NULL");
  return kiln_conv2d_apply_at(x, c->weight, c->bias, c->stride, c->padding, c->dilation, c->groups, loc);
}

void kiln_conv2d_destroy(kiln_conv2d *c) {
  if (!c) return;
  kiln_module_release(&c->m);
  free(c);
}

kiln_tensor kiln_pool2d_at(kiln_tensor x, kiln_pool_kind kind, int k, int stride, int padding, kiln_loc loc) {
  if (kind != KILN_POOL_AVG && kind != KILN_POOL_MAX) return kiln_nn_fail(loc, "pool2d: unknown pool kind %d", (int)kind);
  bool is_max = kind == KILN_POOL_MAX;
  const char *op = is_max ? "max_pool2d" : "avg_pool2d";
  KILN_NN_CHECK(op, loc, 1, x);
  if (stride == 0) stride = k;
  if (padding < 0 || 2 * padding > k)
    return kiln_nn_fail(loc, "%s: padding %d must be at most half the window %d", op, padding, k);
  int64_t xs[KILN_MAX_RANK];
  if (stride == k && padding == 0 && k > 0 && kiln_shape(x, xs) == 4 && xs[2] >= k && xs[3] >= k) {
    /* Non-overlapping windows: crop to whole windows, view as
     * [N, C, OH, k, OW, k] and reduce the two window axes. A reshape and a
     * reduction, whose gradient is one broadcast compare: no strided slices. */
    int64_t OH = xs[2] / k, OW = xs[3] / k;
    kiln_tensor c = kiln_slice_at(kiln_slice_at(x, 2, 0, OH * k, 1, loc), 3, 0, OW * k, 1, loc);
    int64_t vs[6] = {xs[0], xs[1], OH, k, OW, k};
    int ax[2] = {3, 5};
    c = kiln_reshape_at(c, 6, vs, loc);
    return is_max ? kiln_max_at(c, 2, ax, 0, loc) : kiln_mean_at(c, 2, ax, 0, loc);
  }
  int64_t OH = 0, OW = 0;
  kiln_tensor cols = im2col(x, k, k, stride, padding, 1, is_max ? -INFINITY : 0.0, &OH, &OW, op, loc);
  if (!kiln_is_valid(cols)) return cols;
  int ax[1] = {2};
  kiln_tensor y = is_max ? kiln_max_at(cols, 1, ax, 0, loc) : kiln_mean_at(cols, 1, ax, 0, loc);
  int64_t os[4] = {kiln_dim(x, 0), kiln_dim(x, 1), OH, OW};
  return kiln_reshape_at(y, 4, os, loc);
}

kiln_status kiln_batchnorm2d_create_at(int ch, double eps, double momentum, kiln_batchnorm2d **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "batchnorm2d");
  if (ch <= 0 || !(eps >= 0) || !(momentum >= 0 && momentum <= 1)) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "batchnorm2d: bad channels %d, eps %g or momentum %g", ch, eps,
               momentum);
  }
  kiln_batchnorm2d *b = calloc(1, sizeof *b);
  if (!b) {
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "batchnorm2d: out of host memory");
  }
  b->ch = ch;
  b->eps = eps;
  b->momentum = momentum;
  int64_t s[1] = {ch};
  b->weight = kiln_nn_fill(1, s, 1.0, loc);
  b->bias = kiln_nn_fill(1, s, 0.0, loc);
  b->running_mean = kiln_nn_fill(1, s, 0.0, loc);
  b->running_var = kiln_nn_fill(1, s, 1.0, loc);
  kiln_nn_add(&b->m, "weight", b->weight, 0);
  kiln_nn_add(&b->m, "bias", b->bias, 0);
  kiln_nn_add(&b->m, "running_mean", b->running_mean, 1);
  kiln_nn_add(&b->m, "running_var", b->running_var, 1);
  kiln_status chk = kiln_nn_create_check(&b->m, "batchnorm2d", loc);
  if (chk != KILN_OK) {
    kiln_batchnorm2d_destroy(b);
    return chk;
  }
  *out = b;
  return KILN_OK;
}

kiln_tensor kiln_batchnorm2d_forward_at(const kiln_batchnorm2d *b, kiln_tensor x, bool training, kiln_loc loc) {
  if (!b) return kiln_nn_fail(loc, "batchnorm2d: layer is NULL");
  KILN_NN_CHECK("batchnorm2d", loc, 1, x);
  int64_t s[KILN_MAX_RANK];
  if (kiln_shape(x, s) != 4 || s[1] != b->ch)
    return kiln_nn_fail(loc, "batchnorm2d: input must be [N, %d, H, W]", b->ch);
  int64_t cs[4] = {1, b->ch, 1, 1}, fs[1] = {b->ch};
  /* 16-bit input: f32 inside, rounded once at the end, as layer norm (a 16-bit mean cancelled x - mean, and
   * a 16-bit variance overflowed from deviations of 256 on) */
  kiln_dtype out_dt;
  x = kiln_nn_f32_inside(x, &out_dt, loc);
  kiln_tensor mean, var;
  int64_t n = s[0] * s[2] * s[3];
  if (training && n == 1) {
    char sx[128];
    return kiln_nn_fail(loc, "batchnorm2d: training needs more than one value per channel (input %s)",
                        kiln_nn_shape_str(x, sx, sizeof sx));
  }
  /* no values per channel (N·H·W = 0): an empty output and the running
   * statistics unchanged, as PyTorch (the eval path; a mean of nothing would
   * write NaN into them) */
  if (training && n > 0) {
    int ax[3] = {0, 2, 3};
    mean = kiln_mean_at(x, 3, ax, 1, loc);
    kiln_tensor d = kiln_sub_at(x, mean, loc);
    var = kiln_mean_at(kiln_mul_at(d, d, loc), 3, ax, 1, loc); /* biased: normalizes */
    /* running stats use the unbiased variance, as torch */
    double m = b->momentum;
    kiln_tensor mflat = kiln_reshape_at(mean, 1, fs, loc);
    kiln_tensor vflat = kiln_mul_c_at(kiln_reshape_at(var, 1, fs, loc), (double)n / (double)(n - 1), loc);
    kiln_assign_at(b->running_mean,
                   kiln_add_at(kiln_mul_c_at(b->running_mean, 1.0 - m, loc), kiln_mul_c_at(mflat, m, loc), loc), loc);
    kiln_assign_at(b->running_var,
                   kiln_add_at(kiln_mul_c_at(b->running_var, 1.0 - m, loc), kiln_mul_c_at(vflat, m, loc), loc), loc);
  } else {
    mean = kiln_reshape_at(b->running_mean, 4, cs, loc);
    var = kiln_reshape_at(b->running_var, 4, cs, loc);
  }
  kiln_tensor y = kiln_mul_at(kiln_sub_at(x, mean, loc), kiln_nn_inv_std(var, b->eps, loc), loc);
  y = kiln_add_at(kiln_mul_at(y, kiln_reshape_at(b->weight, 4, cs, loc), loc), kiln_reshape_at(b->bias, 4, cs, loc),
                  loc);
  return kiln_nn_round_to(y, out_dt, loc);
}

void kiln_batchnorm2d_destroy(kiln_batchnorm2d *b) {
  if (!b) return;
  kiln_module_release(&b->m);
  free(b);
}
