/* The interned string table and the annotation scope table: documented
 * process-wide singletons (one mutex each), never shrunk, bounded.
 *
 * Why intern: events and compiled kernels keep `const char *` names that
 * must outlive executables evicted from the cache and threads that exit;
 * an interned string lives for the process, and the bound (64K strings,
 * 64K scopes) keeps a program that builds a new name every step from
 * growing memory without limit.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/spans.h"

#define MAX_STRINGS 65536
#define MAX_SCOPES 65536
#define MAX_LEN 255

static struct {
  pthread_mutex_t mu;
  char **slot; /* open addressing, capacity 2 * MAX_STRINGS */
  uint32_t n;
} g_str = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t str_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a: short strings, no alignment needs */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static const char *intern_n(const char *s, size_t n) {
  if (n > MAX_LEN) n = MAX_LEN;
  const size_t cap = 2 * MAX_STRINGS;
  const char *r = NULL;
  pthread_mutex_lock(&g_str.mu);
  if (!g_str.slot) g_str.slot = calloc(cap, sizeof *g_str.slot);
  if (g_str.slot) {
    size_t i = str_hash(s, n) & (cap - 1);
    for (;; i = (i + 1) & (cap - 1)) {
      char *e = g_str.slot[i];
      if (!e) break;
      if (strncmp(e, s, n) == 0 && e[n] == 0) {
        r = e;
        break;
      }
    }
    if (!r && g_str.n < MAX_STRINGS) {
      char *c = malloc(n + 1);
      if (c) {
        memcpy(c, s, n);
        c[n] = 0;
        g_str.slot[i] = c;
        g_str.n++;
        r = c;
      }
    }
  }
  pthread_mutex_unlock(&g_str.mu);
  return r;
}

const char *kiln_prof_intern(const char *s) { return s ? intern_n(s, strlen(s)) : NULL; }

/* Scope ids index `path`; id 0 is the empty scope. Lookup by interned path
 * pointer (interning makes equal paths equal pointers). */
static struct {
  pthread_mutex_t mu;
  const char **path; /* [MAX_SCOPES] */
  uint32_t n;
} g_scope = {.mu = PTHREAD_MUTEX_INITIALIZER};

uint32_t kiln_prof_scope_intern_(uint32_t parent, const char *name); /* for events.c */

uint32_t kiln_prof_scope_intern_(uint32_t parent, const char *name) {
  const char *pp = kiln_prof_scope_path(parent);
  char buf[MAX_LEN + 1];
  if (pp[0])
    snprintf(buf, sizeof buf, "%s/%s", pp, name);
  else
    snprintf(buf, sizeof buf, "%s", name);
  const char *p = kiln_prof_intern(buf);
  if (!p) return parent;
  uint32_t id = parent;
  pthread_mutex_lock(&g_scope.mu);
  if (!g_scope.path) {
    g_scope.path = calloc(MAX_SCOPES, sizeof *g_scope.path);
    if (g_scope.path) {
      g_scope.path[0] = "";
      g_scope.n = 1;
    }
  }
  if (g_scope.path) {
    /* scopes are few (the program's distinct region paths): a linear scan
     * from the newest is cheap, and it runs once per region instance */
    uint32_t i = g_scope.n;
    while (i-- > 1)
      if (g_scope.path[i] == p) break;
    if (i > 0) {
      id = i;
    } else if (g_scope.n < MAX_SCOPES) {
      id = g_scope.n++;
      g_scope.path[id] = p;
    }
  }
  pthread_mutex_unlock(&g_scope.mu);
  return id;
}

const char *kiln_prof_scope_path(uint32_t id) {
  const char *r = "";
  if (!id) return r;
  pthread_mutex_lock(&g_scope.mu);
  if (g_scope.path && id < g_scope.n) r = g_scope.path[id];
  pthread_mutex_unlock(&g_scope.mu);
  return r;
}
