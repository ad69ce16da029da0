/* A caching allocator for device buffers. Training steps allocate the same
 * output sizes every step; giving a freed buffer back to the next step of
 * the same size avoids mapping fresh pages (for large buffers glibc maps
 * and unmaps on every malloc/free, and the page faults then cost more
 * than the kernel itself).
 *
 * Reuse by size (exact below 64 KiB, above it four sizes per power of two,
 * a request served at the next: a varying length reuses its neighbours'
 * buffers), most recently freed first; at most cap_bytes are held, beyond
 * that a freed buffer goes back to the backend. The bytes counted are the
 * sizes served. Thread-safe: the
 * worker thread frees buffers too.
 *
 * It counts the bytes it has handed out and not been given back (in use:
 * the buffers of live tensors, queued executions' outputs, uploads), and
 * while a profiler capture runs records each alloc and free as a memory
 * event with that total (the Memory Profile of docs/profiling.md); buffers
 * it holds for reuse are not in use. */
#ifndef KILN_RUNTIME_BUFCACHE_H
#define KILN_RUNTIME_BUFCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

typedef struct kiln_bufcache kiln_bufcache;

/* NULL on out-of-memory. cap_bytes 0 disables caching. */
kiln_bufcache *kiln_bufcache_create(kiln_backend *b, size_t cap_bytes);
/* Give every cached buffer back to the backend. NULL is a no-op. */
void kiln_bufcache_destroy(kiln_bufcache *c);
void *kiln_bufcache_alloc(kiln_bufcache *c, size_t bytes);
void kiln_bufcache_free(kiln_bufcache *c, void *p, size_t bytes);
/* Bytes held for reuse now. */
size_t kiln_bufcache_held(kiln_bufcache *c);
/* Bytes handed out and not given back now. */
int64_t kiln_bufcache_in_use(kiln_bufcache *c);

/* The allocator's name in memory profiles. */
#define KILN_BUFCACHE_ALLOCATOR "kiln device buffers"

#endif
