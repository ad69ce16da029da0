/* Growable text buffers and report number formats (see text.h). */
#include "base/text.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kiln_text kiln_text_on(char *buf, size_t cap) {
  if (cap) buf[0] = 0;
  return (kiln_text){.p = cap ? buf : NULL, .cap = cap, .fixed = 1};
}

/* Room for len + n + 1 bytes in a growable text; 0 and failed when out of
 * memory. */
static int reserve(kiln_text *t, size_t n) {
  if (t->len + n < t->cap) return 1;
  size_t cap = t->cap ? t->cap * 2 : 4096;
  while (cap < t->len + n + 1) cap *= 2;
  char *p = realloc(t->p, cap);
  if (!p) {
    t->failed = 1;
    return 0;
  }
  t->p = p;
  t->cap = cap;
  return 1;
}

static void fixed_vprintf(kiln_text *t, const char *fmt, va_list ap) {
  size_t room = t->len < t->cap ? t->cap - t->len : 0;
  int n = vsnprintf(room ? t->p + t->len : NULL, room, fmt, ap);
  if (n > 0) t->len += (size_t)n;
}

void kiln_text_printf(kiln_text *t, const char *fmt, ...) {
  if (t->failed) return;
  if (t->fixed) {
    va_list ap;
    va_start(ap, fmt);
    fixed_vprintf(t, fmt, ap);
    va_end(ap);
    return;
  }
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->cap - t->len;
    int n = vsnprintf(t->p ? t->p + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if ((size_t)n < room) {
      t->len += (size_t)n;
      return;
    }
    if (!reserve(t, (size_t)n)) return;
  }
}

void kiln_text_append(kiln_text *t, const char *s, size_t n) {
  if (t->failed) return;
  if (t->fixed) {
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    if (room) {
      size_t k = n < room - 1 ? n : room - 1;
      memcpy(t->p + t->len, s, k);
      t->p[t->len + k] = 0;
    }
    t->len += n;
    return;
  }
  if (!reserve(t, n)) return;
  if (n) memcpy(t->p + t->len, s, n);
  t->len += n;
  t->p[t->len] = 0;
}

void kiln_text_json_str(kiln_text *t, const char *s) {
  static const char hex[] = "0123456789abcdef";
  kiln_text_append(t, "\"", 1);
  const char *run = s ? s : "";
  for (const char *c = run; *c; c++) {
    unsigned char u = (unsigned char)*c;
    if (u != '"' && u != '\\' && u >= 0x20) continue;
    kiln_text_append(t, run, (size_t)(c - run));
    if (u < 0x20) {
      char esc[6] = {'\\', 'u', '0', '0', hex[u >> 4], hex[u & 15]};
      kiln_text_append(t, esc, 6);
    } else {
      char esc[2] = {'\\', (char)u};
      kiln_text_append(t, esc, 2);
    }
    run = c + 1;
  }
  kiln_text_append(t, run, strlen(run));
  kiln_text_append(t, "\"", 1);
}

const char *kiln_text_str(const kiln_text *t) { return t->p ? t->p : ""; }

char *kiln_text_take(kiln_text *t) {
  char *p = t->p && !t->fixed ? t->p : strdup(kiln_text_str(t));
  if (t->fixed)
    *t = kiln_text_on(t->p, t->cap);
  else
    *t = (kiln_text){0};
  return p;
}

void kiln_text_free(kiln_text *t) {
  if (t->fixed) {
    *t = kiln_text_on(t->p, t->cap);
    return;
  }
  free(t->p);
  *t = (kiln_text){0};
}

void kiln_text_duration_xla(kiln_text *t, double ns) {
  if (ns < 0) {
    kiln_text_printf(t, "-");
    ns = -ns;
  }
  if (!isfinite(ns)) {
    kiln_text_printf(t, "inf");
    return;
  }
  uint64_t total_us = (uint64_t)(ns / 1000.0);
  double us_frac = (ns - (double)total_us * 1000.0) / 1000.0; /* [0, 1) */
  if (us_frac < 0) us_frac = 0;
  uint64_t us = total_us % 1000, ms = (total_us / 1000) % 1000, sec = (total_us / 1000000) % 60;
  uint64_t min = (total_us / 60000000) % 60, hours = total_us / 3600000000ull;
  int lead = 0;
  if (hours) kiln_text_printf(t, "%lluh", (unsigned long long)hours), lead = 1;
  if (lead || min) kiln_text_printf(t, lead ? "%02llum" : "%llum", (unsigned long long)min), lead = 1;
  if (lead || sec) kiln_text_printf(t, lead ? "%02llus" : "%llus", (unsigned long long)sec), lead = 1;
  if (lead || ms) kiln_text_printf(t, lead ? "%03llums" : "%llums", (unsigned long long)ms), lead = 1;
  /* Rounding the fraction to 3 digits may carry into the integer microseconds. */
  double us_val = (double)us + us_frac;
  if (us_val > 999.9995) us_val = 999.999;
  kiln_text_printf(t, lead ? "%07.3fus" : "%.3fus", us_val);
}

const char *kiln_fmt_duration(double ns, char *buf, size_t cap) {
  if (!isfinite(ns) || ns < 0) ns = 0;
  if (ns < 1e3)
    snprintf(buf, cap, "%.0fns", ns);
  else if (ns < 1e6)
    snprintf(buf, cap, "%.1fus", ns / 1e3);
  else if (ns < 1e9)
    snprintf(buf, cap, "%.1fms", ns / 1e6);
  else
    snprintf(buf, cap, "%.2fs", ns / 1e9);
  return buf;
}

const char *kiln_fmt_bytes(double bytes, char *buf, size_t cap) {
  if (!isfinite(bytes) || bytes < 0) bytes = 0;
  if (bytes < 1024)
    snprintf(buf, cap, "%.0fB", bytes);
  else if (bytes < 1024.0 * 1024)
    snprintf(buf, cap, "%.1fKB", bytes / 1024);
  else if (bytes < 1024.0 * 1024 * 1024)
    snprintf(buf, cap, "%.2fMB", bytes / (1024.0 * 1024));
  else
    snprintf(buf, cap, "%.2fGB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

const char *kiln_fmt_file(const char *path) {
  if (!path) return "?";
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}
