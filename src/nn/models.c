/* The image classifiers of kiln/models.h, composed from the nn layers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "kiln/models.h"
#include "nn/nn_internal.h"

#define MAX_ENTRIES 64
#define NAME_MAX_LEN 80
#define TF_LAYERS 2
#define TF_DIM 64

struct kiln_model {
  kiln_model_kind kind;
  int classes;
  /* mlp */
  kiln_linear *fc1, *fc2, *fc3;
  /* cnn */
  kiln_conv2d *conv1, *conv2;
  /* transformer */
  kiln_linear *embed;
  kiln_tensor pos; /* [28, TF_DIM] */
  kiln_encoder_layer *layers[TF_LAYERS];
  kiln_layernorm *norm;
  /* the state dict, built once */
  int n;
  char names[MAX_ENTRIES][NAME_MAX_LEN];
  kiln_tensor tensors[MAX_ENTRIES];
  unsigned char is_buffer[MAX_ENTRIES];
};

static const char *const k_names[] = {"mlp", "cnn", "transformer"};

int kiln_model_kind_parse(const char *name) {
  for (int i = 0; i < 3; i++)
    if (name && !strcmp(name, k_names[i])) return i;
  return -1;
}

const char *kiln_model_kind_name(kiln_model_kind kind) { return (unsigned)kind < 3 ? k_names[kind] : "?"; }

static void add_module(kiln_model *m, const char *prefix, const kiln_module *mod) {
  for (int i = 0; mod && i < mod->n && m->n < MAX_ENTRIES; i++) {
    snprintf(m->names[m->n], NAME_MAX_LEN, "%s%s%s", prefix, *prefix ? "." : "", mod->names[i]);
    m->tensors[m->n] = mod->tensors[i];
    m->is_buffer[m->n] = mod->is_buffer[i];
    m->n++;
  }
}

static void add_tensor(kiln_model *m, const char *name, kiln_tensor t) {
  if (m->n >= MAX_ENTRIES) return;
  snprintf(m->names[m->n], NAME_MAX_LEN, "%s", name);
  m->tensors[m->n] = t;
  m->is_buffer[m->n] = 0;
  m->n++;
}

/* The first failure among the statuses of a model's parts. */
static void first_error(kiln_status *acc, kiln_status s) {
  if (*acc == KILN_OK) *acc = s;
}

