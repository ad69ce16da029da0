/* XSpace encoding and decoding (protobuf-c, schema in proto/xplane.proto).
 *
 * Layout, chosen for TensorBoard's profile plugin, whose trace viewer
 * converts the "/host:CPU" plane and the device planes ("/device:GPU:",
 * else "/device:TPU:", else "/device:CUSTOM:" prefixes) and shows each
 * line as a row:
 *   - "/host:CPU": one line per host thread (id = OS thread id, name = the
 *     thread's name) with annotations and kiln's host work; step regions
 *     carry the "step_num" stat;
 *   - "/device:CUSTOM:0": a "Steps" line (one event per step, named by its
 *     number, as device planes mark steps) and one line per kernel lane
 *     (id = lane) with every kernel, carrying "flops" and "bytes_accessed".
 * Every event carries "kiln_kind" (kiln_prof_kind) so kiln's own summary
 * can read the capture back without guessing from names.
 */
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "profiler/capture.h"
#include "profiler/xspace_check.h"
#include "xplane.pb-c.h"

typedef Tensorflow__Profiler__XSpace XSpace;
typedef Tensorflow__Profiler__XPlane XPlane;
typedef Tensorflow__Profiler__XLine XLine;
typedef Tensorflow__Profiler__XEvent XEvent;
typedef Tensorflow__Profiler__XStat XStat;
typedef Tensorflow__Profiler__XEventMetadata XEventMetadata;
typedef Tensorflow__Profiler__XStatMetadata XStatMetadata;
typedef Tensorflow__Profiler__XPlane__EventMetadataEntry EMEntry;
typedef Tensorflow__Profiler__XPlane__StatMetadataEntry SMEntry;

enum {
  ST_STEP_NUM = 1, ST_KIND, ST_BYTES, ST_FLOPS, ST_BYTES_ACCESSED, ST_DROPPED, ST_GROUP_ID, ST_STEP_NAME,
  ST_RANK, ST_WORLD, ST_RT_OFFSET, ST_ALGBW, ST_SOURCE, ST_ALLOCATOR, ST_BYTES_ALLOCATED, ST_PEAK, ST_REQUESTED,
  ST_ALLOCATION, ST_ADDR, ST_REGION, ST_COUNT
};
/* XProf's names (xla/tsl/profiler/utils/xplane_schema.cc) where it has one */
static const char *const k_stat_names[ST_COUNT] = {
    "", "step_num", "kiln_kind", "bytes", "flops", "bytes_accessed", "dropped_events", "group_id", "step_name",
    "rank", "world_size", "realtime_offset_ns", "algbw_gbps", "source", "allocator_name", "bytes_allocated",
    "peak_bytes_in_use", "requested_bytes", "allocation_bytes", "addr", "region_type"};

/* Host-plane lines kiln adds beside the threads' own (ids no OS thread id
 * reaches): the collectives, and every kernel lane again as framework ops
 * named "Forward/gemm_64x8x8:Gemm" (XProf's op statistics read host ops). */
#define COLLECTIVES_LINE_ID ((int64_t)1 << 40)
#define OPS_LINE_ID ((int64_t)2 << 40)
/* One line per allocator, "Memory: kiln device buffers": its allocations
 * and frees in time order, as XProf's memory profile reads them. */
#define MEMORY_LINE_ID ((int64_t)3 << 40)
#define MAX_ALLOCATORS 8

#define MAX_EARLY_PS ((int64_t)600 * 1000 * 1000 * 1000 * 1000) /* 600 s: the longest capture */
#define MAX_FILE_BYTES ((size_t)512 << 20)
#define MAX_EVENTS 4000000
#define MAX_LINES 4096

/* ───── encoding: everything lives in one arena freed at the end ───── */

typedef struct arena {
  void **blocks;
  size_t n, cap;
  int oom;
} arena;

static void *aalloc(arena *a, size_t bytes) {
  if (a->oom) return NULL;
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 256;
    void **v = realloc(a->blocks, cap * sizeof *v);
    if (!v) {
      a->oom = 1;
      return NULL;
    }
    a->blocks = v;
    a->cap = cap;
  }
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) {
    a->oom = 1;
    return NULL;
  }
  a->blocks[a->n++] = p;
  return p;
}

static void afree(arena *a) {
  for (size_t i = 0; i < a->n; i++) free(a->blocks[i]);
  free(a->blocks);
}

/* Event metadata by name pointer: names are interned or literals, so a
 * pointer map finds equal names; equal strings at different addresses just
 * get two metadata entries with the same name, which readers accept. */
typedef struct namemap {
  const char **keys;
  int64_t *ids;
  size_t cap, n;
  EMEntry **arr; /* the plane's metadata array (realloc'ed, freed after packing) */
  size_t arr_cap;
} namemap;

