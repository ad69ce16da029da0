#include "base/buf.h"

#include <stdlib.h>

kiln_buf *kiln_buf_wrap(void *data, size_t bytes, kiln_buf_release_fn release, void *ctx) {
  kiln_buf *b = malloc(sizeof *b);
  if (!b) {
    if (release) release(ctx, data, bytes);
    return NULL;
  }
  b->data = data;
  b->bytes = bytes;
  b->counts = 1;
  b->ready_seq = 0;
  b->release = release;
  b->release_ctx = ctx;
  return b;
}

static void drop(kiln_buf *b, uint64_t delta) {
  uint64_t left = __atomic_sub_fetch(&b->counts, delta, __ATOMIC_ACQ_REL);
  if ((uint32_t)left == 0) {
    if (b->release) b->release(b->release_ctx, b->data, b->bytes);
    free(b);
  }
}

void kiln_buf_unref(kiln_buf *b) {
  if (b) drop(b, 1);
}

void kiln_buf_unpin(kiln_buf *b) {
  if (b) drop(b, 1 + KILN_BUF_PIN);
}
