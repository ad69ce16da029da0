/* SGD and AdamW as traced in-place updates; the warm-up/cosine schedule and
 * global-norm gradient clipping. Formulas follow torch.optim (single-tensor
 * path) so results match PyTorch to rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "kiln/optim.h"
#include "nn/nn_internal.h"
#if __has_include("kiln/autograd.h")
#include "kiln/autograd.h"
#define KILN_OPTIM_HAVE_AUTOGRAD 1
#endif

enum { OPT_SGD, OPT_ADAMW };

struct kiln_optim {
  int kind;
  int n;
  kiln_tensor *params;
  kiln_tensor *s1, *s2; /* SGD: momentum buffer; AdamW: exp_avg, exp_avg_sq */
  double lr;
  int64_t steps;  /* step calls */
  int64_t *pstep; /* per parameter: the steps that gave it a gradient (torch's state["step"]) */
  kiln_sgd_opts sgd;
  kiln_adamw_opts adam;
};

static int is_null(kiln_tensor t) { return t.index == 0 && t.gen == 0; }

/* Zero state as uploaded data, not a kiln_full constant: a kept constant
 * stays a constant node of the trace, so the first step's graph would fold it
 * and differ from every later step's (one extra compile). */
static kiln_tensor zeros_like(kiln_tensor p, kiln_loc loc) {
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(p, s);
  kiln_dtype dt = kiln_dtype_of(p);
  void *z = calloc((size_t)kiln_numel(p) + 1, kiln_dtype_size(dt));
  if (!z) return kiln_keep(kiln_full_at(dt, r, s, 0.0, loc));
  kiln_tensor t = kiln_keep(kiln_from_host_at(z, dt, r, s, loc));
  free(z);
  return t;
}

static kiln_status create(int kind, int n, const kiln_tensor *params, int nstate, kiln_optim **out, kiln_loc loc) {
  if (n <= 0 || !params) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "optim: need at least one parameter (n = %d)", n);
  }
  for (int i = 0; i < n; i++) {
    kiln_dtype dt = kiln_dtype_of(params[i]);
    if (!kiln_is_valid(params[i]) || (dt != KILN_F32 && dt != KILN_F64)) {
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "optim: parameter %d is not a live f32/f64 tensor", i);
    }
    /* a tied weight gathered from two modules' parameter lists: each entry
     * had its own state and the weight was updated twice a step (torch
     * dedups model.parameters() and keys its state by the tensor) */
    for (int j = 0; j < i; j++)
      if (params[j].index == params[i].index && params[j].gen == params[i].gen)
        return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                          "optim: parameter %d is parameter %d again (a tied weight listed twice?): list each "
                          "parameter once",
                          i, j);
  }
  kiln_optim *o = calloc(1, sizeof *o);
  if (o) {
    o->params = calloc((size_t)n, sizeof *o->params);
    o->s1 = calloc((size_t)n, sizeof *o->s1);
    o->s2 = calloc((size_t)n, sizeof *o->s2);
    o->pstep = calloc((size_t)n, sizeof *o->pstep);
  }
  if (!o || !o->params || !o->s1 || !o->s2 || !o->pstep) {
    if (o) {
      free(o->params);
      free(o->s1);
      free(o->s2);
      free(o->pstep);
      free(o);
    }
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "optim: out of host memory");
  }
  o->kind = kind;
  o->n = n;
  memcpy(o->params, params, (size_t)n * sizeof *params);
  for (int i = 0; i < n; i++) {
    if (nstate >= 1) o->s1[i] = zeros_like(params[i], loc);
    if (nstate >= 2) o->s2[i] = zeros_like(params[i], loc);
  }
  *out = o;
  return KILN_OK;
}

kiln_status kiln_optim_create_sgd_at(int n, const kiln_tensor *params, const kiln_sgd_opts *opts, kiln_optim **out,
                                     kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "sgd");
  if (!opts || !(opts->lr >= 0 && isfinite(opts->lr)) || !(opts->momentum >= 0) || !(opts->weight_decay >= 0) ||
      (opts->nesterov && (opts->momentum <= 0 || opts->dampening != 0))) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                      "sgd: bad options (lr finite, momentum and weight_decay >= 0; Nesterov needs momentum > 0 and "
                      "dampening 0)");
  }
  kiln_optim *o = NULL;
  kiln_status s = create(OPT_SGD, n, params, opts->momentum > 0 ? 1 : 0, &o, loc);
  if (s != KILN_OK) return s;
  o->sgd = *opts;
  o->lr = opts->lr;
  *out = o;
  return KILN_OK;
}

