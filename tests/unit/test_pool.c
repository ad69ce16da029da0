/* kiln_pool: every item is processed exactly once, for many shapes of loop,
 * nested and concurrent callers run inline, and the pool is clean under
 * ThreadSanitizer (build with -DKILN_SANITIZE=thread). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "kt.h"
#include "base/pool.h"

typedef struct count_ctx {
  int *hits; /* one slot per item: written by exactly one task */
  int64_t sum; /* atomic */
} count_ctx;

static void count_fn(void *ctx, int64_t b, int64_t e) {
  count_ctx *c = ctx;
  int64_t s = 0;
  for (int64_t i = b; i < e; i++) {
    c->hits[i]++;
    s += i;
  }
  __atomic_fetch_add(&c->sum, s, __ATOMIC_RELAXED);
}

static kiln_pool *make(int n) {
  kiln_pool *p = NULL;
  kiln_err err = {0};
  kiln_status st = kiln_pool_create(n, &p, &err);
  KT_CHECK_MSG(st == KILN_OK, "pool: %s", err.msg);
  return p;
}

KT_TEST(every_item_once) {
  int threads[] = {1, 2, 3, 8};
  int64_t sizes[] = {0, 1, 7, 100, 1000, 4097, 100000};
  int64_t grains[] = {1, 3, 64, 100000};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
    kiln_pool *p = make(threads[t]);
    if (!p) return;
    KT_EQ_INT(kiln_pool_size(p), threads[t]);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
      for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
        int64_t n = sizes[s];
        count_ctx c = {calloc((size_t)n + 1, sizeof(int)), 0};
        kiln_pool_parallel_for(p, count_fn, &c, n, grains[g]);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) bad += c.hits[i] != 1;
        KT_EQ_INT(bad, 0);
        KT_EQ_INT(c.sum, n * (n - 1) / 2);
        free(c.hits);
      }
    kiln_pool_destroy(p);
  }
}

KT_TEST(many_small_loops) {
  /* back-to-back jobs exercise the wake/close handshake (late wakers) */
  kiln_pool *p = make(4);
  if (!p) return;
  int hits[64];
  for (int rep = 0; rep < 2000; rep++) {
    for (int i = 0; i < 64; i++) hits[i] = 0;
    count_ctx c = {hits, 0};
    kiln_pool_parallel_for(p, count_fn, &c, 64, 1);
    if (c.sum != 64 * 63 / 2) {
      KT_FAIL("rep %d: sum %lld", rep, (long long)c.sum);
      break;
    }
  }
  kiln_pool_destroy(p);
}

typedef struct nest_ctx {
  kiln_pool *p;
  int *hits; /* 100 x 50 */
} nest_ctx;

typedef struct inner_ctx {
  int *row;
} inner_ctx;

static void inner_fn(void *ctx, int64_t b, int64_t e) {
  inner_ctx *c = ctx;
  for (int64_t i = b; i < e; i++) c->row[i]++;
}

static void outer_fn(void *ctx, int64_t b, int64_t e) {
  nest_ctx *c = ctx;
  for (int64_t i = b; i < e; i++) {
    inner_ctx ic = {c->hits + i * 50};
    kiln_pool_parallel_for(c->p, inner_fn, &ic, 50, 1); /* runs inline */
  }
}

KT_TEST(nested_calls_run_inline) {
  kiln_pool *p = make(3);
  if (!p) return;
  int *hits = calloc(100 * 50, sizeof(int));
  nest_ctx c = {p, hits};
  kiln_pool_parallel_for(p, outer_fn, &c, 100, 1);
  int bad = 0;
  for (int i = 0; i < 100 * 50; i++) bad += hits[i] != 1;
  KT_EQ_INT(bad, 0);
  free(hits);
  kiln_pool_destroy(p);
}

typedef struct caller_arg {
  kiln_pool *p;
  int64_t sum;
} caller_arg;

static void *caller_main(void *arg) {
  caller_arg *a = arg;
  for (int rep = 0; rep < 200; rep++) {
    int *hits = calloc(1000, sizeof(int));
    count_ctx c = {hits, 0};
    kiln_pool_parallel_for(a->p, count_fn, &c, 1000, 10);
    a->sum += c.sum;
    free(hits);
  }
  return NULL;
}

