/* A BERT model folder's files besides the weights (kiln/bert.h): config.json,
 * the tokenizer's settings (tokenizer_config.json, tokenizer.json, ...) and
 * the sentence-transformers modules. Each file is read by key with a small
 * JSON scanner; anything that would make kiln compute another model or other
 * token ids than transformers / sentence-transformers is refused by name. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/status.h"
#include "kiln/bert.h"
#include "kiln/text.h"
#include "nn/bert_internal.h"

/* ── config.json: the numbers kiln needs, found by key ── */

static const char *json_ws(const char *q) {
  while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
  return q;
}

/* The end of the string that starts at q (q[0] == '"'): past its closing quote. */
static const char *json_string_end(const char *q) {
  for (q++; *q && *q != '"'; q++)
    if (*q == '\\' && q[1]) q++;
  return *q ? q + 1 : q;
}

/* The value of the top-level "key" of the object json (NUL-terminated), or
 * NULL. Keys of nested objects ("text_config": {...}, "id2label") are not
 * the model's; a key given twice takes its last value, as Python's json. */
static const char *json_value(const char *json, const char *key) {
  if (!json) return NULL;
  const char *found = NULL, *q = json_ws(json);
  size_t kl = strlen(key);
  int depth = 0;
  while (*q) {
    if (*q == '"') {
      const char *e = json_string_end(q), *after = json_ws(e);
      if (depth == 1 && *after == ':' && (size_t)(e - q) == kl + 2 && !strncmp(q + 1, key, kl))
        found = json_ws(after + 1);
      q = e;
    } else {
      if (*q == '{' || *q == '[') depth++;
      else if (*q == '}' || *q == ']') depth--;
      q++;
    }
  }
  return found;
}

/* Whether the top-level "key" is absent or the string want. */
static int json_string_is(const char *json, const char *key, const char *want) {
  const char *q = json_value(json, key);
  size_t n = strlen(want);
  return !q || (q[0] == '"' && !strncmp(q + 1, want, n) && q[n + 1] == '"');
}

/* The string value of "key" (at most 40 characters, for a message) into buf. */
static const char *json_show(const char *json, const char *key, char *buf, size_t cap) {
  const char *q = json_value(json, key);
  /* a string to its closing quote; anything else (a value missing at the
   * end of the text included: q at its NUL) to the next separator */
  size_t n = !q ? 0 : *q == '"' ? (size_t)(json_string_end(q) - q) : strcspn(q, ",}\n");
  if (n > 40) n = 40;
  snprintf(buf, cap, "%.*s", (int)n, q ? q : "");
  return buf;
}

static int json_number(const char *json, const char *key, double *v) {
  const char *q = json_value(json, key);
  if (!q) return -1;
  char *end;
  errno = 0;
  double d = strtod(q, &end);
  if (end == q || errno || !isfinite(d)) return -1;
  *v = d;
  return 0;
}

/* path's text (at most max bytes) NUL-terminated into *out (free it); with
 * optional, an absent file is *out = NULL and no error. */
static kiln_status read_json_max(const char *path, const char *what, int optional, size_t max, char **out,
                                 kiln_loc loc) {
  *out = NULL;
  if (optional && access(path, F_OK) != 0 && errno == ENOENT) return KILN_OK;
  kiln_err err = {0};
  int fd;
  if (kiln_fs_open_input(path, what, &fd, &err) != KILN_OK)
    return kiln_error(err.code ? err.code : KILN_ERR_IO, loc, "bert: %s", err.msg);
  uint8_t *buf = NULL;
  size_t n = 0;
  kiln_status st = kiln_fs_read_fd(fd, max, &buf, &n, &err);
  close(fd);
  if (st != KILN_OK) return kiln_error(st, loc, "bert: %s: %s", path, err.msg);
  char *json = realloc(buf, n + 1);
  if (!json) {
    free(buf);
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "bert: out of host memory");
  }
  json[n] = 0;
  *out = json;
  return KILN_OK;
}

/* A configuration file: at most 1 MiB. */
static kiln_status read_json(const char *path, const char *what, int optional, char **out, kiln_loc loc) {
  return read_json_max(path, what, optional, 1u << 20, out, loc);
}