kiln_status kiln_model_create_at(kiln_model_kind kind, int classes, uint64_t seed, kiln_model **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "model_create");
  if ((unsigned)kind > KILN_MODEL_TRANSFORMER || classes < 1) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "model_create: unknown model kind %d or bad class count %d",
                      (int)kind, classes);
  }
  kiln_model *m = calloc(1, sizeof *m);
  if (!m) {
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "model_create: out of memory");
  }
  m->kind = kind;
  m->classes = classes;
  kiln_status st = KILN_OK;
  int ok = 1;
  switch (kind) {
    case KILN_MODEL_MLP:
      first_error(&st, kiln_linear_create_at(784, 1024, true, seed + 1, &m->fc1, loc));
      first_error(&st, kiln_linear_create_at(1024, 1024, true, seed + 2, &m->fc2, loc));
      first_error(&st, kiln_linear_create_at(1024, classes, true, seed + 3, &m->fc3, loc));
      ok = st == KILN_OK;
      if (ok) {
        add_module(m, "fc1", &m->fc1->m);
        add_module(m, "fc2", &m->fc2->m);
        add_module(m, "fc3", &m->fc3->m);
      }
      break;
    case KILN_MODEL_CNN:
      first_error(&st, kiln_conv2d_create_at(1, 32, 3, 3, 1, 1, 1, 1, true, seed + 1, &m->conv1, loc));
      first_error(&st, kiln_conv2d_create_at(32, 64, 3, 3, 1, 1, 1, 1, true, seed + 2, &m->conv2, loc));
      first_error(&st, kiln_linear_create_at(64 * 7 * 7, 128, true, seed + 3, &m->fc1, loc));
      first_error(&st, kiln_linear_create_at(128, classes, true, seed + 4, &m->fc2, loc));
      ok = st == KILN_OK;
      if (ok) {
        add_module(m, "conv1", &m->conv1->m);
        add_module(m, "conv2", &m->conv2->m);
        add_module(m, "fc1", &m->fc1->m);
        add_module(m, "fc2", &m->fc2->m);
      }
      break;
    case KILN_MODEL_TRANSFORMER: {
      first_error(&st, kiln_linear_create_at(28, TF_DIM, true, seed + 1, &m->embed, loc));
      int64_t ps[2] = {28, TF_DIM};
      /* position embedding ~ N(0, 0.02), as in BERT/GPT-style models */
      m->pos = kiln_param(kiln_mul_c_at(kiln_rand_at(KILN_RAND_NORMAL, KILN_F32, 2, ps, seed + 2, loc), 0.02, loc));
      for (int i = 0; i < TF_LAYERS; i++) {
        first_error(&st, kiln_encoder_layer_create_at(TF_DIM, 4, 128, 0.1, KILN_ACTIVATION_GELU, KILN_NORM_PRE, 1e-5,
                                                      seed + 10 + (uint64_t)i, &m->layers[i], loc));
      }
      first_error(&st, kiln_layernorm_create_at(TF_DIM, 1e-5, true, &m->norm, loc));
      first_error(&st, kiln_linear_create_at(TF_DIM, classes, true, seed + 3, &m->fc1, loc));
      ok = st == KILN_OK && kiln_is_valid(m->pos);
      if (ok) {
        add_module(m, "embed", &m->embed->m);
        add_tensor(m, "pos", m->pos);
        for (int i = 0; i < TF_LAYERS; i++) {
          char p[32];
          snprintf(p, sizeof p, "layers.%d", i);
          add_module(m, p, &m->layers[i]->m);
        }
        add_module(m, "norm", &m->norm->m);
        add_module(m, "head", &m->fc1->m);
      }
      break;
    }
  }
  if (!ok) {
    kiln_model_destroy(m);
    /* A poisoned position embedding recorded its error in the sticky status. */
    return st != KILN_OK ? st : kiln_last_status() != KILN_OK ? kiln_last_status() : KILN_ERR_INTERNAL;
  }
  *out = m;
  return KILN_OK;
}

kiln_tensor kiln_model_forward_at(kiln_model *m, kiln_tensor x, bool training, uint64_t seed, kiln_loc loc) {
  if (!m) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "model_forward: NULL model");
    return (kiln_tensor){0, 0};
  }
  /* The input as the user passed it, checked here so that a mistake names
   * this call and x's shape, not the reshape inside it. */
  int64_t xs[KILN_MAX_RANK];
  int r = kiln_shape(x, xs);
  if (x.index == 0 && x.gen == 0) return kiln_nn_fail(loc, "model_forward: x is the null tensor");
  int tf = m->kind == KILN_MODEL_TRANSFORMER;
  if (r >= 0 && (r < 1 || (tf ? !(r == 3 && xs[2] == 28 && xs[1] >= 1 && xs[1] <= 28)
                              : xs[0] > INT64_MAX / 784 || kiln_numel(x) != xs[0] * 784))) {
    char sb[128];
    return kiln_nn_fail(loc, "model_forward: x has shape %s; the %s model takes images [B, 28, 28]%s",
                        kiln_nn_shape_str(x, sb, sizeof sb), kiln_model_kind_name(m->kind),
                        tf ? " (or [B, T, 28] with T <= 28)" : "");
  }
  int64_t b = kiln_dim(x, 0);
  switch (m->kind) {
    case KILN_MODEL_MLP: {
      int64_t s[2] = {b, 784};
      kiln_tensor h = kiln_reshape_at(x, 2, s, loc);
      h = kiln_relu_at(kiln_linear_forward_at(m->fc1, h, loc), loc);
      h = kiln_relu_at(kiln_linear_forward_at(m->fc2, h, loc), loc);
      return kiln_linear_forward_at(m->fc3, h, loc);
    }
    case KILN_MODEL_CNN: {
      int64_t s4[4] = {b, 1, 28, 28}, s2[2] = {b, 64 * 7 * 7};
      kiln_tensor h = kiln_reshape_at(x, 4, s4, loc);
      h = kiln_pool2d_at(kiln_relu_at(kiln_conv2d_forward_at(m->conv1, h, loc), loc), KILN_POOL_MAX, 2, 2, 0, loc);
      h = kiln_pool2d_at(kiln_relu_at(kiln_conv2d_forward_at(m->conv2, h, loc), loc), KILN_POOL_MAX, 2, 2, 0, loc);
      h = kiln_relu_at(kiln_linear_forward_at(m->fc1, kiln_reshape_at(h, 2, s2, loc), loc), loc);
      h = kiln_dropout_at(h, 0.25, seed, training, loc);
      return kiln_linear_forward_at(m->fc2, h, loc);
    }
    case KILN_MODEL_TRANSFORMER: {
      /* images of fewer rows (a sequence of its own length): the first T
       * rows of the position table, gathered by an index whose size follows
       * the input's (dynamic shapes: docs/dynamic-shapes.md) */
      int64_t xs[3];
      kiln_tensor pos = m->pos;
      if (kiln_shape(x, xs) == 3 && xs[1] < 28 && xs[1] > 0)
        pos = kiln_index_select_at(m->pos, 0, kiln_arange_at(KILN_I64, 0, (double)xs[1], 1, loc), loc);
      kiln_tensor h = kiln_add_at(kiln_linear_forward_at(m->embed, x, loc), pos, loc);
      for (int i = 0; i < TF_LAYERS; i++) {
        /* a hashed sub-seed per layer: with seed + i, layer 1 at step s drew
         * layer 0's masks of step s + 1 (the in-graph RNG is linear in the seed) */
        kiln_attn_opts o = {.causal = false, .key_padding_mask = {0, 0}, .training = training,
                            .seed = kiln_nn_seed(seed, (uint64_t)i)};
        h = kiln_encoder_layer_forward_at(m->layers[i], h, &o, loc);
      }
      h = kiln_layernorm_forward_at(m->norm, h, loc);
      int axis = 1;
      h = kiln_mean_at(h, 1, &axis, 0, loc);
      return kiln_linear_forward_at(m->fc1, h, loc);
    }
  }
  return (kiln_tensor){0, 0};
}

