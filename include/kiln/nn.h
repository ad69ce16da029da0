/* kiln nn — neural-network layers built from kiln's public ops.
 *
 * Every layer is a composition of the ops in kiln.h: a forward call traces a
 * few nodes into the current step's graph; nothing runs until a sync point.
 *
 * Ownership: a layer is a heap struct made by kiln_<layer>_create(..., &out)
 * and freed by kiln_<layer>_destroy (NULL is a no-op), which also releases
 * its parameter tensors (kiln_param).
 * The parameter handles inside a layer are public fields: read them, pass
 * them to an optimizer, kiln_assign new values into them (checkpoint load).
 * Destroy layers before kiln_shutdown(): afterwards their handles are stale.
 *
 * Initialization follows PyTorch's defaults, drawn in-graph from an explicit
 * seed (kiln_rand_uniform/normal), so init is deterministic and identical on
 * every backend (but not bit-identical to torch's CPU generator).
 *
 * Errors: bad arguments record an error with the caller's file:line (every
 * function taking a kiln_loc has a spelling without _at that passes it) and
 * return the status with *out NULL (create) or a poisoned tensor (forward).
 * Shape mistakes are caught by the underlying ops.
 *
 * Threads: like the rest of the tracing API, one tracing thread at a time.
 */
#ifndef KILN_NN_H
#define KILN_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ───────────── parameter lists ───────────── */
#define KILN_MODULE_MAX_ENTRIES 16
#define KILN_MODULE_NAME_MAX 48

/* The named tensors of a layer, in PyTorch state_dict order and naming
 * ("weight", "bias", "self_attn.in_proj_weight", ...). Buffers (BatchNorm
 * running statistics) are listed with is_buffer = 1: checkpoints save them,
 * optimizers skip them. Every layer struct starts with this member. */
typedef struct kiln_module {
  int n;                                              /* entries used */
  char names[KILN_MODULE_MAX_ENTRIES][KILN_MODULE_NAME_MAX];
  kiln_tensor tensors[KILN_MODULE_MAX_ENTRIES];
  unsigned char is_buffer[KILN_MODULE_MAX_ENTRIES];
} kiln_module;

/* Copy up to max trainable parameters of m (buffers excluded) into out and
 * their names into names (either may be NULL). Names point into m: valid
 * while m lives. Returns the total count (which may exceed max), -1 if m is
 * NULL. */
int kiln_module_params(const kiln_module *m, const char **names, kiln_tensor *out, int max);
/* Like kiln_module_params but lists parameters and buffers (a state dict). */
int kiln_module_state(const kiln_module *m, const char **names, kiln_tensor *out, int max);
/* torch's module.zero_grad() (set_to_none=True): kiln_zero_grad(t) for
 * every tensor of m, which releases the gradients of its parameters (see
 * kiln/autograd.h). NULL m is a no-op; nothing is recorded in the sticky
 * status. */
void kiln_module_zero_grad(const kiln_module *m);
/* Release every tensor of m and clear it (used by the _destroy functions). */
void kiln_module_release(kiln_module *m);

/* ───────────── activations and dropout (stateless) ───────────── */
#define kiln_nn_relu(x) kiln_relu(x)
#define kiln_nn_gelu(x) kiln_gelu(x)
#define kiln_nn_tanh(x) kiln_tanh(x)
#define kiln_nn_sigmoid(x) kiln_sigmoid(x)

/* Inverted dropout: in training, zero each element with probability p and
 * scale the others by 1/(1-p); in eval (training false) or p == 0, returns x.
 * The mask comes from the in-graph RNG with this seed, which is a graph
 * input: a new seed each step never recompiles. p in [0, 1). */
#define kiln_dropout(x, p, seed, training) kiln_dropout_at((x), (p), (seed), (training), KILN_HERE)
kiln_tensor kiln_dropout_at(kiln_tensor x, double p, uint64_t seed, bool training, kiln_loc loc);

/* A seed for sub-stream k of seed (a hash, so nearby seeds and nearby k give
 * unrelated streams). Layers use it to give each dropout site its own mask. */
uint64_t kiln_nn_seed(uint64_t seed, uint64_t k);

/* ───────────── Linear ───────────── */
/* y = x Wᵀ + b with W [out, in] (PyTorch layout), b [out]. Init: W and b ~
 * U(-1/sqrt(in), 1/sqrt(in)). */