kiln_status kiln_bert_read_config(const char *path, kiln_bert_config *c, kiln_loc loc) {
  char *json;
  kiln_status st = read_json(path, "bert config", 0, &json, loc);
  if (st != KILN_OK) return st;
  static const char *const keys[8] = {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                      "intermediate_size", "max_position_embeddings", "type_vocab_size",
                                      "layer_norm_eps"};
  int *ints[7] = {&c->vocab_size, &c->hidden_size, &c->num_hidden_layers, &c->num_attention_heads,
                  &c->intermediate_size, &c->max_position_embeddings, &c->type_vocab_size};
  st = KILN_OK;
  for (int i = 0; i < 8 && !st; i++) {
    double v;
    if (json_number(json, keys[i], &v) || (i < 7 && (v != floor(v) || v < 1 || v > 1e9)))
      st = kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: %s: \"%s\" is missing or not a valid number", path,
                      keys[i]);
    else if (i < 7) *ints[i] = (int)v;
    else c->layer_norm_eps = v;
  }
  /* HF's defaults when absent: gelu, absolute positions, bert. Anything else
   * is another computation (relative position terms, RoBERTa's position
   * offset, ...): loading it as BERT would give wrong embeddings. */
  static const char *const str_keys[3][2] = {
      {"hidden_act", "gelu"}, {"position_embedding_type", "absolute"}, {"model_type", "bert"}};
  for (int i = 0; i < 3 && !st; i++) {
    char shown[48];
    if (!json_string_is(json, str_keys[i][0], str_keys[i][1]))
      st = kiln_error(KILN_ERR_UNSUPPORTED, loc, "bert: %s: %s %s is not supported (\"%s\" is)", path,
                      str_keys[i][0], json_show(json, str_keys[i][0], shown, sizeof shown), str_keys[i][1]);
  }
  free(json);
  return st ? st : kiln_bert_check_config(c, path, loc);
}

/* 1 true, 0 false, -1 null or absent (json may be NULL) */
static int json_bool(const char *json, const char *key) {
  const char *v = json_value(json, key);
  return v && !strncmp(v, "true", 4) ? 1 : v && !strncmp(v, "false", 5) ? 0 : -1;
}

/* An integer "key" in [2, 2^20], else 0 (absent, not a number, out of range:
 * tokenizers' model_max_length of 1e30 means none) */
static int64_t json_len(const char *json, const char *key) {
  double v;
  return json && !json_number(json, key, &v) && v == floor(v) && v >= 2 && v <= (1 << 20) ? (int64_t)v : 0;
}

/* The objects of the top-level array (or object) json, one at a time: the
 * next object after *at, NUL-terminated into buf (cap bytes; a longer object
 * comes out as "{}", a module without a type), or 0 at the end. */
static int json_next_object(const char *json, const char **at, char *buf, size_t cap) {
  const char *q = *at ? *at : json, *start = NULL;
  int depth = *at ? 1 : 0; /* resumed right after an object, inside the array */
  while (*q) {
    if (*q == '"') {
      q = json_string_end(q);
      continue;
    }
    if (*q == '{' || *q == '[') {
      if (++depth == 2 && *q == '{') start = q;
    } else if (*q == '}' || *q == ']') {
      if (depth-- == 2 && start && *q == '}') {
        size_t n = (size_t)(q + 1 - start);
        snprintf(buf, cap, "%.*s", n < cap ? (int)n : 2, n < cap ? start : "{}");
        *at = q + 1;
        return 1;
      }
    }
    q++;
  }
  *at = q;
  return 0;
}

/* The string value of "key" of the object obj without its quotes into buf
 * (escapes refused), or "" */
static const char *json_plain_string(const char *obj, const char *key, char *buf, size_t cap) {
  const char *q = json_value(obj, key);
  buf[0] = 0;
  if (!q || *q != '"') return buf;
  size_t n = (size_t)(json_string_end(q) - q);
  if (n >= 2 && q[n - 1] == '"' && !memchr(q + 1, '\\', n - 2) && n - 2 < cap)
    snprintf(buf, cap, "%.*s", (int)n - 2, q + 1);
  return buf;
}

/* ── the tokenizer's files: what kiln's WordPiece tokenizer does not do ──
 *
 * transformers' BertTokenizerFast takes added tokens (tokenizer.json's
 * added_tokens, tokenizer_config.json's added_tokens_decoder, the slow
 * tokenizer's added_tokens.json), renamed special tokens and the
 * WordPiece settings from the folder. kiln's tokenizer knows BERT's five
 * special tokens and the default WordPiece; a folder that asks for more
 * would get other token ids, so it is refused, naming the file and the
 * token or setting. */

static const char *const k_special[5][2] = {
    {"pad_token", "[PAD]"}, {"unk_token", "[UNK]"}, {"cls_token", "[CLS]"}, {"sep_token", "[SEP]"},
    {"mask_token", "[MASK]"}};