KT_TEST(concurrent_callers) {
  kiln_pool *p = make(2);
  if (!p) return;
  pthread_t th[3];
  caller_arg args[3];
  for (int i = 0; i < 3; i++) {
    args[i] = (caller_arg){p, 0};
    pthread_create(&th[i], NULL, caller_main, &args[i]);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    KT_EQ_INT(args[i].sum, 200LL * 1000 * 999 / 2);
  }
  kiln_pool_destroy(p);
}

KT_TEST(env_default_and_null) {
  kiln_pool_destroy(NULL); /* accepted */
  KT_EQ_INT(kiln_pool_size(NULL), 1);
  setenv("KILN_NUM_THREADS", "3", 1);
  kiln_config_load(); /* read again: an earlier test loaded it */
  kiln_pool *p = make(0);
  if (!p) return;
  KT_EQ_INT(kiln_pool_size(p), 3);
  kiln_pool_destroy(p);
  unsetenv("KILN_NUM_THREADS");
  kiln_config_load();
}

/* KILN_NUM_THREADS is one parser for the runtime and the pool (they were two,
 * with caps of 256 and 1024, and "4x" was taken as 4): the whole value must
 * be a positive decimal integer, else every online core; at most 256. */
KT_TEST(env_thread_count_parse) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  struct {
    const char *v;
    long want; /* 0: every online core */
  } cases[] = {{"3", 3}, {"4x", 0}, {"", 0}, {"0", 0}, {"-2", 0}, {"abc", 0}, {"100000", 256}, {"256", 256}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv("KILN_NUM_THREADS", cases[i].v, 1);
    kiln_config_load();
    long want = cases[i].want ? cases[i].want : cores;
    KT_CHECK_MSG(kiln_cfg_num_threads() == cases[i].want, "KILN_NUM_THREADS=%s: %d, want %ld", cases[i].v,
                 kiln_cfg_num_threads(), cases[i].want);
    if (want > 8) continue; /* do not start hundreds of threads in a test */
    kiln_pool *p = make(0);
    if (!p) continue;
    KT_CHECK_MSG(kiln_pool_size(p) == want, "pool under KILN_NUM_THREADS=%s: %d threads, want %ld", cases[i].v,
                 kiln_pool_size(p), want);
    kiln_pool_destroy(p);
  }
  unsetenv("KILN_NUM_THREADS");
  kiln_config_load();
}

/* The numeric variables' parsers: the whole value or nothing. */
KT_TEST(config_number_parsers) {
  struct {
    const char *v;
    int ok;
    long want;
  } ls[] = {{"12", 1, 12},  {" -3 ", 1, -3}, {"2G", 0, 0},   {"1e3", 0, 0}, {"", 0, 0},
            {"x1", 0, 0},   {"0x10", 0, 0},  {"99999999999999999999", 0, 0}, {"7\n", 1, 7}};
  for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++) {
    long got = -12345;
    int ok = kiln_cfg_long(ls[i].v, &got);
    KT_CHECK_MSG(ok == ls[i].ok && (!ok || got == ls[i].want), "kiln_cfg_long(\"%s\"): ok %d value %ld", ls[i].v, ok,
                 got);
    if (!ok) KT_EQ_INT(got, -12345); /* untouched */
  }
  KT_CHECK(!kiln_cfg_long(NULL, &(long){0}));
  struct {
    const char *v;
    int ok;
    double want;
  } ds[] = {{"2.5", 1, 2.5}, {"1e3", 1, 1000}, {"5m", 0, 0}, {"nan", 0, 0}, {"inf", 0, 0}, {"1e999", 0, 0}, {"", 0, 0}};
  for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
    double got = -1;
    int ok = kiln_cfg_double(ds[i].v, &got);
    KT_CHECK_MSG(ok == ds[i].ok && (!ok || got == ds[i].want), "kiln_cfg_double(\"%s\"): ok %d value %g", ds[i].v, ok,
                 got);
  }
}

KT_MAIN(KT_CASE(every_item_once), KT_CASE(many_small_loops), KT_CASE(nested_calls_run_inline),
        KT_CASE(concurrent_callers), KT_CASE(env_default_and_null), KT_CASE(env_thread_count_parse),
        KT_CASE(config_number_parsers))
