/* FOR_BACKENDS(b) { ... }: the block once on ref and once on the backend
 * under test ($KILN_TEST_BACKEND, default cpu), each in a fresh kiln_init;
 * g_backend names the backend for messages, and a sticky error at the end
 * of a pass fails the test. Shared by the nn tests. */
#ifndef KILN_TEST_FOR_BACKENDS_H
#define KILN_TEST_FOR_BACKENDS_H

#include <kiln/kiln.h>

#include "backend/backend_compare.h"
#include "kt.h"

static const char *g_backend;

static void begin(const char *backend) {
  kiln_shutdown();
  kiln_clear_error();
  g_backend = backend;
  KT_CHECK(kiln_init(&(kiln_options){.backend = backend}) == KILN_OK);
}
static void end(void) {
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "on %s: %s", g_backend, kiln_last_error());
  kiln_shutdown();
}
#define FOR_BACKENDS(b)                                                   \
  for (const char *bk_[2] = {"ref", bc_backend_under_test()}, **b = bk_; \
       b < bk_ + 2 && (begin(*b), 1); end(), b++)

#endif
