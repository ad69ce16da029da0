/* safetensors header: a strict JSON parser for exactly the header's schema,
 * validation of the entries against the data section, and the encoder.
 *
 * Why a hand-written parser rather than a JSON library: the header uses a
 * tiny subset of JSON (objects, strings, non-negative integers, arrays of
 * integers), and parsing it straight into entries lets every number be
 * range-checked as it is read. No recursion (the schema has fixed depth),
 * so a hostile header cannot exhaust the stack. */
#include "io/st_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sort.h"
#include "base/text.h"

static const struct {
  const char *name;
  size_t bytes;
} k_dtypes[KILN_ST_DTYPE_COUNT] = {
    [KILN_ST_BOOL] = {"BOOL", 1}, [KILN_ST_U8] = {"U8", 1},           [KILN_ST_I8] = {"I8", 1},
    [KILN_ST_U16] = {"U16", 2},   [KILN_ST_I16] = {"I16", 2},         [KILN_ST_F16] = {"F16", 2},
    [KILN_ST_BF16] = {"BF16", 2}, [KILN_ST_U32] = {"U32", 4},         [KILN_ST_I32] = {"I32", 4},
    [KILN_ST_F32] = {"F32", 4},   [KILN_ST_U64] = {"U64", 8},         [KILN_ST_I64] = {"I64", 8},
    [KILN_ST_F64] = {"F64", 8},   [KILN_ST_F8_E4M3] = {"F8_E4M3", 1}, [KILN_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *kiln_st_dt_name(kiln_st_dt d) {
  return (unsigned)d < KILN_ST_DTYPE_COUNT ? k_dtypes[d].name : "?";
}
size_t kiln_st_dt_bytes(kiln_st_dt d) { return (unsigned)d < KILN_ST_DTYPE_COUNT ? k_dtypes[d].bytes : 0; }

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned cp, min;
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
  else return 0;
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

int kiln_st_utf8_valid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t l = utf8_seq(p + i, n - i);
    if (!l) return 0;
    i += l;
  }
  return 1;
}

void kiln_st_header_free(kiln_st_header *h) {
  if (!h) return;
  free(h->text); /* every name and metadata string lives in it */
  free(h->entries);
  free(h->by_name);
  free(h->meta);
  memset(h, 0, sizeof *h);
}

/* ───────────── the parser ───────────── */

/* The parser decodes strings in place: a decoded JSON string is never
 * longer than its encoding (an escape shrinks, the quotes make room for the
 * NUL), so each string is written over its own quoted text and the header
 * keeps pointers into that one buffer. Memory is then the header's size
 * plus the entry arrays, not an allocation per string (a header of a
 * million tiny metadata strings cost 19 times its size). */
typedef struct parser {
  char *s;
  size_t n, i;
  kiln_err *err;
} parser;

static kiln_status fail(parser *p, const char *what) {
  if (p->i >= p->n) return kiln_err_set(p->err, KILN_ERR_CORRUPT, "header ends early: %s", what);
  unsigned char c = (unsigned char)p->s[p->i];
  if (c >= 0x20 && c < 0x7f)
    return kiln_err_set(p->err, KILN_ERR_CORRUPT, "header byte %zu ('%c'): %s", p->i, c, what);
  return kiln_err_set(p->err, KILN_ERR_CORRUPT, "header byte %zu (0x%02x): %s", p->i, c, what);
}

static void skip_ws(parser *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
    p->i++;
}

/* Consume `c` (after whitespace) or fail. */
static kiln_status expect(parser *p, char c, const char *what) {
  skip_ws(p);
  if (p->i >= p->n || p->s[p->i] != c) return fail(p, what);
  p->i++;
  return KILN_OK;
}

/* 1 and consume if the next non-space byte is c. */
static int accept(parser *p, char c) {
  skip_ws(p);
  if (p->i < p->n && p->s[p->i] == c) {
    p->i++;
    return 1;
  }
  return 0;
}

