#include "base/sort.h"

#include <string.h>

void kiln_sort_idx(int32_t *idx, int32_t *tmp, int32_t n, int (*cmp)(int32_t a, int32_t b, void *ctx), void *ctx) {
  int32_t sorted = 1;
  for (int32_t i = 1; i < n && sorted; i++) sorted = cmp(idx[i - 1], idx[i], ctx) <= 0;
  if (sorted) return;
  int32_t *src = idx, *dst = tmp;
  for (int32_t w = 1; w < n; w *= 2) {
    for (int32_t lo = 0; lo < n; lo += 2 * w) {
      int32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
      while (i < mid && j < hi) dst[k++] = cmp(src[j], src[i], ctx) < 0 ? src[j++] : src[i++];
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    int32_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != idx) memcpy(idx, src, sizeof *idx * (size_t)n);
}
