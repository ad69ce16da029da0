/* Internal error handling: the sticky status and context on the way up. */
#ifndef KILN_BASE_STATUS_H
#define KILN_BASE_STATUS_H

#include <stdarg.h>

#include "base/config.h" /* kiln_cfg(): most code that reports errors reads a setting too */
#include "kiln/kiln.h"

/* Record an error in the sticky status (only the first one sticks; later
 * ones are logged at debug level). Returns s. Thread-safe. */
kiln_status kiln_error(kiln_status s, kiln_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Build a detailed message for an internal status without making it sticky:
 * the caller decides. Messages are bounded (truncated at 1 KiB). */
typedef struct kiln_err {
  kiln_status code;
  char msg[1024];
} kiln_err;
kiln_status kiln_err_set(kiln_err *e, kiln_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepend context: "while compiling X: <old message>". */
void kiln_err_context(kiln_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* First statement of a public constructor kiln_<type>_create(..., T **out,
 * loc): refuses a NULL out (INVALID_ARGUMENT naming `op`), else sets *out
 * to NULL so that every error return leaves it NULL. */
#define KILN_CREATE_BEGIN(out, loc, op)                                                          \
  do {                                                                                         \
    if (!(out)) return kiln_error(KILN_ERR_INVALID_ARGUMENT, (loc), "%s: out is NULL", (op)); \
    *(out) = NULL;                                                                             \
  } while (0)

#define KILN_RETURN_IF_ERROR(err, expr, ...)        \
  do {                                              \
    kiln_status s__ = (expr);                       \
    if (s__ != KILN_OK) {                           \
      kiln_err_context((err), __VA_ARGS__);         \
      return s__;                                   \
    }                                               \
  } while (0)

/* KILN_ASSERT(cond): an invariant of kiln's own code, never anything a
 * caller can cause (a caller's mistake is an error status and a poisoned
 * tensor, never an assertion). A failure prints "kiln: internal error at
 * <file>:<line>: <cond> (this is a kiln bug)" to stderr and aborts, in
 * every build type: the code after the check would read or write memory on
 * the broken assumption, a wrong value at best, so release builds keep it.
 * Used on compile and setup paths, not in per-step or per-element loops, so
 * it costs nothing measurable. (docs/architecture.md, "Errors".) */
#define KILN_ASSERT(cond)                                                          \
  do {                                                                             \
    if (!(cond)) kiln_internal_abort(__FILE__, __LINE__, #cond);                   \
  } while (0)
_Noreturn void kiln_internal_abort(const char *file, int line, const char *what);

#endif
