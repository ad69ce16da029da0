/* A fragment that needs nothing but kiln: the body of main. */
#include "doc_wrap.h"

int main(void) {
  /* @DOC@ */
  return doc_end();
}
