/* A bump allocator in chunks, reset in O(chunks). Not thread-safe: one
 * owner. Used for trace-time IR nodes, which all die together at a step
 * marker. */
#ifndef KILN_BASE_ARENA_H
#define KILN_BASE_ARENA_H

#include <stddef.h>

typedef struct kiln_arena_chunk kiln_arena_chunk;
typedef struct kiln_arena {
  kiln_arena_chunk *head; /* current chunk (most recent first) */
  size_t used;            /* bytes used in head */
  size_t total;           /* bytes handed out since the last reset */
} kiln_arena;

/* Zeroed memory aligned to 16 bytes, or NULL on out-of-memory. */
void *kiln_arena_alloc(kiln_arena *a, size_t bytes);
/* The same without zeroing: for hot paths that initialize every field. */
void *kiln_arena_alloc_raw(kiln_arena *a, size_t bytes);
/* Forget everything allocated; keeps the largest chunk for reuse. */
void kiln_arena_reset(kiln_arena *a);
void kiln_arena_destroy(kiln_arena *a);

#endif
