/* docs/profiling.md's annotated step: a model m, a batch x/y and an
 * optimizer opt exist (compiled only: the fragment loops forever and
 * listens on port 6009). */
#include <kiln/profiler.h>

#include "doc_wrap.h"

int main(void) {
  kiln_model *m = NULL;
  kiln_model_create(KILN_MODEL_MLP, 10, 1, &m);
  kiln_tensor x = {0, 0}, y = {0, 0};
  kiln_optim *opt = NULL;
  /* @DOC@ */
  return doc_end();
}
