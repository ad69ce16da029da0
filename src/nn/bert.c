/* BERT's encoder (BertModel) and sentence embeddings: kiln/bert.h. The
 * parameters live in one table in a fixed order (the embeddings, then 16 per
 * layer), each under its published name. */
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
#include "kiln/io.h"
#include "nn/bert_internal.h"
#include "nn/nn_internal.h"

#define NAME_MAX_LEN 80
enum { E_WORD, E_POS, E_TYPE, E_LN_W, E_LN_B, N_EMB };
enum { L_Q_W, L_Q_B, L_K_W, L_K_B, L_V_W, L_V_B, L_AO_W, L_AO_B, L_ALN_W, L_ALN_B,
       L_I_W, L_I_B, L_O_W, L_O_B, L_OLN_W, L_OLN_B, N_PER_LAYER };

static const char *const k_emb_names[N_EMB] = {
    "embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"};
static const char *const k_layer_names[N_PER_LAYER] = {
    "attention.self.query.weight", "attention.self.query.bias", "attention.self.key.weight",
    "attention.self.key.bias", "attention.self.value.weight", "attention.self.value.bias",
    "attention.output.dense.weight", "attention.output.dense.bias", "attention.output.LayerNorm.weight",
    "attention.output.LayerNorm.bias", "intermediate.dense.weight", "intermediate.dense.bias",
    "output.dense.weight", "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias"};

/* BertModel's pooler (dense + tanh over [CLS]) is not used by sentence
 * embeddings; when the file has it, it is carried through to the saved file
 * (not trained: it is not among kiln_bert_params). */
static const char *const k_pooler_names[2] = {"pooler.dense.weight", "pooler.dense.bias"};

struct kiln_bert {
  kiln_bert_config cfg;
  int pooling;           /* POOL_*: from the folder's modules.json, else POOL_MEAN */
  kiln_tensor pooler[2]; /* null tensors when absent */
  int n;
  char (*names)[NAME_MAX_LEN];
  kiln_tensor *t;
};

static int is_null(kiln_tensor t) { return t.index == 0 && t.gen == 0; }

/* The expected shape of parameter i; returns its rank. */
static int param_shape(const kiln_bert_config *c, int i, int64_t *s) {
  int64_t H = c->hidden_size, F = c->intermediate_size;
  if (i < N_EMB) {
    static const int rank[N_EMB] = {2, 2, 2, 1, 1};
    const int64_t rows[3] = {c->vocab_size, c->max_position_embeddings, c->type_vocab_size};
    if (rank[i] == 2) s[0] = rows[i], s[1] = H;
    else s[0] = H;
    return rank[i];
  }
  int k = (i - N_EMB) % N_PER_LAYER;
  switch (k) {
  case L_I_W: s[0] = F, s[1] = H; return 2;
  case L_I_B: s[0] = F; return 1;
  case L_O_W: s[0] = H, s[1] = F; return 2;
  case L_Q_W: case L_K_W: case L_V_W: case L_AO_W: s[0] = H, s[1] = H; return 2;
  default: s[0] = H; return 1;
  }
}

kiln_status kiln_bert_check_config(const kiln_bert_config *c, const char *what, kiln_loc loc) {
  if (c->vocab_size <= 0 || c->hidden_size <= 0 || c->num_hidden_layers <= 0 || c->num_hidden_layers > 1000 ||
      c->num_attention_heads <= 0 || c->hidden_size % c->num_attention_heads || c->intermediate_size <= 0 ||
      c->max_position_embeddings <= 0 || c->type_vocab_size <= 0 || !(c->layer_norm_eps > 0))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                      "bert: %s: bad configuration (vocab %d, hidden %d, layers %d, heads %d, intermediate %d, "
                      "positions %d, types %d, eps %g)",
                      what, c->vocab_size, c->hidden_size, c->num_hidden_layers, c->num_attention_heads,
                      c->intermediate_size, c->max_position_embeddings, c->type_vocab_size, c->layer_norm_eps);
  return KILN_OK;
}

