/* docs/metrics.md's warm-up over bucket shapes: `model` (one kept weight,
 * trained by train_step_trace: forward, backward, an SGD update),
 * batch_of_shape and the buckets are the program's. The prose's claim is
 * checked: after the discarded steps the weight still holds its value. */
#include <kiln/autograd.h>

#include "doc_wrap.h"

static kiln_tensor batch_of_shape(int64_t len) {
  int64_t s[2] = {4, len};
  return kiln_ones(KILN_F32, 2, s);
}

static void train_step_trace(kiln_tensor model, kiln_tensor x) {
  kiln_tensor loss = kiln_mean(kiln_mul(x, model), 0, NULL, false);
  kiln_backward(loss);
  kiln_assign(model, kiln_sub(model, kiln_mul_c(kiln_grad(model), 0.1)));
  kiln_zero_grad(model);
}

int main(void) {
  int64_t one[1] = {1};
  float w0 = 2.0f;
  kiln_tensor model = kiln_param(kiln_from_host(&w0, KILN_F32, 1, one));
  kiln_requires_grad(model);
  kiln_mark_step();
  int64_t bucket[3] = {16, 32, 64};
  int n_buckets = 3;
  /* @DOC@ */
  float w = 0;
  if (kiln_to_host(model, &w, sizeof w) != KILN_OK || w != w0) {
    fprintf(stderr, "warmup: the weight is %g after discarded steps, expected %g\n", w, w0);
    kiln_shutdown();
    return 1;
  }
  return doc_end();
}
