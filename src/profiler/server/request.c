/* ProfileRequest checks: see request.h. */
#define _GNU_SOURCE
#include "profiler/server/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "kiln/profiler_server.h"

/* Quote a received string for an error message: printable ASCII as is,
 * everything else as \xNN, at most ~60 shown bytes, so that a hostile value
 * can neither flood the log nor carry terminal escapes into it. */
static void quote(kiln_profile_str s, char *out, size_t cap) {
  size_t o = 0;
  const size_t show = 60;
  if (cap < 8) {
    if (cap) out[0] = '\0';
    return;
  }
  out[o++] = '"';
  for (size_t i = 0; i < s.len && i < show && o + 6 < cap; i++) {
    unsigned char c = (unsigned char)s.ptr[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out[o++] = (char)c;
    } else {
      o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    }
  }
  if (s.len > show && o + 5 < cap) {
    memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o++] = '"';
  out[o] = '\0';
}

static int name_byte_ok(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

/* Host names may also carry a port and IPv6 brackets: TensorBoard sends the
 * service address it was given ("localhost:6009") as host_name, and the
 * plugin lists the capture under that name. */
static int host_byte_ok(unsigned char c) { return name_byte_ok(c) || c == ':' || c == '[' || c == ']'; }

/* One file-name component from a remote peer: a restricted alphabet rather
 * than "anything but '/'", because the name lands on disk and in viewers. */
static kiln_status check_name(const char *field, kiln_profile_str s, int host, kiln_err *err) {
  char q[300];
  if (s.len == 0) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "ProfileRequest.%s is empty", field);
  if (s.len > KILN_PROFILE_NAME_MAX) {
    quote(s, q, sizeof q);
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "ProfileRequest.%s %s is %zu bytes long; at most %d allowed",
                        field, q, s.len, KILN_PROFILE_NAME_MAX);
  }
  for (size_t i = 0; i < s.len; i++) {
    unsigned char c = (unsigned char)s.ptr[i];
    if (!(host ? host_byte_ok(c) : name_byte_ok(c)) || (i == 0 && c == '.')) {
      quote(s, q, sizeof q);
      return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                          "ProfileRequest.%s %s must be one file name of letters, digits, '.', '_', '-'%s, "
                          "not starting with '.'",
                          field, q, host ? ", ':', '[' and ']'" : " and no other byte");
    }
  }
  return KILN_OK;
}

/* A relative root needs the server's working directory (cwd); one without
 * it is refused with the rule spelled out. */
static kiln_status check_root(kiln_profile_str s, const char *cwd, kiln_err *err) {
  char q[300];
  if (s.len == 0)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                        "ProfileRequest.repository_root is empty; it must name the directory to write into");
  quote(s, q, sizeof q);
  if (s.ptr[0] != '/' && !cwd)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                        "ProfileRequest.repository_root %s is not an absolute path (and this server's working "
                        "directory, which a relative one is resolved against, is unknown)",
                        q);
  for (size_t i = 0; i < s.len; i++) {
    unsigned char c = (unsigned char)s.ptr[i];
    if (c < 0x20 || c == 0x7f)
      return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                          "ProfileRequest.repository_root %s contains a control byte (0x%02x at offset %zu)", q, c, i);
  }
  /* Component by component: ".." anywhere could climb out of the directory
   * the user thinks they named (symlinks are the user's own business). */
  size_t i = 0;
  while (i < s.len) {
    while (i < s.len && s.ptr[i] == '/') i++;
    size_t start = i;
    while (i < s.len && s.ptr[i] != '/') i++;
    if (i - start == 2 && s.ptr[start] == '.' && s.ptr[start + 1] == '.')
      return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                          "ProfileRequest.repository_root %s has a \"..\" component", q);
  }
  return KILN_OK;
}