static int list(const kiln_model *m, int with_buffers, const char **names, kiln_tensor *out, int max) {
  if (!m) return -1;
  return kiln_nn_list(m->n, m->names[0], sizeof m->names[0], m->tensors, m->is_buffer, with_buffers, names, out,
                      max);
}

int kiln_model_params(const kiln_model *m, const char **names, kiln_tensor *out, int max) {
  return list(m, 0, names, out, max);
}

int kiln_model_state(const kiln_model *m, const char **names, kiln_tensor *out, int max) {
  return list(m, 1, names, out, max);
}

int64_t kiln_model_num_params(const kiln_model *m) {
  int64_t n = 0;
  for (int i = 0; m && i < m->n; i++)
    if (!m->is_buffer[i]) n += kiln_numel(m->tensors[i]);
  return n;
}

double kiln_model_forward_flops(const kiln_model *m) {
  if (!m) return 0;
  switch (m->kind) {
    case KILN_MODEL_MLP: return 2.0 * (784.0 * 1024 + 1024.0 * 1024 + 1024.0 * m->classes);
    case KILN_MODEL_CNN:
      return 2.0 * (28.0 * 28 * 32 * 9 + 14.0 * 14 * 64 * 32 * 9 + 3136.0 * 128 + 128.0 * m->classes);
    case KILN_MODEL_TRANSFORMER: {
      double t = 28, d = TF_DIM, ff = 128;
      double layer = t * (4 * d * d) + 2 * t * t * d + t * (2 * d * ff);
      return 2.0 * (t * 28 * d + TF_LAYERS * layer + d * m->classes);
    }
  }
  return 0;
}

void kiln_model_destroy(kiln_model *m) {
  if (!m) return;
  kiln_linear_destroy(m->fc1);
  kiln_linear_destroy(m->fc2);
  kiln_linear_destroy(m->fc3);
  kiln_conv2d_destroy(m->conv1);
  kiln_conv2d_destroy(m->conv2);
  kiln_linear_destroy(m->embed);
  if (m->pos.gen) kiln_release(m->pos);
  for (int i = 0; i < TF_LAYERS; i++) kiln_encoder_layer_destroy(m->layers[i]);
  kiln_layernorm_destroy(m->norm);
  free(m);
}