typedef struct kiln_linear {
  kiln_module m;
  kiln_tensor weight, bias; /* bias is the null tensor without bias */
  int in_features, out_features;
} kiln_linear;
#define kiln_linear_create(in_features, out_features, bias, seed, out) \
  kiln_linear_create_at((in_features), (out_features), (bias), (seed), (out), KILN_HERE)
kiln_status kiln_linear_create_at(int in_features, int out_features, bool bias, uint64_t seed, kiln_linear **out,
                                  kiln_loc loc);
/* x [..., in] -> [..., out]. */
#define kiln_linear_forward(l, x) kiln_linear_forward_at((l), (x), KILN_HERE)
kiln_tensor kiln_linear_forward_at(const kiln_linear *l, kiln_tensor x, kiln_loc loc);
void kiln_linear_destroy(kiln_linear *l);
/* The same computation on given tensors (bias may be the null tensor). */
#define kiln_linear_apply(x, w, b) kiln_linear_apply_at((x), (w), (b), KILN_HERE)
kiln_tensor kiln_linear_apply_at(kiln_tensor x, kiln_tensor w, kiln_tensor b, kiln_loc loc);

/* ───────────── Embedding ───────────── */
/* weight [num, dim] ~ N(0, 1); forward: ids (i32/i64, any shape) ->
 * ids.shape + [dim]. An id outside [0, num) is an error when the graph runs
 * (KILN_ERR_INVALID_ARGUMENT naming index_select, the id, num and the
 * forward call's file:line; kiln_index_select's rule). */
typedef struct kiln_embedding {
  kiln_module m;
  kiln_tensor weight;
  int num, dim;
} kiln_embedding;
#define kiln_embedding_create(num, dim, seed, out) kiln_embedding_create_at((num), (dim), (seed), (out), KILN_HERE)
kiln_status kiln_embedding_create_at(int num, int dim, uint64_t seed, kiln_embedding **out, kiln_loc loc);
#define kiln_embedding_forward(e, ids) kiln_embedding_forward_at((e), (ids), KILN_HERE)
kiln_tensor kiln_embedding_forward_at(const kiln_embedding *e, kiln_tensor ids, kiln_loc loc);
void kiln_embedding_destroy(kiln_embedding *e);

/* ───────────── LayerNorm ───────────── */
/* Normalizes over the last dim (size dim) with biased variance and eps;
 * affine: weight ones, bias zeros. */
typedef struct kiln_layernorm {
  kiln_module m;
  kiln_tensor weight, bias; /* null tensors when !affine */
  int dim;
  double eps;
} kiln_layernorm;
#define kiln_layernorm_create(dim, eps, affine, out) kiln_layernorm_create_at((dim), (eps), (affine), (out), KILN_HERE)
kiln_status kiln_layernorm_create_at(int dim, double eps, bool affine, kiln_layernorm **out, kiln_loc loc);
#define kiln_layernorm_forward(n, x) kiln_layernorm_forward_at((n), (x), KILN_HERE)
kiln_tensor kiln_layernorm_forward_at(const kiln_layernorm *n, kiln_tensor x, kiln_loc loc);
void kiln_layernorm_destroy(kiln_layernorm *n);

/* ───────────── multi-head attention ───────────── */
/* torch.nn.MultiheadAttention(embed_dim, n_heads, batch_first=True) with
 * packed in_proj_weight [3D, D] (xavier uniform), in_proj_bias [3D] (zeros),
 * out_proj.weight [D, D] (Linear init), out_proj.bias [D] (zeros). */
typedef struct kiln_mha {
  kiln_module m;
  kiln_tensor in_proj_weight, in_proj_bias, out_weight, out_bias;
  int dim, n_heads;
  double dropout; /* on the attention weights, in training */
} kiln_mha;
#define kiln_mha_create(dim, n_heads, dropout, seed, out) \
  kiln_mha_create_at((dim), (n_heads), (dropout), (seed), (out), KILN_HERE)
/* dim must be divisible by n_heads. */
kiln_status kiln_mha_create_at(int dim, int n_heads, double dropout, uint64_t seed, kiln_mha **out, kiln_loc loc);
/* Options of one attention call. */
typedef struct kiln_attn_opts {
  bool causal;                  /* mask keys after the query position */
  kiln_tensor key_padding_mask; /* null, or [B, T]: bool (true = padding: ignore this
                                   key, as PyTorch's nn.MultiheadAttention) or f32
                                   (added to the scores as is); other dtypes: error */
  bool training;                /* apply dropout */
  uint64_t seed;                /* dropout seed (graph input) */
} kiln_attn_opts;
/* Self-attention: x [B, T, D] -> [B, T, D]. opts may be NULL. Masked scores
 * get -1e9 before the softmax (a row with every key masked becomes uniform,
 * where PyTorch gives NaN). */
