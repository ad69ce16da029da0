/* Shared by the profiler summary tests: the three threads of a synthetic
 * capture (host thread, executor lane 0, worker lane 1), each with room for
 * 16 events. Static function: include from a test. */
#ifndef KILN_TESTS_PROF_FIXTURE_H
#define KILN_TESTS_PROF_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "profiler/capture.h"

static void prof_fixture_threads(kiln_prof_capture *c) {
  static const struct { const char *name; int lane; } spec[3] = {
      {"main thread", -1}, {"kiln executor", 0}, {"kiln worker 1", 1}};
  c->n_threads = 3;
  c->threads = calloc(3, sizeof *c->threads);
  for (int i = 0; i < 3; i++) {
    kiln_prof_thread_events *t = &c->threads[i];
    snprintf(t->name, sizeof t->name, "%s", spec[i].name);
    t->tid = i + 1, t->lane = spec[i].lane;
    t->ev = calloc(16, sizeof *t->ev);
  }
}

#endif
