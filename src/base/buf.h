/* kiln_buf: a reference-counted handle on one device buffer.
 *
 * Owned by whoever holds a reference: a tensor, a trace-time LEAF node, a
 * queued execution. The last reference frees the device memory through the
 * release callback given at creation. Counting is atomic: the tracing
 * thread and the executor's worker both hold references.
 *
 * Two counts share one 64-bit atomic word, so they change together: all
 * references (low 32 bits) and the references held by queued executions,
 * "pins" (high 32 bits). Host references = refs - pins is then read from one
 * consistent snapshot; buffer donation needs it.
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
typedef void (*kiln_buf_release_fn)(void *ctx, void *data, size_t bytes);

struct kiln_buf {
  void *data;
  size_t bytes;
  uint64_t counts;    /* atomic: refs | pins << 32 */
  uint64_t ready_seq; /* atomic */
  kiln_buf_release_fn release;
  void *release_ctx;
};

#define KILN_BUF_PIN ((uint64_t)1 << 32)

/* Wrap device memory (takes ownership: release(ctx, data, bytes) at the
 * end). One reference to start. NULL on out-of-memory (data is released). */
kiln_buf *kiln_buf_wrap(void *data, size_t bytes, kiln_buf_release_fn release, void *ctx);
static inline void kiln_buf_ref(kiln_buf *b) {
  if (b) __atomic_add_fetch(&b->counts, 1, __ATOMIC_RELAXED);
}
/* Drop a reference; the last one frees. NULL is a no-op. */
void kiln_buf_unref(kiln_buf *b);
/* A queued execution's reference (one reference that is also a pin). */
static inline void kiln_buf_pin(kiln_buf *b) { __atomic_add_fetch(&b->counts, 1 + KILN_BUF_PIN, __ATOMIC_RELAXED); }
void kiln_buf_unpin(kiln_buf *b);
/* References held outside queued executions. */
static inline int kiln_buf_host_refs(const kiln_buf *b) {
  uint64_t c = __atomic_load_n(&b->counts, __ATOMIC_ACQUIRE);
  return (int)((uint32_t)c - (uint32_t)(c >> 32));
}

#endif
