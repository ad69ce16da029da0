/* kiln optim — optimizers (SGD, AdamW), a learning-rate schedule and
 * gradient clipping, built from kiln's public ops.
 *
 * A step traces the update of every parameter into the current step's graph
 * and writes the new values in place with kiln_assign (the old buffers are
 * donated). Optimizer state (momentum buffers, exp_avg, exp_avg_sq) lives in
 * kept tensors. The learning rate and every step-dependent factor (bias
 * corrections, the dampening of the first step) enter the graph as scalar
 * graph inputs (kiln_*_s), so changing the learning rate or advancing the
 * step never recompiles: a training loop compiles its step graph once.
 *
 * Gradient accumulation over micro-batches: run forward + kiln_backward for
 * each micro-batch (gradients accumulate), then call the optimizer step once
 * and kiln_optim_zero_grad. Scale the loss by 1/micro_batches for a mean.
 *
 * Ownership: kiln_optim_create_sgd/_adamw copy the parameter handle array
 * (the tensors stay the caller's); kiln_optim_destroy releases only the
 * optimizer's state tensors. Destroy before kiln_shutdown().
 *
 * Errors: bad arguments record an error at the caller's file:line and return
 * the error status (a create leaves *out NULL); nothing aborts.
 *
 * Threads: one tracing thread at a time, like the rest of the tracing API.
 */
#ifndef KILN_OPTIM_H
#define KILN_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.optim.SGD options. dampening applies from the second step (the
 * first step's buffer is the gradient itself, as torch). */
typedef struct kiln_sgd_opts {
  double lr;
  double momentum;     /* 0: plain SGD, no buffers */
  double dampening;
  double weight_decay; /* L2: added to the gradient */
  bool nesterov;       /* needs momentum > 0 and dampening == 0 */
} kiln_sgd_opts;

/* torch.optim.AdamW options (amsgrad is not supported). */
typedef struct kiln_adamw_opts {
  double lr;
  double beta1, beta2; /* 0.9, 0.999 in torch */
  double eps;          /* 1e-8 */
  double weight_decay; /* decoupled: p *= 1 - lr·wd; torch's default is 0.01 */
} kiln_adamw_opts;

/* An optimizer over a fixed list of parameters (opaque). */
typedef struct kiln_optim kiln_optim;

/* Create an optimizer for n parameters (kept f32/f64 tensors) into *out. Its
 * state tensors are zeros, kept, computed with the next step. On error *out
 * is NULL and the status is returned. */
#define kiln_optim_create_sgd(n, params, opts, out) kiln_optim_create_sgd_at((n), (params), (opts), (out), KILN_HERE)
kiln_status kiln_optim_create_sgd_at(int n, const kiln_tensor *params, const kiln_sgd_opts *opts, kiln_optim **out,
                                     kiln_loc loc);
#define kiln_optim_create_adamw(n, params, opts, out) \
  kiln_optim_create_adamw_at((n), (params), (opts), (out), KILN_HERE)
kiln_status kiln_optim_create_adamw_at(int n, const kiln_tensor *params, const kiln_adamw_opts *opts,
                                       kiln_optim **out, kiln_loc loc);
/* Release the state tensors and free o (NULL is a no-op). */
void kiln_optim_destroy(kiln_optim *o);

/* The learning rate of the next steps (a graph input: never recompiles).
 * A NULL o, or an lr that is NaN, infinite or negative, records
 * KILN_ERR_INVALID_ARGUMENT naming kiln_optim_set_lr; the rate is unchanged. */
void kiln_optim_set_lr(kiln_optim *o, double lr);
double kiln_optim_lr(const kiln_optim *o);
/* Steps taken so far; settable to resume from a checkpoint (it sets every
 * parameter's own count too). AdamW's bias correction and SGD's first-step
 * rule use each parameter's own count, as torch's state["step"]: a step
 * that gives a parameter no gradient (null, torch's None) does not advance
 * it. */
