/* The WordPiece tokenizer (kiln/text.h).
 *
 * Parity: kiln's ids for every sentence of tests/data/minilm_sentences.txt
 * equal those of Hugging Face's tokenizer (tests/data/minilm_reference.txt,
 * written by tests/data/minilm_reference.py), with the vocabulary of
 * all-MiniLM-L6-v2 ($KILN_MINILM_DIR, fetched by scripts/fetch-model.sh: a
 * missing model fails the test). Unit cases on a small vocabulary: accents,
 * punctuation, CJK, [UNK], long words, truncation, the options, invalid UTF-8
 * and the vocabulary file's errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/text.h"
#include "kt.h"

static char g_dir[512];
static void cleanup(void);

static const char *tmp_dir(void) {
  if (!g_dir[0]) {
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/kiln-tok-XXXXXX", base);
    if (!mkdtemp(g_dir)) {
      perror("mkdtemp");
      exit(2);
    }
    atexit(cleanup);
  }
  return g_dir;
}

/* Write n bytes to <tmp>/name; returns its path (one of 4 static buffers, reused in turn). */
static const char *write_file(const char *name, const void *data, size_t n) {
  static char path[4][600];
  static int k;
  char *p = path[k++ % 4];
  snprintf(p, 600, "%s/%s", tmp_dir(), name);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
    perror(p);
    exit(2);
  }
  return p;
}

