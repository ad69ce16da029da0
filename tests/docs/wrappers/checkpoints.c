/* docs/checkpoints.md: w1 [2,3] and b1 [2] are a model's kept parameters.
 * After the fragment saved and loaded them, w1 holds what was saved. */
#include "doc_wrap.h"

int main(void) {
  int64_t ws[2] = {2, 3}, bs[1] = {2};
  float w[6] = {1, 2, 3, 4, 5, 6}, bh[2] = {-1, 1};
  kiln_tensor w1 = kiln_param(kiln_from_host(w, KILN_F32, 2, ws));
  kiln_tensor b1 = kiln_param(kiln_from_host(bh, KILN_F32, 1, bs));
  /* @DOC@ */
  float got[6];
  if (kiln_to_host(w1, got, sizeof got) != KILN_OK || got[0] != 1 || got[5] != 6) {
    fprintf(stderr, "checkpoints: w1 did not come back\n");
    kiln_shutdown();
    return 1;
  }
  return doc_end();
}
