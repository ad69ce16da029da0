/* The runtime singleton: start, stop, buffers, graph cache. */
#include "runtime/runtime_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/counters.h"
#include "base/spans.h"
#include "base/text.h"
#include "runtime/events.h"

static kiln_runtime *g_rt; /* the documented singleton */

const char *kiln_version(void) { return KILN_VERSION_STRING; }

static void release_device(void *ctx, void *data, size_t bytes) { kiln_bufcache_free(ctx, data, bytes); }

kiln_buf *kiln_runtime_buffer(kiln_runtime *rt, size_t bytes) {
  void *p = kiln_bufcache_alloc(rt->bufs, bytes);
  if (!p) return NULL;
  return kiln_buf_wrap(p, bytes, release_device, rt->bufs);
}

/* KILN_BUFFER_CACHE_MB, default 2048: bytes of freed buffers kept for reuse. */
static size_t buffer_cache_cap(void) {
  long mb = 2048; /* unset or malformed ("2G"): the default (the parser sets mb only on success) */
  kiln_cfg_long(kiln_cfg()->buffer_cache_mb, &mb);
  if (mb > ((long)1 << 40)) mb = (long)1 << 40;
  return mb > 0 ? (size_t)mb << 20 : 0;
}

/* KILN_GRAPH_CACHE_SIZE, default 1024 (PyTorch/XLA's default for its
 * in-memory cache): executables held at once; 0 or less: no cap. */
static uint32_t graph_cache_cap(void) {
  long n = 1024; /* unset or malformed ("1e3"): the default */
  kiln_cfg_long(kiln_cfg()->graph_cache_size, &n);
  return n > 0 ? (uint32_t)(n < (long)UINT32_MAX ? n : (long)UINT32_MAX) : 0;
}

kiln_buf *kiln_runtime_upload(kiln_runtime *rt, const void *host, size_t bytes, kiln_loc loc) {
  uint64_t t0 = kiln_now_ns();
  kiln_buf *b = kiln_runtime_buffer(rt, bytes);
  if (!b) {
    kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "from_host: cannot allocate %zu bytes of device memory", bytes);
    return NULL;
  }
  if (bytes) rt->backend->vt->copy_to_device(rt->backend, b->data, host, bytes);
  kiln_counter_add("TransferToDevice", 1);
  kiln_counter_add("TransferToDeviceBytes", (int64_t)bytes);
  uint64_t t1 = kiln_now_ns();
  kiln_metric_record("TransferToDeviceTime", (double)(t1 - t0));
  if (kiln_prof_on()) kiln_prof_record(KILN_PROF_TRANSFER, "transfer to device", t0, t1, (int64_t)bytes, 0, 0);
  return b;
}

static void resolve_cache_dir(char *out, size_t len, const kiln_options *o) {
  out[0] = 0;
  const char *off = kiln_cfg()->disk_cache;
  if (o->disk_cache < 0 || (o->disk_cache == 0 && off && !strcmp(off, "0"))) return;
  const char *d = o->cache_dir ? o->cache_dir : kiln_cfg()->cache_dir;
  if (d && *d) {
    snprintf(out, len, "%s", d);
    return;
  }
  const char *xdg = kiln_cfg()->xdg_cache_home;
  if (xdg && *xdg) {
    snprintf(out, len, "%s/kiln", xdg);
    return;
  }
  const char *home = kiln_cfg()->home;
  if (home && *home) snprintf(out, len, "%s/.cache/kiln", home);
}

