/* kiln autograd — reverse-mode automatic differentiation over the lazy
 * trace.
 *
 * Gradients are lazy tensors like any other: kiln_backward() only traces
 * the backward ops, so forward, backward and the optimizer update compile
 * into ONE graph at the next kiln_mark_step(). A training step:
 *
 *     kiln_zero_grad(w);                     // or let gradients accumulate
 *     kiln_tensor loss = model(x, w);
 *     kiln_backward(loss);
 *     kiln_assign(w, kiln_sub(w, kiln_mul_s(kiln_grad(w), lr)));
 *     kiln_mark_step();
 *
 * Rules:
 *  - Only floating-point tensors can require gradients; integer and bool
 *    tensors, comparisons, logic ops, argmax, iota, random and constants
 *    carry none.
 *  - Gradients flow through the graph of the current step. Call backward
 *    before assigning new values to the parameters it differentiates (a
 *    tensor's graph position is its value at backward time): a backward
 *    whose output depends on the value a requiring-grad tensor had before a
 *    kiln_assign of this step is an error naming that assign.
 *  - Gradient tensors (kiln_grad) are kept tensors owned by kiln: do not
 *    release them; kiln_zero_grad() or releasing the parameter frees them.
 *  - Reductions to a max/min spread the gradient evenly over ties (as
 *    torch.amax); elementwise maximum/minimum split it in half on ties.
 *
 * Thread-safety: like the tracing API, for the one tracing thread.
 */
#ifndef KILN_AUTOGRAD_H
#define KILN_AUTOGRAD_H

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Mark t (normally a kept parameter) as requiring gradients: later
 * backward passes accumulate into its gradient. As in PyTorch, it takes
 * effect for the ops traced after the call (earlier uses of t carry no
 * gradient), and only uses made through t count (not another tensor with
 * the same value or buffer). Marking twice is a no-op.
 * Errors (recorded in the sticky status with loc): stale/null handle,
 * non-floating-point dtype. A poisoned t is ignored silently. */
#define kiln_requires_grad(t) kiln_requires_grad_at((t), KILN_HERE)
void kiln_requires_grad_at(kiln_tensor t, kiln_loc loc);

/* Reverse pass from a one-element floating-point loss (seed 1): for every
 * requiring-grad tensor the loss depends on, grad += dloss/dt (lazily).
 * Returns KILN_OK, or the error recorded with loc: stale handle, a loss with
 * more than one element (use kiln_backward_with), a loss that depends on no
 * requiring-grad tensor, out of memory. A poisoned loss returns the sticky
 * status without a new message. Several backward calls in one step are
 * fine: their gradients add up. */
#define kiln_backward(loss) kiln_backward_at((loss), KILN_HERE)
kiln_status kiln_backward_at(kiln_tensor loss, kiln_loc loc);

/* Like kiln_backward from any floating-point `out`, with the seed gradient
 * `seed` (same shape as out; converted to out's dtype): computes the
 * vector-Jacobian product seed^T d out / d t. */
#define kiln_backward_with(out, seed) kiln_backward_with_at((out), (seed), KILN_HERE)
kiln_status kiln_backward_with_at(kiln_tensor out, kiln_tensor seed, kiln_loc loc);

/* The accumulated gradient of t (a kept tensor owned by kiln: do not
 * release it; same dtype and shape as t), or the null tensor {0,0} if t has
 * none (never reached by a backward since the last kiln_zero_grad, or does
 * not require grad). The handle stays the same across accumulations until
 * kiln_zero_grad(t). */
kiln_tensor kiln_grad(kiln_tensor t);

/* Forget t's gradient (release it: handles to it become stale); the next
 * backward starts from zero. No-op if t has none. */
void kiln_zero_grad(kiln_tensor t);

/* No-grad regions (nestable): ops traced between begin and end record no
 * backward edges, so backward never passes through their results (they
 * act as constants; an op that returns its input unchanged, such as a
 * reshape to the same shape, returns a detached copy). An end without a
 * begin is an error (recorded with loc). */
#define kiln_no_grad_begin() kiln_no_grad_begin_at(KILN_HERE)
#define kiln_no_grad_end() kiln_no_grad_end_at(KILN_HERE)
void kiln_no_grad_begin_at(kiln_loc loc);
void kiln_no_grad_end_at(kiln_loc loc);
/* false inside a no-grad region, else true. */
bool kiln_grad_enabled(void);

#ifdef __cplusplus
}
#endif
#endif /* KILN_AUTOGRAD_H */
