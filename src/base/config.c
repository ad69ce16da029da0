#include "base/config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A published snapshot and its strings, in one allocation. Every snapshot
 * ever published stays reachable on the list g_all (a reader may still hold
 * it), but one whose contents equal an earlier one's is that one again: a
 * program that starts and stops the runtime in a loop keeps one snapshot,
 * not one per kiln_init (600 bytes each, for ever). */
typedef struct snapshot {
  kiln_config c;
  struct snapshot *next_all;
  char text[];
} snapshot;

static snapshot *g_cur; /* atomic: read with __atomic_load_n */
static snapshot *g_all; /* every snapshot made, newest first; under g_mu */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const kiln_config k_unset; /* every variable unset */

/* A snapshot holding copies of src's strings; NULL when out of memory. */
static snapshot *snapshot_new(const kiln_config *src) {
  size_t len = 0;
#define KILN_CONFIG_LEN(field, name) len += src->field ? strlen(src->field) + 1 : 0;
  KILN_CONFIG_VARS(KILN_CONFIG_LEN)
#undef KILN_CONFIG_LEN
  snapshot *s = calloc(1, sizeof *s + len + 1);
  if (!s) return NULL;
  char *p = s->text;
#define KILN_CONFIG_COPY(field, name)          \
  if (src->field) {                            \
    size_t n = strlen(src->field) + 1;         \
    memcpy(p, src->field, n);                  \
    s->c.field = p;                            \
    p += n;                                    \
  }
  KILN_CONFIG_VARS(KILN_CONFIG_COPY)
#undef KILN_CONFIG_COPY
  return s;
}

static int same_str(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static int same_config(const kiln_config *a, const kiln_config *b) {
  int same = 1;
#define KILN_CONFIG_SAME(field, name) same = same && same_str(a->field, b->field);
  KILN_CONFIG_VARS(KILN_CONFIG_SAME)
#undef KILN_CONFIG_SAME
  return same;
}

static void publish(const kiln_config *c) {
  pthread_mutex_lock(&g_mu);
  snapshot *s = g_all;
  while (s && !same_config(&s->c, c)) s = s->next_all;
  if (!s && (s = snapshot_new(c))) {
    s->next_all = g_all;
    g_all = s;
  }
  if (s) __atomic_store_n(&g_cur, s, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_mu);
}

static void read_env(kiln_config *c) {
#define KILN_CONFIG_GET(field, name) c->field = getenv(name);
  KILN_CONFIG_VARS(KILN_CONFIG_GET)
#undef KILN_CONFIG_GET
}

void kiln_config_load(void) {
  kiln_config env;
  read_env(&env);
  publish(&env);
}

void kiln_config_set(const kiln_config *c) { publish(c ? c : &k_unset); }

const kiln_config *kiln_cfg(void) {
  snapshot *s = __atomic_load_n(&g_cur, __ATOMIC_ACQUIRE);
  if (!s) { /* first use without a runtime; two threads may both load: same environment */
    kiln_config_load();
    s = __atomic_load_n(&g_cur, __ATOMIC_ACQUIRE);
  }
  return s ? &s->c : &k_unset;
}

static bool only_blanks(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return *p == 0;
}

bool kiln_cfg_long(const char *v, long *out) {
  if (!v || !*v) return false;
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (end == v || errno || !only_blanks(end)) return false;
  *out = x;
  return true;
}

bool kiln_cfg_double(const char *v, double *out) {
  if (!v || !*v) return false;
  char *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || errno || !only_blanks(end) || !isfinite(x)) return false;
  *out = x;
  return true;
}

int64_t kiln_cfg_size(const char *v, int64_t def) {
  if (!v || !*v) return def;
  char *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || errno || !(x >= 0)) return def;
  double mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
  else if (*end == 'M' || *end == 'm') mul = 1048576.0, end++;
  else if (*end == 'G' || *end == 'g') mul = 1073741824.0, end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end || x * mul > 9e18) return def;
  return (int64_t)(x * mul);
}

int kiln_cfg_num_threads(void) {
  long v = 0;
  if (!kiln_cfg_long(kiln_cfg()->num_threads, &v) || v <= 0) return 0; /* "4x", "", "-2", "0": all cores */
  return v > KILN_MAX_THREADS ? KILN_MAX_THREADS : (int)v;
}
