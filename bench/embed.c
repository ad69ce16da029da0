/* Sentence embeddings with all-MiniLM-L6-v2 (issue: real models): the
 * sentences of KILN_BENCH_SENTENCES (bench/embed_sentences.py: 256 of mixed
 * length) with the model folder KILN_BENCH_MODEL, sorted by length, batches
 * of KILN_BENCH_BATCH (32), run ragged as `kiln embed` does
 * (kiln_bert_embed_ragged: the per-token layers on the real tokens, attention
 * on the sentences padded to a multiple of 8; KILN_BENCH_EMBED_PADDED=1: the
 * padded batch through kiln_bert_embed, for comparison). Timed: tokenised
 * ids to embeddings on the host (tokenising excluded, as for the PyTorch and
 * ONNX Runtime baselines, which run the padded batches), best of 3 after a
 * first pass that compiles; the first pass and the compile count are
 * reported.
 *
 * Baselines (environment, from bench/run.sh, bench/embed_ref.py in the same
 * run): KILN_BENCH_TORCH_EMBED_MS (transformers in PyTorch eager,
 * inference_mode, same threads), KILN_BENCH_ORT_EMBED_MS (ONNX Runtime on the
 * model exported with torch.onnx.export), KILN_BENCH_ST_EMBED_MS
 * (sentence-transformers' encode, tokenising included: informational). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "kiln/bert.h"
#include "kiln/text.h"

/* Internal, for the diagnostic per-kernel profile only (KILN_BENCH_EMBED_PROFILE). */
#include "kernel_profile.h"

#define MAXT 256

typedef struct sent {
  int64_t ids[MAXT];
  int64_t n;
} sent;

static sent *g_s;
static int by_len(const void *a, const void *b) {
  int64_t x = g_s[*(const int *)a].n, y = g_s[*(const int *)b].n;
  return x < y ? -1 : x > y;
}

/* KILN_BENCH_EMBED_PROFILE=1: the per-kernel profile of the timed passes (kernel_profile.h). */

static double env_num(const char *k) {
  const char *v = getenv(k);
  return v && *v ? atof(v) : 0;
}

/* one pass over every batch; returns seconds */
static double pass(kiln_bert *m, sent *s, const int *order, int n, int batch) {
  static int64_t ids[64 * MAXT], mask[64 * MAXT], lens[64];
  static float out[64 * 384];
  double t0 = kb_now_s();
  for (int i = 0; i < n; i += batch) {
    int B = n - i < batch ? n - i : batch;
    if (!getenv("KILN_BENCH_EMBED_PADDED")) { /* the sentences back to back (kiln_bert_embed_ragged) */
      int64_t N = 0;
      for (int b = 0; b < B; b++) {
        const sent *x = &s[order[i + b]];
        memcpy(ids + N, x->ids, sizeof(int64_t) * (size_t)x->n);
        lens[b] = x->n, N += x->n;
      }
      KB_CHECK(kiln_to_host(kiln_bert_embed_ragged(m, ids, lens, B), out, sizeof(float) * (size_t)B * 384));
      kiln_mark_step();
      continue;
    }
    int64_t T = (s[order[i + B - 1]].n + 7) / 8 * 8;
    if (T > MAXT) T = MAXT;
    for (int b = 0; b < B; b++)
      for (int64_t t = 0; t < T; t++) {
        const sent *x = &s[order[i + b]];
        ids[b * T + t] = t < x->n ? x->ids[t] : 0;
        mask[b * T + t] = t < x->n;
      }
    const int64_t shape[2] = {B, T};
    kiln_tensor e = kiln_bert_embed(m, kiln_from_host(ids, KILN_I64, 2, shape), kiln_from_host(mask, KILN_I64, 2, shape));
    KB_CHECK(kiln_to_host(e, out, sizeof(float) * (size_t)B * 384));
    kiln_mark_step();
  }
  return kb_now_s() - t0;
}

