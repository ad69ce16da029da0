/* Harness of the edge-shape tests (test_shapes.c, test_shapes_nn.c): inputs, fusion,
 * gradients and the helpers their cases use. See test_shapes.c. */
#ifndef KILN_TESTS_SHAPES_COMMON_H
#define KILN_TESTS_SHAPES_COMMON_H
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include "backend/backend_compare.h"

static int g_fused;

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define NR(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define AX(...) NR(__VA_ARGS__), ((const int[]){__VA_ARGS__})
static const int64_t k_none[1] = {0};

static __attribute__((unused)) kiln_tensor fuse(kiln_tensor x) {
  if (!g_fused || !kiln_is_valid(x)) return x;
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(x, s);
  return kiln_where(kiln_ne_c(kiln_zeros(KILN_I32, r, s), 1.0), x, kiln_zeros(kiln_dtype_of(x), r, s));
}

/* element i of input seed: ((7 i + 5 seed) mod 17 - 8) / 4 */
static __attribute__((unused)) kiln_tensor make(kiln_dtype dt, int rank, const int64_t *shape, int seed) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= shape[d];
  double *v = calloc((size_t)(n > 0 ? n : 1), sizeof *v); /* zeroed: an empty tensor reads none of it */
  for (int64_t i = 0; i < n; i++) v[i] = (double)((7 * i + 5 * seed) % 17 - 8) / 4.0;
  kiln_tensor x = kiln_from_host(v, KILN_F64, rank, rank ? shape : k_none);
  free(v);
  return dt == KILN_F64 ? x : kiln_cast(x, dt);
}
#define IN(seed, ...) fuse(make(KILN_F32, NR(__VA_ARGS__), S(__VA_ARGS__), (seed)))
#define IND(seed, ...) fuse(make(KILN_F64, NR(__VA_ARGS__), S(__VA_ARGS__), (seed)))
#define IN0(seed) fuse(make(KILN_F32, 0, k_none, (seed)))

static __attribute__((unused)) kiln_tensor index_t(int n, const int64_t *v, int rank, const int64_t *shape) {
  (void)n;
  return fuse(kiln_from_host(v, KILN_I64, rank, shape));
}
#define IDX(vals, ...) index_t(0, (vals), NR(__VA_ARGS__), S(__VA_ARGS__))

/* gradients: leaves in f64 that require grad; the case returns the gradient
 * of sum(y) with respect to leaf `which` */
static kiln_tensor g_leaf[4];
static int g_nleaf;
static __attribute__((unused)) kiln_tensor leaf(int rank, const int64_t *shape, int seed) {
  kiln_tensor x = make(KILN_F64, rank, rank ? shape : k_none, seed);
  kiln_requires_grad(x);
  g_leaf[seed & 3] = x; /* argument order is unspecified: by seed */
  g_nleaf++;
  return fuse(x);
}
#define GL(seed, ...) leaf(NR(__VA_ARGS__), S(__VA_ARGS__), (seed))
#define GL0(seed) leaf(0, k_none, (seed))
static __attribute__((unused)) kiln_tensor grad_of(kiln_tensor y, int which) {
  if (kiln_backward(kiln_sum(y, 0, NULL, false)) != KILN_OK) return (kiln_tensor){0, 0};
  return kiln_grad(g_leaf[which]);
}

/* modules made by a case live until the end of its step */
static kiln_layernorm *g_ln[4];
static kiln_embedding *g_emb[4];
static int g_nln, g_nemb;
static __attribute__((unused)) kiln_tensor layer_norm(kiln_tensor x) {
  kiln_layernorm *n = NULL;
  if (kiln_layernorm_create((int)kiln_dim(x, -1), 1e-5, false, &n) != KILN_OK) return (kiln_tensor){0, 0};
  g_ln[g_nln++ & 3] = n;
  return kiln_layernorm_forward(n, x);
}
static __attribute__((unused)) kiln_tensor embedding(kiln_tensor ids, kiln_tensor w) {
  kiln_embedding *e = NULL;
  if (kiln_embedding_create((int)kiln_dim(w, 0), (int)kiln_dim(w, 1), 1, &e) != KILN_OK) return (kiln_tensor){0, 0};
  g_emb[g_nemb++ & 3] = e;
  kiln_assign(e->weight, w);
  return kiln_embedding_forward(e, ids);
}

static __attribute__((unused)) kiln_tensor sorted(kiln_tensor x, int axis, bool desc, int which) {
  kiln_tensor v = {0, 0}, i = {0, 0};
  kiln_sort(x, axis, desc, &v, &i);
  return which ? i : v;
}
static __attribute__((unused)) kiln_tensor topk(kiln_tensor x, int64_t k, int axis, bool largest, int which) {
  kiln_tensor v = {0, 0}, i = {0, 0};
  kiln_topk(x, k, axis, largest, &v, &i);
  return which ? i : v;
}
#define CAT(axis, ...) kiln_concat(NR2(__VA_ARGS__), ((const kiln_tensor[]){__VA_ARGS__}), (axis))
#define STACK(axis, ...) kiln_stack(NR2(__VA_ARGS__), ((const kiln_tensor[]){__VA_ARGS__}), (axis))
#define NR2(...) ((int)(sizeof((kiln_tensor[]){__VA_ARGS__}) / sizeof(kiln_tensor)))
#define T(x) kiln_transpose((x), 0, 1)
#define BIG ((1 << 20) + 1)
#define END INT64_MAX
static const kiln_tensor k_null = {0, 0};
static const int64_t k_e[1] = {0};
static const int64_t R8A[8] = {2, 1, 2, 1, 2, 1, 2, 1}, R8B[8] = {1, 2, 1, 2, 1, 2, 1, 2};

#define SUM(...) kiln_sum_at(__VA_ARGS__, KILN_HERE)
#define MEAN(...) kiln_mean_at(__VA_ARGS__, KILN_HERE)
#define MAX(...) kiln_max_at(__VA_ARGS__, KILN_HERE)
#define MIN(...) kiln_min_at(__VA_ARGS__, KILN_HERE)
#define PROD(...) kiln_prod_at(__VA_ARGS__, KILN_HERE)
#define FLIP(...) kiln_flip_at(__VA_ARGS__, KILN_HERE)
#define CASE(name, ...) \
  static kiln_tensor name(void) { return __VA_ARGS__; }

typedef struct shape_case {
  const char *name;
  kiln_tensor (*fn)(void);
} shape_case;
#define E(n) {#n, n}

#endif
