/* One compile for every size (docs/dynamic-shapes.md), at the backend:
 * random programs of tests/backend/symprog.h over a varying length T are
 * compiled by the cpu backend's compile_dynamic at T = 37 (the family is
 * made: its kernels compiled once) and then at T = 2, 3, 5, 16, 97, 300
 * (each a plan: no code generated, the C compiler does not run), and every
 * result is compared with the ref backend's (the oracle) at that size. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "base/rng.h"
#include "kiln/kiln.h"
#include "kt.h"

#include "backend/symprog.h"
#include "unit/plan_compare.h"

static kiln_backend *g_cpu, *g_ref;

static kiln_backend *make(int ref) {
  kiln_backend_config cfg = {.num_threads = 2, .cache_dir = NULL};
  kiln_err err = {0};
  kiln_backend *b = NULL;
  kiln_status st = ref ? kiln_backend_ref_create(&cfg, &b, &err) : kiln_backend_cpu_create(&cfg, &b, &err);
  if (st != KILN_OK) {
    fprintf(stderr, "backend: %s\n", err.msg);
    exit(1);
  }
  return b;
}

/* Run g on backend b with inputs filled from seed; outputs[o] malloc'd host
 * copies. Returns the executable's info. The executable is freed, unless
 * keep is given: *keep gets it (the runtime's graph cache holds executables
 * so, and a kernel stays loaded while an executable uses it). */
static kiln_exec_info run_on(kiln_backend *b, const kiln_graph *g, int dynamic, uint64_t seed, float **outs,
                             kiln_executable **keep) {
  kiln_exec_info info = {0};
  void *in[16] = {0}, *out[16] = {0};
  for (int32_t k = 0; k < g->n_inputs; k++) {
    const kiln_gnode *x = &g->nodes[g->input_node[k]];
    int64_t n = kiln_gnode_numel(x);
    float *h = malloc(sizeof *h * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) h[i] = (float)(kiln_rng_uniform(seed + (uint64_t)k, (uint64_t)i) * 2.0 - 1.0);
    in[k] = b->vt->buffer_alloc(b, sizeof *h * (size_t)n);
    b->vt->copy_to_device(b, in[k], h, sizeof *h * (size_t)n);
    free(h);
  }
  for (int32_t o = 0; o < g->n_outputs; o++)
    out[o] = b->vt->buffer_alloc(b, kiln_gnode_bytes(&g->nodes[g->output_node[o]]));
  kiln_executable *e = NULL;
  kiln_err err = {0};
  kiln_sym_origin dyn = {0, 1};
  kiln_status st = dynamic ? b->vt->compile_dynamic(b, g, NULL, 1, &dyn, NULL, &e, &err) : b->vt->compile(b, g, NULL, &e, &err);
  KT_CHECK_MSG(st == KILN_OK, "compile: %s", err.msg);
  if (st == KILN_OK) {
    st = b->vt->execute(b, e, in, out, &err);
    KT_CHECK_MSG(st == KILN_OK, "execute: %s", err.msg);
    if (b->vt->executable_info) b->vt->executable_info(b, e, &info);
    if (keep) *keep = e;
    else b->vt->executable_free(b, e);
  }
  for (int32_t o = 0; o < g->n_outputs; o++) {
    size_t bytes = kiln_gnode_bytes(&g->nodes[g->output_node[o]]);
    outs[o] = malloc(bytes + 4);
    b->vt->copy_to_host(b, outs[o], out[o], bytes);
    b->vt->buffer_free(b, out[o]);
  }
  for (int32_t k = 0; k < g->n_inputs; k++) b->vt->buffer_free(b, in[k]);
  return info;
}

static int close_to(double x, double y, double big) {
  if ((isnan(x) && isnan(y)) || (isinf(x) && x == y)) return 1; /* log of a negative, a pow's overflow: alike */
  return fabs(x - y) <= 1e-4 + 1e-4 * fabs(y) + 1e-5 * big;
}

