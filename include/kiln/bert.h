/* kiln BERT: the encoder of BERT-family models (BertModel: embeddings,
 * post-norm self-attention layers with exact GELU) and sentence embeddings
 * (mean pooling over the attention mask, L2-normalised, as
 * sentence-transformers does for all-MiniLM-L6-v2).
 *
 * A model folder as published (config.json, model.safetensors) loads by the
 * published tensor names ("embeddings.word_embeddings.weight",
 * "encoder.layer.0.attention.self.query.weight", ...; a "bert." prefix is
 * accepted too), and saves back under the same names, so `transformers`
 * loads what kiln fine-tuned. Inference only needs kiln: no Python.
 *
 * Ownership: the model owns its kept parameters; kiln_bert_destroy releases
 * them. Single-threaded like the rest of the tracing API. */
#ifndef KILN_BERT_H
#define KILN_BERT_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/kiln.h"
#include "kiln/text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fields of config.json kiln reads (hidden_act must be "gelu"). */
typedef struct kiln_bert_config {
  int vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
  int max_position_embeddings, type_vocab_size;
  double layer_norm_eps;
} kiln_bert_config;

typedef struct kiln_bert kiln_bert;

/* A model with BERT's initialisation (normal(0, 0.02) weights, zero biases,
 * unit LayerNorm weights) from seed. */
#define kiln_bert_create(cfg, seed, out) kiln_bert_create_at((cfg), (seed), (out), KILN_HERE)
kiln_status kiln_bert_create_at(const kiln_bert_config *cfg, uint64_t seed, kiln_bert **out, kiln_loc loc);
/* Load dir/config.json and dir/model.safetensors, and the pooling of
 * dir/modules.json's Pooling module when the folder has one. Errors name
 * the file and the tensor (missing, or a shape that disagrees with
 * config.json) or the module kiln does not compute (Dense, other poolings). */
#define kiln_bert_load(dir, out) kiln_bert_load_at((dir), (out), KILN_HERE)
kiln_status kiln_bert_load_at(const char *dir, kiln_bert **out, kiln_loc loc);
/* What sentence-transformers takes from the model folder dir for its text:
 * the tokenizer's normalization into *tok (tokenizer_config.json's
 * do_lower_case, default true, and strip_accents, null: as do_lower_case;
 * lower-cased also when sentence_bert_config.json says do_lower_case) and,
 * if max_length is not NULL, the default maximum length into it
 * (sentence_bert_config.json's max_seq_length, else the smaller of
 * config.json's max_position_embeddings and tokenizer_config.json's
 * model_max_length, else 256). Absent files take those defaults;
 * tokenize_chinese_chars false is an error (kiln always splits them), and
 * so is whatever would make transformers' tokenizer give other ids than
 * kiln's (UNSUPPORTED naming the file): added tokens beyond BERT's five
 * special ones (tokenizer.json, tokenizer_config.json's
 * added_tokens_decoder, added_tokens.json), renamed or additional special
 * tokens, another WordPiece, normalizer or pre-tokenizer (docs/text.md). */
#define kiln_bert_text_options(dir, tok, max_length) kiln_bert_text_options_at((dir), (tok), (max_length), KILN_HERE)
kiln_status kiln_bert_text_options_at(const char *dir, kiln_tokenizer_options *tok, int64_t *max_length,
                                      kiln_loc loc);
/* Write the parameters to path (safetensors, atomically) under the published
 * names; with config.json beside it `transformers` loads the folder. */
#define kiln_bert_save(m, path) kiln_bert_save_at((m), (path), KILN_HERE)
kiln_status kiln_bert_save_at(const kiln_bert *m, const char *path, kiln_loc loc);
/* Write dir/config.json for m (atomically). */
#define kiln_bert_save_config(m, dir) kiln_bert_save_config_at((m), (dir), KILN_HERE)
kiln_status kiln_bert_save_config_at(const kiln_bert *m, const char *dir, kiln_loc loc);
const kiln_bert_config *kiln_bert_get_config(const kiln_bert *m);
/* Trainable parameters with their published names (names may be NULL;
 * they live as long as m). Returns the count. */
int kiln_bert_params(const kiln_bert *m, const char **names, kiln_tensor *out, int max);

/* Hidden states [B, T, hidden] for token ids (i32/i64 [B, T]) and an
 * attention mask ([B, T], non-zero = a token, zero = padding; the null
 * tensor: every position is a token). Token type 0 everywhere; no dropout. */
#define kiln_bert_forward(m, ids, mask) kiln_bert_forward_at((m), (ids), (mask), KILN_HERE)
kiln_tensor kiln_bert_forward_at(const kiln_bert *m, kiln_tensor ids, kiln_tensor mask, kiln_loc loc);
/* Sentence embeddings [B, hidden]: the hidden states pooled as the model
 * folder's sentence-transformers Pooling module says (kiln_bert_load reads
 * modules.json and its config.json: the mean over the mask's tokens, the
 * [CLS] token, or the maximum over the tokens; the mean for a folder
 * without modules.json and for kiln_bert_create), divided by their L2 norm
 * (at least 1e-12). */
#define kiln_bert_embed(m, ids, mask) kiln_bert_embed_at((m), (ids), (mask), KILN_HERE)
kiln_tensor kiln_bert_embed_at(const kiln_bert *m, kiln_tensor ids, kiln_tensor mask, kiln_loc loc);
/* Sentence embeddings [B, hidden] of a ragged batch, given on the host: B
 * sentences' token ids back to back (ids, lens[b] of sentence b, each 1 to
 * max_position_embeddings). The same values as kiln_bert_embed on the
 * padded batch, without computing the padding: the per-token layers run on
 * the real tokens alone and only attention sees the sentences side by side
 * (padded to the longest, rounded up to 8). The token count (rounded up
 * to 64) and the padded length are dynamic dimensions
 * (docs/dynamic-shapes.md): every batch of B sentences shares one compile.
 * Errors: a length outside 1..max_position_embeddings, an id outside the
 * vocabulary. */
#define kiln_bert_embed_ragged(m, ids, lens, B) kiln_bert_embed_ragged_at((m), (ids), (lens), (B), KILN_HERE)
kiln_tensor kiln_bert_embed_ragged_at(const kiln_bert *m, const int64_t *ids, const int64_t *lens, int64_t B,
                                      kiln_loc loc);
/* Mean pooling and L2 normalisation alone, of hidden states [B, T, H]. */
#define kiln_mean_pool_normalize(h, mask) kiln_mean_pool_normalize_at((h), (mask), KILN_HERE)
kiln_tensor kiln_mean_pool_normalize_at(kiln_tensor hidden, kiln_tensor mask, kiln_loc loc);

/* NULL is a no-op. */
void kiln_bert_destroy(kiln_bert *m);

#ifdef __cplusplus
}
#endif
#endif
