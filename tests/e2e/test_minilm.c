/* all-MiniLM-L6-v2 end to end, against sentence-transformers: every sentence
 * of tests/data/minilm_sentences.txt embedded by kiln (its tokenizer, its
 * BERT encoder, batches of mixed lengths with padding masks) has cosine >=
 * 0.99999 and max abs difference <= 1e-5 with the reference embedding
 * (tests/data/minilm_reference.txt, written by minilm_reference.py with
 * transformers/sentence-transformers), and its token ids are identical;
 * `kiln embed` prints the same embeddings and ids in input order. Needs only
 * the model package's files (the minilm_model fixture: scripts/fetch-model.sh),
 * not PyTorch. */
#include <kiln/bert.h>
#include <kiln/text.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kt.h"

#define MAXS 64
#define DIM 384

typedef struct ref {
  int n;
  char *text[MAXS];
  size_t len[MAXS];
  int nid[MAXS];
  int64_t ids[MAXS][256];
  double emb[MAXS][DIM];
} ref;

static ref g_ref;
static char *g_sent_buf;
static const char *g_dir, *g_data;

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)sz + 1);
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
    free(b);
    b = NULL;
  }
  if (b) b[sz] = 0;
  fclose(f);
  *n = (size_t)sz;
  return b;
}

static int load_reference(void) {
  if (g_ref.n) return 0; /* read by an earlier case */
  g_dir = getenv("KILN_MINILM_DIR");
  g_data = getenv("KILN_TEST_DATA");
  if (!g_dir || !g_data) {
    KT_FAIL("KILN_MINILM_DIR and KILN_TEST_DATA must be set (ctest sets them; scripts/fetch-model.sh fetches the model)");
    return -1;
  }
  char path[1024];
  size_t ns = 0, nr = 0;
  snprintf(path, sizeof path, "%s/minilm_sentences.txt", g_data);
  g_sent_buf = slurp(path, &ns);
  snprintf(path, sizeof path, "%s/minilm_reference.txt", g_data);
  char *r = slurp(path, &nr);
  if (!g_sent_buf || !r) {
    KT_FAIL("cannot read the sentences or the reference in %s", g_data);
    free(r);
    return -1;
  }
  /* sentences: split on '\n' only (one holds a NUL byte) */
  for (char *s = g_sent_buf; s < g_sent_buf + ns && g_ref.n < MAXS; g_ref.n++) {
    char *nl = memchr(s, '\n', (size_t)(g_sent_buf + ns - s));
    size_t len = nl ? (size_t)(nl - s) : (size_t)(g_sent_buf + ns - s);
    g_ref.text[g_ref.n] = s;
    g_ref.len[g_ref.n] = len;
    s += len + 1;
  }
  for (int i = 0; i < g_ref.n; i++) {
    char key[32];
    snprintf(key, sizeof key, "\nids %d ", i);
    char *p = strstr(r, key), *e;
    KT_CHECK_MSG(p, "no reference ids for sentence %d", i);
    if (!p) break;
    p += strlen(key);
    g_ref.nid[i] = (int)strtol(p, &p, 10);
    for (int j = 0; j < g_ref.nid[i] && j < 256; j++) g_ref.ids[i][j] = strtoll(p, &p, 10);
    snprintf(key, sizeof key, "\nemb %d %d ", i, DIM);
    p = strstr(r, key);
    KT_CHECK_MSG(p, "no reference embedding for sentence %d", i);
    if (!p) break;
    p += strlen(key);
    for (int j = 0; j < DIM; j++) {
      g_ref.emb[i][j] = strtod(p, &e);
      p = e;
    }
  }
  free(r);
  return 0;
}

/* cosine and max abs difference of got vs sentence i's reference */
static void compare(int i, const float *got, const char *how) {
  double dot = 0, na = 0, nb = 0, mx = 0;
  for (int j = 0; j < DIM; j++) {
    double a = got[j], b = g_ref.emb[i][j];
    dot += a * b, na += a * a, nb += b * b;
    if (fabs(a - b) > mx) mx = fabs(a - b);
  }
  double cosine = dot / sqrt(na * nb);
  KT_CHECK_MSG(cosine >= 0.99999 && mx <= 1e-5, "%s: sentence %d: cosine %.9f, max abs difference %.3g", how, i,
               cosine, mx);
}

