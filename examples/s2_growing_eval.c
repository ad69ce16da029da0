/* Scenario S2: a graph that grows every step (docs/debugging.md).
 *
 * Trains a small MLP classifier on synthetic data, then evaluates it. The
 * evaluation loop keeps every batch's predictions by concatenating them onto
 * one growing tensor on the device, as a metrics "report" object does in the
 * seed's case. The concatenation's shape changes every step, so every
 * evaluation step is a new graph: the compile count grows with the number of
 * steps and evaluation runs slower than training.
 *
 * The fix (--fixed) is the seed's: read each batch's predictions to the host
 * and accumulate them there. The evaluation graph is then the same every
 * step (compiled once) at the price of one device-to-host transfer per step.
 *
 *   s2_growing_eval [--fixed] [--steps N]   N training steps, then N evaluation steps
 */
#include <kiln/kiln.h>

#include "scenario_util.h"

#define DIN 32
#define HID 64
#define C 10
#define TRAIN_B 32
#define EVAL_B 8
#define MAXP 8

typedef struct model {
  kiln_linear *l1, *l2, *l3;
} model;

static kiln_tensor forward(const model *m, kiln_tensor x) {
  kiln_tensor h = kiln_relu(kiln_linear_forward(m->l1, x));
  h = kiln_relu(kiln_linear_forward(m->l2, h));
  return kiln_linear_forward(m->l3, h);
}

/* The synthetic task: 10 class centres in DIN dimensions; an example is its
 * class centre plus noise. Example i of a stream is a pure function of i. */
static void make_batch(int64_t first, int n, float *x, int64_t *y) {
  for (int b = 0; b < n; b++) {
    uint64_t rng = 0x5eed0000u + (uint64_t)(first + b);
    int64_t label = (int64_t)(scn_rand_u64(&rng) % C);
    for (int f = 0; f < DIN; f++) {
      uint64_t crng = 0xc1a55000u + (uint64_t)(label * DIN + f);
      double centre = 2 * scn_rand01(&crng) - 1;
      x[b * DIN + f] = (float)(centre + 0.6 * (2 * scn_rand01(&rng) - 1));
    }
    y[b] = label;
  }
}

/* Host argmax accuracy of n rows of logits. */
static double accuracy(const float *logits, const int64_t *labels, int64_t n) {
  int64_t ok = 0;
  for (int64_t i = 0; i < n; i++) {
    int best = 0;
    for (int c = 1; c < C; c++)
      if (logits[i * C + c] > logits[i * C + best]) best = c;
    ok += best == labels[i];
  }
  return n ? (double)ok / (double)n : 0;
}

int main(int argc, char **argv) {
  scn_args a;
  int pr = scn_parse(argc, argv, "s2_growing_eval",
                     "S2: N training steps, then N evaluation steps that concatenate predictions onto a growing tensor",
                     20, &a);
  if (pr) return pr < 0 ? 2 : 0;
  if (scn_init("s2_growing_eval")) return 1;
  const char *variant = a.fixed ? "fixed" : "slow";

  model m = {0};
  kiln_linear_create(DIN, HID, true, 1, &m.l1);
  kiln_linear_create(HID, HID, true, 2, &m.l2);
  kiln_linear_create(HID, C, true, 3, &m.l3);
  kiln_tensor params[MAXP];
  int np = 0;
  np += kiln_module_params(&m.l1->m, NULL, params + np, MAXP - np);
  np += kiln_module_params(&m.l2->m, NULL, params + np, MAXP - np);
  np += kiln_module_params(&m.l3->m, NULL, params + np, MAXP - np);
  for (int i = 0; i < np; i++) kiln_requires_grad(params[i]);
  kiln_adamw_opts ao = {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim *opt = NULL;
  kiln_optim_create_adamw(np, params, &ao, &opt);
  kiln_tensor loss_kept = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  kiln_mark_step();

  /* ── training: one graph, compiled once ── */
  float tx[TRAIN_B * DIN];
  int64_t ty[TRAIN_B], txs[2] = {TRAIN_B, DIN}, tys[1] = {TRAIN_B};
  double t0 = scn_now_ms();
  for (int step = 0; step < a.steps; step++) {
    make_batch((int64_t)step * TRAIN_B, TRAIN_B, tx, ty);
    kiln_tensor loss = kiln_cross_entropy(forward(&m, kiln_from_host(tx, KILN_F32, 2, txs)),
                                          kiln_from_host(ty, KILN_I64, 1, tys), -100, 0.0);
    kiln_assign(loss_kept, loss);
    kiln_backward(loss);
    kiln_optim_step(opt);
    for (int i = 0; i < np; i++) kiln_zero_grad(params[i]);
    kiln_mark_step();
  }
  kiln_wait();
  double train_ms = (scn_now_ms() - t0) / a.steps;
  printf("training: %d steps, %.2f ms/step (first step compiles), final loss %.4f\n", a.steps, train_ms,
         kiln_item_f64(loss_kept));

  /* ── evaluation on examples the training never saw ── */
  int64_t n_eval = (int64_t)a.steps * EVAL_B;
  float *ex = malloc(sizeof(float) * EVAL_B * DIN);
  int64_t *labels = malloc(sizeof(int64_t) * (size_t)n_eval);
  float *host_preds = malloc(sizeof(float) * (size_t)n_eval * C);
  if (!ex || !labels || !host_preds) {
    fprintf(stderr, "s2_growing_eval: out of memory\n");
    return 1;
  }
  int64_t exs[2] = {EVAL_B, DIN};
  kiln_tensor preds = {0, 0}; /* slow variant: every prediction so far, on the device */
  scn_clock clk = {0};
  scn_clock_start(&clk);
  kiln_no_grad_begin();
  for (int step = 0; step < a.steps; step++) {
    make_batch(1000000 + (int64_t)step * EVAL_B, EVAL_B, ex, labels + (int64_t)step * EVAL_B);
    kiln_tensor logits = forward(&m, kiln_from_host(ex, KILN_F32, 2, exs));
    if (a.fixed) {
      /* accumulate on the host: the graph stays the same every step */
      kiln_to_host(logits, host_preds + (int64_t)step * EVAL_B * C, sizeof(float) * EVAL_B * C);
    } else if (step == 0) {
      preds = kiln_keep(logits);
    } else {
      kiln_tensor both[2] = {preds, logits};
      kiln_tensor grown = kiln_keep(kiln_concat(2, both, 0)); /* S2: the concat */
      kiln_release(preds);
      preds = grown;
    }
    kiln_mark_step();
  }
  kiln_no_grad_end();
  scn_clock_report(&clk, "s2", variant, a.steps, EVAL_B, "examples");
  if (!a.fixed) {
    kiln_to_host(preds, host_preds, sizeof(float) * (size_t)n_eval * C);
    kiln_release(preds);
  }
  printf("evaluation accuracy %.1f%% over %lld examples\n", 100 * accuracy(host_preds, labels, n_eval),
         (long long)n_eval);
  int rc = scn_check("s2_growing_eval");

  free(ex);
  free(labels);
  free(host_preds);
  kiln_release(loss_kept);
  kiln_optim_destroy(opt);
  kiln_linear_destroy(m.l1);
  kiln_linear_destroy(m.l2);
  kiln_linear_destroy(m.l3);
  kiln_shutdown();
  return rc;
}
