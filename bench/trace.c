/* Tracing cost: nanoseconds per elementwise op recorded through the public
 * API. Traces 1,000 steps of 1,000 ops on small tensors (1M ops), timing
 * only the op calls (not kiln_mark_step or execution). Target <= 100 ns/op.
 *
 * Baseline: PyTorch eager dispatch of `x = x + 1` on a 1-element tensor,
 * measured by bench/run.sh in the same run when /usr/bin/python3 has torch
 * (passed in $KILN_BENCH_TORCH_NS); otherwise the figure from
 * /work/shared/REFERENCE.md (2.8 us/op), labelled as such. */
#include "bench_util.h"

enum { STEPS = 1000, OPS_PER_STEP = 1000 };

int main(void) {
  KB_CHECK(kiln_init(NULL));
  int64_t shape[1] = {8};
  float init[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  kiln_tensor x = kiln_param(kiln_from_host(init, KILN_F32, 1, shape));
  kiln_tensor y = kiln_param(kiln_from_host(init, KILN_F32, 1, shape));
  double traced_s = 0;
  long ops = 0;
  for (int s = 0; s < STEPS; s++) {
    double t0 = kb_now_s();
    kiln_tensor h = x;
    /* 4 ops per round: a mix of tensor-tensor, tensor-constant and unary ops. */
    for (int i = 0; i < OPS_PER_STEP / 4; i++) {
      h = kiln_mul(h, y);
      h = kiln_add_c(h, 0.5);
      h = kiln_tanh(h);
      h = kiln_maximum(h, x); /* keeps x in [x0, 1): no overflow, no denormals */
    }
    kiln_assign(x, h);
    traced_s += kb_now_s() - t0;
    ops += OPS_PER_STEP + 1;
    KB_CHECK(kiln_mark_step());
  }
  KB_CHECK(kiln_wait());
  float out[8];
  KB_CHECK(kiln_to_host(x, out, sizeof out));
  /* Oracle: the same recurrence in double on the host. */
  for (int i = 0; i < 8; i++) {
    double xv = init[i], yv = init[i];
    for (int s = 0; s < STEPS; s++) {
      double h = xv;
      for (int k = 0; k < OPS_PER_STEP / 4; k++) {
        h = tanh(h * yv + 0.5);
        h = h > xv ? h : xv;
      }
      xv = h;
    }
    if (fabs(xv - (double)out[i]) > 1e-4) {
      fprintf(stderr, "trace: x[%d] = %g, expected %g\n", i, (double)out[i], xv);
      return 1;
    }
  }
  double ns_per_op = traced_s * 1e9 / (double)ops;
  const char *torch = getenv("KILN_BENCH_TORCH_NS");
  double base = torch && atof(torch) > 0 ? atof(torch) : 2800.0;
  kb_emit(&(kb_result){"trace_ns_per_op", ns_per_op, "ns/op",
                       torch && atof(torch) > 0 ? "PyTorch eager dispatch (same run)"
                                                : "PyTorch eager dispatch (REFERENCE.md)",
                       base, "<= 100 ns/op", ns_per_op <= 100.0});
  kiln_shutdown();
  return 0;
}