static kiln_bert *alloc_model(const kiln_bert_config *cfg) {
  kiln_bert *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->cfg = *cfg;
  m->n = N_EMB + N_PER_LAYER * cfg->num_hidden_layers;
  m->names = calloc((size_t)m->n, sizeof *m->names);
  m->t = calloc((size_t)m->n, sizeof *m->t);
  if (!m->names || !m->t) {
    free(m->names);
    free(m->t);
    free(m);
    return NULL;
  }
  for (int i = 0; i < m->n; i++) {
    if (i < N_EMB) snprintf(m->names[i], NAME_MAX_LEN, "%s", k_emb_names[i]);
    else
      snprintf(m->names[i], NAME_MAX_LEN, "encoder.layer.%d.%s", (i - N_EMB) / N_PER_LAYER,
               k_layer_names[(i - N_EMB) % N_PER_LAYER]);
  }
  return m;
}

kiln_status kiln_bert_create_at(const kiln_bert_config *cfg, uint64_t seed, kiln_bert **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "bert");
  if (!cfg) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: cfg is NULL");
  kiln_status st = kiln_bert_check_config(cfg, "kiln_bert_create", loc);
  if (st) return st;
  kiln_bert *m = alloc_model(cfg);
  if (!m) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "bert: out of host memory");
  for (int i = 0; i < m->n; i++) {
    int64_t s[2];
    int r = param_shape(cfg, i, s);
    const char *nm = m->names[i];
    size_t len = strlen(nm);
    int is_ln_w = len > 16 && !strcmp(nm + len - 16, "LayerNorm.weight");
    if (r == 2) m->t[i] = kiln_keep(kiln_mul_c_at(kiln_rand_at(KILN_RAND_NORMAL, KILN_F32, 2, s,
                                                               kiln_nn_seed(seed, (uint64_t)i), loc), 0.02, loc));
    else m->t[i] = kiln_nn_fill(1, s, is_ln_w ? 1.0 : 0.0, loc);
    /* A parameter's own validity, not the sticky status: an earlier,
     * unrelated error the program has not cleared must not fail this
     * create. Checked as each is made: the vectors are filled on the host,
     * and after a poisoned (too large) matrix the next could be gigabytes. */
    if (kiln_is_valid(m->t[i])) continue;
    kiln_status bad = kiln_last_status() != KILN_OK ? kiln_last_status() : KILN_ERR_INTERNAL;
    kiln_error(bad, loc, "bert: could not create parameter %s", m->names[i]);
    kiln_bert_destroy(m);
    return bad;
  }
  *out = m;
  return KILN_OK;
}

/* Load parameter i under its name, or "bert."-prefixed. */
static kiln_status load_param(kiln_bert *m, kiln_st_file *f, int i, const char *path, kiln_loc loc) {
  char alt[NAME_MAX_LEN + 8];
  const char *name = m->names[i];
  if (kiln_st_find(f, name) < 0) {
    snprintf(alt, sizeof alt, "bert.%s", m->names[i]);
    if (kiln_st_find(f, alt) < 0)
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: %s has no tensor %s", path, m->names[i]);
    name = alt;
  }
  int64_t want[2], got[KILN_MAX_RANK];
  int r = param_shape(&m->cfg, i, want);
  int gr = kiln_st_shape(f, kiln_st_find(f, name), got);
  if (gr != r || memcmp(want, got, sizeof(int64_t) * (size_t)r))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                      "bert: %s: tensor %s has rank %d shape [%lld, %lld], config.json says [%lld, %lld]", path,
                      name, gr, (long long)got[0], (long long)(gr > 1 ? got[1] : 0), (long long)want[0],
                      (long long)(r > 1 ? want[1] : 0));
  /* an integer or boolean tensor under a weight's name would be cast to
   * numbers that mean nothing: refuse it */
  const char *dts = kiln_st_dtype_str(f, kiln_st_find(f, name));
  if (!dts || (strcmp(dts, "F32") && strcmp(dts, "F16") && strcmp(dts, "BF16") && strcmp(dts, "F64")))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: %s: tensor %s is %s, not a floating-point type", path,
                      name, dts ? dts : "?");
  kiln_tensor t = kiln_st_tensor_at(f, name, loc);
  if (kiln_dtype_of(t) != KILN_F32) t = kiln_cast_at(t, KILN_F32, loc);
  m->t[i] = kiln_keep(t);
  return kiln_last_status();
}

