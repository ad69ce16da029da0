/* The metrics registry: counters and sampled metrics, report in the style of
 * PyTorch/XLA's metrics_report().
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
#define _GNU_SOURCE
#include "debug/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "debug/sites.h"
#include "kiln/kiln.h"

enum {
  KILN_METRICS_MAX = 1024,       /* distinct names per registry */
  KILN_METRICS_TABLE = 2048,     /* content table slots (power of two, 2x max) */
  KILN_METRICS_PTR_CACHE = 4096, /* pointer cache slots (power of two) */
  KILN_METRICS_PTR_PROBE = 8,    /* linear probe length in the pointer cache */
  KILN_METRICS_NAME_MAX = 128,   /* longer names are truncated */
  KILN_METRICS_WINDOW = 1024,    /* retained recent samples per metric */
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

/* A consistent copy of one metric, taken under its mutex. */
typedef struct kiln_metric_snapshot {
  int64_t count;
  double sum, min, max;
  size_t n;                  /* retained samples */
  double window[KILN_METRICS_WINDOW]; /* sorted ascending */
  double window_sum;
  uint64_t t_first, t_last;
} kiln_metric_snapshot;

static int kiln_double_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void kiln_metric_snapshot_take(kiln_metric_entry *e, kiln_metric_snapshot *s) {
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
 * least p% of the samples at or below it. */
static double kiln_metric_percentile(const kiln_metric_snapshot *s, double p) {
  if (s->n == 0) return 0;
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
  kiln_metric_snapshot_take(e, s);
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

/* ───────────── report ───────────── */

static void kiln_strbuf_value(kiln_text *b, double v, int unit) {
  char tmp[32];
  if (unit == 1)
    kiln_text_duration_xla(b, v);
  else if (unit == 2)
    kiln_text_printf(b, "%s", kiln_fmt_bytes(v, tmp, sizeof tmp));
  else
    kiln_text_printf(b, "%.6g", v);
}

/* Unit of a metric from its name: 1 time (ns, "...Time"), 2 bytes ("...Bytes"), 0 plain. */
static int kiln_metric_name_unit(const char *name) {
  size_t n = strlen(name);
  if (n >= 4 && strcmp(name + n - 4, "Time") == 0) return 1;
  if (n >= 5 && strcmp(name + n - 5, "Bytes") == 0) return 2;
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

static void kiln_metrics_format(kiln_text *b) {
  static const double pcts[] = {1, 5, 10, 20, 50, 80, 90, 95, 99};
  kiln_metric_snapshot *s = malloc(sizeof *s);
  kiln_metric_entry **v;
  int n = kiln_metric_registry_sorted(&g_metrics, &v);
  for (int i = 0; s && i < n; i++) {
    kiln_metric_snapshot_take(v[i], s);
    if (s->count == 0) continue; /* cleared or never sampled */
    int is_time = kiln_metric_name_unit(v[i]->name);
    kiln_text_printf(b, "Metric: %s\n  TotalSamples: %lld\n  Accumulator: ", v[i]->name, (long long)s->count);
    kiln_strbuf_value(b, s->sum, is_time);
    /* Rates over the retained window, as PyTorch/XLA computes them. */
    double span_s = (double)(s->t_last - s->t_first) / 1e9;
    kiln_text_printf(b, "\n  ValueRate: ");
    kiln_strbuf_value(b, span_s > 0 ? s->window_sum / span_s : 0, is_time);
    kiln_text_printf(b, " / second\n  Rate: %.6g / second\n  Percentiles: ",
                       span_s > 0 ? (double)s->n / span_s : 0);
    for (size_t k = 0; k < sizeof pcts / sizeof pcts[0]; k++) {
      kiln_text_printf(b, "%s%g%%=", k ? "; " : "", pcts[k]);
      kiln_strbuf_value(b, kiln_metric_percentile(s, pcts[k]), is_time);
    }
    kiln_text_printf(b, "\n");
  }
  free(v);
  free(s);
  n = kiln_metric_registry_sorted(&g_counters, &v);
  for (int i = 0; i < n; i++) {
    int64_t val = atomic_load_explicit(&v[i]->value, memory_order_relaxed);
    if (val == 0) continue;
    kiln_text_printf(b, "Counter: %s\n  Value: %lld\n", v[i]->name, (long long)val);
  }
  free(v);
  kiln_text src = {0};
  kiln_sites_format(&src, ~0u, "  ");
  if (src.len) kiln_text_printf(b, "Source lines (graph cuts and device-to-host reads):\n%s", kiln_text_str(&src));
  kiln_text_free(&src);
}

/* The last report of each kind handed out; replaced by the next call of
 * the same kind (see kiln.h). */
enum { KILN_REPORT_FULL, KILN_REPORT_SHORT, KILN_REPORT_JSON, KILN_REPORT_KINDS };
static pthread_mutex_t g_report_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_report[KILN_REPORT_KINDS];

static const char *kiln_report_publish(int kind, kiln_text *b) {
  char *p = b->failed ? (kiln_text_free(b), strdup("")) : kiln_text_take(b);
  pthread_mutex_lock(&g_report_mu);
  free(g_report[kind]);
  g_report[kind] = p;
  const char *r = p ? p : "";
  pthread_mutex_unlock(&g_report_mu);
  return r;
}

const char *kiln_metrics_report(void) {
  kiln_text b = {0};
  kiln_metrics_format(&b);
  return kiln_report_publish(KILN_REPORT_FULL, &b);
}

static double kiln_metric_sum(const char *name, int64_t *count) {
  kiln_metric_stats st;
  if (kiln_metric_data(name, &st) != 0) st = (kiln_metric_stats){0};
  if (count) *count = st.count;
  return st.sum;
}

void kiln_metrics_format_short(kiln_text *b) {
  int64_t steps = kiln_counter_value("MarkStep");
  int64_t execs = kiln_counter_value("Execute"), xfers = kiln_counter_value("TransferFromDevice");
  int64_t n_compile = 0, n_exec = 0;
  double compile_ns = kiln_metric_sum("CompileTime", &n_compile);
  double exec_ns = kiln_metric_sum("ExecuteTime", &n_exec);
  char t1[32], t2[32], t3[32], t4[32];
  double per = steps > 0 ? (double)steps : 1;
  kiln_text_printf(b, "steps: %lld\n", (long long)steps);
  kiln_text_printf(b, "compiles: %lld (cached %lld, from disk %lld)\n", (long long)kiln_counter_value("UncachedCompile"),
                   (long long)kiln_counter_value("CachedCompile"),
                   (long long)kiln_counter_value("PersistentCacheHit"));
  kiln_text_printf(b, "executions: %lld (%.2f per step)\n", (long long)execs, steps ? (double)execs / per : 0);
  kiln_text_printf(b, "transfers to host: %lld (%.2f per step, %s)\n", (long long)xfers,
                   steps ? (double)xfers / per : 0,
                   kiln_fmt_bytes((double)kiln_counter_value("TransferFromDeviceBytes"), t1, sizeof t1));
  kiln_text_printf(b, "compile time: %s (%s per compile)\n", kiln_fmt_duration(compile_ns, t2, sizeof t2),
                   kiln_fmt_duration(n_compile ? compile_ns / (double)n_compile : 0, t3, sizeof t3));
  kiln_text_printf(b, "execute time: %s (%s per execution)\n", kiln_fmt_duration(exec_ns, t4, sizeof t4),
                   kiln_fmt_duration(n_exec ? exec_ns / (double)n_exec : 0, t1, sizeof t1));
  kiln_text_printf(b, "graph cuts: step marker %lld, value read %lld, data-dependent %lld, explicit compile %lld\n",
                   (long long)kiln_counter_value("StepMarkerCut"), (long long)kiln_counter_value("ValueReadCut"),
                   (long long)kiln_counter_value("DataDependentCut"),
                   (long long)kiln_counter_value("ExplicitCompileCut"));
}

const char *kiln_metrics_report_short(void) {
  kiln_text b = {0};
  kiln_metrics_format_short(&b);
  return kiln_report_publish(KILN_REPORT_SHORT, &b);
}

/* JSON string: names are kiln's own identifiers and file names from
 * __FILE__; escape what JSON requires anyway. */
static void kiln_json_str(kiln_text *b, const char *s) {
  kiln_text_printf(b, "\"");
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      kiln_text_printf(b, "\\%c", c);
    else if (c < 0x20)
      kiln_text_printf(b, "\\u%04x", c);
    else
      kiln_text_printf(b, "%c", c);
  }
  kiln_text_printf(b, "\"");
}

/* Finite numbers only: JSON has no NaN or infinity. */
static void kiln_json_num(kiln_text *b, double v) { kiln_text_printf(b, "%.17g", isfinite(v) ? v : 0.0); }

const char *kiln_metrics_report_json(void) {
  kiln_text b = {0};
  kiln_metric_entry **v;
  kiln_text_printf(&b, "{\"counters\":{");
  int n = kiln_metric_registry_sorted(&g_counters, &v), first = 1;
  for (int i = 0; i < n; i++) {
    int64_t val = atomic_load_explicit(&v[i]->value, memory_order_relaxed);
    if (val == 0) continue;
    kiln_text_printf(&b, "%s", first ? "" : ",");
    kiln_json_str(&b, v[i]->name);
    kiln_text_printf(&b, ":%lld", (long long)val);
    first = 0;
  }
  free(v);
  kiln_text_printf(&b, "},\"metrics\":{");
  n = kiln_metric_registry_sorted(&g_metrics, &v), first = 1;
  for (int i = 0; i < n; i++) {
    kiln_metric_stats st;
    if (kiln_metric_data(v[i]->name, &st) != 0 || st.count == 0) continue;
    kiln_text_printf(&b, "%s", first ? "" : ",");
    kiln_json_str(&b, v[i]->name);
    kiln_text_printf(&b, ":{\"count\":%lld,\"sum\":", (long long)st.count);
    kiln_json_num(&b, st.sum);
    const char *keys[] = {"min", "max", "p50", "p90", "p99"};
    double vals[] = {st.min, st.max, st.p50, st.p90, st.p99};
    for (int k = 0; k < 5; k++) {
      kiln_text_printf(&b, ",\"%s\":", keys[k]);
      kiln_json_num(&b, vals[k]);
    }
    kiln_text_printf(&b, "}");
    first = 0;
  }
  free(v);
  kiln_text_printf(&b, "},\"sites\":[");
  int ns = kiln_site_list(NULL, 0);
  kiln_site_stats *sv = ns > 0 ? malloc(sizeof *sv * (size_t)ns) : NULL;
  if (sv) {
    int got = kiln_site_list(sv, ns); /* records may have been cleared meanwhile */
    if (got < ns) ns = got;
  }
  for (int i = 0; sv && i < ns; i++) {
    kiln_text_printf(&b, "%s{\"file\":", i ? "," : "");
    kiln_json_str(&b, kiln_fmt_file(sv[i].file));
    kiln_text_printf(&b, ",\"line\":%d,\"kind\":", sv[i].line);
    kiln_json_str(&b, kiln_site_kind_name(sv[i].kind));
    kiln_text_printf(&b, ",\"count\":%lld,\"bytes\":%lld,\"time_ns\":", (long long)sv[i].count,
                     (long long)sv[i].bytes);
    kiln_json_num(&b, sv[i].time_ns);
    kiln_text_printf(&b, ",\"wait_ns\":");
    kiln_json_num(&b, sv[i].wait_ns);
    kiln_text_printf(&b, ",\"compiles\":%lld,\"compile_ns\":", (long long)sv[i].compiles);
    kiln_json_num(&b, sv[i].compile_ns);
    kiln_text_printf(&b, "}");
  }
  free(sv);
  kiln_text_printf(&b, "]}\n");
  return kiln_report_publish(KILN_REPORT_JSON, &b);
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

void kiln_metrics_clear(void) {
  kiln_metric_registry *regs[2] = {&g_counters, &g_metrics};
  for (int r = 0; r < 2; r++) {
    int n = atomic_load_explicit(&regs[r]->n_entries, memory_order_acquire);
    for (int i = 0; i < n; i++) kiln_metric_entry_reset(regs[r]->entries[i]);
  }
  kiln_sites_clear();
}

/* ───────────── report at exit ───────────── */

/* KILN_METRICS_FILE may contain %p, replaced by the process id, so that
 * several processes of one job write separate files. */
static void kiln_metrics_exit_path(const char *tmpl, char *out, size_t cap) {
  size_t o = 0;
  for (const char *p = tmpl; *p && o + 1 < cap; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      int n = snprintf(out + o, cap - o, "%ld", (long)getpid());
      if (n < 0 || (size_t)n >= cap - o) break;
      o += (size_t)n;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = 0;
}

static void kiln_metrics_exit_report(void) {
  const char *on = kiln_cfg()->metrics;
  const char *file = kiln_cfg()->metrics_file;
  int to_stderr = on && on[0] && strcmp(on, "0") != 0;
  int to_file = file && file[0];
  if (!to_stderr && !to_file) return;
  const char *rep = kiln_metrics_report();
  if (to_stderr) fprintf(stderr, "──── kiln metrics ────\n%s", rep);
  if (to_file) {
    char path[4096];
    kiln_metrics_exit_path(file, path, sizeof path);
    /* The shared output rule (base/fs.h): atomic replace of a regular file,
     * through a symlink to its target, direct write to a character device
     * (/dev/stdout), refusal of anything else. */
    kiln_err err = {0};
    if (kiln_fs_write_output(path, "KILN_METRICS_FILE", rep, strlen(rep), &err) != KILN_OK)
      fprintf(stderr, "kiln: %s\n", err.msg);
  }
}

static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;
static void kiln_metrics_exit_install_once(void) { atexit(kiln_metrics_exit_report); }

void kiln_metrics_install_exit_report(void) { pthread_once(&g_exit_once, kiln_metrics_exit_install_once); }
