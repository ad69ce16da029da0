/* The dist service (dist.h): the world, the MPI module loaded on first use,
 * and the collectives. */
#include "dist/dist.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/counters.h"
#include "base/exit.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/spans.h"
#include "dist/module.h"
#include "kiln/dist.h"

/* The world: one per process (a documented singleton), set once under
 * g_once; MPI calls are serialized under g_mu. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const kiln_mpi_ops *g_ops;
static int g_rank, g_world = 1;
static kiln_status g_status = KILN_OK;
static char g_msg[1024];

/* The launcher's world size, read before MPI is loaded: Open MPI's
 * OMPI_COMM_WORLD_SIZE, else PMI_SIZE (MPICH, Slurm's PMI); a PMIx rank
 * alone means launched, size unknown (-1). 1 when run alone. */
static int launcher_world(void) {
  const kiln_config *c = kiln_cfg();
  const char *s = c->ompi_world_size ? c->ompi_world_size : c->pmi_size;
  long v = 0;
  if (s) return kiln_cfg_long(s, &v) && v > 1 && v < (1L << 30) ? (int)v : 1;
  return c->pmix_rank ? -1 : 1;
}

static void comm_stop(void);
static int comm_begin(void);
static void term_install(void);

static void atexit_finalize(void) {
  kiln_exit_drain_now(); /* the steps in flight first: their collectives need MPI (base/exit.h) */
  comm_stop(); /* after the collectives already queued */
  pthread_mutex_lock(&g_mu);
  if (g_ops) g_ops->finalize();
  pthread_mutex_unlock(&g_mu);
}

static const kiln_mpi_ops *load_module(char *why, size_t cap) {
#ifdef KILN_MPI_MODULE_BUILD
  const char *cands[2] = {kiln_cfg()->mpi_lib, KILN_MPI_MODULE_BUILD};
  size_t n = 0;
  for (int i = 0; i < 2; i++) {
    if (!cands[i] || !*cands[i]) continue;
    /* RTLD_GLOBAL: Open MPI's own plugins resolve libmpi's symbols globally */
    void *h = dlopen(cands[i], RTLD_NOW | RTLD_GLOBAL);
    const char *e = NULL;
    if (h) {
      kiln_mpi_module_fn fn = (kiln_mpi_module_fn)dlsym(h, "kiln_mpi_module");
      const kiln_mpi_ops *ops = fn ? fn() : NULL;
      if (ops && ops->abi == KILN_MPI_ABI) return ops; /* kept open for the process's life */
      e = fn ? "it answered with another ABI" : "it has no kiln_mpi_module";
      dlclose(h);
    } else {
      e = dlerror();
    }
    if (n < cap) n += (size_t)snprintf(why + n, cap - n, "%s%s: %s", n ? "; " : "", cands[i], e ? e : "cannot load");
  }
  if (!n) snprintf(why, cap, "no module path");
  return NULL;
#else
  snprintf(why, cap,
           "this kiln was built without MPI: install libopenmpi-dev and openmpi-bin (scripts/install-deps.sh) and "
           "rebuild to run distributed");
  return NULL;
#endif
}

static void start_world(void) {
  int w = launcher_world();
  if (w == 1) return; /* alone: rank 0 of 1, no MPI */
  char why[768];
  const kiln_mpi_ops *ops = load_module(why, sizeof why);
  if (!ops) {
    g_status = KILN_ERR_UNSUPPORTED;
    snprintf(g_msg, sizeof g_msg, "dist: launched in a world of %s, but the MPI module is not available (%s)",
             w > 0 ? "several processes" : "PMIx processes", why);
    return;
  }
  char msg[512] = "";
  int rank = 0, world = 1;
  if (ops->init(&rank, &world, msg, sizeof msg) != 0) {
    g_status = KILN_ERR_INTERNAL;
    snprintf(g_msg, sizeof g_msg, "dist: starting MPI failed: %s", msg);
    return;
  }
  g_ops = ops;
  g_rank = rank;
  g_world = world;
  if (comm_begin() != 0) {
    g_status = KILN_ERR_INTERNAL;
    snprintf(g_msg, sizeof g_msg, "dist: cannot start the communication thread");
    return;
  }
  term_install();
  atexit(atexit_finalize);
}

