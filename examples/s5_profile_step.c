/* Scenario S5 (docs/profiling.md): profile a training step from outside.
 *
 * The program trains a small model on synthetic Fashion-MNIST-shaped data
 * and annotates each step the way the seed's PyTorch/XLA program did:
 * a step region "Training_Step" (kiln_step_trace) holding "Forward",
 * "Backward" and "FINISH_UPDATE" (KILN_TRACE). It starts kiln's profiler
 * server, prints the port, and trains for --seconds.
 *
 * While it runs, capture from another terminal:
 *   kiln profile capture --addr localhost:PORT --duration-ms 500 --logdir logs
 *   kiln profile summary logs
 * or from TensorBoard ("Capture Profile", address localhost:PORT).
 *
 * With --self-capture the program does both itself: a second thread asks
 * the server for a capture over gRPC (the same client `kiln profile capture`
 * uses), and when training ends the program prints kiln's summary of it.
 *
 *   s5_profile_step [--port P] [--seconds N] [--self-capture] [--capture-ms MS]
 *                   [--logdir DIR] [--model mlp|cnn|transformer] [--batch B]
 *
 * Exit status: 0 done, 1 a kiln call failed (message on stderr), 2 bad
 * command line. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/models.h>
#include <kiln/nn.h>
#include <kiln/optim.h>
#include <kiln/profiler.h>
#include <kiln/profiler_server.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PARAMS 64

typedef struct s5_args {
  int port, seconds, self_capture, capture_ms, batch;
  const char *logdir, *model;
} s5_args;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: s5_profile_step [--port P] [--seconds N] [--self-capture] [--capture-ms MS]\n"
          "                       [--logdir DIR] [--model mlp|cnn|transformer] [--batch B]\n"
          "  --port P         profiler server port (default 0: any free port, printed)\n"
          "  --seconds N      train for N seconds (default 10)\n"
          "  --self-capture   capture MS milliseconds of our own training over gRPC, then summarize it\n"
          "  --capture-ms MS  length of that capture (default 500)\n"
          "  --logdir DIR     where captures go (default logs)\n"
          "  --model M        model to train (default mlp); --batch B: batch size (default 64)\n"
          "Bind address: 127.0.0.1, or $KILN_PROFILER_BIND.\n");
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (!end || end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static int parse_args(int argc, char **argv, s5_args *a) {
  *a = (s5_args){.port = 0, .seconds = 10, .capture_ms = 500, .batch = 64, .logdir = "logs", .model = "mlp"};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(o, "--self-capture")) {
      a->self_capture = 1;
      continue;
    } else if (!v) {
      bad = 1;
    } else if (!strcmp(o, "--port")) {
      bad = parse_int(v, 0, 65535, &a->port);
    } else if (!strcmp(o, "--seconds")) {
      bad = parse_int(v, 1, 86400, &a->seconds);
    } else if (!strcmp(o, "--capture-ms")) {
      bad = parse_int(v, 1, (int)KILN_PROFILER_MAX_DURATION_MS, &a->capture_ms);
    } else if (!strcmp(o, "--batch")) {
      bad = parse_int(v, 1, 4096, &a->batch);
    } else if (!strcmp(o, "--logdir")) {
      a->logdir = v;
    } else if (!strcmp(o, "--model")) {
      a->model = v;
      bad = kiln_model_kind_parse(v) < 0;
    } else {
      fprintf(stderr, "s5_profile_step: unknown option %s\n\n", o);
      usage(stderr);
      return -1;
    }
    if (bad) {
      fprintf(stderr, "s5_profile_step: bad or missing value for %s\n\n", o);
      usage(stderr);
      return -1;
    }
    i++;
  }
  return 0;
}

/* The self-capture thread: wait until a few steps have run (the first ones
 * compile the step's kernels), then ask our own server for a capture,
 * exactly as `kiln profile capture` does. */
typedef struct s5_capture {
  char addr[64];
  const char *logdir;
  uint32_t duration_ms;
  kiln_status status;
  char run[4096];
  char error[2048];
  atomic_int done;
  atomic_llong steps; /* steps finished by the training loop */
} s5_capture;

static void *capture_thread(void *arg) {
  s5_capture *c = arg;
  struct timespec tick = {0, 10 * 1000 * 1000};
  while (atomic_load(&c->steps) < 3) nanosleep(&tick, NULL);
  fprintf(stderr, "s5: capturing %u ms from %s\n", c->duration_ms, c->addr);
  c->status = kiln_profiler_client_capture(c->addr, c->duration_ms, c->logdir, c->run, sizeof c->run);
  if (c->status != KILN_OK) snprintf(c->error, sizeof c->error, "%s", kiln_last_error());
  atomic_store(&c->done, 1);
  return NULL;
}

