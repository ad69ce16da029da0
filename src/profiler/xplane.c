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

enum { ST_STEP_NUM = 1, ST_KIND, ST_BYTES, ST_FLOPS, ST_BYTES_ACCESSED, ST_DROPPED, ST_COUNT };
static const char *const k_stat_names[ST_COUNT] = {"", "step_num", "kiln_kind", "bytes", "flops", "bytes_accessed",
                                                   "dropped_events"};

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

static XEvent *make_event(arena *a, const kiln_prof_capture *c, const kiln_prof_event *ev, int64_t md) {
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
  XStat *st[5];
  size_t n = 0;
  st[n++] = stat_i(a, ST_KIND, ev->kind);
  if (ev->kind == KILN_PROF_STEP) st[n++] = stat_i(a, ST_STEP_NUM, ev->arg);
  if (ev->kind == KILN_PROF_TRANSFER && ev->arg >= 0) st[n++] = stat_i(a, ST_BYTES, ev->arg);
  if (ev->flops > 0) st[n++] = stat_d(a, ST_FLOPS, ev->flops);
  if (ev->bytes > 0) st[n++] = stat_d(a, ST_BYTES_ACCESSED, ev->bytes);
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

kiln_status kiln_prof_xspace_encode(const kiln_prof_capture *c, uint8_t **out, size_t *out_n, kiln_err *err) {
  *out = NULL;
  *out_n = 0;
  arena a = {0};
  namemap hm = {0}, dm = {0};
  XSpace sp;
  tensorflow__profiler__xspace__init(&sp);
  XPlane *host = aalloc(&a, sizeof *host), *dev = aalloc(&a, sizeof *dev);
  XPlane *planes[2] = {host, dev};
  char *hostname = (char *)c->host;
  sp.planes = planes;
  sp.n_planes = 2;
  sp.hostnames = &hostname;
  sp.n_hostnames = 1;
  if (host && dev) {
    plane_init(&a, host, 0, "/host:CPU");
    plane_init(&a, dev, 1, "/device:CUSTOM:0");
    host->lines = aalloc(&a, sizeof *host->lines * ((size_t)c->n_threads + 1));
    dev->lines = aalloc(&a, sizeof *dev->lines * ((size_t)c->n_threads + 2));
    XStat *drop = stat_i(&a, ST_DROPPED, (int64_t)c->dropped);
    host->stats = aalloc(&a, sizeof *host->stats);
    if (host->stats && drop) host->stats[0] = drop, host->n_stats = 1;
    size_t n_steps = 0;
    for (int i = 0; i < c->n_threads; i++)
      for (uint32_t k = 0; k < c->threads[i].n; k++) n_steps += c->threads[i].ev[k].kind == KILN_PROF_STEP;
    XLine *steps = n_steps ? make_line(&a, c, 1000000, "Steps", n_steps) : NULL;
    if (steps && dev->lines) dev->lines[dev->n_lines++] = steps;
    for (int i = 0; i < c->n_threads && !a.oom; i++) {
      const kiln_prof_thread_events *t = &c->threads[i];
      size_t nh = 0, nd = 0;
      for (uint32_t k = 0; k < t->n; k++) *(t->ev[k].kind == KILN_PROF_KERNEL ? &nd : &nh) += 1;
      XLine *hl = nh ? make_line(&a, c, t->tid, t->name, nh) : NULL;
      XLine *dl = NULL;
      if (nd) {
        char *nm = aalloc(&a, 96);
        if (nm) snprintf(nm, 96, "Kernels lane %d (%s)", t->lane >= 0 ? t->lane : 1000 + i, t->name);
        dl = make_line(&a, c, t->lane >= 0 ? t->lane : 1000 + i, nm, nd);
      }
      if (a.oom || (nh && !hl) || (nd && !dl)) break;
      for (uint32_t k = 0; k < t->n && !a.oom; k++) {
        const kiln_prof_event *ev = &t->ev[k];
        int isdev = ev->kind == KILN_PROF_KERNEL;
        XPlane *p = isdev ? dev : host;
        XEvent *x = make_event(&a, c, ev, name_id(isdev ? &dm : &hm, &a, p, ev->name));
        if (!x || !(isdev ? dl : hl)->events) break;
        XLine *l = isdev ? dl : hl;
        l->events[l->n_events++] = x;
        if (ev->kind == KILN_PROF_STEP && steps && steps->events) {
          char *nm = aalloc(&a, 24);
          XEvent *sx = make_event(&a, c, ev, 0);
          if (!nm || !sx) break;
          snprintf(nm, 24, "%lld", (long long)ev->arg);
          const char *in = kiln_prof_intern(nm); /* a stable pointer per step number */
          sx->metadata_id = name_id(&dm, &a, dev, in ? in : "step");
          steps->events[steps->n_events++] = sx;
        }
      }
      if (hl) host->lines[host->n_lines++] = hl;
      if (dl) dev->lines[dev->n_lines++] = dl;
    }
  }
  kiln_status s = KILN_OK;
  if (a.oom || !host || !dev) {
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
  free(hm.keys), free(hm.ids), free(dm.keys), free(dm.ids), free(hm.arr), free(dm.arr);
  afree(&a);
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
    for (size_t i = 0; i < host->n_stats; i++)
      if (!strcmp(stat_name(host, host->stats[i]->metadata_id), "dropped_events"))
        c->dropped = (uint64_t)stat_num(host->stats[i]);
    if (sp->n_hostnames && sp->hostnames[0]) snprintf(c->host, sizeof c->host, "%s", sp->hostnames[0]);
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
