/* A pretrained model from C: all-MiniLM-L6-v2's sentence embeddings and
 * their cosine similarities, then a few fine-tuning steps, saved under the
 * published names (docs/models.md walks through it).
 *
 *   build/bin/examples/embed_similarity [MODEL_DIR] [OUT_DIR]
 *
 * MODEL_DIR: the model's folder as published (scripts/fetch-model.sh puts
 * it in build/models/all-MiniLM-L6-v2); OUT_DIR (optional): where the
 * fine-tuned model is written (config.json, model.safetensors, vocab.txt is
 * not copied). */
#include <kiln/bert.h>
#include <kiln/kiln.h>
#include <kiln/optim.h>
#include <kiln/text.h>
#include <stdio.h>
#include <string.h>

#define N 4
#define MAXT 64

static const char *k_sentences[N] = {
    "A man is playing a guitar.",
    "Someone plays an instrument.",
    "The stock market fell sharply today.",
    "Shares dropped at the close of trading.",
};

/* Token ids [N, T] padded with [PAD] (id 0) and the mask [N, T] (1 = token). */
static int64_t tokenize_batch(kiln_tokenizer *tok, int64_t ids[N][MAXT], int64_t mask[N][MAXT]) {
  int64_t n[N], T = 0;
  for (int i = 0; i < N; i++) {
    kiln_tokenizer_encode(tok, k_sentences[i], strlen(k_sentences[i]), MAXT, ids[i], MAXT, &n[i]);
    if (n[i] > T) T = n[i];
  }
  for (int i = 0; i < N; i++)
    for (int64_t t = 0; t < MAXT; t++) {
      mask[i][t] = t < n[i];
      if (t >= n[i]) ids[i][t] = 0;
    }
  return T;
}

/* Pack the first T columns of a [N, MAXT] array into a [N, T] tensor. */
static kiln_tensor packed(int64_t a[N][MAXT], int64_t T) {
  static int64_t flat[N * MAXT];
  for (int i = 0; i < N; i++) memcpy(flat + i * T, a[i], sizeof(int64_t) * (size_t)T);
  const int64_t shape[2] = {N, T};
  return kiln_from_host(flat, KILN_I64, 2, shape);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "build/models/all-MiniLM-L6-v2";
  char vocab[1024];
  snprintf(vocab, sizeof vocab, "%s/vocab.txt", dir);
  kiln_tokenizer *tok = NULL;
  kiln_bert *model = NULL;
  if (kiln_tokenizer_create(vocab, NULL, &tok) != KILN_OK || kiln_bert_load(dir, &model) != KILN_OK) {
    fprintf(stderr, "%s\n", kiln_last_error());
    return 1;
  }
  static int64_t ids[N][MAXT], mask[N][MAXT];
  int64_t T = tokenize_batch(tok, ids, mask);

  /* inference: one graph for the batch, cut by the read */
  kiln_tensor emb = kiln_bert_embed(model, packed(ids, T), packed(mask, T));
  float e[N][384];
  if (kiln_to_host(emb, e, sizeof e) != KILN_OK) {
    fprintf(stderr, "%s\n", kiln_last_error());
    return 1;
  }
  kiln_mark_step();
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < N; j++) {
      double dot = 0;
      for (int k = 0; k < 384; k++) dot += (double)e[i][k] * e[j][k];
      printf(" %.3f", dot); /* the embeddings are L2-normalised: the dot is the cosine */
    }
    printf("   %s\n", k_sentences[i]);
  }

  /* fine-tuning: pull pairs (0,1) and (2,3) together, (0,2) apart
   * (sentence-transformers' CosineSimilarityLoss) */
  kiln_tensor params[128];
  int np = kiln_bert_params(model, NULL, params, 128);
  for (int i = 0; i < np; i++) kiln_requires_grad(params[i]);
  kiln_optim *opt = NULL;
  kiln_adamw_opts o = {.lr = 2e-5, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim_create_adamw(np, params, &o, &opt);
  static const int64_t pa[3] = {0, 2, 0}, pb[3] = {1, 3, 2};
  static const float label[3] = {1.0f, 1.0f, 0.0f};
  for (int step = 0; step < 5; step++) {
    kiln_tensor x = kiln_bert_embed(model, packed(ids, T), packed(mask, T));
    const int64_t s3[1] = {3};
    kiln_tensor ia = kiln_from_host(pa, KILN_I64, 1, s3);
    kiln_tensor ib = kiln_from_host(pb, KILN_I64, 1, s3);
    const int ax[1] = {1};
    kiln_tensor cos = kiln_sum(kiln_mul(kiln_index_select(x, 0, ia), kiln_index_select(x, 0, ib)), 1, ax, false);
    kiln_tensor d = kiln_sub(cos, kiln_from_host(label, KILN_F32, 1, s3));
    kiln_tensor loss = kiln_mean(kiln_mul(d, d), 0, NULL, false);
    kiln_backward(loss);
    kiln_optim_step(opt);
    printf("step %d: loss %.5f\n", step, kiln_item_f64(loss));
    kiln_optim_zero_grad(opt);
    kiln_mark_step();
  }
  if (argc > 2 && (kiln_bert_save_config(model, argv[2]) != KILN_OK)) fprintf(stderr, "%s\n", kiln_last_error());
  if (argc > 2) {
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", argv[2]);
    if (kiln_bert_save(model, path) != KILN_OK) fprintf(stderr, "%s\n", kiln_last_error());
  }
  int rc = kiln_last_status() != KILN_OK;
  if (rc) fprintf(stderr, "%s\n", kiln_last_error());
  kiln_optim_destroy(opt);
  kiln_bert_destroy(model);
  kiln_tokenizer_destroy(tok);
  kiln_shutdown();
  return rc;
}