static int is_bert_special(const char *s) {
  for (int i = 0; i < 5; i++)
    if (!strcmp(s, k_special[i][1])) return 1;
  return 0;
}

/* A copy of the object or array value of the top-level "key" (free it), or NULL */
static char *json_member_copy(const char *json, const char *key) {
  const char *q = json_value(json, key), *e = q;
  if (!q || (*q != '{' && *q != '[')) return NULL;
  for (int depth = 0; *e;) {
    if (*e == '"') {
      e = json_string_end(e);
      continue;
    }
    if (*e == '{' || *e == '[') depth++;
    else if ((*e == '}' || *e == ']') && --depth == 0) {
      e++;
      break;
    }
    e++;
  }
  return strndup(q, (size_t)(e - q));
}

/* The content of a token given as a string or as {"content": ...} ("" when
 * it is neither or holds escapes); NULL when absent or null. */
static const char *token_content(const char *json, const char *key, char *buf, size_t cap) {
  const char *q = json_value(json, key);
  if (!q || !strncmp(q, "null", 4)) return NULL;
  if (*q == '"') return json_plain_string(json, key, buf, cap);
  char *obj = json_member_copy(json, key);
  json_plain_string(obj ? obj : "{}", "content", buf, cap);
  free(obj);
  return buf;
}

/* Every object of the array or object `list` (a member's copy, may be NULL)
 * must be one of BERT's special tokens by its "content"; else UNSUPPORTED. */
static kiln_status check_added(const char *list, const char *path, const char *what, kiln_loc loc) {
  char obj[1024], content[128];
  const char *at = NULL;
  while (list && json_next_object(list, &at, obj, sizeof obj)) {
    json_plain_string(obj, "content", content, sizeof content);
    if (is_bert_special(content)) continue;
    double id = -1;
    char ids[48] = "";
    if (!json_number(obj, "id", &id) && id >= 0 && id < 1e15) snprintf(ids, sizeof ids, " (id %.0f)", id);
    return kiln_error(KILN_ERR_UNSUPPORTED, loc, "bert: %s: %s \"%s\"%s is not supported (kiln's tokenizer "
                      "reads BERT's special tokens [PAD], [UNK], [CLS], [SEP] and [MASK] only)", path, what,
                      content[0] ? content : "?", ids);
  }
  return KILN_OK;
}

/* tokenizer_config.json or special_tokens_map.json: the five special tokens
 * under their names, no additional ones, no added tokens beyond them. */
static kiln_status check_special_names(const char *json, const char *path, kiln_loc loc) {
  char buf[128];
  for (int i = 0; i < 5; i++) {
    const char *c = token_content(json, k_special[i][0], buf, sizeof buf);
    if (c && strcmp(c, k_special[i][1]))
      return kiln_error(KILN_ERR_UNSUPPORTED, loc, "bert: %s: %s \"%s\" is not supported (kiln's tokenizer uses "
                        "BERT's %s)", path, k_special[i][0], c[0] ? c : "?", k_special[i][1]);
  }
  char *extra = json_member_copy(json, "additional_special_tokens");
  const char *q = extra ? json_ws(extra + 1) : NULL;
  int any = q && *q != ']';
  if (any) {
    snprintf(buf, sizeof buf, "%.*s", (int)strcspn(q, ",]\n"), q);
    if (strlen(buf) > 40) buf[40] = 0;
  }
  free(extra);
  if (any)
    return kiln_error(KILN_ERR_UNSUPPORTED, loc, "bert: %s: additional_special_tokens (%s) are not supported "
                      "(kiln's tokenizer reads BERT's five special tokens only)", path, buf);
  char *dec = json_member_copy(json, "added_tokens_decoder");
  kiln_status st = check_added(dec, path, "added token", loc);
  free(dec);
  return st;
}

/* added_tokens.json (the slow tokenizer's {"token": id}): only BERT's specials. */
static kiln_status check_added_tokens_json(const char *json, const char *path, kiln_loc loc) {
  const char *q = json_ws(json);
  if (*q != '{') return kiln_error(KILN_ERR_CORRUPT, loc, "bert: %s is not a JSON object", path);
  for (int depth = 0; *q; q++) {
    if (*q == '"') {
      const char *e = json_string_end(q);
      char key[128];
      size_t n = (size_t)(e - q);
      if (depth == 1 && *json_ws(e) == ':') {
        snprintf(key, sizeof key, "%.*s", n >= 2 && n - 2 < sizeof key ? (int)n - 2 : 0, q + 1);
        if (!is_bert_special(key))
          return kiln_error(KILN_ERR_UNSUPPORTED, loc, "bert: %s: added token \"%s\" is not supported (kiln's "
                            "tokenizer reads BERT's five special tokens only)", path, key[0] ? key : "?");
      }
      q = e - 1;
    } else if (*q == '{' || *q == '[') {
      depth++;
    } else if (*q == '}' || *q == ']') {
      depth--;
    }
  }
  return KILN_OK;
}