kiln_status kiln_dist_world(kiln_loc loc, int *rank, int *world) {
  pthread_once(&g_once, start_world);
  *rank = g_rank;
  *world = g_world;
  if (g_status != KILN_OK) return kiln_error(g_status, loc, "%s", g_msg);
  return KILN_OK;
}

int kiln_dist_mpi_loaded(void) {
  pthread_once(&g_once, start_world);
  return g_ops != NULL;
}

/* ───────────── the public functions (kiln/dist.h) ───────────── */

kiln_status kiln_dist_init_at(kiln_loc loc) {
  int r, w;
  return kiln_dist_world(loc, &r, &w);
}

int kiln_dist_rank(void) {
  pthread_once(&g_once, start_world);
  return g_rank;
}

int kiln_dist_world_size(void) {
  pthread_once(&g_once, start_world);
  return g_world;
}

/* ───────────── the communication thread ───────────── */

/* One collective queued for, or run by, the communication thread. */
struct kiln_dist_handle {
  kiln_dist_call call;
  kiln_dist_handle *next;
  uint64_t t_start, t_arrive, t_done; /* queued, begun on the thread, completed */
  int done, rc;
  char msg[512];
};

/* The queue (q_mu): the comm thread pops in order and marks handles done. */
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER; /* work, or stop */
static pthread_cond_t d_cv = PTHREAD_COND_INITIALIZER; /* a handle done */
static kiln_dist_handle *q_head, *q_tail;
static int q_stop, g_comm_on;
static pthread_t g_comm;
/* What this rank says about itself (timeout report, SIGTERM message):
 * written by the comm thread (seq, last, busy) and the tracing thread
 * (step), read atomically, also from a signal handler. */
static int64_t g_seq, g_step;
static const char *g_last;
static int g_busy;
static double g_timeout_s = 300;

void kiln_dist_note_step(int64_t step) { __atomic_store_n(&g_step, step, __ATOMIC_RELAXED); }

static void me_now(kiln_mpi_peer *p) {
  memset(p, 0, sizeof *p);
  p->seq = __atomic_load_n(&g_seq, __ATOMIC_RELAXED);
  p->step = __atomic_load_n(&g_step, __ATOMIC_RELAXED);
  p->busy = __atomic_load_n(&g_busy, __ATOMIC_RELAXED);
  const char *l = __atomic_load_n(&g_last, __ATOMIC_RELAXED);
  snprintf(p->last, sizeof p->last, "%s", l ? l : "none yet");
}

static void serve(void) {
  kiln_mpi_peer me;
  me_now(&me);
  g_ops->serve(&me);
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  nanosleep(&ts, NULL);
}

/* Between two tests of a request: spin (each test drives MPI's progress)
 * for 100 us, then sleep 1 us doubling to 100 us, answering status
 * queries; give up past the deadline. A rank waiting for a late one thus
 * costs a few percent of a core, not a whole one. */
typedef struct poll_ctx {
  uint64_t t0, deadline, nap;
  unsigned n;
} poll_ctx;

static int poll_idle(void *ctx) {
  poll_ctx *c = ctx;
  uint64_t now = kiln_now_ns();
  if (now - c->t0 < 100000) return 0;
  if ((++c->n & 15) == 0) serve();
  if (now > c->deadline) return 1;
  c->nap = c->nap ? (c->nap * 2 > 100000 ? 100000 : c->nap * 2) : 1000;
  sleep_ns(c->nap);
  return 0;
}

/* ALL_GATHER with the axis not outermost: gather rank blocks [world][outer]
 * [blk] into tmp, then interleave into out [outer][world][blk]. */
static int gather_axis(const kiln_dist_call *c, char *msg, size_t cap) {
  size_t bytes = (size_t)c->count * c->elem, blk = bytes / (size_t)c->outer;
  if (c->outer == 1) return g_ops->all_gather(c->in, c->out, bytes, msg, cap);
  char *tmp = malloc(bytes * (size_t)c->world);
  if (!tmp) {
    snprintf(msg, cap, "out of memory (%zu bytes)", bytes * (size_t)c->world);
    return -1;
  }
  int rc = g_ops->all_gather(c->in, tmp, bytes, msg, cap);
  for (int64_t o = 0; rc == 0 && o < c->outer; o++)
    for (int w = 0; w < c->world; w++)
      memcpy((char *)c->out + ((size_t)o * (size_t)c->world + (size_t)w) * blk,
             tmp + (size_t)w * bytes + (size_t)o * blk, blk);
  free(tmp);
  return rc;
}

