#include "base/pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/spans.h"

/* One parallel loop. Lives on the caller's stack for the duration of the
 * call; workers reach it only through pool->job while they are registered
 * in `active`, so it is never touched after the caller returns. */
typedef struct pool_job {
  kiln_pool_fn fn;
  void *ctx;
  int64_t n, chunk, n_chunks;
  int64_t next; /* atomic: next chunk to take */
  const kiln_pool_tag *tag; /* profiler name of the loop, or NULL */
} pool_job;

struct kiln_pool {
  int n_threads;
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t wake; /* workers wait here for a new job or shutdown */
  pthread_cond_t done; /* the caller waits here for active == 0 */
  pool_job *job;       /* the open job, or NULL (guarded by mu) */
  uint64_t gen;        /* bumped at every new job (written under mu, read atomically) */
  int active;          /* workers registered on the open job (written under mu, read atomically) */
  int64_t spin_ns;     /* how long an idle worker or a waiting caller polls before blocking */
  int busy;            /* a caller owns the pool (guarded by mu) */
  int stop;
};

/* Polling before blocking. Waking a worker blocked on the condition variable
 * costs a futex round trip and a scheduler wake-up, 5-50 us on a VM, and
 * that latency sits on the critical path of every kernel whose last chunk
 * the worker takes; a training step launches 20-40 kernels back to back.
 * So an idle worker first polls `gen` for spin_ns (KILN_POOL_SPIN_US,
 * default 200 us; 0 = always block), and a caller waiting for the last
 * worker polls `active` as long. Past that, both block as before, so a pool
 * with nothing to do costs nothing. The GEMM libraries run one thread inside
 * kiln's own workers (gemm.c), so polling competes with no library threads. */
static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Poll until *gen != val or p->stop (gen != NULL), or until *active == 0
 * (gen == NULL), for at most spin_ns. 1 when that happened. */
static int poll_for(const kiln_pool *p, const uint64_t *gen, uint64_t val, const int *active) {
  if (p->spin_ns <= 0) return 0;
  int64_t deadline = 0;
  for (int i = 0;; i++) {
    if (gen ? __atomic_load_n(gen, __ATOMIC_ACQUIRE) != val || __atomic_load_n(&p->stop, __ATOMIC_RELAXED)
            : __atomic_load_n(active, __ATOMIC_ACQUIRE) == 0)
      return 1;
    cpu_relax();
    if ((i & 63) == 63) { /* the clock only every 64 polls */
      int64_t now = (int64_t)kiln_now_ns();
      if (!deadline) deadline = now + p->spin_ns;
      else if (now >= deadline) return 0;
    }
  }
}

/* Set on pool workers and on a caller while it runs a loop: a nested
 * parallel_for from a loop body must run inline, not wait for itself. */
static __thread int tl_in_loop;

/* One kernel event per participating thread (its lane), with the share of
 * the loop's FLOPs and bytes its items account for. */
static void tag_record(const kiln_pool_tag *tag, uint64_t t0, int64_t items, int64_t n) {
  double share = n > 0 ? (double)items / (double)n : 0;
  if (tag->resolve) tag->resolve(tag);
  kiln_prof_record_src(KILN_PROF_KERNEL, __atomic_load_n(&tag->name, __ATOMIC_ACQUIRE),
                       __atomic_load_n(&tag->src, __ATOMIC_ACQUIRE), t0, kiln_prof_now(), -1, tag->flops * share,
                       tag->bytes * share);
}

static void job_run(pool_job *j) {
  uint64_t t0 = j->tag ? kiln_prof_span_begin() : 0;
  int64_t items = 0;
  for (;;) {
    int64_t c = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
    if (c >= j->n_chunks) break;
    int64_t b = c * j->chunk, e = b + j->chunk;
    if (e > j->n) e = j->n;
    j->fn(j->ctx, b, e);
    items += e - b;
  }
  if (t0 && items) tag_record(j->tag, t0, items, j->n);
}

typedef struct worker_arg {
  kiln_pool *p;
  int lane;
} worker_arg;

