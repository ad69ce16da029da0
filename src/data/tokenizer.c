/* The WordPiece tokenizer of BERT models (include/kiln/text.h, docs/text.md).
 *
 * The vocabulary is one allocation holding the file's bytes (each token
 * NUL-terminated in place), token offsets and lengths, and an open-addressing
 * hash table of ids: memory is bounded by the file size, which is bounded by
 * KILN_TOKENIZER_MAX_VOCAB_BYTES.
 *
 * Encoding follows Hugging Face `tokenizers` (BertNormalizer, BertPreTokenizer,
 * WordPiece), which is what sentence-transformers runs: normalize the whole
 * text into code points (clean, CJK spacing, NFD + drop Mn, lower-case), then
 * split it into words and each word into pieces. The character classes are
 * `tokenizers`' own (src/data/tokenizer_unicode.c, generated from the
 * library); canonical decompositions and case mappings come from libutf8proc. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <utf8proc.h>

#include "base/fs.h"
#include "data/data_internal.h"

struct kiln_tokenizer {
  char *text;          /* the vocabulary file, each line's end replaced by NUL */
  int64_t n;           /* tokens */
  uint32_t *off, *len; /* token i is text[off[i] .. off[i] + len[i]) */
  int32_t *slot;       /* hash table of ids, -1 empty; size mask + 1 */
  uint64_t mask;
  int64_t unk, cls, sep;
  /* BertTokenizer's special tokens found in the vocabulary, matched in the
   * raw text before anything else (next_special below) */
  int n_special;
  const char *special[5];
  int64_t special_id[5];
  kiln_tokenizer_options opts;
};

/* ───────────── vocabulary ───────────── */

/* FNV-1a over "##" (when cont) then s[0..n): the continuation key is hashed
 * without building it. */
static uint64_t key_hash(bool cont, const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  if (cont) {
    h = (h ^ '#') * 0x100000001b3ULL;
    h = (h ^ '#') * 0x100000001b3ULL;
  }
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
  return h ^ (h >> 29);
}

static bool key_equal(const kiln_tokenizer *t, int64_t id, bool cont, const char *s, size_t n) {
  const char *tok = t->text + t->off[id];
  size_t tl = t->len[id], pre = cont ? 2 : 0;
  if (tl != n + pre) return false;
  if (cont && (tok[0] != '#' || tok[1] != '#')) return false;
  return memcmp(tok + pre, s, n) == 0;
}

/* The id of "##"-if-cont + s[0..n), or -1. */
static int64_t lookup(const kiln_tokenizer *t, bool cont, const char *s, size_t n) {
  for (uint64_t i = key_hash(cont, s, n) & t->mask;; i = (i + 1) & t->mask) {
    int32_t id = t->slot[i];
    if (id < 0) return -1;
    if (key_equal(t, id, cont, s, n)) return id;
  }
}

/* Insert token id; a repeated token takes the later id (transformers'
 * load_vocab fills a dict line by line). */
static void insert(kiln_tokenizer *t, int64_t id) {
  const char *s = t->text + t->off[id];
  size_t n = t->len[id];
  for (uint64_t i = key_hash(false, s, n) & t->mask;; i = (i + 1) & t->mask) {
    if (t->slot[i] < 0 || key_equal(t, t->slot[i], false, s, n)) {
      t->slot[i] = (int32_t)id;
      return;
    }
  }
}

/* Whether text[i] ends a line: '\n', a '\r' not followed by '\n', or the
 * '\n' of "\r\n". transformers' load_vocab reads the file with Python's
 * universal newlines, so a vocabulary written with CRLF (or a stray CR)
 * numbers its tokens as there; a CR kept in a token would shift every id
 * after it. */
static bool line_end(const char *text, size_t n, size_t i) {
  return text[i] == '\n' || (text[i] == '\r' && (i + 1 >= n || text[i + 1] != '\n'));
}

/* Split text[0..n) into lines (the last one may lack its end), fill the
 * offsets and the hash table. text has a NUL at text[n]. */