kiln_status kiln_optim_create_adamw_at(int n, const kiln_tensor *params, const kiln_adamw_opts *opts,
                                       kiln_optim **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "adamw");
  if (!opts || !(opts->lr >= 0 && isfinite(opts->lr)) || !(opts->beta1 >= 0 && opts->beta1 < 1) ||
      !(opts->beta2 >= 0 && opts->beta2 < 1) || !(opts->eps >= 0) || !(opts->weight_decay >= 0)) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                      "adamw: bad options (lr, eps, weight_decay >= 0; betas in [0, 1))");
  }
  kiln_optim *o = NULL;
  kiln_status s = create(OPT_ADAMW, n, params, 2, &o, loc);
  if (s != KILN_OK) return s;
  o->adam = *opts;
  o->lr = opts->lr;
  *out = o;
  return KILN_OK;
}

void kiln_optim_destroy(kiln_optim *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) {
    kiln_release(o->s1[i]);
    kiln_release(o->s2[i]);
  }
  free(o->params);
  free(o->s1);
  free(o->s2);
  free(o->pstep);
  free(o);
}

void kiln_optim_set_lr(kiln_optim *o, double lr) {
  /* As the create functions: a NaN or negative rate would turn every
   * parameter into NaN (or ascend) with status OK. The old rate stays. */
  if (!o || !(lr >= 0) || isinf(lr)) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, (kiln_loc){0, 0}, "kiln_optim_set_lr: %s (lr %g; finite and >= 0)",
               !o ? "NULL optimizer" : "bad learning rate", lr);
    return;
  }
  o->lr = lr;
}
double kiln_optim_lr(const kiln_optim *o) { return o ? o->lr : NAN; }
int64_t kiln_optim_step_count(const kiln_optim *o) { return o ? o->steps : 0; }
kiln_status kiln_optim_set_step_count_at(kiln_optim *o, int64_t steps, kiln_loc loc) {
  if (!o || steps < 0)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "optim_set_step_count: %s (%lld steps)",
                      !o ? "NULL optimizer" : "negative step count", (long long)steps);
  o->steps = steps;
  for (int i = 0; i < o->n; i++) o->pstep[i] = steps;
  return KILN_OK;
}

int64_t kiln_optim_param_step_count(const kiln_optim *o, int i) {
  return o && i >= 0 && i < o->n ? o->pstep[i] : -1;
}

kiln_status kiln_optim_set_param_step_count_at(kiln_optim *o, int i, int64_t steps, kiln_loc loc) {
  if (!o || i < 0 || i >= o->n || steps < 0)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                      "optim_set_param_step_count: %s (parameter %d of %d, %lld steps)",
                      !o ? "NULL optimizer" : steps < 0 ? "negative step count" : "no such parameter", i,
                      o ? o->n : 0, (long long)steps);
  o->pstep[i] = steps;
  return KILN_OK;
}

int kiln_optim_state(const kiln_optim *o, int i, const char **names, kiln_tensor *out, int max) {
  if (!o || i < 0 || i >= o->n) return -1;
  const char *nm[2];
  kiln_tensor t[2];
  int k = 0;
  if (o->kind == OPT_SGD) {
    if (!is_null(o->s1[i])) nm[k] = "momentum_buffer", t[k++] = o->s1[i];
  } else {
    nm[k] = "exp_avg", t[k++] = o->s1[i];
    nm[k] = "exp_avg_sq", t[k++] = o->s2[i];
  }
  for (int j = 0; j < k && j < max; j++) {
    if (names) names[j] = nm[j];
    if (out) out[j] = t[j];
  }
  return k;
}