static void *worker_main(void *arg) {
  worker_arg wa = *(worker_arg *)arg;
  free(arg);
  kiln_pool *p = wa.p;
  char name[32];
  snprintf(name, sizeof name, "kiln worker %d", wa.lane);
  kiln_prof_thread_set(name, wa.lane);
  tl_in_loop = 1;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    int block = 0; /* polling timed out: block on the condition variable */
    while (!p->stop && (p->gen == seen || !p->job)) {
      if (p->gen != seen && !p->job) { /* missed a finished job */
        seen = p->gen;
        block = 0;
      } else if (!block) { /* the next job usually comes within microseconds */
        pthread_mutex_unlock(&p->mu);
        block = !poll_for(p, &p->gen, seen, NULL);
        pthread_mutex_lock(&p->mu);
      } else {
        pthread_cond_wait(&p->wake, &p->mu);
      }
    }
    if (p->stop) break;
    seen = p->gen;
    pool_job *j = p->job;
    __atomic_store_n(&p->active, p->active + 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&p->mu);
    job_run(j);
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->active, p->active - 1, __ATOMIC_RELEASE);
    if (p->active == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static int threads_from_env(void) {
  int v = kiln_cfg_num_threads();
  if (v > 0) return v;
  long c = sysconf(_SC_NPROCESSORS_ONLN);
  return c >= 1 ? (int)c : 1;
}

kiln_status kiln_pool_create(int num_threads, kiln_pool **out, kiln_err *err) {
  *out = NULL;
  if (num_threads <= 0) num_threads = threads_from_env();
  if (num_threads > KILN_MAX_THREADS) num_threads = KILN_MAX_THREADS;
  kiln_pool *p = calloc(1, sizeof *p);
  if (!p) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
  p->n_threads = num_threads;
  p->spin_ns = 200000;
  long spin = 0;
  if (kiln_cfg_long(kiln_cfg()->pool_spin_us, &spin) && spin >= 0 && spin <= 1000000) p->spin_ns = (int64_t)spin * 1000;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  if (num_threads > 1) {
    p->threads = calloc((size_t)num_threads - 1, sizeof *p->threads);
    if (!p->threads) {
      kiln_pool_destroy(p);
      return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
    }
    for (int i = 0; i < num_threads - 1; i++) {
      worker_arg *wa = malloc(sizeof *wa);
      if (wa) *wa = (worker_arg){p, i + 1}; /* lane 0 is the thread that calls parallel_for */
      if (!wa || pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
        free(wa);
        p->n_threads = i + 1; /* join only those that started */
        kiln_pool_destroy(p);
        return kiln_err_set(err, KILN_ERR_INTERNAL, "thread pool: cannot create thread %d of %d", i + 1,
                            num_threads);
      }
    }
  }
  *out = p;
  return KILN_OK;
}

void kiln_pool_destroy(kiln_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  __atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  if (p->threads)
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int kiln_pool_size(const kiln_pool *p) { return p ? p->n_threads : 1; }

static void run_inline(kiln_pool_fn fn, void *ctx, int64_t n, const kiln_pool_tag *tag) {
  uint64_t t0 = tag ? kiln_prof_span_begin() : 0;
  fn(ctx, 0, n);
  if (t0) tag_record(tag, t0, n, n);
}

void kiln_pool_parallel_for(kiln_pool *p, kiln_pool_fn fn, void *ctx, int64_t n, int64_t grain) {
  kiln_pool_parallel_for_tagged(p, fn, ctx, n, grain, NULL);
}

void kiln_pool_parallel_for_tagged(kiln_pool *p, kiln_pool_fn fn, void *ctx, int64_t n, int64_t grain,
                                   const kiln_pool_tag *tag) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!p || p->n_threads <= 1 || n <= grain || tl_in_loop) {
    run_inline(fn, ctx, n, tag);
    return;
  }
  pthread_mutex_lock(&p->mu);
  if (p->busy) { /* another thread's loop owns the workers */
    pthread_mutex_unlock(&p->mu);
    run_inline(fn, ctx, n, tag);
    return;
  }
  /* About 4 chunks per thread balances load without much overhead. */
  int64_t chunk = (n + 4 * (int64_t)p->n_threads - 1) / (4 * (int64_t)p->n_threads);
  if (chunk < grain) chunk = grain;
  pool_job j = {.fn = fn, .ctx = ctx, .n = n, .chunk = chunk, .n_chunks = (n + chunk - 1) / chunk, .next = 0,
               .tag = tag};
  p->busy = 1;
  p->job = &j;
  __atomic_store_n(&p->gen, p->gen + 1, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);

  tl_in_loop = 1;
  job_run(&j);
  tl_in_loop = 0;

  /* All chunks are taken; wait for the workers still running one, then
   * close the job so late wakers do not touch it. */
  poll_for(p, NULL, 0, &p->active);
  pthread_mutex_lock(&p->mu);
  while (p->active > 0) pthread_cond_wait(&p->done, &p->mu);
  p->job = NULL;
  p->busy = 0;
  pthread_mutex_unlock(&p->mu);
}