static kiln_status index_lines(kiln_tokenizer *t, size_t n, const char *name, kiln_err *err) {
  int64_t lines = 0;
  for (size_t i = 0; i < n; i++) {
    if (t->text[i] == '\0')
      return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: vocabulary has a NUL byte at offset %zu (line %lld)", name, i,
                          (long long)lines + 1);
    if (line_end(t->text, n, i)) lines++;
  }
  if (n && !line_end(t->text, n, n - 1)) lines++;
  if (lines == 0) return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: vocabulary file is empty", name);
  uint64_t size = 16;
  while (size < 2 * (uint64_t)lines) size *= 2;
  t->off = malloc((size_t)lines * sizeof *t->off);
  t->len = malloc((size_t)lines * sizeof *t->len);
  t->slot = malloc((size_t)size * sizeof *t->slot);
  if (!t->off || !t->len || !t->slot)
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld tokens", name, (long long)lines);
  memset(t->slot, 0xff, (size_t)size * sizeof *t->slot);
  t->mask = size - 1;
  t->n = lines;
  size_t start = 0;
  for (int64_t id = 0; id < lines; id++) {
    size_t end = start;
    while (end < n && t->text[end] != '\n' && t->text[end] != '\r') end++;
    size_t next = end + (end + 1 < n && t->text[end] == '\r' && t->text[end + 1] == '\n' ? 2 : 1);
    t->text[end] = '\0';
    t->off[id] = (uint32_t)start;
    t->len[id] = (uint32_t)(end - start);
    insert(t, id);
    start = next;
  }
  return KILN_OK;
}

static kiln_status find_specials(kiln_tokenizer *t, const char *name, kiln_err *err) {
  const char *names[3] = {"[UNK]", "[CLS]", "[SEP]"};
  int64_t *ids[3] = {&t->unk, &t->cls, &t->sep};
  for (int i = 0; i < 3; i++) {
    *ids[i] = lookup(t, false, names[i], strlen(names[i]));
    if (*ids[i] < 0)
      return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: vocabulary lacks the special token %s", name, names[i]);
  }
  /* BertTokenizer's defaults (unk, sep, pad, cls, mask), each when the
   * vocabulary has it */
  static const char *const all[5] = {"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"};
  for (int i = 0; i < 5; i++) {
    int64_t id = lookup(t, false, all[i], strlen(all[i]));
    if (id < 0) continue;
    t->special[t->n_special] = all[i];
    t->special_id[t->n_special++] = id;
  }
  return KILN_OK;
}

/* Takes ownership of text (n bytes plus a NUL at text[n]). */
static kiln_status build(char *text, size_t n, const kiln_tokenizer_options *opts, const char *name,
                         kiln_tokenizer **out, kiln_err *err) {
  kiln_tokenizer *t = calloc(1, sizeof *t);
  if (!t) {
    free(text);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
  }
  t->text = text;
  t->opts = opts ? *opts : (kiln_tokenizer_options){.lowercase = true, .strip_accents = true};
  kiln_status s = index_lines(t, n, name, err);
  if (s == KILN_OK) s = find_specials(t, name, err);
  if (s != KILN_OK) {
    kiln_tokenizer_destroy(t);
    return s;
  }
  *out = t;
  return KILN_OK;
}

kiln_status kiln_tokenizer_create_from_memory_err(const char *buf, size_t n, const kiln_tokenizer_options *opts,
                                                  const char *name, kiln_tokenizer **out, kiln_err *err) {
  *out = NULL;
  if (!name) name = "<memory>";
  if (n > KILN_TOKENIZER_MAX_VOCAB_BYTES)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: vocabulary is %zu bytes, more than the limit %zu", name, n,
                        KILN_TOKENIZER_MAX_VOCAB_BYTES);
  char *text = malloc(n + 1);
  if (!text) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
  if (n) memcpy(text, buf, n);
  text[n] = '\0';
  return build(text, n, opts, name, out, err);
}

