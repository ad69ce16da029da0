/* The backend registry: backends are looked up by name, an unknown name is
 * an error naming the registered ones, and kiln_init goes through it. */
#include <string.h>

#include "backends/backend.h"
#include "kiln/kiln.h"
#include "kt.h"

KT_TEST(lists_and_creates_by_name) {
  int n = 0;
  const kiln_backend_entry *e = kiln_backends(&n);
  KT_EQ_INT(n, 2);
  for (int i = 0; i < n; i++) {
    kiln_backend *be = NULL;
    kiln_err err = {0};
    KT_CHECK_MSG(kiln_backend_create(e[i].name, &(kiln_backend_config){.num_threads = 1}, &be, &err) == KILN_OK,
                 "%s: %s", e[i].name, err.msg);
    KT_CHECK(be != NULL && be->vt->api_version == KILN_BACKEND_API_VERSION);
    if (be) be->vt->destroy(be);
  }
}

KT_TEST(unknown_name) {
  kiln_backend *be = (kiln_backend *)1;
  kiln_err err = {0};
  KT_EQ_INT(kiln_backend_create("tpu", &(kiln_backend_config){0}, &be, &err), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(be == NULL);
  KT_STR_CONTAINS(err.msg, "unknown backend \"tpu\" (expected cpu or ref)");
  kiln_clear_error();
  KT_EQ_INT(kiln_init(&(kiln_options){.backend = "tpu"}), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "unknown backend \"tpu\"");
  kiln_clear_error();
  KT_EQ_INT(kiln_init(&(kiln_options){.backend = "ref"}), KILN_OK);
  KT_STR_CONTAINS(kiln_backend_name(), "ref");
  kiln_shutdown();
}

KT_MAIN(KT_CASE(lists_and_creates_by_name), KT_CASE(unknown_name))
