/* Shape arithmetic never overflows: every node's shape is checked where it
 * is made (element count and bytes fit in int64, counting every non-zero
 * size even when another is 0), the builders' own arithmetic (slice length,
 * pad, concat) cannot overflow, and empty tensors compute right on both
 * backends. The examples are the outside testers'. */
#include <stdint.h>

#include "kiln/kiln.h"
#include "kt.h"

static void start(const char *backend) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_options o = {0};
  o.backend = backend;
  KT_CHECK(kiln_init(&o) == KILN_OK);
}

/* t is poisoned and the sticky error is INVALID_ARGUMENT naming op and this
 * file. */
#define EXPECT_SHAPE_ERROR(t, op)                                         \
  do {                                                                    \
    KT_CHECK(!kiln_is_valid(t));                                          \
    KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);             \
    KT_STR_CONTAINS(kiln_last_error(), op);                               \
    KT_STR_CONTAINS(kiln_last_error(), "test_shape_overflow.c");          \
    kiln_clear_error();                                                   \
  } while (0)

KT_TEST(overflowing_shapes_are_errors) {
  start("ref");
  int64_t a[2] = {1LL << 31, 0}, b[2] = {0, 1LL << 31};
  kiln_tensor A = kiln_zeros(KILN_F32, 2, a), B = kiln_zeros(KILN_F32, 2, b);
  KT_CHECK(kiln_is_valid(A) && kiln_is_valid(B)); /* empty, and 2^31 elements once the 0 is reduced away: fine */
  kiln_tensor M = kiln_matmul(A, B);              /* [2^31, 2^31] f32: 2^64 bytes */
  EXPECT_SHAPE_ERROR(M, "matmul");
  float sink[1];
  KT_CHECK(kiln_to_host(M, sink, 0) != KILN_OK); /* a read of it is an error, not a crash */
  kiln_clear_error();

  int64_t i1 = 3, iv[3] = {0, 1, 2};
  kiln_tensor I = kiln_from_host(iv, KILN_I64, 1, &i1);
  kiln_tensor oh = kiln_one_hot(I, 1LL << 62, KILN_F32);
  EXPECT_SHAPE_ERROR(oh, "one_hot");

  int64_t four = 4, lo[1] = {INT64_MAX}, hi[1] = {0}, lo2[1] = {1}, hi2[1] = {INT64_MAX};
  kiln_tensor X = kiln_zeros(KILN_F32, 1, &four);
  EXPECT_SHAPE_ERROR(kiln_pad(X, lo, hi, 0.0), "pad");
  EXPECT_SHAPE_ERROR(kiln_pad(X, lo2, hi2, 0.0), "pad");

  int64_t z[3] = {0, 1LL << 62, 1LL << 62};
  EXPECT_SHAPE_ERROR(kiln_zeros(KILN_F32, 3, z), "full");
  int64_t zok[3] = {0, 1LL << 20, 1LL << 20};
  kiln_tensor Z = kiln_zeros(KILN_F32, 3, zok);
  int ax0 = 0;
  int64_t zs[KILN_MAX_RANK];
  KT_EQ_INT(kiln_shape(kiln_sum(Z, 1, &ax0, 0), zs), 2); /* sum over the empty axis: [2^20, 2^20] zeros */
  KT_EQ_INT(zs[0], 1LL << 20);

  int64_t e[2] = {1LL << 40, 1LL << 40}, one[2] = {1, 1};
  EXPECT_SHAPE_ERROR(kiln_expand(kiln_reshape(kiln_slice(X, 0, 0, 1, 1), 2, one), 2, e), "expand");
  int64_t half = (1LL << 62) + 1;
  kiln_tensor big = kiln_expand(kiln_reshape(kiln_slice(X, 0, 0, 1, 1), 1, (int64_t[]){1}), 1, &half);
  EXPECT_SHAPE_ERROR(big, "expand");
  int64_t rt[3] = {(1LL << 62) + 1, (1LL << 62) + 1, 0}; /* the target's own product overflows */
  EXPECT_SHAPE_ERROR(kiln_reshape(X, 3, rt), "reshape");
  kiln_tensor cat2[2] = {X, X};
  KT_CHECK(kiln_is_valid(kiln_concat(2, cat2, 0)));

  /* A builder's cast to a wider dtype can overflow where its input did
   * not (bool [2^62, 1] is 2^62 bytes, as f32 2^64): an error naming the
   * cast, not a NULL dereference (found by fuzz_shape_rules). Creation
   * ops check the widest dtype; a broadcast checks its own. */
  int64_t tall[2] = {1LL << 62, 1}, h62 = 1LL << 62;
  kiln_tensor Bt = kiln_expand(kiln_zeros(KILN_BOOL, 2, one), 2, tall);
  KT_CHECK(kiln_is_valid(Bt));
  EXPECT_SHAPE_ERROR(kiln_matmul(Bt, kiln_zeros(KILN_F32, 2, one)), "cast");
  kiln_tensor Bl = kiln_reshape(Bt, 1, &h62);
  EXPECT_SHAPE_ERROR(kiln_sum(Bl, 0, NULL, 0), "cast");  /* bool sums are i64 */
  EXPECT_SHAPE_ERROR(kiln_softmax(Bl, 0), "cast");       /* computed in f32 */
  kiln_mark_step();
  kiln_shutdown();
}

