/* Audit of the data pipeline as a user's program meets it: the epoch
 * permutation (a uniform permutation: chi-square over all 4! orders; the
 * documented seed + epoch rule), the batcher (every example exactly once per
 * epoch, labels paired with features, padding and masks as documented, B > N,
 * N = 1, drop_last), sharding against torch.utils.data.DistributedSampler
 * (tests/data/data_audit_reference.py writes the index lists), the
 * asynchronous loader (the batcher's batches in order, kept tensors that do
 * not change when the loader refills its slots, destroyed mid-epoch, resume
 * through fill) and the bucketer (each sequence once, in the smallest bucket
 * that holds it, tokens/mask/length exact). */
#include <kiln/data.h>
#include <kiln/kiln.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"

static void start(void) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

enum { F = 3 }; /* features per example: 100 i + j, label 1000 + i */

static kiln_dataset *make_ds(int64_t n) {
  float *x = malloc(sizeof(float) * (size_t)(n * F));
  int64_t *y = malloc(sizeof(int64_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    for (int j = 0; j < F; j++) x[i * F + j] = (float)(100 * i + j);
    y[i] = 1000 + i;
  }
  kiln_dataset *ds = NULL;
  int64_t shape[2] = {n, F};
  KT_CHECK(kiln_dataset_create_from_host(x, 2, shape, y, &ds) == KILN_OK);
  free(x);
  free(y);
  return ds;
}

static int is_permutation(const int64_t *p, int64_t n) {
  char *seen = calloc((size_t)n + 1, 1);
  int ok = 1;
  for (int64_t i = 0; i < n; i++) {
    if (p[i] < 0 || p[i] >= n || seen[p[i]]) ok = 0;
    else seen[p[i]] = 1;
  }
  free(seen);
  return ok;
}

KT_TEST(permutation_is_uniform_and_follows_seed_plus_epoch) {
  kiln_clear_error();
  static const int64_t ns[] = {1, 2, 3, 7, 64, 1001};
  for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
    int64_t n = ns[c], *a = malloc(sizeof(int64_t) * (size_t)n), *b = malloc(sizeof(int64_t) * (size_t)n);
    kiln_data_permutation(n, false, 5, 3, a);
    for (int64_t i = 0; i < n; i++) KT_CHECK(a[i] == i);
    for (int e = 0; e < 4; e++) {
      kiln_data_permutation(n, true, 42, e, a);
      KT_CHECK_MSG(is_permutation(a, n), "n %lld epoch %d: not a permutation", (long long)n, e);
      kiln_data_permutation(n, true, 42 - 1, e + 1, b); /* documented: seed + epoch */
      KT_CHECK(memcmp(a, b, sizeof(int64_t) * (size_t)n) == 0);
      kiln_data_permutation(n, true, 42, e + 1, b);
      if (n >= 7) KT_CHECK_MSG(memcmp(a, b, sizeof(int64_t) * (size_t)n) != 0, "n %lld: epochs repeat", (long long)n);
    }
    free(a);
    free(b);
  }
  /* 4! orders over 48000 epochs: chi-square with 23 degrees of freedom
   * (P(chi2 > 60) < 1e-4); and over 48000 seeds at epoch 0 */
  for (int by_seed = 0; by_seed < 2; by_seed++) {
    int64_t count[24] = {0};
    enum { T = 48000 };
    for (int64_t t = 0; t < T; t++) {
      int64_t p[4];
      kiln_data_permutation(4, true, by_seed ? (uint64_t)t * 7919u : 17, by_seed ? 0 : t, p);
      /* Lehmer code */
      int code = 0;
      for (int i = 0; i < 4; i++) {
        int smaller = 0;
        for (int j = i + 1; j < 4; j++) smaller += p[j] < p[i];
        code = code * (4 - i) + smaller;
      }
      count[code]++;
    }
    double chi = 0, want = T / 24.0;
    for (int k = 0; k < 24; k++) chi += (count[k] - want) * (count[k] - want) / want;
    KT_CHECK_MSG(chi < 60, "permutations of 4 %s: chi-square %.1f", by_seed ? "by seed" : "by epoch", chi);
  }
  /* where element 0 lands in a permutation of 10: uniform (9 dof) */
  int64_t pos[10] = {0};
  for (int64_t e = 0; e < 20000; e++) {
    int64_t p[10];
    kiln_data_permutation(10, true, 99, e, p);
    for (int i = 0; i < 10; i++) pos[i] += p[i] == 0;
  }
  double chi = 0;
  for (int i = 0; i < 10; i++) chi += (pos[i] - 2000.0) * (pos[i] - 2000.0) / 2000.0;
  KT_CHECK_MSG(chi < 35, "position of element 0: chi-square %.1f", chi);
  KT_EQ_INT(kiln_last_status(), KILN_OK);
}

