/* Scenario S4: variable-length inputs and recompilation (docs/debugging.md).
 *
 * A sequence classifier (token embedding, masked mean pooling, a two-layer
 * MLP head) trained with AdamW on synthetic sequences whose lengths follow a
 * long-tailed distribution from 20 to 250 tokens, then evaluated.
 *
 * Slow (default): each batch is padded to its own longest sequence, as a
 * "dynamic padding" collator does, so the input's length dimension changes
 * from batch to batch and every new length is a new graph.
 *
 * Fixed (--fixed): kiln's bucketing batcher pads every batch to one of the
 * few bucket lengths that kiln suggested for this data (run the slow variant
 * with KILN_DEBUG=1); every bucket's training graph is compiled before
 * training (kiln_compile + kiln_discard_step leave the model untouched); the
 * training loop runs in a full-graph region, so an unexpected graph cut
 * would be an error at its line; training and evaluation graphs carry tags.
 * At the end the program prints kiln_explain().
 *
 * Dynamic (--dynamic): dynamic shapes on (docs/dynamic-shapes.md), no
 * buckets to choose, no warm-up: sequences grouped by length and each batch
 * padded only to its own longest sequence (the bucketer's exact_length), so
 * every batch has its own length; the second length compiles the training
 * graph once for any length, and every later length is only planned. The slow and
 * fixed variants run with dynamic shapes off (kiln_options.dynamic_shapes),
 * to show the problem and the remedy without them.
 *
 *   s4_variable_length [--fixed | --dynamic] [--steps N]   N training steps, then evaluation
 */
#include <kiln/kiln.h>
#include <math.h>

#include "scenario_util.h"

#define N_SEQ 768   /* sequences in the training set */
#define N_EVAL 64   /* sequences in the evaluation set */
#define MIN_LEN 20
#define MAX_LEN 250
#define MAX_PAD 256 /* longest padded length: the largest bucket */
#define VOCAB 512
#define E 32        /* embedding width */
#define HID 64
#define B 16
#define MAXP 8

/* The buckets kiln suggested for this data: KILN_DEBUG=1 s4_variable_length
 * prints "suggested buckets: ..." (the same list is in docs/debugging.md). */
static const int64_t k_buckets[] = {160, 192, 256};
#define N_BUCKETS ((int)(sizeof k_buckets / sizeof k_buckets[0]))

typedef struct model {
  kiln_embedding *emb;
  kiln_linear *l1, *l2;
} model;

typedef struct corpus {
  int64_t n;
  int64_t *lens, *labels;
  int64_t **seqs;
} corpus;

/* Lengths: log-normal around 70 tokens, clamped to [20, 250] (a long tail of
 * long sequences, as in text corpora). Class 1 sequences draw most tokens
 * from the upper half of the vocabulary, class 0 from the lower half. */
static int make_corpus(corpus *c, int64_t n, uint64_t seed) {
  c->n = n;
  c->lens = calloc((size_t)n, sizeof *c->lens);
  c->labels = calloc((size_t)n, sizeof *c->labels);
  c->seqs = calloc((size_t)n, sizeof *c->seqs);
  if (!c->lens || !c->labels || !c->seqs) return -1;
  uint64_t rng = seed;
  for (int64_t i = 0; i < n; i++) {
    double u1 = scn_rand01(&rng) + 1e-12, u2 = scn_rand01(&rng);
    double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
    int64_t len = (int64_t)llround(exp(4.25 + 0.55 * z));
    c->lens[i] = len < MIN_LEN ? MIN_LEN : len > MAX_LEN ? MAX_LEN : len;
    c->labels[i] = (int64_t)(scn_rand_u64(&rng) & 1);
    c->seqs[i] = malloc(sizeof(int64_t) * (size_t)c->lens[i]);
    if (!c->seqs[i]) return -1;
    for (int64_t t = 0; t < c->lens[i]; t++) {
      int upper = scn_rand01(&rng) < (c->labels[i] ? 0.6 : 0.4);
      c->seqs[i][t] = (int64_t)(scn_rand_u64(&rng) % (VOCAB / 2)) + (upper ? VOCAB / 2 : 0);
    }
  }
  return 0;
}

static void free_corpus(corpus *c) {
  for (int64_t i = 0; c->seqs && i < c->n; i++) free(c->seqs[i]);
  free(c->seqs);
  free(c->lens);
  free(c->labels);
}