/* A small vocabulary: ids are line numbers. */
static const char k_vocab[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"           /* 0-4 */
    "hello\nworld\n,\n!\nun\n##aff\n##able\n"        /* 5-11 */
    "cafe\nnaive\nHello\ncafé\n中\n文\na\n##a\n"     /* 12-19 */
    "'\ns\nt\n.\ndup\ndup\n";                         /* 20-25: "dup" keeps id 25 */

static kiln_tokenizer *small(const kiln_tokenizer_options *o) {
  kiln_tokenizer *t = NULL;
  const char *p = write_file("vocab.txt", k_vocab, sizeof k_vocab - 1);
  kiln_status s = kiln_tokenizer_create(p, o, &t);
  if (s != KILN_OK) {
    fprintf(stderr, "small vocabulary: %s\n", kiln_last_error());
    exit(2);
  }
  return t;
}

/* Encode s with max_len and compare with want[0..nw) ([CLS] ... [SEP]). */
static int expect_ids(const kiln_tokenizer *t, const char *s, size_t len, int64_t max_len, const int64_t *want,
                      int64_t nw) {
  int64_t ids[512], n = -1;
  kiln_status st = kiln_tokenizer_encode(t, s, len, max_len, ids, 512, &n);
  if (st != KILN_OK) {
    KT_FAIL("encode \"%s\": %s", s, kiln_last_error());
    return 0;
  }
  int ok = n == nw;
  for (int64_t i = 0; ok && i < n; i++) ok = ids[i] == want[i];
  if (!ok) {
    KT_FAIL("encode \"%s\" (max_len %lld): got %lld ids, want %lld", s, (long long)max_len, (long long)n,
            (long long)nw);
    for (int64_t i = 0; i < n && i < 512; i++) fprintf(stderr, " %lld", (long long)ids[i]);
    fprintf(stderr, "\n");
  }
  return ok;
}
#define EXPECT(t, s, max_len, ...)                                                     \
  do {                                                                                 \
    const int64_t w_[] = {__VA_ARGS__};                                                \
    expect_ids((t), (s), strlen(s), (max_len), w_, (int64_t)(sizeof w_ / sizeof w_[0])); \
  } while (0)

KT_TEST(accents_case_and_punctuation) {
  kiln_tokenizer *t = small(NULL);
  EXPECT(t, "Hello, World!", 64, 2, 5, 7, 6, 8, 3);
  EXPECT(t, "hello,world!", 64, 2, 5, 7, 6, 8, 3);
  /* precomposed and decomposed accents both strip; upper case lowers */
  EXPECT(t, "CAFÉ Naïve cafe\xcc\x81", 64, 2, 12, 13, 12, 3);
  /* ASCII symbols are punctuation; so is the Unicode P* class (here ¡ U+00A1 has no id: [UNK]) */
  EXPECT(t, "un'aff", 64, 2, 9, 20, 1, 3);
  EXPECT(t, "\xc2\xa1hello", 64, 2, 1, 5, 3);
  kiln_tokenizer_destroy(t);
}

KT_TEST(wordpiece_and_unknown) {
  kiln_tokenizer *t = small(NULL);
  EXPECT(t, "unaffable", 64, 2, 9, 10, 11, 3);
  /* a word without a full cover is one [UNK], not its covered prefix */
  EXPECT(t, "unaffablex hello", 64, 2, 1, 5, 3);
  EXPECT(t, "zzz", 64, 2, 1, 3);
  /* 100 characters split into pieces; 101 are one [UNK] */
  char w[128];
  memset(w, 'a', sizeof w);
  int64_t want[102];
  want[0] = 2;
  want[1] = 18;
  for (int i = 2; i <= 100; i++) want[i] = 19;
  want[101] = 3;
  expect_ids(t, w, 100, 512, want, 102);
  EXPECT(t, "", 512, 2, 3);
  const int64_t unk[] = {2, 1, 3};
  expect_ids(t, w, 101, 512, unk, 3);
  kiln_tokenizer_destroy(t);
}

KT_TEST(cjk_whitespace_and_controls) {
  kiln_tokenizer *t = small(NULL);
  /* CJK ideographs are words of their own */
  EXPECT(t, "a中文hello", 64, 2, 18, 16, 17, 5, 3);
  /* tab, CR, LF, U+3000 and U+2028 separate; U+0007, U+200B, U+00AD, U+FFFD and NUL vanish */
  EXPECT(t, "hello\tworld\r\nhello\xe3\x80\x80world\xe2\x80\xa8!", 64, 2, 5, 6, 5, 6, 8, 3);
  const char joined[] = "hel\alo wor\xe2\x80\x8bld he\xc2\xadllo wo\xef\xbf\xbdrld hel\0lo";
  const int64_t want[] = {2, 5, 6, 5, 6, 5, 3};
  expect_ids(t, joined, sizeof joined - 1, 64, want, 7);
  /* an unassigned code point (U+0378, Cn) stays in its word, as in `tokenizers` */
  EXPECT(t, "hello\xcd\xb8 world", 64, 2, 1, 6, 3);
  /* only whitespace: no word */
  EXPECT(t, " \t\xc2\xa0 ", 64, 2, 3);
  kiln_tokenizer_destroy(t);
}

KT_TEST(options) {
  kiln_tokenizer_options cased = {.lowercase = false, .strip_accents = false};
  kiln_tokenizer *t = small(&cased);
  EXPECT(t, "Hello hello café cafe", 64, 2, 14, 5, 15, 12, 3);
  kiln_tokenizer_destroy(t);
  kiln_tokenizer_options lower_only = {.lowercase = true, .strip_accents = false};
  t = small(&lower_only);
  EXPECT(t, "CAFÉ Hello", 64, 2, 15, 5, 3);
  kiln_tokenizer_destroy(t);
  kiln_tokenizer_options strip_only = {.lowercase = false, .strip_accents = true};
  t = small(&strip_only);
  EXPECT(t, "Héllo café", 64, 2, 14, 12, 3);
  kiln_tokenizer_destroy(t);
}

KT_TEST(truncation_and_capacity) {
  kiln_tokenizer *t = small(NULL);
  EXPECT(t, "hello world hello", 4, 2, 5, 6, 3);
  EXPECT(t, "hello world hello", 2, 2, 3);
  EXPECT(t, "unaffable", 4, 2, 9, 10, 3); /* truncation may cut a word's pieces */
  /* cap 0 asks for the size; a short cap gets the first ids and the full count */
  int64_t n = -1;
  KT_EQ_INT(kiln_tokenizer_encode(t, "hello world", 11, 64, NULL, 0, &n), KILN_OK);
  KT_EQ_INT(n, 4);
  int64_t ids[3] = {-7, -7, -7};
  KT_EQ_INT(kiln_tokenizer_encode(t, "hello world", 11, 64, ids, 2, &n), KILN_OK);
  KT_EQ_INT(n, 4);
  KT_EQ_INT(ids[0], 2);
  KT_EQ_INT(ids[1], 5);
  KT_EQ_INT(ids[2], -7);
  kiln_tokenizer_destroy(t);
}

KT_TEST(vocabulary_lookups) {
  kiln_tokenizer *t = small(NULL);
  KT_EQ_INT(kiln_tokenizer_vocab_size(t), 26);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[PAD]"), 0);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[MASK]"), 4);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "##able"), 11);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "dup"), 25);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "absent"), -1);
  KT_EQ_INT(kiln_tokenizer_token_id(t, NULL), -1);
  KT_EQ_INT(kiln_tokenizer_token_id(NULL, "[PAD]"), -1);
  KT_CHECK(kiln_tokenizer_token(t, 16) && !strcmp(kiln_tokenizer_token(t, 16), "中"));
  KT_CHECK(kiln_tokenizer_token(t, 24) && !strcmp(kiln_tokenizer_token(t, 24), "dup"));
  KT_CHECK(kiln_tokenizer_token(t, -1) == NULL);
  KT_CHECK(kiln_tokenizer_token(t, 26) == NULL);
  kiln_tokenizer_destroy(t);
  kiln_tokenizer_destroy(NULL);
}

