/* The backend registry: the runtime looks a backend up by name here instead
 * of knowing each one. */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"

static const kiln_backend_entry k_backends[] = {
    {"cpu", kiln_backend_cpu_create},
    {"ref", kiln_backend_ref_create},
};

const kiln_backend_entry *kiln_backends(int *n) {
  *n = (int)(sizeof k_backends / sizeof k_backends[0]);
  return k_backends;
}

kiln_status kiln_backend_create(const char *name, const kiln_backend_config *cfg, kiln_backend **out, kiln_err *err) {
  *out = NULL;
  int n;
  const kiln_backend_entry *e = kiln_backends(&n);
  for (int i = 0; i < n; i++) {
    if (strcmp(name, e[i].name)) continue;
    kiln_status s = e[i].create(cfg, out, err);
    if (s == KILN_OK && (*out)->vt->api_version != KILN_BACKEND_API_VERSION) {
      s = kiln_err_set(err, KILN_ERR_INTERNAL, "backend %s has API version %d, expected %d", name,
                       (*out)->vt->api_version, KILN_BACKEND_API_VERSION);
      (*out)->vt->destroy(*out);
      *out = NULL;
    }
    return s;
  }
  char names[128] = "";
  for (int i = 0; i < n; i++) {
    size_t l = strlen(names);
    snprintf(names + l, sizeof names - l, "%s%s", i ? (i == n - 1 ? " or " : ", ") : "", e[i].name);
  }
  return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "unknown backend \"%s\" (expected %s)", name, names);
}