/* Read one batch back and check it against the permutation: rows are the
 * examples perm[first ..], features and labels paired, padding rows zero. */
static void check_batch(const kiln_batch *bt, const int64_t *order, int64_t n_order, int64_t B, int64_t index,
                        int64_t *seen) {
  float *x = malloc(sizeof(float) * (size_t)(B * F)), *m = malloc(sizeof(float) * (size_t)B);
  int64_t *y = malloc(sizeof(int64_t) * (size_t)B);
  KT_CHECK(kiln_to_host(bt->x, x, sizeof(float) * (size_t)(B * F)) == KILN_OK);
  KT_CHECK(kiln_to_host(bt->y, y, sizeof(int64_t) * (size_t)B) == KILN_OK);
  KT_CHECK(kiln_to_host(bt->mask, m, sizeof(float) * (size_t)B) == KILN_OK);
  int64_t first = index * B, valid = n_order - first < B ? n_order - first : B;
  KT_EQ_INT(bt->n_valid, valid);
  for (int64_t r = 0; r < B; r++) {
    if (r < valid) {
      int64_t e = order[first + r];
      KT_CHECK_MSG(y[r] == 1000 + e && m[r] == 1.0f, "batch %lld row %lld: label %lld mask %g, want example %lld",
                   (long long)index, (long long)r, (long long)y[r], m[r], (long long)e);
      for (int j = 0; j < F; j++) KT_CHECK(x[r * F + j] == (float)(100 * e + j));
      if (y[r] >= 1000) seen[y[r] - 1000]++;
    } else {
      KT_CHECK(y[r] == 0 && m[r] == 0.0f);
      for (int j = 0; j < F; j++) KT_CHECK(x[r * F + j] == 0.0f);
    }
  }
  free(x);
  free(m);
  free(y);
}

KT_TEST(batcher_gives_every_example_once_per_epoch) {
  start();
  static const struct {
    int64_t n, b;
  } cases[] = {{1, 1}, {1, 4}, {5, 8}, {10, 3}, {12, 4}, {37, 8}, {64, 64}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int mode = 0; mode < 4; mode++) {
      bool shuffle = mode & 1, drop = mode & 2;
      int64_t n = cases[c].n, B = cases[c].b;
      kiln_dataset *ds = make_ds(n);
      kiln_batch_options o = {.batch_size = B, .shuffle = shuffle, .seed = 7 + c, .drop_last = drop};
      kiln_batcher *b = NULL;
      kiln_status st = kiln_batcher_create(ds, &o, &b);
      if (drop && B > n) { /* documented: no batch at all is an error */
        KT_EQ_INT(st, KILN_ERR_INVALID_ARGUMENT);
        KT_CHECK(b == NULL);
        kiln_clear_error();
        kiln_dataset_destroy(ds);
        continue;
      }
      KT_CHECK(st == KILN_OK && b);
      int64_t nb = drop ? n / B : (n + B - 1) / B, used = drop ? nb * B : n;
      KT_EQ_INT(kiln_batcher_num_batches(b), nb);
      int64_t *perm = malloc(sizeof(int64_t) * (size_t)n), *prev = calloc((size_t)n, sizeof(int64_t));
      int64_t *seen = calloc((size_t)n, sizeof(int64_t));
      for (int64_t e = 0; e < 3; e++) {
        kiln_data_permutation(n, shuffle, o.seed, e, perm);
        memset(seen, 0, sizeof(int64_t) * (size_t)n);
        for (int64_t i = 0; i < nb; i++) {
          kiln_batch bt;
          KT_EQ_INT(kiln_batcher_next(b, &bt), 1);
          KT_EQ_INT(bt.epoch, e);
          KT_EQ_INT(bt.index, i);
          check_batch(&bt, perm, drop ? used : n, B, i, seen);
          KT_CHECK(kiln_mark_step() == KILN_OK);
        }
        kiln_batch end;
        KT_EQ_INT(kiln_batcher_next(b, &end), 0);
        int64_t once = 0;
        for (int64_t i = 0; i < n; i++) once += seen[i] == 1;
        for (int64_t i = 0; i < n; i++) KT_CHECK(seen[i] <= 1);
        KT_EQ_INT(once, used);
        if (shuffle && n >= 10 && e > 0) KT_CHECK(memcmp(prev, perm, sizeof(int64_t) * (size_t)n) != 0);
        memcpy(prev, perm, sizeof(int64_t) * (size_t)n);
      }
      free(perm);
      free(prev);
      free(seen);
      kiln_batcher_destroy(b);
      kiln_dataset_destroy(ds);
    }
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_shutdown();
}

