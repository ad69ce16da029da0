/* libFuzzer harness for the profiler server's request handling
 * (src/profiler/server/request.c). Two ways in, picked by the first byte:
 *   even: the rest is a serialized tensorflow.ProfileRequest, decoded with
 *         protobuf-c from kiln's own proto/profiler_service.proto (what a
 *         peer sends), then checked;
 *   odd:  the rest is split at 0xff bytes into root, session and host, so
 *         that strings may hold any byte, NUL included (protobuf strings can).
 * The second bit picks the server's working directory: a fixed one (relative
 * roots are resolved against it) or none (relative roots are refused).
 * Properties, for any input:
 *   1. no crash, no read outside the input (ASan/UBSan);
 *   2. an accepted request yields a duration in 1..600000, a session_dir
 *      that is absolute (below the working directory when the root was
 *      relative), ends with "/<session_id>", has no ".." component
 *      and no byte below 0x20, a session of [A-Za-z0-9._-] and a host of
 *      [A-Za-z0-9._:[]-] only;
 *   3. a refusal is INVALID_ARGUMENT with a non-empty message of printable
 *      ASCII only (hostile bytes are escaped before they reach a log);
 *   4. the address parser never accepts a port outside 0..65535.
 *
 * Build: scripts/fuzz.sh (needs protobuf-c-compiler, libprotobuf-c-dev)
 * Run:   build-fuzz/bin/fuzz/fuzz_profile_request -max_total_time=60 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "profiler/server/request.h"
#include "profiler_service.pb-c.h"

static int name_ok(const char *s, int host) {
  if (!*s || *s == '.') return 0;
  for (; *s; s++) {
    char c = *s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-' || (host && (c == ':' || c == '[' || c == ']'))))
      return 0;
  }
  return 1;
}

#define FUZZ_CWD "/srv/kiln-fuzz"

static void check_one(const kiln_profile_request *r, const char *cwd) {
  kiln_profile_plan plan;
  kiln_err err = {0};
  kiln_status s = kiln_profile_request_check(r, cwd, &plan, &err);
  if (s == KILN_OK) {
    if (plan.duration_ms < 1 || plan.duration_ms > 600000) abort();
    const char *d = plan.session_dir;
    size_t n = strlen(d);
    if (d[0] != '/') abort();
    if (plan.root_was_relative != (r->repository_root.ptr[0] != '/')) abort();
    if (plan.root_was_relative && (!cwd || strncmp(d, FUZZ_CWD "/", sizeof FUZZ_CWD))) abort();
    for (size_t i = 0; i < n; i++)
      if ((unsigned char)d[i] < 0x20) abort();
    for (const char *p = d; (p = strstr(p, "/..")) != NULL; p++)
      if (p[3] == '/' || p[3] == '\0') abort();
    const char *last = strrchr(d, '/');
    if (r->session_id.len != strlen(last + 1) || memcmp(last + 1, r->session_id.ptr, r->session_id.len)) abort();
    if (!name_ok(plan.host, 1) || !name_ok(last + 1, 0)) abort();
  } else {
    if (s != KILN_ERR_INVALID_ARGUMENT || !err.msg[0]) abort();
    for (const char *p = err.msg; *p; p++)
      if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) abort();
  }
}

static kiln_profile_str str_of(const char *s) { return (kiln_profile_str){s, s ? strlen(s) : 0}; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *cwd = (data[0] & 2) ? FUZZ_CWD : NULL;
  /* An exact-size copy, so any over-read hits ASan's redzone. */
  size_t n = size - 1;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return 0;
  if (n) memcpy(buf, data + 1, n);
  if ((data[0] & 1) == 0) {
    Tensorflow__ProfileRequest *m = tensorflow__profile_request__unpack(NULL, n, buf);
    if (m) {
      kiln_profile_request r = {.duration_ms = m->duration_ms,
                                .opts_duration_ms = m->opts ? m->opts->duration_ms : 0,
                                .repository_root = str_of(m->repository_root),
                                .session_id = str_of(m->session_id),
                                .host_name = str_of(m->host_name)};
      check_one(&r, cwd);
      tensorflow__profile_request__free_unpacked(m, NULL);
    }
  } else {
    kiln_profile_str part[3] = {{0}};
    size_t start = 0, k = 0;
    for (size_t i = 0; i <= n && k < 3; i++) {
      if (i == n || buf[i] == 0xff) {
        part[k++] = (kiln_profile_str){(const char *)buf + start, i - start};
        start = i + 1;
      }
    }
    uint64_t dur = n ? (uint64_t)buf[0] * 4099u : 0;
    kiln_profile_request r = {.duration_ms = dur, .repository_root = part[0], .session_id = part[1],
                              .host_name = part[2]};
    check_one(&r, cwd);
  }
  /* The address parser on the same bytes as a C string. */
  char addr[300];
  size_t an = n < sizeof addr - 1 ? n : sizeof addr - 1;
  memcpy(addr, buf, an);
  addr[an] = '\0';
  char host[256];
  int port = -1;
  kiln_err err = {0};
  if (kiln_profile_addr_parse(addr, host, sizeof host, &port, &err) == KILN_OK && (port < 0 || port > 65535))
    abort();
  free(buf);
  return 0;
}