static void sgd_update(kiln_optim *o, int i, kiln_tensor g, kiln_loc loc) {
  const kiln_sgd_opts *s = &o->sgd;
  kiln_tensor p = o->params[i];
  if (s->weight_decay != 0) g = kiln_add_at(g, kiln_mul_c_at(p, s->weight_decay, loc), loc);
  if (s->momentum > 0) {
    /* buf starts at zero, so momentum·0 + g reproduces torch's buf = g on
     * the parameter's first step (its own: a step without its gradient
     * does not count); dampening only applies from its second: a graph input. */
    kiln_tensor gd = g;
    if (s->dampening != 0) gd = kiln_mul_s_at(g, o->pstep[i] == 1 ? 1.0 : 1.0 - s->dampening, loc);
    kiln_tensor buf = kiln_add_at(kiln_mul_c_at(o->s1[i], s->momentum, loc), gd, loc);
    kiln_assign_at(o->s1[i], buf, loc);
    g = s->nesterov ? kiln_add_at(g, kiln_mul_c_at(buf, s->momentum, loc), loc) : buf;
  }
  kiln_assign_at(p, kiln_sub_at(p, kiln_mul_s_at(g, o->lr, loc), loc), loc);
}

static void adamw_update(kiln_optim *o, int i, kiln_tensor g, kiln_loc loc) {
  const kiln_adamw_opts *a = &o->adam;
  kiln_tensor p = o->params[i];
  double t = (double)o->pstep[i]; /* the parameter's own steps: torch's state["step"] */
  double bc1 = 1.0 - pow(a->beta1, t), bc2 = 1.0 - pow(a->beta2, t);
  /* Host-computed per-step factors enter as graph inputs (_s). */
  if (a->weight_decay != 0) p = kiln_mul_s_at(p, 1.0 - o->lr * a->weight_decay, loc);
  kiln_tensor m = kiln_add_at(kiln_mul_c_at(o->s1[i], a->beta1, loc), kiln_mul_c_at(g, 1.0 - a->beta1, loc), loc);
  /* (1 - beta2) g first, then times g, as torch's addcmul_(g, g, value=1 - beta2): g * g alone overflows f32
   * from |g| ~ 1.8e19, and an inf second moment froze the parameter for good (m / inf = 0) */
  kiln_tensor v = kiln_add_at(kiln_mul_c_at(o->s2[i], a->beta2, loc),
                              kiln_mul_at(kiln_mul_c_at(g, 1.0 - a->beta2, loc), g, loc), loc);
  kiln_assign_at(o->s1[i], m, loc);
  kiln_assign_at(o->s2[i], v, loc);
  kiln_tensor denom = kiln_add_c_at(kiln_div_s_at(kiln_sqrt_at(v, loc), sqrt(bc2), loc), a->eps, loc);
  kiln_tensor upd = kiln_mul_s_at(kiln_div_at(m, denom, loc), o->lr / bc1, loc);
  kiln_assign_at(o->params[i], kiln_sub_at(p, upd, loc), loc);
}

kiln_status kiln_optim_step_tensors_at(kiln_optim *o, int n, const kiln_tensor *params, const kiln_tensor *grads,
                                       kiln_loc loc) {
  if (!o || !params || !grads) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "optim step: NULL argument");
  if (n != o->n)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "optim step: %d parameters given, the optimizer has %d", n, o->n);
  for (int i = 0; i < n; i++) {
    if (params[i].index != o->params[i].index || params[i].gen != o->params[i].gen)
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "optim step: parameter %d is not the optimizer's parameter %d",
                        i, i);
    /* a released parameter, or one that was a step's temporary (never
     * kept), has no gradient either: without this the step skipped it and
     * returned OK, training nothing */
    if (!kiln_is_valid(params[i])) {
      if (kiln_last_status() != KILN_OK) return kiln_last_status(); /* poisoned by that error */
      return kiln_error(KILN_ERR_STALE_HANDLE, loc,
                        "optim step: parameter %d is not a live tensor (released, or a temporary of an earlier "
                        "step: make parameters with kiln_param)",
                        i);
    }
    if (is_null(grads[i])) continue;
    int64_t ps[KILN_MAX_RANK], gs[KILN_MAX_RANK];
    int pr = kiln_shape(params[i], ps), gr = kiln_shape(grads[i], gs);
    if (pr != gr || (pr > 0 && memcmp(ps, gs, (size_t)pr * sizeof *ps)))
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "optim step: gradient %d's shape differs from its parameter's",
                        i);
  }
  o->steps++;
  for (int i = 0; i < n; i++) {
    if (is_null(grads[i])) continue;
    o->pstep[i]++;
    kiln_tensor g = grads[i];
    if (kiln_dtype_of(g) != kiln_dtype_of(o->params[i])) g = kiln_cast_at(g, kiln_dtype_of(o->params[i]), loc);
    if (o->kind == OPT_SGD)
      sgd_update(o, i, g, loc);
    else
      adamw_update(o, i, g, loc);
  }
  return kiln_last_status();
}

