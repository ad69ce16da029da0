/* Shared helpers of the scenario programs s1..s4 (docs/debugging.md).
 *
 * Each scenario runs a slow variant (default) or the fixed one (--fixed) for
 * --steps N steps and ends with one machine-readable line, whose numbers all
 * come from kiln's own counters and metrics:
 *
 *   scenario: s1 variant: slow steps: 20 step_ms: 12.3 compiles: 20 executions_per_step: 3.0 transfers_per_step: 2.0
 *
 * compiles counts every graph compiled since the program started; the
 * per-step figures are measured over the timed loop only. The tests in
 * tests/e2e/test_scenarios.c parse this line.
 *
 * Header-only (static functions): each example is a single .c file. */
#ifndef KILN_EXAMPLES_SCENARIO_UTIL_H
#define KILN_EXAMPLES_SCENARIO_UTIL_H

#include <kiln/kiln.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Command line of a scenario. */
typedef struct scn_args {
  int fixed;   /* --fixed: run the repaired program */
  int dynamic; /* --dynamic: the repair by dynamic shapes (S4) */
  int steps;   /* --steps N */
} scn_args;

/* Counter snapshot taken at the start of the timed loop. */
typedef struct scn_clock {
  double t0_ms;
  int64_t executions, transfers, compiles;
} scn_clock;

static double scn_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Parse --fixed and --steps N. Prints usage and returns -1 on a bad
 * argument (the caller exits with status 2), 1 after --help, 0 otherwise. */
static int scn_parse(int argc, char **argv, const char *name, const char *what, int default_steps, scn_args *a) {
  a->fixed = a->dynamic = 0;
  a->steps = default_steps;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--fixed")) {
      a->fixed = 1;
    } else if (!strcmp(argv[i], "--dynamic")) {
      a->dynamic = 1;
    } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
      char *end = NULL;
      long v = strtol(argv[++i], &end, 10);
      if (!end || *end || v < 1 || v > 100000) {
        fprintf(stderr, "%s: --steps needs a whole number from 1 to 100000, got \"%s\"\n", name, argv[i]);
        return -1;
      }
      a->steps = (int)v;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: %s [--fixed] [--steps N]\n  %s\n  --fixed    run the repaired variant (default: the slow one)\n"
             "  --steps N  steps to run (default %d)\nSet KILN_DEBUG=1 to see kiln's analysis (KILN_DEBUG_FILE=path "
             "to write it to a file).\n",
             name, what, default_steps);
      return 1;
    } else {
      fprintf(stderr, "%s: unknown argument \"%s\" (try --help)\n", name, argv[i]);
      return -1;
    }
  }
  return 0;
}

/* Start kiln. The persistent compile cache is turned off so that every run
 * pays for its compiles, as a first run would: the scenarios are about what
 * compiles cost. dyn: dynamic shapes (kiln_options.dynamic_shapes). */
static int scn_init_dyn(const char *name, kiln_switch dyn) {
  kiln_options o = {0};
  o.disk_cache = KILN_SWITCH_OFF;
  o.dynamic_shapes = dyn;
  if (kiln_init(&o) != KILN_OK) {
    fprintf(stderr, "%s: %s\n", name, kiln_last_error());
    return -1;
  }
  return 0;
}

static inline int scn_init(const char *name) { return scn_init_dyn(name, KILN_SWITCH_DEFAULT); }

/* Begin the timed loop: wait for earlier work, snapshot the counters. */
static void scn_clock_start(scn_clock *c) {
  kiln_wait();
  c->executions = kiln_counter_value("Execute");
  c->transfers = kiln_counter_value("TransferFromDevice");
  c->compiles = kiln_counter_value("UncachedCompile");
  c->t0_ms = scn_now_ms();
}

/* End the timed loop of `steps` steps and print the machine-readable line
 * and a human line (`unit` names what a step processes, per_step of them).
 * Returns the step time in ms. */
static double scn_clock_report(const scn_clock *c, const char *scenario, const char *variant, int steps,
                               double per_step, const char *unit) {
  kiln_wait();
  double ms = (scn_now_ms() - c->t0_ms) / steps;
  int64_t exe = kiln_counter_value("Execute") - c->executions;
  int64_t xfer = kiln_counter_value("TransferFromDevice") - c->transfers;
  int64_t loop_compiles = kiln_counter_value("UncachedCompile") - c->compiles;
  printf("%s (%s): %d steps in %.1f ms: %.2f ms/step, %.1f steps/s, %.0f %s/s; %lld graphs compiled during the loop\n",
         scenario, variant, steps, ms * steps, ms, 1000.0 / ms, per_step * 1000.0 / ms, unit,
         (long long)loop_compiles);
  printf("scenario: %s variant: %s steps: %d step_ms: %.3f compiles: %lld executions_per_step: %.2f "
         "transfers_per_step: %.2f\n",
         scenario, variant, steps, ms, (long long)kiln_counter_value("UncachedCompile"), (double)exe / steps,
         (double)xfer / steps);
  fflush(stdout);
  return ms;
}

/* Report kiln's sticky error, if any. Returns 0 when OK, 1 otherwise. */
static int scn_check(const char *name) {
  if (kiln_last_status() == KILN_OK) return 0;
  fprintf(stderr, "%s: %s\n", name, kiln_last_error());
  return 1;
}

/* A small deterministic generator for the synthetic data (splitmix64). */
static uint64_t scn_rand_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/* Uniform in [0, 1). */
static double scn_rand01(uint64_t *s) { return (double)(scn_rand_u64(s) >> 11) * 0x1.0p-53; }

#endif /* KILN_EXAMPLES_SCENARIO_UTIL_H */
