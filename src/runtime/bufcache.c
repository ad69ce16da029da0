#include "runtime/bufcache.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/counters.h"
#include "base/spans.h"

typedef struct slot {
  size_t bytes;
  void **ptrs;
  size_t n, cap;
} slot;

struct kiln_bufcache {
  kiln_backend *b;
  size_t cap_bytes, held;
  int64_t in_use; /* bytes handed out and not given back (guarded by mu) */
  pthread_mutex_t mu;
  slot *slots; /* open addressing on bytes; slots[i].ptrs == NULL: empty */
  size_t n_slots, used_slots;
};

static size_t hash_size(size_t bytes) { return (bytes * 0x9e3779b97f4a7c15ULL) >> 7; }

/* The size a request is served at: small ones exactly; from 64 KiB up,
 * rounded up to one of four sizes per power of two (2^k times 1, 1.25, 1.5,
 * 1.75: at most a quarter more), so that the buffers of a varying length
 * (a new sequence length every step, dynamic shapes) are reused by the
 * lengths near them instead of each mapping fresh pages. */
static size_t class_of(size_t bytes) {
  if (bytes < ((size_t)64 << 10)) return bytes;
  int k = 63 - __builtin_clzll((unsigned long long)bytes); /* 2^k <= bytes */
  size_t q = (size_t)1 << (k - 2);                          /* a quarter of 2^k */
  return (bytes + q - 1) / q * q;
}

kiln_bufcache *kiln_bufcache_create(kiln_backend *b, size_t cap_bytes) {
  kiln_bufcache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->b = b;
  c->cap_bytes = cap_bytes;
  c->n_slots = 64;
  c->slots = calloc(c->n_slots, sizeof *c->slots);
  if (!c->slots) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

void kiln_bufcache_destroy(kiln_bufcache *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n_slots; i++) {
    for (size_t k = 0; k < c->slots[i].n; k++) c->b->vt->buffer_free(c->b, c->slots[i].ptrs[k]);
    free(c->slots[i].ptrs);
  }
  free(c->slots);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* The slot for bytes (existing, or a free one to claim), NULL if full. */
static slot *find(kiln_bufcache *c, size_t bytes, int claim) {
  size_t mask = c->n_slots - 1;
  for (size_t i = hash_size(bytes) & mask, probes = 0; probes < c->n_slots; i = (i + 1) & mask, probes++) {
    slot *s = &c->slots[i];
    if (s->ptrs && s->bytes == bytes) return s;
    if (!s->ptrs) {
      if (!claim || c->used_slots * 2 >= c->n_slots) return NULL;
      s->ptrs = malloc(4 * sizeof *s->ptrs);
      if (!s->ptrs) return NULL;
      s->cap = 4;
      s->n = 0;
      s->bytes = bytes;
      c->used_slots++;
      return s;
    }
  }
  return NULL;
}

/* The in-use total and its memory event, in one critical section so that
 * the events' order is the order of the totals (mu held). */
static void account_locked(kiln_bufcache *c, const void *p, int64_t bytes) {
  c->in_use += bytes;
  kiln_prof_memory(KILN_BUFCACHE_ALLOCATOR, NULL, bytes, c->in_use, p);
}

void *kiln_bufcache_alloc(kiln_bufcache *c, size_t bytes) {
  bytes = class_of(bytes);
  pthread_mutex_lock(&c->mu);
  slot *s = find(c, bytes, 0);
  if (s && s->n) {
    void *p = s->ptrs[--s->n];
    c->held -= bytes;
    account_locked(c, p, (int64_t)bytes);
    pthread_mutex_unlock(&c->mu);
    kiln_counter_add("BufferReuse", 1);
    return p;
  }
  pthread_mutex_unlock(&c->mu);
  kiln_counter_add("BufferAlloc", 1);
  void *p = c->b->vt->buffer_alloc(c->b, bytes);
  if (p) {
    pthread_mutex_lock(&c->mu);
    account_locked(c, p, (int64_t)bytes);
    pthread_mutex_unlock(&c->mu);
  }
  return p;
}

void kiln_bufcache_free(kiln_bufcache *c, void *p, size_t bytes) {
  bytes = class_of(bytes);
  pthread_mutex_lock(&c->mu);
  account_locked(c, p, -(int64_t)bytes);
  if (c->held + bytes <= c->cap_bytes) {
    slot *s = find(c, bytes, 1);
    if (s && s->n == s->cap) {
      void **np = realloc(s->ptrs, 2 * s->cap * sizeof *np);
      if (np) {
        s->ptrs = np;
        s->cap *= 2;
      }
    }
    if (s && s->n < s->cap) {
      s->ptrs[s->n++] = p;
      c->held += bytes;
      pthread_mutex_unlock(&c->mu);
      return;
    }
  }
  pthread_mutex_unlock(&c->mu);
  c->b->vt->buffer_free(c->b, p);
}

size_t kiln_bufcache_held(kiln_bufcache *c) {
  pthread_mutex_lock(&c->mu);
  size_t h = c->held;
  pthread_mutex_unlock(&c->mu);
  return h;
}

int64_t kiln_bufcache_in_use(kiln_bufcache *c) {
  pthread_mutex_lock(&c->mu);
  int64_t n = c->in_use;
  pthread_mutex_unlock(&c->mu);
  return n;
}
