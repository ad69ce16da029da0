/* The gRPC side of the profiler server and client (grpc_server.cc), behind
 * a C interface. Public entry points are in include/kiln/profiler_server.h
 * (server.c); this header is what they, the unit test and nothing else
 * call.
 *
 * Why a separate layer: gRPC is C++ and a large dependency; keeping every
 * use of it in one file lets the rest of kiln stay C, and lets kiln build
 * without it (server.c then reports UNSUPPORTED).
 *
 * Errors are a status plus a message written to (msg, cap), never the
 * sticky status: a request from outside must not change the serving
 * program's status. Plain C types only, so that the C++ side can include
 * this header. All functions are thread-safe. */
#ifndef KILN_PROFILER_SERVER_SERVER_H
#define KILN_PROFILER_SERVER_SERVER_H

#include <stdint.h>

#include "kiln/kiln.h"
#include "profiler/server/request.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build has the gRPC server and client, else 0. */
int kiln_profsrv_available(void);

/* Start the process's single server on `addr` ("127.0.0.1:0"); the bound
 * port goes to *port. Errors: INVALID_ARGUMENT when a server already runs,
 * IO when the address cannot be bound, UNSUPPORTED without gRPC. */
kiln_status kiln_profsrv_start(const char *addr, int *port, char *msg, size_t cap);

/* The running server's port, 0 if none. */
int kiln_profsrv_port(void);

/* Stop the server (waits for requests in flight), then wait until gRPC's
 * own threads have ended (kiln_profsrv_quiesce). No-op when gRPC was never
 * used. kiln_shutdown calls it. */
void kiln_profsrv_stop(void);

/* Wait until the gRPC library has shut down and none of its threads is left
 * (executor, resolver, timer and event-engine threads, and the detached
 * thread gRPC runs its last teardown on), at most `max_ms` milliseconds.
 * Why: gRPC shuts down asynchronously after its last channel or server is
 * gone (up to ~1 s after a failed connection); a process that exits in the
 * meantime has gRPC threads starting and ending while LeakSanitizer stops
 * the world at exit, which crashes its tracer ("LeakSanitizer has
 * encountered a fatal error"). Returns 1 when gRPC is quiet (or was never
 * loaded), 0 when it still runs after max_ms: a client call in flight on
 * another thread, or another user of gRPC in this process. Only waits when
 * kiln used gRPC since the last quiet return. */
int kiln_profsrv_quiesce(uint32_t max_ms);
/* The bound kiln_profsrv_stop waits: generous, as a loaded machine slows
 * gRPC's teardown; reached only when gRPC stays up for another reason. */
#define KILN_PROFSRV_QUIESCE_MS 10000u

/* The fields of a raw ProfileRequest a client sends. Strings are
 * NUL-terminated; NULL means empty. */
typedef struct kiln_profsrv_call {
  const char *addr;            /* "localhost:6009" */
  uint64_t duration_ms;        /* ProfileRequest.duration_ms and opts.duration_ms */
  const char *repository_root; /* <logdir>/plugins/profile, absolute */
  const char *session_id;
  const char *host_name;
  uint32_t connect_timeout_ms; /* 0: 5000 */
} kiln_profsrv_call;

/* Send one Profile request and wait for the reply (deadline: duration +
 * 60 s). OK only when the server answered OK with a non-empty trace.
 * Errors: IO when the server cannot be reached or failed, INVALID_ARGUMENT
 * when it refused the request (its message follows), CORRUPT on an empty
 * trace, UNSUPPORTED without gRPC. The request is sent as given, without
 * local checks: the unit test uses this to send hostile requests. */
kiln_status kiln_profsrv_call_profile(const kiln_profsrv_call *call, char *msg, size_t cap);

/* The gRPC code is a separate shared object (libkiln_grpc.so, built from
 * grpc_server.cc) that libkiln loads with dlopen the first time a server or
 * a client is needed: programs that never start the profiler server do not
 * load gRPC and its ~60 libraries. The module exports one symbol,
 * kiln_profsrv_module, which takes the callbacks it needs from libkiln and
 * returns its operations. */
#define KILN_PROFSRV_ABI 2
typedef struct kiln_profsrv_ops {
  int abi; /* KILN_PROFSRV_ABI */
  kiln_status (*start)(const char *addr, int *port, char *msg, size_t cap);
  int (*port)(void);
  void (*stop)(void);
  kiln_status (*call_profile)(const kiln_profsrv_call *call, char *msg, size_t cap);
  int (*grpc_running)(void); /* grpc_is_initialized() (ABI 2) */
} kiln_profsrv_ops;
typedef struct kiln_profsrv_host {
  kiln_status (*serve)(const kiln_profile_request *req, char *msg, size_t cap);
  const char *(*status_name)(kiln_status s);
} kiln_profsrv_host;
typedef const kiln_profsrv_ops *(*kiln_profsrv_module_fn)(const kiln_profsrv_host *host);

/* Serve one Profile request (server.c, called by the gRPC handler): check
 * it (kiln_profile_request_check; a relative repository_root is resolved
 * against the process's working directory, and where the capture went is
 * printed on stderr), create the session directory and run
 * kiln_profiler_capture. Errors: INVALID_ARGUMENT for a bad request, those
 * of the directory or the capture otherwise (IO with the path and the
 * system's reason); the message in (msg, cap) is what the client receives. */
kiln_status kiln_profsrv_serve(const kiln_profile_request *req, char *msg, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
