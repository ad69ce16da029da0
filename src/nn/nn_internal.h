/* Helpers shared by the nn layers (not public). */
#ifndef KILN_NN_INTERNAL_H
#define KILN_NN_INTERNAL_H

#include <math.h>

#include "frontend/api.h"
#include "kiln/nn.h"

/* Record an INVALID_ARGUMENT error at loc and return a poisoned tensor (the
 * null tensor if the runtime cannot start): kiln_api_fail_at, the
 * fail-and-poison helper of code that holds no frontend. */
#define kiln_nn_fail(loc, ...) kiln_api_fail_at(KILN_ERR_INVALID_ARGUMENT, (loc), __VA_ARGS__)

/* The entry check of a layer or loss on its tensor inputs ts[0..n): the
 * first nreq must be given, later null entries (the optional ones left out)
 * are skipped. A null or stale handle records an error naming op (instead
 * of a shape error, or the error of an inner op the caller never wrote), a
 * poisoned input propagates without a new message. Returns 1 with *out a
 * poisoned tensor then, else 0. KILN_NN_CHECK(op, loc, nreq, t...) returns
 * that tensor from the caller. */
int kiln_nn_check_inputs(const char *op, kiln_loc loc, kiln_tensor *out, int nreq, int n, const kiln_tensor *ts);
#define KILN_NN_CHECK(op, loc, nreq, ...)                                                                       \
  do {                                                                                                          \
    const kiln_tensor nn_ts_[] = {__VA_ARGS__};                                                                 \
    kiln_tensor nn_bad_;                                                                                        \
    if (kiln_nn_check_inputs((op), (loc), &nn_bad_, (nreq), (int)(sizeof nn_ts_ / sizeof nn_ts_[0]), nn_ts_)) \
      return nn_bad_;                                                                                           \
  } while (0)

/* t's shape as "[2,3]" in buf ("[]" for an invalid tensor). */
static inline const char *kiln_nn_shape_str(kiln_tensor t, char *buf, size_t cap) {
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(t, s);
  return kiln_fe_shape_str(r < 0 ? 0 : r, s, buf, cap);
}

/* Append a named tensor to m (names are truncated to fit). */
void kiln_nn_add(kiln_module *m, const char *name, kiln_tensor t, int is_buffer);
/* Append every entry of sub with "prefix." prepended. */
void kiln_nn_add_sub(kiln_module *m, const char *prefix, const kiln_module *sub);
/* Last check of a layer's _create: KILN_OK when every tensor of m is live;
 * else the error (a shape too large for int64 poisons a parameter; that op
 * recorded why) and a record naming op and the parameter. The caller then
 * destroys the layer and returns it, so *out stays NULL. */
kiln_status kiln_nn_create_check(const kiln_module *m, const char *op, kiln_loc loc);
/* A kept f32 tensor of shape drawn from U(-bound, bound) in the graph. */
kiln_tensor kiln_nn_uniform(int rank, const int64_t *shape, double bound, uint64_t seed, kiln_loc loc);
/* A kept f32 tensor filled with v. */
kiln_tensor kiln_nn_fill(int rank, const int64_t *shape, double v, kiln_loc loc);
/* Large negative added to masked attention scores (exp underflows to 0 in
 * f32 without the NaN a true -inf gives on fully masked rows). */
#define KILN_NN_MASK_NEG (-1e9)

/* Autocast (kiln.h): x in f32 when it is a 16-bit float inside a region
 * (layer norm, the losses: PyTorch's f32 list); else x itself. */
static inline kiln_tensor kiln_nn_autocast_f32(kiln_tensor x, kiln_loc loc) {
  kiln_dtype dt = kiln_dtype_of(x);
  if (kiln_autocast_dtype() == KILN_F32 || (dt != KILN_BF16 && dt != KILN_F16)) return x;
  return kiln_cast_at(x, KILN_F32, loc);
}
/* A 16-bit float x in f32 (the layer or loss computes in f32 and rounds
 * its result once, to *dt, the input's dtype; as PyTorch's CPU kernels
 * accumulate 16-bit inputs in f32): its sums, squares and counts would
 * overflow or cancel in 16 bits. Other dtypes: x itself. */
static inline kiln_tensor kiln_nn_f32_inside(kiln_tensor x, kiln_dtype *dt, kiln_loc loc) {
  *dt = kiln_dtype_of(x);
  return *dt == KILN_BF16 || *dt == KILN_F16 ? kiln_cast_at(x, KILN_F32, loc) : x;
}
/* y rounded to dt when it was computed in f32 for a 16-bit input. */
static inline kiln_tensor kiln_nn_round_to(kiln_tensor y, kiln_dtype dt, kiln_loc loc) {
  return (dt == KILN_BF16 || dt == KILN_F16) && kiln_dtype_of(y) != dt ? kiln_cast_at(y, dt, loc) : y;
}
/* A bias added to a matmul's 16-bit result inside a region joins it in that
 * dtype (as autocast's linear/conv, which take the bias in 16 bits too). */
static inline kiln_tensor kiln_nn_autocast_bias(kiln_tensor y, kiln_tensor b, kiln_loc loc) {
  kiln_dtype dt = kiln_dtype_of(y);
  if (kiln_autocast_dtype() == KILN_F32 || dt == kiln_dtype_of(b) || (dt != KILN_BF16 && dt != KILN_F16)) return b;
  return kiln_cast_at(b, dt, loc);
}

/* 1 / sqrt(var + eps), the scale of a normalization (layer norm, batch
 * norm). A variance that overflowed to +inf (values near the dtype's limit,
 * whose squares overflow) gives NaN, as PyTorch's kernels do, where
 * rsqrt(inf) = 0 would quietly turn the row into zeros. */
static inline kiln_tensor kiln_nn_inv_std(kiln_tensor var, double eps, kiln_loc loc) {
  kiln_tensor r = kiln_rsqrt_at(kiln_add_c_at(var, eps, loc), loc);
  return kiln_where_at(kiln_isinf_at(var, loc), kiln_full_at(kiln_dtype_of(var), 0, NULL, NAN, loc), r, loc);
}

/* The entries of a name/tensor table, parameters only or with buffers:
 * names[i] = names_base + i * name_stride. Returns the count (which may
 * exceed max; only max are written). Shared by modules and models. */
int kiln_nn_list(int n, const char *names_base, size_t name_stride, const kiln_tensor *tensors,
                 const unsigned char *is_buffer, int with_buffers, const char **names, kiln_tensor *out, int max);

#endif