kiln_status kiln_tokenizer_create_at(const char *vocab_path, const kiln_tokenizer_options *opts,
                                     kiln_tokenizer **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "kiln_tokenizer_create");
  if (!vocab_path)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_tokenizer_create: vocab_path is NULL");
  kiln_err err = {0};
  int fd = -1;
  kiln_status s = kiln_fs_open_input(vocab_path, "kiln_tokenizer_create: vocabulary", &fd, &err);
  if (s != KILN_OK) return kiln_error(s, loc, "%s", err.msg);
  uint8_t *buf = NULL;
  size_t n = 0;
  s = kiln_fs_read_fd(fd, KILN_TOKENIZER_MAX_VOCAB_BYTES, &buf, &n, &err);
  close(fd);
  if (s != KILN_OK)
    return kiln_error(s, loc, "kiln_tokenizer_create: vocabulary %s: %s", vocab_path, err.msg);
  /* kiln_fs_read_fd put a NUL at buf[n]. */
  s = build((char *)buf, n, opts, vocab_path, out, &err);
  if (s != KILN_OK) return kiln_error(s, loc, "kiln_tokenizer_create: %s", err.msg);
  return KILN_OK;
}

void kiln_tokenizer_destroy(kiln_tokenizer *t) {
  if (!t) return;
  free(t->text);
  free(t->off);
  free(t->len);
  free(t->slot);
  free(t);
}

int64_t kiln_tokenizer_token_id(const kiln_tokenizer *t, const char *token) {
  if (!t || !token) return -1;
  return lookup(t, false, token, strlen(token));
}

const char *kiln_tokenizer_token(const kiln_tokenizer *t, int64_t id) {
  if (!t || id < 0 || id >= t->n) return NULL;
  return t->text + t->off[id];
}

int64_t kiln_tokenizer_vocab_size(const kiln_tokenizer *t) { return t ? t->n : 0; }

/* ───────────── normalization ───────────── */

/* A growable array of code points. */
typedef struct cpvec {
  int32_t *v;
  size_t n, cap;
} cpvec;

static bool cp_push(cpvec *a, int32_t c) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 64;
    int32_t *v = realloc(a->v, cap * sizeof *v);
    if (!v) return false;
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = c;
  return true;
}

/* The character classes (control, whitespace, punctuation, nonspacing mark,
 * CJK ideograph) are `tokenizers`' own, read from the library by
 * tests/data/tokenizer_reference.py into src/data/tokenizer_unicode.c:
 * `tokenizers` compiles in older Unicode tables than utf8proc's (e.g.
 * U+2E43-U+2E5D are letters-like to it, not punctuation; U+07FD is no mark)
 * and its own CJK blocks (from 0x2B920, not 0x2B820), and any of those
 * differences changes ids (docs/text.md).
 *
 * Control: Cc, Cf, Co (Unicode 8-ish), U+0000 and U+FFFD, dropped; tab,
 * newline and carriage return are whitespace. Unassigned code points stay. */
static bool is_control(int32_t c) { return kiln_bert_char_class(c) & BC_CONTROL; }

/* Whitespace: the ASCII four and Rust's char::is_whitespace, less the
 * controls that cleaning drops first. */
static bool is_space(int32_t c) { return kiln_bert_char_class(c) & BC_SPACE; }

/* BERT's punctuation: every non-alphanumeric ASCII symbol, and Unicode P*. */
static bool is_punct(int32_t c) { return kiln_bert_char_class(c) & BC_PUNCT; }

/* The CJK Unified Ideographs blocks BERT spaces out (not Hangul, kana). */
static bool is_cjk(int32_t c) { return kiln_bert_char_class(c) & BC_CJK; }

/* A nonspacing mark (Mn) that strip_accents drops after decomposition. */
static bool is_mn(int32_t c) { return kiln_bert_char_class(c) & BC_MN; }

