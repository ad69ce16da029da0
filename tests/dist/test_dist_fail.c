/* The distributed failure cases (docs/distributed.md, "Overlap, timeouts
 * and dead ranks"), run by fail.sh under `mpirun -np 2`, which checks what
 * the job prints and how it ends. Not a KT test: every case ends the job.
 *
 *   test_dist_fail timeout DIR: step 0 all-reduces on both ranks; at step 1
 *     rank 1 skips the all-reduce rank 0 runs and sleeps. With
 *     KILN_DIST_TIMEOUT=2 rank 0 must report rank 1 as not arrived, with its
 *     step and the line of its last collective, and end the job.
 *   test_dist_fail kill DIR: both ranks train; rank 0 saves a checkpoint
 *     DIR/ckpt.safetensors at step 1; at step 2 rank 1 kills itself
 *     (SIGKILL) while rank 0 waits in the all-reduce inside a second save of
 *     the checkpoint. mpirun stops rank 0 (SIGTERM): it must say so, and the
 *     checkpoint must still be step 1's complete file, with no temp file.
 *
 * Each rank prints "expect: ..." lines that fail.sh looks for in rank 0's
 * message. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/kiln.h"

static int R;
static int g_line; /* the line of the last all_reduce traced */

static kiln_tensor reduced(kiln_tensor x) {
  g_line = __LINE__ + 1;
  return kiln_all_reduce(x, KILN_REDUCE_SUM);
}

static int die(const char *what) {
  fprintf(stderr, "rank %d: %s: %s\n", R, what, kiln_last_error());
  return 2;
}

static int timeout_case(void) {
  const int64_t sh[1] = {4};
  float v[4] = {1, 2, 3, 4}, got[4];
  if (kiln_to_host(reduced(kiln_from_host(v, KILN_F32, 1, sh)), got, sizeof got) != KILN_OK) return die("step 0");
  kiln_mark_step();
  if (R == 1) { /* skips the collective of step 1 */
    /* collectives are numbered from the first, the rank-divergence check's
     * exchanges included: the number is not part of the expectation */
    printf("expect: rank 1 has not arrived: it is at step 1; its last collective (#\n");
    printf("expect: ) was all_reduce f32 [4] at %s:%d\n", __FILE__, g_line);
    fflush(stdout);
    sleep(60);
    return 3; /* never: rank 0 ends the job first */
  }
  kiln_to_host(reduced(kiln_from_host(v, KILN_F32, 1, sh)), got, sizeof got);
  return 4; /* never: the timeout ends the job */
}

static int kill_case(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
  const int64_t sh[1] = {1024};
  kiln_tensor w = kiln_param(kiln_zeros(KILN_F32, 1, sh));
  const char *names[1] = {"w"};
  for (int step = 1; step <= 2; step++) {
    kiln_tensor g = reduced(kiln_full_at(KILN_F32, 1, sh, (double)(R + 1), KILN_HERE));
    kiln_assign(w, kiln_add(w, g)); /* w = step * (1 + 2) */
    if (step == 2 && R == 1) {
      printf("expect: kiln: rank 0 of 2: stopped by SIGTERM at step 1 while waiting in collective #\n");
      fflush(stdout);
      raise(SIGKILL);
    }
    if (R == 0 && kiln_save_safetensors(path, 1, names, &w, NULL) != KILN_OK) return die("save");
    static float wv[1024];
    if (R == 1 && kiln_to_host(w, wv, sizeof wv) != KILN_OK) return die("read"); /* step 1 done here too */
    kiln_mark_step();
  }
  return 5; /* never: rank 1 died in step 2 */
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  if (kiln_dist_init() != KILN_OK || kiln_init(&(kiln_options){.backend = "cpu"}) != KILN_OK) return die("init");
  R = kiln_dist_rank();
  int rc = strcmp(argv[1], "timeout") == 0 ? timeout_case() : kill_case(argv[2]);
  kiln_shutdown();
  return rc;
}
