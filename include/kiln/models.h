/* kiln models: the small image classifiers used by `kiln train`, the
 * benchmarks and the end-to-end tests. Inputs are f32 images [B, 28, 28]
 * (Fashion-MNIST); outputs are logits [B, classes].
 *
 *   mlp          flatten, Linear 784→1024, ReLU, Linear 1024→1024, ReLU, Linear 1024→classes
 *   cnn          Conv 1→32 3×3 pad 1, ReLU, MaxPool 2; Conv 32→64 3×3 pad 1, ReLU, MaxPool 2;
 *                flatten, Linear 3136→128, ReLU, Dropout 0.25 (training), Linear 128→classes
 *   transformer  image rows as a sequence of 28 tokens: Linear 28→64 plus a learned position
 *                embedding, 2 pre-norm Transformer encoder layers (4 heads, feed-forward 128,
 *                GELU, dropout 0.1), LayerNorm, mean over tokens, Linear 64→classes
 *
 * Ownership: a model owns its layers and their kept parameters; destroy it
 * with kiln_model_destroy. Parameter names are PyTorch-style state-dict names
 * ("fc1.weight", "layers.0.self_attn.in_proj_weight", ...), owned by the
 * model. Single-threaded like the rest of the tracing API. */
#ifndef KILN_MODELS_H
#define KILN_MODELS_H

#include <stdbool.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_model_kind { KILN_MODEL_MLP = 0, KILN_MODEL_CNN, KILN_MODEL_TRANSFORMER } kiln_model_kind;

typedef struct kiln_model kiln_model;

/* "mlp", "cnn", "transformer" -> kind; -1 if unknown. */
int kiln_model_kind_parse(const char *name);
const char *kiln_model_kind_name(kiln_model_kind kind);
/* Create a model with parameters initialised as PyTorch does, from seed,
 * into *out. On failure *out is NULL and the error status is returned (and
 * recorded in the sticky status). */
#define kiln_model_create(kind, classes, seed, out) kiln_model_create_at((kind), (classes), (seed), (out), KILN_HERE)
kiln_status kiln_model_create_at(kiln_model_kind kind, int classes, uint64_t seed, kiln_model **out, kiln_loc loc);
/* Logits for images x [B, 28, 28]. training enables dropout; seed is the
 * dropout seed of this step (a graph input: a new one never recompiles). */
#define kiln_model_forward(m, x, training, seed) kiln_model_forward_at((m), (x), (training), (seed), KILN_HERE)
kiln_tensor kiln_model_forward_at(kiln_model *m, kiln_tensor x, bool training, uint64_t seed, kiln_loc loc);
/* Trainable parameters (names may be NULL). Returns the count. */
int kiln_model_params(const kiln_model *m, const char **names, kiln_tensor *out, int max);
/* Parameters and buffers: what a checkpoint holds. Returns the count. */
int kiln_model_state(const kiln_model *m, const char **names, kiln_tensor *out, int max);
/* Number of trainable scalars. */
int64_t kiln_model_num_params(const kiln_model *m);
/* Multiply-adds per example of the forward pass (for FLOP/s figures). */
double kiln_model_forward_flops(const kiln_model *m);
/* NULL is a no-op. */
void kiln_model_destroy(kiln_model *m);

#ifdef __cplusplus
}
#endif
#endif