/* The library: batches of 5 sentences in file order (mixed lengths, padded
 * to the batch's longest, masked), and the same batches ragged
 * (kiln_bert_embed_ragged). */
KT_TEST(library_embeddings_match_sentence_transformers) {
  if (load_reference()) return;
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  char path[1024];
  snprintf(path, sizeof path, "%s/vocab.txt", g_dir);
  kiln_tokenizer *tok = NULL;
  kiln_bert *m = NULL;
  KT_CHECK_MSG(kiln_tokenizer_create(path, NULL, &tok) == KILN_OK, "%s", kiln_last_error());
  KT_CHECK_MSG(kiln_bert_load(g_dir, &m) == KILN_OK, "%s", kiln_last_error());
  if (!tok || !m) goto out;
  int64_t ragged_compiles = 0, padded_compiles = 0;
  for (int i0 = 0; i0 < g_ref.n; i0 += 5) {
    int B = g_ref.n - i0 < 5 ? g_ref.n - i0 : 5;
    static int64_t ids[5][256];
    int64_t n[5], T = 0;
    for (int b = 0; b < B; b++) {
      KT_CHECK(kiln_tokenizer_encode(tok, g_ref.text[i0 + b], g_ref.len[i0 + b], 256, ids[b], 256, &n[b]) == KILN_OK);
      KT_CHECK_MSG(n[b] == g_ref.nid[i0 + b] && !memcmp(ids[b], g_ref.ids[i0 + b], sizeof(int64_t) * (size_t)n[b]),
                   "sentence %d: token ids differ", i0 + b);
      if (n[b] > T) T = n[b];
    }
    static int64_t flat[5 * 256], fmask[5 * 256];
    for (int b = 0; b < B; b++)
      for (int64_t t = 0; t < T; t++) {
        flat[b * T + t] = t < n[b] ? ids[b][t] : 0;
        fmask[b * T + t] = t < n[b];
      }
    const int64_t s[2] = {B, T};
    static float out[5 * DIM];
    int64_t p0 = kiln_counter_value("UncachedCompile");
    kiln_tensor e = kiln_bert_embed(m, kiln_from_host(flat, KILN_I64, 2, s), kiln_from_host(fmask, KILN_I64, 2, s));
    KT_CHECK_MSG(kiln_to_host(e, out, sizeof(float) * (size_t)(B * DIM)) == KILN_OK, "%s", kiln_last_error());
    padded_compiles += kiln_counter_value("UncachedCompile") - p0;
    for (int b = 0; b < B; b++) compare(i0 + b, out + b * DIM, "library");
    kiln_mark_step();
    /* the same batch ragged: the sentences' ids back to back, no padding */
    static int64_t packed[5 * 256];
    int64_t k = 0;
    for (int b = 0; b < B; b++) memcpy(packed + k, ids[b], sizeof(int64_t) * (size_t)n[b]), k += n[b];
    int64_t c0 = kiln_counter_value("UncachedCompile");
    e = kiln_bert_embed_ragged(m, packed, n, B);
    KT_CHECK_MSG(kiln_to_host(e, out, sizeof(float) * (size_t)(B * DIM)) == KILN_OK, "%s", kiln_last_error());
    ragged_compiles += kiln_counter_value("UncachedCompile") - c0;
    for (int b = 0; b < B; b++) compare(i0 + b, out + b * DIM, "library, ragged");
    kiln_mark_step();
  }
  /* the ragged batches' token counts and padded lengths vary (32 to 80 here):
   * one compile for the batches of 5, one for the last of 1 */
  KT_CHECK_MSG(ragged_compiles <= 2, "ragged batches compiled %lld times", (long long)ragged_compiles);
  /* padded, the automatic rule: the first [5, T], then once for any T; the
   * last batch of 1 on its own */
  KT_CHECK_MSG(padded_compiles <= 3, "padded batches compiled %lld times", (long long)padded_compiles);
out:
  kiln_bert_destroy(m);
  kiln_tokenizer_destroy(tok);
  kiln_shutdown();
}

