/* Data side: IDX parsing (hand-made good and bad buffers, files, the real
 * Fashion-MNIST files against values from tests/data/fashion_mnist_oracle.py),
 * seeded shuffling, fixed-shape batching with a padded last batch (one
 * compile per epoch), the async loader against the synchronous batcher,
 * and the bucketing batcher. Expected values are computed here in plain C. */
#include <kiln/kiln.h>
#include <kiln/data.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "data/data_internal.h"
#include "kt.h"

static void start(void) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_metrics_clear();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

/* An IDX image with the given dims and data bytes 0,1,2,... */
static size_t make_idx(uint8_t *buf, uint8_t dtype, int rank, const uint32_t *dims) {
  buf[0] = 0, buf[1] = 0, buf[2] = dtype, buf[3] = (uint8_t)rank;
  size_t n = 1, at = 4;
  for (int i = 0; i < rank; i++) {
    buf[at++] = (uint8_t)(dims[i] >> 24), buf[at++] = (uint8_t)(dims[i] >> 16);
    buf[at++] = (uint8_t)(dims[i] >> 8), buf[at++] = (uint8_t)dims[i];
    n *= dims[i];
  }
  for (size_t i = 0; i < n; i++) buf[at + i] = (uint8_t)(i * 7);
  return at + n;
}

KT_TEST(idx_parse_good) {
  kiln_clear_error();
  uint8_t buf[256];
  uint32_t d3[3] = {2, 3, 4};
  size_t len = make_idx(buf, 0x08, 3, d3);
  kiln_idx idx;
  KT_CHECK(kiln_idx_parse(buf, len, "a.idx", &idx) == KILN_OK);
  KT_EQ_INT(idx.rank, 3);
  KT_EQ_INT(idx.dims[0], 2);
  KT_EQ_INT(idx.dims[1], 3);
  KT_EQ_INT(idx.dims[2], 4);
  KT_EQ_INT(idx.numel, 24);
  KT_CHECK(idx.data == buf + 16);
  KT_EQ_INT(idx.data[23], (uint8_t)(23 * 7));
  uint32_t d1[1] = {5};
  len = make_idx(buf, 0x08, 1, d1);
  KT_EQ_INT(len, 13);
  KT_CHECK(kiln_idx_parse(buf, len, NULL, &idx) == KILN_OK);
  KT_EQ_INT(idx.numel, 5);
  KT_EQ_INT(kiln_last_status(), KILN_OK);
}

/* One malformed buffer: status, and a message naming the file. */
static void expect_bad(const uint8_t *buf, size_t len, kiln_status want, const char *words) {
  kiln_clear_error();
  /* Exact-size heap copy so an over-read would be caught by ASan. */
  uint8_t *copy = malloc(len ? len : 1);
  memcpy(copy, buf, len);
  kiln_idx idx;
  kiln_status s = kiln_idx_parse(copy, len, "bad.idx", &idx);
  KT_CHECK_MSG(s == want, "want %s, got %s (%s)", kiln_status_name(want), kiln_status_name(s), kiln_last_error());
  KT_STR_CONTAINS(kiln_last_error(), "bad.idx");
  KT_STR_CONTAINS(kiln_last_error(), words);
  KT_STR_CONTAINS(kiln_last_error(), "test_data.c"); /* the caller's line */
  free(copy);
  kiln_clear_error();
}

