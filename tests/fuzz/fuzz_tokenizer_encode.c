/* libFuzzer harness. Property: for any bytes, kiln_tokenizer_encode with a
 * small vocabulary
 *   1. never reads outside the input and never crashes (ASan/UBSan);
 *   2. rejects exactly the inputs that are not UTF-8, as this harness's own
 *      strict decoder sees it (no overlong forms, no surrogates, nothing over
 *      U+10FFFF, no truncated sequence), with INVALID_ARGUMENT naming the
 *      byte offset of the first bad sequence;
 *   3. otherwise returns [CLS] pieces [SEP] of at most max_len ids, every id
 *      in the vocabulary, no [CLS]/[SEP] inside unless the text spells it
 *      (a special token written in the text is that token);
 *   4. is consistent: cap 0 reports the same count, and a smaller max_len
 *      gives a prefix of the same pieces.
 * The first input byte picks max_len (2..65) and the options; the rest is
 * the text.
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_tokenizer_encode -max_total_time=60 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"

static const char k_vocab[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n##s\na\n##a\n##b\nb\n,\n.\n!\n'\nhello\nworld\n##ing\nun\n##able\n"
    "cafe\ncafé\n中\n文\n한\n##국\n##ᄀ\nᄒ\n##ᅡ\n##ᆫ\nι\n##σ\nσ\n😀\n[\n]\n#\n##\n";

/* The offset of the first invalid sequence (strict UTF-8), or n. */
static size_t first_invalid(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t b = s[i];
    size_t k;
    uint32_t c, min;
    if (b < 0x80) { i++; continue; }
    if (b >= 0xC2 && b <= 0xDF) { k = 1; c = b & 0x1F; min = 0x80; }
    else if (b >= 0xE0 && b <= 0xEF) { k = 2; c = b & 0x0F; min = 0x800; }
    else if (b >= 0xF0 && b <= 0xF4) { k = 3; c = b & 0x07; min = 0x10000; }
    else return i;
    if (i + k >= n) return i; /* truncated: s[i + k] is past the end */
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xC0) != 0x80) return i;
      c = (c << 6) | (s[i + j] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return i;
    i += k + 1;
  }
  return n;
}

static kiln_tokenizer *vocab(int mode) {
  static kiln_tokenizer *t[4];
  if (!t[mode]) {
    kiln_tokenizer_options o = {.lowercase = (mode & 1) != 0, .strip_accents = (mode & 2) != 0};
    kiln_err err = {0};
    if (kiln_tokenizer_create_from_memory_err(k_vocab, sizeof k_vocab - 1, &o, "fuzz-vocab", &t[mode], &err) != KILN_OK) {
      fprintf(stderr, "fuzz vocabulary: %s\n", err.msg);
      abort();
    }
  }
  return t[mode];
}

/* Whether s[0..n) holds the bytes of tok */
static int spells(const char *s, size_t n, const char *tok) {
  size_t k = strlen(tok);
  for (size_t i = 0; i + k <= n; i++)
    if (!memcmp(s + i, tok, k)) return 1;
  return 0;
}

static void check_ok(const kiln_tokenizer *t, const char *s, size_t n, int64_t max_len, const int64_t *ids,
                     int64_t count) {
  int64_t V = kiln_tokenizer_vocab_size(t), cls = kiln_tokenizer_token_id(t, "[CLS]");
  int64_t sep = kiln_tokenizer_token_id(t, "[SEP]");
  int has_cls = spells(s, n, "[CLS]"), has_sep = spells(s, n, "[SEP]");
  if (count < 2 || count > max_len || ids[0] != cls || ids[count - 1] != sep) abort();
  for (int64_t i = 1; i + 1 < count; i++)
    if (ids[i] < 0 || ids[i] >= V || (ids[i] == cls && !has_cls) || (ids[i] == sep && !has_sep)) abort();
  int64_t again = -1;
  kiln_err err = {0};
  if (kiln_tokenizer_encode_err(t, s, n, max_len, NULL, 0, &again, &err) != KILN_OK || again != count) abort();
  if (max_len > 2) { /* one id less: the same first pieces */
    int64_t shorter[64], m = -1;
    if (kiln_tokenizer_encode_err(t, s, n, max_len - 1, shorter, 64, &m, &err) != KILN_OK) abort();
    int64_t want = count - 2 < max_len - 3 ? count - 2 : max_len - 3;
    if (m - 2 != want) abort();
    for (int64_t i = 0; i + 1 < m; i++)
      if (shorter[i] != ids[i]) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int64_t max_len = 2 + (data[0] & 63);
  kiln_tokenizer *t = vocab((data[0] >> 6) & 3);
  size_t n = size - 1;
  /* An exact-size copy, so any over-read hits ASan's redzone. */
  char *s = malloc(n ? n : 1);
  if (!s) return 0;
  if (n) memcpy(s, data + 1, n);
  int64_t ids[66], count = -1;
  kiln_err err = {0};
  kiln_status st = kiln_tokenizer_encode_err(t, s, n, max_len, ids, 66, &count, &err);
  size_t bad = first_invalid((const uint8_t *)s, n);
  if (bad < n) {
    char want[64];
    snprintf(want, sizeof want, "byte offset %zu ", bad);
    if (st != KILN_ERR_INVALID_ARGUMENT || count != 0 || !strstr(err.msg, want)) abort();
  } else {
    if (st != KILN_OK) abort();
    check_ok(t, s, n, max_len, ids, count);
  }
  free(s);
  return 0;
}