/* Encoding bad bytes fails with INVALID_ARGUMENT naming the offset and this file. */
static void expect_bad_utf8(const kiln_tokenizer *t, const char *s, size_t len, const char *offset) {
  kiln_clear_error();
  int64_t ids[8] = {0}, n = 99;
  kiln_status st = kiln_tokenizer_encode(t, s, len, 64, ids, 8, &n);
  KT_EQ_INT(st, KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(n, 0);
  KT_STR_CONTAINS(kiln_last_error(), "invalid UTF-8");
  KT_STR_CONTAINS(kiln_last_error(), offset);
  KT_STR_CONTAINS(kiln_last_error(), "test_tokenizer.c:");
}

KT_TEST(invalid_utf8_and_arguments) {
  kiln_tokenizer *t = small(NULL);
  expect_bad_utf8(t, "ab\xc3(", 4, "byte offset 2 ");
  expect_bad_utf8(t, "hello \xed\xa0\x80", 9, "byte offset 6 ");    /* a surrogate */
  expect_bad_utf8(t, "\xc0\xaf", 2, "byte offset 0 ");              /* overlong '/' */
  expect_bad_utf8(t, "ok \xf4\x90\x80\x80", 7, "byte offset 3 ");   /* > U+10FFFF */
  expect_bad_utf8(t, "hello \xe4\xb8", 8, "byte offset 6 ");         /* truncated at the end */
  expect_bad_utf8(t, "\x80", 1, "byte offset 0 ");                   /* a lone continuation */
  int64_t ids[4], n;
  kiln_clear_error();
  KT_EQ_INT(kiln_tokenizer_encode(t, "a", 1, 1, ids, 4, &n), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "max_len 1");
  KT_EQ_INT(kiln_tokenizer_encode(t, "a", 1, 8, NULL, 4, &n), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_tokenizer_encode(t, "a", 1, 8, ids, -1, &n), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_tokenizer_encode(t, "a", 1, 8, ids, 4, NULL), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_tokenizer_encode(NULL, "a", 1, 8, ids, 4, &n), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_tokenizer_encode(t, NULL, 3, 8, ids, 4, &n), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  kiln_tokenizer_destroy(t);
}

/* Creating from path fails with code, *out NULL, and a message with want. */
static void expect_create_error(const char *path, kiln_status code, const char *want) {
  kiln_clear_error();
  kiln_tokenizer *t = (kiln_tokenizer *)&t;
  KT_EQ_INT(kiln_tokenizer_create(path, NULL, &t), code);
  KT_CHECK(t == NULL);
  KT_STR_CONTAINS(kiln_last_error(), want);
  KT_STR_CONTAINS(kiln_last_error(), "test_tokenizer.c:");
  kiln_clear_error();
}

KT_TEST(vocabulary_errors) {
  char missing[600];
  snprintf(missing, sizeof missing, "%s/no-such-vocab.txt", tmp_dir());
  expect_create_error(missing, KILN_ERR_IO, "no-such-vocab.txt");
  expect_create_error(write_file("empty.txt", "", 0), KILN_ERR_CORRUPT, "empty");
  const char no_cls[] = "[PAD]\n[UNK]\n[SEP]\n";
  expect_create_error(write_file("nocls.txt", no_cls, sizeof no_cls - 1), KILN_ERR_CORRUPT, "[CLS]");
  const char nul[] = "[UNK]\n[CLS]\n[S\0EP]\n";
  expect_create_error(write_file("nul.txt", nul, sizeof nul - 1), KILN_ERR_CORRUPT, "NUL byte at offset 14 (line 3)");
  expect_create_error(tmp_dir(), KILN_ERR_IO, "not a regular file");
  /* a sparse file one byte over the limit is refused before it is read */
  const char *big = write_file("big.txt", "[UNK]\n", 6);
  KT_CHECK(truncate(big, (off_t)KILN_TOKENIZER_MAX_VOCAB_BYTES + 1) == 0);
  expect_create_error(big, KILN_ERR_CORRUPT, "limit");
  unlink(big);
  kiln_tokenizer *t = NULL;
  KT_EQ_INT(kiln_tokenizer_create(NULL, NULL, &t), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_tokenizer_create(missing, NULL, NULL), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  /* the last line needs no newline */
  const char nonl[] = "[UNK]\n[CLS]\n[SEP]";
  KT_EQ_INT(kiln_tokenizer_create(write_file("nonl.txt", nonl, sizeof nonl - 1), NULL, &t), KILN_OK);
  KT_EQ_INT(kiln_tokenizer_vocab_size(t), 3);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[SEP]"), 2);
  kiln_tokenizer_destroy(t);
}

/* Special tokens written in the text are those tokens, as Hugging Face's
 * tokenizers match them: in the raw text, case-sensitive, inside words too,
 * before normalizing (transformers 4.45 on all-MiniLM-L6-v2: "x[SEP]y" is
 * [CLS] x [SEP] y [SEP], "[[SEP]]" is [ [SEP] ], "[mask]" and "[ MASK ]" are
 * brackets and a word); one counts as a piece for truncation. Small
 * vocabulary: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4, hello 5, world
 * 6, "," 7, "!" 8. */
KT_TEST(special_tokens_in_the_text) {
  kiln_tokenizer *t = small(NULL);
  EXPECT(t, "hello[SEP]world", 64, 2, 5, 3, 6, 3);
  EXPECT(t, "Hello [MASK], world [PAD][UNK]!", 64, 2, 5, 4, 7, 6, 0, 1, 8, 3);
  EXPECT(t, "[CLS][CLS]", 64, 2, 2, 2, 3);
  EXPECT(t, "[mask] [ MASK ] [SEP", 64, 2, 1, 1, 1, 1, 1, 1, 1, 1, 3); /* [ mask ] [ mask ] [ sep: [UNK] each */
  EXPECT(t, "hello [MASK] world", 3, 2, 5, 3);
  EXPECT(t, "hello [MASK] world", 4, 2, 5, 4, 3);
  kiln_tokenizer_options cased = {.lowercase = false, .strip_accents = false};
  kiln_tokenizer_destroy(t);
  t = small(&cased);
  EXPECT(t, "Hello[MASK]", 64, 2, 14, 4, 3); /* the special token is not lower-cased or split either way */
  kiln_tokenizer_destroy(t);
}

/* Line ends as transformers' load_vocab reads them (Python's universal
 * newlines: "\n", "\r\n" and a lone "\r" each end a line, and none stays in
 * a token). Expected ids, by Python:
 *   open(p, encoding="utf-8").readlines() on the bytes below gives
 *   ['[PAD]\n', '[UNK]\n', '[CLS]\n', '[SEP]\n', 'hello\n', 'x\n', 'world\n', '\n', 'end']
 * so "hello" is 4, "world" 6, "end" 8, the empty token 7, 9 tokens; transformers
 * 4.45's BertTokenizer and BertTokenizerFast on this file encode "Hello world x" as
 * [2, 4, 6, 5, 3]. */
KT_TEST(vocabulary_line_ends) {
  const char v[] = "[PAD]\r\n[UNK]\r\n[CLS]\r[SEP]\nhello\r\nx\rworld\r\r\nend";
  kiln_tokenizer *t = NULL;
  KT_EQ_INT(kiln_tokenizer_create(write_file("crlf.txt", v, sizeof v - 1), NULL, &t), KILN_OK);
  if (!t) return;
  KT_EQ_INT(kiln_tokenizer_vocab_size(t), 9);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[UNK]"), 1);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[CLS]"), 2);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "hello"), 4);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "world"), 6);
  KT_EQ_INT(kiln_tokenizer_token_id(t, ""), 7);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "end"), 8);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "world\r"), -1);
  EXPECT(t, "Hello world x", 16, 2, 4, 6, 5, 3);
  kiln_tokenizer_destroy(t);
}