/* `kiln embed` (length-sorted batches of 4, and of 1: chunks of 64 lines) and
 * `kiln embed --ids` on three copies of the sentences, output in input order */
static void run_cli(const char *flags, const char *out_path) {
  char self[4096], cmd[16384];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  self[k > 0 ? k : 0] = 0;
  for (int i = 0; i < 2; i++) { /* <build>/bin/tests/test_minilm -> <build>/bin */
    char *s = strrchr(self, '/');
    if (s) *s = 0;
  }
  /* three copies of the sentences: with --batch 1 the input is read in chunks of 64 lines */
  snprintf(cmd, sizeof cmd, "cat '%s/minilm_sentences.txt' '%s/minilm_sentences.txt' '%s/minilm_sentences.txt' | "
           "'%s/kiln' embed --model '%s' %s > '%s'", g_data, g_data, g_data, self, g_dir, flags, out_path);
  KT_CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
}

KT_TEST(kiln_embed_prints_the_same) {
  if (!g_ref.n && load_reference()) return;
  char out[] = "/tmp/kiln-test-minilm-XXXXXX";
  int fd = mkstemp(out);
  KT_CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  static const char *const batches[2] = {"--batch 4", "--batch 1"};
  for (int run = 0; run < 2; run++) {
    run_cli(batches[run], out);
    FILE *f = fopen(out, "r");
    static float got[DIM];
    int line = 0;
    for (; f && line < 3 * g_ref.n; line++) {
      int j = 0;
      while (j < DIM && fscanf(f, "%f", &got[j]) == 1) j++;
      KT_CHECK_MSG(j == DIM, "kiln embed %s: line %d has %d numbers", batches[run], line + 1, j);
      compare(line % g_ref.n, got, batches[run]);
    }
    KT_EQ_INT(line, 3 * g_ref.n);
    if (f) fclose(f);
  }
  FILE *f;
  int line;
  run_cli("--ids", out);
  f = fopen(out, "r");
  char buf[8192];
  for (line = 0; f && fgets(buf, sizeof buf, f); line++) {
    char *p = buf;
    int j = 0, same = 1;
    int r = line % (g_ref.n ? g_ref.n : 1);
    for (long long v; line < 3 * g_ref.n && sscanf(p, "%lld", &v) == 1; j++) {
      same &= j < g_ref.nid[r] && v == g_ref.ids[r][j];
      while (*p == ' ') p++;
      while (*p && *p != ' ' && *p != '\n') p++;
    }
    KT_CHECK_MSG(same && j == g_ref.nid[r], "kiln embed --ids: line %d differs", line + 1);
  }
  KT_EQ_INT(line, 3 * g_ref.n);
  if (f) fclose(f);
  unlink(out);
}

/* `kiln embed` takes the tokenizer's normalization and the default length
 * from the folder as sentence-transformers does: a folder of the same files
 * but tokenizer_config.json's do_lower_case false and model_max_length 16,
 * and no sentence_bert_config.json. Expected ids from transformers 4.45:
 * BertTokenizerFast.from_pretrained(DIR, do_lower_case=False)("Hello WORLD Café")
 * and (..., model_max_length=16)(" ".join(["word"] * 40), truncation=True). */
static int run_embed_in(const char *dir, const char *input, const char *flags, char *out, size_t cap) {
  char self[4096], cmd[12288];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  self[k > 0 ? k : 0] = 0;
  for (int i = 0; i < 2; i++) {
    char *s = strrchr(self, '/');
    if (s) *s = 0;
  }
  snprintf(cmd, sizeof cmd, "printf '%s\\n' | '%s/kiln' embed --model '%s' %s 2>&1", input, self, dir, flags);
  FILE *p = popen(cmd, "r");
  size_t n = p ? fread(out, 1, cap - 1, p) : 0;
  out[n] = 0;
  return p ? pclose(p) : -1;
}

/* A folder of the model's files, linked (vocab, config, weights): a test
 * adds what it checks and removes it with unlink_model_files. */
