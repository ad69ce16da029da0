/* libFuzzer harness. Property: for any bytes as a vocabulary file (a model
 * folder's vocab.txt comes from outside), kiln_tokenizer_create_from_memory
 *   1. never reads outside the input and never crashes (ASan/UBSan);
 *   2. fails exactly when the bytes hold a NUL, hold no line, or lack one of
 *      [UNK], [CLS], [SEP] as a whole line, with CORRUPT and a message;
 *   3. otherwise numbers the lines as transformers' load_vocab does (Python's
 *      universal newlines, counted here by this harness's own reading): the
 *      vocabulary size is the line count, token i is line i without its end,
 *      and a token's id is the last line that holds it;
 *   4. encodes a fixed text into ids of the vocabulary, [CLS] first, [SEP]
 *      last.
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_tokenizer_vocab -max_total_time=60 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"

/* The lines of s[0..n) as Python's readlines() with newline=None reads them:
 * "\n", "\r\n" and a lone "\r" end a line; the last line may lack its end.
 * Fills start/len (cap entries) and returns the count. */
static size_t py_lines(const uint8_t *s, size_t n, size_t *start, size_t *len, size_t cap) {
  size_t count = 0, i = 0;
  while (i < n) {
    size_t b = i;
    while (i < n && s[i] != '\n' && s[i] != '\r') i++;
    if (count < cap) {
      start[count] = b;
      len[count] = i - b;
    }
    count++;
    if (i < n) i += (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') ? 2 : 1;
  }
  return count;
}

static int has_line(const uint8_t *s, const size_t *start, const size_t *len, size_t lines, const char *tok) {
  size_t k = strlen(tok);
  for (size_t i = 0; i < lines; i++)
    if (len[i] == k && memcmp(s + start[i], tok, k) == 0) return 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  enum { CAP = 512 }; /* lines: the check below is quadratic in them */
  if (size > 1 << 16) return 0;
  static size_t start[CAP], len[CAP];
  size_t lines = py_lines(data, size, start, len, CAP);
  if (lines > CAP) return 0;
  /* An exact-size copy, so any over-read hits ASan's redzone. */
  char *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  kiln_tokenizer *t = NULL;
  kiln_err err = {0};
  kiln_status st = kiln_tokenizer_create_from_memory_err(buf, size, NULL, "fuzz-vocab", &t, &err);
  free(buf);
  int ok = !memchr(data, 0, size) && lines > 0 && has_line(data, start, len, lines, "[UNK]") &&
           has_line(data, start, len, lines, "[CLS]") && has_line(data, start, len, lines, "[SEP]");
  if (!ok) {
    if (st != KILN_ERR_CORRUPT || t || !err.msg[0]) abort();
    return 0;
  }
  if (st != KILN_OK || !t || kiln_tokenizer_vocab_size(t) != (int64_t)lines) abort();
  for (size_t i = 0; i < lines; i++) {
    const char *tok = kiln_tokenizer_token(t, (int64_t)i);
    if (!tok || strlen(tok) != len[i] || memcmp(tok, data + start[i], len[i]) != 0) abort();
    int64_t id = kiln_tokenizer_token_id(t, tok);
    size_t last = i;
    for (size_t j = i + 1; j < lines; j++)
      if (len[j] == len[i] && memcmp(data + start[j], data + start[i], len[i]) == 0) last = j;
    if (id != (int64_t)last) abort();
  }
  static const char text[] = "Hello, world! unaffable café 中文 [UNK] ##a";
  int64_t ids[64], count = -1;
  if (kiln_tokenizer_encode_err(t, text, sizeof text - 1, 64, ids, 64, &count, &err) != KILN_OK) abort();
  int64_t V = kiln_tokenizer_vocab_size(t);
  int64_t cls = kiln_tokenizer_token_id(t, "[CLS]"), sep = kiln_tokenizer_token_id(t, "[SEP]");
  if (count < 2 || ids[0] != cls || ids[count - 1] != sep) abort();
  for (int64_t i = 0; i < count; i++)
    if (ids[i] < 0 || ids[i] >= V) abort();
  kiln_tokenizer_destroy(t);
  return 0;
}
