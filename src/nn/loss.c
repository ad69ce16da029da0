/* Losses: cross-entropy from logits and mean squared error. */
#include "nn/nn_internal.h"

kiln_tensor kiln_cross_entropy_at(kiln_tensor logits, kiln_tensor target, int64_t ignore_index,
                                  double label_smoothing, kiln_loc loc) {
  KILN_NN_CHECK("cross_entropy", loc, 2, logits, target);
  int64_t ls[KILN_MAX_RANK], ts[KILN_MAX_RANK];
  int lr = kiln_shape(logits, ls), tr = kiln_shape(target, ts);
  if (lr < 1 || tr != lr - 1) return kiln_nn_fail(loc, "cross_entropy: logits [..., C] need targets [...]");
  for (int i = 0; i < tr; i++)
    if (ts[i] != ls[i]) return kiln_nn_fail(loc, "cross_entropy: target dim %d is %lld, logits have %lld", i,
                                            (long long)ts[i], (long long)ls[i]);
  kiln_dtype tdt = kiln_dtype_of(target);
  if (tdt != KILN_I32 && tdt != KILN_I64) return kiln_nn_fail(loc, "cross_entropy: targets must be i32 or i64");
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    return kiln_nn_fail(loc, "cross_entropy: label_smoothing %g is outside [0, 1]", label_smoothing);
  /* 16-bit logits outside autocast: f32 inside, the loss rounded once (a 16-bit sum of the rows' losses
   * overflowed past 65504, and a 16-bit count of 65504 rows or more made the mean 0) */
  kiln_dtype out_dt;
  logits = kiln_nn_f32_inside(kiln_nn_autocast_f32(logits, loc), &out_dt, loc);
  kiln_dtype dt = kiln_dtype_of(logits);
  kiln_tensor logp = kiln_log_softmax_at(logits, -1, loc);
  kiln_tensor valid = kiln_ne_c_at(target, (double)ignore_index, loc);
  /* ignored targets gather class 0, then are masked out */
  kiln_tensor safe = kiln_where_at(valid, target, kiln_constant_at(tdt, 0, loc), loc);
  int64_t us[KILN_MAX_RANK];
  for (int i = 0; i < tr; i++) us[i] = ts[i];
  us[tr] = 1;
  kiln_tensor nll = kiln_neg_at(kiln_gather_at(logp, -1, kiln_reshape_at(safe, lr, us, loc), loc), loc);
  nll = kiln_reshape_at(nll, tr, ts, loc);
  kiln_tensor per = nll;
  if (label_smoothing > 0) {
    int ax[1] = {-1};
    kiln_tensor smooth = kiln_neg_at(kiln_mean_at(logp, 1, ax, 0, loc), loc);
    per = kiln_add_at(kiln_mul_c_at(nll, 1.0 - label_smoothing, loc), kiln_mul_c_at(smooth, label_smoothing, loc),
                      loc);
  }
  kiln_tensor vf = kiln_cast_at(valid, dt, loc);
  /* where, not per * vf: an ignored row's loss may be inf (a -inf logit at
   * the class 0 it gathers), and inf * 0 made the whole loss NaN */
  kiln_tensor total = kiln_sum_at(kiln_where_at(valid, per, kiln_constant_at(dt, 0, loc), loc), 0, NULL, 0, loc);
  /* max(count, 1): all-ignored batches give 0, not 0/0 */
  kiln_tensor count = kiln_maximum_c_at(kiln_sum_at(vf, 0, NULL, 0, loc), 1.0, loc);
  return kiln_nn_round_to(kiln_div_at(total, count, loc), out_dt, loc);
}

kiln_tensor kiln_mse_loss_at(kiln_tensor a, kiln_tensor b, kiln_loc loc) {
  KILN_NN_CHECK("mse_loss", loc, 2, a, b);
  int ra = kiln_rank(a), rb = kiln_rank(b), ok = 1; /* broadcast, as F.mse_loss (with its warning) */
  for (int i = 1; ra >= 0 && rb >= 0 && i <= ra && i <= rb; i++) {
    int64_t x = kiln_dim(a, -i), y = kiln_dim(b, -i);
    ok &= x == y || x == 1 || y == 1;
  }
  if (!ok) {
    char sa[128], sb[128];
    return kiln_nn_fail(loc, "mse_loss: input %s and target %s cannot be broadcast",
                        kiln_nn_shape_str(a, sa, sizeof sa), kiln_nn_shape_str(b, sb, sizeof sb));
  }
  /* 16-bit inputs outside autocast: f32 inside, rounded once to their dtype when both have it (squares of 256
   * or more overflow f16) */
  kiln_dtype da, db;
  a = kiln_nn_f32_inside(kiln_nn_autocast_f32(a, loc), &da, loc);
  b = kiln_nn_f32_inside(kiln_nn_autocast_f32(b, loc), &db, loc);
  kiln_tensor d = kiln_sub_at(a, b, loc);
  return kiln_nn_round_to(kiln_mean_at(kiln_mul_at(d, d, loc), 0, NULL, 0, loc), da == db ? da : KILN_F32, loc);
}
