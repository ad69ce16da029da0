/* docs/tensorboard.md: a loop with `steps` steps whose loss and accuracy
 * are host doubles (the elided part computes them). */
#include "doc_wrap.h"

int main(void) {
  int64_t steps = 3;
  double loss = 0.5, acc = 0.75;
  /* @DOC@ */
  return doc_end();
}
