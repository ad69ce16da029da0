/* docs/api.md's training loop: a linear model x·w fitted to y by gradient
 * descent on fixed batches. The prose assumes the shapes, the batches, the
 * step count and the learning rate; after the loop, w must be near the
 * weights the targets were made with (3, -2), or the loop does not train. */
#include <math.h>

#include "doc_wrap.h"

int main(void) {
  int n = 200;
  double lr = 1.0;
  int64_t wshape[2] = {2, 1}, xshape[2] = {8, 2}, yshape[2] = {8, 1};
  static float batch[200][16], target[200][8];
  for (int s = 0; s < n; s++)
    for (int r = 0; r < 8; r++) {
      float a = (float)((s * 7 + r * 3) % 11) / 11.0f - 0.5f, b = (float)((s * 5 + r) % 13) / 13.0f - 0.5f;
      batch[s][2 * r] = a;
      batch[s][2 * r + 1] = b;
      target[s][r] = 3 * a - 2 * b;
    }
  /* @DOC@ */
  float got[2] = {0, 0};
  if (kiln_to_host(w, got, sizeof got) != KILN_OK || fabsf(got[0] - 3) > 0.05f || fabsf(got[1] + 2) > 0.05f) {
    fprintf(stderr, "api_loop: w = [%g, %g], expected [3, -2]\n", got[0], got[1]);
    kiln_shutdown();
    return 1;
  }
  return doc_end();
}