/* ───────────── parity with Hugging Face on all-MiniLM-L6-v2 ───────────── */

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *b = malloc(cap + 1);
  size_t r;
  while (b && (r = fread(b + len, 1, cap - len, f)) > 0) {
    len += r;
    if (len == cap) b = realloc(b, (cap *= 2) + 1);
  }
  fclose(f);
  if (b) b[len] = '\0';
  *n = len;
  return b;
}

/* Compare the ids of sentence i (s[0..len)) with the reference line "ids i n id...". */
static int check_sentence(const kiln_tokenizer *t, int i, const char *s, size_t len, const char *ref) {
  int ri, rn, used;
  if (sscanf(ref, "ids %d %d%n", &ri, &rn, &used) != 2 || ri != i || rn < 2 || rn > 256) {
    KT_FAIL("reference line for sentence %d is malformed: %.60s", i, ref);
    return 0;
  }
  int64_t ids[256], n = -1;
  if (kiln_tokenizer_encode(t, s, len, 256, ids, 256, &n) != KILN_OK) {
    KT_FAIL("sentence %d: %s", i, kiln_last_error());
    return 0;
  }
  const char *p = ref + used;
  int bad = -1;
  for (int j = 0; j < rn; j++) {
    char *end;
    long long want = strtoll(p, &end, 10);
    p = end;
    if (bad < 0 && (j >= n || ids[j] != want)) bad = j;
  }
  if (bad < 0 && n != rn) bad = rn;
  if (bad >= 0) {
    const char *got = bad < n ? kiln_tokenizer_token(t, ids[bad]) : "(end)";
    KT_FAIL("sentence %d (\"%.*s\"): %lld ids (HF: %d), first difference at %d: kiln %s", i, (int)(len < 60 ? len : 60),
            s, (long long)n, rn, bad, got ? got : "?");
  }
  return bad < 0;
}