static void timeout_report(const kiln_dist_handle *h, int64_t seq);

/* Run h on the comm thread, under g_mu (MPI_THREAD_SERIALIZED). */
static void run_one(kiln_dist_handle *h) {
  const kiln_dist_call *c = &h->call;
  size_t bytes = (size_t)c->count * c->elem;
  h->t_arrive = kiln_now_ns();
  int64_t seq = __atomic_add_fetch(&g_seq, 1, __ATOMIC_RELAXED);
  __atomic_store_n(&g_last, c->name ? c->name : c->op, __ATOMIC_RELAXED);
  __atomic_store_n(&g_busy, 1, __ATOMIC_RELAXED);
  poll_ctx pc = {.t0 = h->t_arrive, .deadline = h->t_arrive + (uint64_t)(g_timeout_s * 1e9)};
  kiln_mpi_poll p = {poll_idle, &pc};
  pthread_mutex_lock(&g_mu);
  h->rc = g_ops->arrive(&p, h->msg, sizeof h->msg); /* every rank is here, or the timeout */
  if (h->rc == 0) switch (c->kind) {
      case KILN_DIST_ALL_REDUCE: {
        int shared = 0;
        h->rc = g_ops->all_reduce(c->in, c->out, c->count, c->dtype, c->reduce, &shared, h->msg, sizeof h->msg);
        if (shared) kiln_counter_add("AllReduceSharedMemory", 1);
        break;
      }
      case KILN_DIST_BROADCAST:
        if (c->out != c->in && bytes) memcpy(c->out, c->in, bytes);
        h->rc = g_ops->broadcast(c->out, bytes, c->root, h->msg, sizeof h->msg);
        break;
      default: h->rc = gather_axis(c, h->msg, sizeof h->msg); break;
    }
  if (h->rc == 1) timeout_report(h, seq); /* does not return */
  pthread_mutex_unlock(&g_mu);
  __atomic_store_n(&g_busy, 0, __ATOMIC_RELAXED);
  h->t_done = kiln_now_ns();
  if (kiln_prof_on())
    kiln_prof_record(KILN_PROF_COLLECTIVE, c->name ? c->name : c->op, h->t_arrive, h->t_done, (int64_t)bytes, 0,
                     (double)bytes);
}

static void *comm_main(void *arg) {
  (void)arg;
  kiln_prof_thread_set("kiln collectives", -1);
  pthread_mutex_lock(&q_mu);
  for (;;) {
    while (!q_head && !q_stop) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 50000000; /* idle: answer status queries every 50 ms */
      if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
      if (pthread_cond_timedwait(&q_cv, &q_mu, &ts) == ETIMEDOUT && !q_head) {
        pthread_mutex_unlock(&q_mu);
        pthread_mutex_lock(&g_mu);
        serve();
        pthread_mutex_unlock(&g_mu);
        pthread_mutex_lock(&q_mu);
      }
    }
    kiln_dist_handle *h = q_head;
    if (!h) break; /* stopping, and nothing left */
    q_head = h->next;
    if (!q_head) q_tail = NULL;
    pthread_mutex_unlock(&q_mu);
    run_one(h);
    pthread_mutex_lock(&q_mu);
    h->done = 1;
    pthread_cond_broadcast(&d_cv);
  }
  pthread_mutex_unlock(&q_mu);
  return NULL;
}

static int comm_begin(void) {
  double v = 0;
  if (kiln_cfg_double(kiln_cfg()->dist_timeout, &v) && v > 0 && v < 1e7) g_timeout_s = v; /* else the default */
  if (pthread_create(&g_comm, NULL, comm_main, NULL) != 0) return -1;
  g_comm_on = 1;
  return 0;
}

static void comm_stop(void) {
  if (!g_comm_on) return;
  pthread_mutex_lock(&q_mu);
  q_stop = 1;
  pthread_cond_signal(&q_cv);
  pthread_mutex_unlock(&q_mu);
  pthread_join(g_comm, NULL);
  g_comm_on = 0;
}

