/* The asynchronous loader. A background thread walks the same sequence of
 * batches as kiln_batcher (epoch by epoch, with an end-of-epoch marker in
 * between) and gathers each into a staging slot of a small ring. The
 * tracing thread's kiln_loader_next() takes the oldest ready slot and
 * uploads it with kiln_from_host: the tensor API stays on one thread, and
 * the background thread never calls into it.
 *
 * Staging buffers are ordinary host memory: on the CPU backend "device"
 * memory is host memory too and the upload is a memcpy, so page-locking
 * would buy nothing. A backend with a real device would allocate these
 * slots pinned. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"
#include "base/counters.h"
#include "base/spans.h"

typedef struct slot {
  float *x, *mask;
  int64_t *y;
  int64_t n_valid, epoch, index;
  int is_end; /* end-of-epoch marker, no data */
} slot;

struct kiln_loader {
  kiln_batch_plan plan;
  int nslots;
  slot *slots;
  /* Ring: [head, head + count) are ready, in order. Guarded by mu. */
  pthread_mutex_t mu;
  pthread_cond_t ready, space;
  int head, count;
  int stop;
  pthread_t thread;
  int started; /* thread is running */
  int64_t *perm; /* producer thread only */
};

static void *producer(void *arg) {
  kiln_loader *l = arg;
  kiln_prof_thread_set("kiln data loader", -1);
  int64_t nb = l->plan.num_batches;
  for (int64_t epoch = 0;; epoch++) {
    kiln_batch_plan_permutation(&l->plan, epoch, l->perm);
    for (int64_t i = 0; i <= nb; i++) { /* i == nb: the end-of-epoch marker */
      pthread_mutex_lock(&l->mu);
      while (l->count == l->nslots && !l->stop) pthread_cond_wait(&l->space, &l->mu);
      if (l->stop) {
        pthread_mutex_unlock(&l->mu);
        return NULL;
      }
      int at = (l->head + l->count) % l->nslots;
      pthread_mutex_unlock(&l->mu);
      /* The slot at `at` is not in the ready range, so the consumer does
       * not touch it: fill it without the lock. */
      slot *s = &l->slots[at];
      s->epoch = epoch;
      s->index = i;
      s->is_end = i == nb;
      if (!s->is_end) s->n_valid = kiln_batch_plan_gather(&l->plan, l->perm, i, s->x, s->y, s->mask);
      pthread_mutex_lock(&l->mu);
      l->count++;
      pthread_cond_signal(&l->ready);
      pthread_mutex_unlock(&l->mu);
    }
  }
}

void kiln_loader_destroy(kiln_loader *l) {
  if (!l) return;
  if (l->started) {
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->space);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
  }
  if (l->slots)
    for (int i = 0; i < l->nslots; i++) {
      free(l->slots[i].x);
      free(l->slots[i].y);
      free(l->slots[i].mask);
    }
  free(l->slots);
  free(l->perm);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->ready);
  pthread_cond_destroy(&l->space);
  free(l);
}

kiln_status kiln_loader_create_at(const kiln_dataset *ds, const kiln_batch_options *opts, kiln_loader **out,
                                  kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "loader");
  kiln_batch_plan plan;
  kiln_status s = kiln_batch_plan_init(&plan, ds, opts, "loader", loc);
  if (s != KILN_OK) return s;
  kiln_loader *l = calloc(1, sizeof *l);
  if (!l) goto oom;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->ready, NULL);
  pthread_cond_init(&l->space, NULL);
  l->plan = plan;
  /* prefetch batches ahead plus the one being uploaded. */
  int prefetch = opts->prefetch > 0 ? opts->prefetch : 2;
  if (prefetch > 64) prefetch = 64;
  l->nslots = prefetch + 1;
  l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
  l->perm = malloc(sizeof(int64_t) * (size_t)ds->n);
  if (!l->slots || !l->perm) goto oom;
  int64_t bs = plan.opts.batch_size, xs = bs * ds->ex_numel;
  for (int i = 0; i < l->nslots; i++) {
    l->slots[i].x = malloc(sizeof(float) * (size_t)(xs ? xs : 1));
    l->slots[i].y = malloc(sizeof(int64_t) * (size_t)bs);
    l->slots[i].mask = malloc(sizeof(float) * (size_t)bs);
    if (!l->slots[i].x || !l->slots[i].y || !l->slots[i].mask) goto oom;
  }
  if (pthread_create(&l->thread, NULL, producer, l) != 0) {
    kiln_loader_destroy(l);
    return kiln_error(KILN_ERR_INTERNAL, loc, "loader: cannot start the background thread");
  }
  l->started = 1;
  *out = l;
  return KILN_OK;
oom:
  kiln_loader_destroy(l);
  return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "loader: out of memory");
}

int64_t kiln_loader_num_batches(const kiln_loader *l) { return l ? l->plan.num_batches : 0; }

int kiln_loader_next_at(kiln_loader *l, kiln_batch *out, kiln_loc loc) {
  if (!l || !out) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "loader_next: %s is NULL", l ? "out" : "loader");
    return -1;
  }
  memset(out, 0, sizeof *out);
  uint64_t t0 = kiln_now_ns();
  pthread_mutex_lock(&l->mu);
  while (l->count == 0) pthread_cond_wait(&l->ready, &l->mu);
  slot *s = &l->slots[l->head];
  pthread_mutex_unlock(&l->mu);
  uint64_t t1 = kiln_now_ns();
  kiln_metric_record("LoaderWaitTime", (double)(t1 - t0));
  /* the summary attributes device idle time overlapping this to the input pipeline */
  if (kiln_prof_on()) kiln_prof_record(KILN_PROF_WAIT_INPUT, "wait for input (data loader)", t0, t1, -1, 0, 0);
  /* The head slot stays in the ready range while we read it, so the
   * producer cannot reuse it until we advance head below. */
  int ret = 0;
  if (!s->is_end) {
    int64_t bs = l->plan.opts.batch_size;
    out->x = kiln_from_host_at(s->x, KILN_F32, l->plan.rank, l->plan.xshape, loc);
    out->y = kiln_from_host_at(s->y, KILN_I64, 1, &bs, loc);
    out->mask = kiln_from_host_at(s->mask, KILN_F32, 1, &bs, loc);
    out->n_valid = s->n_valid;
    out->epoch = s->epoch;
    out->index = s->index;
    ret = kiln_is_valid(out->x) && kiln_is_valid(out->y) && kiln_is_valid(out->mask) ? 1 : -1;
    kiln_counter_add("LoaderBatches", 1);
  }
  pthread_mutex_lock(&l->mu);
  l->head = (l->head + 1) % l->nslots;
  l->count--;
  pthread_cond_signal(&l->space);
  pthread_mutex_unlock(&l->mu);
  return ret;
}