/* Steps 1-2: decode (the input was validated), clean, space out CJK. */
static bool clean(const uint8_t *s, size_t len, cpvec *out) {
  for (size_t i = 0; i < len;) {
    int32_t c = -1;
    utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &c);
    i += (size_t)k;
    if (is_control(c)) continue; /* U+0000 and U+FFFD too */
    bool ok;
    if (is_space(c))
      ok = cp_push(out, ' ');
    else if (is_cjk(c))
      ok = cp_push(out, ' ') && cp_push(out, c) && cp_push(out, ' ');
    else
      ok = cp_push(out, c);
    if (!ok) return false;
  }
  return true;
}

static int ccc(int32_t c) { return utf8proc_get_property(c)->combining_class; }

/* Step 3: canonical decomposition (NFD: each character fully decomposed,
 * then runs of combining marks put in canonical order, stably by combining
 * class), then drop the nonspacing marks (Mn). */
static bool strip_accents(const cpvec *in, cpvec *out) {
  for (size_t i = 0; i < in->n; i++) {
    int32_t d[32];
    int bound = 0;
    utf8proc_ssize_t k = utf8proc_decompose_char(in->v[i], d, 32, UTF8PROC_DECOMPOSE, &bound);
    if (k < 0 || k > 32) {  /* cannot happen for a valid code point: keep it as is */
      d[0] = in->v[i];
      k = 1;
    }
    for (utf8proc_ssize_t j = 0; j < k; j++)
      if (!cp_push(out, d[j])) return false;
  }
  /* canonical ordering: insertion sort inside each run of class > 0 */
  for (size_t i = 1; i < out->n; i++) {
    int32_t c = out->v[i];
    int cc = ccc(c);
    if (cc == 0) continue;
    size_t j = i;
    while (j > 0 && ccc(out->v[j - 1]) > cc) {
      out->v[j] = out->v[j - 1];
      j--;
    }
    out->v[j] = c;
  }
  size_t w = 0;
  for (size_t i = 0; i < out->n; i++)
    if (!is_mn(out->v[i])) out->v[w++] = out->v[i];
  out->n = w;
  return true;
}

/* Steps 1-4 on s[0..len) into *out (a cpvec the caller frees). */
static bool normalize(const kiln_tokenizer *t, const uint8_t *s, size_t len, cpvec *out) {
  cpvec a = {0};
  if (!clean(s, len, &a)) {
    free(a.v);
    return false;
  }
  if (t->opts.strip_accents) {
    bool ok = strip_accents(&a, out);
    free(a.v);
    if (!ok) return false;
  } else {
    *out = a;
  }
  if (!t->opts.lowercase) return true;
  /* Rust's char::to_lowercase, which `tokenizers` runs, is the full mapping:
   * the simple one but for U+0130, whose lower case is i + U+0307 (with
   * strip_accents, NFD has already made it I, and the mark is gone) */
  size_t dots = 0;
  for (size_t i = 0; i < out->n; i++) dots += out->v[i] == 0x130;
  for (size_t i = 0; i < dots; i++)
    if (!cp_push(out, 0)) return false;
  for (size_t r = out->n - dots, w = out->n; r-- > 0;) {
    int32_t c = out->v[r];
    if (c == 0x130) out->v[--w] = 0x307;
    out->v[--w] = utf8proc_tolower(c);
  }
  return true;
}

/* ───────────── pieces ───────────── */

/* The ids being written: n counts them all, the first cap go to ids. */
typedef struct sink {
  int64_t *ids, cap, n;
  int64_t pieces_left; /* wordpieces still allowed before truncation */
} sink;

static void emit(sink *k, int64_t id) {
  if (k->n < k->cap) k->ids[k->n] = id;
  k->n++;
}