KT_TEST(idx_parse_bad) {
  uint8_t buf[256];
  uint32_t d3[3] = {2, 3, 4};
  size_t len = make_idx(buf, 0x08, 3, d3);
  expect_bad(buf, 0, KILN_ERR_CORRUPT, "truncated header");
  expect_bad(buf, 3, KILN_ERR_CORRUPT, "truncated header");
  expect_bad(buf, 9, KILN_ERR_CORRUPT, "truncated IDX header");
  expect_bad(buf, len - 1, KILN_ERR_CORRUPT, "truncated IDX data: 23 of 24");
  expect_bad(buf, 16, KILN_ERR_CORRUPT, "truncated IDX data: 0 of 24");
  uint8_t big[300];
  memcpy(big, buf, len);
  big[len] = 1;
  expect_bad(big, len + 1, KILN_ERR_CORRUPT, "1 trailing bytes");
  uint8_t b2[256];
  memcpy(b2, buf, len);
  b2[0] = 0x1f; /* e.g. a gzip file parsed as IDX */
  expect_bad(b2, len, KILN_ERR_CORRUPT, "bad magic");
  memcpy(b2, buf, len);
  b2[2] = 0x0D; /* float */
  expect_bad(b2, len, KILN_ERR_UNSUPPORTED, "float");
  b2[2] = 0x42;
  expect_bad(b2, len, KILN_ERR_CORRUPT, "unknown dtype");
  memcpy(b2, buf, len);
  b2[3] = 0;
  expect_bad(b2, len, KILN_ERR_CORRUPT, "rank is 0");
  b2[3] = 9;
  expect_bad(b2, len, KILN_ERR_UNSUPPORTED, "rank 9");
  /* Dims whose product overflows 64 bits must be rejected, not wrapped. */
  uint32_t huge[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 2};
  uint8_t hb[64];
  hb[0] = 0, hb[1] = 0, hb[2] = 8, hb[3] = 4;
  for (int i = 0; i < 4; i++)
    hb[4 + 4 * i] = (uint8_t)(huge[i] >> 24), hb[5 + 4 * i] = (uint8_t)(huge[i] >> 16),
              hb[6 + 4 * i] = (uint8_t)(huge[i] >> 8), hb[7 + 4 * i] = (uint8_t)huge[i];
  expect_bad(hb, 20, KILN_ERR_CORRUPT, "more than");
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  KT_CHECK(f != NULL);
  if (!f) return;
  KT_EQ_INT(fwrite(data, 1, n, f), n);
  fclose(f);
}

KT_TEST(idx_load_file) {
  kiln_clear_error();
  char dir[] = "/tmp/kiln_test_data_XXXXXX";
  KT_CHECK(mkdtemp(dir) != NULL);
  char good[256], cut[256], trail[256], missing[256];
  snprintf(good, sizeof good, "%s/good-idx3-ubyte", dir);
  snprintf(cut, sizeof cut, "%s/cut-idx3-ubyte", dir);
  snprintf(trail, sizeof trail, "%s/trail-idx3-ubyte", dir);
  snprintf(missing, sizeof missing, "%s/missing-idx3-ubyte", dir);
  uint8_t buf[256];
  uint32_t d3[3] = {2, 3, 4};
  size_t len = make_idx(buf, 0x08, 3, d3);
  write_file(good, buf, len);
  write_file(cut, buf, len - 5);
  write_file(trail, buf, len + 3);
  kiln_idx *idx = NULL;
  KT_CHECK(kiln_idx_create(good, &idx) == KILN_OK);
  KT_CHECK(idx && idx->numel == 24 && idx->data[5] == 35 && idx->dims[1] == 3);
  kiln_idx_destroy(idx);
  KT_CHECK(kiln_idx_create(cut, &idx) == KILN_ERR_CORRUPT && idx == NULL);
  KT_STR_CONTAINS(kiln_last_error(), cut);
  KT_STR_CONTAINS(kiln_last_error(), "truncated");
  kiln_clear_error();
  KT_CHECK(kiln_idx_create(trail, &idx) == KILN_ERR_CORRUPT && idx == NULL);
  KT_STR_CONTAINS(kiln_last_error(), "trailing");
  kiln_clear_error();
  KT_CHECK(kiln_idx_create(missing, &idx) == KILN_ERR_IO && idx == NULL);
  KT_STR_CONTAINS(kiln_last_error(), missing);
  kiln_clear_error();
  /* A dataset over a directory without the files: NULL with the path. */
  kiln_dataset *none = (kiln_dataset *)&none; /* not NULL: a failed create must clear it */
  KT_EQ_INT(kiln_dataset_create_fashion_mnist(dir, true, &none), KILN_ERR_IO);
  KT_CHECK(none == NULL);
  KT_STR_CONTAINS(kiln_last_error(), "train-images-idx3-ubyte");
  kiln_clear_error();
  unlink(good), unlink(cut), unlink(trail);
  rmdir(dir);
}

static const char *fmnist_dir(void) {
  const char *d = getenv("KILN_FASHION_MNIST_DIR");
  d = d && *d ? d : "/usr/share/datasets/fashion-mnist";
  char p[512];
  snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", d);
  if (access(p, R_OK) == 0) return d;
  snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", d);
  return access(p, R_OK) == 0 ? d : NULL;
}

