/* Sorting an index array with a context: qsort has no context argument and
 * qsort_r's signature differs between libcs. */
#ifndef KILN_BASE_SORT_H
#define KILN_BASE_SORT_H

#include <stdint.h>

/* Sort idx[0..n) stably so that cmp(a, b, ctx) <= 0 for each neighbouring
 * pair (cmp < 0: a goes first): a bottom-up merge sort through tmp (n
 * entries), which returns at once when idx is already in order (a schedule's
 * buffers usually are). */
void kiln_sort_idx(int32_t *idx, int32_t *tmp, int32_t n, int (*cmp)(int32_t a, int32_t b, void *ctx), void *ctx);

#endif