static const char *const k_links[3] = {"vocab.txt", "config.json", "model.safetensors"};
static void link_model_files(const char *dir) {
  char p[4200], q[4200];
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/%s", g_dir, k_links[i]);
    snprintf(q, sizeof q, "%s/%s", dir, k_links[i]);
    KT_CHECK(symlink(p, q) == 0);
  }
}
static void unlink_model_files(const char *dir) {
  char q[4200];
  for (int i = 0; i < 3; i++) {
    snprintf(q, sizeof q, "%s/%s", dir, k_links[i]);
    unlink(q);
  }
  rmdir(dir);
}

KT_TEST(kiln_embed_reads_the_folders_tokenizer_config) {
  if (load_reference()) return; /* the model folder's path */
  char dir[] = "/tmp/kiln-test-minilm-dir-XXXXXX", q[4200], out[8192];
  KT_CHECK(mkdtemp(dir) != NULL);
  link_model_files(dir);
  snprintf(q, sizeof q, "%s/tokenizer_config.json", dir);
  FILE *f = fopen(q, "w");
  KT_CHECK(f != NULL);
  if (f) fputs("{\"do_lower_case\": false, \"strip_accents\": null, \"model_max_length\": 16}\n", f), fclose(f);
  KT_EQ_INT(run_embed_in(dir, "Hello WORLD Café", "--ids", out, sizeof out), 0);
  KT_STR_CONTAINS(out, "101 100 100 100 102\n");
  KT_EQ_INT(run_embed_in(dir, "word word word word word word word word word word word word word word word word word",
                         "--ids", out, sizeof out), 0);
  KT_STR_CONTAINS(out, "101 2773 2773 2773 2773 2773 2773 2773 2773 2773 2773 2773 2773 2773 2773 102\n");
  /* more tokens than the model's positions: an error naming the line, not a crash or a batch index */
  char longer[4200] = "x\n";
  for (int i = 0; i < 600; i++) strcat(longer, "a ");
  KT_CHECK(run_embed_in(dir, longer, "--max-length 1000", out, sizeof out) != 0);
  KT_STR_CONTAINS(out, "line 2 has 602 tokens, more than the model's 512 positions");
  if (f) {
    f = fopen(q, "w");
    if (f) fputs("{\"tokenize_chinese_chars\": false}", f), fclose(f);
  }
  KT_CHECK(run_embed_in(dir, "hi", "--ids", out, sizeof out) != 0);
  KT_STR_CONTAINS(out, "tokenize_chinese_chars false is not supported");
  unlink(q);
  unlink_model_files(dir);
}

/* ── the folder's Pooling module ──
 * A sentence-transformers folder says in modules.json and its Pooling
 * module's config.json how hidden states become the embedding. The same
 * weights with CLS or max pooling must embed as sentence-transformers does
 * (tests/data/pooling_reference.txt, written by pooling_reference.py); a
 * module kiln does not compute (Dense, mean_sqrt_len pooling, several modes
 * at once) is refused by name rather than embedded otherwise. */

static void write_text(const char *dir, const char *name, const char *text) {
  char q[4200];
  snprintf(q, sizeof q, "%s/%s", dir, name);
  FILE *f = fopen(q, "w");
  KT_CHECK_MSG(f != NULL, "cannot write %s", q);
  if (f) fputs(text, f), fclose(f);
}

static const char k_modules[] =
    "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},\n"
    " {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"},\n"
    " {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Normalize\",\n"
    "  \"type\": \"sentence_transformers.models.Normalize\"}]\n";

static void write_pooling(const char *dir, int cls, int mean, int max, int sqrt_len, int dim) {
  char json[512];
  snprintf(json, sizeof json,
           "{\"word_embedding_dimension\": %d, \"pooling_mode_cls_token\": %s, \"pooling_mode_mean_tokens\": %s, "
           "\"pooling_mode_max_tokens\": %s, \"pooling_mode_mean_sqrt_len_tokens\": %s}\n",
           dim, cls ? "true" : "false", mean ? "true" : "false", max ? "true" : "false", sqrt_len ? "true" : "false");
  write_text(dir, "1_Pooling/config.json", json);
}