/* slice with a huge step: one element (start), not a negative size. */
KT_TEST(slice_with_huge_step) {
  static const char *const backends[] = {"cpu", "ref"};
  for (int bi = 0; bi < 2; bi++) {
    start(backends[bi]);
    const float v[5] = {7, 8, 9, 10, 11};
    int64_t n = 5;
    kiln_tensor X = kiln_from_host(v, KILN_F32, 1, &n);
    kiln_tensor s = kiln_slice(X, 0, 1, 5, INT64_MAX);
    KT_EQ_INT(kiln_dim(s, 0), 1);
    float got[1] = {0};
    KT_CHECK(kiln_to_host(s, got, sizeof got) == KILN_OK);
    KT_NEAR(got[0], 8.0, 0);
    KT_EQ_INT(kiln_dim(kiln_slice(X, 0, INT64_MAX, INT64_MAX, INT64_MAX), 0), 0);
    KT_EQ_INT(kiln_dim(kiln_slice(X, 0, INT64_MIN, INT64_MAX, 2), 0), 3);
    KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s", kiln_last_error());
    kiln_mark_step();
  }
  kiln_shutdown();
}

/* Empty tensors: matmul over K = 0 is zeros (as PyTorch and NumPy), sums of
 * nothing are 0, and nothing crashes, on both backends. */
KT_TEST(empty_tensors_compute) {
  static const char *const backends[] = {"cpu", "ref"};
  for (int bi = 0; bi < 2; bi++) {
    start(backends[bi]);
    int64_t a[2] = {3, 0}, b[2] = {0, 4};
    kiln_tensor M = kiln_matmul(kiln_zeros(KILN_F32, 2, a), kiln_ones(KILN_F32, 2, b));
    float m[12];
    for (int i = 0; i < 12; i++) m[i] = 99;
    KT_CHECK(kiln_to_host(M, m, sizeof m) == KILN_OK);
    for (int i = 0; i < 12; i++) KT_NEAR(m[i], 0.0, 0);
    int64_t e[2] = {0, 3};
    int ax = 0;
    float s3[3] = {5, 5, 5};
    KT_CHECK(kiln_to_host(kiln_sum(kiln_ones(KILN_F32, 2, e), 1, &ax, 0), s3, sizeof s3) == KILN_OK);
    for (int i = 0; i < 3; i++) KT_NEAR(s3[i], 0.0, 0);
    kiln_tensor empty = kiln_add_c(kiln_ones(KILN_F32, 2, e), 1.0);
    KT_CHECK(kiln_to_host(empty, NULL, 0) == KILN_OK);
    KT_CHECK_MSG(kiln_last_status() == KILN_OK, "[%s] %s", backends[bi], kiln_last_error());
    kiln_mark_step();
  }
  kiln_shutdown();
}