static int64_t name_id(namemap *m, arena *a, XPlane *p, const char *name) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    const char **k = calloc(cap, sizeof *k);
    int64_t *v = calloc(cap, sizeof *v);
    if (!k || !v) {
      free(k), free(v);
      a->oom = 1;
      return 0;
    }
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->keys[i]) continue;
      size_t j = ((uintptr_t)m->keys[i] >> 3) & (cap - 1);
      while (k[j]) j = (j + 1) & (cap - 1);
      k[j] = m->keys[i], v[j] = m->ids[i];
    }
    free(m->keys), free(m->ids);
    m->keys = k, m->ids = v, m->cap = cap;
  }
  size_t j = ((uintptr_t)name >> 3) & (m->cap - 1);
  while (m->keys[j] && m->keys[j] != name) j = (j + 1) & (m->cap - 1);
  if (m->keys[j]) return m->ids[j];
  int64_t id = (int64_t)p->n_event_metadata + 1;
  EMEntry *e = aalloc(a, sizeof *e);
  XEventMetadata *md = aalloc(a, sizeof *md);
  if (p->n_event_metadata == m->arr_cap) {
    size_t cap = m->arr_cap ? m->arr_cap * 2 : 256;
    EMEntry **v = realloc(m->arr, sizeof *v * cap);
    if (!v) {
      a->oom = 1;
      return 0;
    }
    m->arr = v, m->arr_cap = cap;
  }
  if (!e || !md) return 0;
  tensorflow__profiler__xplane__event_metadata_entry__init(e);
  tensorflow__profiler__xevent_metadata__init(md);
  md->id = id;
  md->name = (char *)name;
  e->key = id;
  e->value = md;
  m->arr[p->n_event_metadata++] = e;
  p->event_metadata = m->arr;
  m->keys[j] = name, m->ids[j] = id, m->n++;
  return id;
}

static XStat *stat_i(arena *a, int which, int64_t v) {
  XStat *s = aalloc(a, sizeof *s);
  if (!s) return NULL;
  tensorflow__profiler__xstat__init(s);
  s->metadata_id = which;
  s->value_case = TENSORFLOW__PROFILER__XSTAT__VALUE_INT64_VALUE;
  s->int64_value = v;
  return s;
}

static XStat *stat_d(arena *a, int which, double v) {
  XStat *s = aalloc(a, sizeof *s);
  if (!s) return NULL;
  tensorflow__profiler__xstat__init(s);
  s->metadata_id = which;
  s->value_case = TENSORFLOW__PROFILER__XSTAT__VALUE_DOUBLE_VALUE;
  s->double_value = v;
  return s;
}

static XStat *stat_s(arena *a, int which, const char *v) {
  XStat *s = aalloc(a, sizeof *s);
  if (!s) return NULL;
  tensorflow__profiler__xstat__init(s);
  s->metadata_id = which;
  s->value_case = TENSORFLOW__PROFILER__XSTAT__VALUE_STR_VALUE;
  s->str_value = (char *)v;
  return s;
}

/* The steps of a capture by begin time: XProf's step grouping reads a
 * "group_id" on every host event of a step (kiln gives the step's number)
 * and a "step_name" on the step's own event. */
typedef struct step_ref {
  uint64_t b, e;
  int64_t group;
} step_ref;

static int cmp_step_ref(const void *x, const void *y) {
  const step_ref *a = x, *b = y;
  return a->b < b->b ? -1 : a->b > b->b;
}

static step_ref *collect_steps(const kiln_prof_capture *c, size_t *n) {
  *n = 0;
  for (int i = 0; i < c->n_threads; i++)
    for (uint32_t k = 0; k < c->threads[i].n; k++) *n += c->threads[i].ev[k].kind == KILN_PROF_STEP;
  step_ref *v = malloc(sizeof *v * (*n + 1));
  if (!v) return NULL;
  size_t m = 0;
  for (int i = 0; i < c->n_threads; i++)
    for (uint32_t k = 0; k < c->threads[i].n; k++) {
      const kiln_prof_event *e = &c->threads[i].ev[k];
      if (e->kind == KILN_PROF_STEP) v[m++] = (step_ref){e->begin_ns, e->end_ns, e->arg >= 0 ? e->arg : (int64_t)m};
    }
  qsort(v, m, sizeof *v, cmp_step_ref);
  return v;
}

/* The group of the step whose region holds time t (the latest to begin), -1 if none. */
static int64_t group_at(const step_ref *v, size_t n, uint64_t t) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (v[mid].b <= t) lo = mid + 1;
    else hi = mid;
  }
  for (size_t i = lo; i-- > 0;) {
    if (v[i].e > t) return v[i].group;
    if (lo - i > 4) break; /* nested or overlapping regions are few */
  }
  return -1;
}