/* Embed sentences 0..7 in ragged batches of 4 and compare with the rows
 * "pool <mode> i 384 ..." of the reference r */
static void compare_pooling(const char *dir, const char *mode, const char *r, kiln_tokenizer *tok) {
  kiln_bert *m = NULL;
  KT_CHECK_MSG(kiln_bert_load(dir, &m) == KILN_OK, "%s: %s", mode, kiln_last_error());
  if (!m) return;
  for (int i0 = 0; i0 < 8; i0 += 4) {
    static int64_t packed[4 * 256];
    int64_t n[4], k = 0;
    for (int b = 0; b < 4; b++) {
      KT_CHECK(kiln_tokenizer_encode(tok, g_ref.text[i0 + b], g_ref.len[i0 + b], 256, packed + k, 256, &n[b]) ==
               KILN_OK);
      k += n[b];
    }
    static float out[4 * DIM];
    KT_CHECK_MSG(kiln_to_host(kiln_bert_embed_ragged(m, packed, n, 4), out, sizeof out) == KILN_OK, "%s",
                 kiln_last_error());
    kiln_mark_step();
    for (int b = 0; b < 4; b++) {
      char key[48];
      snprintf(key, sizeof key, "\npool %s %d %d ", mode, i0 + b, DIM);
      const char *p = strstr(r, key);
      KT_CHECK_MSG(p != NULL, "no reference row%s", key);
      if (!p) continue;
      p += strlen(key);
      double dot = 0, na = 0, nb = 0, mx = 0;
      for (int j = 0; j < DIM; j++) {
        char *e;
        double want = strtod(p, &e), got = out[b * DIM + j];
        p = e;
        dot += got * want, na += got * got, nb += want * want;
        if (fabs(got - want) > mx) mx = fabs(got - want);
      }
      double cosine = dot / sqrt(na * nb);
      KT_CHECK_MSG(cosine >= 0.99999 && mx <= 1e-5, "%s pooling: sentence %d: cosine %.9f, max abs difference %.3g",
                   mode, i0 + b, cosine, mx);
    }
  }
  kiln_bert_destroy(m);
}

static void expect_refused(const char *dir, const char *what, const char *want) {
  kiln_bert *m = NULL;
  KT_CHECK_MSG(kiln_bert_load(dir, &m) != KILN_OK && m == NULL, "%s: loaded", what);
  KT_CHECK_MSG(strstr(kiln_last_error(), want) != NULL, "%s: error \"%s\" does not name %s", what,
               kiln_last_error(), want);
  kiln_clear_error();
}

KT_TEST(the_folders_pooling_module_is_what_embeds) {
  if (load_reference()) return;
  char dir[] = "/tmp/kiln-test-minilm-pool-XXXXXX", p[4200], q[4200];
  KT_CHECK(mkdtemp(dir) != NULL);
  link_model_files(dir);
  snprintf(q, sizeof q, "%s/1_Pooling", dir);
  KT_CHECK(mkdir(q, 0700) == 0);
  snprintf(p, sizeof p, "%s/pooling_reference.txt", g_data);
  size_t nr = 0;
  char *r = slurp(p, &nr);
  KT_CHECK_MSG(r != NULL, "cannot read %s", p);
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  snprintf(p, sizeof p, "%s/vocab.txt", g_dir);
  kiln_tokenizer *tok = NULL;
  KT_CHECK_MSG(kiln_tokenizer_create(p, NULL, &tok) == KILN_OK, "%s", kiln_last_error());
  write_text(dir, "modules.json", k_modules);
  if (r && tok) {
    write_pooling(dir, 1, 0, 0, 0, DIM);
    compare_pooling(dir, "cls", r, tok);
    write_pooling(dir, 0, 0, 1, 0, DIM);
    compare_pooling(dir, "max", r, tok);
  }
  write_pooling(dir, 0, 0, 0, 1, DIM);
  expect_refused(dir, "mean_sqrt_len pooling", "pooling_mode_mean_sqrt_len_tokens pooling is not supported");
  write_pooling(dir, 1, 1, 0, 0, DIM);
  expect_refused(dir, "two pooling modes", "a concatenation of several pooling");
  write_pooling(dir, 0, 0, 0, 0, DIM);
  expect_refused(dir, "no pooling mode", "no pooling is not supported");
  write_pooling(dir, 0, 1, 0, 0, 768);
  expect_refused(dir, "another dimension", "word_embedding_dimension 768");
  write_pooling(dir, 0, 1, 0, 0, DIM);
  write_text(dir, "modules.json", "[{\"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},"
                                  " {\"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"},"
                                  " {\"path\": \"2_Dense\", \"type\": \"sentence_transformers.models.Dense\"}]");
  expect_refused(dir, "a Dense module", "module \"sentence_transformers.models.Dense\" is not supported");
  write_text(dir, "modules.json", "[{\"path\": \"../elsewhere\", \"type\": \"sentence_transformers.models.Pooling\"}]");
  expect_refused(dir, "a path out of the folder", "is not a folder inside the model's");
  write_text(dir, "modules.json", "{\"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}");
  expect_refused(dir, "an object, not an array", "is not a JSON array of modules");
  kiln_tokenizer_destroy(tok);
  kiln_shutdown();
  free(r);
  snprintf(q, sizeof q, "%s/1_Pooling/config.json", dir);
  unlink(q);
  snprintf(q, sizeof q, "%s/1_Pooling", dir);
  rmdir(q);
  snprintf(q, sizeof q, "%s/modules.json", dir);
  unlink(q);
  unlink_model_files(dir);
}