int main(int argc, char **argv) {
  /* Line-buffered even into a pipe: progress and errors stay in order. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  s5_args a;
  int pr = parse_args(argc, argv, &a);
  if (pr) return pr > 0 ? 0 : 2;

  kiln_model *m = NULL;
  kiln_model_create((kiln_model_kind)kiln_model_kind_parse(a.model), 10, 1, &m);
  kiln_tensor params[MAX_PARAMS];
  int np = m ? kiln_model_params(m, NULL, params, MAX_PARAMS) : 0;
  for (int i = 0; i < np; i++) kiln_requires_grad(params[i]);
  kiln_adamw_opts ao = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim *opt = NULL;
  if (m) kiln_optim_create_adamw(np, params, &ao, &opt);
  if (!opt || kiln_mark_step() != KILN_OK) {
    fprintf(stderr, "s5_profile_step: %s\n", kiln_last_error());
    return 1;
  }
  if (kiln_profiler_server_start(a.port) != KILN_OK) {
    fprintf(stderr, "s5_profile_step: %s\n", kiln_last_error());
    return 1;
  }
  int port = kiln_profiler_server_port();
  printf("profiler server listening on port %d (capture: kiln profile capture --addr localhost:%d "
         "--duration-ms 500 --logdir %s)\n",
         port, port, a.logdir);
  fflush(stdout);

  s5_capture cap = {.logdir = a.logdir, .duration_ms = (uint32_t)a.capture_ms};
  pthread_t th;
  if (a.self_capture) {
    snprintf(cap.addr, sizeof cap.addr, "127.0.0.1:%d", port);
    pthread_create(&th, NULL, capture_thread, &cap);
  }

  /* Synthetic data: images from the step's seed; labels arrive from the
   * host each step (as a data loader's would: a transfer per step). */
  int64_t xshape[3] = {a.batch, 28, 28};
  int64_t *labels = malloc(sizeof *labels * (size_t)a.batch);
  uint64_t rng = 88172645463325252ull;
  double t0 = now_s(), t_end = t0 + a.seconds;
  int64_t step = 0;
  int rc = 0;
  kiln_tensor prev; /* the previous step's loss, read one step late */
  int have_prev = 0;
  while (now_s() < t_end || (a.self_capture && !atomic_load(&cap.done))) {
    kiln_step_trace("Training_Step", step);
    for (int i = 0; i < a.batch; i++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      labels[i] = (int64_t)(rng % 10);
    }
    kiln_tensor loss;
    KILN_TRACE("Forward") {
      kiln_tensor x = kiln_rand_normal(KILN_F32, 3, xshape, 1000 + (uint64_t)step);
      kiln_tensor y = kiln_from_host(labels, KILN_I64, 1, (int64_t[]){a.batch});
      loss = kiln_cross_entropy(kiln_model_forward(m, x, 1, (uint64_t)step), y, -100, 0.0);
      kiln_keep(loss);
    }
    KILN_TRACE("Backward") { kiln_backward(loss); }
    KILN_TRACE("FINISH_UPDATE") {
      kiln_optim_step(opt);
      for (int i = 0; i < np; i++) kiln_zero_grad(params[i]);
      if (kiln_mark_step() != KILN_OK) rc = 1;
    }
    /* Read the previous step's loss, not this one's: the host waits for
     * step N-1 while the device already has step N queued, so it never runs
     * idle, and the host stays at most one step ahead (reading only every
     * 50 steps lets it queue 50 steps, then block for all of them). */
    float l = 0;
    if (rc == 0 && have_prev) {
      kiln_to_host(prev, &l, sizeof l);
      if ((step - 1) % 50 == 0) printf("step %lld loss %.4f\n", (long long)(step - 1), l);
    }
    if (have_prev) kiln_release(prev);
    prev = loss;
    have_prev = 1;
    if (rc) break;
    step++;
    atomic_store(&cap.steps, step);
  }
  kiln_step_trace_end();
  if (have_prev) kiln_release(prev);
  double secs = now_s() - t0;
  if (rc) {
    fprintf(stderr, "s5_profile_step: %s\n", kiln_last_error());
    atomic_store(&cap.steps, 1 << 30); /* let a waiting capture go ahead */
  }
  printf("trained %lld steps in %.1f s (%.2f ms/step)\n", (long long)step, secs, step ? secs * 1e3 / step : 0.0);

  if (a.self_capture) {
    pthread_join(th, NULL);
    if (cap.status != KILN_OK) {
      fprintf(stderr, "s5_profile_step: capture failed: %s\n", cap.error);
      rc = 1;
    } else {
      printf("capture written to %s\n\n", cap.run);
      if (kiln_profiler_summary(cap.run, stdout, NULL) != KILN_OK) {
        fprintf(stderr, "s5_profile_step: summary of %s failed: %s\n", cap.run, kiln_last_error());
        rc = 1;
      }
    }
  }
  kiln_profiler_server_stop();
  free(labels);
  kiln_optim_destroy(opt);
  kiln_model_destroy(m);
  kiln_shutdown();
  return rc;
}
