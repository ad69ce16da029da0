/* Checking a ProfileRequest before the profiler server acts on it.
 *
 * Why in C and apart from the gRPC code: these checks are what stands
 * between a remote peer and the file system, so they are plain functions
 * over plain (pointer, length) strings that the unit test and the fuzz
 * harness (tests/fuzz/fuzz_profile_request.c) drive directly. Strings are
 * not NUL-terminated and may contain any byte, as protobuf strings on the
 * wire can.
 *
 * All functions are pure (no I/O, no global state) and thread-safe. */
#ifndef KILN_PROFILER_SERVER_REQUEST_H
#define KILN_PROFILER_SERVER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Defined in src/base/status.h; declared here so that the gRPC code (C++)
 * can include this header for the request struct. */
typedef struct kiln_err kiln_err;

/* Longest path the server builds: <root>/<session>/<host>.xplane.pb. */
#define KILN_PROFILE_PATH_MAX 4096
/* Longest session_id / host_name (one file-name component). */
#define KILN_PROFILE_NAME_MAX 128

/* A string as received: `len` bytes at `ptr` (ptr may be NULL when len is 0). */
typedef struct kiln_profile_str {
  const char *ptr;
  size_t len;
} kiln_profile_str;

/* The fields of tensorflow.ProfileRequest the server uses. */
typedef struct kiln_profile_request {
  uint64_t duration_ms;      /* ProfileRequest.duration_ms */
  uint64_t opts_duration_ms; /* ProfileRequest.opts.duration_ms: used when the former is 0 */
  kiln_profile_str repository_root;
  kiln_profile_str session_id;
  kiln_profile_str host_name; /* empty: "localhost" */
} kiln_profile_request;

/* What a valid request asks for, as NUL-terminated strings. */
typedef struct kiln_profile_plan {
  uint32_t duration_ms;                     /* 1..KILN_PROFILER_MAX_DURATION_MS */
  char session_dir[KILN_PROFILE_PATH_MAX];  /* <root>/<session_id>, absolute, no trailing '/' */
  char host[KILN_PROFILE_NAME_MAX + 1];     /* file name stem */
  int root_was_relative;                    /* repository_root was resolved against `cwd` */
} kiln_profile_plan;

/* Check `req` and fill `plan`. Rules: the duration (duration_ms, else
 * opts_duration_ms) is in 1..600000; repository_root has no NUL or control
 * byte and no ".." component, and is absolute or, when `cwd` is given,
 * relative: then it is resolved against `cwd` (the serving process's
 * working directory, as TensorFlow's own profiler server does: TensorBoard
 * sends its --logdir as it was typed, "logs/plugins/profile"); session_id
 * is 1..128 bytes of [A-Za-z0-9._-] and host_name 1..128 bytes of
 * [A-Za-z0-9._:[]-] (TensorBoard sends "host:port"), neither starting with
 * '.' (host_name may be empty: "localhost"); the longest file path built
 * from them fits in KILN_PROFILE_PATH_MAX. `cwd` is the server's, never the
 * peer's: an absolute path without a trailing '/' (getcwd's form), or NULL
 * to refuse relative roots. Errors: KILN_ERR_INVALID_ARGUMENT with a
 * message naming the field and the rule (the offending value is quoted with
 * non-printable bytes escaped and long values shortened). */
kiln_status kiln_profile_request_check(const kiln_profile_request *req, const char *cwd, kiln_profile_plan *plan,
                                       kiln_err *err);

/* Split "host:port" / "[v6]:port" into host (without brackets) and port
 * (0..65535; 0 means "any free port" to a server, nothing to a client). Errors: KILN_ERR_INVALID_ARGUMENT naming `addr`. */
kiln_status kiln_profile_addr_parse(const char *addr, char *host, size_t host_cap, int *port, kiln_err *err);

/* The file-name-safe form of a host name for the capture's file stem
 * (bytes outside [A-Za-z0-9._:[]-] become '_'; a leading '.' gets a
 * prefix; empty becomes "localhost"). Always NUL-terminates `out` (cap >= 2). */
void kiln_profile_host_stem(const char *host, char *out, size_t cap);

/* Session id for a capture that starts now, in local time:
 * "YYYY_MM_DD_HH_MM_SS", the format TensorBoard lists runs by. */
void kiln_profile_session_id_now(char out[32]);

#ifdef __cplusplus
}
#endif
#endif
