/* `kiln embed --model DIR [--batch N] [--ids] [--max-length N] [--stats]`:
 * sentence embeddings of the lines of standard input (UTF-8), one output
 * line per input line, in input order: the L2-normalised embedding as
 * space-separated decimals (%.9g), or with --ids the token ids.
 *
 * DIR is a model folder as published (config.json, vocab.txt,
 * model.safetensors; the default --max-length and the tokenizer's
 * lower-casing and accent stripping are sentence-transformers': from
 * sentence_bert_config.json, tokenizer_config.json, config.json). Input is
 * read 64 batches (at most 8192 sentences) at a time (memory bounded by that, not by the input), and
 * in each such chunk sentences are sorted by length and batched (--batch,
 * default 32) so that padding is small. An error (invalid UTF-8, a line
 * longer than the model's positions) stops the run with status 1 after the
 * output of the chunks before. A batch runs
 * ragged (kiln_bert_embed_ragged): the per-token layers on its tokens alone,
 * attention on the sentences padded to the longest, rounded up to a
 * multiple of 8 (at most the maximum), which bounds the number of distinct
 * shapes, hence compiles (the token count is a dynamic dimension). Padding
 * is masked: it does not change any embedding. --stats prints the batches,
 * the tokens, the attention's padded positions and the compiles to standard
 * error. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/bert.h"
#include "kiln/kiln.h"
#include "kiln/text.h"
#include "tools/cli.h"
#include "tools/embed.h"

typedef struct sentence {
  int64_t *ids;
  int64_t n;
  float *emb;
} sentence;

typedef struct embed_opts {
  const char *dir;
  long long batch, max_len;
  int ids_only, stats;
} embed_opts;

static int usage(const char *msg, const char *arg) {
  if (msg) {
    fprintf(stderr, "kiln embed: ");
    fprintf(stderr, msg, arg);
    fprintf(stderr, "\n\n");
  }
  fprintf(msg ? stderr : stdout,
          "usage: kiln embed --model DIR [--batch N] [--ids] [--max-length N] [--stats] < sentences.txt\n"
          "  one sentence per line (UTF-8) in; one line per sentence out: its L2-normalised embedding\n"
          "  (space-separated), or its token ids with --ids. DIR: a published model folder (config.json,\n"
          "  vocab.txt, model.safetensors). --batch: sentences per batch (default 32).\n");
  return msg ? 2 : 0;
}

static int parse_args(int argc, char **argv, embed_opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(NULL, NULL) + 1;
    if (!strcmp(a, "--ids")) {
      o->ids_only = 1;
    } else if (!strcmp(a, "--stats")) {
      o->stats = 1;
    } else if (!strcmp(a, "--model") || !strcmp(a, "--batch") || !strcmp(a, "--max-length")) {
      if (!v) return usage("%s needs a value", a);
      i++;
      if (!strcmp(a, "--model")) o->dir = v;
      else if (!strcmp(a, "--batch") && kiln_cli_parse_int("embed", a, v, 1, 4096, &o->batch)) return 2;
      else if (!strcmp(a, "--max-length") && kiln_cli_parse_int("embed", a, v, 2, 1 << 20, &o->max_len)) return 2;
    } else {
      return usage(a[0] == '-' ? "unknown option '%s'" : "unexpected argument '%s'", a);
    }
  }
  if (!o->dir) return usage("%s", "--model DIR is required");
  return 0;
}

/* stdin, read a chunk of lines at a time */
typedef struct reader {
  char *line;
  size_t lcap;
  int64_t lineno; /* lines read so far */
  int eof;
} reader;

/* Read and tokenise up to `limit` lines of stdin. Returns the count, -1 on
 * error (the message printed). */
