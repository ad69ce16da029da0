/* Time intervals of a capture (the summaries, summary.c and
 * dist_summary.c): sorting and merging them, and the time a merged set
 * covers inside a window. Reentrant. */
#ifndef KILN_PROFILER_INTERVALS_H
#define KILN_PROFILER_INTERVALS_H

#include <stddef.h>
#include <stdint.h>

typedef struct kiln_ival {
  uint64_t b, e; /* [b, e) */
} kiln_ival;

/* Sort v and merge overlapping or touching intervals in place; returns the
 * merged count. */
size_t kiln_ival_merge(kiln_ival *v, size_t n);
/* Time of the merged set v (sorted, disjoint) inside [a, b). */
double kiln_ival_within(const kiln_ival *v, size_t n, uint64_t a, uint64_t b);

#endif
