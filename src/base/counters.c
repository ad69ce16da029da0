/* The counter and metric registry (the primitive; the reports are in
 * debug/metrics.c). Any layer may count: the registry is a leaf that needs
 * nothing but libc.
 *
 * Layout. Two registries (counters, metrics), each a documented singleton:
 *  - an entry table keyed by the name's *content* (open addressing, fixed
 *    capacity, entries are never freed, so a pointer to one stays valid for
 *    the life of the process and readers need no lock);
 *  - in front of it, a pointer cache keyed by the name's *address*. Names
 *    are nearly always string literals, so the hot path is: hash the
 *    pointer, compare it, confirm the content with strcmp (cheap for short
 *    names, and it keeps us correct when a caller reuses a buffer with new
 *    text), then one relaxed atomic add. A miss takes the registry mutex.
 * Metric samples take a small per-metric mutex: they are recorded at most a
 * few times per step (compile, execute, transfer), never per element.
 */
#include "base/counters.h"
#include "base/stats.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

enum {
  KILN_METRICS_MAX = 1024,       /* distinct names per registry */
  KILN_METRICS_TABLE = 2048,     /* content table slots (power of two, 2x max) */
  KILN_METRICS_PTR_CACHE = 4096, /* pointer cache slots (power of two) */
  KILN_METRICS_PTR_PROBE = 8,    /* linear probe length in the pointer cache */
  KILN_METRICS_NAME_MAX = 128,   /* longer names are truncated */
};

typedef struct kiln_metric_sample {
  double value;
  uint64_t t_ns; /* when it was recorded, for Rate and ValueRate */
} kiln_metric_sample;

typedef struct kiln_metric_entry {
  char name[KILN_METRICS_NAME_MAX]; /* immutable once published */
  _Atomic int64_t value;            /* counters */
  /* metrics (under mu) */
  pthread_mutex_t mu;
  int64_t count;
  double sum, min, max;
  kiln_metric_sample *ring; /* KILN_METRICS_WINDOW entries, NULL if allocation failed */
  size_t ring_next;         /* next slot to write */
} kiln_metric_entry;

typedef struct kiln_metric_ptr_slot {
  _Atomic(const char *) key;
  _Atomic(kiln_metric_entry *) entry;
} kiln_metric_ptr_slot;

typedef struct kiln_metric_registry {
  pthread_mutex_t mu; /* guards table/entries/n_entries and pointer-cache writes */
  kiln_metric_ptr_slot ptr_cache[KILN_METRICS_PTR_CACHE];
  kiln_metric_entry *table[KILN_METRICS_TABLE];
  kiln_metric_entry *entries[KILN_METRICS_MAX]; /* creation order */
  _Atomic int n_entries;
  kiln_metric_entry overflow; /* sink for names past the capacity (never reported) */
  int is_metric;
} kiln_metric_registry;

/* The two documented singletons of this module. */
static kiln_metric_registry g_counters = {.mu = PTHREAD_MUTEX_INITIALIZER,
                                          .overflow = {.mu = PTHREAD_MUTEX_INITIALIZER},
                                          .is_metric = 0};
static kiln_metric_registry g_metrics = {.mu = PTHREAD_MUTEX_INITIALIZER,
                                         .overflow = {.mu = PTHREAD_MUTEX_INITIALIZER},
                                         .is_metric = 1};

static inline size_t kiln_metric_ptr_hash(const char *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 29;
  x *= 0x9e3779b97f4a7c15ull;
  return (size_t)(x >> 40);
}

static uint64_t kiln_metric_str_hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h ^ (h >> 32);
}

/* Slow path, under r->mu: find or create the entry for name's content. */
static kiln_metric_entry *kiln_metric_entry_find_locked(kiln_metric_registry *r, const char *name, int create) {
  char key[KILN_METRICS_NAME_MAX];
  snprintf(key, sizeof key, "%s", name); /* truncated names share an entry */
  size_t mask = KILN_METRICS_TABLE - 1;
  for (size_t i = kiln_metric_str_hash(key) & mask, n = 0; n < KILN_METRICS_TABLE; i = (i + 1) & mask, n++) {
    kiln_metric_entry *e = r->table[i];
    if (!e) {
      if (!create) return NULL;
      int idx = atomic_load_explicit(&r->n_entries, memory_order_relaxed);
      if (idx >= KILN_METRICS_MAX) return &r->overflow;
      e = calloc(1, sizeof *e);
      if (!e) return &r->overflow;
      memcpy(e->name, key, sizeof key);
      pthread_mutex_init(&e->mu, NULL);
      if (r->is_metric) e->ring = malloc(sizeof(kiln_metric_sample) * KILN_METRICS_WINDOW);
      r->table[i] = e;
      r->entries[idx] = e;
      /* release: a reader that sees the new count sees the entry's fields */
      atomic_store_explicit(&r->n_entries, idx + 1, memory_order_release);
      return e;
    }
    if (strcmp(e->name, key) == 0) return e;
  }
  return create ? &r->overflow : NULL;
}

