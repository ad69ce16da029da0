/* A cached step: host time of kiln_mark_step() for a 1,000-node graph that
 * is already compiled (hash, cache lookup, launch), median over many steps.
 * Tracing and execution are outside the timed region. Target <= 20 us.
 *
 * Baseline (same run): the time to trace the same 1,000 nodes, i.e. what a
 * step costs the host anyway; the ratio says what the step marker adds. */
#include "bench_util.h"

enum { NODES = 1000, STEPS = 300 };

int main(void) {
  KB_CHECK(kiln_init(NULL));
  int64_t shape[1] = {16};
  float init[16];
  for (int i = 0; i < 16; i++) init[i] = (float)i / 16.0f;
  kiln_tensor x = kiln_param(kiln_from_host(init, KILN_F32, 1, shape));
  static double mark[STEPS], trace[STEPS];
  for (int s = 0; s < STEPS + 3; s++) {
    double t0 = kb_now_s();
    kiln_tensor h = x;
    for (int i = 0; i < NODES / 4; i++) {
      h = kiln_mul_c(h, 0.9);
      h = kiln_add_c(h, 0.05);
      h = kiln_tanh(h);
      h = kiln_maximum_c(h, -0.5);
    }
    kiln_assign(x, h);
    double t1 = kb_now_s();
    KB_CHECK(kiln_mark_step());
    double t2 = kb_now_s();
    KB_CHECK(kiln_wait()); /* execution is not part of the figure */
    if (s >= 3) {           /* the first steps compile */
      trace[s - 3] = t1 - t0;
      mark[s - 3] = t2 - t1;
    }
  }
  float out[16];
  KB_CHECK(kiln_to_host(x, out, sizeof out));
  for (int i = 0; i < 16; i++)
    if (!(out[i] >= -0.5f && out[i] <= 1.0f)) {
      fprintf(stderr, "step: unexpected value %g\n", (double)out[i]);
      return 1;
    }
  double m = kb_median(mark, STEPS) * 1e6, t = kb_median(trace, STEPS) * 1e6;
  kb_emit(&(kb_result){"cached_step_1000_nodes_us", m, "us", "tracing the same 1000 nodes (same run)", t,
                       "<= 20 us", m <= 20.0});
  kiln_shutdown();
  return 0;
}