/* A product with no values, or over K = 0, computes nothing beyond its
 * operands: a [2, 3] times an empty [2^31, 3, 0] is an empty [2^31, 2, 0]
 * (the batched lowering once broadcast a to [2^31, 2, 3], 48 GiB, on the
 * ref backend; found by fuzz_shape_rules), and the operands' gradients are
 * zeros, not missing, as in PyTorch. */
KT_TEST(empty_products_compute_nothing_big) {
  static const char *const backends[] = {"cpu", "ref"};
  for (int bi = 0; bi < 2; bi++) {
    start(backends[bi]);
    int64_t sa[2] = {2, 3}, sb[3] = {1LL << 31, 3, 0};
    float av[6] = {1, 2, 3, 4, 5, 6};
    kiln_tensor a = kiln_from_host(av, KILN_F32, 2, sa);
    kiln_requires_grad(a);
    kiln_tensor p = kiln_matmul(a, kiln_zeros(KILN_F32, 3, sb));
    int64_t ps[KILN_MAX_RANK];
    KT_EQ_INT(kiln_shape(p, ps), 3);
    KT_CHECK(ps[0] == 1LL << 31 && ps[1] == 2 && ps[2] == 0);
    KT_CHECK(kiln_to_host(p, NULL, 0) == KILN_OK);
    KT_CHECK(kiln_backward(kiln_sum(p, 0, NULL, 0)) == KILN_OK);
    float g[6];
    for (int i = 0; i < 6; i++) g[i] = 99;
    KT_CHECK(kiln_to_host(kiln_grad(a), g, sizeof g) == KILN_OK);
    for (int i = 0; i < 6; i++) KT_NEAR(g[i], 0.0, 0);
    /* K = 0 with a broadcast batch: zeros [5, 2, 3] */
    int64_t sk[2] = {2, 0}, sk2[3] = {5, 0, 3};
    kiln_tensor z = kiln_matmul(kiln_ones(KILN_F32, 2, sk), kiln_ones(KILN_F32, 3, sk2));
    float zv[30];
    for (int i = 0; i < 30; i++) zv[i] = 99;
    KT_EQ_INT(kiln_shape(z, ps), 3);
    KT_CHECK(ps[0] == 5 && ps[1] == 2 && ps[2] == 3);
    KT_CHECK(kiln_to_host(z, zv, sizeof zv) == KILN_OK);
    for (int i = 0; i < 30; i++) KT_NEAR(zv[i], 0.0, 0);
    KT_CHECK_MSG(kiln_last_status() == KILN_OK, "[%s] %s", backends[bi], kiln_last_error());
    kiln_mark_step();
  }
  kiln_shutdown();
}

/* An axis named twice is an error (as in PyTorch), not a silent union. */
KT_TEST(duplicate_reduction_axes_are_errors) {
  start("ref");
  int64_t s[2] = {2, 3};
  kiln_tensor x = kiln_ones(KILN_F32, 2, s);
  static const int dup[][2] = {{1, 1}, {1, -1}, {0, -2}};
  for (int i = 0; i < 3; i++) {
    EXPECT_SHAPE_ERROR(kiln_sum(x, 2, dup[i], 0), "appears more than once");
    EXPECT_SHAPE_ERROR(kiln_max(x, 2, dup[i], 1), "max: axis");
    EXPECT_SHAPE_ERROR(kiln_mean(x, 2, dup[i], 0), "mean");
  }
  int both[2] = {0, -1};
  KT_NEAR(kiln_item_f64(kiln_sum(x, 2, both, 0)), 6.0, 0);
  kiln_mark_step();
  kiln_shutdown();
}

KT_MAIN(KT_CASE(overflowing_shapes_are_errors), KT_CASE(duplicate_reduction_axes_are_errors), KT_CASE(slice_with_huge_step), KT_CASE(empty_tensors_compute),
        KT_CASE(empty_products_compute_nothing_big))
