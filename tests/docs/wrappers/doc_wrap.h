/* Shared by the wrappers of tests/docs/check_docs.py (copied beside each
 * program it builds): the end of a wrapped fragment's run. A fragment that
 * left an error in the sticky status fails, as does one that leaks under
 * ASan (everything is released by kiln_shutdown). */
#ifndef DOC_WRAP_H
#define DOC_WRAP_H
#include <kiln/kiln.h>
#include <stdio.h>

static int doc_end(void) {
  int rc = 0;
  if (kiln_last_status() != KILN_OK) {
    fprintf(stderr, "doc fragment: %s\n", kiln_last_error());
    rc = 1;
  }
  kiln_shutdown();
  return rc;
}
#endif