/* ── the folder's added tokens and WordPiece settings ──
 * transformers takes added tokens (tokenizer.json's added_tokens,
 * tokenizer_config.json's added_tokens_decoder, added_tokens.json), renamed
 * or additional special tokens and the WordPiece settings from the folder:
 * after tokenizer.add_tokens(["kilnword"]) and save_pretrained,
 * "hello kilnword" is [101, 7592, 30522, 102] (transformers 4.45), where a
 * tokenizer that does not read them splits the word into pieces. kiln's
 * tokenizer knows BERT's five special tokens and the default WordPiece, so
 * such a folder is refused by name (it embedded with other ids before). */

static void expect_text_refused(const char *dir, const char *what, const char *want) {
  kiln_tokenizer_options o;
  int64_t len = 0;
  KT_CHECK_MSG(kiln_bert_text_options(dir, &o, &len) == KILN_ERR_UNSUPPORTED, "%s: accepted", what);
  KT_CHECK_MSG(strstr(kiln_last_error(), want) != NULL, "%s: error \"%s\" does not name %s", what,
               kiln_last_error(), want);
  kiln_clear_error();
}

static const char k_added_ok[] =
    "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 0, \"content\": \"[PAD]\", \"special\": true},\n"
    " {\"id\": 100, \"content\": \"[UNK]\"}, {\"id\": 101, \"content\": \"[CLS]\"},"
    " {\"id\": 102, \"content\": \"[SEP]\"}, {\"id\": 103, \"content\": \"[MASK]\"}%s],\n"
    " \"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": %s, \"handle_chinese_chars\": true,"
    " \"strip_accents\": null, \"lowercase\": true},\n"
    " \"pre_tokenizer\": {\"type\": \"%s\"},\n"
    " \"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"%s\","
    " \"max_input_chars_per_word\": %d, \"vocab\": {\"[PAD]\": 0, \"{\": 1}}}\n";

static void write_tokenizer_json(const char *dir, const char *extra, const char *clean, const char *pre,
                                 const char *prefix, int max_chars) {
  char json[2048];
  snprintf(json, sizeof json, k_added_ok, extra, clean, pre, prefix, max_chars);
  write_text(dir, "tokenizer.json", json);
}

