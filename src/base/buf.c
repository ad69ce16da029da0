#include "base/buf.h"

#include <stdlib.h>

kiln_buf *kiln_buf_wrap(void *data, size_t bytes, kiln_buf_release_fn release, void *ctx) {
  kiln_buf *b = malloc(sizeof *b);
  if (!b) {
    if (release) release(ctx, data);
    return NULL;
  }
  b->data = data;
  b->bytes = bytes;
  b->refs = 1;
  b->pins = 0;
  b->ready_seq = 0;
  b->release = release;
  b->release_ctx = ctx;
  return b;
}

void kiln_buf_unref(kiln_buf *b) {
  if (!b) return;
  if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    if (b->release) b->release(b->release_ctx, b->data);
    free(b);
  }
}

void kiln_buf_unpin(kiln_buf *b) {
  if (!b) return;
  /* refs first, then pins: see kiln_buf_host_refs */
  if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    if (b->release) b->release(b->release_ctx, b->data);
    free(b);
    return;
  }
  __atomic_sub_fetch(&b->pins, 1, __ATOMIC_ACQ_REL);
}
