/* docs/autograd.md's loop: w [3,1] fitted by least squares to y = x·[1,2,3]
 * (x and y kept, the shape, the step count and the learning rate given);
 * after the loop w must be close to [1,2,3]. */
#include <math.h>

#include "doc_wrap.h"

int main(void) {
  int64_t shape[2] = {3, 1}, xs[2] = {4, 3}, ys[2] = {4, 1};
  float xh[12] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, yh[4] = {1, 2, 3, 6};
  kiln_tensor x = kiln_keep(kiln_from_host(xh, KILN_F32, 2, xs));
  kiln_tensor y = kiln_keep(kiln_from_host(yh, KILN_F32, 2, ys));
  int n = 300;
  double lr = 0.5;
  /* @DOC@ */
  float got[3] = {0, 0, 0};
  int ok = kiln_to_host(w, got, sizeof got) == KILN_OK;
  for (int i = 0; i < 3; i++) ok = ok && fabsf(got[i] - (float)(i + 1)) < 1e-3f;
  if (!ok) {
    fprintf(stderr, "autograd_loop: w = [%g, %g, %g], expected [1, 2, 3]\n", got[0], got[1], got[2]);
    kiln_shutdown();
    return 1;
  }
  return doc_end();
}
