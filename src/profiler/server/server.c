/* Public profiler-server API (include/kiln/profiler_server.h): argument
 * checks, bind address, logdir and session naming, sticky errors, and
 * loading the gRPC module. The gRPC work is in grpc_server.cc, built as
 * libkiln_grpc.so; a build without gRPC (see cmake/profiler_server.cmake)
 * answers UNSUPPORTED. */
#define _GNU_SOURCE
#include "kiln/profiler_server.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/status.h"
#include "kiln/profiler.h"
#include "profiler/server/request.h"
#include "profiler/server/server.h"

/* Loading libkiln_grpc.so (server.h). Where from, in order: the file named
 * by KILN_PROFILER_SERVER_LIB, the build tree's module, the installed one.
 * The first that loads and answers with the expected ABI is kept for the
 * life of the process (a documented singleton, set under pthread_once). */
static const kiln_profsrv_ops *g_ops;
static char g_load_msg[768];
static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;

static void load_module(void) {
#ifdef KILN_GRPC_MODULE_BUILD
  static const kiln_profsrv_host host = {kiln_profsrv_serve, kiln_status_name};
  const char *cands[3] = {getenv("KILN_PROFILER_SERVER_LIB"), KILN_GRPC_MODULE_BUILD, KILN_GRPC_MODULE_INSTALLED};
  size_t n = 0;
  for (int i = 0; i < 3; i++) {
    if (!cands[i] || !*cands[i]) continue;
    void *h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
    const char *why = NULL;
    if (h) {
      kiln_profsrv_module_fn fn = (kiln_profsrv_module_fn)dlsym(h, "kiln_profsrv_module");
      const kiln_profsrv_ops *ops = fn ? fn(&host) : NULL;
      if (ops && ops->abi == KILN_PROFSRV_ABI) {
        __atomic_store_n(&g_ops, ops, __ATOMIC_RELEASE); /* the handle stays open for the process's life */
        return;
      }
      why = fn ? "it answered with another ABI" : "it has no kiln_profsrv_module";
      dlclose(h);
    } else {
      why = dlerror();
    }
    if (n < sizeof g_load_msg)
      n += (size_t)snprintf(g_load_msg + n, sizeof g_load_msg - n, "%s%s: %s", n ? "; " : "", cands[i],
                            why ? why : "cannot load");
  }
#else
  snprintf(g_load_msg, sizeof g_load_msg,
           "this kiln was built without gRPC: install libgrpc++-dev, libprotobuf-dev, protobuf-compiler and "
           "protobuf-compiler-grpc and rebuild to use the profiler server");
#endif
}

static const kiln_profsrv_ops *module(char *msg, size_t cap) {
  pthread_once(&g_load_once, load_module);
  if (!g_ops && msg && cap) snprintf(msg, cap, "the profiler server's gRPC module is not available (%s)", g_load_msg);
  return g_ops;
}

int kiln_profsrv_available(void) { return module(NULL, 0) != NULL; }

kiln_status kiln_profsrv_start(const char *addr, int *port, char *msg, size_t cap) {
  const kiln_profsrv_ops *m = module(msg, cap);
  return m ? m->start(addr, port, msg, cap) : KILN_ERR_UNSUPPORTED;
}

int kiln_profsrv_port(void) {
  /* no server can be running if the module never loaded: do not load it to say so */
  const kiln_profsrv_ops *m = __atomic_load_n(&g_ops, __ATOMIC_ACQUIRE);
  return m ? m->port() : 0;
}

void kiln_profsrv_stop(void) {
  const kiln_profsrv_ops *m = __atomic_load_n(&g_ops, __ATOMIC_ACQUIRE);
  if (m) m->stop();
}

kiln_status kiln_profsrv_call_profile(const kiln_profsrv_call *call, char *msg, size_t cap) {
  const kiln_profsrv_ops *m = module(msg, cap);
  return m ? m->call_profile(call, msg, cap) : KILN_ERR_UNSUPPORTED;
}

kiln_status kiln_profsrv_serve(const kiln_profile_request *req, char *msg, size_t cap) {
  kiln_err err = {0};
  kiln_profile_plan plan;
  kiln_status s = kiln_profile_request_check(req, &plan, &err);
  if (s == KILN_OK) s = kiln_fs_mkdirs_private(plan.session_dir, &err);
  if (s == KILN_OK) s = kiln_profiler_capture(plan.duration_ms, plan.session_dir, plan.host, &err);
  if (s != KILN_OK) snprintf(msg, cap, "%s", err.msg[0] ? err.msg : kiln_status_name(s));
  return s;
}