int64_t kiln_optim_step_count(const kiln_optim *o);
/* A NULL o or a negative count records KILN_ERR_INVALID_ARGUMENT (nothing changes). */
#define kiln_optim_set_step_count(o, steps) kiln_optim_set_step_count_at((o), (steps), KILN_HERE)
kiln_status kiln_optim_set_step_count_at(kiln_optim *o, int64_t steps, kiln_loc loc);
/* Parameter i's own step count (torch's state[p]["step"]): the steps that
 * gave it a gradient; -1 for a NULL o or i out of range. It differs from
 * kiln_optim_step_count when some step gave parameter i no gradient (a
 * frozen layer, an unused embedding), so a checkpoint that must resume bit
 * for bit saves it per parameter, beside kiln_optim_state's tensors, and
 * puts it back with kiln_optim_set_param_step_count (after
 * kiln_optim_set_step_count, which overwrites every parameter's count).
 * The setter records KILN_ERR_INVALID_ARGUMENT (nothing changes) for a NULL
 * o, i out of range or a negative count. */
int64_t kiln_optim_param_step_count(const kiln_optim *o, int i);
#define kiln_optim_set_param_step_count(o, i, steps) kiln_optim_set_param_step_count_at((o), (i), (steps), KILN_HERE)
kiln_status kiln_optim_set_param_step_count_at(kiln_optim *o, int i, int64_t steps, kiln_loc loc);

/* One update with explicit gradients: params[i] must be the optimizer's i-th
 * parameter (same handle; n the same count) and grads[i] its gradient of the
 * same shape. A null grads[i] skips that parameter (torch's grad None).
 * Traces the update and assigns parameters and state in place; the values
 * are computed at the next sync point. Returns KILN_OK or the error status;
 * a parameter that is no longer live (released, or a temporary of an earlier
 * step that was never kept) is KILN_ERR_STALE_HANDLE. */
#define kiln_optim_step_tensors(o, n, params, grads) kiln_optim_step_tensors_at((o), (n), (params), (grads), KILN_HERE)
kiln_status kiln_optim_step_tensors_at(kiln_optim *o, int n, const kiln_tensor *params, const kiln_tensor *grads,
                                       kiln_loc loc);
/* One update with the gradients accumulated by autograd (kiln_grad(p)).
 * It does not clear them: call kiln_optim_zero_grad(o) after the update
 * (before the step marker, so gradients are not step outputs), or they keep
 * accumulating as in gradient accumulation.
 * KILN_ERR_UNSUPPORTED when kiln was built without autograd. */
#define kiln_optim_step(o) kiln_optim_step_at((o), KILN_HERE)
kiln_status kiln_optim_step_at(kiln_optim *o, kiln_loc loc);

/* torch's optimizer.zero_grad() (set_to_none=True): kiln_zero_grad(p) for
 * every parameter of o. Their gradients are released (kiln_grad(p) becomes
 * the null tensor, old gradient handles become stale) and the next backward
 * starts from zero. NULL o, or parameters without a gradient, are no-ops;
 * nothing is recorded in the sticky status. */
void kiln_optim_zero_grad(kiln_optim *o);

/* The state tensors of parameter i, for checkpoints: SGD with momentum
 * "momentum_buffer"; AdamW "exp_avg", "exp_avg_sq" (torch's names). Copies
 * up to max into names/out (either may be NULL); returns the count, -1 if i
 * is out of range. The handles stay owned by the optimizer. */
int kiln_optim_state(const kiln_optim *o, int i, const char **names, kiln_tensor *out, int max);

/* Linear warm-up then cosine decay: for step < warmup, base·(step+1)/warmup;
 * then min + (base−min)·(1+cos(π·t))/2 with t = (step−warmup)/(total−warmup)
 * clamped to [0, 1]. Pure host function. */
double kiln_lr_warmup_cosine(int64_t step, int64_t warmup, int64_t total, double base_lr, double min_lr);

/* Clip gradients by their global L2 norm, in the graph (no host read):
 * total = sqrt(Σ‖g_i‖²), scale = min(1, max_norm / (total + 1e-6)),
 * out[i] = grads[i]·scale (out may alias grads). max_norm is a graph input.
 * Only the L2 norm (torch's norm_type 2). Returns total as a 0-d tensor,
 * f64 when a gradient is f64 (computed in f64 then), else f32 (poisoned on
 * error). */
#define kiln_clip_grad_norm(n, grads, out, max_norm) kiln_clip_grad_norm_at((n), (grads), (out), (max_norm), KILN_HERE)
kiln_tensor kiln_clip_grad_norm_at(int n, const kiln_tensor *grads, kiln_tensor *out, double max_norm, kiln_loc loc);

#ifdef __cplusplus
}
#endif
#endif /* KILN_OPTIM_H */