/* ───────────── timeouts and stopped ranks ───────────── */

/* Collective number seq (h) did not complete in time: ask every other rank
 * where it is (each answers from its comm thread, idle or waiting), print
 * which have not arrived, and end the job: the ranks that did arrive are
 * blocked inside MPI, so an error status could not reach them. */
static void timeout_report(const kiln_dist_handle *h, int64_t seq) {
  char out[4096];
  size_t n = 0, cap = sizeof out;
  const char *name = h->call.name ? h->call.name : h->call.op;
  n += (size_t)snprintf(out, cap,
                        "kiln: rank %d of %d: collective #%lld, %s, did not complete within %g s (KILN_DIST_TIMEOUT) "
                        "at step %lld\n",
                        g_rank, g_world, (long long)seq, name, g_timeout_s,
                        (long long)__atomic_load_n(&g_step, __ATOMIC_RELAXED));
  for (int r = 0; r < g_world && n < cap; r++) {
    if (r == g_rank) continue;
    kiln_mpi_peer pr;
    poll_ctx pc = {.t0 = kiln_now_ns(), .deadline = kiln_now_ns() + 3000000000ull};
    kiln_mpi_poll p = {poll_idle, &pc};
    if (g_ops->query(r, &pr, &p) != 0)
      n += (size_t)snprintf(out + n, cap - n, "  rank %d did not answer (dead, or blocked outside kiln)\n", r);
    else if (pr.seq >= seq)
      n += (size_t)snprintf(out + n, cap - n, "  rank %d arrived (at step %lld, collective #%lld)\n", r,
                            (long long)pr.step, (long long)pr.seq);
    else
      n += (size_t)snprintf(out + n, cap - n,
                            "  rank %d has not arrived: it is at step %lld; its last collective (#%lld) was %s%s\n", r,
                            (long long)pr.step, (long long)pr.seq, pr.last, pr.busy ? " (still waiting in it)" : "");
  }
  if (n < cap) snprintf(out + n, cap - n, "kiln: rank %d: ending the job (MPI_Abort)\n", g_rank);
  fputs(out, stderr);
  fflush(stderr);
  kiln_fs_remove_pending_temps();
  g_ops->abort(1);
  _exit(1); /* MPI_Abort does not return; in case it does */
}

/* Async-signal-safe text for the SIGTERM handler. */
static size_t put_s(char *b, size_t n, size_t cap, const char *s) {
  while (s && *s && n + 1 < cap) b[n++] = *s++;
  return n;
}
static size_t put_i(char *b, size_t n, size_t cap, int64_t v) {
  char d[24];
  int k = 0;
  uint64_t u = v < 0 ? (uint64_t)-v : (uint64_t)v;
  do d[k++] = (char)('0' + u % 10); while ((u /= 10) && k < 23);
  if (v < 0 && n + 1 < cap) b[n++] = '-';
  while (k && n + 1 < cap) b[n++] = d[--k];
  return n;
}

/* The launcher stops the job (a rank died, a timeout elsewhere, the user):
 * say so in kiln's words, drop the temp file of a checkpoint being written
 * (the target itself is replaced only by a rename: never half-written), and
 * exit 128 + SIGTERM. */
static void on_term(int sig) {
  char b[640];
  size_t n = 0, cap = sizeof b;
  n = put_s(b, n, cap, "kiln: rank ");
  n = put_i(b, n, cap, g_rank);
  n = put_s(b, n, cap, " of ");
  n = put_i(b, n, cap, g_world);
  n = put_s(b, n, cap, ": stopped by SIGTERM at step ");
  n = put_i(b, n, cap, __atomic_load_n(&g_step, __ATOMIC_RELAXED));
  const char *last = __atomic_load_n(&g_last, __ATOMIC_RELAXED);
  if (__atomic_load_n(&g_busy, __ATOMIC_RELAXED)) n = put_s(b, n, cap, " while waiting in collective #");
  else n = put_s(b, n, cap, "; its last collective was #");
  n = put_i(b, n, cap, __atomic_load_n(&g_seq, __ATOMIC_RELAXED));
  n = put_s(b, n, cap, " (");
  n = put_s(b, n, cap, last ? last : "none");
  n = put_s(b, n, cap, "): another rank died or the job was stopped\n");
  ssize_t w = write(2, b, n);
  (void)w;
  kiln_fs_remove_pending_temps();
  _exit(128 + sig);
}

