/* Scenario S1: a value read in the model cuts every step (docs/debugging.md).
 *
 * A small sequence classifier: a projection with LayerNorm, two residual
 * multi-head self-attention blocks, mean pooling and a linear head, trained
 * with AdamW on synthetic data. The attention layer is written the way
 * PyTorch 1.8's MultiheadAttention was: it checks whether query and key are
 * EQUAL to decide whether one packed input projection can serve both. The
 * check reads a value back to the host (torch.equal; here kiln_item_f64 of
 * an equality reduction), so every step is cut into three graphs: one per
 * attention block to answer the question, each recomputing everything
 * before it, and one for the rest of the step; and the training loop waits
 * for the device twice in the middle of tracing.
 *
 * The fix (--fixed) is PyTorch 1.9's: ask whether query and key are the SAME
 * tensor (`query is key`: compare the handles), which needs no value.
 *
 *   s1_value_read [--fixed] [--steps N]     KILN_DEBUG=1 shows kiln's analysis
 */
#include <kiln/kiln.h>

#include "scenario_util.h"

#define B 16   /* batch */
#define T 32   /* sequence length */
#define DIN 32 /* input features per position */
#define D 64   /* model width */
#define H 4    /* attention heads */
#define C 4    /* classes */
#define BLOCKS 2
#define MAXP 24

typedef struct attn {
  kiln_linear *in_proj, *out_proj;
} attn;

typedef struct model {
  kiln_linear *proj, *head;
  kiln_layernorm *norm;
  attn blocks[BLOCKS];
} model;

/* Multi-head attention over query/key/value [B, T, D]. */
static kiln_tensor attention(const attn *m, kiln_tensor query, kiln_tensor key, kiln_tensor value, int fixed) {
  int same;
  if (fixed) {
    /* The same question without a value: is it the same tensor? */
    same = query.index == key.index && query.gen == key.gen;
  } else {
    same = kiln_item_f64(kiln_min(kiln_cast(kiln_eq(query, key), KILN_F32), 0, NULL, 0)) == 1.0; /* S1: the value read */
  }
  kiln_tensor q, k, v, w = m->in_proj->weight, b = m->in_proj->bias;
  if (same) {
    /* self-attention: one packed projection, split afterwards */
    kiln_tensor qkv = kiln_linear_forward(m->in_proj, query);
    q = kiln_slice(qkv, 2, 0, D, 1);
    k = kiln_slice(qkv, 2, D, 2 * D, 1);
    v = kiln_slice(qkv, 2, 2 * D, 3 * D, 1);
  } else {
    q = kiln_linear_apply(query, kiln_slice(w, 0, 0, D, 1), kiln_slice(b, 0, 0, D, 1));
    k = kiln_linear_apply(key, kiln_slice(w, 0, D, 2 * D, 1), kiln_slice(b, 0, D, 2 * D, 1));
    v = kiln_linear_apply(value, kiln_slice(w, 0, 2 * D, 3 * D, 1), kiln_slice(b, 0, 2 * D, 3 * D, 1));
  }
  int64_t split[4] = {B, T, H, D / H}, merged[3] = {B, T, D};
  int perm[4] = {0, 2, 1, 3};
  q = kiln_permute(kiln_reshape(q, 4, split), perm);
  k = kiln_permute(kiln_reshape(k, 4, split), perm);
  v = kiln_permute(kiln_reshape(v, 4, split), perm);
  kiln_tensor no_mask = {0, 0};
  kiln_tensor o = kiln_sdpa(q, k, v, no_mask, 0.0, false, 0);
  o = kiln_reshape(kiln_permute(o, perm), 3, merged);
  return kiln_linear_forward(m->out_proj, o);
}

static kiln_tensor forward(const model *m, kiln_tensor x, int fixed) {
  kiln_tensor h = kiln_layernorm_forward(m->norm, kiln_relu(kiln_linear_forward(m->proj, x)));
  for (int i = 0; i < BLOCKS; i++) h = kiln_add(h, attention(&m->blocks[i], h, h, h, fixed));
  int axis = 1;
  return kiln_linear_forward(m->head, kiln_mean(h, 1, &axis, 0));
}

