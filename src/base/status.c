#include "base/status.h"

#include "base/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sticky status: the one documented piece of runtime-wide error state. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static kiln_status g_status = KILN_OK;
static char g_msg[2048];

static const char *const k_names[] = {
    [KILN_OK] = "OK",
    [KILN_ERR_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
    [KILN_ERR_STALE_HANDLE] = "STALE_HANDLE",
    [KILN_ERR_OUT_OF_MEMORY] = "OUT_OF_MEMORY",
    [KILN_ERR_IO] = "IO",
    [KILN_ERR_COMPILE] = "COMPILE",
    [KILN_ERR_UNSAFE] = "UNSAFE",
    [KILN_ERR_CORRUPT] = "CORRUPT",
    [KILN_ERR_UNSUPPORTED] = "UNSUPPORTED",
    [KILN_ERR_INTERNAL] = "INTERNAL",
    [KILN_ERR_GRAPH_CUT] = "GRAPH_CUT",
};

const char *kiln_status_name(kiln_status s) {
  if ((unsigned)s < sizeof k_names / sizeof k_names[0] && k_names[s]) return k_names[s];
  return "UNKNOWN";
}

kiln_status kiln_error(kiln_status s, kiln_loc loc, const char *fmt, ...) {
  if (s == KILN_OK) return s;
  char body[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_mu);
  if (g_status == KILN_OK) {
    g_status = s;
    if (loc.file)
      snprintf(g_msg, sizeof g_msg, "%s:%d: %s: %s", loc.file, loc.line, kiln_status_name(s), body);
    else
      snprintf(g_msg, sizeof g_msg, "%s: %s", kiln_status_name(s), body);
  }
  pthread_mutex_unlock(&g_mu);
  if (kiln_cfg()->log_errors) kiln_log_printf(stderr, "kiln: %s:%d: %s\n", loc.file ? loc.file : "?", loc.line, body);
  return s;
}

kiln_status kiln_last_status(void) {
  pthread_mutex_lock(&g_mu);
  kiln_status s = g_status;
  pthread_mutex_unlock(&g_mu);
  return s;
}

const char *kiln_last_error(void) { return g_msg; }

void kiln_clear_error(void) {
  pthread_mutex_lock(&g_mu);
  g_status = KILN_OK;
  g_msg[0] = 0;
  pthread_mutex_unlock(&g_mu);
}

kiln_status kiln_err_set(kiln_err *e, kiln_status s, const char *fmt, ...) {
  if (!e) return s;
  e->code = s;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return s;
}

void kiln_err_context(kiln_err *e, const char *fmt, ...) {
  if (!e) return;
  char ctx[512], old[sizeof e->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
  memcpy(old, e->msg, sizeof old);
  /* context first, then as much of the old message as fits */
  size_t n = strlen(ctx);
  if (n > sizeof e->msg - 3) n = sizeof e->msg - 3;
  memcpy(e->msg, ctx, n);
  e->msg[n] = ':';
  e->msg[n + 1] = ' ';
  size_t rest = sizeof e->msg - n - 3;
  size_t ol = strnlen(old, sizeof old);
  if (ol > rest) ol = rest;
  memcpy(e->msg + n + 2, old, ol);
  e->msg[n + 2 + ol] = 0;
}

_Noreturn void kiln_internal_abort(const char *file, int line, const char *what) {
  kiln_log_printf(stderr, "kiln: internal error at %s:%d: %s (this is a kiln bug)\n", file, line, what);
  abort();
}
