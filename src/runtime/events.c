/* The observer registry of runtime/events.h, and the text of a cut's cause. */
#include "runtime/events.h"

#include <pthread.h>
#include <stdio.h>

#include "base/text.h"

#define KILN_EVENTS_MAX 16

static struct {
  pthread_mutex_t mu;
  kiln_event_fn fn[KILN_EVENTS_MAX];
  void *ctx[KILN_EVENTS_MAX];
} g_obs = {.mu = PTHREAD_MUTEX_INITIALIZER};
int kiln_events_n_;

int kiln_events_observe(kiln_event_fn fn, void *ctx) {
  int r = 0;
  pthread_mutex_lock(&g_obs.mu);
  int n = __atomic_load_n(&kiln_events_n_, __ATOMIC_RELAXED), i;
  for (i = 0; i < n; i++)
    if (g_obs.fn[i] == fn && g_obs.ctx[i] == ctx) break;
  if (i == n) {
    if (n == KILN_EVENTS_MAX) {
      r = -1;
    } else {
      g_obs.fn[n] = fn;
      g_obs.ctx[n] = ctx;
      __atomic_store_n(&kiln_events_n_, n + 1, __ATOMIC_RELEASE); /* publish after the entry */
    }
  }
  pthread_mutex_unlock(&g_obs.mu);
  return r;
}

void kiln_events_emit_(const kiln_event *ev) {
  /* entries are never removed: the first n are complete */
  int n = __atomic_load_n(&kiln_events_n_, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) g_obs.fn[i](g_obs.ctx[i], ev);
}

static const char *const g_reason_names[KILN_CUT_REASON_COUNT] = {"step marker", "value read", "data-dependent op",
                                                                    "explicit compile"};

const char *kiln_cut_cause_str(const kiln_cut_cause *c, char *buf, size_t cap) {
  const char *r = (unsigned)c->why < KILN_CUT_REASON_COUNT ? g_reason_names[c->why] : "cut";
  if (c->api)
    snprintf(buf, cap, "%s at %s:%d (%s)", r, kiln_fmt_file(c->loc.file), c->loc.line, c->api);
  else
    snprintf(buf, cap, "%s at %s:%d", r, kiln_fmt_file(c->loc.file), c->loc.line);
  return buf;
}