kiln_status kiln_bert_load_at(const char *dir, kiln_bert **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "bert");
  if (!dir) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: dir is NULL");
  char path[4096];
  kiln_bert_config cfg;
  snprintf(path, sizeof path, "%s/config.json", dir);
  kiln_status st = kiln_bert_read_config(path, &cfg, loc);
  if (st) return st;
  int pooling;
  st = kiln_bert_read_modules(dir, &cfg, &pooling, loc);
  if (st) return st;
  kiln_bert *m = alloc_model(&cfg);
  if (!m) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "bert: out of host memory");
  m->pooling = pooling;
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  kiln_st_file *f = NULL;
  st = kiln_st_file_create_at(path, &f, loc);
  for (int i = 0; i < m->n && !st; i++) st = load_param(m, f, i, path, loc);
  for (int k = 0; k < 2 && !st; k++) {
    char alt[64];
    snprintf(alt, sizeof alt, "bert.%s", k_pooler_names[k]);
    const char *name = kiln_st_find(f, k_pooler_names[k]) >= 0 ? k_pooler_names[k] : alt;
    if (kiln_st_find(f, name) < 0) continue;
    kiln_tensor t = kiln_st_tensor_at(f, name, loc);
    m->pooler[k] = kiln_keep(kiln_dtype_of(t) == KILN_F32 ? t : kiln_cast_at(t, KILN_F32, loc));
    st = kiln_last_status();
  }
  kiln_st_file_destroy(f);
  if (st) {
    kiln_bert_destroy(m);
    return st;
  }
  *out = m;
  return KILN_OK;
}

kiln_status kiln_bert_save_at(const kiln_bert *m, const char *path, kiln_loc loc) {
  if (!m) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: model is NULL");
  const char **names = malloc(sizeof *names * (size_t)(m->n + 2));
  kiln_tensor *t = malloc(sizeof *t * (size_t)(m->n + 2));
  if (!names || !t) {
    free(names);
    free(t);
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "bert: out of host memory");
  }
  int n = 0;
  for (int i = 0; i < m->n; i++, n++) names[n] = m->names[i], t[n] = m->t[i];
  for (int k = 0; k < 2; k++)
    if (!is_null(m->pooler[k])) names[n] = k_pooler_names[k], t[n++] = m->pooler[k];
  static const char *const meta[] = {"format", "pt", NULL};
  kiln_status st = kiln_save_safetensors_at(path, n, names, t, meta, loc);
  free(names);
  free(t);
  return st;
}

kiln_status kiln_bert_save_config_at(const kiln_bert *m, const char *dir, kiln_loc loc) {
  if (!m || !dir) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bert: model or dir is NULL");
  const kiln_bert_config *c = &m->cfg;
  char json[1024], path[4096];
  int n = snprintf(json, sizeof json,
                   "{\n  \"architectures\": [\"BertModel\"],\n  \"model_type\": \"bert\",\n"
                   "  \"hidden_act\": \"gelu\",\n"
                   "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                   "  \"num_attention_heads\": %d,\n  \"intermediate_size\": %d,\n"
                   "  \"max_position_embeddings\": %d,\n  \"type_vocab_size\": %d,\n  \"layer_norm_eps\": %.17g,\n"
                   "  \"pad_token_id\": 0,\n  \"position_embedding_type\": \"absolute\"\n}\n",
                   c->vocab_size, c->hidden_size, c->num_hidden_layers, c->num_attention_heads, c->intermediate_size,
                   c->max_position_embeddings, c->type_vocab_size, c->layer_norm_eps);
  snprintf(path, sizeof path, "%s/config.json", dir);
  kiln_err err = {0};
  if (kiln_fs_write_output(path, "bert config", json, (size_t)n, &err) != KILN_OK)
    return kiln_error(err.code ? err.code : KILN_ERR_IO, loc, "bert: %s", err.msg);
  return KILN_OK;
}

const kiln_bert_config *kiln_bert_get_config(const kiln_bert *m) { return m ? &m->cfg : NULL; }

int kiln_bert_params(const kiln_bert *m, const char **names, kiln_tensor *out, int max) {
  if (!m) return -1;
  for (int i = 0; i < m->n && i < max; i++) {
    if (names) names[i] = m->names[i];
    if (out) out[i] = m->t[i];
  }
  return m->n;
}

/* ── the forward pass ── */