static int hex4(const char *s, unsigned *out) {
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    char c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

/* A JSON string, decoded in place (see the parser): *out points into the
 * header text, NUL-terminated. Rejects raw control characters, invalid
 * UTF-8, lone surrogates, and NUL (\u0000), which no C-string name could
 * hold. */
static kiln_status parse_string(parser *p, char **out) {
  *out = NULL;
  skip_ws(p);
  if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "expected a string");
  /* The opening quote stays (error messages may point at it); the decoded
   * bytes start after it, and w <= p->i always: writes trail reads. */
  p->i++;
  size_t start = p->i, w = p->i;
  for (;;) {
    if (p->i >= p->n) return fail(p, "unterminated string");
    unsigned char c = (unsigned char)p->s[p->i];
    if (c == '"') {
      p->i++;
      break;
    }
    if (c < 0x20) return fail(p, "control character in string");
    if (c == '\\') {
      if (p->i + 1 >= p->n) return fail(p, "unterminated escape");
      char e = p->s[p->i + 1], ch;
      unsigned char u8[4];
      size_t ul = 0;
      switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': ch = 0; break;
        default: return fail(p, "bad escape in string");
      }
      if (e != 'u') {
        p->i += 2;
        p->s[w++] = ch;
        continue;
      }
      unsigned cp;
      if (p->n - p->i < 6 || hex4(p->s + p->i + 2, &cp)) return fail(p, "bad \\u escape");
      p->i += 6;
      if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(p, "lone low surrogate in \\u escape");
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        unsigned lo;
        if (p->n - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' || hex4(p->s + p->i + 2, &lo) ||
            lo < 0xDC00 || lo > 0xDFFF)
          return fail(p, "high surrogate not followed by a low surrogate");
        p->i += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      }
      if (cp == 0) return fail(p, "NUL character (\\u0000) in string");
      if (cp < 0x80) {
        u8[ul++] = (unsigned char)cp;
      } else if (cp < 0x800) {
        u8[ul++] = (unsigned char)(0xC0 | (cp >> 6));
        u8[ul++] = (unsigned char)(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        u8[ul++] = (unsigned char)(0xE0 | (cp >> 12));
        u8[ul++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u8[ul++] = (unsigned char)(0x80 | (cp & 0x3F));
      } else {
        u8[ul++] = (unsigned char)(0xF0 | (cp >> 18));
        u8[ul++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        u8[ul++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u8[ul++] = (unsigned char)(0x80 | (cp & 0x3F));
      }
      memcpy(p->s + w, u8, ul); /* 6 or 12 bytes were read, at most 4 written */
      w += ul;
      continue;
    }
    size_t l = utf8_seq((const unsigned char *)p->s + p->i, p->n - p->i);
    if (!l) return fail(p, "invalid UTF-8 in string");
    memmove(p->s + w, p->s + p->i, l);
    w += l;
    p->i += l;
  }
  p->s[w] = 0; /* w <= the closing quote's index */
  *out = p->s + start;
  return KILN_OK;
}

/* A non-negative JSON integer (no sign, fraction or exponent: the header
 * holds only sizes and offsets) that fits in 63 bits. */
static kiln_status parse_uint(parser *p, const char *what, uint64_t *out) {
  skip_ws(p);
  if (p->i < p->n && p->s[p->i] == '-') return fail(p, what[0] == 's' ? "negative dimension" : "negative offset");
  if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "expected a non-negative integer");
  size_t start = p->i;
  uint64_t v = 0;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
    unsigned d = (unsigned)(p->s[p->i] - '0');
    if (v > ((uint64_t)INT64_MAX - d) / 10) {
      p->i = start;
      return fail(p, "integer too large (over 2^63-1)");
    }
    v = v * 10 + d;
    p->i++;
  }
  if (p->s[start] == '0' && p->i - start > 1) {
    p->i = start;
    return fail(p, "integer with a leading zero");
  }
  if (p->i < p->n && (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E'))
    return fail(p, "expected an integer, not a fraction or exponent");
  *out = v;
  return KILN_OK;
}

/* {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}: every field once. */
static kiln_status parse_entry(parser *p, kiln_st_entry *e) {
  kiln_status s;
  if ((s = expect(p, '{', "expected '{' starting a tensor entry"))) return s;
  int seen_dtype = 0, seen_shape = 0, seen_off = 0;
  if (accept(p, '}')) return fail(p, "tensor entry has no fields (needs dtype, shape, data_offsets)");
  do {
    char *key;
    size_t key_at = (skip_ws(p), p->i);
    if ((s = parse_string(p, &key))) return s;
    int which = !strcmp(key, "dtype") ? 0 : !strcmp(key, "shape") ? 1 : !strcmp(key, "data_offsets") ? 2 : -1;
    if (which < 0 || (which == 0 && seen_dtype) || (which == 1 && seen_shape) || (which == 2 && seen_off)) {
      p->i = key_at;
      return fail(p, which < 0 ? "unknown field in tensor entry (expected dtype, shape, data_offsets)"
                               : "duplicate field in tensor entry");
    }
    if ((s = expect(p, ':', "expected ':'"))) return s;
    if (which == 0) {
      char *dt;
      size_t at = (skip_ws(p), p->i);
      if ((s = parse_string(p, &dt))) return s;
      int found = -1;
      for (int d = 0; d < KILN_ST_DTYPE_COUNT; d++)
        if (!strcmp(dt, k_dtypes[d].name)) found = d;
      if (found < 0) {
        p->i = at;
        return fail(p, "unknown dtype");
      }
      e->dtype = (kiln_st_dt)found;
      seen_dtype = 1;
    } else if (which == 1) {
      if ((s = expect(p, '[', "expected '[' starting shape"))) return s;
      e->rank = 0;
      if (!accept(p, ']')) {
        do {
          uint64_t d;
          if ((s = parse_uint(p, "shape", &d))) return s;
          if (e->rank == 8)
            return kiln_err_set(p->err, KILN_ERR_UNSUPPORTED,
                                "header byte %zu: shape has more than 8 dimensions (kiln's limit)", p->i);
          e->shape[e->rank++] = (int64_t)d;
        } while (accept(p, ','));
        if ((s = expect(p, ']', "expected ',' or ']' in shape"))) return s;
      }
      seen_shape = 1;
    } else {
      if ((s = expect(p, '[', "expected '[' starting data_offsets"))) return s;
      if ((s = parse_uint(p, "offset", &e->begin))) return s;
      if ((s = expect(p, ',', "data_offsets needs exactly 2 integers"))) return s;
      if ((s = parse_uint(p, "offset", &e->end))) return s;
      if ((s = expect(p, ']', "data_offsets needs exactly 2 integers"))) return s;
      seen_off = 1;
    }
  } while (accept(p, ','));
  if ((s = expect(p, '}', "expected ',' or '}' in tensor entry"))) return s;
  if (!seen_dtype || !seen_shape || !seen_off)
    return kiln_err_set(p->err, KILN_ERR_CORRUPT, "tensor entry ending at header byte %zu has no \"%s\"", p->i,
                        !seen_dtype ? "dtype" : !seen_shape ? "shape" : "data_offsets");
  return KILN_OK;
}

static kiln_status parse_metadata(parser *p, kiln_st_header *h) {
  kiln_status s;
  if ((s = expect(p, '{', "__metadata__ must be an object"))) return s;
  if (accept(p, '}')) return KILN_OK;
  int cap = 0;
  do {
    char *k = NULL, *v = NULL;
    if ((s = parse_string(p, &k))) return s;
    if ((s = expect(p, ':', "expected ':'"))) {
      return s;
    }
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] != '"') {
      return fail(p, "__metadata__ values must be strings");
    }
    if ((s = parse_string(p, &v))) {
      return s;
    }
    if (h->n_meta == cap) {
      int nc = cap ? cap * 2 : 8;
      char **m = realloc(h->meta, sizeof *m * 2 * (size_t)nc);
      if (!m) {
        return kiln_err_set(p->err, KILN_ERR_OUT_OF_MEMORY, "out of memory parsing the header");
      }
      h->meta = m;
      cap = nc;
    }
    h->meta[2 * h->n_meta] = k;
    h->meta[2 * h->n_meta + 1] = v;
    h->n_meta++;
  } while (accept(p, ','));
  return expect(p, '}', "expected ',' or '}' in __metadata__");
}

