/* For check_docs.py --self-test: shape [4] is defined, nothing else. */
#include "doc_wrap.h"

int main(void) {
  int64_t shape[1] = {4};
  int64_t bad[2] = {2, -3};
  (void)bad;
  /* @DOC@ */
  return doc_end();
}