static kiln_tensor layer_norm(kiln_tensor x, kiln_tensor w, kiln_tensor b, double eps, kiln_loc loc) {
  int ax[1] = {-1};
  kiln_tensor mu = kiln_mean_at(x, 1, ax, 1, loc);
  kiln_tensor d = kiln_sub_at(x, mu, loc);
  kiln_tensor var = kiln_mean_at(kiln_mul_at(d, d, loc), 1, ax, 1, loc);
  kiln_tensor y = kiln_mul_at(d, kiln_nn_inv_std(var, eps, loc), loc);
  return kiln_add_at(kiln_mul_at(y, w, loc), b, loc);
}

/* [B, T, H] -> [B, heads, T, H/heads] */
static kiln_tensor heads(kiln_tensor x, int64_t B, int64_t T, int h, int64_t dh, kiln_loc loc) {
  const int64_t s[4] = {B, T, h, dh};
  static const int perm[4] = {0, 2, 1, 3};
  return kiln_permute_at(kiln_reshape_at(x, 4, s, loc), perm, loc);
}

/* A ragged batch (kiln_bert_embed_ragged, below): its tokens back to back,
 * and the gathers between that and the padded [B, L] attention sees. */
typedef struct ragged {
  kiln_tensor to_pad;  /* i64 [B·L]: the packed row of (b, t), or 0 past a sentence */
  kiln_tensor to_pack; /* i64 [N]: b·L + t of each packed token */
} ragged;

/* x [B, T, H] (r NULL), or [N, H] gathered into it -> [B, heads, T, H/heads] */
static kiln_tensor heads_of(const ragged *r, kiln_tensor x, int64_t B, int64_t T, int h, int64_t dh, kiln_loc loc) {
  return heads(r ? kiln_index_select_at(x, 0, r->to_pad, loc) : x, B, T, h, dh, loc);
}

/* One post-norm layer on x [B, T, H], or with r on the packed tokens [N, H]
 * (attention alone on the padded [B, T]) */
static kiln_tensor encoder_layer(const kiln_bert *m, int l, kiln_tensor x, kiln_tensor mask4, int64_t B, int64_t T,
                                 const ragged *r, kiln_loc loc) {
  const kiln_tensor *p = m->t + N_EMB + N_PER_LAYER * l;
  int h = m->cfg.num_attention_heads;
  int64_t H = m->cfg.hidden_size, dh = H / h;
  double eps = m->cfg.layer_norm_eps;
  kiln_tensor q = heads_of(r, kiln_linear_apply_at(x, p[L_Q_W], p[L_Q_B], loc), B, T, h, dh, loc);
  kiln_tensor k = heads_of(r, kiln_linear_apply_at(x, p[L_K_W], p[L_K_B], loc), B, T, h, dh, loc);
  kiln_tensor v = heads_of(r, kiln_linear_apply_at(x, p[L_V_W], p[L_V_B], loc), B, T, h, dh, loc);
  kiln_tensor ctx = kiln_sdpa_at(q, k, v, mask4, 0.0, false, 0, loc);
  static const int perm[4] = {0, 2, 1, 3};
  const int64_t s3[3] = {B, T, H}, s2[2] = {B * T, H};
  ctx = kiln_permute_at(ctx, perm, loc);
  ctx = r ? kiln_index_select_at(kiln_reshape_at(ctx, 2, s2, loc), 0, r->to_pack, loc)
          : kiln_reshape_at(ctx, 3, s3, loc);
  kiln_tensor a = kiln_linear_apply_at(ctx, p[L_AO_W], p[L_AO_B], loc);
  x = layer_norm(kiln_add_at(a, x, loc), p[L_ALN_W], p[L_ALN_B], eps, loc);
  kiln_tensor f = kiln_gelu_at(kiln_linear_apply_at(x, p[L_I_W], p[L_I_B], loc), loc);
  f = kiln_linear_apply_at(f, p[L_O_W], p[L_O_B], loc);
  return layer_norm(kiln_add_at(f, x, loc), p[L_OLN_W], p[L_OLN_B], eps, loc);
}

/* The embeddings' layer norm of word + position + token type 0 */
static kiln_tensor embeddings(const kiln_bert *m, kiln_tensor word, kiln_tensor pos, kiln_loc loc) {
  kiln_tensor x = kiln_add_at(kiln_add_at(word, pos, loc), kiln_slice_at(m->t[E_TYPE], 0, 0, 1, 1, loc), loc);
  return layer_norm(x, m->t[E_LN_W], m->t[E_LN_B], m->cfg.layer_norm_eps, loc);
}