/* The family's results at this size (a) against ref's (b), the oracle, and
 * the cpu backend's own compile of the same graph (s): each element within
 * 1e-4 relative or 1e-5 of the output's largest magnitude of one of them. A
 * random program can be ill-posed for two correct backends (an argsort of
 * values that tie up to an ulp, a running sum of squares at 1e9 that
 * cancels): there the cpu's static compile and ref part, and the family
 * must be the cpu's; a wrong family kernel is neither. */
static int same_results(const kiln_graph *g, float **a, float **b, float **st, uint64_t seed, int64_t T, int report) {
  int ok = 1;
  for (int32_t o = 0; o < g->n_outputs && ok; o++) {
    int64_t n = kiln_gnode_numel(&g->nodes[g->output_node[o]]);
    double big = 0;
    for (int64_t i = 0; i < n; i++) big = isfinite(b[o][i]) && fabs(b[o][i]) > big ? fabs(b[o][i]) : big;
    for (int64_t i = 0; i < n; i++) {
      double x = a[o][i], y = b[o][i];
      if (!close_to(x, y, big) && !(st && close_to(x, st[o][i], big))) {
        if (report)
          KT_FAIL("program %llu at T %lld: output %d [%lld]: family %.9g, ref %.9g, cpu %.9g", (unsigned long long)seed,
                (long long)T, (int)o, (long long)i, x, y, st ? st[o][i] : NAN);
        ok = 0;
        break;
      }
    }
  }
  return ok;
}

static void free_outs(const kiln_graph *g, float **a) {
  for (int32_t o = 0; o < g->n_outputs; o++) free(a[o]);
}

KT_TEST(one_compile_serves_every_size) {
  static const int64_t sizes[] = {2, 3, 5, 16, 97, 300};
  int families = 0, planned = 0, programs = 0;
  /* KILN_DYN_PROGRAMS=N: a longer campaign (default 80 programs) */
  uint64_t n_prog = getenv("KILN_DYN_PROGRAMS") ? strtoull(getenv("KILN_DYN_PROGRAMS"), NULL, 10) : 80;
  for (uint64_t seed = 1; seed <= n_prog; seed++) {
    uint64_t r = seed;
    kiln_graph *g0 = symprog_build(symprog_lcg, &r, 37);
    float *c[16], *f[16];
    int64_t compiled0 = kiln_counter_value("CpuKernelsCompiled");
    kiln_executable *e0 = NULL;
    float *st[16];
    kiln_exec_info i0 = run_on(g_cpu, g0, 1, seed, c, &e0);
    run_on(g_ref, g0, 0, seed, f, NULL);
    run_on(g_cpu, g0, 0, seed, st, NULL);
    same_results(g0, c, f, st, seed, 37, 1);
    free_outs(g0, c);
    free_outs(g0, f);
    free_outs(g0, st);
    programs++;
    KT_CHECK_MSG(i0.family == 1, "program %llu: no family (%s)", (unsigned long long)seed, i0.family_why);
    if (i0.family != 1) {
      if (e0) g_cpu->vt->executable_free(g_cpu, e0);
      kiln_graph_free(g0);
      continue;
    }
    families++;
    KT_CHECK(kiln_counter_value("CpuKernelsCompiled") > compiled0 || g0->n_nodes < 3);
    int64_t new_kernels = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      uint64_t r2 = seed;
      kiln_graph *g = symprog_build(symprog_lcg, &r2, sizes[k]);
      int64_t before = kiln_counter_value("CpuKernelsCompiled");
      kiln_exec_info i = run_on(g_cpu, g, 1, seed + 100, c, NULL);
      new_kernels += kiln_counter_value("CpuKernelsCompiled") - before;
      run_on(g_ref, g, 0, seed + 100, f, NULL);
      if (!same_results(g, c, f, NULL, seed, sizes[k], 0)) { /* and against the cpu's own compile */
        run_on(g_cpu, g, 0, seed + 100, st, NULL);
        same_results(g, c, f, st, seed, sizes[k], 1);
        free_outs(g, st);
      }
      free_outs(g, f);
      free_outs(g, c);
      KT_CHECK_MSG(i.family == 2, "program %llu at T %lld: not planned from its family (%d: %s)",
                   (unsigned long long)seed, (long long)sizes[k], i.family, i.family_why);
      planned += i.family == 2;
      kiln_graph_free(g);
    }
    /* planned sizes run the family's kernels: nothing new was compiled */
    KT_EQ_INT(new_kernels, 0);
    g_cpu->vt->executable_free(g_cpu, e0);
    kiln_graph_free(g0);
  }
  fprintf(stderr, "%d programs, %d families, %d sizes planned (%lld memory plans made from scratch)\n", programs,
          families, planned, (long long)kiln_counter_value("DynamicPlanMemoryRedone"));
}