static int cmp_name(int32_t a, int32_t b, void *ctx) {
  const kiln_st_header *h = ctx;
  return strcmp(h->entries[a].name, h->entries[b].name);
}

static int cmp_offsets(int32_t a, int32_t b, void *ctx) {
  const kiln_st_header *h = ctx;
  const kiln_st_entry *x = &h->entries[a], *y = &h->entries[b];
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

/* Per entry: offsets ordered and inside the data, byte size = numel × dtype
 * size; then the entries, sorted by offset, tile [0, data_len) exactly. */
static kiln_status validate(kiln_st_header *h, uint64_t data_len, kiln_err *err) {
  for (int i = 0; i < h->n; i++) {
    kiln_st_entry *e = &h->entries[i];
    if (e->begin > e->end)
      return kiln_err_set(err, KILN_ERR_CORRUPT, "tensor \"%.200s\": data_offsets [%llu, %llu] are reversed",
                          e->name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > data_len)
      return kiln_err_set(err, KILN_ERR_CORRUPT,
                          "tensor \"%.200s\": data_offsets [%llu, %llu] go past the data section (%llu bytes)",
                          e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)data_len);
    /* numel with overflow checks; zero dims are skipped so that the check
     * does not depend on the order of the dims. */
    uint64_t numel = 1;
    int zero = 0;
    for (int d = 0; d < e->rank; d++) {
      if (e->shape[d] == 0) {
        zero = 1;
        continue;
      }
      if (__builtin_mul_overflow(numel, (uint64_t)e->shape[d], &numel) || numel > (uint64_t)INT64_MAX)
        return kiln_err_set(err, KILN_ERR_CORRUPT, "tensor \"%.200s\": shape has too many elements", e->name);
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(numel, (uint64_t)kiln_st_dt_bytes(e->dtype), &bytes))
      return kiln_err_set(err, KILN_ERR_CORRUPT, "tensor \"%.200s\": shape has too many bytes", e->name);
    if (zero) bytes = 0;
    if (bytes != e->end - e->begin)
      return kiln_err_set(err, KILN_ERR_CORRUPT,
                          "tensor \"%.200s\": data_offsets [%llu, %llu] hold %llu bytes but %s with this shape "
                          "needs %llu",
                          e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)(e->end - e->begin), kiln_st_dt_name(e->dtype),
                          (unsigned long long)bytes);
  }
  int32_t *idx = malloc(sizeof *idx * (size_t)(h->n ? h->n : 1)), *tmp = malloc(sizeof *tmp * (size_t)(h->n ? h->n : 1));
  if (!idx || !tmp) {
    free(idx);
    free(tmp);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory checking the header");
  }
  for (int i = 0; i < h->n; i++) idx[i] = i;
  kiln_sort_idx(idx, tmp, h->n, cmp_offsets, h);
  uint64_t at = 0;
  kiln_status s = KILN_OK;
  for (int k = 0; k < h->n && !s; k++) {
    const kiln_st_entry *e = &h->entries[idx[k]];
    if (e->begin < at)
      s = kiln_err_set(err, KILN_ERR_CORRUPT, "tensor \"%.200s\": data_offsets [%llu, %llu] overlap another tensor",
                       e->name, (unsigned long long)e->begin, (unsigned long long)e->end);
    else if (e->begin > at)
      s = kiln_err_set(err, KILN_ERR_CORRUPT,
                       "data section has a hole: bytes [%llu, %llu) belong to no tensor", (unsigned long long)at,
                       (unsigned long long)e->begin);
    at = e->end;
  }
  if (!s && at != data_len)
    s = kiln_err_set(err, KILN_ERR_CORRUPT,
                     "data section has %llu bytes but the tensors cover only %llu (trailing bytes)",
                     (unsigned long long)data_len, (unsigned long long)at);
  if (!s) {
    for (int i = 0; i < h->n; i++) idx[i] = i;
    kiln_sort_idx(idx, tmp, h->n, cmp_name, h);
    for (int k = 1; k < h->n && !s; k++)
      if (!strcmp(h->entries[idx[k]].name, h->entries[idx[k - 1]].name))
        s = kiln_err_set(err, KILN_ERR_CORRUPT, "duplicate tensor name \"%.200s\"", h->entries[idx[k]].name);
  }
  free(tmp);
  if (s) {
    free(idx);
    return s;
  }
  h->by_name = idx;
  return KILN_OK;
}