KT_TEST(minilm_parity_with_huggingface) {
  const char *dir = getenv("KILN_MINILM_DIR");
  const char *data = getenv("KILN_TEST_DATA");
  if (!dir || !data) {
    KT_FAIL("KILN_MINILM_DIR and KILN_TEST_DATA must be set (ctest sets them; scripts/fetch-model.sh fetches the model)");
    return;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  kiln_tokenizer *t = NULL;
  if (kiln_tokenizer_create(path, NULL, &t) != KILN_OK) {
    KT_FAIL("%s (run scripts/fetch-model.sh %s)", kiln_last_error(), dir);
    return;
  }
  KT_EQ_INT(kiln_tokenizer_vocab_size(t), 30522);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[PAD]"), 0);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[UNK]"), 100);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[CLS]"), 101);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[SEP]"), 102);
  KT_EQ_INT(kiln_tokenizer_token_id(t, "[MASK]"), 103);
  size_t ns = 0, nr = 0;
  snprintf(path, sizeof path, "%s/minilm_sentences.txt", data);
  char *sent = slurp(path, &ns);
  snprintf(path, sizeof path, "%s/minilm_reference.txt", data);
  char *ref = slurp(path, &nr);
  KT_CHECK_MSG(sent && ref, "cannot read the sentences or the reference in %s", data);
  int count = 0, ok = 0, total = -1;
  const char *r = ref ? strstr(ref, "\nsentences ") : NULL;
  if (r) sscanf(r, "\nsentences %d", &total);
  for (char *s = sent; sent && ref && s < sent + ns; count++) {
    char *nl = memchr(s, '\n', (size_t)(sent + ns - s));
    size_t len = nl ? (size_t)(nl - s) : (size_t)(sent + ns - s);
    char key[32];
    snprintf(key, sizeof key, "\nids %d ", count);
    const char *line = strstr(ref, key);
    if (!line) {
      KT_FAIL("no reference ids for sentence %d", count);
      break;
    }
    ok += check_sentence(t, count, s, len, line + 1);
    s += len + 1;
  }
  KT_EQ_INT(count, total);
  KT_CHECK(count >= 24);
  KT_EQ_INT(ok, count);
  free(sent);
  free(ref);
  kiln_tokenizer_destroy(t);
}

