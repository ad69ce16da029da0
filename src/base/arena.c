#include "base/arena.h"

#include <stdlib.h>
#include <string.h>

struct kiln_arena_chunk {
  kiln_arena_chunk *next;
  size_t cap;
  _Alignas(16) unsigned char data[];
};

#define KILN_ARENA_MIN_CHUNK (256u * 1024u)

void *kiln_arena_alloc(kiln_arena *a, size_t bytes) {
  void *p = kiln_arena_alloc_raw(a, bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

void *kiln_arena_alloc_raw(kiln_arena *a, size_t bytes) {
  bytes = (bytes + 15) & ~(size_t)15;
  if (!a->head || a->used + bytes > a->head->cap) {
    size_t cap = bytes > KILN_ARENA_MIN_CHUNK ? bytes : KILN_ARENA_MIN_CHUNK;
    if (a->head && a->head->cap * 2 > cap) cap = a->head->cap * 2;
    kiln_arena_chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = a->head;
    c->cap = cap;
    a->head = c;
    a->used = 0;
  }
  void *p = a->head->data + a->used;
  a->used += bytes;
  a->total += bytes;
  return p;
}

void kiln_arena_reset(kiln_arena *a) {
  if (!a->head) return;
  /* keep the newest (largest) chunk, free the others */
  kiln_arena_chunk *keep = a->head, *c = keep->next;
  while (c) {
    kiln_arena_chunk *n = c->next;
    free(c);
    c = n;
  }
  keep->next = NULL;
  a->used = 0;
  a->total = 0;
}

void kiln_arena_destroy(kiln_arena *a) {
  kiln_arena_chunk *c = a->head;
  while (c) {
    kiln_arena_chunk *n = c->next;
    free(c);
    c = n;
  }
  memset(a, 0, sizeof *a);
}
