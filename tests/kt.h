/* kt — the tiny test harness of kiln's tests. Each test program is a list
 * of KT_TEST functions run by KT_MAIN; checks record failures with file:line
 * and the program ends with the line "N passed, N failed". Exit status is
 * non-zero on any failure. */
#ifndef KILN_TESTS_KT_H
#define KILN_TESTS_KT_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int kt_failed_checks __attribute__((unused));
static int kt_cur_failed __attribute__((unused));

#define KT_FAIL(...)                                   \
  do {                                                 \
    fprintf(stderr, "  FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                      \
    fprintf(stderr, "\n");                             \
    kt_failed_checks++;                                \
    kt_cur_failed = 1;                                 \
  } while (0)
#define KT_CHECK(cond)                        \
  do {                                        \
    if (!(cond)) KT_FAIL("check failed: %s", #cond); \
  } while (0)
#define KT_CHECK_MSG(cond, ...)         \
  do {                                  \
    if (!(cond)) KT_FAIL(__VA_ARGS__);  \
  } while (0)
#define KT_EQ_INT(a, b)                                                              \
  do {                                                                               \
    long long a_ = (long long)(a), b_ = (long long)(b);                              \
    if (a_ != b_) KT_FAIL("%s == %s: %lld != %lld", #a, #b, a_, b_);                  \
  } while (0)
#define KT_NEAR(a, b, tol)                                                           \
  do {                                                                               \
    double a_ = (double)(a), b_ = (double)(b);                                       \
    if (!(fabs(a_ - b_) <= (tol))) KT_FAIL("%s ~= %s: %.9g vs %.9g (tol %g)", #a, #b, a_, b_, (double)(tol)); \
  } while (0)
#define KT_STR_CONTAINS(hay, needle)                                                 \
  do {                                                                               \
    const char *h_ = (hay);                                                          \
    if (!h_ || !strstr(h_, (needle))) KT_FAIL("\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", (needle)); \
  } while (0)

typedef struct kt_case {
  const char *name;
  void (*fn)(void);
} kt_case;

#define KT_TEST(name) static void name(void)
#define KT_MAIN(...)                                                            \
  int main(int argc, char **argv) {                                             \
    kt_case cases[] = {__VA_ARGS__};                                            \
    int n = (int)(sizeof cases / sizeof cases[0]), passed = 0, failed = 0;       \
    const char *only = argc > 1 ? argv[1] : getenv("KT_ONLY");                  \
    for (int i = 0; i < n; i++) {                                               \
      if (only && *only && !strstr(cases[i].name, only)) continue;              \
      kt_cur_failed = 0;                                                        \
      cases[i].fn();                                                            \
      if (kt_cur_failed) {                                                      \
        failed++;                                                               \
        fprintf(stderr, "[FAIL] %s\n", cases[i].name);                          \
      } else {                                                                  \
        passed++;                                                               \
        fprintf(stderr, "[ ok ] %s\n", cases[i].name);                          \
      }                                                                         \
    }                                                                           \
    printf("%d passed, %d failed\n", passed, failed);                           \
    return failed ? 1 : 0;                                                      \
  }
#define KT_CASE(fn) {#fn, fn}

#endif