kiln_status kiln_optim_step_at(kiln_optim *o, kiln_loc loc) {
  if (!o) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "optim step: NULL optimizer");
#ifdef KILN_OPTIM_HAVE_AUTOGRAD
  kiln_tensor *g = calloc((size_t)o->n, sizeof *g);
  if (!g) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "optim step: out of host memory");
  for (int i = 0; i < o->n; i++) g[i] = kiln_grad(o->params[i]);
  kiln_status s = kiln_optim_step_tensors_at(o, o->n, o->params, g, loc);
  free(g);
  return s;
#else
  return kiln_error(KILN_ERR_UNSUPPORTED, loc,
                    "optim step: kiln was built without autograd; use kiln_optim_step_tensors");
#endif
}

void kiln_optim_zero_grad(kiln_optim *o) {
#ifdef KILN_OPTIM_HAVE_AUTOGRAD
  if (!o) return;
  for (int i = 0; i < o->n; i++) kiln_zero_grad(o->params[i]);
#else
  (void)o; /* without autograd there are no gradients to release */
#endif
}

double kiln_lr_warmup_cosine(int64_t step, int64_t warmup, int64_t total, double base_lr, double min_lr) {
  if (step < 0) step = 0;
  if (warmup > 0 && step < warmup) return base_lr * (double)(step + 1) / (double)warmup;
  double t = total > warmup ? (double)(step - warmup) / (double)(total - warmup) : 1.0;
  if (t > 1) t = 1;
  if (t < 0) t = 0;
  return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + cos(M_PI * t));
}

kiln_tensor kiln_clip_grad_norm_at(int n, const kiln_tensor *grads, kiln_tensor *out, double max_norm, kiln_loc loc) {
  if (n <= 0 || !grads || !out || !(max_norm > 0)) {
    return kiln_nn_fail(loc, "clip_grad_norm: need n > 0 gradients, an output array and max_norm > 0");
  }
  kiln_tensor bad;
  if (kiln_nn_check_inputs("clip_grad_norm", loc, &bad, 0, n, grads)) {
    for (int i = 0; i < n; i++) out[i] = bad;
    return bad;
  }
  /* f64 when a gradient is f64 (torch computes each norm in its gradient's
   * dtype): squaring f64 gradients in f32 lost half their digits */
  kiln_dtype acc = KILN_F32;
  for (int i = 0; i < n; i++)
    if (!is_null(grads[i]) && kiln_dtype_of(grads[i]) == KILN_F64) acc = KILN_F64;
  kiln_tensor sq = {0, 0};
  for (int i = 0; i < n; i++) {
    if (is_null(grads[i])) continue;
    kiln_tensor g = kiln_cast_at(grads[i], acc, loc);
    kiln_tensor s = kiln_sum_at(kiln_mul_at(g, g, loc), 0, NULL, 0, loc);
    sq = is_null(sq) ? s : kiln_add_at(sq, s, loc);
  }
  if (is_null(sq)) sq = kiln_constant_at(acc, 0, loc);
  kiln_tensor total = kiln_sqrt_at(sq, loc);
  kiln_tensor scale = kiln_minimum_c_at(
      kiln_div_at(kiln_scalar_at(acc, max_norm, loc), kiln_add_c_at(total, 1e-6, loc), loc), 1.0, loc);
  for (int i = 0; i < n; i++) {
    if (is_null(grads[i])) {
      out[i] = grads[i];
      continue;
    }
    kiln_tensor sc = kiln_dtype_of(grads[i]) == acc ? scale : kiln_cast_at(scale, kiln_dtype_of(grads[i]), loc);
    out[i] = kiln_mul_at(grads[i], sc, loc);
  }
  return total;
}