/* tests/data/data_audit_reference.txt: lines "dsampler N W rank: i i i ..."
 * from torch.utils.data.DistributedSampler(shuffle=False, drop_last=True). */
KT_TEST(sharding_is_distributed_sampler_with_drop_last) {
  start();
  const char *dir = getenv("KILN_TEST_DATA");
  char path[512];
  snprintf(path, sizeof path, "%s/data_audit_reference.txt", dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  KT_CHECK_MSG(f != NULL, "cannot open %s (run tests/data/data_audit_reference.py)", path);
  if (!f) return;
  char line[4096];
  int cases = 0;
  while (fgets(line, sizeof line, f)) {
    long long n, w, r;
    int at = 0;
    if (sscanf(line, "dsampler %lld %lld %lld:%n", &n, &w, &r, &at) != 3) continue;
    int64_t want[256], nw = 0;
    char *p = line + at, *end;
    for (long long v = strtoll(p, &end, 10); end != p; v = strtoll(p, &end, 10)) {
      want[nw++] = v;
      p = end;
    }
    /* B = 1 without shuffle: the batches are the shard's examples in order */
    kiln_dataset *ds = make_ds(n);
    kiln_batch_options o = {.batch_size = 1, .shard_count = (int)w, .shard_rank = (int)r};
    kiln_batcher *b = NULL;
    kiln_status st = kiln_batcher_create(ds, &o, &b);
    if (nw == 0) { /* N < W: nothing for any rank, an error in kiln */
      KT_EQ_INT(st, KILN_ERR_INVALID_ARGUMENT);
      kiln_clear_error();
    } else if (b) {
      cases++;
      KT_EQ_INT(kiln_batcher_num_batches(b), nw);
      for (int64_t i = 0; i < nw && i < kiln_batcher_num_batches(b); i++) {
        float x[F], m;
        int64_t y;
        KT_EQ_INT(kiln_batcher_fill(b, 0, i, x, &y, &m), 1);
        KT_CHECK_MSG(y == 1000 + want[i], "N %lld W %lld rank %lld: example %lld is %lld, torch %lld", n, w, r,
                     (long long)i, (long long)(y - 1000), (long long)want[i]);
      }
    } else {
      KT_FAIL("N %lld W %lld rank %lld: %s", n, w, r, kiln_last_error());
    }
    kiln_batcher_destroy(b);
    kiln_dataset_destroy(ds);
  }
  fclose(f);
  KT_CHECK(cases > 20);
  /* shuffled: the ranks' shards are disjoint, each floor(N / W), and
   * together the first W floor(N / W) of the permutation, on every "rank"
   * made with the same seed */
  for (int64_t n = 1; n <= 23; n += 3)
    for (int w = 2; w <= 4; w++) {
      if (n < w) continue;
      kiln_dataset *ds = make_ds(n);
      int64_t perm[32], cover[32] = {0}, per = n / w;
      kiln_data_permutation(n, true, 5, 1, perm);
      for (int r = 0; r < w; r++) {
        kiln_batch_options o = {.batch_size = 2, .shuffle = true, .seed = 5, .shard_count = w, .shard_rank = r};
        kiln_batcher *b = NULL;
        KT_CHECK(kiln_batcher_create(ds, &o, &b) == KILN_OK);
        if (!b) continue;
        KT_EQ_INT(kiln_batcher_num_batches(b), (per + 1) / 2);
        for (int64_t i = 0; i < kiln_batcher_num_batches(b); i++) {
          float x[2 * F], m[2];
          int64_t y[2];
          int64_t v = kiln_batcher_fill(b, 1, i, x, y, m);
          for (int64_t k = 0; k < v; k++) {
            KT_CHECK(y[k] - 1000 == perm[r + w * (2 * i + k)]);
            /* batch i of the ranks together: batch i of batch size 2 w over
             * the first w floor(N / w) examples of the permutation */
            int64_t at = 0;
            while (at < n && perm[at] != y[k] - 1000) at++;
            KT_CHECK(at / (2 * w) == i && at < per * w);
            cover[y[k] - 1000]++;
          }
        }
        kiln_batcher_destroy(b);
      }
      for (int64_t j = 0; j < n; j++) KT_EQ_INT(cover[perm[j]], j < per * w ? 1 : 0);
      kiln_dataset_destroy(ds);
    }
  kiln_shutdown();
}

static void batch_host(const kiln_batch *bt, int64_t B, float *x, int64_t *y, float *m) {
  KT_CHECK(kiln_to_host(bt->x, x, sizeof(float) * (size_t)(B * F)) == KILN_OK);
  KT_CHECK(kiln_to_host(bt->y, y, sizeof(int64_t) * (size_t)B) == KILN_OK);
  KT_CHECK(kiln_to_host(bt->mask, m, sizeof(float) * (size_t)B) == KILN_OK);
}

KT_TEST(loader_is_the_batcher_and_its_batches_stay_put) {
  start();
  static const struct {
    int64_t n, b;
    bool shuffle, drop;
    int prefetch, shards, rank;
  } cases[] = {{1, 1, true, false, 1, 0, 0},  {1, 3, false, false, 2, 0, 0}, {10, 3, true, false, 1, 0, 0},
               {10, 3, true, true, 4, 0, 0},  {37, 8, true, false, 0, 0, 0}, {16, 4, false, true, 64, 0, 0},
               {38, 4, true, false, 2, 3, 2}, {11, 2, true, true, 1, 2, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t n = cases[c].n, B = cases[c].b;
    kiln_dataset *ds = make_ds(n);
    kiln_batch_options o = {.batch_size = B, .shuffle = cases[c].shuffle, .seed = 3, .drop_last = cases[c].drop,
                            .prefetch = cases[c].prefetch, .shard_count = cases[c].shards, .shard_rank = cases[c].rank};
    kiln_batcher *b = NULL;
    kiln_loader *l = NULL;
    KT_CHECK(kiln_batcher_create(ds, &o, &b) == KILN_OK);
    KT_CHECK(kiln_loader_create(ds, &o, &l) == KILN_OK);
    if (!b || !l) return;
    int64_t nb = kiln_batcher_num_batches(b);
    KT_EQ_INT(kiln_loader_num_batches(l), nb);
    /* four epochs back to back; every batch of an epoch kept and read only
     * at the epoch's end, after the loader reused its slots several times */
    enum { MAXB = 16 };
    for (int e = 0; e < 4; e++) {
      kiln_batch kept[MAXB];
      for (int64_t i = 0; i <= nb; i++) {
        kiln_batch lb;
        int r = kiln_loader_next(l, &lb);
        KT_EQ_INT(r, i < nb ? 1 : 0);
        if (r != 1) continue;
        KT_EQ_INT(lb.epoch, e);
        KT_EQ_INT(lb.index, i);
        kept[i] = lb;
      }
      for (int64_t i = 0; i < nb && i < MAXB; i++) {
        float xl[8 * F], xf[8 * F], ml[8], mf[8];
        int64_t yl[8], yf[8];
        batch_host(&kept[i], B, xl, yl, ml);
        int64_t v = kiln_batcher_fill(b, e, i, xf, yf, mf); /* resume at (epoch, index) */
        KT_EQ_INT(kept[i].n_valid, v);
        size_t xb = sizeof(float) * (size_t)(B * F), yb = sizeof(int64_t) * (size_t)B, mb = sizeof(float) * (size_t)B;
        KT_CHECK_MSG(memcmp(xl, xf, xb) == 0 && memcmp(yl, yf, yb) == 0 && memcmp(ml, mf, mb) == 0,
                     "case %zu epoch %d batch %lld: kept loader batch differs from fill", c, e, (long long)i);
      }
      KT_CHECK(kiln_mark_step() == KILN_OK);
    }
    /* destroyed mid-epoch, with the ring full */
    kiln_batch lb;
    KT_EQ_INT(kiln_loader_next(l, &lb), 1);
    kiln_loader_destroy(l);
    kiln_batcher_destroy(b);
    kiln_dataset_destroy(ds);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_shutdown();
}

KT_TEST(bucketer_places_each_sequence_once_exactly) {
  start();
  enum { NS = 41, B = 4, MAXL = 12 };
  int64_t data[NS][MAXL + 4], lens[NS];
  const int64_t *seqs[NS];
  for (int i = 0; i < NS; i++) {
    lens[i] = (i * 7) % (MAXL + 4); /* 0 .. 15, some longer than the largest bucket */
    for (int j = 0; j < MAXL + 4; j++) data[i][j] = 10000 * (i + 1) + j;
    seqs[i] = data[i];
  }
  const int64_t bounds[3] = {3, 8, MAXL};
  for (int mode = 0; mode < 4; mode++) {
    kiln_bucket_options o = {.boundaries = bounds, .n_boundaries = 3, .batch_size = B, .truncate = true,
                             .pad_id = -5, .shuffle = mode & 1, .seed = 21, .exact_length = (mode & 2) != 0};
    kiln_bucketer *bk = NULL;
    KT_CHECK(kiln_bucketer_create(NS, seqs, lens, &o, &bk) == KILN_OK);
    if (!bk) return;
    kiln_bucket_stats stats;
    kiln_bucketer_stats(bk, &stats);
    int64_t trunc = 0;
    for (int i = 0; i < NS; i++) trunc += lens[i] > MAXL;
    KT_EQ_INT(stats.truncated, trunc);
    int64_t nb = kiln_bucketer_num_batches(bk);
    for (int e = 0; e < 2; e++) {
      int seen[NS] = {0};
      for (int64_t i = 0; i <= nb; i++) {
        kiln_seq_batch sb;
        int r = kiln_bucketer_next(bk, &sb);
        KT_EQ_INT(r, i < nb ? 1 : 0);
        if (r != 1) continue;
        int64_t tok[B * MAXL], tf[B * MAXL], ids[B], L = 0;
        float msk[B * MAXL], mf[B * MAXL];
        int bucket = -1;
        int64_t v = kiln_bucketer_fill(bk, e, i, tf, mf, &L, &bucket, ids);
        KT_EQ_INT(sb.n_valid, v);
        KT_EQ_INT(sb.length, L);
        KT_EQ_INT(sb.bucket, bucket);
        KT_CHECK(kiln_to_host(sb.tokens, tok, sizeof(int64_t) * (size_t)(B * L)) == KILN_OK);
        KT_CHECK(kiln_to_host(sb.mask, msk, sizeof(float) * (size_t)(B * L)) == KILN_OK);
        int64_t longest = 1;
        for (int64_t r2 = 0; r2 < B; r2++) {
          int64_t id = ids[r2];
          KT_CHECK((r2 < v) == (id >= 0));
          int64_t l = id >= 0 ? (lens[id] < MAXL ? lens[id] : MAXL) : 0;
          if (l > longest) longest = l;
          if (id >= 0) {
            seen[id]++;
            /* the smallest bucket that holds it */
            KT_CHECK(l <= bounds[bucket] && (bucket == 0 || l > bounds[bucket - 1]));
          }
          for (int64_t j = 0; j < L; j++) {
            int64_t want = j < l ? 10000 * (id + 1) + j : -5;
            KT_CHECK_MSG(tok[r2 * L + j] == want && msk[r2 * L + j] == (j < l ? 1.0f : 0.0f),
                         "mode %d batch %lld row %lld col %lld: token %lld mask %g, want %lld", mode, (long long)i,
                         (long long)r2, (long long)j, (long long)tok[r2 * L + j], msk[r2 * L + j], (long long)want);
          }
        }
        KT_EQ_INT(L, o.exact_length ? longest : bounds[bucket]);
        KT_CHECK(memcmp(tok, tf, sizeof(int64_t) * (size_t)(B * L)) == 0);
        KT_CHECK(kiln_mark_step() == KILN_OK);
      }
      for (int i = 0; i < NS; i++) KT_CHECK_MSG(seen[i] == 1, "mode %d epoch %d: sequence %d seen %d times", mode, e, i,
                                                seen[i]);
    }
    kiln_bucketer_destroy(bk);
  }
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(permutation_is_uniform_and_follows_seed_plus_epoch),
        KT_CASE(batcher_gives_every_example_once_per_epoch), KT_CASE(sharding_is_distributed_sampler_with_drop_last),
        KT_CASE(loader_is_the_batcher_and_its_batches_stay_put), KT_CASE(bucketer_places_each_sequence_once_exactly))