/* Expected values: python3 tests/data/fashion_mnist_oracle.py */
KT_TEST(fashion_mnist_real) {
  const char *dir = fmnist_dir();
  /* scripts/install-deps.sh installs the data set: its absence is a failure */
  KT_CHECK_MSG(dir != NULL, "Fashion-MNIST not found (apt-get install dataset-fashion-mnist)");
  if (!dir) return;
  kiln_clear_error();
  struct {
    int train;
    int64_t n, pixel_sum, last_sum;
    int first_labels[5];
    int px[5]; /* image 0, row 14, columns 10..14 */
  } want[2] = {
      {1, 60000, 3431114169LL, 16684, {9, 0, 0, 3, 0}, {0, 0, 237, 226, 217}},
      {0, 10000, 573469082LL, 24390, {9, 2, 1, 1, 6}, {0, 0, 98, 136, 110}},
  };
  for (int w = 0; w < 2; w++) {
    kiln_dataset *ds = NULL;
    kiln_dataset_create_fashion_mnist(dir, want[w].train, &ds);
    KT_CHECK_MSG(ds != NULL, "%s", kiln_last_error());
    if (!ds) return;
    KT_EQ_INT(kiln_dataset_size(ds), want[w].n);
    int64_t shape[KILN_MAX_RANK];
    KT_EQ_INT(kiln_dataset_example_shape(ds, shape), 2);
    KT_EQ_INT(shape[0], 28);
    KT_EQ_INT(shape[1], 28);
    const float *x = kiln_dataset_features(ds);
    const int64_t *y = kiln_dataset_labels(ds);
    int64_t counts[10] = {0}, bad = 0;
    for (int64_t i = 0; i < want[w].n; i++) {
      if (y[i] < 0 || y[i] > 9) bad++;
      else counts[y[i]]++;
    }
    KT_EQ_INT(bad, 0);
    for (int c = 0; c < 10; c++) KT_EQ_INT(counts[c], want[w].n / 10);
    for (int i = 0; i < 5; i++) KT_EQ_INT(y[i], want[w].first_labels[i]);
    /* Undo the normalization and recover the bytes. */
    int64_t sum = 0, last = 0;
    for (int64_t i = 0; i < want[w].n * 784; i++) {
      int64_t v = llround(((double)x[i] * KILN_FASHION_MNIST_STD + KILN_FASHION_MNIST_MEAN) * 255.0);
      sum += v;
      if (i >= (want[w].n - 1) * 784) last += v;
    }
    KT_EQ_INT(sum, want[w].pixel_sum);
    KT_EQ_INT(last, want[w].last_sum);
    for (int c = 0; c < 5; c++) {
      float px = (float)want[w].px[c];
      KT_NEAR(x[14 * 28 + 10 + c], (px / 255.0f - 0.2860f) / 0.3530f, 1e-6);
    }
    kiln_dataset_destroy(ds);
  }
  /* The raw loader reads the .gz directly, byte for byte. */
  char p[512];
  snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
  if (access(p, R_OK) != 0) snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte", dir);
  kiln_idx *idx = NULL;
  KT_CHECK(kiln_idx_create(p, &idx) == KILN_OK);
  if (idx) {
    int64_t s = 0;
    for (int64_t i = 0; i < idx->numel; i++) s += idx->data[i];
    KT_EQ_INT(s, 573469082LL);
    KT_EQ_INT(idx->dims[0], 10000);
  }
  kiln_idx_destroy(idx);
  KT_EQ_INT(kiln_last_status(), KILN_OK);
}