#define kiln_mha_forward(a, x, opts) kiln_mha_forward_at((a), (x), (opts), KILN_HERE)
kiln_tensor kiln_mha_forward_at(const kiln_mha *a, kiln_tensor x, const kiln_attn_opts *opts, kiln_loc loc);
void kiln_mha_destroy(kiln_mha *a);
/* Scaled dot-product attention on q, k, v [B, H, T, hd]: softmax(q k^T /
 * sqrt(hd) + mask) v. mask (null: none) broadcasts to [B, H, T, T] and follows
 * PyTorch's torch.nn.functional.scaled_dot_product_attention: bool means
 * "true = this query attends to this key" (false scores become -inf; a query
 * with no key attended gives NaN, as in PyTorch); f32/f64 is added to the
 * scores. Integer masks are an error. Note the opposite sense of
 * kiln_attn_opts.key_padding_mask (true = padding, ignore), which follows
 * PyTorch's nn.MultiheadAttention. */
#define kiln_sdpa(q, k, v, mask, dropout, training, seed) \
  kiln_sdpa_at((q), (k), (v), (mask), (dropout), (training), (seed), KILN_HERE)
kiln_tensor kiln_sdpa_at(kiln_tensor q, kiln_tensor k, kiln_tensor v, kiln_tensor mask, double dropout, bool training,
                         uint64_t seed, kiln_loc loc);

/* ───────────── Transformer encoder layer ───────────── */
/* The feed-forward activation (values: the old 0/1 "gelu" flag). */
typedef enum kiln_activation { KILN_ACTIVATION_RELU = 0, KILN_ACTIVATION_GELU = 1 /* erf form */ } kiln_activation;
/* Where the LayerNorms sit (values: the old 0/1 "norm_first" flag). */
typedef enum kiln_norm_position {
  KILN_NORM_POST = 0, /* post-norm: x = norm(x + sublayer(x)) (PyTorch's default) */
  KILN_NORM_PRE = 1   /* pre-norm: x = x + sublayer(norm(x)) (norm_first=True) */
} kiln_norm_position;
/* torch.nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
 * activation, layer_norm_eps, batch_first=True, norm_first). Parameter names
 * match its state_dict. */
typedef struct kiln_encoder_layer {
  kiln_module m;
  kiln_mha *self_attn;
  kiln_linear *linear1, *linear2;
  kiln_layernorm *norm1, *norm2;
  double dropout;
  kiln_activation activation;
  kiln_norm_position norm_position;
} kiln_encoder_layer;
#define kiln_encoder_layer_create(d, h, ff, dropout, activation, norm_position, eps, seed, out)                    \
  kiln_encoder_layer_create_at((d), (h), (ff), (dropout), (activation), (norm_position), (eps), (seed), (out), \
                               KILN_HERE)
kiln_status kiln_encoder_layer_create_at(int d_model, int n_heads, int dim_ff, double dropout, kiln_activation activation,
                                         kiln_norm_position norm_position, double eps, uint64_t seed,
                                         kiln_encoder_layer **out, kiln_loc loc);
/* x [B, T, D] -> [B, T, D]; opts as for attention (NULL: eval, no masks). */
#define kiln_encoder_layer_forward(l, x, opts) kiln_encoder_layer_forward_at((l), (x), (opts), KILN_HERE)
kiln_tensor kiln_encoder_layer_forward_at(const kiln_encoder_layer *l, kiln_tensor x, const kiln_attn_opts *opts,
                                          kiln_loc loc);
/* Destroys the sublayers and releases every parameter. */
void kiln_encoder_layer_destroy(kiln_encoder_layer *l);

/* ───────────── Conv2d and pooling (NCHW) ───────────── */
/* weight [out, in/groups, kh, kw], bias [out]; init U(-1/sqrt(fan_in), ..)
 * with fan_in = in/groups*kh*kw. Lowered to one index_select (im2col with a
 * host-computed index tensor) and one batched matmul. */
typedef struct kiln_conv2d {
  kiln_module m;
  kiln_tensor weight, bias;
  int in_ch, out_ch, kh, kw, stride, padding, dilation, groups;
} kiln_conv2d;
/* The short spelling takes one square kernel size k (kh = kw = k). */
#define kiln_conv2d_create(in_ch, out_ch, k, stride, pad, dil, groups, bias, seed, out) \
  kiln_conv2d_create_at((in_ch), (out_ch), (k), (k), (stride), (pad), (dil), (groups), (bias), (seed), (out), KILN_HERE)
