/* kiln_cc_build_parts (toolchain/compiler.h): several sources compiled at
 * once, one compiler process each, under the driver's lock; the steps of a
 * build are compiler.c's (compiler_internal.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/spans.h"
#include "toolchain/compiler_internal.h"

/* One source of kiln_cc_build_parts that the cache did not have: its
 * compiler run, on a thread of its own (kiln_cc_run_capture only: no state
 * of cc but its flags, which nothing changes while cc->mu is held). */
typedef struct cc_part {
  int index;     /* the source */
  uint64_t key;  /* its cache key */
  int written;   /* its source is in the work directory */
  char c_name[64], so_name[64];
  char c_path[sizeof(((kiln_cc *)0)->work) + 64], so_path[sizeof(((kiln_cc *)0)->work) + 64];
  char *argv[KILN_CC_MAX_FLAGS + 8];
  int timeout_s;
  char *output;
  int code;
  kiln_status st;
  kiln_err err;
  pthread_t thread;
  int threaded;
} cc_part;

static void *cc_part_run(void *arg) {
  cc_part *r = arg;
  r->st = kiln_cc_run_capture(r->argv, r->output, KILN_CC_OUTPUT_CAP, &r->code, r->timeout_s, NULL, &r->err);
  return NULL;
}

/* Compile the sources of parts m[0..n) at once, one compiler each (the
 * first on this thread); each source is written into the work directory
 * first. A part whose source cannot be written or whose compiler runs out
 * of space is left for kiln_cc_compile_source (written 0, or
 * kiln_cc_out_of_space): the work directory moves first. Under cc->mu. */
static void run_parts(kiln_cc *cc, cc_part *m, int n, const char *const *source, const size_t *len) {
  for (int i = 0; i < n; i++) {
    cc_part *r = &m[i];
    uint64_t seq = ++cc->seq;
    snprintf(r->c_name, sizeof r->c_name, "k%llu.c", (unsigned long long)seq);
    snprintf(r->so_name, sizeof r->so_name, "k%llu.so", (unsigned long long)seq);
    snprintf(r->c_path, sizeof r->c_path, "%s/%s", cc->work, r->c_name);
    snprintf(r->so_path, sizeof r->so_path, "%s/%s", cc->work, r->so_name);
    int e = 0;
    kiln_err werr = {0};
    r->written = r->output && kiln_cc_work_write(cc, r->c_name, source[r->index], len[r->index], &e, &werr) == KILN_OK;
    r->st = KILN_ERR_COMPILE;
    r->code = -1;
    if (!r->written) continue;
    kiln_cc_argv(cc, r->so_path, r->c_path, r->argv);
    r->timeout_s = cc->timeout_s;
  }
  for (int i = 1; i < n; i++) /* a thread that cannot start runs below, on this one */
    m[i].threaded = m[i].written && pthread_create(&m[i].thread, NULL, cc_part_run, &m[i]) == 0;
  for (int i = 0; i < n; i++)
    if (m[i].written && !m[i].threaded) cc_part_run(&m[i]);
  for (int i = 1; i < n; i++)
    if (m[i].threaded) pthread_join(m[i].thread, NULL);
  for (int i = 0; i < n; i++)
    if (m[i].written) unlinkat(cc->work_fd, m[i].c_name, 0);
}

/* A part that kiln_cc_compile_source should make again: its source was not
 * written, or its compiler ran out of space. */
static int part_redo(const cc_part *r) {
  return !r->written || (r->st == KILN_OK && r->code != 0 && kiln_cc_out_of_space(r->output));
}