kiln_status kiln_st_header_parse(const char *json, size_t len, uint64_t data_len, kiln_st_header *out,
                                 kiln_err *err) {
  memset(out, 0, sizeof *out);
  char *copy = malloc(len ? len : 1);
  if (!copy) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory for a %zu-byte header", len);
  if (len) memcpy(copy, json, len);
  return kiln_st_header_parse_owned(copy, len, data_len, out, err);
}

kiln_status kiln_st_header_parse_owned(char *json, size_t len, uint64_t data_len, kiln_st_header *out,
                                       kiln_err *err) {
  memset(out, 0, sizeof *out);
  parser p = {json, len, 0, err};
  kiln_st_header h = {0};
  h.text = json; /* freed with h, on success or failure */
  int cap = 0;
  kiln_status s;
  if (!len || json[0] != '{') {
    s = kiln_err_set(err, KILN_ERR_CORRUPT, "header does not start with '{'");
    goto done;
  }
  p.i = 1;
  if (!accept(&p, '}')) {
    do {
      char *key;
      size_t key_at = (skip_ws(&p), p.i);
      if ((s = parse_string(&p, &key))) goto done;
      if ((s = expect(&p, ':', "expected ':'"))) {
        goto done;
      }
      if (!strcmp(key, "__metadata__")) {
        if (h.has_meta) {
          p.i = key_at;
          s = fail(&p, "duplicate __metadata__");
          goto done;
        }
        h.has_meta = 1;
        if ((s = parse_metadata(&p, &h))) goto done;
        continue;
      }
      if (h.n == cap) {
        int nc = cap ? cap * 2 : 16;
        kiln_st_entry *ne = realloc(h.entries, sizeof *ne * (size_t)nc);
        if (!ne) {
          s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory parsing the header");
          goto done;
        }
        h.entries = ne;
        cap = nc;
      }
      kiln_st_entry *e = &h.entries[h.n++];
      memset(e, 0, sizeof *e);
      e->name = key;
      if ((s = parse_entry(&p, e))) goto done;
    } while (accept(&p, ','));
    if ((s = expect(&p, '}', "expected ',' or '}' after a header entry"))) goto done;
  }
  skip_ws(&p);
  if (p.i != len) {
    s = fail(&p, "trailing bytes after the header object (only space padding is allowed)");
    goto done;
  }
  if ((s = validate(&h, data_len, err))) goto done;
  *out = h;
  return KILN_OK;
done:
  kiln_st_header_free(&h);
  return s;
}