KT_TEST(the_folders_added_tokens_are_refused) {
  if (load_reference()) return;
  kiln_tokenizer_options o;
  int64_t len = 0;
  /* the published folder passes */
  KT_CHECK_MSG(kiln_bert_text_options(g_dir, &o, &len) == KILN_OK, "%s", kiln_last_error());
  char dir[] = "/tmp/kiln-test-minilm-added-XXXXXX", q[4200], out[8192];
  KT_CHECK(mkdtemp(dir) != NULL);
  link_model_files(dir);
  write_tokenizer_json(dir, "", "true", "BertPreTokenizer", "##", 100);
  KT_CHECK_MSG(kiln_bert_text_options(dir, &o, &len) == KILN_OK, "%s", kiln_last_error());
  write_tokenizer_json(dir, ", {\"id\": 30522, \"content\": \"kilnword\", \"normalized\": true}", "true",
                       "BertPreTokenizer", "##", 100);
  expect_text_refused(dir, "an added token", "tokenizer.json: added token \"kilnword\" (id 30522) is not supported");
  KT_CHECK(run_embed_in(dir, "hello kilnword", "--ids", out, sizeof out) != 0);
  KT_STR_CONTAINS(out, "added token \"kilnword\" (id 30522) is not supported");
  write_tokenizer_json(dir, "", "true", "BertPreTokenizer", "@@", 100);
  expect_text_refused(dir, "another subword prefix", "model.continuing_subword_prefix \"@@\" is not supported");
  write_tokenizer_json(dir, "", "true", "BertPreTokenizer", "##", 200);
  expect_text_refused(dir, "a longer word limit", "model.max_input_chars_per_word 200 is not supported");
  write_tokenizer_json(dir, "", "false", "BertPreTokenizer", "##", 100);
  expect_text_refused(dir, "no text cleaning", "normalizer.clean_text false is not supported");
  write_tokenizer_json(dir, "", "true", "Whitespace", "##", 100);
  expect_text_refused(dir, "another pre-tokenizer", "pre_tokenizer.type \"Whitespace\" is not supported");
  snprintf(q, sizeof q, "%s/tokenizer.json", dir);
  unlink(q);
  write_text(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {\"0\": {\"content\": \"[PAD]\"},"
                                           " \"30524\": {\"content\": \"<ent>\", \"special\": true}}}");
  expect_text_refused(dir, "added_tokens_decoder", "tokenizer_config.json: added token \"<ent>\" is not supported");
  write_text(dir, "tokenizer_config.json", "{\"cls_token\": \"<s>\", \"do_lower_case\": true}");
  expect_text_refused(dir, "a renamed [CLS]",
                      "cls_token \"<s>\" is not supported (kiln's tokenizer uses BERT's [CLS])");
  snprintf(q, sizeof q, "%s/tokenizer_config.json", dir);
  unlink(q);
  write_text(dir, "special_tokens_map.json", "{\"mask_token\": {\"content\": \"<mask>\", \"lstrip\": true}}");
  expect_text_refused(dir, "a renamed [MASK]", "special_tokens_map.json: mask_token \"<mask>\" is not supported");
  write_text(dir, "special_tokens_map.json", "{\"additional_special_tokens\": [{\"content\": \"<ent>\"}],"
                                             " \"cls_token\": {\"content\": \"[CLS]\"}}");
  expect_text_refused(dir, "additional special tokens", "additional_special_tokens ({\"content\"");
  write_text(dir, "special_tokens_map.json", "{\"additional_special_tokens\": [], \"unk_token\": \"[UNK]\"}");
  KT_CHECK_MSG(kiln_bert_text_options(dir, &o, &len) == KILN_OK, "%s", kiln_last_error());
  snprintf(q, sizeof q, "%s/special_tokens_map.json", dir);
  unlink(q);
  write_text(dir, "added_tokens.json", "{\"[MASK]\": 103, \"kilnword\": 30522}");
  expect_text_refused(dir, "added_tokens.json", "added_tokens.json: added token \"kilnword\" is not supported");
  snprintf(q, sizeof q, "%s/added_tokens.json", dir);
  unlink(q);
  KT_CHECK_MSG(kiln_bert_text_options(dir, &o, &len) == KILN_OK, "%s", kiln_last_error());
  unlink_model_files(dir);
}

KT_MAIN(KT_CASE(library_embeddings_match_sentence_transformers), KT_CASE(kiln_embed_prints_the_same),
        KT_CASE(kiln_embed_reads_the_folders_tokenizer_config), KT_CASE(the_folders_pooling_module_is_what_embeds),
        KT_CASE(the_folders_added_tokens_are_refused))