int main(void) {
  const char *dir = getenv("KILN_BENCH_MODEL"), *path = getenv("KILN_BENCH_SENTENCES");
  int batch = env_num("KILN_BENCH_BATCH") > 0 ? (int)env_num("KILN_BENCH_BATCH") : 32;
  if (!dir || !path || batch > 64) {
    fprintf(stderr, "embed: set KILN_BENCH_MODEL and KILN_BENCH_SENTENCES (bench/run.sh does); batch <= 64\n");
    return 1;
  }
  KB_CHECK(kiln_init(NULL));
  char vocab[1024];
  snprintf(vocab, sizeof vocab, "%s/vocab.txt", dir);
  kiln_tokenizer *tok = NULL;
  kiln_bert *m = NULL;
  KB_CHECK(kiln_tokenizer_create(vocab, NULL, &tok));
  KB_CHECK(kiln_bert_load(dir, &m));
  FILE *f = fopen(path, "r");
  if (!f) return 1;
  static sent s[1024];
  static int order[1024];
  int n = 0, tokens = 0;
  char line[65536];
  while (n < 1024 && fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\n");
    KB_CHECK(kiln_tokenizer_encode(tok, line, len, MAXT, s[n].ids, MAXT, &s[n].n));
    tokens += (int)s[n].n;
    order[n] = n;
    n++;
  }
  fclose(f);
  g_s = s;
  qsort(order, (size_t)n, sizeof *order, by_len);
  int64_t c0 = kiln_counter_value("UncachedCompile");
  double cold = pass(m, s, order, n, batch);
  if (getenv("KILN_BENCH_EMBED_PROFILE")) {
    prof_install();
    prof_on = 1;
  }
  int64_t compiles = kiln_counter_value("UncachedCompile") - c0;
  double best = 1e30;
  for (int r = 0; r < 3; r++) {
    double t = pass(m, s, order, n, batch);
    if (t < best) best = t;
  }
  double ms = best * 1e3;
  if (prof_on) prof_print(3, "pass", PROF_MAX);
  int threads = kb_threads();
  printf("embed: %d sentences, %d tokens, batch %d, %d threads: %.1f ms (%.0f sentences/s); first pass %.1f ms with "
         "%lld compiles\n",
         n, tokens, batch, threads, ms, n / best, cold * 1e3, (long long)compiles);
  char base[128], name[64];
  double torch_ms = env_num("KILN_BENCH_TORCH_EMBED_MS"), ort_ms = env_num("KILN_BENCH_ORT_EMBED_MS"),
         st_ms = env_num("KILN_BENCH_ST_EMBED_MS");
  const char *tv = getenv("KILN_BENCH_TORCH_VERSION"), *ov = getenv("KILN_BENCH_ORT_VERSION");
  snprintf(name, sizeof name, "embed_%d_ms", n);
  snprintf(base, sizeof base, "PyTorch %s eager, inference_mode, %dt (same run)%s", tv ? tv : "", threads,
           torch_ms > 0 ? "" : " (missing)");
  kb_emit(&(kb_result){name, ms, "ms", base, torch_ms, "<= 0.6x PyTorch", torch_ms > 0 && ms <= 0.6 * torch_ms});
  snprintf(name, sizeof name, "embed_%d_ms_vs_onnxruntime", n);
  snprintf(base, sizeof base, "ONNX Runtime %s, %dt (same run)%s", ov ? ov : "", threads, ort_ms > 0 ? "" : " (missing)");
  kb_emit(&(kb_result){name, ms, "ms", base, ort_ms, "<= 1.0x ONNX Runtime", ort_ms > 0 && ms <= ort_ms});
  if (st_ms > 0) {
    snprintf(name, sizeof name, "embed_%d_ms_vs_st_encode", n);
    kb_emit(&(kb_result){name, ms, "ms", "sentence-transformers encode, tokenising included (same run)", st_ms,
                         "- (no bar)", 1});
  }
  snprintf(name, sizeof name, "embed_%d_compiles", n);
  kb_emit(&(kb_result){name, (double)compiles, "compiles", "batches", (double)((n + batch - 1) / batch),
                       "- (report)", 1});
  kiln_bert_destroy(m);
  kiln_tokenizer_destroy(tok);
  kiln_shutdown();
  return 0;
}