/* Entries are never freed and their names never change, so a pointer-cache
 * hit confirmed by strcmp is safe even if the (key, entry) pair was torn by a
 * concurrent writer: a torn pair fails the strcmp and takes the slow path. */
static inline kiln_metric_entry *kiln_metric_entry_get(kiln_metric_registry *r, const char *name, int create) {
  size_t h = kiln_metric_ptr_hash(name);
  for (size_t k = 0; k < KILN_METRICS_PTR_PROBE; k++) {
    kiln_metric_ptr_slot *s = &r->ptr_cache[(h + k) & (KILN_METRICS_PTR_CACHE - 1)];
    const char *key = atomic_load_explicit(&s->key, memory_order_acquire);
    if (key == name) {
      kiln_metric_entry *e = atomic_load_explicit(&s->entry, memory_order_acquire);
      if (e && strcmp(e->name, name) == 0) return e;
      break;
    }
    if (!key) break;
  }
  pthread_mutex_lock(&r->mu);
  kiln_metric_entry *e = kiln_metric_entry_find_locked(r, name, create);
  if (e && e != &r->overflow && strlen(name) < KILN_METRICS_NAME_MAX) {
    /* Cache the address: the first free or matching slot, else the home slot. */
    kiln_metric_ptr_slot *dst = &r->ptr_cache[h & (KILN_METRICS_PTR_CACHE - 1)];
    for (size_t k = 0; k < KILN_METRICS_PTR_PROBE; k++) {
      kiln_metric_ptr_slot *s = &r->ptr_cache[(h + k) & (KILN_METRICS_PTR_CACHE - 1)];
      const char *key = atomic_load_explicit(&s->key, memory_order_relaxed);
      if (!key || key == name) {
        dst = s;
        break;
      }
    }
    atomic_store_explicit(&dst->entry, e, memory_order_release);
    atomic_store_explicit(&dst->key, name, memory_order_release);
  }
  pthread_mutex_unlock(&r->mu);
  return e;
}

void kiln_counter_add(const char *name, int64_t delta) {
  if (!name) return;
  kiln_metric_entry *e = kiln_metric_entry_get(&g_counters, name, 1);
  atomic_fetch_add_explicit(&e->value, delta, memory_order_relaxed);
}

void kiln_metric_record(const char *name, double value) {
  if (!name || value != value) return; /* NaN would poison min/max/sum */
  kiln_metric_entry *e = kiln_metric_entry_get(&g_metrics, name, 1);
  uint64_t t = kiln_now_ns();
  pthread_mutex_lock(&e->mu);
  if (e->count == 0 || value < e->min) e->min = value;
  if (e->count == 0 || value > e->max) e->max = value;
  e->count++;
  e->sum += value;
  if (e->ring) {
    e->ring[e->ring_next % KILN_METRICS_WINDOW] = (kiln_metric_sample){value, t};
    e->ring_next++;
  }
  pthread_mutex_unlock(&e->mu);
}

int64_t kiln_counter_value(const char *name) {
  if (!name) return 0;
  kiln_metric_entry *e = kiln_metric_entry_get(&g_counters, name, 0);
  return e ? atomic_load_explicit(&e->value, memory_order_relaxed) : 0;
}

static int kiln_double_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void kiln_metric_entry_snapshot(kiln_metric_entry *e, kiln_metric_snapshot *s) {
  pthread_mutex_lock(&e->mu);
  s->count = e->count;
  s->sum = e->sum;
  s->min = e->min;
  s->max = e->max;
  s->n = 0;
  s->window_sum = 0;
  s->t_first = s->t_last = 0;
  if (e->ring && e->count > 0) {
    size_t n = e->ring_next < KILN_METRICS_WINDOW ? e->ring_next : KILN_METRICS_WINDOW;
    size_t start = e->ring_next - n; /* oldest retained sample */
    for (size_t i = 0; i < n; i++) {
      kiln_metric_sample smp = e->ring[(start + i) % KILN_METRICS_WINDOW];
      s->window[i] = smp.value;
      s->window_sum += smp.value;
      if (i == 0) s->t_first = smp.t_ns;
      s->t_last = smp.t_ns;
    }
    s->n = n;
  }
  pthread_mutex_unlock(&e->mu);
  qsort(s->window, s->n, sizeof(double), kiln_double_cmp);
}

/* Nearest-rank percentile of the sorted window: the smallest sample with at
 * least p% of the samples at or below it; the 50th is the median
 * (base/stats.h: the mean of the middle two for an even count), as every
 * report of kiln takes it. */