/* The member "key" of tokenizer.json, if present, must be an object whose
 * fields[i][0] are absent or the strings fields[i][1] (a value starting
 * with a digit or t/f: compared as written). */
static kiln_status check_component(const char *json, const char *key, const char *const (*fields)[2], int n,
                                   const char *path, kiln_loc loc) {
  char *obj = json_member_copy(json, key);
  if (!obj) return KILN_OK;
  kiln_status st = KILN_OK;
  for (int i = 0; i < n && !st; i++) {
    const char *want = fields[i][1], *q = json_value(obj, fields[i][0]);
    int ok = !q || (*q == '"' ? json_string_is(obj, fields[i][0], want)
                              : !strncmp(q, want, strlen(want)) && !isalnum((unsigned char)q[strlen(want)]));
    if (!ok) {
      char shown[48];
      st = kiln_error(KILN_ERR_UNSUPPORTED, loc, "bert: %s: %s.%s %s is not supported (kiln's tokenizer computes "
                      "%s)", path, key, fields[i][0], json_show(obj, fields[i][0], shown, sizeof shown), want);
    }
  }
  free(obj);
  return st;
}

static kiln_status check_tokenizer_json(const char *json, const char *path, kiln_loc loc) {
  char *added = json_member_copy(json, "added_tokens");
  kiln_status st = check_added(added, path, "added token", loc);
  free(added);
  static const char *const model[4][2] = {
      {"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
      {"max_input_chars_per_word", "100"}};
  static const char *const norm[3][2] = {{"type", "BertNormalizer"}, {"clean_text", "true"},
                                         {"handle_chinese_chars", "true"}};
  static const char *const pre[1][2] = {{"type", "BertPreTokenizer"}};
  if (!st) st = check_component(json, "model", model, 4, path, loc);
  if (!st) st = check_component(json, "normalizer", norm, 3, path, loc);
  if (!st) st = check_component(json, "pre_tokenizer", pre, 1, path, loc);
  return st;
}

/* Everything above for the folder dir (each file optional). */
static kiln_status check_tokenizer_files(const char *dir, const char *tokenizer_config, kiln_loc loc) {
  char path[4096], *json = NULL;
  kiln_status st = KILN_OK;
  if (tokenizer_config) {
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    st = check_special_names(tokenizer_config, path, loc);
  }
  snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
  if (!st && !(st = read_json(path, "special_tokens_map.json", 1, &json, loc)) && json)
    st = check_special_names(json, path, loc);
  free(json);
  json = NULL;
  snprintf(path, sizeof path, "%s/added_tokens.json", dir);
  if (!st && !(st = read_json(path, "added_tokens.json", 1, &json, loc)) && json)
    st = check_added_tokens_json(json, path, loc);
  free(json);
  json = NULL;
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  if (!st && !(st = read_json_max(path, "tokenizer.json", 1, KILN_TOKENIZER_MAX_VOCAB_BYTES, &json, loc)) && json)
    st = check_tokenizer_json(json, path, loc);
  free(json);
  return st;
}

kiln_status kiln_bert_text_options_at(const char *dir, kiln_tokenizer_options *tok, int64_t *max_length,
                                      kiln_loc loc) {
  if (!dir || !tok) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: text_options needs dir and tok");
  static const char *const names[3] = {"tokenizer_config.json", "sentence_bert_config.json", "config.json"};
  char *j[3] = {NULL, NULL, NULL}, path[4096];
  kiln_status st = KILN_OK;
  for (int i = 0; i < 3 && !st; i++) {
    if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path)
      st = kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: the folder's path is too long");
    else
      st = read_json(path, names[i], 1, &j[i], loc);
  }
  if (!st) st = check_tokenizer_files(dir, j[0], loc);
  if (!st && json_bool(j[0], "tokenize_chinese_chars") == 0)
    st = kiln_error(KILN_ERR_UNSUPPORTED, loc, "bert: %s/tokenizer_config.json: tokenize_chinese_chars false is not "
                    "supported", dir);
  if (!st) {
    int lower = json_bool(j[0], "do_lower_case"), strip = json_bool(j[0], "strip_accents");
    tok->lowercase = lower != 0 || json_bool(j[1], "do_lower_case") == 1;
    tok->strip_accents = strip < 0 ? lower != 0 : strip == 1;
    if (max_length) {
      int64_t v = json_len(j[1], "max_seq_length"), pos = json_len(j[2], "max_position_embeddings");
      int64_t tm = json_len(j[0], "model_max_length");
      *max_length = v ? v : pos && tm ? (pos < tm ? pos : tm) : pos ? pos : tm ? tm : 256;
    }
  }
  for (int i = 0; i < 3; i++) free(j[i]);
  return st;
}