/* Step 6 for one word w[0..nw) (1 <= nw): greedy longest match first. */
static void wordpiece(const kiln_tokenizer *t, const int32_t *w, size_t nw, sink *k) {
  if (nw > KILN_TOKENIZER_MAX_WORD_CHARS) {
    emit(k, t->unk);
    k->pieces_left--;
    return;
  }
  char bytes[4 * KILN_TOKENIZER_MAX_WORD_CHARS];
  size_t off[KILN_TOKENIZER_MAX_WORD_CHARS + 1];
  off[0] = 0;
  for (size_t i = 0; i < nw; i++)
    off[i + 1] = off[i] + (size_t)utf8proc_encode_char(w[i], (utf8proc_uint8_t *)bytes + off[i]);
  int64_t piece[KILN_TOKENIZER_MAX_WORD_CHARS];
  size_t np = 0;
  for (size_t start = 0; start < nw;) {
    int64_t id = -1;
    size_t end = nw;
    for (; end > start; end--) {
      id = lookup(t, start > 0, bytes + off[start], off[end] - off[start]);
      if (id >= 0) break;
    }
    if (id < 0) { /* no cover: the whole word is unknown */
      np = 0;
      piece[np++] = t->unk;
      break;
    }
    piece[np++] = id;
    start = end;
  }
  for (size_t i = 0; i < np && k->pieces_left > 0; i++) {
    emit(k, piece[i]);
    k->pieces_left--;
  }
}

/* A word being gathered, possibly across segments: its first
 * KILN_TOKENIZER_MAX_WORD_CHARS + 1 code points (one more makes it [UNK])
 * and its length. */
typedef struct word {
  int32_t c[KILN_TOKENIZER_MAX_WORD_CHARS + 1];
  size_t n;
} word;

static void word_end(const kiln_tokenizer *t, word *w, sink *k) {
  if (w->n && k->pieces_left > 0) wordpiece(t, w->c, w->n, k);
  w->n = 0;
}

/* Step 5: split on whitespace and punctuation, each word to step 6, until
 * truncation says stop. The segment's last word stays in *w: the next
 * segment may go on with it. */
static void split_words(const kiln_tokenizer *t, const cpvec *s, word *w, sink *k) {
  for (size_t i = 0; i < s->n && k->pieces_left > 0; i++) {
    int32_t c = s->v[i];
    if (is_space(c) || is_punct(c)) {
      word_end(t, w, k);
      if (is_punct(c) && k->pieces_left > 0) wordpiece(t, &c, 1, k);
    } else {
      if (w->n <= KILN_TOKENIZER_MAX_WORD_CHARS) w->c[w->n] = c;
      w->n++;
    }
  }
}

/* Whether the text may be cut before code point c, each side normalized on
 * its own: whitespace, punctuation and CJK ideographs (a word starts there
 * whatever precedes it), or, inside a word, a code point that cleaning keeps
 * and whose decomposition starts with a starter (canonical ordering never
 * moves a mark across it; every other step maps one code point at a time).
 * Cut inside a word, the word goes on in the next segment (struct word). */
static bool cut_before(int32_t c) {
  if (kiln_bert_char_class(c) & (BC_SPACE | BC_PUNCT | BC_CJK)) return true;
  if (is_control(c)) return false;
  int32_t d[32];
  int bound = 0;
  utf8proc_ssize_t k = utf8proc_decompose_char(c, d, 32, UTF8PROC_DECOMPOSE, &bound);
  return k >= 1 && k <= 32 && ccc(d[0]) == 0;
}

/* Where the segment of valid UTF-8 s[at..len) that starts at `at` ends: the
 * first code point SEGMENT_BYTES or more past `at` before which the text
 * may be cut (cut_before), else len. A segment is normalized at a time: a
 * long line, or a long word, costs memory for one segment. */
enum { SEGMENT_BYTES = 4096 };
static size_t segment_end(const uint8_t *s, size_t len, size_t at) {
  for (size_t i = at; i < len;) {
    int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &c);
    if (i - at >= SEGMENT_BYTES && cut_before(c)) return i;
    i += (size_t)(k > 0 ? k : 1);
  }
  return len;
}

/* The first special token in s[at..len): its offset (len if none) and, in
 * *which, its index in t->special. Hugging Face matches the special tokens
 * in the raw text, case-sensitive, anywhere (inside a word too), leftmost
 * first, before normalizing: "x[SEP]y" is x, [SEP], y; "[mask]" is not
 * one. Each starts with '[', which is all the scan looks for. */
