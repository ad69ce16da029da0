/* Rank-prefixed output lines (log.h). */
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"

/* Set once (g_once) from the launcher's variables: the process's identity,
 * which never changes while it runs. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_rank, g_world = 1;
static char g_prefix[32];

static long parse_nonneg(const char *s, long dflt) {
  if (!s || !*s) return dflt;
  char *end;
  long v = strtol(s, &end, 10);
  return *end || v < 0 || v >= (1L << 30) ? dflt : v;
}

static void load_rank(void) {
  const kiln_config *c = kiln_cfg();
  const char *size = c->ompi_world_size ? c->ompi_world_size : c->pmi_size;
  const char *rank = c->ompi_world_rank ? c->ompi_world_rank : c->pmi_rank ? c->pmi_rank : c->pmix_rank;
  long w = parse_nonneg(size, rank ? -1 : 1), r = parse_nonneg(rank, 0);
  if (w == 0) w = 1;
  g_world = (int)w;
  g_rank = w == 1 ? 0 : (int)r;
  if (w != 1) snprintf(g_prefix, sizeof g_prefix, "[rank %d] ", g_rank);
}

int kiln_log_rank(int *world) {
  pthread_once(&g_once, load_rank);
  if (world) *world = g_world;
  return g_rank;
}

const char *kiln_log_prefix(void) {
  pthread_once(&g_once, load_rank);
  return g_prefix;
}

void kiln_log_puts(FILE *f, const char *text) {
  const char *pre = kiln_log_prefix();
  if (!*pre) {
    fputs(text, f);
    return;
  }
  /* one buffer, one write: the lines of two threads stay whole */
  size_t n = strlen(text), lines = 1, pl = strlen(pre);
  for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
  char *buf = malloc(n + lines * pl + 1);
  if (!buf) {
    fputs(text, f);
    return;
  }
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || text[i - 1] == '\n') memcpy(buf + o, pre, pl), o += pl;
    buf[o++] = text[i];
  }
  buf[o] = 0;
  fputs(buf, f);
  free(buf);
}

void kiln_log_printf(FILE *f, const char *fmt, ...) {
  char small[1024], *p = small;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof small && (p = malloc((size_t)n + 1)) != NULL) {
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
  } else if (!p) {
    p = small; /* out of memory: the truncated line */
  }
  kiln_log_puts(f, p);
  if (p != small) free(p);
}