static kiln_status start_on(const char *addr, kiln_loc loc) {
  kiln_err err = {0};
  char host[256];
  int port = 0;
  if (kiln_profile_addr_parse(addr, host, sizeof host, &port, &err) != KILN_OK)
    return kiln_error(err.code, loc, "kiln_profiler_server_start: %s", err.msg);
  kiln_status s = kiln_profsrv_start(addr, &port, err.msg, sizeof err.msg);
  if (s != KILN_OK) return kiln_error(s, loc, "kiln_profiler_server_start: %s", err.msg);
  return KILN_OK;
}

kiln_status kiln_profiler_server_start_at(int port, kiln_loc loc) {
  if (port < 0 || port > 65535)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_profiler_server_start: port %d is outside 0..65535",
                      port);
  const char *bind = getenv("KILN_PROFILER_BIND");
  if (!bind || !*bind) bind = "127.0.0.1";
  if (strlen(bind) > 200)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "KILN_PROFILER_BIND is too long (%zu bytes)", strlen(bind));
  char addr[256];
  /* A bare IPv6 address needs brackets before the port. */
  if (strchr(bind, ':') && bind[0] != '[')
    snprintf(addr, sizeof addr, "[%s]:%d", bind, port);
  else
    snprintf(addr, sizeof addr, "%s:%d", bind, port);
  return start_on(addr, loc);
}

kiln_status kiln_profiler_server_start_addr_at(const char *addr, kiln_loc loc) {
  if (!addr) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_profiler_server_start_addr: addr is NULL");
  return start_on(addr, loc);
}

int kiln_profiler_server_port(void) { return kiln_profsrv_port(); }

void kiln_profiler_server_stop(void) { kiln_profsrv_stop(); }

kiln_status kiln_profiler_client_capture_at(const char *addr, uint32_t duration_ms, const char *logdir,
                                            char *out_dir, size_t out_cap, kiln_loc loc) {
  kiln_err err = {0};
  char host[256];
  int port = 0;
  if (out_dir && out_cap) out_dir[0] = '\0';
  if (kiln_profile_addr_parse(addr, host, sizeof host, &port, &err) != KILN_OK)
    return kiln_error(err.code, loc, "profile capture: %s", err.msg);
  if (port == 0)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "profile capture: address \"%s\" needs the server's port",
                      addr);
  if (duration_ms == 0 || duration_ms > KILN_PROFILER_MAX_DURATION_MS)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "profile capture: duration %u ms is outside 1..%u", duration_ms,
                      KILN_PROFILER_MAX_DURATION_MS);
  if (!logdir || !*logdir)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "profile capture: the log directory is empty");

  /* TensorBoard's layout: <logdir>/plugins/profile/<session>/<host>.xplane.pb.
   * The server needs an absolute path: it does not share our cwd. */
  char root[KILN_PROFILE_PATH_MAX];
  if (snprintf(root, sizeof root, "%s/plugins/profile", logdir) >= (int)sizeof root)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "profile capture: log directory path too long");
  if (kiln_fs_mkdirs_private(root, &err) != KILN_OK)
    return kiln_error(err.code, loc, "profile capture: cannot create the log directory: %s", err.msg);
  char abs_root[PATH_MAX];
  if (!realpath(root, abs_root))
    return kiln_error(KILN_ERR_IO, loc, "profile capture: cannot resolve %s", root);

  char session[32], stem[KILN_PROFILE_NAME_MAX + 1];
  kiln_profile_session_id_now(session);
  kiln_profile_host_stem(host, stem, sizeof stem);
  kiln_profsrv_call call = {
      .addr = addr, .duration_ms = duration_ms, .repository_root = abs_root, .session_id = session, .host_name = stem};
  kiln_status s = kiln_profsrv_call_profile(&call, err.msg, sizeof err.msg);
  if (s != KILN_OK) return kiln_error(s, loc, "profile capture: %s", err.msg);
  if (out_dir && out_cap) snprintf(out_dir, out_cap, "%s/%s", abs_root, session);
  return KILN_OK;
}