kiln_status kiln_cc_build_parts(kiln_cc *cc, int n, const char *const *source, const size_t *len,
                                const char *const *const *symbols, const int *n_symbols, kiln_so **out,
                                kiln_cc_result *res, kiln_err *err) {
  kiln_cc_result local;
  if (!res) res = &local;
  memset(res, 0, sizeof *res);
  if (!cc || n < 1 || !source || !len || !symbols || !n_symbols || !out)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "kiln_cc_build_parts: NULL argument");
  for (int p = 0; p < n; p++) out[p] = NULL;
  if (n == 1) return kiln_cc_build_checked(cc, source[0], len[0], symbols[0], n_symbols[0], out, res, err);
  cc_part *m = calloc((size_t)n, sizeof *m);
  if (!m) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  pthread_mutex_lock(&cc->mu);
  kiln_status s = KILN_OK;
  int n_miss = 0, hits = 0;
  for (int p = 0; p < n && s == KILN_OK; p++) { /* the cache first */
    int hit = 0;
    kiln_cc_result r = {0};
    uint64_t key = cc->force_key ? cc->force_key : kiln_hash_bytes(source[p], len[p], cc->base_key);
    if (cc->dc) s = kiln_cc_load_cached(cc, key, source[p], len[p], symbols[p], n_symbols[p], &out[p], &r, &hit, err);
    res->disk_cache_corrupt |= r.disk_cache_corrupt;
    res->load_ns += r.load_ns;
    hits += hit;
    if (s == KILN_OK && !hit) {
      m[n_miss].index = p;
      m[n_miss].key = key;
      m[n_miss].output = malloc(KILN_CC_OUTPUT_CAP);
      if (m[n_miss].output) m[n_miss].output[0] = 0;
      n_miss++;
    }
  }
  res->compiler_runs = n_miss;
  if (s == KILN_OK && n_miss > 0) {
    uint64_t tc = kiln_now_ns();
    run_parts(cc, m, n_miss, source, len);
    res->cc_ns = (double)(kiln_now_ns() - tc);
    kiln_prof_span_end(tc, KILN_PROF_COMPILE, "compile: C compiler (parallel)", (int64_t)n_miss);
  }
  /* what compiled is loaded before anything is made again: a move of the
   * work directory takes the objects in it along */
  for (int i = 0; i < n_miss && s == KILN_OK; i++) {
    cc_part *r = &m[i];
    int p = r->index;
    kiln_cc_result lr = {0};
    if (part_redo(r)) continue;
    if (r->st != KILN_OK) {
      s = r->st;
      *err = r->err;
    } else if (r->code != 0) {
      s = kiln_cc_failed(cc, r->code, r->output, err);
    } else {
      s = kiln_cc_load_compiled(cc, r->key, source[p], len[p], r->so_name, symbols[p], n_symbols[p], &out[p], &lr, err);
      r->so_name[0] = 0; /* kiln_cc_load_compiled took it */
      res->load_ns += lr.load_ns;
    }
  }
  for (int i = 0; i < n_miss && s == KILN_OK; i++) {
    cc_part *r = &m[i];
    int p = r->index;
    if (!part_redo(r)) continue;
    if (r->written) unlinkat(cc->work_fd, r->so_name, 0);
    r->so_name[0] = 0;
    if (r->written) /* moved, as kiln_cc_compile_source does (once) */
      kiln_cc_relocate_work(cc, "the compiler ran out of space");
    char so_name[64];
    kiln_cc_result cr = {0};
    s = kiln_cc_compile_source(cc, source[p], len[p], so_name, sizeof so_name, &cr, err);
    if (s == KILN_OK)
      s = kiln_cc_load_compiled(cc, r->key, source[p], len[p], so_name, symbols[p], n_symbols[p], &out[p], &cr, err);
    res->cc_ns += cr.cc_ns;
    res->load_ns += cr.load_ns;
  }
  for (int i = 0; i < n_miss; i++) { /* after an error: the objects no one loaded */
    if (m[i].written && m[i].so_name[0]) unlinkat(cc->work_fd, m[i].so_name, 0);
    free(m[i].output);
  }
  res->from_disk_cache = hits == n;
  if (s != KILN_OK)
    for (int p = 0; p < n; p++) {
      if (out[p]) kiln_so_close(out[p]);
      out[p] = NULL;
    }
  pthread_mutex_unlock(&cc->mu);
  free(m);
  return s;
}

