/* Growable text buffers and report number formats (see text.h). */
#include "base/text.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kiln_text_printf(kiln_text *t, const char *fmt, ...) {
  if (t->failed) return;
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
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap < t->len + (size_t)n + 1) cap *= 2;
    char *p = realloc(t->p, cap);
    if (!p) {
      t->failed = 1;
      return;
    }
    t->p = p;
    t->cap = cap;
  }
}

const char *kiln_text_str(const kiln_text *t) { return t->p ? t->p : ""; }

char *kiln_text_take(kiln_text *t) {
  char *p = t->p ? t->p : strdup("");
  *t = (kiln_text){0};
  return p;
}

void kiln_text_free(kiln_text *t) {
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
