/* kiln_buf: a reference-counted handle on one device buffer.
 *
 * Owned by whoever holds a reference: a tensor, a trace-time LEAF node, a
 * queued execution. The last kiln_buf_unref frees the device memory through
 * the release callback given at creation. Reference counting is atomic:
 * the tracing thread and the executor's worker both hold references.
 *
 * ready_seq: the sequence number of the queued execution that writes the
 * buffer (0: already valid). A reader waits until the executor has finished
 * that execution.
 */
#ifndef KILN_BASE_BUF_H
#define KILN_BASE_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct kiln_buf kiln_buf;
typedef void (*kiln_buf_release_fn)(void *ctx, void *data);

struct kiln_buf {
  void *data;
  size_t bytes;
  int refs;          /* atomic: all references, the executor's included */
  int pins;          /* atomic: references held by queued executions */
  uint64_t ready_seq; /* atomic */
  kiln_buf_release_fn release;
  void *release_ctx;
};

/* Wrap device memory (takes ownership: release(ctx, data) at the end).
 * refs starts at 1. NULL on out-of-memory (data is then released). */
kiln_buf *kiln_buf_wrap(void *data, size_t bytes, kiln_buf_release_fn release, void *ctx);
static inline void kiln_buf_ref(kiln_buf *b) {
  if (b) __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
}
void kiln_buf_unref(kiln_buf *b);
static inline int kiln_buf_refs(const kiln_buf *b) { return __atomic_load_n(&b->refs, __ATOMIC_ACQUIRE); }
/* A queued execution's reference: pin takes one, unpin drops it (and may
 * free). Host references = refs - pins; reading pins first then refs can
 * only under-estimate it while the worker unpins, which is the safe side
 * for buffer donation. */
static inline void kiln_buf_pin(kiln_buf *b) {
  __atomic_add_fetch(&b->pins, 1, __ATOMIC_RELAXED);
  kiln_buf_ref(b);
}
void kiln_buf_unpin(kiln_buf *b);
static inline int kiln_buf_host_refs(const kiln_buf *b) {
  int pins = __atomic_load_n(&b->pins, __ATOMIC_ACQUIRE);
  return kiln_buf_refs(b) - pins;
}

#endif