kiln_tensor kiln_bert_forward_at(const kiln_bert *m, kiln_tensor ids, kiln_tensor mask, kiln_loc loc) {
  if (!m) return kiln_nn_fail(loc, "bert: model is NULL");
  int64_t s[KILN_MAX_RANK];
  kiln_dtype it = kiln_dtype_of(ids);
  if (kiln_shape(ids, s) != 2 || (it != KILN_I32 && it != KILN_I64))
    return kiln_nn_fail(loc, "bert: ids must be i32/i64 [batch, tokens] (got %s of rank %d)", kiln_dtype_name(it),
                        kiln_rank(ids));
  int64_t B = s[0], T = s[1], ms[KILN_MAX_RANK];
  if (T > m->cfg.max_position_embeddings)
    return kiln_nn_fail(loc, "bert: %lld tokens, the model has %d positions (truncate the input)", (long long)T,
                        m->cfg.max_position_embeddings);
  if (!is_null(mask) && (kiln_shape(mask, ms) != 2 || ms[0] != B || ms[1] != T))
    return kiln_nn_fail(loc, "bert: the mask must be [%lld, %lld] like the ids", (long long)B, (long long)T);
  /* positions 0..T-1 gathered, not sliced, from the table: a slice of a
   * fixed table by a length that varies is no family (its instances' sizes
   * overrun the table), a gather by an iota is */
  kiln_tensor pos = kiln_arange_at(KILN_I64, 0, (double)T, 1, loc);
  kiln_tensor x = embeddings(m, kiln_index_select_at(m->t[E_WORD], 0, ids, loc),
                             kiln_index_select_at(m->t[E_POS], 0, pos, loc), loc);
  kiln_tensor mask4 = {0, 0};
  if (!is_null(mask)) {
    const int64_t s4[4] = {B, 1, 1, T};
    const int ax1[1] = {1};
    /* A row with no token at all (a batch padded with empty rows):
     * transformers adds finfo.min to the masked scores, which leaves such a
     * row's attention finite; a bool mask gives it no key, hence NaN, and the
     * NaN reaches every weight's gradient through 0 * NaN. Such a row
     * attends to every position instead: finite, and pooled away by its mask
     * (its embedding is 0, as sentence-transformers'). */
    kiln_tensor mb = kiln_cast_at(mask, KILN_BOOL, loc);
    mb = kiln_logical_or_at(mb, kiln_logical_not_at(kiln_max_at(mb, 1, ax1, 1, loc), loc), loc);
    mask4 = kiln_reshape_at(mb, 4, s4, loc);
  }
  for (int l = 0; l < m->cfg.num_hidden_layers; l++) x = encoder_layer(m, l, x, mask4, B, T, NULL, loc);
  return x;
}

/* F.normalize of [B, H] along H */
static kiln_tensor l2_normalize(kiln_tensor mean, kiln_loc loc) {
  const int axl[1] = {-1};
  /* torch.norm, whose gradient is 0 at a zero vector: sqrt's alone is
   * 0 * inf = NaN there (an all-padding row made every gradient NaN) */
  kiln_tensor ss = kiln_sum_at(kiln_mul_at(mean, mean, loc), 1, axl, 1, loc);
  kiln_tensor nz = kiln_ne_c_at(ss, 0.0, loc);
  kiln_tensor norm = kiln_where_at(nz, kiln_sqrt_at(kiln_where_at(nz, ss, kiln_constant_at(kiln_dtype_of(ss), 1.0, loc),
                                                                  loc), loc),
                                   kiln_constant_at(kiln_dtype_of(ss), 0.0, loc), loc);
  return kiln_div_at(mean, kiln_maximum_c_at(norm, 1e-12, loc), loc); /* F.normalize */
}

