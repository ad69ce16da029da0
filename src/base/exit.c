/* Draining the workers at process exit (exit.h). */
#include "base/exit.h"

#include <stdlib.h>

static void (*g_drain)(void);
static int g_armed;

#define MAX_ARMED 8

static void exit_drain(void) {
  void (*fn)(void) = __atomic_load_n(&g_drain, __ATOMIC_ACQUIRE);
  if (fn) fn();
}

void kiln_exit_drain_now(void) { exit_drain(); }

void kiln_exit_drain_set(void (*fn)(void)) { __atomic_store_n(&g_drain, fn, __ATOMIC_RELEASE); }

void kiln_exit_drain_arm(void) {
  if (__atomic_fetch_add(&g_armed, 1, __ATOMIC_RELAXED) < MAX_ARMED) atexit(exit_drain);
}
