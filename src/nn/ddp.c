/* Data parallel in a few lines (kiln/dist.h): parameters broadcast from
 * rank 0, gradients averaged over the ranks in buckets, PyTorch DDP's
 * recipe (torch/csrc/distributed/c10d/reducer.cpp): buckets of about
 * bucket_bytes in reverse parameter order (the order backward produces the
 * gradients, so the first bucket is ready first), one all-reduce per
 * bucket over the gradients flattened into one buffer. The all-reduces are
 * lazy ops of the step's graph: they run when the step runs, each as soon
 * as its bucket's gradients are computed. */
#include <stdint.h>

#include "nn/nn_internal.h"

#define DDP_DEFAULT_BUCKET ((size_t)25 << 20) /* PyTorch DDP's bucket_cap_mb = 25 */

kiln_status kiln_ddp_broadcast_params_at(int n, const kiln_tensor *params, kiln_loc loc) {
  kiln_status s = kiln_dist_init_at(loc);
  if (s != KILN_OK) return s;
  if (n < 0 || (n && !params)) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "ddp_broadcast_params: %d params at %p", n, (const void *)params);
  for (int i = 0; i < n; i++)
    if (!kiln_is_valid(params[i]))
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "ddp_broadcast_params: parameter %d is not a valid tensor", i);
  if (kiln_dist_world_size() == 1) return KILN_OK;
  for (int i = 0; i < n; i++) kiln_assign_at(params[i], kiln_broadcast_at(params[i], 0, loc), loc);
  return kiln_last_status();
}

/* All-reduce (MEAN) the gradients g[0..m) (one dtype) as one flat buffer,
 * and assign each its slice back. */
static void reduce_bucket(int m, const kiln_tensor *g, kiln_loc loc) {
  if (m < 1 || m > 64) return;
  kiln_tensor flat[64] = {{0, 0}};
  int64_t total = 0;
  for (int i = 0; i < m; i++) {
    int64_t numel = kiln_numel(g[i]);
    flat[i] = kiln_reshape_at(g[i], 1, &numel, loc);
    total += numel;
  }
  kiln_tensor all = m == 1 ? flat[0] : kiln_concat_at(m, flat, 0, loc);
  /* bf16/f16 gradients (MPI has no 16-bit float sum): summed and divided in
   * f32, rounded once back to the gradients' dtype */
  kiln_dtype dt = kiln_dtype_of(all);
  int half = dt == KILN_BF16 || dt == KILN_F16;
  kiln_tensor r = kiln_all_reduce_at(half ? kiln_cast_at(all, KILN_F32, loc) : all, KILN_REDUCE_MEAN, loc);
  if (half) r = kiln_cast_at(r, dt, loc);
  int64_t off = 0;
  for (int i = 0; i < m; i++) {
    int64_t shape[KILN_MAX_RANK], numel = kiln_numel(g[i]);
    int rank = kiln_shape(g[i], shape);
    kiln_tensor part = m == 1 ? r : kiln_slice_at(r, 0, off, off + numel, 1, loc);
    kiln_assign_at(g[i], kiln_reshape_at(part, rank, shape, loc), loc);
    off += numel;
  }
  (void)total;
}

kiln_status kiln_ddp_all_reduce_grads_at(int n, const kiln_tensor *params, size_t bucket_bytes, kiln_loc loc) {
  kiln_status s = kiln_dist_init_at(loc);
  if (s != KILN_OK) return s;
  if (n < 0 || (n && !params)) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "ddp_all_reduce_grads: %d params at %p", n, (const void *)params);
  /* a bad handle is refused (as by ddp_broadcast_params), alone too: skipped,
   * its parameter's gradient would stay this rank's and the ranks drift apart */
  for (int i = 0; i < n; i++)
    if (!kiln_is_valid(params[i]))
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "ddp_all_reduce_grads: parameter %d is not a valid tensor", i);
  if (kiln_dist_world_size() == 1) return KILN_OK;
  if (!bucket_bytes) bucket_bytes = DDP_DEFAULT_BUCKET;
  kiln_tensor bucket[64];
  int m = 0;
  size_t bytes = 0;
  for (int i = n - 1; i >= 0; i--) { /* reverse order: the last layers' gradients are ready first */
    kiln_tensor g = kiln_grad(params[i]);
    if (!kiln_is_valid(g)) continue;
    size_t gb = (size_t)kiln_numel(g) * kiln_dtype_size(kiln_dtype_of(g));
    if (m && (m == 64 || bytes + gb > bucket_bytes || kiln_dtype_of(bucket[0]) != kiln_dtype_of(g))) {
      reduce_bucket(m, bucket, loc);
      m = 0;
      bytes = 0;
    }
    bucket[m++] = g;
    bytes += gb;
  }
  if (m) reduce_bucket(m, bucket, loc);
  return kiln_last_status();
}
