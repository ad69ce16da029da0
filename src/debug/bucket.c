/* Bucketing advice by dynamic programming (see bucket.h).
 *
 * Costs are doubles: padded-element totals can exceed int64 for silly
 * inputs (counts times sizes), and doubles are exact to 2^53, far beyond
 * what real histograms produce. */
#include "debug/bucket.h"

#include <stdlib.h>
#include <string.h>

typedef struct vc {
  int64_t v, c;
} vc;

static int cmp_vc(const void *a, const void *b) {
  int64_t x = ((const vc *)a)->v, y = ((const vc *)b)->v;
  return x < y ? -1 : x > y;
}

static int64_t round_up(int64_t v, int64_t align) {
  int64_t r = v % align;
  if (!r) return v;
  return v > INT64_MAX - (align - r) ? INT64_MAX : v + (align - r);
}

int kiln_bucket_advise(const int64_t *values, const int64_t *counts, int n, int max_buckets, int64_t align,
                       int64_t *bounds, double *waste_frac) {
  if (waste_frac) *waste_frac = 0;
  if (!values || !counts || !bounds || n < 1 || max_buckets < 1 || align < 1) return 0;
  vc *d = malloc(sizeof *d * (size_t)n);
  if (!d) return 0;
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (values[i] < 0 || counts[i] < 0) {
      free(d);
      return 0;
    }
    if (counts[i] > 0) d[m++] = (vc){values[i], counts[i]};
  }
  if (!m) {
    free(d);
    return 0;
  }
  qsort(d, (size_t)m, sizeof *d, cmp_vc);
  int u = 0; /* merge repeats */
  for (int i = 0; i < m; i++) {
    if (u && d[u - 1].v == d[i].v)
      d[u - 1].c += d[i].c;
    else
      d[u++] = d[i];
  }
  m = u;
  const int K = max_buckets < m ? max_buckets : m; /* more buckets than values never help */
  /* prefix sums: C = counts, S = count * value */
  double *C = malloc(sizeof *C * ((size_t)m + 1)), *S = malloc(sizeof *S * ((size_t)m + 1));
  /* best[k][b]: least padding covering values 0..b with at most k+1
   * buckets, the last ending at b; from[k][b]: where that last bucket starts */
  double *best = malloc(sizeof *best * (size_t)K * (size_t)m);
  int *from = malloc(sizeof *from * (size_t)K * (size_t)m);
  int nb = 0;
  if (C && S && best && from) {
    C[0] = S[0] = 0;
    for (int i = 0; i < m; i++) {
      C[i + 1] = C[i] + (double)d[i].c;
      S[i + 1] = S[i] + (double)d[i].c * (double)d[i].v;
    }
#define COST(a, b) ((double)round_up(d[b].v, align) * (C[(b) + 1] - C[a]) - (S[(b) + 1] - S[a]))
    for (int b = 0; b < m; b++) {
      best[b] = COST(0, b);
      from[b] = 0;
    }
    for (int k = 1; k < K; k++) {
      double *bk = best + (size_t)k * (size_t)m, *bp = best + (size_t)(k - 1) * (size_t)m;
      int *fk = from + (size_t)k * (size_t)m;
      for (int b = 0; b < m; b++) {
        bk[b] = bp[b]; /* "at most": fewer buckets allowed */
        fk[b] = -1;
        for (int a = 1; a <= b; a++) {
          double c = bp[a - 1] + COST(a, b);
          if (c < bk[b]) {
            bk[b] = c;
            fk[b] = a;
          }
        }
      }
    }
    const double total = S[m];
    int k = 0;
    for (; k < K - 1; k++) {
      double pad = best[(size_t)k * (size_t)m + (size_t)(m - 1)];
      double all = total + pad;
      if (all <= 0 || pad / all <= KILN_BUCKET_TARGET_WASTE) break;
    }
    const double pad = best[(size_t)k * (size_t)m + (size_t)(m - 1)];
    if (waste_frac) *waste_frac = total + pad > 0 ? pad / (total + pad) : 0;
    /* walk back: collect the ends of the buckets, last first */
    int64_t tmp[64];
    int64_t *ends = K <= 64 ? tmp : malloc(sizeof *ends * (size_t)K);
    if (ends) {
      int b = m - 1, cnt = 0;
      while (b >= 0) {
        int a = 0;
        while (k > 0 && from[(size_t)k * (size_t)m + (size_t)b] < 0) k--; /* inherited from fewer buckets */
        a = from[(size_t)k * (size_t)m + (size_t)b];
        ends[cnt++] = round_up(d[b].v, align);
        b = a - 1;
        if (k > 0) k--;
      }
      for (int i = cnt - 1; i >= 0; i--)
        if (!nb || bounds[nb - 1] != ends[i]) bounds[nb++] = ends[i];
      if (ends != tmp) free(ends);
    }
#undef COST
  }
  free(C);
  free(S);
  free(best);
  free(from);
  free(d);
  return nb;
}
