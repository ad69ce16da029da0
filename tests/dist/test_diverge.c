/* Ranks that disagree get an error, not a hang (docs/distributed.md, "When
 * ranks trace different graphs"), and kiln's output names the rank. Run by
 * run.sh under `mpirun -np 2` (and -np 4), bounded by `timeout`:
 *
 *  - agreement: graphs that differ only in the value of a constant (x *
 *    (rank + 2)) are the same program: no error, the sum is right, and the ranks
 *    compare a graph once (RankAgreementCheck), not at every step;
 *  - divergence: rank 1 traces one more op (a neg, at a line this file
 *    knows) before its all-reduce; every rank's step is refused with an
 *    error naming the ranks, both graph keys, the added node and this
 *    file's line; the ranks then go on with a common graph and its
 *    collective completes (nothing was left in flight);
 *  - output: with KILN_DEBUG=1 (set by run.sh), every kiln line on stderr
 *    starts with "[rank R] ", and the KILN_METRICS=1 report at exit is headed
 *    "kiln metrics (rank R of N)" (checked by an atexit handler that runs
 *    after kiln's, on the captured stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "kt.h"

static int R, W;
static char g_err_path[256];
static int g_real_stderr = -1;

static kiln_tensor ones4(void) { return kiln_ones(KILN_F32, 1, (int64_t[]){4}); }

KT_TEST(world) {
  KT_CHECK_MSG(kiln_dist_init() == KILN_OK, "kiln_dist_init: %s", kiln_last_error());
  R = kiln_dist_rank();
  W = kiln_dist_world_size();
  const char *ws = getenv("KILN_TEST_WORLD");
  if (ws) KT_EQ_INT(W, atoi(ws));
  KT_CHECK_MSG(W >= 2, "run this test under mpirun -np 2 or more (world %d)", W);
}

KT_TEST(rank_dependent_constants_agree) {
  int64_t before = kiln_counter_value("RankAgreementCheck");
  for (int step = 0; step < 3; step++) {
    const float x[4] = {1, 2, 3, 4};
    kiln_tensor in = kiln_from_host(x, KILN_F32, 1, (int64_t[]){4});
    kiln_tensor y = kiln_keep(kiln_all_reduce(kiln_mul_c(in, (double)(R + 2)), KILN_REDUCE_SUM));
    KT_CHECK_MSG(kiln_mark_step() == KILN_OK, "step %d: %s", step, kiln_last_error());
    float v[4];
    KT_CHECK(kiln_to_host(y, v, sizeof v) == KILN_OK);
    double k = 2.0 * W + W * (W - 1) / 2.0; /* sum over r of (r + 2) */
    for (int i = 0; i < 4; i++) KT_NEAR(v[i], (i + 1) * k, 1e-4);
    kiln_release(y);
  }
  KT_EQ_INT(kiln_counter_value("RankAgreementCheck") - before, 1);
}

static int g_neg_line;

/* rank 1 negates its input first: one more node than rank 0's graph */
static kiln_tensor traced_input(void) {
  kiln_tensor x = kiln_mul_c(ones4(), 2.0);
  g_neg_line = __LINE__ + 1;
  if (R == 1) x = kiln_neg(x);
  return x;
}

KT_TEST(divergent_ranks_get_an_error) {
  kiln_clear_error();
  kiln_tensor y = kiln_keep(kiln_all_reduce(traced_input(), KILN_REDUCE_SUM));
  kiln_status s = kiln_mark_step();
  KT_CHECK_MSG(s != KILN_OK, "rank %d: the divergent step ran", R);
  const char *e = kiln_last_error();
  if (R == 0) fprintf(stderr, "the error (rank 0):\n%s\n", e);
  KT_STR_CONTAINS(e, "rank divergence");
  KT_STR_CONTAINS(e, W == 2 ? "on rank 0;" : "on ranks 0,2");
  KT_STR_CONTAINS(e, "on rank 1)");
  KT_STR_CONTAINS(e, "rank 1's graph against rank 0's");
  KT_STR_CONTAINS(e, "1 node added");
  char where[64];
  snprintf(where, sizeof where, "+ neg at test_diverge.c:%d", g_neg_line);
  KT_STR_CONTAINS(e, where);
  /* two distinct keys are named */
  const char *g1 = strstr(e, "graph "), *g2 = g1 ? strstr(g1 + 6, "graph ") : NULL;
  KT_CHECK_MSG(g1 && g2 && strncmp(g1, g2, 22) != 0, "two graph keys in: %s", e);
  kiln_release(y);
  /* the ranks go on together: a common graph's collective completes */
  kiln_clear_error();
  kiln_tensor z = kiln_keep(kiln_all_reduce(kiln_mul_c(ones4(), 3.0), KILN_REDUCE_SUM));
  KT_CHECK_MSG(kiln_mark_step() == KILN_OK, "after the divergence: %s", kiln_last_error());
  float v[4];
  KT_CHECK(kiln_to_host(z, v, sizeof v) == KILN_OK);
  KT_NEAR(v[0], 3.0 * W, 1e-5);
  kiln_release(z);
}

/* After kiln's own exit handlers (registered later, run earlier): the
 * captured stderr holds the prefixed KILN_DEBUG lines and the metrics
 * header. A failure exits non-zero, which mpirun reports. */
static void check_captured_output(void) {
  fflush(stderr);
  FILE *f = fopen(g_err_path, "r");
  char line[4096], pre[32], head[64];
  snprintf(pre, sizeof pre, "[rank %d] kiln:", R);
  snprintf(head, sizeof head, "kiln metrics (rank %d of %d)", R, W);
  int prefixed = 0, bare = 0, header = 0;
  while (f && fgets(line, sizeof line, f)) {
    prefixed += strncmp(line, pre, strlen(pre)) == 0;
    bare += strncmp(line, "kiln:", 5) == 0;
    header += strstr(line, head) != NULL;
    if (g_real_stderr >= 0 && write(g_real_stderr, line, strlen(line)) < 0) break;
  }
  if (f) fclose(f);
  unlink(g_err_path);
  if (prefixed && !bare && header) return;
  char msg[512];
  int n = snprintf(msg, sizeof msg, "  FAIL rank %d: stderr had %d lines \"%s\", %d unprefixed kiln lines, %d \"%s\"\n",
                   R, prefixed, pre, bare, header, head);
  if (g_real_stderr >= 0 && write(g_real_stderr, msg, (size_t)n) < 0) _exit(3);
  _exit(3);
}

KT_TEST(capture_stderr) {
  /* before kiln_init registers its exit handlers: this one runs after them */
  snprintf(g_err_path, sizeof g_err_path, "/tmp/kiln-test-diverge-%d.err", (int)getpid());
  g_real_stderr = dup(2);
  KT_CHECK(freopen(g_err_path, "w", stderr) != NULL);
  setvbuf(stderr, NULL, _IONBF, 0);
  atexit(check_captured_output);
}

KT_MAIN(KT_CASE(capture_stderr), KT_CASE(world), KT_CASE(rank_dependent_constants_agree),
        KT_CASE(divergent_ranks_get_an_error))
