#include "runtime/executor.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/counters.h"
#include "base/spans.h"

struct kiln_executor {
  kiln_backend *backend;
  int synchronous;
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv_work; /* worker waits for jobs */
  pthread_cond_t cv_done; /* waiters wait for completions */
  kiln_job *head, *tail;
  uint64_t submitted; /* guarded by mu */
  uint64_t completed; /* guarded by mu */
  int stop;
};

kiln_job *kiln_job_alloc(int32_t n_inputs, int32_t n_outputs) {
  size_t n = (size_t)n_inputs + (size_t)n_outputs;
  kiln_job *j = calloc(1, sizeof *j + n * (sizeof(kiln_buf *) + sizeof(void *)));
  if (!j) return NULL;
  j->n_inputs = n_inputs;
  j->n_outputs = n_outputs;
  j->bufs = (kiln_buf **)(j + 1);
  j->ptrs = (void **)(j->bufs + n);
  return j;
}

static void run_job(kiln_executor *ex, kiln_job *j) {
  uint64_t t0 = kiln_now_ns();
  kiln_err err = {0};
  kiln_status s = ex->backend->vt->execute(ex->backend, j->exe, j->ptrs, j->ptrs + j->n_inputs, &err);
  if (s != KILN_OK) {
    /* a fault of the program's data (an out-of-range index) is reported at
     * the user's line that traced the op, with the line that launched it */
    kiln_loc at;
    const kiln_backend_vtable *vt = ex->backend->vt;
    if (vt->last_error_loc && vt->last_error_loc(ex->backend, j->exe, &at) && at.file)
      kiln_error(s, at, "%s (in the graph launched at %s:%d)", err.msg, j->loc.file ? j->loc.file : "?", j->loc.line);
    else
      kiln_error(s, j->loc, "while executing the graph: %s", err.msg);
  }
  uint64_t t1 = kiln_now_ns();
  kiln_metric_record("ExecuteTime", (double)(t1 - t0));
  if (kiln_prof_on()) kiln_prof_record(KILN_PROF_EXECUTE, "execute", t0, t1, -1, 0, 0);
  kiln_counter_add("Execute", 1);
  for (int32_t i = 0; i < j->n_inputs + j->n_outputs; i++) kiln_buf_unpin(j->bufs[i]);
}

static void *worker(void *arg) {
  kiln_executor *ex = arg;
  /* lane 0: this thread runs its share of every parallel kernel */
  kiln_prof_thread_set("kiln executor", 0);
  pthread_mutex_lock(&ex->mu);
  for (;;) {
    while (!ex->head && !ex->stop) pthread_cond_wait(&ex->cv_work, &ex->mu);
    if (!ex->head && ex->stop) break;
    kiln_job *j = ex->head;
    ex->head = j->next;
    if (!ex->head) ex->tail = NULL;
    pthread_mutex_unlock(&ex->mu);
    run_job(ex, j);
    uint64_t seq = j->seq;
    free(j);
    pthread_mutex_lock(&ex->mu);
    ex->completed = seq;
    pthread_cond_broadcast(&ex->cv_done);
  }
  pthread_mutex_unlock(&ex->mu);
  return NULL;
}

kiln_status kiln_executor_create(kiln_backend *b, int synchronous, kiln_executor **out) {
  *out = NULL;
  kiln_executor *ex = calloc(1, sizeof *ex);
  if (!ex) return KILN_ERR_OUT_OF_MEMORY;
  ex->backend = b;
  ex->synchronous = synchronous;
  pthread_mutex_init(&ex->mu, NULL);
  pthread_cond_init(&ex->cv_work, NULL);
  pthread_cond_init(&ex->cv_done, NULL);
  if (!synchronous) {
    if (pthread_create(&ex->thread, NULL, worker, ex)) {
      free(ex);
      return KILN_ERR_INTERNAL;
    }
    ex->started = 1;
  }
  *out = ex;
  return KILN_OK;
}

uint64_t kiln_executor_submit(kiln_executor *ex, kiln_job *job) {
  pthread_mutex_lock(&ex->mu);
  job->seq = ++ex->submitted;
  uint64_t seq = job->seq;
  if (ex->synchronous) {
    pthread_mutex_unlock(&ex->mu);
    run_job(ex, job);
    free(job);
    pthread_mutex_lock(&ex->mu);
    ex->completed = seq;
    pthread_mutex_unlock(&ex->mu);
    return seq;
  }
  job->next = NULL;
  if (ex->tail)
    ex->tail->next = job;
  else
    ex->head = job;
  ex->tail = job;
  pthread_cond_signal(&ex->cv_work);
  pthread_mutex_unlock(&ex->mu);
  return seq;
}

void kiln_executor_wait(kiln_executor *ex, uint64_t seq) {
  if (!ex || !seq) return;
  pthread_mutex_lock(&ex->mu);
  uint64_t t0 = ex->completed < seq ? kiln_prof_span_begin() : 0; /* only real waits become events */
  while (ex->completed < seq) pthread_cond_wait(&ex->cv_done, &ex->mu);
  pthread_mutex_unlock(&ex->mu);
  kiln_prof_span_end(t0, KILN_PROF_WAIT_DEVICE, "wait for device", -1);
}

void kiln_executor_wait_all(kiln_executor *ex) {
  if (!ex) return;
  pthread_mutex_lock(&ex->mu);
  uint64_t seq = ex->submitted;
  pthread_mutex_unlock(&ex->mu);
  kiln_executor_wait(ex, seq);
}

uint64_t kiln_executor_last_seq(const kiln_executor *ex) {
  return __atomic_load_n(&ex->submitted, __ATOMIC_ACQUIRE);
}

void kiln_executor_destroy(kiln_executor *ex) {
  if (!ex) return;
  if (ex->started) {
    pthread_mutex_lock(&ex->mu);
    ex->stop = 1;
    pthread_cond_signal(&ex->cv_work);
    pthread_mutex_unlock(&ex->mu);
    pthread_join(ex->thread, NULL);
  }
  pthread_mutex_destroy(&ex->mu);
  pthread_cond_destroy(&ex->cv_work);
  pthread_cond_destroy(&ex->cv_done);
  free(ex);
}