static int64_t read_sentences(reader *rd, const kiln_tokenizer *tok, long long max_len, int64_t limit,
                              sentence **out) {
  size_t cap = 64, n = 0;
  sentence *s = malloc(cap * sizeof *s);
  ssize_t len;
  int64_t *ids = malloc(sizeof(int64_t) * (size_t)max_len);
  if (!s || !ids) goto oom;
  while ((int64_t)n < limit && (len = getline(&rd->line, &rd->lcap, stdin)) >= 0) {
    rd->lineno++;
    char *line = rd->line;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
    int64_t k = 0;
    if (kiln_tokenizer_encode(tok, line, (size_t)len, max_len, ids, max_len, &k) != KILN_OK) {
      fprintf(stderr, "kiln embed: line %lld: %s\n", (long long)rd->lineno, kiln_cli_error_message());
      goto fail;
    }
    if (n == cap) {
      sentence *t = realloc(s, 2 * cap * sizeof *s);
      if (!t) goto oom;
      s = t, cap *= 2;
    }
    s[n] = (sentence){malloc(sizeof(int64_t) * (size_t)(k ? k : 1)), k, NULL};
    if (!s[n].ids) goto oom;
    memcpy(s[n].ids, ids, sizeof(int64_t) * (size_t)k);
    n++;
  }
  rd->eof = (int64_t)n < limit;
  free(ids);
  *out = s;
  return (int64_t)n;
oom:
  fprintf(stderr, "kiln embed: out of memory\n");
fail:
  for (size_t i = 0; s && i < n; i++) free(s[i].ids);
  free(s);
  free(ids);
  return -1;
}

static sentence *g_sort_base;
static int by_length(const void *a, const void *b) {
  int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
  int64_t x = g_sort_base[i].n, y = g_sort_base[j].n;
  return x < y ? -1 : x > y ? 1 : (i > j) - (i < j);
}

/* Embed sentences order[0..count) as one ragged batch (kiln_bert_embed_ragged:
 * the per-token layers on the tokens alone, attention padded to T). */
static int run_batch(const kiln_bert *m, sentence *s, const int64_t *order, int64_t count, int64_t T, int H) {
  int64_t *ids = malloc(sizeof(int64_t) * (size_t)(count * T)), *lens = malloc(sizeof(int64_t) * (size_t)count);
  float *out = malloc(sizeof(float) * (size_t)(count * H));
  int rc = -1;
  if (ids && lens && out) {
    int64_t k = 0;
    for (int64_t b = 0; b < count; b++) {
      const sentence *x = &s[order[b]];
      memcpy(ids + k, x->ids, sizeof(int64_t) * (size_t)x->n);
      lens[b] = x->n, k += x->n;
    }
    kiln_tensor e = kiln_bert_embed_ragged_at(m, ids, lens, count, KILN_CLI_NO_LOC);
    if (kiln_to_host(e, out, sizeof(float) * (size_t)(count * H)) == KILN_OK) {
      rc = 0;
      for (int64_t b = 0; b < count; b++) {
        sentence *x = &s[order[b]];
        x->emb = malloc(sizeof(float) * (size_t)H);
        if (!x->emb) {
          rc = -1;
          break;
        }
        memcpy(x->emb, out + b * H, sizeof(float) * (size_t)H);
      }
    }
    kiln_mark_step();
  }
  free(ids);
  free(lens);
  free(out);
  return rc;
}

typedef struct embed_stats {
  int64_t sentences, tokens, padded, batches;
} embed_stats;

/* Embed and print the chunk s[0..n) (lines first_line + 1 ...), sorted by
 * length into batches. */
static int embed_chunk(const embed_opts *o, const kiln_bert *m, sentence *s, int64_t n, int64_t first_line,
                       embed_stats *st) {
  int H = kiln_bert_get_config(m)->hidden_size, P = kiln_bert_get_config(m)->max_position_embeddings;
  for (int64_t i = 0; i < n; i++)
    if (s[i].n > P) {
      fprintf(stderr, "kiln embed: line %lld has %lld tokens, more than the model's %d positions (--max-length %d)\n",
              (long long)(first_line + i + 1), (long long)s[i].n, P, P);
      return 1;
    }
  int64_t *order = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!order) return 1;
  for (int64_t i = 0; i < n; i++) order[i] = i;
  g_sort_base = s;
  qsort(order, (size_t)n, sizeof *order, by_length);
  int rc = 0;
  for (int64_t i = 0; i < n && !rc; i += o->batch) {
    int64_t count = n - i < o->batch ? n - i : o->batch, T = s[order[i + count - 1]].n;
    T = (T + 7) / 8 * 8;
    if (T > o->max_len) T = o->max_len;
    for (int64_t b = 0; b < count; b++) st->tokens += s[order[i + b]].n;
    st->padded += count * T;
    st->batches++;
    if (run_batch(m, s, order + i, count, T, H)) {
      fprintf(stderr, "kiln embed: %s\n", kiln_last_status() ? kiln_cli_error_message() : "out of memory");
      rc = 1;
    }
  }
  st->sentences += n;
  for (int64_t i = 0; i < n && !rc; i++) {
    for (int j = 0; j < H; j++) printf(j ? " %.9g" : "%.9g", (double)s[i].emb[j]);
    putchar('\n');
  }
  free(order);
  return rc;
}