/* The characters XProf's op-name parser accepts ([A-Za-z0-9_./>-]), others
 * made `sub`. */
static size_t tf_chars(char *o, const char *s, char sub) {
  size_t k = 0;
  for (; *s; s++) {
    char ch = *s;
    int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
             ch == '.' || ch == '/' || ch == '-';
    o[k++] = ok ? ch : sub;
  }
  return k;
}

/* "Forward/gemm 64x8x8" made at train.c:88 as a framework op:
 * "Forward/gemm_64x8x8->train.c-88:Gemm" (name, the user's line, and a
 * CamelCase type: what XProf's parser accepts; its op table shows names
 * and types only). */
static char *tf_op_name(arena *a, const char *name, const char *src) {
  size_t n = strlen(name), ns = src ? strlen(src) : 0;
  char *o = aalloc(a, n + ns + 44);
  if (!o) return NULL;
  size_t k = 0;
  if (!((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
    o[k++] = 'k';
  k += tf_chars(o + k, name, '_');
  if (ns) {
    o[k++] = '-', o[k++] = '>';
    k += tf_chars(o + k, src, '-'); /* "train.c:88" -> "train.c-88" */
  }
  o[k++] = ':';
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  size_t t0 = k;
  for (; *base && ((*base >= 'a' && *base <= 'z') || (*base >= 'A' && *base <= 'Z')) && k - t0 < 30; base++) {
    char ch = (k == t0 && *base >= 'a') ? (char)(*base - 'a' + 'A') : *base;
    o[k++] = ch;
  }
  if (k == t0) k += (size_t)snprintf(o + k, 8, "Kernel");
  o[k] = 0;
  return o;
}

static void plane_init(arena *a, XPlane *p, int64_t id, const char *name) {
  tensorflow__profiler__xplane__init(p);
  p->id = id;
  p->name = (char *)name;
  p->n_stat_metadata = ST_COUNT - 1;
  p->stat_metadata = aalloc(a, sizeof *p->stat_metadata * ST_COUNT);
  for (int i = 1; i < ST_COUNT && p->stat_metadata; i++) {
    SMEntry *e = aalloc(a, sizeof *e);
    XStatMetadata *md = aalloc(a, sizeof *md);
    if (!e || !md) return;
    tensorflow__profiler__xplane__stat_metadata_entry__init(e);
    tensorflow__profiler__xstat_metadata__init(md);
    md->id = i;
    md->name = (char *)k_stat_names[i];
    e->key = i;
    e->value = md;
    p->stat_metadata[i - 1] = e;
  }
}

static XEvent *make_event(arena *a, const kiln_prof_capture *c, const kiln_prof_event *ev, int64_t md,
                          int64_t group) {
  XEvent *x = aalloc(a, sizeof *x);
  if (!x) return NULL;
  tensorflow__profiler__xevent__init(x);
  x->metadata_id = md;
  x->data_case = TENSORFLOW__PROFILER__XEVENT__DATA_OFFSET_PS;
  /* events are clipped to the capture when recorded; kept so here too for
   * captures built by hand (tests, a decoded file re-encoded) */
  uint64_t b = ev->begin_ns < c->start_ns ? c->start_ns : ev->begin_ns;
  x->offset_ps = (int64_t)(b - c->start_ns) * 1000;
  x->duration_ps = ev->end_ns > b ? (int64_t)(ev->end_ns - b) * 1000 : 0;
  XStat *st[12];
  size_t n = 0;
  st[n++] = stat_i(a, ST_KIND, ev->kind);
  if (ev->kind == KILN_PROF_STEP) {
    st[n++] = stat_i(a, ST_STEP_NUM, ev->arg);
    char *sn = aalloc(a, strlen(ev->name) + 24); /* XProf's step column: "Training_Step 12" */
    if (sn) snprintf(sn, strlen(ev->name) + 24, "%s %lld", ev->name, (long long)ev->arg);
    st[n++] = stat_s(a, ST_STEP_NAME, sn);
  }
  if (group >= 0) st[n++] = stat_i(a, ST_GROUP_ID, group);
  if ((ev->kind == KILN_PROF_TRANSFER || ev->kind == KILN_PROF_COLLECTIVE) && ev->arg >= 0)
    st[n++] = stat_i(a, ST_BYTES, ev->arg);
  if (ev->kind == KILN_PROF_COLLECTIVE && ev->arg >= 0 && x->duration_ps > 0) /* bytes per ns = GB/s */
    st[n++] = stat_d(a, ST_ALGBW, (double)ev->arg / ((double)x->duration_ps / 1000.0));
  if (ev->flops > 0) st[n++] = stat_d(a, ST_FLOPS, ev->flops);
  if (ev->bytes > 0) st[n++] = stat_d(a, ST_BYTES_ACCESSED, ev->bytes);
  if (ev->kind == KILN_PROF_KERNEL && ev->src) st[n++] = stat_s(a, ST_SOURCE, ev->src);
  x->stats = aalloc(a, sizeof *x->stats * n);
  if (x->stats) memcpy(x->stats, st, sizeof *st * n);
  x->n_stats = n;
  return x;
}

static XLine *make_line(arena *a, const kiln_prof_capture *c, int64_t id, const char *name, size_t n_events) {
  XLine *l = aalloc(a, sizeof *l);
  if (!l) return NULL;
  tensorflow__profiler__xline__init(l);
  l->id = id;
  l->display_id = id;
  l->name = (char *)name;
  l->timestamp_ns = (int64_t)c->start_ns;
  l->duration_ps = (int64_t)(c->end_ns - c->start_ns) * 1000;
  l->events = aalloc(a, sizeof *l->events * (n_events + 1));
  return l;
}

/* Everything one encoding builds. */
typedef struct enc {
  arena a;
  namemap hm, dm;
  XPlane *host, *dev;
  XLine *steps, *colls;
  step_ref *sv;
  size_t n_sv;
  const kiln_prof_capture *c;
} enc;

static void enc_append(XLine *l, XEvent *x) {
  if (l && l->events && x) l->events[l->n_events++] = x;
}

static void host_plane_stats(enc *e) {
  const kiln_prof_capture *c = e->c;
  XStat *st[4] = {stat_i(&e->a, ST_DROPPED, (int64_t)c->dropped), stat_i(&e->a, ST_RANK, c->rank),
                  stat_i(&e->a, ST_WORLD, c->world > 0 ? c->world : 1),
                  stat_i(&e->a, ST_RT_OFFSET, c->realtime_offset_ns)};
  e->host->stats = aalloc(&e->a, sizeof st);
  if (e->host->stats) memcpy(e->host->stats, st, sizeof st), e->host->n_stats = 4;
}

/* One thread's events: its host line, its kernel lane on the device plane
 * and again as framework ops on the host plane, its collectives on the
 * shared line, its steps on the device plane's "Steps". */
static void encode_thread(enc *e, int i) {
  arena *a = &e->a;
  const kiln_prof_capture *c = e->c;
  const kiln_prof_thread_events *t = &c->threads[i];
  size_t nh = 0, nd = 0;
  for (uint32_t k = 0; k < t->n; k++) {
    int kd = t->ev[k].kind;
    *(kd == KILN_PROF_KERNEL ? &nd : &nh) += kd != KILN_PROF_COLLECTIVE && kd != KILN_PROF_MEMORY;
  }
  XLine *hl = nh ? make_line(a, c, t->tid, t->name, nh) : NULL, *dl = NULL, *ol = NULL;
  if (nd) {
    int64_t lane = t->lane >= 0 ? t->lane : 1000 + i;
    char *nm = aalloc(a, 96), *on = aalloc(a, 96);
    if (nm) snprintf(nm, 96, "Kernels lane %lld (%s)", (long long)lane, t->name);
    if (on) snprintf(on, 96, "Ops lane %lld", (long long)lane);
    dl = make_line(a, c, lane, nm, nd);
    ol = make_line(a, c, OPS_LINE_ID + lane, on, nd);
  }
  if (a->oom) return;
  for (uint32_t k = 0; k < t->n && !a->oom; k++) {
    const kiln_prof_event *ev = &t->ev[k];
    if (ev->kind == KILN_PROF_MEMORY) continue; /* on the allocators' lines (encode_memory) */
    int64_t g = group_at(e->sv, e->n_sv, ev->begin_ns < c->start_ns ? c->start_ns : ev->begin_ns);
    if (ev->kind == KILN_PROF_KERNEL) {
      enc_append(dl, make_event(a, c, ev, name_id(&e->dm, a, e->dev, ev->name), -1));
      /* named "name:Type" as TensorFlow names its host ops (no tf_op stat:
       * XProf would count the op twice); one interned name per kernel */
      const char *op = tf_op_name(a, ev->name, ev->src), *in = op ? kiln_prof_intern(op) : NULL;
      if (op) enc_append(ol, make_event(a, c, ev, name_id(&e->hm, a, e->host, in ? in : op), g));
      continue;
    }
    XEvent *x = make_event(a, c, ev, name_id(&e->hm, a, e->host, ev->name), g);
    enc_append(ev->kind == KILN_PROF_COLLECTIVE ? e->colls : hl, x);
    if (ev->kind == KILN_PROF_STEP && e->steps) {
      char nm[24];
      snprintf(nm, sizeof nm, "%lld", (long long)ev->arg);
      const char *in = kiln_prof_intern(nm); /* a stable pointer per step number */
      enc_append(e->steps, make_event(a, c, ev, name_id(&e->dm, a, e->dev, in ? in : "step"), g));
    }
  }
  if (hl) e->host->lines[e->host->n_lines++] = hl;
  if (ol) e->host->lines[e->host->n_lines++] = ol;
  if (dl) e->dev->lines[e->dev->n_lines++] = dl;
}

/* ───── the memory profile ───── */

typedef struct mem_ref {
  const kiln_prof_event *ev;
  size_t seq; /* recording order on its thread: ties in time keep it */
} mem_ref;

static int cmp_mem_ref(const void *x, const void *y) {
  const mem_ref *a = x, *b = y;
  if (a->ev->begin_ns != b->ev->begin_ns) return a->ev->begin_ns < b->ev->begin_ns ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* One memory event as XProf's memory profile converter reads it
 * (xprof/convert/xplane_to_memory_profile.cc): a host event named
 * "MemoryAllocation" or "MemoryDeallocation" with the allocator's name, its
 * bytes in use after the event (bytes_allocated), the peak of that within
 * the capture so far (peak_bytes_in_use), the buffer's size and address,
 * its use (region_type) and the step (group_id). */
static XEvent *memory_event(enc *e, const kiln_prof_event *ev, int64_t peak) {
  arena *a = &e->a;
  const char *nm = ev->arg >= 0 ? "MemoryAllocation" : "MemoryDeallocation";
  XEvent *x = make_event(a, e->c, ev, name_id(&e->hm, a, e->host, nm), -1);
  if (!x) return NULL;
  int64_t bytes = ev->arg >= 0 ? ev->arg : -ev->arg;
  int64_t g = group_at(e->sv, e->n_sv, ev->begin_ns < e->c->start_ns ? e->c->start_ns : ev->begin_ns);
  XStat *st[10] = {stat_i(a, ST_KIND, KILN_PROF_MEMORY), stat_s(a, ST_ALLOCATOR, ev->name),
                   stat_i(a, ST_BYTES_ALLOCATED, ev->in_use), stat_i(a, ST_PEAK, peak),
                   stat_i(a, ST_REQUESTED, bytes), stat_i(a, ST_ALLOCATION, bytes),
                   stat_i(a, ST_ADDR, (int64_t)ev->addr), stat_s(a, ST_REGION, ev->src ? ev->src : "buffer")};
  size_t n = 8;
  if (g >= 0) st[n++] = stat_i(a, ST_GROUP_ID, g);
  x->stats = aalloc(a, sizeof *x->stats * n);
  if (x->stats) memcpy(x->stats, st, sizeof *st * n);
  x->n_stats = x->stats ? n : 0;
  return x;
}

/* The memory events of allocator `name` in time order, on their own line. */
static void encode_allocator(enc *e, const char *name, int index, mem_ref *v, size_t nv) {
  size_t m = 0;
  for (size_t i = 0; i < nv; i++)
    if (!strcmp(v[i].ev->name, name)) v[m++] = v[i];
  qsort(v, m, sizeof *v, cmp_mem_ref);
  char *ln = aalloc(&e->a, strlen(name) + 16);
  if (!ln) return;
  snprintf(ln, strlen(name) + 16, "Memory: %s", name);
  XLine *l = make_line(&e->a, e->c, MEMORY_LINE_ID + index, ln, m);
  int64_t peak = m ? v[0].ev->in_use - v[0].ev->arg : 0; /* in use before the first event */
  for (size_t i = 0; i < m && l && !e->a.oom; i++) {
    if (v[i].ev->in_use > peak) peak = v[i].ev->in_use;
    enc_append(l, memory_event(e, v[i].ev, peak));
  }
  if (l) e->host->lines[e->host->n_lines++] = l;
}

/* Every allocator's line (at most MAX_ALLOCATORS; more are not encoded). */
static void encode_memory(enc *e, size_t n_mem) {
  const kiln_prof_capture *c = e->c;
  mem_ref *v = malloc(sizeof *v * (n_mem + 1)), *w = malloc(sizeof *w * (n_mem + 1));
  const char *names[MAX_ALLOCATORS];
  int n_names = 0;
  size_t nv = 0;
  for (int i = 0; v && w && i < c->n_threads; i++)
    for (uint32_t k = 0; k < c->threads[i].n; k++) {
      const kiln_prof_event *ev = &c->threads[i].ev[k];
      if (ev->kind != KILN_PROF_MEMORY || !ev->name) continue;
      int j = 0;
      while (j < n_names && strcmp(names[j], ev->name)) j++;
      if (j == n_names && n_names < MAX_ALLOCATORS) names[n_names++] = ev->name;
      v[nv] = (mem_ref){ev, nv};
      nv++;
    }
  if (!v || !w) e->a.oom = 1;
  for (int j = 0; j < n_names && !e->a.oom; j++) {
    memcpy(w, v, sizeof *v * nv);
    encode_allocator(e, names[j], j, w, nv);
  }
  free(v), free(w);
}

static void encode_planes(enc *e) {
  const kiln_prof_capture *c = e->c;
  arena *a = &e->a;
  plane_init(a, e->host, 0, "/host:CPU");
  plane_init(a, e->dev, 1, "/device:CUSTOM:0");
  e->host->lines = aalloc(a, sizeof *e->host->lines * (2 * (size_t)c->n_threads + 2 + MAX_ALLOCATORS));
  e->dev->lines = aalloc(a, sizeof *e->dev->lines * ((size_t)c->n_threads + 2));
  if (!e->host->lines || !e->dev->lines) return;
  host_plane_stats(e);
  size_t n_coll = 0, n_mem = 0;
  for (int i = 0; i < c->n_threads; i++)
    for (uint32_t k = 0; k < c->threads[i].n; k++) {
      n_coll += c->threads[i].ev[k].kind == KILN_PROF_COLLECTIVE;
      n_mem += c->threads[i].ev[k].kind == KILN_PROF_MEMORY;
    }
  e->steps = e->n_sv ? make_line(a, c, 1000000, "Steps", e->n_sv) : NULL;
  if (e->steps) e->dev->lines[e->dev->n_lines++] = e->steps;
  e->colls = n_coll ? make_line(a, c, COLLECTIVES_LINE_ID, "Collectives", n_coll) : NULL;
  for (int i = 0; i < c->n_threads && !a->oom; i++) encode_thread(e, i);
  if (e->colls) e->host->lines[e->host->n_lines++] = e->colls;
  if (n_mem && !a->oom) encode_memory(e, n_mem);
}

kiln_status kiln_prof_xspace_encode(const kiln_prof_capture *c, uint8_t **out, size_t *out_n, kiln_err *err) {
  *out = NULL;
  *out_n = 0;
  enc e = {.c = c};
  XSpace sp;
  tensorflow__profiler__xspace__init(&sp);
  e.host = aalloc(&e.a, sizeof *e.host), e.dev = aalloc(&e.a, sizeof *e.dev);
  XPlane *planes[2] = {e.host, e.dev};
  char *hostname = (char *)(c->machine[0] ? c->machine : c->host);
  sp.planes = planes;
  sp.n_planes = 2;
  sp.hostnames = &hostname;
  sp.n_hostnames = 1;
  e.sv = collect_steps(c, &e.n_sv);
  if (!e.sv) e.a.oom = 1;
  if (e.host && e.dev && !e.a.oom) encode_planes(&e);
  kiln_status s = KILN_OK;
  if (e.a.oom || !e.host || !e.dev) {
    s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "profiler: out of memory encoding the XSpace");
  } else {
    size_t n = tensorflow__profiler__xspace__get_packed_size(&sp);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
      s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "profiler: out of memory encoding the XSpace");
    } else {
      *out_n = tensorflow__profiler__xspace__pack(&sp, buf);
      *out = buf;
    }
  }
  free(e.hm.keys), free(e.hm.ids), free(e.dm.keys), free(e.dm.ids), free(e.hm.arr), free(e.dm.arr);
  free(e.sv);
  afree(&e.a);
  return s;
}

kiln_status kiln_prof_write_xplane(const kiln_prof_capture *c, const char *path, kiln_err *err) {
  uint8_t *buf;
  size_t n;
  KILN_RETURN_IF_ERROR(err, kiln_prof_xspace_encode(c, &buf, &n, err), "while writing %s", path);
  kiln_status s = kiln_fs_write_output(path, "xplane profile", buf, n, err);
  free(buf);
  return s;
}

/* ───── decoding ───── */

void kiln_prof_xspace_free_owned_(void *p);
void kiln_prof_xspace_free_owned_(void *p) { tensorflow__profiler__xspace__free_unpacked(p, NULL); }

static const char *md_name(const XPlane *p, int64_t id) {
  /* our files number metadata densely from 1: try the direct slot first */
  if (id >= 1 && (size_t)id <= p->n_event_metadata) {
    const EMEntry *e = p->event_metadata[id - 1];
    if (e && e->key == id && e->value) return e->value->name ? e->value->name : "";
  }
  for (size_t i = 0; i < p->n_event_metadata; i++) {
    const EMEntry *e = p->event_metadata[i];
    if (e && e->key == id && e->value) return e->value->name ? e->value->name : "";
  }
  return NULL;
}

static const char *stat_name(const XPlane *p, int64_t id) {
  for (size_t i = 0; i < p->n_stat_metadata; i++) {
    const SMEntry *e = p->stat_metadata[i];
    if (e && e->key == id && e->value && e->value->name) return e->value->name;
  }
  return "";
}

static double stat_num(const XStat *s) {
  switch (s->value_case) {
    case TENSORFLOW__PROFILER__XSTAT__VALUE_DOUBLE_VALUE: return s->double_value;
    case TENSORFLOW__PROFILER__XSTAT__VALUE_INT64_VALUE: return (double)s->int64_value;
    case TENSORFLOW__PROFILER__XSTAT__VALUE_UINT64_VALUE: return (double)s->uint64_value;
    default: return 0;
  }
}

static kiln_status decode_plane(const XPlane *p, int device, kiln_prof_capture *c, const char *what, kiln_err *err) {
  for (size_t li = 0; li < p->n_lines; li++) {
    const XLine *l = p->lines[li];
    if (device && l->name && !strcmp(l->name, "Steps")) continue; /* derived from the host step regions */
    if (!device && l->id >= OPS_LINE_ID && l->id < OPS_LINE_ID + ((int64_t)1 << 32) && l->name &&
        !strncmp(l->name, "Ops lane ", 9))
      continue; /* the kernel lanes again, for XProf's op statistics */
    if (!device && l->id >= MEMORY_LINE_ID && l->id < MEMORY_LINE_ID + MAX_ALLOCATORS && l->name &&
        !strncmp(l->name, "Memory: ", 8))
      continue; /* the allocators' events, for XProf's memory profile (kiln's summary does not read them) */
    if (l->n_events > MAX_EVENTS || l->timestamp_ns < 0)
      return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: line %zu of plane %s is malformed", what, li, p->name);
    kiln_prof_thread_events *t = &c->threads[c->n_threads++];
    snprintf(t->name, sizeof t->name, "%s", l->name ? l->name : "");
    t->tid = l->id;
    t->lane = device ? (int)(l->id & 0x7fffffff) : -1;
    t->ev = calloc(l->n_events + 1, sizeof *t->ev);
    if (!t->ev) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    uint64_t base = (uint64_t)l->timestamp_ns;
    for (size_t k = 0; k < l->n_events; k++) {
      const XEvent *x = l->events[k];
      const char *nm = md_name(p, x->metadata_id);
      if (!nm) return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: event metadata id %lld does not resolve", what,
                                   (long long)x->metadata_id);
      int64_t off = x->data_case == TENSORFLOW__PROFILER__XEVENT__DATA_OFFSET_PS ? x->offset_ps : 0;
      int64_t dur = x->duration_ps;
      /* An event that began before its line (other profilers, and kiln
       * before it clipped events to the capture) is clipped to the line's
       * start; beyond the longest capture it is garbage. */
      if (off < 0 && off >= -MAX_EARLY_PS && dur >= 0) {
        dur = dur + off > 0 ? dur + off : 0;
        off = 0;
      }
      if (off < 0 || dur < 0 || off > ((int64_t)1 << 62) / 2 || dur > ((int64_t)1 << 62) / 2)
        return kiln_err_set(err, KILN_ERR_CORRUPT,
                            "%s: event %zu of line \"%s\" has an impossible time (offset %lld ps, duration %lld ps)",
                            what, k, l->name ? l->name : "", (long long)x->offset_ps, (long long)x->duration_ps);
      kiln_prof_event *e = &t->ev[t->n++];
      e->name = nm;
      e->begin_ns = base + (uint64_t)off / 1000;
      e->end_ns = e->begin_ns + (uint64_t)dur / 1000;
      e->kind = device ? KILN_PROF_KERNEL : KILN_PROF_USER;
      e->arg = -1;
      for (size_t si = 0; si < x->n_stats; si++) {
        const XStat *s = x->stats[si];
        const char *sn = stat_name(p, s->metadata_id);
        double v = stat_num(s);
        if (!strcmp(sn, "kiln_kind") && v >= 0 && v < KILN_PROF_KIND_COUNT) e->kind = (uint8_t)v;
        else if (!strcmp(sn, "step_num") || !strcmp(sn, "bytes"))
          e->arg = v >= 0 && v < 9.0e18 ? (int64_t)v : -1; /* a value no int64 holds is no step or size */
        else if (!strcmp(sn, "flops")) e->flops = v >= 0 && v < 1e30 ? v : 0;
        else if (!strcmp(sn, "bytes_accessed")) e->bytes = v >= 0 && v < 1e30 ? v : 0;
      }
      if (device) e->kind = KILN_PROF_KERNEL; /* the device plane holds kernels only */
      else if (e->kind == KILN_PROF_KERNEL) e->kind = KILN_PROF_USER;
    }
  }
  return KILN_OK;
}