kiln_status kiln_profile_request_check(const kiln_profile_request *req, const char *cwd, kiln_profile_plan *plan,
                                       kiln_err *err) {
  if (!req || !plan) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "ProfileRequest check: NULL argument");
  memset(plan, 0, sizeof *plan);
  if (cwd && cwd[0] != '/') cwd = NULL; /* not getcwd's form: resolve nothing against it */
  /* The real server takes opts.duration_ms when set; older clients only set
   * the top-level field. Either way 0 would record nothing: refuse it. */
  uint64_t d = req->duration_ms ? req->duration_ms : req->opts_duration_ms;
  if (d == 0 || d > KILN_PROFILER_MAX_DURATION_MS)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "ProfileRequest.duration_ms %llu is outside 1..%u",
                        (unsigned long long)d, KILN_PROFILER_MAX_DURATION_MS);
  kiln_status s = check_root(req->repository_root, cwd, err);
  if (s != KILN_OK) return s;
  s = check_name("session_id", req->session_id, 0, err);
  if (s != KILN_OK) return s;
  kiln_profile_str host = req->host_name;
  if (host.len == 0) host = (kiln_profile_str){"localhost", 9};
  s = check_name("host_name", host, 1, err);
  if (s != KILN_OK) return s;

  /* Drop trailing slashes of the root ("/" stays "/"), and a leading "./"
   * of a relative one; a relative root goes below cwd ("/" is cwd's "/"). */
  kiln_profile_str root = req->repository_root;
  int relative = root.ptr[0] != '/';
  while (relative && root.len >= 2 && root.ptr[0] == '.' && root.ptr[1] == '/') {
    root.ptr += 2, root.len -= 2;
    while (root.len && root.ptr[0] == '/') root.ptr++, root.len--;
  }
  if (relative && root.len == 1 && root.ptr[0] == '.') root.len = 0; /* "." is cwd itself */
  while (root.len > 1 && root.ptr[root.len - 1] == '/') root.len--;
  const char *base = relative ? cwd : "";
  size_t bl = strlen(base);
  if (relative && bl == 1) bl = 0; /* cwd "/": "/logs", not "//logs" */
  const char *base_sep = relative && root.len ? "/" : "";
  const char *sep = (!relative && root.len == 1) ? "" : "/";
  /* The longest name written is <session_dir>/<host>.trace.json.gz (+ a
   * temp suffix): keep a margin of 64 bytes for it. */
  size_t need = bl + 1 + root.len + 1 + req->session_id.len + 1 + host.len + 64;
  if (need >= KILN_PROFILE_PATH_MAX) {
    char q[300];
    quote(req->repository_root, q, sizeof q);
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                        "ProfileRequest.repository_root %s (%zu bytes%s) is too long: the capture's paths would "
                        "exceed %d bytes",
                        q, req->repository_root.len, relative ? ", below this server's working directory" : "",
                        KILN_PROFILE_PATH_MAX);
  }
  plan->duration_ms = (uint32_t)d;
  plan->root_was_relative = relative;
  snprintf(plan->session_dir, sizeof plan->session_dir, "%.*s%s%.*s%s%.*s", (int)bl, base, base_sep,
           (int)root.len, root.ptr, sep, (int)req->session_id.len, req->session_id.ptr);
  snprintf(plan->host, sizeof plan->host, "%.*s", (int)host.len, host.ptr);
  return KILN_OK;
}

kiln_status kiln_profile_addr_parse(const char *addr, char *host, size_t host_cap, int *port, kiln_err *err) {
  if (!addr || !*addr)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "empty address: expected host:port, e.g. localhost:6009");
  const char *colon;
  const char *h = addr;
  size_t hl;
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');
    if (!close || close[1] != ':')
      return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "address \"%.200s\": expected [ipv6]:port", addr);
    h = addr + 1;
    hl = (size_t)(close - h);
    colon = close + 1;
  } else {
    colon = strrchr(addr, ':');
    if (!colon || strchr(addr, ':') != colon)
      return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                          "address \"%.200s\": expected host:port, e.g. localhost:6009", addr);
    hl = (size_t)(colon - addr);
  }
  if (hl == 0 || hl >= host_cap)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "address \"%.200s\": missing or too long host", addr);
  const char *p = colon + 1;
  char *end = NULL;
  long v = (*p >= '0' && *p <= '9') ? strtol(p, &end, 10) : -1;
  if (v < 0 || v > 65535 || !end || *end != '\0' || end - p > 5)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "address \"%.200s\": port must be a number in 0..65535",
                        addr);
  memcpy(host, h, hl);
  host[hl] = '\0';
  *port = (int)v;
  return KILN_OK;
}

void kiln_profile_host_stem(const char *host, char *out, size_t cap) {
  size_t o = 0;
  if (!host || !*host) host = "localhost";
  if (host[0] == '.' && o + 1 < cap) out[o++] = 'h';
  for (size_t i = 0; host[i] && o + 1 < cap && o < KILN_PROFILE_NAME_MAX; i++)
    out[o++] = host_byte_ok((unsigned char)host[i]) ? host[i] : '_';
  out[o] = '\0';
}

void kiln_profile_session_id_now(char out[32]) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  strftime(out, 32, "%Y_%m_%d_%H_%M_%S", &tm);
}