/* ── the folder's sentence-transformers modules ──
 *
 * sentence-transformers computes an embedding with the modules listed in
 * modules.json: the Transformer (this encoder), a Pooling module (its
 * config.json says which pooling), and optionally Normalize (kiln's
 * embeddings are always L2-normalised). Any other module (Dense, ...)
 * changes the embedding: such a folder is refused rather than embedded
 * differently. No modules.json: sentence-transformers' default for a plain
 * model folder, mean pooling. */

/* dir/path/config.json of a Pooling module: exactly one of the modes kiln
 * computes (CLS token, mean, max over tokens) */
static kiln_status read_pooling_config(const char *dir, const char *sub, const kiln_bert_config *c, int *pooling,
                                       kiln_loc loc) {
  char path[4096], *json = NULL;
  if (snprintf(path, sizeof path, "%s/%s/config.json", dir, sub) >= (int)sizeof path)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: the folder's path is too long");
  kiln_status st = read_json(path, "pooling config", 0, &json, loc);
  if (st) return st;
  static const char *const modes[6] = {"pooling_mode_cls_token", "pooling_mode_mean_tokens",
                                       "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                                       "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"};
  static const int kind[3] = {POOL_CLS, POOL_MEAN, POOL_MAX};
  int on = 0, which = -1;
  for (int i = 0; i < 6; i++)
    if (json_bool(json, modes[i]) == 1) on++, which = i;
  double dim = 0;
  int dim_ok = json_number(json, "word_embedding_dimension", &dim) != 0 || dim == c->hidden_size;
  free(json);
  if (on != 1 || which > 2)
    return kiln_error(KILN_ERR_UNSUPPORTED, loc,
                      "bert: %s: %s pooling is not supported (kiln computes one of pooling_mode_cls_token, "
                      "pooling_mode_mean_tokens, pooling_mode_max_tokens)",
                      path, on == 0 ? "no" : on > 1 ? "a concatenation of several" : modes[which]);
  if (!dim_ok)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: %s: word_embedding_dimension %g, config.json's "
                      "hidden_size is %d", path, dim, c->hidden_size);
  *pooling = kind[which];
  return KILN_OK;
}

kiln_status kiln_bert_read_modules(const char *dir, const kiln_bert_config *c, int *pooling, kiln_loc loc) {
  char path[4096], *json = NULL;
  *pooling = POOL_MEAN;
  if (snprintf(path, sizeof path, "%s/modules.json", dir) >= (int)sizeof path)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: the folder's path is too long");
  kiln_status st = read_json(path, "modules.json", 1, &json, loc);
  if (st || !json) return st;
  if (*json_ws(json) != '[') {
    free(json);
    return kiln_error(KILN_ERR_CORRUPT, loc, "bert: %s is not a JSON array of modules", path);
  }
  static const char *const known[3] = {"sentence_transformers.models.Transformer",
                                       "sentence_transformers.models.Pooling",
                                       "sentence_transformers.models.Normalize"};
  char obj[1024], type[128], sub[256];
  const char *at = NULL;
  while (!st && json_next_object(json, &at, obj, sizeof obj)) {
    json_plain_string(obj, "type", type, sizeof type);
    int k = 0;
    while (k < 3 && strcmp(type, known[k])) k++;
    if (k == 3) {
      st = kiln_error(KILN_ERR_UNSUPPORTED, loc, "bert: %s: module \"%s\" is not supported (kiln computes %s, "
                      "%s and %s)", path, type[0] ? type : "?", known[0], known[1], known[2]);
    } else if (k == 1) {
      json_plain_string(obj, "path", sub, sizeof sub);
      if (!sub[0] || sub[0] == '/' || strstr(sub, ".."))
        st = kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: %s: the Pooling module's path \"%s\" is not a "
                        "folder inside the model's", path, sub);
      else
        st = read_pooling_config(dir, sub, c, pooling, loc);
    }
  }
  free(json);
  return st;
}

