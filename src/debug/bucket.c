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

/* The values with a positive count, sorted, repeats merged; *m: how many.
 * NULL when a value or count is negative, none is counted, or out of memory. */
static vc *sorted_values(const int64_t *values, const int64_t *counts, int n, int *m_out) {
  vc *d = malloc(sizeof *d * (size_t)n);
  if (!d) return NULL;
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (values[i] < 0 || counts[i] < 0) {
      free(d);
      return NULL;
    }
    if (counts[i] > 0) d[m++] = (vc){values[i], counts[i]};
  }
  if (!m) {
    free(d);
    return NULL;
  }
  qsort(d, (size_t)m, sizeof *d, cmp_vc);
  int u = 0; /* merge repeats */
  for (int i = 0; i < m; i++) {
    if (u && d[u - 1].v == d[i].v)
      d[u - 1].c += d[i].c;
    else
      d[u++] = d[i];
  }
  *m_out = u;
  return d;
}

/* The dynamic program over the m sorted values d, with at most K buckets. */
typedef struct bucket_dp {
  const vc *d;
  int m, K;
  int64_t align;
  double *C, *S; /* prefix sums: C = counts, S = count * value */
  /* best[k][b]: least padding covering values 0..b with at most k+1
   * buckets, the last ending at b; from[k][b]: where that last bucket starts */
  double *best;
  int *from;
} bucket_dp;

/* The padding of one bucket holding values a..b. */
static inline double bucket_cost(const bucket_dp *p, int a, int b) {
  return (double)round_up(p->d[b].v, p->align) * (p->C[b + 1] - p->C[a]) - (p->S[b + 1] - p->S[a]);
}

static void fill_table(bucket_dp *p) {
  const int m = p->m;
  p->C[0] = p->S[0] = 0;
  for (int i = 0; i < m; i++) {
    p->C[i + 1] = p->C[i] + (double)p->d[i].c;
    p->S[i + 1] = p->S[i] + (double)p->d[i].c * (double)p->d[i].v;
  }
  for (int b = 0; b < m; b++) {
    p->best[b] = bucket_cost(p, 0, b);
    p->from[b] = 0;
  }
  for (int k = 1; k < p->K; k++) {
    double *bk = p->best + (size_t)k * (size_t)m, *bp = p->best + (size_t)(k - 1) * (size_t)m;
    int *fk = p->from + (size_t)k * (size_t)m;
    for (int b = 0; b < m; b++) {
      bk[b] = bp[b]; /* "at most": fewer buckets allowed */
      fk[b] = -1;
      for (int a = 1; a <= b; a++) {
        double c = bp[a - 1] + bucket_cost(p, a, b);
        if (c < bk[b]) {
          bk[b] = c;
          fk[b] = a;
        }
      }
    }
  }
}

/* The fewest buckets (index k: k+1 buckets) whose waste is at most the
 * target, else the most; *waste_frac: that waste. */
static int pick_bucket_count(const bucket_dp *p, double *waste_frac) {
  const int m = p->m;
  const double total = p->S[m];
  int k = 0;
  for (; k < p->K - 1; k++) {
    double pad = p->best[(size_t)k * (size_t)m + (size_t)(m - 1)];
    double all = total + pad;
    if (all <= 0 || pad / all <= KILN_BUCKET_TARGET_WASTE) break;
  }
  const double pad = p->best[(size_t)k * (size_t)m + (size_t)(m - 1)];
  if (waste_frac) *waste_frac = total + pad > 0 ? pad / (total + pad) : 0;
  return k;
}

/* Walk back from the last value with k+1 buckets: the bucket bounds in
 * increasing order, duplicates dropped; returns how many (0: out of memory). */
static int walk_back(const bucket_dp *p, int k, int64_t *bounds) {
  const int m = p->m;
  int nb = 0;
  /* collect the ends of the buckets, last first */
  int64_t tmp[64];
  int64_t *ends = p->K <= 64 ? tmp : malloc(sizeof *ends * (size_t)p->K);
  if (!ends) return 0;
  int b = m - 1, cnt = 0;
  while (b >= 0) {
    int a = 0;
    while (k > 0 && p->from[(size_t)k * (size_t)m + (size_t)b] < 0) k--; /* inherited from fewer buckets */
    a = p->from[(size_t)k * (size_t)m + (size_t)b];
    ends[cnt++] = round_up(p->d[b].v, p->align);
    b = a - 1;
    if (k > 0) k--;
  }
  for (int i = cnt - 1; i >= 0; i--)
    if (!nb || bounds[nb - 1] != ends[i]) bounds[nb++] = ends[i];
  if (ends != tmp) free(ends);
  return nb;
}

int kiln_bucket_advise(const int64_t *values, const int64_t *counts, int n, int max_buckets, int64_t align,
                       int64_t *bounds, double *waste_frac) {
  if (waste_frac) *waste_frac = 0;
  if (!values || !counts || !bounds || n < 1 || max_buckets < 1 || align < 1) return 0;
  int m = 0;
  vc *d = sorted_values(values, counts, n, &m);
  if (!d) return 0;
  bucket_dp p = {.d = d, .m = m, .K = max_buckets < m ? max_buckets : m, /* more buckets than values never help */
                 .align = align};
  p.C = malloc(sizeof *p.C * ((size_t)m + 1));
  p.S = malloc(sizeof *p.S * ((size_t)m + 1));
  p.best = malloc(sizeof *p.best * (size_t)p.K * (size_t)m);
  p.from = malloc(sizeof *p.from * (size_t)p.K * (size_t)m);
  int nb = 0;
  if (p.C && p.S && p.best && p.from) {
    fill_table(&p);
    nb = walk_back(&p, pick_bucket_count(&p, waste_frac), bounds);
  }
  free(p.C);
  free(p.S);
  free(p.best);
  free(p.from);
  free(d);
  return nb;
}

int kiln_bucket_suggest(const int64_t *values, const int64_t *counts, int n, int64_t *bounds, double *waste_frac) {
  if (waste_frac) *waste_frac = 0;
  if (!values || !counts || !bounds || n < 1) return 0;
  int m = 0;
  vc *d = sorted_values(values, counts, n, &m);
  if (!d) return 0;
  int64_t maxv = d[m - 1].v;
  free(d);
  int maxb = m - 1 < 1 ? 1 : m - 1 < KILN_BUCKET_SUGGEST_MAX ? m - 1 : KILN_BUCKET_SUGGEST_MAX;
  return kiln_bucket_advise(values, counts, n, maxb, maxv >= 64 ? 8 : 1, bounds, waste_frac);
}
