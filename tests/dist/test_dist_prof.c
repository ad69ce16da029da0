/* A distributed job to profile (tests/dist/test_dist_prof.sh): every rank
 * serves profiles (kiln_profiler_server_start(0): a free port each,
 * printed as "rank R port P"), then trains steps "Training_Step" of a small
 * matrix product followed by an all-reduce of 1024 floats, until the file
 * STOP exists (at most 60 s). Rank SLOW sleeps 30 ms inside the annotation
 * "slow_input" before the all-reduce of every step, so the other ranks wait
 * for it there: the straggler the summary must name.
 *
 * The collectives in the capture are the executor's own (the communication
 * thread records each from this rank's arrival to its completion).
 *
 * Usage: test_dist_prof STOP SLOW */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "kiln/dist.h"
#include "kiln/kiln.h"
#include "kiln/profiler.h"
#include "kiln/profiler_server.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_dist_prof STOP SLOW\n");
    return 2;
  }
  const char *stop = argv[1];
  int slow = atoi(argv[2]);
  if (kiln_init(NULL) != KILN_OK || kiln_dist_init() != KILN_OK || kiln_profiler_server_start(0) != KILN_OK) {
    fprintf(stderr, "test_dist_prof: %s\n", kiln_last_error());
    return 1;
  }
  int rank = kiln_dist_rank();
  printf("rank %d port %d\n", rank, kiln_profiler_server_port());
  fflush(stdout);
  int64_t shape[2] = {32, 32};
  double t_end = now_s() + 60;
  /* the ranks stop together: each sees the STOP file at its own time, and a
   * rank that left the loop alone would leave the other waiting in an
   * all-reduce (a hang until KILN_DIST_TIMEOUT); the decision is a
   * collective of its own, after each step's */
  for (int64_t step = 0;; step++) {
    kiln_step_trace("Training_Step", step);
    kiln_tensor a = kiln_rand_normal(KILN_F32, 2, shape, 1 + (uint64_t)step);
    kiln_tensor p = kiln_matmul(a, a);
    if (rank == slow) KILN_TRACE("slow_input") { usleep(30000); }
    kiln_tensor s = kiln_all_reduce(kiln_reshape(p, 1, (int64_t[]){1024}), KILN_REDUCE_SUM);
    float v[1024];
    if (kiln_to_host(s, v, sizeof v) != KILN_OK) {
      fprintf(stderr, "test_dist_prof: rank %d: %s\n", rank, kiln_last_error());
      return 1;
    }
    float f = now_s() >= t_end || access(stop, F_OK) == 0;
    kiln_tensor agreed = kiln_all_reduce(kiln_from_host(&f, KILN_F32, 0, NULL), KILN_REDUCE_MAX);
    if (kiln_item_f64(agreed) > 0) break;
    if (kiln_mark_step() != KILN_OK) return 1;
  }
  kiln_step_trace_end();
  kiln_shutdown();
  return 0;
}
