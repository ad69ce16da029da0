/* Shared helpers of tests/unit/test_api_misuse*.c: every misuse must leave
 * the sticky status set to an error whose message names the function (and,
 * for the _at functions, the caller's file, this test), after which kiln
 * still computes a known result. */
#ifndef KILN_TESTS_MISUSE_COMMON_H
#define KILN_TESTS_MISUSE_COMMON_H

#include <kiln/kiln.h>
#include <stdio.h>
#include <string.h>

#include "kt.h"

/* sum(x * x) of x = [1, 2, 3, 4] is 30: kiln still works. */
static int misuse_sane(void) {
  float a[4] = {1, 2, 3, 4};
  int64_t sh[1] = {4};
  kiln_tensor t = kiln_from_host(a, KILN_F32, 1, sh);
  double s = kiln_item_f64(kiln_sum(kiln_mul(t, t), 0, NULL, false));
  return s == 30.0 && kiln_last_status() == KILN_OK; /* no step marker: the caller's tensors stay live */
}

/* The check after each misuse: an error, naming fn (and this file when
 * with_loc), then cleared; kiln works afterwards. */
static void misuse_expect_(const char *fn, int with_loc, const char *file, int line) {
  const char *m = kiln_last_error();
  if (kiln_last_status() == KILN_OK) {
    KT_FAIL("%s:%d: %s: no error recorded", file, line, fn);
  } else {
    /* fn: the name as kiln's messages write it, without the kiln_ prefix
     * ("backward: ..."), or alternatives separated by '|' */
    int named = 0;
    for (const char *a = fn; m && *a && !named;) {
      const char *bar = strchr(a, '|');
      size_t n = bar ? (size_t)(bar - a) : strlen(a);
      if (n > 5 && !strncmp(a, "kiln_", 5)) a += 5, n -= 5;
      char alt[64];
      snprintf(alt, sizeof alt, "%.*s", (int)n, a);
      named = strstr(m, alt) != NULL;
      a += n + (bar ? 1 : 0);
      if (!bar) break;
    }
    if (!named) KT_FAIL("%s:%d: message does not name %s: \"%s\"", file, line, fn, m ? m : "(null)");
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (with_loc && (!m || !strstr(m, base)))
      KT_FAIL("%s:%d: message of %s has no caller location: \"%s\"", file, line, fn, m ? m : "(null)");
  }
  kiln_clear_error();
  if (!misuse_sane()) KT_FAIL("%s:%d: kiln broken after misusing %s: %s", file, line, fn, kiln_last_error());
  kiln_clear_error();
}
/* An _at function: the message names fn and this file. */
#define EXPECT_ERR(fn) misuse_expect_((fn), 1, __FILE__, __LINE__)
/* A function without a location argument: the message names fn. */
#define EXPECT_ERR_NOLOC(fn) misuse_expect_((fn), 0, __FILE__, __LINE__)
/* A documented no-op: nothing recorded. */
#define EXPECT_OK()                                                                        \
  do {                                                                                     \
    if (kiln_last_status() != KILN_OK) KT_FAIL("unexpected error: %s", kiln_last_error()); \
    kiln_clear_error();                                                                    \
  } while (0)

#endif
