/* A diagnostic per-kernel profile for the benchmarks (bench/train_step.c,
 * bench/embed.c): wraps the backend's execute to add up, per kernel name,
 * the CPU backend's own per-kernel timings (last_kernel_timings) while
 * prof_on is set. Not part of any figure: it is how docs/performance.md
 * finds where a step's time goes. Uses the runtime's internals (bench code
 * only). */
#ifndef KILN_BENCH_KERNEL_PROFILE_H
#define KILN_BENCH_KERNEL_PROFILE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

enum { PROF_MAX = 512 };
typedef struct prof_row {
  const char *name;
  double ns, flops, bytes;
  long n;
} prof_row;
static prof_row prof_rows[PROF_MAX];
static int prof_n, prof_on;
static kiln_backend_vtable prof_vt;
static const kiln_backend_vtable *prof_orig;

static kiln_status prof_execute(kiln_backend *b, kiln_executable *e, void *const *in, void *const *out,
                                kiln_err *err) {
  kiln_status s = prof_orig->execute(b, e, in, out, err);
  const kiln_kernel_timing *t = NULL;
  int n = prof_on && prof_orig->last_kernel_timings ? prof_orig->last_kernel_timings(b, e, &t) : 0;
  for (int i = 0; i < n; i++) {
    const char *nm = t[i].name ? t[i].name : "?";
    int k = 0;
    while (k < prof_n && strcmp(prof_rows[k].name, nm)) k++;
    if (k == prof_n) {
      if (prof_n == PROF_MAX) continue;
      prof_rows[prof_n++].name = nm; /* owned by the executable, which stays cached */
    }
    prof_rows[k].ns += (double)(t[i].end_ns - t[i].begin_ns);
    prof_rows[k].flops += t[i].flops;
    prof_rows[k].bytes += t[i].bytes;
    prof_rows[k].n++;
  }
  return s;
}

static void prof_install(void) {
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt || !rt->backend) return;
  prof_orig = rt->backend->vt;
  prof_vt = *prof_orig;
  prof_vt.execute = prof_execute;
  rt->backend->vt = &prof_vt;
}

static int prof_cmp(const void *a, const void *b) {
  double x = ((const prof_row *)a)->ns, y = ((const prof_row *)b)->ns;
  return (x < y) - (x > y);
}

static void prof_print(int steps, const char *unit, int max_rows) {
  qsort(prof_rows, (size_t)prof_n, sizeof *prof_rows, prof_cmp);
  double total = 0;
  for (int i = 0; i < prof_n; i++) total += prof_rows[i].ns;
  fprintf(stderr, "per-kernel profile, per %s (%d %ss): %d kernels, %.3f ms in kernels\n", unit, steps, unit,
          prof_n, total / steps / 1e6);
  fprintf(stderr, "%5s/%-4s %6s %9s %9s  %s\n", "ms", unit, "%", "GFLOP/s", "GB/s", "kernel");
  for (int i = 0; i < prof_n && i < max_rows; i++) {
    const prof_row *r = &prof_rows[i];
    fprintf(stderr, "%8.3f %5.1f%% %9.1f %9.1f  %s\n", r->ns / steps / 1e6, 100 * r->ns / total,
            r->ns > 0 ? r->flops / r->ns : 0, r->ns > 0 ? r->bytes / r->ns : 0, r->name);
  }
}

#endif
