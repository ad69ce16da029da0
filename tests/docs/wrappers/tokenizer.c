/* docs/text.md's fragment: a sentence to tokenise, and the tokenizer's header. */
#include <string.h>

#include "doc_wrap.h"
#include "kiln/text.h"

int main(void) {
  const char *text = "The café's naïve owner said: hello, world!";
  /* @DOC@ */
  (void)s;
  (void)n;
  return 0;
}
