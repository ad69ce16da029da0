/* Time intervals of a capture (intervals.h). */
#include "profiler/intervals.h"

#include <stdlib.h>

static int cmp_ival(const void *x, const void *y) {
  const kiln_ival *a = x, *b = y;
  return a->b < b->b ? -1 : a->b > b->b ? 1 : (a->e < b->e ? -1 : a->e > b->e);
}

size_t kiln_ival_merge(kiln_ival *v, size_t n) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_ival);
  size_t m = 0;
  for (size_t i = 1; i < n; i++) {
    if (v[i].b <= v[m].e) {
      if (v[i].e > v[m].e) v[m].e = v[i].e;
    } else {
      v[++m] = v[i];
    }
  }
  return m + 1;
}

double kiln_ival_within(const kiln_ival *v, size_t n, uint64_t a, uint64_t b) {
  size_t lo = 0, hi = n; /* the first interval ending after a */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (v[mid].e <= a) lo = mid + 1;
    else hi = mid;
  }
  double t = 0;
  for (size_t i = lo; i < n && v[i].b < b; i++) {
    uint64_t x = v[i].b > a ? v[i].b : a, y = v[i].e < b ? v[i].e : b;
    if (y > x) t += (double)(y - x);
  }
  return t;
}