kiln_tensor kiln_mean_pool_normalize_at(kiln_tensor hidden, kiln_tensor mask, kiln_loc loc) {
  int64_t s[KILN_MAX_RANK];
  if (kiln_shape(hidden, s) != 3) return kiln_nn_fail(loc, "mean_pool: hidden states must be [batch, tokens, dim]");
  /* 16-bit hidden states: f32 inside, rounded once (the squares of the norm underflowed or overflowed f16,
   * the token sums and counts rounded) */
  kiln_dtype out_dt;
  hidden = kiln_nn_f32_inside(hidden, &out_dt, loc);
  const int ax1[1] = {1};
  kiln_tensor sum, count;
  if (is_null(mask)) {
    sum = kiln_sum_at(hidden, 1, ax1, 0, loc);
    count = kiln_constant_at(kiln_dtype_of(hidden), (double)s[1], loc);
  } else {
    const int64_t s3[3] = {s[0], s[1], 1};
    kiln_tensor w = kiln_reshape_at(kiln_cast_at(kiln_cast_at(mask, KILN_BOOL, loc), kiln_dtype_of(hidden), loc), 3,
                                    s3, loc);
    sum = kiln_sum_at(kiln_mul_at(hidden, w, loc), 1, ax1, 0, loc);
    count = kiln_maximum_c_at(kiln_sum_at(w, 1, ax1, 0, loc), 1e-9, loc); /* sentence-transformers' clamp */
  }
  return kiln_nn_round_to(l2_normalize(kiln_div_at(sum, count, loc), loc), out_dt, loc);
}

/* The folder's pooling of hidden [B, T, H] (mask [B, T] or null), normalised */
static kiln_tensor pool_normalize(const kiln_bert *m, kiln_tensor hidden, kiln_tensor mask, kiln_loc loc) {
  kiln_dtype out_dt; /* 16-bit hidden states: f32 inside, rounded once (kiln_mean_pool_normalize_at) */
  hidden = kiln_nn_f32_inside(hidden, &out_dt, loc);
  if (m->pooling == POOL_MEAN) return kiln_nn_round_to(kiln_mean_pool_normalize_at(hidden, mask, loc), out_dt, loc);
  int64_t s[KILN_MAX_RANK];
  kiln_shape(hidden, s);
  const int ax1[1] = {1};
  if (m->pooling == POOL_CLS) /* sentence-transformers: token_embeddings[:, 0] */
    return kiln_nn_round_to(
        l2_normalize(kiln_sum_at(kiln_slice_at(hidden, 1, 0, 1, 1, loc), 1, ax1, 0, loc), loc), out_dt, loc);
  /* max: padding set to -1e9 first, as sentence-transformers does */
  if (!is_null(mask)) {
    const int64_t s3[3] = {s[0], s[1], 1};
    kiln_tensor w = kiln_reshape_at(kiln_cast_at(mask, KILN_BOOL, loc), 3, s3, loc);
    hidden = kiln_where_at(w, hidden, kiln_constant_at(kiln_dtype_of(hidden), -1e9, loc), loc);
  }
  return kiln_nn_round_to(l2_normalize(kiln_max_at(hidden, 1, ax1, 0, loc), loc), out_dt, loc);
}

kiln_tensor kiln_bert_embed_at(const kiln_bert *m, kiln_tensor ids, kiln_tensor mask, kiln_loc loc) {
  if (!m) return kiln_nn_fail(loc, "bert: model is NULL");
  return pool_normalize(m, kiln_bert_forward_at(m, ids, mask, loc), mask, loc);
}

/* ── ragged batches: no padding through the per-token layers ──
 *
 * The linear layers, GELU and LayerNorm see each token alone, so they run on
 * the batch's tokens back to back ([N, H], N the real tokens); only
 * attention needs sentences side by side: its q, k and v are gathered into
 * [B, L, H] (L the longest sentence rounded up to 8, as `kiln embed` pads),
 * padding positions reading row 0 (any finite row: the mask gives them no
 * weight as keys, and their outputs as queries are not gathered back), and
 * its output is gathered back to [N, H]. What a padded batch computes on
 * padding (17% of the GEMMs' rows for the bench's 256 sentences in batches
 * of 32) is not computed. Each real token's arithmetic is the padded
 * path's. The token count is rounded up to RAGGED_ROWS (rows past the
 * tokens compute token 0 and are never read); it and the padded length are
 * marked dynamic, so a new count or length is a plan, not a compile: every
 * batch of B sentences is one compiled family. */
enum { RAGGED_ROWS = 64 };

