/* docs/nn.md's optimizer example: `model` is a layer (a Linear 4 -> 2), x
 * and y a fixed batch (kept), `total` and `warmup` the schedule's steps.
 * The loss on the batch must fall over the loop. */
#include "doc_wrap.h"

int main(void) {
  kiln_linear *model = NULL;
  if (kiln_linear_create(4, 2, true, 3, &model) != KILN_OK) return doc_end();
  int64_t xs[2] = {8, 4}, ys[2] = {8, 2};
  float xh[32], yh[16];
  for (int i = 0; i < 32; i++) xh[i] = (float)((i * 7) % 9) / 9.0f - 0.5f;
  for (int i = 0; i < 16; i++) yh[i] = (float)((i * 5) % 7) / 7.0f;
  kiln_tensor x = kiln_keep(kiln_from_host(xh, KILN_F32, 2, xs));
  kiln_tensor y = kiln_keep(kiln_from_host(yh, KILN_F32, 2, ys));
  int64_t total = 30, warmup = 5;
  double before = kiln_item_f64(kiln_mse_loss(kiln_linear_forward(model, x), y));
  kiln_mark_step();
  /* @DOC@ */
  double after = kiln_item_f64(kiln_mse_loss(kiln_linear_forward(model, x), y));
  kiln_mark_step();
  kiln_linear_destroy(model);
  if (!(after < before)) {
    fprintf(stderr, "nn_optim: the loss went from %g to %g\n", before, after);
    kiln_shutdown();
    return 1;
  }
  return doc_end();
}