/* Host batch -> tensors. tokens/mask hold B x len entries, packed. */
static void make_inputs(const int64_t *tokens, const float *mask, const int64_t *labels, int64_t len,
                        kiln_tensor *t, kiln_tensor *m, kiln_tensor *y) {
  int64_t s[2] = {B, len}, ys[1] = {B};
  *t = kiln_from_host(tokens, KILN_I64, 2, s); /* S4: the input batch */
  *m = kiln_from_host(mask, KILN_F32, 2, s);
  *y = kiln_from_host(labels, KILN_I64, 1, ys);
}

/* Logits [B, 2]: embedding, mean over the real tokens, MLP. */
static kiln_tensor forward(const model *md, kiln_tensor tokens, kiln_tensor mask) {
  kiln_tensor e = kiln_embedding_forward(md->emb, tokens); /* [B, L, E] */
  int64_t ms[3] = {B, kiln_dim(mask, 1), 1};
  kiln_tensor m3 = kiln_reshape(mask, 3, ms);
  int axis = 1;
  kiln_tensor sum = kiln_sum(kiln_mul(e, m3), 1, &axis, 0);                        /* [B, E] */
  kiln_tensor cnt = kiln_maximum_c(kiln_sum(m3, 1, &axis, 0), 1.0);                /* [B, 1] */
  kiln_tensor pooled = kiln_div(sum, cnt);
  return kiln_linear_forward(md->l2, kiln_relu(kiln_linear_forward(md->l1, pooled)));
}

/* Trace one training step (forward, backward, update); the caller ends it. */
static void train_step(const model *md, kiln_optim *opt, kiln_tensor *params, int np, kiln_tensor loss_kept,
                       kiln_tensor tokens, kiln_tensor mask, kiln_tensor y) {
  kiln_tensor loss = kiln_cross_entropy(forward(md, tokens, mask), y, -100, 0.0);
  kiln_assign(loss_kept, loss);
  kiln_backward(loss);
  kiln_optim_step(opt);
  for (int i = 0; i < np; i++) kiln_zero_grad(params[i]);
}

/* Trace one evaluation step: add the batch's correct predictions to
 * `correct`. Padding rows (no real token) never count. */
static void eval_step(const model *md, kiln_tensor correct, kiln_tensor tokens, kiln_tensor mask, kiln_tensor y) {
  int axis = 1;
  kiln_tensor real = kiln_gt_c(kiln_sum(mask, 1, &axis, 0), 0.0);
  kiln_tensor hit = kiln_logical_and(kiln_eq(kiln_argmax(forward(md, tokens, mask), 1, 0), y), real);
  kiln_assign(correct, kiln_add(correct, kiln_sum(kiln_cast(hit, KILN_F32), 0, NULL, 0)));
}

/* Slow-variant batch `index`: B consecutive sequences of c, padded to the
 * longest of them. Returns that length. */
static int64_t pad_to_longest(const corpus *c, int64_t index, int64_t *tokens, float *mask, int64_t *labels) {
  int64_t first = (index * B) % (c->n - B + 1), len = 0;
  for (int b = 0; b < B; b++) len = c->lens[first + b] > len ? c->lens[first + b] : len;
  for (int b = 0; b < B; b++) {
    const int64_t *s = c->seqs[first + b];
    for (int64_t t = 0; t < len; t++) {
      int real = t < c->lens[first + b];
      tokens[b * len + t] = real ? s[t] : 0;
      mask[b * len + t] = (float)real;
    }
    labels[b] = c->labels[first + b];
  }
  return len;
}

/* Fixed- and dynamic-variant batch from the bucketer (host form), labels by
 * sequence id. */
static int64_t bucket_batch(kiln_bucketer *bk, const corpus *c, int64_t epoch, int64_t index, int64_t *tokens,
                            float *mask, int64_t *labels) {
  int64_t len = 0, ids[B];
  int bucket = 0;
  if (kiln_bucketer_fill(bk, epoch, index, tokens, mask, &len, &bucket, ids) < 0) return -1;
  for (int b = 0; b < B; b++) labels[b] = ids[b] >= 0 ? c->labels[ids[b]] : 0;
  return len;
}

static kiln_bucketer *new_bucketer(const corpus *c) {
  kiln_bucket_options bo = {.boundaries = k_buckets, .n_boundaries = N_BUCKETS, .batch_size = B, .truncate = true,
                            .pad_id = 0, .shuffle = true, .seed = 11};
  kiln_bucketer *b = NULL;
  kiln_bucketer_create(c->n, (const int64_t *const *)c->seqs, c->lens, &bo, &b);
  return b;
}