/* Lines are read, embedded and printed CHUNK_BATCHES batches at a time:
 * memory is bounded by the chunk, not by the input (a sentence's ids and
 * embedding take ~3.5 KB for MiniLM: 10 million lines would be 35 GB). The
 * embeddings do not depend on the batching. */
enum { CHUNK_BATCHES = 64, CHUNK_MAX_SENTENCES = 8192 };

/* Sentences per chunk: 64 batches, but at most 8192 sentences (a large
 * --batch held 64 x 4096 sentences' embeddings, 600 MB for 100k empty
 * lines) unless one batch is larger. */
static int64_t chunk_sentences(long long batch) {
  int64_t n = (int64_t)batch * CHUNK_BATCHES;
  if (n > CHUNK_MAX_SENTENCES) n = batch > CHUNK_MAX_SENTENCES ? batch : CHUNK_MAX_SENTENCES;
  return n;
}

int kiln_cli_embed(int argc, char **argv) {
  embed_opts o = {.batch = 32};
  int r = parse_args(argc, argv, &o);
  if (r) return r == 1 ? 0 : r;
  char vocab[4096];
  snprintf(vocab, sizeof vocab, "%s/vocab.txt", o.dir);
  kiln_tokenizer *tok = NULL;
  kiln_tokenizer_options topt;
  int64_t max_len = 0;
  if (kiln_init(NULL) != KILN_OK || kiln_bert_text_options_at(o.dir, &topt, &max_len, KILN_CLI_NO_LOC) != KILN_OK ||
      kiln_tokenizer_create(vocab, &topt, &tok) != KILN_OK) {
    fprintf(stderr, "kiln embed: %s\n", kiln_cli_error_message());
    kiln_shutdown();
    return 1;
  }
  if (!o.max_len) o.max_len = max_len;
  kiln_bert *m = NULL;
  if (!o.ids_only && kiln_bert_load_at(o.dir, &m, KILN_CLI_NO_LOC) != KILN_OK) {
    fprintf(stderr, "kiln embed: %s\n", kiln_cli_error_message());
    kiln_tokenizer_destroy(tok);
    kiln_shutdown();
    return 1;
  }
  reader rd = {0};
  embed_stats st = {0};
  int64_t compiles0 = kiln_counter_value("UncachedCompile");
  int rc = 0;
  while (!rc && !rd.eof) {
    sentence *s = NULL;
    int64_t first = rd.lineno, n = read_sentences(&rd, tok, o.max_len, chunk_sentences(o.batch), &s);
    if (n < 0) {
      rc = 1;
      break;
    }
    if (o.ids_only) {
      for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < s[i].n; j++) printf(j ? " %lld" : "%lld", (long long)s[i].ids[j]);
        putchar('\n');
      }
    } else {
      rc = embed_chunk(&o, m, s, n, first, &st);
    }
    for (int64_t i = 0; i < n; i++) {
      free(s[i].ids);
      free(s[i].emb);
    }
    free(s);
    if (!rc && !kiln_cli_stdout_ok()) rc = 1; /* output that cannot be written: stop reading */
  }
  free(rd.line);
  if (o.stats && !rc && !o.ids_only)
    fprintf(stderr, "kiln embed: %lld sentences, %lld batches, %lld tokens, %lld with padding, %lld compiles\n",
            (long long)st.sentences, (long long)st.batches, (long long)st.tokens, (long long)st.padded,
            (long long)(kiln_counter_value("UncachedCompile") - compiles0));
  if (!kiln_cli_stdout_ok()) rc = 1; /* reported by main */
  kiln_bert_destroy(m);
  kiln_tokenizer_destroy(tok);
  kiln_shutdown();
  return rc;
}