static size_t next_special(const kiln_tokenizer *t, const uint8_t *s, size_t len, size_t at, int *which) {
  for (size_t i = at; i < len; i++) {
    const uint8_t *b = memchr(s + i, '[', len - i);
    if (!b) break;
    i = (size_t)(b - s);
    for (int k = 0; k < t->n_special; k++) {
      size_t n = strlen(t->special[k]);
      if (n <= len - i && !memcmp(s + i, t->special[k], n)) {
        *which = k;
        return i;
      }
    }
  }
  return len;
}

/* Steps 1-6 on the text s[at..end) (no special token in it) */
static bool encode_text(const kiln_tokenizer *t, const uint8_t *s, size_t at, size_t end, sink *k) {
  /* Normalize and split a segment at a time, and stop once truncation has
   * all its pieces: a long line costs memory for one segment (not ~9 bytes
   * per byte of the line) and time for what is kept. */
  word w = {.n = 0};
  while (at < end && k->pieces_left > 0) {
    size_t e = segment_end(s, end, at);
    cpvec norm = {0};
    if (!normalize(t, s + at, e - at, &norm)) {
      free(norm.v);
      return false;
    }
    split_words(t, &norm, &w, k);
    free(norm.v);
    at = e;
  }
  word_end(t, &w, k);
  return true;
}

/* The offset of the first invalid UTF-8 sequence in s[0..len), or len. */
static size_t utf8_invalid_at(const uint8_t *s, size_t len, const char **why) {
  for (size_t i = 0; i < len;) {
    int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &c);
    if (k < 0) {
      *why = utf8proc_errmsg(k);
      return i;
    }
    i += (size_t)k;
  }
  return len;
}

kiln_status kiln_tokenizer_encode_err(const kiln_tokenizer *t, const char *utf8, size_t len, int64_t max_len,
                                      int64_t *ids, int64_t cap, int64_t *n_out, kiln_err *err) {
  const char *op = "kiln_tokenizer_encode";
  if (n_out) *n_out = 0;
  if (!t || !n_out) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: %s is NULL", op, t ? "n_out" : "t");
  if (max_len < 2)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: max_len %lld < 2 ([CLS] and [SEP] need 2)", op,
                        (long long)max_len);
  if (cap < 0 || (cap > 0 && !ids))
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: ids %s with cap %lld", op, ids ? "given" : "NULL",
                        (long long)cap);
  if (!utf8 && len)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: text is NULL with len %zu", op, len);
  const uint8_t *s = (const uint8_t *)utf8;
  const char *why = NULL;
  size_t bad = utf8_invalid_at(s, len, &why);
  if (bad < len)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                        "%s: invalid UTF-8 at byte offset %zu of %zu (byte 0x%02x): %s", op, bad, len, s[bad], why);
  sink k = {.ids = ids, .cap = cap, .n = 0, .pieces_left = max_len - 2};
  emit(&k, t->cls);
  /* the text between special tokens, each special token its own id */
  for (size_t at = 0; at < len && k.pieces_left > 0;) {
    int which = -1;
    size_t sp = next_special(t, s, len, at, &which);
    if (!encode_text(t, s, at, sp, &k))
      return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory normalizing %zu bytes", op, sp - at);
    if (sp == len) break;
    if (k.pieces_left > 0) {
      emit(&k, t->special_id[which]);
      k.pieces_left--;
    }
    at = sp + strlen(t->special[which]);
  }
  emit(&k, t->sep);
  *n_out = k.n;
  return KILN_OK;
}

kiln_status kiln_tokenizer_encode_at(const kiln_tokenizer *t, const char *utf8, size_t len, int64_t max_len,
                                     int64_t *ids, int64_t cap, int64_t *n_out, kiln_loc loc) {
  kiln_err err = {0};
  kiln_status s = kiln_tokenizer_encode_err(t, utf8, len, max_len, ids, cap, n_out, &err);
  if (s != KILN_OK) return kiln_error(s, loc, "%s", err.msg);
  return KILN_OK;
}