double kiln_metric_percentile(const kiln_metric_snapshot *s, double p) {
  if (s->n == 0) return 0;
  if (p == 50) return kiln_median_sorted(s->window, s->n);
  double rank = ceil(p / 100.0 * (double)s->n);
  size_t idx = rank < 1 ? 0 : (size_t)rank - 1;
  if (idx >= s->n) idx = s->n - 1;
  return s->window[idx];
}

int kiln_metric_data(const char *name, kiln_metric_stats *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!name || !out) return -1;
  kiln_metric_entry *e = kiln_metric_entry_get(&g_metrics, name, 0);
  if (!e) return -1;
  kiln_metric_snapshot *s = malloc(sizeof *s);
  if (!s) return -1;
  kiln_metric_entry_snapshot(e, s);
  out->count = s->count;
  out->sum = s->sum;
  out->min = s->count ? s->min : 0;
  out->max = s->count ? s->max : 0;
  out->p50 = kiln_metric_percentile(s, 50);
  out->p90 = kiln_metric_percentile(s, 90);
  out->p99 = kiln_metric_percentile(s, 99);
  free(s);
  return 0;
}


static int kiln_entry_name_cmp(const void *a, const void *b) {
  return strcmp((*(kiln_metric_entry *const *)a)->name, (*(kiln_metric_entry *const *)b)->name);
}

/* Sorted copy of a registry's entries; returns the count (0 on failure). */
static int kiln_metric_registry_sorted(kiln_metric_registry *r, kiln_metric_entry ***out) {
  int n = atomic_load_explicit(&r->n_entries, memory_order_acquire);
  *out = NULL;
  if (n == 0) return 0;
  kiln_metric_entry **v = malloc(sizeof *v * (size_t)n);
  if (!v) return 0;
  memcpy(v, r->entries, sizeof *v * (size_t)n);
  qsort(v, (size_t)n, sizeof *v, kiln_entry_name_cmp);
  *out = v;
  return n;
}

/* Names with a value (counters != 0, metrics with samples), sorted. */
static int kiln_registry_names(kiln_metric_registry *r, const char **names, int cap) {
  kiln_metric_entry **v;
  int n = kiln_metric_registry_sorted(r, &v), k = 0;
  for (int i = 0; i < n; i++) {
    int has;
    if (r->is_metric) {
      pthread_mutex_lock(&v[i]->mu);
      has = v[i]->count > 0;
      pthread_mutex_unlock(&v[i]->mu);
    } else {
      has = atomic_load_explicit(&v[i]->value, memory_order_relaxed) != 0;
    }
    if (!has) continue;
    if (names && k < cap) names[k] = v[i]->name; /* entries are never freed */
    k++;
  }
  free(v);
  return k;
}

int kiln_counter_names(const char **names, int cap) { return kiln_registry_names(&g_counters, names, cap); }
int kiln_metric_names(const char **names, int cap) { return kiln_registry_names(&g_metrics, names, cap); }

static void kiln_metric_entry_reset(kiln_metric_entry *e) {
  atomic_store_explicit(&e->value, 0, memory_order_relaxed);
  pthread_mutex_lock(&e->mu);
  e->count = 0;
  e->sum = e->min = e->max = 0;
  e->ring_next = 0;
  pthread_mutex_unlock(&e->mu);
}

void kiln_counter_clear(const char *name) {
  kiln_metric_entry *e = name ? kiln_metric_entry_get(&g_counters, name, 0) : NULL;
  if (e) kiln_metric_entry_reset(e);
}

void kiln_metric_clear(const char *name) {
  kiln_metric_entry *e = name ? kiln_metric_entry_get(&g_metrics, name, 0) : NULL;
  if (e) kiln_metric_entry_reset(e);
}

int kiln_metric_snapshot_take(const char *name, kiln_metric_snapshot *s) {
  kiln_metric_entry *e = name ? kiln_metric_entry_get(&g_metrics, name, 0) : NULL;
  if (!e) return -1;
  kiln_metric_entry_snapshot(e, s);
  return 0;
}

int kiln_counters_sorted(int metrics, const char ***names) {
  kiln_metric_entry **v;
  int n = kiln_metric_registry_sorted(metrics ? &g_metrics : &g_counters, &v);
  *names = NULL;
  if (n == 0) return 0;
  const char **out = malloc(sizeof *out * (size_t)n);
  if (out)
    for (int i = 0; i < n; i++) out[i] = v[i]->name; /* entries are never freed */
  free(v);
  *names = out;
  return out ? n : 0;
}

void kiln_counters_reset_all(void) {
  kiln_metric_registry *regs[2] = {&g_counters, &g_metrics};
  for (int r = 0; r < 2; r++) {
    int n = atomic_load_explicit(&regs[r]->n_entries, memory_order_acquire);
    for (int i = 0; i < n; i++) kiln_metric_entry_reset(regs[r]->entries[i]);
  }
}
