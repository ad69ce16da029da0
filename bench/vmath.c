/* One elementwise transcendental op (exp, log, tanh, erf, gelu, gelu_tanh,
 * sin, cos) on a [2048, 1536] f32 tensor, written into a parameter: one
 * kernel that reads x once and writes y once. Per op, two rows:
 *   vmath_<op>_GBps  counting 1 read + 1 write of the tensor, against the
 *                    STREAM triad bandwidth measured in this process on the
 *                    same threads (target >= 50%: the op should be limited by
 *                    memory, not by arithmetic);
 *   vmath_<op>_ms    the time, against PyTorch eager's time for the same op
 *                    (bench/torch_vmath.py, passed by bench/run.sh in
 *                    $KILN_BENCH_TORCH_VMATH as "op=ms,..."; target <= 1.5x).
 * Each step is timed from kiln_mark_step() to kiln_wait() (host overhead
 * included), median of the steps. Inputs in [-4, 4) (log: [0.25, 4.25));
 * a few outputs are checked against double libm. */
#include "machine.h"

enum { STEPS = 20, ROWS = 2048, COLS = 1536 };
#define N ((int64_t)ROWS * COLS)

typedef kiln_tensor (*unary_fn)(kiln_tensor, kiln_loc);
static double gelu_d(double x) { return x * 0.5 * (1.0 + erf(x / sqrt(2.0))); }
static double gelut_d(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static const struct {
  const char *name;
  unary_fn fn;
  double (*ref)(double);
  int positive;
} k_ops[] = {{"exp", kiln_exp_at, exp, 0},       {"log", kiln_log_at, log, 1},
             {"tanh", kiln_tanh_at, tanh, 0},     {"erf", kiln_erf_at, erf, 0},
             {"gelu", kiln_gelu_at, gelu_d, 0},   {"gelu_tanh", kiln_gelu_tanh_at, gelut_d, 0},
             {"sin", kiln_sin_at, sin, 0},        {"cos", kiln_cos_at, cos, 0}};

static double input(int64_t i, int positive) {
  return positive ? (double)(i % 1000) / 250.0 + 0.25 : (double)(i % 1000) / 125.0 - 4.0;
}

/* PyTorch's time for op from "exp=1.2,log=3.4,...", or 0 */
static double torch_ms(const char *op) {
  const char *s = getenv("KILN_BENCH_TORCH_VMATH");
  size_t n = strlen(op);
  for (; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
    if (strncmp(s, op, n) == 0 && s[n] == '=') return atof(s + n + 1);
  return 0;
}

static int bench_op(int k, kiln_tensor x, kiln_tensor y, float *host, int threads, double triad) {
  static double t[STEPS];
  for (int s = 0; s < STEPS + 2; s++) {
    kiln_assign(y, k_ops[k].fn(x, KILN_HERE));
    double t0 = kb_now_s();
    KB_CHECK(kiln_mark_step());
    KB_CHECK(kiln_wait());
    if (s >= 2) t[s - 2] = kb_now_s() - t0; /* the first steps compile */
  }
  KB_CHECK(kiln_to_host(y, host, sizeof(float) * (size_t)N));
  for (int64_t i = 0; i < N; i += N / 97 + 1) {
    double want = k_ops[k].ref((double)(float)input(i, k_ops[k].positive));
    if (fabs((double)host[i] - want) > 1e-6 * (1 + fabs(want))) {
      fprintf(stderr, "vmath: %s: y[%lld] = %.9g, expected %.9g\n", k_ops[k].name, (long long)i, (double)host[i], want);
      return 1;
    }
  }
  double sec = kb_median(t, STEPS), gbps = 2.0 * sizeof(float) * (double)N / sec / 1e9, tms = torch_ms(k_ops[k].name);
  char name[64], base[96];
  snprintf(name, sizeof name, "vmath_%s_%dt_GBps", k_ops[k].name, threads);
  snprintf(base, sizeof base, "STREAM triad %dt (same run)", threads);
  kb_emit(&(kb_result){name, gbps, "GB/s", base, triad, ">= 50% of triad", gbps >= 0.50 * triad});
  snprintf(name, sizeof name, "vmath_%s_%dt_ms", k_ops[k].name, threads);
  kb_emit(&(kb_result){name, sec * 1e3, "ms", tms > 0 ? "PyTorch eager, out= (same run)" : "PyTorch eager: not run",
                       tms, "<= 1.5x PyTorch", tms > 0 && sec * 1e3 <= 1.5 * tms});
  return 0;
}

int main(int argc, char **argv) {
  int threads = kb_threads();
  double triad = kb_triad_gbps(threads, (size_t)64 << 20, 5); /* first, while nothing else holds memory */
  KB_CHECK(kiln_init(NULL));
  int64_t shape[2] = {ROWS, COLS};
  float *host = malloc(sizeof(float) * (size_t)N);
  if (!host) return 1;
  kiln_tensor xs[2];
  for (int p = 0; p < 2; p++) {
    for (int64_t i = 0; i < N; i++) host[i] = (float)input(i, p);
    xs[p] = kiln_param(kiln_from_host(host, KILN_F32, 2, shape));
  }
  kiln_tensor y = kiln_param(kiln_zeros(KILN_F32, 2, shape));
  int rc = 0;
  for (int k = 0; k < (int)(sizeof k_ops / sizeof k_ops[0]) && rc == 0; k++)
    if (argc < 2 || strcmp(argv[1], k_ops[k].name) == 0)
      rc = bench_op(k, xs[k_ops[k].positive], y, host, threads, triad);
  free(host);
  kiln_shutdown();
  return rc;
}
