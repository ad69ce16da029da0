/* The machine's ceilings alone: FP32 FMA peak on 1 and N threads and STREAM
 * triad bandwidth on 1 and N threads (N = $KILN_NUM_THREADS or all cores).
 * docs/machine.md explains the method. */
#include "machine.h"

int main(void) {
  int n = kb_threads();
  char what[128];
  snprintf(what, sizeof what, "FMA peak, %s microbenchmark", kb_fma_isa());
  double p1 = kb_fma_peak_gflops(1, 0.3);
  kb_emit(&(kb_result){"machine_fma_peak_1t", p1, "GFLOP/s", what, p1, "-", 1});
  if (n > 1) {
    char name[64];
    snprintf(name, sizeof name, "machine_fma_peak_%dt", n);
    double pn = kb_fma_peak_gflops(n, 0.3);
    kb_emit(&(kb_result){name, pn, "GFLOP/s", what, pn, "-", 1});
  }
  size_t floats = (size_t)64 << 20;
  double t1 = kb_triad_gbps(1, floats, 5);
  kb_emit(&(kb_result){"machine_stream_triad_1t", t1, "GB/s", "STREAM triad, 64M floats", t1, "-", 1});
  if (n > 1) {
    char name[64];
    snprintf(name, sizeof name, "machine_stream_triad_%dt", n);
    double tn = kb_triad_gbps(n, floats, 5);
    kb_emit(&(kb_result){name, tn, "GB/s", "STREAM triad, 64M floats", tn, "-", 1});
  }
  return 0;
}
