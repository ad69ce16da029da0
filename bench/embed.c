/* Sentence embeddings with all-MiniLM-L6-v2 (issue: real models): the
 * sentences of KILN_BENCH_SENTENCES (bench/embed_sentences.py: 256 of mixed
 * length) with the model folder KILN_BENCH_MODEL, sorted by length, batches
 * of KILN_BENCH_BATCH (32), each padded to a multiple of 8 as `kiln embed`
 * does. Timed: tokenised ids to embeddings on the host (tokenising excluded,
 * as for the PyTorch and ONNX Runtime baselines), best of 3 after a first
 * pass that compiles; the first pass and the compile count are reported.
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
#include "runtime/runtime_internal.h"

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

/* ── diagnostic per-kernel profile (KILN_BENCH_EMBED_PROFILE=1) ──
 * Wraps the backend's execute to add up, per kernel name, the CPU backend's
 * own per-kernel timings (last_kernel_timings) over the timed steps. Not
 * part of the figures: it is how docs/performance.md finds where an embedding pass's
 * time goes. */
enum { PROF_MAX = 512 };
typedef struct prof_row {
  const char *name;
  double ns, flops, bytes;
  long n;
} prof_row;
static prof_row prof_rows[PROF_MAX];
static int prof_n, prof_on;
static kiln_backend_vtable prof_vt;
static const kiln_backend_vtable *prof_orig;

static kiln_status prof_execute(kiln_backend *b, kiln_executable *e, void *const *in, void *const *out,
                                kiln_err *err) {
  kiln_status s = prof_orig->execute(b, e, in, out, err);
  const kiln_kernel_timing *t = NULL;
  int n = prof_on && prof_orig->last_kernel_timings ? prof_orig->last_kernel_timings(b, e, &t) : 0;
  for (int i = 0; i < n; i++) {
    const char *nm = t[i].name ? t[i].name : "?";
    int k = 0;
    while (k < prof_n && strcmp(prof_rows[k].name, nm)) k++;
    if (k == prof_n) {
      if (prof_n == PROF_MAX) continue;
      prof_rows[prof_n++].name = nm; /* owned by the executable, which stays cached */
    }
    prof_rows[k].ns += (double)(t[i].end_ns - t[i].begin_ns);
    prof_rows[k].flops += t[i].flops;
    prof_rows[k].bytes += t[i].bytes;
    prof_rows[k].n++;
  }
  return s;
}

static void prof_install(void) {
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt || !rt->backend) return;
  prof_orig = rt->backend->vt;
  prof_vt = *prof_orig;
  prof_vt.execute = prof_execute;
  rt->backend->vt = &prof_vt;
}

static int prof_cmp(const void *a, const void *b) {
  double x = ((const prof_row *)a)->ns, y = ((const prof_row *)b)->ns;
  return (x < y) - (x > y);
}

static void prof_print(int steps) {
  qsort(prof_rows, (size_t)prof_n, sizeof *prof_rows, prof_cmp);
  double total = 0;
  for (int i = 0; i < prof_n; i++) total += prof_rows[i].ns;
  fprintf(stderr, "per-kernel profile, per pass (%d passes): %d kernels, %.3f ms in kernels\n", steps, prof_n,
          total / steps / 1e6);
  fprintf(stderr, "%8s %6s %9s %9s  %s\n", "ms/pass", "%", "GFLOP/s", "GB/s", "kernel");
  for (int i = 0; i < prof_n; i++) {
    const prof_row *r = &prof_rows[i];
    fprintf(stderr, "%8.3f %5.1f%% %9.1f %9.1f  %s\n", r->ns / steps / 1e6, 100 * r->ns / total,
            r->ns > 0 ? r->flops / r->ns : 0, r->ns > 0 ? r->bytes / r->ns : 0, r->name);
  }
}

static double env_num(const char *k) {
  const char *v = getenv(k);
  return v && *v ? atof(v) : 0;
}

/* one pass over every batch; returns seconds */
static double pass(kiln_bert *m, sent *s, const int *order, int n, int batch) {
  static int64_t ids[64 * MAXT], mask[64 * MAXT];
  static float out[64 * 384];
  double t0 = kb_now_s();
  for (int i = 0; i < n; i += batch) {
    int B = n - i < batch ? n - i : batch;
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
  if (prof_on) prof_print(3);
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