kiln_status kiln_prof_xspace_decode(const uint8_t *data, size_t n, const char *what, kiln_prof_capture *c,
                                    kiln_err *err) {
  memset(c, 0, sizeof *c);
  if (n > MAX_FILE_BYTES)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: %zu bytes is over the %zu-byte limit for a capture", what, n,
                        MAX_FILE_BYTES);
  /* Walk the wire format first: unpacking allocates per message before it
   * can reject a file, so a hostile one could cost gigabytes. */
  kiln_status cs = kiln_prof_xspace_check(data, n, what, MAX_LINES, MAX_EVENTS, err);
  if (cs != KILN_OK) return cs;
  XSpace *sp = tensorflow__profiler__xspace__unpack(NULL, n, data);
  if (!sp) return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: not an XSpace protobuf", what);
  c->owned = sp;
  const XPlane *host = NULL, *dev = NULL;
  size_t lines = 0, events = 0;
  for (size_t i = 0; i < sp->n_planes; i++) {
    const XPlane *p = sp->planes[i];
    if (!p->name) continue;
    if (!strcmp(p->name, "/host:CPU") && !host) host = p;
    else if (!strncmp(p->name, "/device:", 8) && !dev) dev = p;
    else continue;
    lines += p->n_lines;
    for (size_t l = 0; l < p->n_lines; l++) events += p->lines[l]->n_events;
  }
  kiln_status s = KILN_OK;
  if (!host) s = kiln_err_set(err, KILN_ERR_CORRUPT, "%s: no \"/host:CPU\" plane: not a capture kiln can read", what);
  else if (lines > MAX_LINES || events > MAX_EVENTS)
    s = kiln_err_set(err, KILN_ERR_CORRUPT, "%s: %zu lines / %zu events exceed the limits (%d / %d)", what, lines,
                     events, MAX_LINES, MAX_EVENTS);
  if (s == KILN_OK) {
    c->threads = calloc(lines + 1, sizeof *c->threads);
    if (!c->threads) s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
  }
  if (s == KILN_OK) s = decode_plane(host, 0, c, what, err);
  if (s == KILN_OK && dev) s = decode_plane(dev, 1, c, what, err);
  if (s == KILN_OK) {
    for (size_t i = 0; i < host->n_stats; i++) {
      const char *sn = stat_name(host, host->stats[i]->metadata_id);
      double v = stat_num(host->stats[i]);
      if (!strcmp(sn, "dropped_events")) c->dropped = v > 0 && v < 1.8e19 ? (uint64_t)v : 0;
      else if (!strcmp(sn, "rank")) c->rank = v >= 0 && v < (1 << 30) ? (int)v : 0;
      else if (!strcmp(sn, "world_size")) c->world = v >= 1 && v < (1 << 30) ? (int)v : 1;
      else if (!strcmp(sn, "realtime_offset_ns") && host->stats[i]->value_case == TENSORFLOW__PROFILER__XSTAT__VALUE_INT64_VALUE)
        c->realtime_offset_ns = host->stats[i]->int64_value;
    }
    if (c->world < 1 || c->rank >= c->world) c->rank = 0, c->world = 1;
    if (sp->n_hostnames && sp->hostnames[0]) {
      snprintf(c->host, sizeof c->host, "%s", sp->hostnames[0]);
      snprintf(c->machine, sizeof c->machine, "%s", sp->hostnames[0]);
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < sp->n_planes; i++) {
      const XPlane *p = sp->planes[i];
      if (p != host && p != dev) continue;
      for (size_t l = 0; l < p->n_lines; l++) {
        const XLine *xl = p->lines[l];
        if ((uint64_t)xl->timestamp_ns < lo) lo = (uint64_t)xl->timestamp_ns;
        uint64_t e = (uint64_t)xl->timestamp_ns + (uint64_t)(xl->duration_ps > 0 ? xl->duration_ps : 0) / 1000;
        if (e > hi) hi = e;
      }
    }
    for (int i = 0; i < c->n_threads; i++)
      for (uint32_t k = 0; k < c->threads[i].n; k++) {
        if (c->threads[i].ev[k].begin_ns < lo) lo = c->threads[i].ev[k].begin_ns;
        if (c->threads[i].ev[k].end_ns > hi) hi = c->threads[i].ev[k].end_ns;
      }
    c->start_ns = lo == UINT64_MAX ? 0 : lo;
    c->end_ns = hi < c->start_ns ? c->start_ns : hi;
  }
  if (s != KILN_OK) kiln_prof_capture_clear(c);
  return s;
}
