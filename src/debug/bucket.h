/* Bucketing advice: which padded sizes to compile so that a dimension that
 * takes many values (sequence lengths, S4 in SCENARIOS.md) costs few graphs
 * and little padding. docs/graphs.md shows how the advice is printed.
 *
 * Thread-safety: reentrant, no global state.
 */
#ifndef KILN_DEBUG_BUCKET_H
#define KILN_DEBUG_BUCKET_H

#include <stdint.h>

/* The waste a suggestion aims for: the smallest number of buckets whose
 * padding is at most this fraction of the padded elements is chosen. */
#define KILN_BUCKET_TARGET_WASTE 0.10

/* Suggest bucket boundaries for observed sizes values[i] (>= 0, any order,
 * repeats allowed) seen counts[i] (>= 0) times.
 *
 * Every size is padded up to the smallest boundary >= it. Boundaries are
 * multiples of `align` (>= 1); the last is >= the largest value. For each
 * k = 1..max_buckets the boundaries minimizing the padded elements are found
 * by dynamic programming over the sorted distinct values (a bucket's
 * boundary is its largest value rounded up to align); the smallest k whose
 * waste is <= KILN_BUCKET_TARGET_WASTE is chosen, else k = max_buckets.
 *
 * bounds:     receives the boundaries, ascending, distinct (room for
 *             max_buckets entries; caller-owned).
 * waste_frac: optional; receives padding / padded total elements (0 when
 *             there is nothing to pad).
 * Returns the number of boundaries written (<= max_buckets), or 0 when the
 * arguments are unusable (n < 1, max_buckets < 1, align < 1, a negative
 * value or count, no positive count, NULL arrays, out of memory).
 * Cost: O(max_buckets * d^2) for d distinct values. */
int kiln_bucket_advise(const int64_t *values, const int64_t *counts, int n, int max_buckets, int64_t align,
                       int64_t *bounds, double *waste_frac);

/* The most boundaries kiln_bucket_suggest returns. */
#define KILN_BUCKET_SUGGEST_MAX 4

/* The one suggestion kiln's reports make for a dimension (the KILN_DEBUG
 * records, kiln_explain, `kiln graph diff`): kiln_bucket_advise with fewer
 * buckets than distinct sizes (a bucket per size would compile as many
 * graphs as before; one bucket when there is one size), at most
 * KILN_BUCKET_SUGGEST_MAX, aligned to 8 when the largest size is 64 or more.
 * counts[i] is how often values[i] ran (the executions of its graphs), so
 * that *waste_frac is the padding the program would see following the
 * suggestion: sum(bound(v) - v) / sum(bound(v)) over what ran, bound(v) the
 * smallest boundary >= v. bounds: room for KILN_BUCKET_SUGGEST_MAX. Returns
 * the number of boundaries (0: as kiln_bucket_advise). */
int kiln_bucket_suggest(const int64_t *values, const int64_t *counts, int n, int64_t *bounds, double *waste_frac);

#endif