/* Only when the program has no SIGTERM handler of its own. */
static void term_install(void) {
  struct sigaction old, sa;
  if (sigaction(SIGTERM, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
}

/* ───────────── collectives ───────────── */

static void count_call(const kiln_dist_call *c, size_t bytes) {
  static const char *const cnt[3] = {"AllReduceCount", "BroadcastCount", "AllGatherCount"};
  static const char *const byt[3] = {"AllReduceBytes", "BroadcastBytes", "AllGatherBytes"};
  int k = c->kind == KILN_DIST_ALL_REDUCE ? 0 : c->kind == KILN_DIST_BROADCAST ? 1 : 2;
  kiln_counter_add(cnt[k], 1);
  kiln_counter_add(byt[k], (int64_t)bytes);
}

kiln_status kiln_dist_start(const kiln_dist_call *c, kiln_dist_handle **out, kiln_err *err) {
  *out = NULL;
  int rank, world;
  if (kiln_dist_world((kiln_loc){0}, &rank, &world) != KILN_OK)
    return kiln_err_set(err, g_status, "%s: %s", c->op, g_msg);
  if (world != c->world)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                        "%s: the graph was traced for a world of %d processes but runs in a world of %d", c->op,
                        c->world, world);
  size_t bytes = (size_t)c->count * c->elem;
  count_call(c, bytes);
  if (world == 1) { /* alone: the value itself */
    if (c->out != c->in && bytes) memmove(c->out, c->in, bytes);
    return KILN_OK;
  }
  kiln_dist_handle *h = calloc(1, sizeof *h);
  if (!h) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", c->op);
  h->call = *c;
  h->t_start = kiln_now_ns();
  pthread_mutex_lock(&q_mu);
  if (q_tail) q_tail->next = h;
  else q_head = h;
  q_tail = h;
  pthread_cond_signal(&q_cv);
  pthread_mutex_unlock(&q_mu);
  *out = h;
  return KILN_OK;
}

kiln_status kiln_dist_wait(kiln_dist_handle *h, kiln_err *err) {
  if (!h) return KILN_OK;
  uint64_t t0 = kiln_now_ns();
  pthread_mutex_lock(&q_mu);
  while (!h->done) pthread_cond_wait(&d_cv, &q_mu);
  pthread_mutex_unlock(&q_mu);
  uint64_t t1 = kiln_now_ns();
  kiln_metric_record("CollectiveTime", (double)(t1 - t0));
  kiln_metric_record("CollectiveFlightTime", (double)(h->t_done - h->t_start));
  kiln_status s = KILN_OK;
  if (h->rc != 0)
    s = kiln_err_set(err, KILN_ERR_INTERNAL, "%s of %lld elements on rank %d of %d: %s", h->call.op,
                     (long long)h->call.count, g_rank, g_world, h->msg);
  free(h);
  return s;
}

void *kiln_dist_shared_alloc(size_t bytes) {
  int rank, world;
  if (kiln_dist_world((kiln_loc){0}, &rank, &world) != KILN_OK || world < 2 || !g_ops) return NULL;
  /* KILN_DIST_SHM=0 asks for no shared memory on this rank: it still takes
   * part (the call is collective), with 0 bytes, and every all-reduce on
   * that memory then goes through MPI on every rank */
  const char *off = kiln_cfg()->dist_shm;
  if (off && strcmp(off, "0") == 0) bytes = 0;
  void *p = NULL;
  char msg[256] = "";
  pthread_mutex_lock(&g_mu);
  int rc = g_ops->shared_alloc(bytes, &p, msg, sizeof msg);
  pthread_mutex_unlock(&g_mu);
  if (rc != 0)
    kiln_log_printf(stderr, "kiln: rank %d: no shared memory for a step's buffers (%s): all-reduces through MPI\n",
                    g_rank, msg);
  return rc == 0 ? p : NULL;
}

kiln_status kiln_dist_collective(const kiln_dist_call *c, kiln_err *err) {
  kiln_dist_handle *h = NULL;
  kiln_status s = kiln_dist_start(c, &h, err);
  return s == KILN_OK ? kiln_dist_wait(h, err) : s;
}