kiln_status kiln_conv2d_create_at(int in_ch, int out_ch, int kh, int kw, int stride, int padding, int dilation,
                                  int groups, bool bias, uint64_t seed, kiln_conv2d **out, kiln_loc loc);
/* x [N, in, H, W] -> [N, out, OH, OW]. */
#define kiln_conv2d_forward(c, x) kiln_conv2d_forward_at((c), (x), KILN_HERE)
kiln_tensor kiln_conv2d_forward_at(const kiln_conv2d *c, kiln_tensor x, kiln_loc loc);
void kiln_conv2d_destroy(kiln_conv2d *c);
/* Functional conv on given tensors (b may be null). */
#define kiln_conv2d_apply(x, w, b, stride, padding, dilation, groups) \
  kiln_conv2d_apply_at((x), (w), (b), (stride), (padding), (dilation), (groups), KILN_HERE)
kiln_tensor kiln_conv2d_apply_at(kiln_tensor x, kiln_tensor w, kiln_tensor b, int stride, int padding, int dilation,
                                 int groups, kiln_loc loc);

/* Max / average pooling with a square window k, stride (0: k), padding.
 * Max pads with -inf; average counts padded zeros (count_include_pad). */
typedef enum kiln_pool_kind { KILN_POOL_AVG = 0, KILN_POOL_MAX = 1 } kiln_pool_kind;
#define kiln_pool2d(x, kind, k, stride, pad) kiln_pool2d_at((x), (kind), (k), (stride), (pad), KILN_HERE)
#define kiln_max_pool2d(x, k, stride, pad) kiln_pool2d_at((x), KILN_POOL_MAX, (k), (stride), (pad), KILN_HERE)
#define kiln_avg_pool2d(x, k, stride, pad) kiln_pool2d_at((x), KILN_POOL_AVG, (k), (stride), (pad), KILN_HERE)
kiln_tensor kiln_pool2d_at(kiln_tensor x, kiln_pool_kind kind, int k, int stride, int padding, kiln_loc loc);

/* ───────────── BatchNorm2d ───────────── */
/* weight ones, bias zeros [C]; buffers running_mean zeros, running_var ones.
 * Training: normalize with batch statistics (biased variance) and update the
 * running statistics in place (kiln_assign) with momentum and the unbiased
 * variance; eval: normalize with the running statistics. */
typedef struct kiln_batchnorm2d {
  kiln_module m;
  kiln_tensor weight, bias, running_mean, running_var;
  int ch;
  double eps, momentum;
} kiln_batchnorm2d;
#define kiln_batchnorm2d_create(ch, eps, momentum, out) \
  kiln_batchnorm2d_create_at((ch), (eps), (momentum), (out), KILN_HERE)
kiln_status kiln_batchnorm2d_create_at(int ch, double eps, double momentum, kiln_batchnorm2d **out, kiln_loc loc);
#define kiln_batchnorm2d_forward(b, x, training) kiln_batchnorm2d_forward_at((b), (x), (training), KILN_HERE)
kiln_tensor kiln_batchnorm2d_forward_at(const kiln_batchnorm2d *b, kiln_tensor x, bool training, kiln_loc loc);
void kiln_batchnorm2d_destroy(kiln_batchnorm2d *b);

/* ───────────── losses ───────────── */
/* Cross-entropy from logits [..., C] and integer targets [...] (class axis
 * last, unlike torch's axis 1 for rank > 2): mean over targets !=
 * ignore_index of (1-ls)·nll + ls·mean_c(-log p_c). Returns a 0-d tensor of
 * the logits' dtype (NaN-free: 0 when every target is ignored). */
#define kiln_cross_entropy(logits, target, ignore_index, label_smoothing) \
  kiln_cross_entropy_at((logits), (target), (ignore_index), (label_smoothing), KILN_HERE)
kiln_tensor kiln_cross_entropy_at(kiln_tensor logits, kiln_tensor target, int64_t ignore_index,
                                  double label_smoothing, kiln_loc loc);
/* mean((a - b)²) as a 0-d tensor. */
#define kiln_mse_loss(a, b) kiln_mse_loss_at((a), (b), KILN_HERE)
kiln_tensor kiln_mse_loss_at(kiln_tensor a, kiln_tensor b, kiln_loc loc);

#ifdef __cplusplus
}
#endif
#endif /* KILN_NN_H */
