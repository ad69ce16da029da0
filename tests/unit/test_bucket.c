/* Bucketing advice (src/debug/bucket.h) against an independent oracle: a
 * brute force over every way to cut the sorted distinct values into
 * contiguous buckets, on small random histograms. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "debug/bucket.h"
#include "kt.h"

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/* Padding when each value goes to the smallest bound >= it; -1 if a value
 * fits no bound. */
static int64_t padding_of(const int64_t *v, const int64_t *c, int n, const int64_t *b, int nb) {
  int64_t pad = 0;
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (k < nb && b[k] < v[i]) k++;
    if (k == nb) return -1;
    pad += c[i] * (b[k] - v[i]);
  }
  return pad;
}

/* Least padding with at most k buckets, by trying every set of cut points
 * between the m sorted distinct values d[] (counts w[]). */
static int64_t brute_force(const int64_t *d, const int64_t *w, int m, int k, int64_t align) {
  int64_t best = INT64_MAX;
  for (unsigned mask = 0; mask < (1u << (m - 1)); mask++) {
    if (__builtin_popcount(mask) + 1 > k) continue;
    int64_t pad = 0;
    int start = 0;
    for (int i = 0; i < m; i++) {
      if (i == m - 1 || ((mask >> i) & 1)) {
        int64_t bound = round_up(d[i], align);
        for (int j = start; j <= i; j++) pad += w[j] * (bound - d[j]);
        start = i + 1;
      }
    }
    if (pad < best) best = pad;
  }
  return best;
}

KT_TEST(known_example) {
  int64_t v[] = {30, 10, 100, 20}, c[] = {1, 1, 1, 1}, b[4];
  double waste = -1;
  /* 1 bucket: 240 padding of 400; 2: 30 of 190; 3: 10 of 170 (<= 10%) */
  int nb = kiln_bucket_advise(v, c, 4, 4, 1, b, &waste);
  KT_EQ_INT(nb, 3);
  KT_NEAR(waste, 10.0 / 170.0, 1e-12);
  KT_EQ_INT(b[2], 100);
  /* capped at 2 buckets: the best 2 */
  nb = kiln_bucket_advise(v, c, 4, 2, 1, b, &waste);
  KT_EQ_INT(nb, 2);
  KT_EQ_INT(b[0], 30);
  KT_EQ_INT(b[1], 100);
  KT_NEAR(waste, 30.0 / 190.0, 1e-12);
  /* alignment: boundaries are multiples of 64 */
  nb = kiln_bucket_advise(v, c, 4, 1, 64, b, &waste);
  KT_EQ_INT(nb, 1);
  KT_EQ_INT(b[0], 128);
  KT_NEAR(waste, (128.0 * 4 - 160) / (128.0 * 4), 1e-12);
}

KT_TEST(repeats_and_bad_arguments) {
  int64_t v[] = {16, 16, 16}, c[] = {2, 3, 0}, b[4];
  double waste = -1;
  KT_EQ_INT(kiln_bucket_advise(v, c, 3, 4, 8, b, &waste), 1);
  KT_EQ_INT(b[0], 16);
  KT_NEAR(waste, 0, 0);
  int64_t neg[] = {-1};
  KT_EQ_INT(kiln_bucket_advise(neg, c, 1, 4, 8, b, &waste), 0);
  KT_EQ_INT(kiln_bucket_advise(v, c, 3, 0, 8, b, &waste), 0);
  KT_EQ_INT(kiln_bucket_advise(v, c, 3, 4, 0, b, &waste), 0);
  KT_EQ_INT(kiln_bucket_advise(v, c, 0, 4, 8, b, &waste), 0);
  int64_t zero[] = {0, 0};
  KT_EQ_INT(kiln_bucket_advise(v, zero, 2, 4, 8, b, &waste), 0);
  KT_EQ_INT(kiln_bucket_advise(NULL, c, 1, 4, 8, b, NULL), 0);
}

/* Random histograms: the advice must be optimal for the number of buckets
 * it chose, and that number must be the smallest meeting the target. */
KT_TEST(optimal_against_brute_force) {
  srand(12345);
  for (int trial = 0; trial < 400; trial++) {
    int n = 1 + rand() % 10;
    int64_t v[10], c[10], b[8];
    for (int i = 0; i < n; i++) {
      v[i] = 1 + rand() % 64;
      c[i] = rand() % 5; /* zero counts allowed */
    }
    c[rand() % n] += 1;
    int maxb = 1 + rand() % 5;
    int64_t align = (int64_t[]){1, 4, 8}[rand() % 3];
    /* the oracle's view: sorted distinct values with positive counts */
    int64_t d[10], w[10];
    int m = 0;
    for (int64_t x = 0; x <= 64; x++) {
      int64_t cnt = 0;
      for (int i = 0; i < n; i++)
        if (v[i] == x) cnt += c[i];
      if (cnt) d[m] = x, w[m++] = cnt;
    }
    int64_t total = 0;
    for (int i = 0; i < m; i++) total += d[i] * w[i];
    double waste = -1;
    int nb = kiln_bucket_advise(v, c, n, maxb, align, b, &waste);
    KT_CHECK(nb >= 1 && nb <= maxb);
    for (int k = 0; k < nb; k++) {
      KT_CHECK(b[k] % align == 0);
      if (k) KT_CHECK(b[k] > b[k - 1]);
    }
    int64_t pad = padding_of(d, w, m, b, nb);
    KT_CHECK_MSG(pad >= 0, "trial %d: a value fits no bucket", trial);
    KT_NEAR(waste, total + pad ? (double)pad / (double)(total + pad) : 0, 1e-12);
    /* the chosen k: smallest meeting 10%, else max_buckets */
    int want_k = maxb;
    for (int k = 1; k <= maxb; k++) {
      int64_t p = brute_force(d, w, m, k, align);
      if (total + p == 0 || (double)p / (double)(total + p) <= KILN_BUCKET_TARGET_WASTE) {
        want_k = k;
        break;
      }
    }
    int64_t best = brute_force(d, w, m, want_k, align);
    KT_CHECK_MSG(pad == best, "trial %d: padding %lld, optimum %lld with <= %d buckets", trial, (long long)pad,
                 (long long)best, want_k);
    KT_CHECK(nb <= want_k);
    if (kt_cur_failed) break;
  }
}

KT_MAIN(KT_CASE(known_example), KT_CASE(repeats_and_bad_arguments), KT_CASE(optimal_against_brute_force))