/* A batch: x ~ U(-1, 1); the label is the quadrant of (mean of feature 0,
 * mean of feature 1) over the sequence, a function the model can learn. */
static void make_batch(uint64_t *rng, float *x, int64_t *y) {
  for (int b = 0; b < B; b++) {
    double s0 = 0, s1 = 0;
    for (int t = 0; t < T; t++)
      for (int f = 0; f < DIN; f++) {
        float v = (float)(2 * scn_rand01(rng) - 1);
        x[(b * T + t) * DIN + f] = v;
        if (f == 0) s0 += v;
        if (f == 1) s1 += v;
      }
    y[b] = (s0 > 0) * 2 + (s1 > 0);
  }
}

int main(int argc, char **argv) {
  scn_args a;
  int pr = scn_parse(argc, argv, "s1_value_read", "S1: a value read inside the model cuts every step", 30, &a);
  if (pr) return pr < 0 ? 2 : 0;
  if (scn_init("s1_value_read")) return 1;

  model m = {0};
  kiln_linear_create(DIN, D, true, 1, &m.proj);
  kiln_layernorm_create(D, 1e-5, true, &m.norm);
  kiln_linear_create(D, C, true, 2, &m.head);
  kiln_tensor params[MAXP];
  int np = 0;
  np += kiln_module_params(&m.proj->m, NULL, params + np, MAXP - np);
  np += kiln_module_params(&m.norm->m, NULL, params + np, MAXP - np);
  np += kiln_module_params(&m.head->m, NULL, params + np, MAXP - np);
  for (int i = 0; i < BLOCKS; i++) {
    kiln_linear_create(D, 3 * D, true, (uint64_t)(10 + i), &m.blocks[i].in_proj);
    kiln_linear_create(D, D, true, (uint64_t)(20 + i), &m.blocks[i].out_proj);
    np += kiln_module_params(&m.blocks[i].in_proj->m, NULL, params + np, MAXP - np);
    np += kiln_module_params(&m.blocks[i].out_proj->m, NULL, params + np, MAXP - np);
  }
  for (int i = 0; i < np; i++) kiln_requires_grad(params[i]);
  kiln_adamw_opts ao = {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim *opt = NULL;
  kiln_optim_create_adamw(np, params, &ao, &opt);
  kiln_tensor loss_kept = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  kiln_mark_step(); /* materialize the initial weights */

  static float x[B * T * DIN];
  int64_t y[B], xs[3] = {B, T, DIN}, ys[1] = {B};
  uint64_t rng = 2024;
  scn_clock clk = {0};
  /* step -1 is untimed: it compiles the step's graphs; the timed steps show
   * the steady state */
  for (int step = -1; step < a.steps; step++) {
    if (step == 0) scn_clock_start(&clk);
    make_batch(&rng, x, y);
    kiln_tensor loss = kiln_cross_entropy(forward(&m, kiln_from_host(x, KILN_F32, 3, xs), a.fixed),
                                          kiln_from_host(y, KILN_I64, 1, ys), -100, 0.0);
    kiln_assign(loss_kept, loss);
    kiln_backward(loss);
    kiln_optim_step(opt);
    for (int i = 0; i < np; i++) kiln_zero_grad(params[i]);
    kiln_mark_step();
  }
  const char *variant = a.fixed ? "fixed" : "slow";
  scn_clock_report(&clk, "s1", variant, a.steps, B, "sequences");
  printf("final training loss %.4f\n", kiln_item_f64(loss_kept));
  int rc = scn_check("s1_value_read");

  kiln_release(loss_kept);
  kiln_optim_destroy(opt);
  kiln_linear_destroy(m.proj);
  kiln_layernorm_destroy(m.norm);
  for (int i = 0; i < BLOCKS; i++) {
    kiln_linear_destroy(m.blocks[i].in_proj);
    kiln_linear_destroy(m.blocks[i].out_proj);
  }
  kiln_linear_destroy(m.head);
  kiln_shutdown();
  return rc;
}