kiln_status kiln_st_prefix_check(const uint8_t *prefix, uint64_t file_size, uint64_t *header_len, kiln_err *err) {
  *header_len = 0;
  if (file_size < 8)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "truncated: %llu bytes, shorter than the 8-byte header length",
                        (unsigned long long)file_size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | prefix[i];
  if (n > KILN_ST_MAX_HEADER)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "header length %llu exceeds the limit of %llu bytes",
                        (unsigned long long)n, (unsigned long long)KILN_ST_MAX_HEADER);
  if (n > file_size - 8)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "truncated: header length %llu but only %llu bytes follow",
                        (unsigned long long)n, (unsigned long long)(file_size - 8));
  *header_len = n;
  return KILN_OK;
}

kiln_status kiln_st_image_parse(const uint8_t *buf, size_t n, kiln_st_header *out, uint64_t *data_start,
                                kiln_err *err) {
  memset(out, 0, sizeof *out);
  *data_start = 0;
  uint64_t hl;
  kiln_status s = kiln_st_prefix_check(buf, n, &hl, err);
  if (s) return s;
  s = kiln_st_header_parse((const char *)buf + 8, (size_t)hl, n - 8 - hl, out, err);
  if (!s) *data_start = 8 + hl;
  return s;
}

int kiln_st_header_find(const kiln_st_header *h, const char *name) {
  int lo = 0, hi = h->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2, c = strcmp(h->entries[h->by_name[mid]].name, name);
    if (!c) return h->by_name[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/* ───────────── the encoder ───────────── */

kiln_status kiln_st_header_encode(const kiln_st_header *h, char **out, size_t *out_n, kiln_err *err) {
  *out = NULL;
  *out_n = 0;
  for (int i = 0; i < h->n; i++)
    if (!kiln_st_utf8_valid(h->entries[i].name, strlen(h->entries[i].name)))
      return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "tensor name #%d is not valid UTF-8", i);
  for (int i = 0; i < 2 * h->n_meta; i++)
    if (!kiln_st_utf8_valid(h->meta[i], strlen(h->meta[i])))
      return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "metadata %s #%d is not valid UTF-8",
                          i % 2 ? "value" : "key", i / 2);
  kiln_text b = {0};
  kiln_text_printf(&b, "{");
  if (h->n_meta || h->has_meta) {
    kiln_text_printf(&b, "\"__metadata__\":{");
    for (int i = 0; i < h->n_meta; i++) {
      if (i) kiln_text_printf(&b, ",");
      kiln_text_json_str(&b, h->meta[2 * i]);
      kiln_text_printf(&b, ":");
      kiln_text_json_str(&b, h->meta[2 * i + 1]);
    }
    kiln_text_printf(&b, "}");
    if (h->n) kiln_text_printf(&b, ",");
  }
  for (int i = 0; i < h->n && !b.failed; i++) {
    const kiln_st_entry *e = &h->entries[i];
    if (i) kiln_text_printf(&b, ",");
    kiln_text_json_str(&b, e->name);
    kiln_text_printf(&b, ":{\"dtype\":\"%s\",\"shape\":[", kiln_st_dt_name(e->dtype));
    for (int d = 0; d < e->rank; d++) kiln_text_printf(&b, "%s%lld", d ? "," : "", (long long)e->shape[d]);
    kiln_text_printf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)e->begin,
                     (unsigned long long)e->end);
  }
  kiln_text_printf(&b, "}");
  while (!b.failed && b.len % 8) kiln_text_printf(&b, " ");
  if (b.failed) {
    kiln_text_free(&b);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory encoding the header");
  }
  *out_n = b.len;
  *out = kiln_text_take(&b);
  return KILN_OK;
}
