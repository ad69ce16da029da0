/* libFuzzer harness. Property: for any bytes, the XSpace reader behind
 * `kiln profile summary`
 *   1. never reads outside the input, never crashes and never leaks
 *      (ASan/UBSan/LSan), whatever protobuf-c's unpack hands it;
 *   2. either rejects the input with KILN_ERR_CORRUPT (or OUT_OF_MEMORY)
 *      and a message naming the file, or yields a capture whose every event
 *      has a name, end >= begin, and lies inside [start, end] of the
 *      capture; and the analysis of an accepted capture succeeds, with a
 *      duty cycle in [0, 1] for every step and every gap inside its step,
 *      every step counted in one region, median <= p90 <= max, and each
 *      outlier a whole step above its region's threshold.
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_xplane_parse tests/fuzz/corpus/fuzz_xplane_parse -max_total_time=60 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/capture.h"
#include "profiler/summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *buf = malloc(size ? size : 1); /* exact size: over-reads hit the redzone */
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  kiln_prof_capture c;
  kiln_err err = {0};
  kiln_status s = kiln_prof_xspace_decode(buf, size, "fuzz.xplane.pb", &c, &err);
  if (s == KILN_OK) {
    for (int i = 0; i < c.n_threads; i++)
      for (uint32_t k = 0; k < c.threads[i].n; k++) {
        const kiln_prof_event *e = &c.threads[i].ev[k];
        if (!e->name || e->end_ns < e->begin_ns || e->begin_ns < c.start_ns || e->end_ns > c.end_ns) abort();
      }
    kiln_prof_analysis a;
    if (kiln_prof_analyze(&c, NULL, &a, &err) != KILN_OK) abort();
    for (int i = 0; i < a.n_steps; i++) {
      const kiln_prof_step_stats *st = &a.steps[i];
      double wall = (double)(st->end_ns - st->begin_ns);
      if (st->end_ns < st->begin_ns || st->busy_ns < 0 || st->busy_ns > wall + 0.5) abort();
      for (int g = 0; g < st->n_gaps; g++)
        if (st->gaps[g].begin_ns < st->begin_ns || st->gaps[g].end_ns > st->end_ns) abort();
    }
    /* the per-region aggregate: every step in one region, the order statistics in order */
    int counted = 0;
    for (int r = 0; r < a.n_regions; r++) {
      const kiln_prof_region_stats *g = &a.regions[r];
      counted += g->n_steps;
      if (g->n_whole > g->n_steps || g->n_outliers > g->n_whole) abort();
      if (g->n_whole && !(g->median_ns <= g->p90_ns && g->p90_ns <= g->max_ns && g->mad_ns >= 0)) abort();
      for (int k = 0; k < g->n_outliers; k++) {
        const kiln_prof_step_stats *st = &a.steps[g->outliers[k]];
        if ((double)(st->end_ns - st->begin_ns) <= g->outlier_ns || st->cut) abort();
      }
    }
    if (counted != a.n_steps) abort();
    kiln_prof_analysis_free(&a);
    kiln_prof_capture_clear(&c);
  } else if ((s != KILN_ERR_CORRUPT && s != KILN_ERR_OUT_OF_MEMORY) || !strstr(err.msg, "fuzz.xplane.pb")) {
    abort();
  }
  free(buf);
  return 0;
}