kiln_tensor kiln_bert_embed_ragged_at(const kiln_bert *m, const int64_t *ids, const int64_t *lens, int64_t B,
                                      kiln_loc loc) {
  if (!m) return kiln_nn_fail(loc, "bert: model is NULL");
  if (!ids || !lens || B < 1) return kiln_nn_fail(loc, "bert: embed_ragged needs ids, lens and a batch of 1 or more");
  int64_t N = 0, L = 0;
  for (int64_t b = 0; b < B; b++) {
    if (lens[b] < 1 || lens[b] > m->cfg.max_position_embeddings)
      return kiln_nn_fail(loc, "bert: sentence %lld has %lld tokens (1 to %d)", (long long)b, (long long)lens[b],
                          m->cfg.max_position_embeddings);
    N += lens[b];
    L = lens[b] > L ? lens[b] : L;
  }
  for (int64_t i = 0; i < N; i++)
    if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
      return kiln_nn_fail(loc, "bert: token id %lld at %lld is not in the vocabulary (%d)", (long long)ids[i],
                          (long long)i, m->cfg.vocab_size);
  L = (L + 7) / 8 * 8;
  if (L > m->cfg.max_position_embeddings) L = m->cfg.max_position_embeddings;
  int64_t real = N;
  N = (N + RAGGED_ROWS - 1) / RAGGED_ROWS * RAGGED_ROWS; /* rows past the tokens: token 0 at position 0, unread */
  int64_t *pos = calloc((size_t)N, sizeof(int64_t)), *to_pack = calloc((size_t)N, sizeof(int64_t));
  int64_t *idp = calloc((size_t)N, sizeof(int64_t));
  int64_t *to_pad = calloc((size_t)(B * L), sizeof(int64_t)), *mask = calloc((size_t)(B * L), sizeof(int64_t));
  if (!pos || !to_pack || !to_pad || !mask || !idp) {
    free(pos), free(to_pack), free(to_pad), free(mask), free(idp);
    return kiln_nn_fail(loc, "bert: out of memory for a ragged batch of %lld tokens", (long long)N);
  }
  memcpy(idp, ids, sizeof(int64_t) * (size_t)real);
  for (int64_t b = 0, i = 0; b < B; b++)
    for (int64_t t = 0; t < lens[b]; t++, i++) {
      pos[i] = t, to_pack[i] = b * L + t, to_pad[b * L + t] = i, mask[b * L + t] = 1;
    }
  const int64_t sn[1] = {N}, sp[1] = {B * L}, sm[2] = {B, L}, s4[4] = {B, 1, 1, L};
  kiln_tensor pad2 = kiln_from_host_at(to_pad, KILN_I64, 2, sm, loc);
  kiln_tensor maskt = kiln_from_host_at(mask, KILN_I64, 2, sm, loc);
  kiln_tensor idt = kiln_from_host_at(idp, KILN_I64, 1, sn, loc), post = kiln_from_host_at(pos, KILN_I64, 1, sn, loc);
  ragged r = {{0, 0}, kiln_from_host_at(to_pack, KILN_I64, 1, sn, loc)};
  free(pos), free(to_pack), free(to_pad), free(mask), free(idp);
  /* the token count and the padded length vary from batch to batch: one
   * compile for every batch of B sentences */
  kiln_dynamic_at(idt, 0, loc), kiln_dynamic_at(post, 0, loc), kiln_dynamic_at(r.to_pack, 0, loc);
  kiln_dynamic_at(pad2, 1, loc), kiln_dynamic_at(maskt, 1, loc);
  r.to_pad = kiln_reshape_at(pad2, 1, sp, loc);
  kiln_tensor mask4 = kiln_reshape_at(kiln_cast_at(maskt, KILN_BOOL, loc), 4, s4, loc);
  kiln_tensor x = embeddings(m, kiln_index_select_at(m->t[E_WORD], 0, idt, loc),
                             kiln_index_select_at(m->t[E_POS], 0, post, loc), loc);
  for (int l = 0; l < m->cfg.num_hidden_layers; l++) x = encoder_layer(m, l, x, mask4, B, L, &r, loc);
  const int64_t s3[3] = {B, L, m->cfg.hidden_size};
  kiln_tensor hidden = kiln_reshape_at(kiln_index_select_at(x, 0, r.to_pad, loc), 3, s3, loc);
  return pool_normalize(m, hidden, maskt, loc);
}

void kiln_bert_destroy(kiln_bert *m) {
  if (!m) return;
  for (int i = 0; i < m->n; i++) kiln_release(m->t[i]);
  for (int k = 0; k < 2; k++) kiln_release(m->pooler[k]);
  free(m->names);
  free(m->t);
  free(m);
}
