/* Per-source-line totals of graph cuts and reads (see sites.h). */
#include "debug/sites.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum {
  KILN_SITES_CAP = 1024, /* table slots (power of two) */
  KILN_SITES_MAX = 768,  /* records kept before events go to "other lines" */
};

typedef struct kiln_site_rec {
  kiln_site_stats s;
  int used;
} kiln_site_rec;

/* The documented singleton of this module. */
static struct {
  pthread_mutex_t mu;
  kiln_site_rec table[KILN_SITES_CAP];
  int n;
  kiln_site_rec other[KILN_SITE_KIND_COUNT]; /* overflow, file "(other lines)" */
} g_sites = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *const g_kind_names[KILN_SITE_KIND_COUNT] = {
    "read", "step marker", "value read", "data-dependent op", "explicit compile"};

const char *kiln_site_kind_name(kiln_site_kind k) {
  return (unsigned)k < KILN_SITE_KIND_COUNT ? g_kind_names[k] : "unknown";
}

static size_t site_hash(const char *file, int line, int kind) {
  uint64_t x = (uint64_t)(uintptr_t)file ^ ((uint64_t)(uint32_t)line << 3) ^ ((uint64_t)kind << 56);
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  return (size_t)(x >> 32);
}

/* Under the mutex: the record for (loc, kind), created if needed. */
static kiln_site_stats *site_get_locked(kiln_site_kind kind, kiln_loc loc) {
  if ((unsigned)kind >= KILN_SITE_KIND_COUNT) kind = KILN_SITE_READ;
  size_t mask = KILN_SITES_CAP - 1;
  for (size_t i = site_hash(loc.file, loc.line, kind) & mask, n = 0; n < KILN_SITES_CAP; i = (i + 1) & mask, n++) {
    kiln_site_rec *r = &g_sites.table[i];
    if (!r->used) {
      if (g_sites.n >= KILN_SITES_MAX) break;
      r->used = 1;
      r->s = (kiln_site_stats){.file = loc.file, .line = loc.line, .kind = kind};
      g_sites.n++;
      return &r->s;
    }
    if (r->s.file == loc.file && r->s.line == loc.line && r->s.kind == kind) return &r->s;
  }
  kiln_site_rec *o = &g_sites.other[kind];
  if (!o->used) {
    o->used = 1;
    o->s = (kiln_site_stats){.file = "(other lines)", .line = 0, .kind = kind};
  }
  return &o->s;
}

void kiln_sites_record(kiln_site_kind kind, kiln_loc loc, int64_t bytes, double ns, double wait_ns) {
  pthread_mutex_lock(&g_sites.mu);
  kiln_site_stats *s = site_get_locked(kind, loc);
  s->count++;
  s->bytes += bytes;
  s->time_ns += ns;
  s->wait_ns += wait_ns;
  pthread_mutex_unlock(&g_sites.mu);
}

void kiln_sites_record_compile(kiln_site_kind kind, kiln_loc loc, double compile_ns) {
  pthread_mutex_lock(&g_sites.mu);
  kiln_site_stats *s = site_get_locked(kind, loc);
  s->compiles++;
  s->compile_ns += compile_ns;
  pthread_mutex_unlock(&g_sites.mu);
}

void kiln_sites_clear(void) {
  pthread_mutex_lock(&g_sites.mu);
  memset(g_sites.table, 0, sizeof g_sites.table);
  memset(g_sites.other, 0, sizeof g_sites.other);
  g_sites.n = 0;
  pthread_mutex_unlock(&g_sites.mu);
}

/* Most frequent first; ties by file name and line, so the order is stable. */
static int site_cmp(const void *a, const void *b) {
  const kiln_site_stats *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  if (x->compiles != y->compiles) return x->compiles > y->compiles ? -1 : 1;
  int c = strcmp(kiln_fmt_file(x->file), kiln_fmt_file(y->file));
  if (c) return c;
  if (x->line != y->line) return x->line < y->line ? -1 : 1;
  return (int)x->kind - (int)y->kind;
}