kiln_status kiln_runtime_start(const kiln_options *opts) {
  if (g_rt) return kiln_error(KILN_ERR_INVALID_ARGUMENT, (kiln_loc){0, 0}, "kiln_init: the runtime is already started");
  kiln_config_load(); /* the environment, read once per runtime start */
  kiln_options o = opts ? *opts : (kiln_options){0};
  const int sw_ok = o.disk_cache >= KILN_SWITCH_OFF && o.disk_cache <= KILN_SWITCH_ON &&
                    o.dynamic_shapes >= KILN_SWITCH_OFF && o.dynamic_shapes <= KILN_SWITCH_ON;
  if (o.num_threads < 0 || !sw_ok)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, (kiln_loc){0, 0},
                      "kiln_init: bad options: num_threads %d (0: the default, or a count), disk_cache %d and "
                      "dynamic_shapes %d (KILN_SWITCH_OFF, _DEFAULT or _ON: -1, 0, 1)",
                      o.num_threads, (int)o.disk_cache, (int)o.dynamic_shapes);
  kiln_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) return KILN_ERR_OUT_OF_MEMORY;
  const char *be = o.backend ? o.backend : kiln_cfg()->backend;
  if (!be || !*be) be = "cpu";
  snprintf(rt->backend_name, sizeof rt->backend_name, "%s", be);
  int nt = o.num_threads;
  if (nt <= 0) nt = kiln_cfg_num_threads();
  if (nt <= 0) nt = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (nt <= 0) nt = 1;
  if (nt > KILN_MAX_THREADS) nt = KILN_MAX_THREADS;
  rt->num_threads = nt;
  resolve_cache_dir(rt->cache_dir, sizeof rt->cache_dir, &o);

  kiln_backend_config cfg = {.num_threads = nt, .cache_dir = rt->cache_dir[0] ? rt->cache_dir : NULL};
  kiln_err err = {0};
  kiln_status s;
  s = kiln_backend_create(be, &cfg, &rt->backend, &err);
  if (s != KILN_OK) {
    free(rt);
    return kiln_error(s, (kiln_loc){0, 0}, "kiln_init: %s", err.msg);
  }
  rt->bufs = kiln_bufcache_create(rt->backend, buffer_cache_cap());
  const char *sync = kiln_cfg()->sync;
  s = kiln_executor_create(rt->backend, sync && !strcmp(sync, "1"), &rt->exec);
  rt->cache_cap = graph_cache_cap();
  rt->entry_cap = rt->cache_cap > UINT32_MAX / 2 ? UINT32_MAX : 2 * rt->cache_cap;
  const char *np = kiln_cfg()->passes;
  rt->skip_passes = np && !strcmp(np, "0");
  const char *dy = kiln_cfg()->dynamic; /* auto (default) | off */
  rt->dynamic_auto = o.dynamic_shapes ? o.dynamic_shapes > 0 : !(dy && (!strcmp(dy, "off") || !strcmp(dy, "0")));
  rt->n_buckets = 256;
  rt->buckets = calloc(rt->n_buckets, sizeof *rt->buckets);
  if (s != KILN_OK || !rt->buckets || !rt->bufs) {
    kiln_executor_destroy(rt->exec);
    kiln_bufcache_destroy(rt->bufs);
    rt->backend->vt->destroy(rt->backend);
    free(rt->buckets);
    free(rt);
    return kiln_error(s ? s : KILN_ERR_OUT_OF_MEMORY, (kiln_loc){0, 0}, "kiln_init: cannot start the runtime");
  }
  g_rt = rt;
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_START, .rt = rt});
  return KILN_OK;
}

kiln_runtime *kiln_runtime_peek(void) { return g_rt; }

uint64_t kiln_runtime_steps(const kiln_runtime *rt) { return rt->step; }

kiln_runtime *kiln_runtime_get(void) {
  /* the lazy start goes through the public entry point (src/init/), which
   * registers the observers before it starts the runtime */
  if (!g_rt && kiln_init(NULL) != KILN_OK) return NULL;
  return g_rt;
}

const char *kiln_backend_name(void) {
  kiln_runtime *rt = kiln_runtime_get();
  return rt ? rt->backend_name : "none";
}

void kiln_runtime_stop(void) {
  kiln_runtime *rt = g_rt;
  if (!rt) return;
  kiln_executor_wait_all(rt->exec);
  /* before the cache: the debug analysis points at its entries */
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_STOP, .rt = rt});
  kiln_executor_destroy(rt->exec);
  for (uint32_t b = 0; b < rt->n_buckets; b++) {
    kiln_cache_entry *e = rt->buckets[b];
    while (e) {
      kiln_cache_entry *n = e->next;
      if (e->exe) rt->backend->vt->executable_free(rt->backend, e->exe);
      kiln_graph_free(e->graph);
      kiln_graph_free(e->view);
      free(e);
      e = n;
    }
  }
  free(rt->buckets);
  kiln_dyn_sites_free(rt->dyn);
  kiln_pass_memos_free(rt->pmemo);
  kiln_bufcache_destroy(rt->bufs);
  rt->backend->vt->destroy(rt->backend);
  free(rt);
  g_rt = NULL;
}

void kiln_runtime_test_force_key(uint64_t key) {
  kiln_runtime *rt = kiln_runtime_get();
  if (rt) rt->test_force_key = key;
}

/* ── graph cache ── */