/* Dynamic-variant batches: sequences grouped by length (16 groups of 16
 * tokens), each batch padded to its own longest sequence (exact_length):
 * every batch its own length, no padding beyond it. */
static kiln_bucketer *new_length_grouper(const corpus *c) {
  static int64_t groups[MAX_PAD / 16];
  for (int i = 0; i < MAX_PAD / 16; i++) groups[i] = 16 * (i + 1);
  kiln_bucket_options bo = {.boundaries = groups, .n_boundaries = MAX_PAD / 16, .batch_size = B, .truncate = true,
                            .pad_id = 0, .shuffle = true, .seed = 11, .exact_length = true};
  kiln_bucketer *b = NULL;
  kiln_bucketer_create(c->n, (const int64_t *const *)c->seqs, c->lens, &bo, &b);
  return b;
}

int main(int argc, char **argv) {
  scn_args a;
  int pr = scn_parse(argc, argv, "s4_variable_length", "S4: N training steps on variable-length sequences (one graph per length), then evaluation", 12, &a);
  if (pr) return pr < 0 ? 2 : 0;
  if (scn_init_dyn("s4_variable_length", a.dynamic ? KILN_SWITCH_ON : KILN_SWITCH_OFF)) return 1;
  const char *variant = a.fixed ? "fixed" : a.dynamic ? "dynamic" : "slow";
  int64_t padded_tokens = 0; /* tokens the training steps compute, padding included */

  corpus train = {0}, eval = {0};
  if (make_corpus(&train, N_SEQ, 1234) || make_corpus(&eval, N_EVAL, 4321)) {
    fprintf(stderr, "s4_variable_length: out of memory\n");
    return 1;
  }
  model md = {0};
  kiln_embedding_create(VOCAB, E, 1, &md.emb);
  kiln_linear_create(E, HID, true, 2, &md.l1);
  kiln_linear_create(HID, 2, true, 3, &md.l2);
  kiln_tensor params[MAXP];
  int np = 0;
  np += kiln_module_params(&md.emb->m, NULL, params + np, MAXP - np);
  np += kiln_module_params(&md.l1->m, NULL, params + np, MAXP - np);
  np += kiln_module_params(&md.l2->m, NULL, params + np, MAXP - np);
  for (int i = 0; i < np; i++) kiln_requires_grad(params[i]);
  kiln_adamw_opts ao = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0};
  kiln_optim *opt = NULL;
  kiln_optim_create_adamw(np, params, &ao, &opt);
  kiln_tensor loss_kept = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  kiln_mark_step();
  /* Evaluation hits. Made in a step of its own: two equal constants made in
   * one step share one buffer, and a shared buffer cannot be updated in
   * place, which would make the warmed-up evaluation graph differ from the
   * one evaluation runs once loss_kept has its own buffer. */
  kiln_tensor correct = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  kiln_mark_step();

  static int64_t tokens[B * MAX_PAD], labels[B];
  static float mask[B * MAX_PAD];
  kiln_tensor t, m, y;
  kiln_bucketer *bk = NULL, *ebk = NULL;
  if (a.dynamic) {
    bk = new_length_grouper(&train);
    ebk = new_length_grouper(&eval);
    if (!bk || !ebk) return scn_check("s4_variable_length") | 1;
  }
  if (a.fixed) {
    bk = new_bucketer(&train);
    ebk = new_bucketer(&eval);
    if (!bk || !ebk) return scn_check("s4_variable_length") | 1;
    kiln_bucket_stats st;
    kiln_bucketer_stats(bk, &st);
    printf("buckets:");
    for (int i = 0; i < st.n_buckets; i++)
      printf(" %lld (%lld sequences)", (long long)st.length[i], (long long)st.sequences[i]);
    printf("; padding waste %.1f%%\n", 100 * st.total_waste);
    /* Warm-up: compile each bucket's training and evaluation graphs on
     * dummy data, throwing each step away so the model is untouched (the
     * optimizer's step count is host state: put it back too). Largest
     * bucket first, so that running out of memory would show at once. */
    int64_t opt_steps = kiln_optim_step_count(opt);
    double w0 = scn_now_ms();
    int64_t c0 = kiln_counter_value("UncachedCompile");
    for (int i = N_BUCKETS - 1; i >= 0; i--) {
      memset(tokens, 0, sizeof tokens);
      for (int j = 0; j < B * k_buckets[i]; j++) mask[j] = 1;
      kiln_graph_tag("train");
      make_inputs(tokens, mask, labels, k_buckets[i], &t, &m, &y);
      train_step(&md, opt, params, np, loss_kept, t, m, y);
      kiln_compile(0, NULL);
      kiln_discard_step();
      kiln_graph_tag("eval");
      kiln_no_grad_begin();
      make_inputs(tokens, mask, labels, k_buckets[i], &t, &m, &y);
      eval_step(&md, correct, t, m, y);
      kiln_compile(0, NULL);
      kiln_discard_step();
      kiln_no_grad_end();
    }
    kiln_optim_set_step_count(opt, opt_steps);
    printf("warm-up: %lld graphs compiled in %.0f ms (training and evaluation, %d buckets)\n",
           (long long)(kiln_counter_value("UncachedCompile") - c0), scn_now_ms() - w0, N_BUCKETS);
  }

  /* ── training ── */
  int64_t *seen_lens = calloc((size_t)a.steps, sizeof *seen_lens);
  int64_t compiles_before = kiln_counter_value("UncachedCompile"), epoch = 0, index = 0;
  kiln_graph_tag("train");
  scn_clock clk = {0};
  scn_clock_start(&clk);
  if (a.fixed) kiln_full_graph_begin();
  for (int step = 0; step < a.steps; step++) {
    int64_t len;
    if (bk) {
      if (index >= kiln_bucketer_num_batches(bk)) epoch++, index = 0;
      len = bucket_batch(bk, &train, epoch, index++, tokens, mask, labels);
    } else {
      len = pad_to_longest(&train, step, tokens, mask, labels);
    }
    if (seen_lens) seen_lens[step] = len;
    padded_tokens += B * len;
    make_inputs(tokens, mask, labels, len, &t, &m, &y);
    train_step(&md, opt, params, np, loss_kept, t, m, y);
    kiln_mark_step(); /* S4: the training step */
  }
  if (a.fixed) kiln_full_graph_end();
  double step_ms = scn_clock_report(&clk, "s4", variant, a.steps, B, "sequences");
  int64_t train_compiles = kiln_counter_value("UncachedCompile") - compiles_before;
  printf("batch lengths:");
  for (int i = 0; seen_lens && i < a.steps; i++) printf(" %lld", (long long)seen_lens[i]);
  printf("\n");
  free(seen_lens);
  printf("training: %lld graphs compiled during training, final loss %.4f\n", (long long)train_compiles,
         kiln_item_f64(loss_kept));
  printf("padded tokens: %lld computed in %d training steps; sizes planned from a dynamic family: %lld\n",
         (long long)padded_tokens, a.steps, (long long)kiln_counter_value("DynamicPlan"));

  /* ── evaluation: forward only, its own graphs, tagged ── */
  kiln_graph_tag("eval");
  int64_t n_eval_batches = ebk ? kiln_bucketer_num_batches(ebk) : N_EVAL / B;
  compiles_before = kiln_counter_value("UncachedCompile");
  kiln_no_grad_begin();
  for (int64_t i = 0; i < n_eval_batches; i++) {
    int64_t len = ebk ? bucket_batch(ebk, &eval, 0, i, tokens, mask, labels)
                          : pad_to_longest(&eval, i, tokens, mask, labels);
    make_inputs(tokens, mask, labels, len, &t, &m, &y);
    eval_step(&md, correct, t, m, y);
    kiln_mark_step();
  }
  kiln_no_grad_end();
  kiln_graph_tag(NULL);
  printf("evaluation: %lld graphs compiled during evaluation, accuracy %.1f%% over %lld sequences\n",
         (long long)(kiln_counter_value("UncachedCompile") - compiles_before),
         100 * kiln_item_f64(correct) / N_EVAL, (long long)N_EVAL);
  printf("%s: %.1f ms per training step, %lld graphs compiled in all\n\n", variant, step_ms,
         (long long)kiln_counter_value("UncachedCompile"));
  printf("%s", kiln_explain());
  int rc = scn_check("s4_variable_length");

  kiln_release(correct);
  kiln_release(loss_kept);
  kiln_bucketer_destroy(bk);
  kiln_bucketer_destroy(ebk);
  kiln_optim_destroy(opt);
  kiln_embedding_destroy(md.emb);
  kiln_linear_destroy(md.l1);
  kiln_linear_destroy(md.l2);
  free_corpus(&train);
  free_corpus(&eval);
  kiln_shutdown();
  return rc;
}