/* A later size's memory plan is its family's template plan resized
 * (kiln_sched_build_like, kiln_sched_plan_like): wherever the full plan of
 * that size has the template's structure, the two must be the same plan,
 * buffer for buffer (bytes, block offsets, lifetimes, arena offsets), copy
 * for copy, whether its arena is the template's scaled (every scratch buffer
 * grew by one ratio) or placed again. The template is scheduled at T = 1009 (a prime above every
 * constant of these programs, as the cpu family's instances are). */
KT_TEST(a_later_size_plans_memory_as_its_own_schedule_would) {
  static const int64_t sizes[] = {2, 3, 5, 16, 97, 300, 1013};
  int compared = 0, programs = 0, scaled = 0;
  for (uint64_t seed = 1; seed <= 60; seed++) {
    uint64_t r = seed;
    kiln_graph *gt = symprog_build_of(symprog_lcg, &r, 1009, 20); /* without T - 1 sized rolls: some scale alike */
    kiln_sched *t = NULL;
    kiln_err err = {0};
    if (kiln_sched_build(gt, &t, &err) != KILN_OK) {
      kiln_graph_free(gt);
      continue;
    }
    programs++;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      uint64_t r2 = seed;
      kiln_graph *g = symprog_build_of(symprog_lcg, &r2, sizes[k], 20);
      kiln_sched *like = NULL, *full = NULL;
      kiln_status a = kiln_sched_build_like(t, g, &like, &err), b = kiln_sched_build(g, &full, &err);
      KT_CHECK_MSG(b == KILN_OK, "program %llu at T %lld: %s", (unsigned long long)seed, (long long)sizes[k], err.msg);
      if (a == KILN_OK && b == KILN_OK && kiln_sched_same_structure(full, t)) {
        compared++;
        char what[64];
        snprintf(what, sizeof what, "program %llu at T %lld", (unsigned long long)seed, (long long)sizes[k]);
        kt_same_plan(like, full, what);
        scaled += like->arena_scaled;
      }
      kiln_sched_free(like);
      kiln_sched_free(full);
      kiln_graph_free(g);
    }
    kiln_sched_free(t);
    kiln_graph_free(gt);
  }
  fprintf(stderr, "%d programs, %d sizes compared, %d arenas the template's scaled\n", programs, compared, scaled);
  KT_CHECK(compared > programs * 3); /* most sizes keep the template's structure */
  /* both ways of placing a resized arena are compared: scaled (every
   * buffer grew alike) and placed again */
  KT_CHECK(scaled > 0 && scaled < compared);
}

int main(int argc, char **argv) {
  g_cpu = make(0);
  g_ref = make(1);
  kt_case cases[] = {KT_CASE(one_compile_serves_every_size), KT_CASE(a_later_size_plans_memory_as_its_own_schedule_would)};
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (argc > 1 && !strstr(cases[i].name, argv[1])) continue;
    kt_cur_failed = 0;
    cases[i].fn();
    fprintf(stderr, "[%s] %s\n", kt_cur_failed ? "FAIL" : " ok ", cases[i].name);
    failed += kt_cur_failed;
  }
  g_cpu->vt->destroy(g_cpu);
  g_ref->vt->destroy(g_ref);
  printf("%d passed, %d failed\n", (int)(sizeof cases / sizeof cases[0]) - failed, failed);
  return failed ? 1 : 0;
}