/* tests/data/tokenizer_reference.txt: "case i <hex of the UTF-8 bytes, or -> n id..." from
 * BertTokenizerFast (tests/data/tokenizer_reference.py): every boundary of the character
 * classes, random strings from many scripts and classes, hand-written cases; some also
 * cased and without accent stripping (mode). */
static int check_case(kiln_tokenizer *const t[3], int i, const char *line) {
  int ri, used;
  char mode[16];
  if (sscanf(line, "case %d %15s %n", &ri, mode, &used) != 2 || ri != i) {
    KT_FAIL("reference case %d is malformed: %.60s", i, line);
    return 0;
  }
  const char *hex = line + used, *hex_end = strchr(hex, ' ');
  if (!hex_end) {
    KT_FAIL("reference case %d is malformed: %.60s", i, line);
    return 0;
  }
  size_t len = hex[0] == '-' ? 0 : (size_t)(hex_end - hex) / 2;
  char *s = malloc(len + 1);
  for (size_t j = 0; s && j < len; j++) {
    unsigned b;
    sscanf(hex + 2 * j, "%2x", &b);
    s[j] = (char)b;
  }
  char ref[4096];
  const char *ids = hex_end + 1, *eol = strchr(ids, '\n');
  size_t rl = eol ? (size_t)(eol - ids) : strlen(ids);
  if (rl >= sizeof ref - 32) rl = sizeof ref - 32;
  snprintf(ref, sizeof ref, "ids %d %.*s", i, (int)rl, ids);
  int m = !strcmp(mode, "uncased") ? 0 : !strcmp(mode, "cased") ? 1 : !strcmp(mode, "nostrip") ? 2 : -1;
  if (m < 0 || !s) {
    KT_FAIL("reference case %d: unknown mode %s", i, mode);
    free(s);
    return 0;
  }
  int ok = check_sentence(t[m], i, s, len, ref);
  free(s);
  return ok;
}

KT_TEST(character_classes_and_random_strings_match_huggingface) {
  const char *dir = getenv("KILN_MINILM_DIR");
  const char *data = getenv("KILN_TEST_DATA");
  if (!dir || !data) {
    KT_FAIL("KILN_MINILM_DIR and KILN_TEST_DATA must be set");
    return;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  /* the model's (uncased), do_lower_case=False, strip_accents=False */
  static const kiln_tokenizer_options opts[3] = {{true, true}, {false, false}, {true, false}};
  kiln_tokenizer *t[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++)
    if (kiln_tokenizer_create(path, &opts[i], &t[i]) != KILN_OK) {
      KT_FAIL("%s", kiln_last_error());
      return;
    }
  size_t nr = 0;
  snprintf(path, sizeof path, "%s/tokenizer_reference.txt", data);
  char *ref = slurp(path, &nr);
  KT_CHECK_MSG(ref != NULL, "cannot read %s", path);
  int total = -1, count = 0, ok = 0;
  const char *r = ref ? strstr(ref, "\ncases ") : NULL;
  if (r) sscanf(r, "\ncases %d", &total);
  for (const char *l = r ? strstr(r + 1, "\ncase ") : NULL; l; l = strstr(l + 1, "\ncase "), count++)
    ok += check_case(t, count, l + 1);
  KT_EQ_INT(count, total);
  KT_CHECK(count >= 800);
  KT_EQ_INT(ok, count);
  free(ref);
  for (int i = 0; i < 3; i++) kiln_tokenizer_destroy(t[i]);
}

static void cleanup(void) {
  if (!g_dir[0]) return;
  const char *names[] = {"vocab.txt", "empty.txt", "nocls.txt", "nul.txt", "big.txt", "nonl.txt", "crlf.txt"};
  char p[700];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
    unlink(p);
  }
  rmdir(g_dir);
}

KT_MAIN(KT_CASE(accents_case_and_punctuation), KT_CASE(wordpiece_and_unknown), KT_CASE(cjk_whitespace_and_controls),
        KT_CASE(vocabulary_line_ends), KT_CASE(special_tokens_in_the_text), KT_CASE(options),
        KT_CASE(truncation_and_capacity), KT_CASE(vocabulary_lookups), KT_CASE(invalid_utf8_and_arguments),
        KT_CASE(vocabulary_errors), KT_CASE(minilm_parity_with_huggingface),
        KT_CASE(character_classes_and_random_strings_match_huggingface))