KT_TEST(dataset_from_host_errors) {
  kiln_clear_error();
  float x[6] = {0};
  int64_t y[3] = {0};
  int64_t bad_shape[2] = {3, 0};
  kiln_dataset *bad = NULL;
  KT_EQ_INT(kiln_dataset_create_from_host(x, 2, bad_shape, y, &bad), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(bad == NULL);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  int64_t shape[2] = {3, 2};
  KT_CHECK(kiln_dataset_create_from_host(x, 2, shape, NULL, &bad) != KILN_OK && bad == NULL);
  KT_STR_CONTAINS(kiln_last_error(), "labels");
  kiln_clear_error();
  kiln_dataset *ds = NULL;
  kiln_dataset_create_from_host(x, 2, shape, y, &ds);
  KT_CHECK(ds != NULL);
  kiln_batch_options o = {.batch_size = 0};
  kiln_batcher *no_batcher = NULL;
  KT_EQ_INT(kiln_batcher_create(ds, &o, &no_batcher), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(no_batcher == NULL);
  KT_STR_CONTAINS(kiln_last_error(), "batch_size");
  kiln_clear_error();
  o = (kiln_batch_options){.batch_size = 4, .drop_last = true};
  kiln_loader *no_loader = NULL;
  KT_EQ_INT(kiln_loader_create(ds, &o, &no_loader), KILN_ERR_INVALID_ARGUMENT); /* no full batch to give */
  KT_CHECK(no_loader == NULL);
  KT_STR_CONTAINS(kiln_last_error(), "drop_last");
  kiln_clear_error();
  kiln_dataset_destroy(ds);
}

KT_TEST(shuffle_is_a_seeded_permutation) {
  enum { N = 1000 };
  static int64_t a[N], b[N], c[N];
  kiln_data_permutation(N, 1, 42, 3, a);
  kiln_data_permutation(N, 1, 42, 3, b);
  KT_CHECK(memcmp(a, b, sizeof a) == 0); /* deterministic */
  kiln_data_permutation(N, 1, 42, 4, c);
  KT_CHECK(memcmp(a, c, sizeof a) != 0); /* a new order each epoch */
  /* The stream is seed + epoch (documented): seed 43 epoch 3 == seed 42 epoch 4. */
  kiln_data_permutation(N, 1, 43, 3, c);
  kiln_data_permutation(N, 1, 42, 4, b);
  KT_CHECK(memcmp(b, c, sizeof b) == 0);
  for (int e = 0; e < 5; e++) {
    kiln_data_permutation(N, 1, 7, e, a);
    static char seen[N];
    memset(seen, 0, sizeof seen);
    int ok = 1, fixed = 0;
    for (int i = 0; i < N; i++) {
      if (a[i] < 0 || a[i] >= N || seen[a[i]]) ok = 0;
      else seen[a[i]] = 1;
      fixed += a[i] == i;
    }
    KT_CHECK(ok);
    KT_CHECK(fixed < 20); /* a random permutation fixes ~1 point */
  }
  kiln_data_permutation(N, 0, 7, 5, a);
  for (int i = 0; i < N; i++) KT_EQ_INT(a[i], i);
}

/* A dataset with N examples of shape [F]: x[i][f] = i * 10 + f, y[i] = i. */
static kiln_dataset *small_ds(int64_t n, int64_t f) {
  float *x = malloc(sizeof(float) * (size_t)(n * f));
  int64_t *y = malloc(sizeof(int64_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    y[i] = i;
    for (int64_t j = 0; j < f; j++) x[i * f + j] = (float)(i * 10 + j);
  }
  int64_t shape[2] = {n, f};
  kiln_dataset *ds = NULL;
  kiln_dataset_create_from_host(x, 2, shape, y, &ds);
  free(x);
  free(y);
  return ds;
}

KT_TEST(batches_pad_the_last_one) {
  kiln_clear_error();
  enum { N = 10, F = 3, B = 4 };
  kiln_dataset *ds = small_ds(N, F);
  kiln_batch_options o = {.batch_size = B, .shuffle = true, .seed = 5};
  kiln_batcher *b = NULL;
  kiln_batcher_create(ds, &o, &b);
  KT_CHECK(b != NULL);
  if (!b) return;
  KT_EQ_INT(kiln_batcher_num_batches(b), 3);
  for (int64_t epoch = 0; epoch < 3; epoch++) {
    int64_t perm[N];
    kiln_data_permutation(N, 1, 5, epoch, perm);
    int seen[N] = {0};
    for (int64_t i = 0; i < 3; i++) {
      float x[B * F], mask[B];
      int64_t y[B];
      int64_t v = kiln_batcher_fill(b, epoch, i, x, y, mask);
      KT_EQ_INT(v, i < 2 ? B : N - 2 * B);
      for (int r = 0; r < B; r++) {
        if (r < v) {
          int64_t id = perm[i * B + r];
          KT_EQ_INT(y[r], id);
          KT_EQ_INT(mask[r], 1);
          for (int f = 0; f < F; f++) KT_EQ_INT(x[r * F + f], id * 10 + f);
          seen[id]++;
        } else {
          KT_EQ_INT(y[r], 0);
          KT_EQ_INT(mask[r], 0);
          for (int f = 0; f < F; f++) KT_EQ_INT(x[r * F + f], 0);
        }
      }
    }
    for (int i = 0; i < N; i++) KT_EQ_INT(seen[i], 1); /* every example exactly once */
  }
  float x[B * F], mask[B];
  int64_t y[B];
  KT_EQ_INT(kiln_batcher_fill(b, 0, 3, x, y, mask), -1);
  KT_STR_CONTAINS(kiln_last_error(), "test_data.c"); /* the caller's line */
  kiln_clear_error();
  kiln_batcher_destroy(b);
  o.drop_last = true;
  kiln_batcher_create(ds, &o, &b);
  KT_EQ_INT(kiln_batcher_num_batches(b), 2);
  kiln_batcher_destroy(b);
  kiln_dataset_destroy(ds);
}

/* A tiny masked training step over every batch of two epochs: all batches
 * have one shape, so the step compiles once. The loss is checked against a
 * plain C computation of the same masked sum. */
KT_TEST(epoch_compiles_once) {
  start();
  enum { N = 10, F = 3, B = 4 };
  kiln_dataset *ds = small_ds(N, F);
  kiln_batch_options o = {.batch_size = B, .shuffle = true, .seed = 9};
  kiln_batcher *b = NULL;
  kiln_batcher_create(ds, &o, &b);
  int64_t ws[1] = {F};
  float w0[F] = {0.5f, -0.25f, 0.125f};
  kiln_tensor w = kiln_param(kiln_from_host(w0, KILN_F32, 1, ws));
  kiln_tensor loss = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  int steps = 0, ends = 0;
  for (int it = 0; it < 8; it++) {
    kiln_batch bt;
    int r = kiln_batcher_next(b, &bt);
    KT_CHECK(r >= 0);
    if (r == 0) {
      ends++;
      continue;
    }
    /* loss = sum(mask * (x @ w)); "update" w by a constant step so w is
     * donated and rewritten each step like a real optimizer would. */
    kiln_tensor pred = kiln_matmul(bt.x, w);
    kiln_assign(loss, kiln_sum(kiln_mul(pred, bt.mask), 0, NULL, 0));
    kiln_assign(w, kiln_sub_s(w, 0.0));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    float got = 0;
    KT_CHECK(kiln_to_host(loss, &got, sizeof got) == KILN_OK);
    float x[B * F], mask[B];
    int64_t y[B];
    kiln_batcher *ref = NULL;
    kiln_batcher_create(ds, &o, &ref);
    int64_t v = kiln_batcher_fill(ref, bt.epoch, bt.index, x, y, mask);
    kiln_batcher_destroy(ref);
    KT_EQ_INT(v, bt.n_valid);
    double want = 0;
    for (int r2 = 0; r2 < B; r2++)
      for (int f = 0; f < F; f++) want += (double)mask[r2] * x[r2 * F + f] * w0[f];
    KT_NEAR(got, want, 1e-3 * (1 + fabs(want)));
    steps++;
  }
  KT_EQ_INT(steps, 6); /* two epochs of 3 batches */
  KT_EQ_INT(ends, 2);
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 1);
  KT_EQ_INT(kiln_counter_value("CachedCompile"), 5);
  kiln_release(w);
  kiln_release(loss);
  kiln_batcher_destroy(b);
  kiln_dataset_destroy(ds);
  kiln_shutdown();
}

/* Read a batch's tensors back to host. */
static void read_batch(const kiln_batch *bt, float *x, size_t xb, int64_t *y, float *mask, int64_t B) {
  KT_CHECK(kiln_to_host(bt->x, x, xb) == KILN_OK);
  KT_CHECK(kiln_to_host(bt->y, y, sizeof(int64_t) * (size_t)B) == KILN_OK);
  KT_CHECK(kiln_to_host(bt->mask, mask, sizeof(float) * (size_t)B) == KILN_OK);
}

KT_TEST(loader_matches_batcher) {
  start();
  enum { N = 37, F = 5, B = 8 };
  kiln_dataset *ds = small_ds(N, F);
  for (int drop = 0; drop < 2; drop++) {
    kiln_batch_options o = {.batch_size = B, .shuffle = true, .seed = 11, .drop_last = drop, .prefetch = drop ? 1 : 3};
    kiln_batcher *b = NULL;
    kiln_batcher_create(ds, &o, &b);
    kiln_loader *l = NULL;
    kiln_loader_create(ds, &o, &l);
    KT_CHECK(b && l);
    if (!b || !l) return;
    KT_EQ_INT(kiln_loader_num_batches(l), kiln_batcher_num_batches(b));
    int64_t before = kiln_counter_value("LoaderBatches"), got_batches = 0;
    for (int it = 0; it < 3 * 6; it++) { /* three epochs (5 or 4 batches + end) and more */
      kiln_batch sb, lb;
      int rs = kiln_batcher_next(b, &sb), rl = kiln_loader_next(l, &lb);
      KT_EQ_INT(rl, rs);
      if (rs != 1 || rl != 1) continue;
      got_batches++;
      KT_EQ_INT(lb.epoch, sb.epoch);
      KT_EQ_INT(lb.index, sb.index);
      KT_EQ_INT(lb.n_valid, sb.n_valid);
      KT_EQ_INT(kiln_rank(lb.x), 2);
      KT_EQ_INT(kiln_dim(lb.x, 0), B);
      float xs[B * F], xl[B * F], ms[B], ml[B];
      int64_t ys[B], yl[B];
      read_batch(&sb, xs, sizeof xs, ys, ms, B);
      read_batch(&lb, xl, sizeof xl, yl, ml, B);
      KT_CHECK(memcmp(xs, xl, sizeof xs) == 0);
      KT_CHECK(memcmp(ys, yl, sizeof ys) == 0);
      KT_CHECK(memcmp(ms, ml, sizeof ms) == 0);
      KT_CHECK(kiln_mark_step() == KILN_OK);
    }
    KT_EQ_INT(kiln_counter_value("LoaderBatches") - before, got_batches);
    kiln_loader_destroy(l);
    kiln_batcher_destroy(b);
  }
  kiln_metric_stats st;
  KT_CHECK(kiln_metric_data("LoaderWaitTime", &st) == 0);
  KT_CHECK(st.count > 0);
  KT_STR_CONTAINS(kiln_metrics_report(), "LoaderBatches");
  /* Freeing a loader that is blocked on a full ring must not hang. */
  kiln_batch_options o = {.batch_size = 2, .prefetch = 1};
  kiln_loader *l = NULL;
  kiln_loader_create(ds, &o, &l);
  usleep(2000);
  kiln_loader_destroy(l);
  kiln_dataset_destroy(ds);
  kiln_shutdown();
}

KT_TEST(bucketing) {
  start();
  enum { NS = 23, B = 3 };
  int64_t bounds[3] = {4, 8, 16};
  static int64_t data[NS][40];
  const int64_t *seqs[NS];
  int64_t lens[NS];
  for (int i = 0; i < NS; i++) {
    lens[i] = (i * 7) % 23; /* 0..22: some longer than 16 */
    for (int j = 0; j < lens[i]; j++) data[i][j] = 1000 * i + j + 1;
    seqs[i] = data[i];
  }
  kiln_bucket_options o = {.boundaries = bounds, .n_boundaries = 3, .batch_size = B, .truncate = false, .pad_id = -7,
                           .shuffle = true, .seed = 3};
  kiln_bucketer *no_bucketer = NULL;
  KT_EQ_INT(kiln_bucketer_create(NS, seqs, lens, &o, &no_bucketer), KILN_ERR_INVALID_ARGUMENT); /* too long */
  KT_CHECK(no_bucketer == NULL);
  KT_STR_CONTAINS(kiln_last_error(), "longer than the largest bucket");
  kiln_clear_error();
  o.truncate = true;
  kiln_bucketer *b = NULL;
  kiln_bucketer_create(NS, seqs, lens, &o, &b);
  KT_CHECK(b != NULL);
  if (!b) return;
  /* Expected stats, computed independently. */
  int64_t nseq[3] = {0}, tok[3] = {0}, trunc = 0;
  for (int i = 0; i < NS; i++) {
    int64_t l = lens[i] > 16 ? 16 : lens[i];
    trunc += lens[i] > 16;
    int k = l <= 4 ? 0 : l <= 8 ? 1 : 2;
    nseq[k]++;
    tok[k] += l;
  }
  kiln_bucket_stats st;
  kiln_bucketer_stats(b, &st);
  KT_EQ_INT(st.n_buckets, 3);
  KT_EQ_INT(st.truncated, trunc);
  int64_t nb = 0, all_tok = 0, all_pos = 0;
  for (int k = 0; k < 3; k++) {
    KT_EQ_INT(st.sequences[k], nseq[k]);
    KT_EQ_INT(st.tokens[k], tok[k]);
    int64_t batches = (nseq[k] + B - 1) / B;
    KT_EQ_INT(st.batches[k], batches);
    KT_NEAR(st.waste[k], 1.0 - (double)tok[k] / (double)(batches * B * bounds[k]), 1e-12);
    nb += batches, all_tok += tok[k], all_pos += batches * B * bounds[k];
  }
  KT_NEAR(st.total_waste, 1.0 - (double)all_tok / (double)all_pos, 1e-12);
  KT_EQ_INT(kiln_bucketer_num_batches(b), nb);
  /* Every batch: one bucket, the smallest that fits, correct tokens and mask;
   * every sequence exactly once per epoch; the order depends on the epoch. */
  int64_t order0[64] = {0}, order1[64] = {0};
  for (int epoch = 0; epoch < 2; epoch++) {
    int seen[NS] = {0};
    for (int64_t i = 0; i < nb; i++) {
      int64_t tokens[B * 16], ids[B], L = 0;
      float mask[B * 16];
      int k = -1;
      int64_t v = kiln_bucketer_fill(b, epoch, i, tokens, mask, &L, &k, ids);
      KT_CHECK(v >= 1 && v <= B);
      KT_EQ_INT(L, bounds[k]);
      (epoch ? order1 : order0)[i] = ids[0];
      int64_t longest = 0;
      for (int r = 0; r < B; r++) {
        int64_t id = ids[r], l = id >= 0 ? (lens[id] > 16 ? 16 : lens[id]) : 0;
        KT_CHECK((r < v) == (id >= 0));
        if (id >= 0) seen[id]++;
        if (l > longest) longest = l;
        if (id >= 0) KT_CHECK(l <= L && (k == 0 || l > bounds[k - 1])); /* smallest bucket */
        for (int c = 0; c < L; c++) {
          KT_EQ_INT(tokens[r * L + c], c < l ? 1000 * id + c + 1 : -7);
          KT_EQ_INT(mask[r * L + c], c < l ? 1 : 0);
        }
      }
      KT_CHECK(longest <= L);
    }
    for (int i = 0; i < NS; i++) KT_EQ_INT(seen[i], 1);
  }
  KT_CHECK(memcmp(order0, order1, sizeof order0) != 0);
  /* Tensor path: shapes [B, L] per bucket; one compile per distinct L. */
  int shapes_ok = 1, n = 0;
  kiln_seq_batch sb;
  while (kiln_bucketer_next(b, &sb) == 1) {
    shapes_ok &= kiln_dim(sb.tokens, 0) == B && kiln_dim(sb.tokens, 1) == sb.length &&
                 kiln_dtype_of(sb.tokens) == KILN_I64 && kiln_dim(sb.mask, 1) == sb.length;
    kiln_tensor real = kiln_keep(kiln_sum(sb.mask, 0, NULL, 0));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    int64_t tokens[B * 16], L;
    float mask[B * 16];
    kiln_bucketer_fill(b, sb.epoch, sb.index, tokens, mask, &L, NULL, NULL);
    double want = 0;
    for (int i = 0; i < B * L; i++) want += mask[i];
    KT_NEAR(kiln_item_f64(real), want, 1e-6);
    kiln_release(real);
    n++;
  }
  KT_CHECK(shapes_ok);
  KT_EQ_INT(n, nb);
  KT_CHECK(kiln_counter_value("UncachedCompile") <= 3);
  kiln_bucketer_destroy(b);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(idx_parse_good), KT_CASE(idx_parse_bad), KT_CASE(idx_load_file), KT_CASE(fashion_mnist_real),
        KT_CASE(dataset_from_host_errors), KT_CASE(shuffle_is_a_seeded_permutation), KT_CASE(batches_pad_the_last_one),
        KT_CASE(epoch_compiles_once), KT_CASE(loader_matches_batcher), KT_CASE(bucketing))