/* A sorted, malloc'd copy of every record; returns the count. */
static int sites_snapshot(kiln_site_stats **out) {
  *out = NULL;
  pthread_mutex_lock(&g_sites.mu);
  int n = g_sites.n + KILN_SITE_KIND_COUNT;
  kiln_site_stats *v = malloc(sizeof *v * (size_t)n);
  int k = 0;
  if (v) {
    for (size_t i = 0; i < KILN_SITES_CAP; i++)
      if (g_sites.table[i].used) v[k++] = g_sites.table[i].s;
    for (int i = 0; i < KILN_SITE_KIND_COUNT; i++)
      if (g_sites.other[i].used) v[k++] = g_sites.other[i].s;
  }
  pthread_mutex_unlock(&g_sites.mu);
  if (!v) return 0;
  qsort(v, (size_t)k, sizeof *v, site_cmp);
  *out = v;
  return k;
}

int kiln_site_list(kiln_site_stats *out, int cap) {
  kiln_site_stats *v;
  int n = sites_snapshot(&v);
  for (int i = 0; out && i < n && i < cap; i++) out[i] = v[i];
  free(v);
  return n;
}

/* Same file: equal paths, or equal last components when one has no directory. */
static int same_file(const char *a, const char *b) {
  if (!a || !b) return 0;
  if (strcmp(a, b) == 0) return 1;
  if (strchr(a, '/') && strchr(b, '/')) return 0;
  return strcmp(kiln_fmt_file(a), kiln_fmt_file(b)) == 0;
}

int kiln_site_find(const char *file, int line, kiln_site_kind kind, kiln_site_stats *out) {
  kiln_site_stats z = {0};
  if (out) *out = z;
  kiln_site_stats *v;
  int n = sites_snapshot(&v), found = -1;
  /* Sum over records: the same line may be reached through several
   * string-literal copies of its file name (one per translation unit). */
  for (int i = 0; i < n; i++) {
    if (v[i].kind != kind || v[i].line != line || !same_file(v[i].file, file)) continue;
    if (found < 0) z = v[i];
    else {
      z.count += v[i].count, z.bytes += v[i].bytes, z.time_ns += v[i].time_ns;
      z.wait_ns += v[i].wait_ns, z.compiles += v[i].compiles, z.compile_ns += v[i].compile_ns;
    }
    found = 0;
  }
  free(v);
  if (out) *out = z;
  return found;
}

void kiln_sites_format(kiln_text *t, unsigned kinds_mask, const char *indent) {
  kiln_site_stats *v;
  int n = sites_snapshot(&v), header = 0;
  for (int i = 0; i < n; i++) {
    if (!(kinds_mask & (1u << v[i].kind))) continue;
    if (!header) {
      kiln_text_printf(t, "%s%8s %8s %10s %10s %10s  %-18s %s\n", indent, "count", "compiles", "bytes", "time",
                       "wait", "kind", "line");
      header = 1;
    }
    char b[32], tm[32], w[32];
    kiln_text_printf(t, "%s%8lld %8lld %10s %10s %10s  %-18s %s:%d\n", indent, (long long)v[i].count,
                     (long long)v[i].compiles, kiln_fmt_bytes((double)v[i].bytes, b, sizeof b),
                     kiln_fmt_duration(v[i].time_ns, tm, sizeof tm), kiln_fmt_duration(v[i].wait_ns, w, sizeof w),
                     kiln_site_kind_name(v[i].kind), kiln_fmt_file(v[i].file), v[i].line);
  }
  free(v);
}

static int site_cmp_compiles(const void *a, const void *b) {
  const kiln_site_stats *x = a, *y = b;
  if (x->compiles != y->compiles) return x->compiles > y->compiles ? -1 : 1;
  return site_cmp(a, b);
}

void kiln_sites_format_brief(kiln_text *t, unsigned kinds_mask, int by_compiles, int max_rows, const char *indent) {
  kiln_site_stats *v;
  int n = sites_snapshot(&v), rows = 0;
  if (by_compiles && n > 1) qsort(v, (size_t)n, sizeof *v, site_cmp_compiles);
  for (int i = 0; i < n && rows < max_rows; i++) {
    if (!(kinds_mask & (1u << v[i].kind))) continue;
    long long c = by_compiles ? v[i].compiles : v[i].count;
    if (!c) continue;
    kiln_text_printf(t, "%s%6lld  %s:%d (%s)\n", indent, c, kiln_fmt_file(v[i].file), v[i].line,
                     kiln_site_kind_name(v[i].kind));
    rows++;
  }
  free(v);
}