kiln_cache_entry *kiln_cache_find(kiln_runtime *rt, uint64_t key, const kiln_run_request *rq) {
  for (kiln_cache_entry *e = rt->buckets[key & (rt->n_buckets - 1)]; e; e = e->next) {
    if (e->key != key) continue;
    /* a hash match is not enough: the caller verifies the structure, against
     * the entry's own traced graph or, for a planned size, its family's */
    if (e->graph && rq->matches(rq->ctx, e->graph)) return e;
    if (e->fam_graph && rq->binds && rq->binds(rq->ctx, e->fam_graph, e->fam_shape, e->fam_vals)) return e;
    kiln_counter_add("GraphCacheKeyCollision", 1);
  }
  return NULL;
}

const kiln_graph *kiln_cache_entry_graph(kiln_cache_entry *e) {
  if (e->graph) return e->graph;
  if (!e->view && e->fam_graph) e->view = kiln_symshape_instance(e->fam_graph, e->fam_shape, e->fam_vals);
  return e->view;
}

kiln_status kiln_cache_insert(kiln_runtime *rt, kiln_cache_entry *e) {
  if (rt->n_entries + 1 > rt->n_buckets) {
    uint32_t nb = rt->n_buckets * 2;
    kiln_cache_entry **nbk = calloc(nb, sizeof *nbk);
    if (!nbk) return KILN_ERR_OUT_OF_MEMORY;
    for (uint32_t b = 0; b < rt->n_buckets; b++) {
      kiln_cache_entry *x = rt->buckets[b];
      while (x) {
        kiln_cache_entry *n = x->next;
        x->next = nbk[x->key & (nb - 1)];
        nbk[x->key & (nb - 1)] = x;
        x = n;
      }
    }
    free(rt->buckets);
    rt->buckets = nbk;
    rt->n_buckets = nb;
  }
  uint32_t b = (uint32_t)(e->key & (rt->n_buckets - 1));
  e->next = rt->buckets[b];
  rt->buckets[b] = e;
  rt->n_entries++;
  return KILN_OK;
}

/* Drop the least recently used entry that holds no executable, is not
 * pinned, has no collectives and is not keep (the one in use): unlink it,
 * let the observers forget it, free it. Returns 0 when there is none. A
 * graph with collectives stays: its first run is agreed across the ranks
 * (an exchange every rank makes in the same order, src/dist/agree.h), and
 * each rank drops by its own use, so made again on the ranks that dropped
 * it only, it would start an exchange the others never join (a hang). */
static int drop_lru(kiln_runtime *rt, const kiln_cache_entry *keep) {
  kiln_cache_entry **lru = NULL;
  for (uint32_t b = 0; b < rt->n_buckets; b++)
    for (kiln_cache_entry **px = &rt->buckets[b]; *px; px = &(*px)->next) {
      const kiln_cache_entry *x = *px;
      if (!x->exe && !x->pins && !x->collective && x != keep && (!lru || x->last_use < (*lru)->last_use))
        lru = px;
    }
  if (!lru) return 0;
  kiln_cache_entry *x = *lru;
  *lru = x->next;
  rt->n_entries--;
  kiln_event_emit(&(kiln_event){.kind = KILN_EV_DROPPED, .rt = rt, .entry = x});
  kiln_graph_free(x->graph);
  kiln_graph_free(x->view);
  free(x);
  kiln_counter_add("GraphCacheDropped", 1);
  return 1;
}

void kiln_cache_loaded(kiln_runtime *rt, kiln_cache_entry *e, int newly_loaded) {
  e->last_use = ++rt->use_clock;
  if (newly_loaded) rt->n_loaded++;
  while (rt->cache_cap && rt->n_loaded > rt->cache_cap) {
    kiln_cache_entry *lru = NULL;
    for (uint32_t b = 0; b < rt->n_buckets; b++)
      for (kiln_cache_entry *x = rt->buckets[b]; x; x = x->next)
        if (x->exe && x != e && (!lru || x->last_use < lru->last_use)) lru = x;
    if (!lru) break;
    kiln_executor_wait_all(rt->exec); /* a job may still run it */
    rt->backend->vt->executable_free(rt->backend, lru->exe);
    lru->exe = NULL;
    rt->n_loaded--;
    kiln_counter_add("GraphCacheEvicted", 1);
  }
  while (rt->entry_cap && rt->n_entries > rt->entry_cap && drop_lru(rt, e)) {
  }
}
