/* Public profiler-server API (include/kiln/profiler_server.h): argument
 * checks, bind address, logdir and session naming, sticky errors, and
 * loading the gRPC module. The gRPC work is in grpc_server.cc, built as
 * libkiln_grpc.so; a build without gRPC (see cmake/profiler_server.cmake)
 * answers UNSUPPORTED. */
#define _GNU_SOURCE
#include "kiln/profiler_server.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/status.h"
#include "kiln/profiler.h"
#include "profiler/capture.h"
#include "profiler/server/request.h"
#include "profiler/server/server.h"

/* Loading libkiln_grpc.so (server.h). Where from, in order: the file named
 * by KILN_PROFILER_SERVER_LIB, the one installed beside this code (below),
 * the build tree's module, the one in the configured install prefix. The
 * first that loads and answers with the expected ABI is kept for the life
 * of the process (a documented singleton, set under pthread_once). */
static const kiln_profsrv_ops *g_ops;
static char g_load_msg[1024];
static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;

#ifdef KILN_GRPC_MODULE_FROM_LIB
/* The module of the install this code was loaded from, wherever that
 * install now lies (moved, or made with `cmake --install --prefix P`):
 * <libdir>/kiln/libkiln_grpc.so beside libkiln.so, or, for a program
 * linked with libkiln.a that lies in a directory named like <bindir>
 * (the kiln command), <prefix>/<libdir>/kiln from there. The directory
 * that holds kiln's own code is trusted as much as that code. */
static int module_beside_me(char *out, size_t cap) {
  Dl_info info;
  char self[PATH_MAX];
  const char *from = KILN_GRPC_MODULE_FROM_LIB;
  int in_program = 0;
  if (dladdr((void *)kiln_profsrv_serve, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
      strstr(info.dli_fname, "/libkiln.so")) {
    snprintf(self, sizeof self, "%s", info.dli_fname);
  } else { /* linked into the program: dladdr would name argv[0] */
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 0;
    self[len] = '\0';
    from = KILN_GRPC_MODULE_FROM_BIN;
    in_program = 1;
  }
  char *slash = strrchr(self, '/');
  if (!slash || slash == self) return 0;
  *slash = '\0';
  if (in_program) { /* only from a <bindir> */
    const char *dir = strrchr(self, '/');
    if (!dir || strcmp(dir + 1, KILN_GRPC_BINDIR_NAME)) return 0;
  }
  return snprintf(out, cap, "%s/%s", self, from) < (int)cap;
}
#endif

static void load_module(void) {
#ifdef KILN_GRPC_MODULE_BUILD
  static const kiln_profsrv_host host = {kiln_profsrv_serve, kiln_status_name};
  static char beside[PATH_MAX];
#ifdef KILN_GRPC_MODULE_FROM_LIB
  if (!module_beside_me(beside, sizeof beside)) beside[0] = '\0';
#endif
  const char *cands[4] = {kiln_cfg()->profiler_server_lib, beside, KILN_GRPC_MODULE_BUILD,
                          KILN_GRPC_MODULE_INSTALLED};
  size_t n = 0;
  for (int i = 0; i < 4; i++) {
    if (i == 1 && access(cands[i], F_OK) != 0) continue; /* a guess, not an install: not worth a message */
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

/* Counts kiln's servers and client calls since kiln_profsrv_quiesce last
 * found gRPC quiet: a program that never used gRPC, or whose gRPC is
 * already down, does not wait at kiln_shutdown. */
static unsigned g_grpc_used;

kiln_status kiln_profsrv_start(const char *addr, int *port, char *msg, size_t cap) {
  const kiln_profsrv_ops *m = module(msg, cap);
  if (!m) return KILN_ERR_UNSUPPORTED;
  __atomic_add_fetch(&g_grpc_used, 1, __ATOMIC_RELAXED);
  return m->start(addr, port, msg, cap);
}

int kiln_profsrv_port(void) {
  /* no server can be running if the module never loaded: do not load it to say so */
  const kiln_profsrv_ops *m = __atomic_load_n(&g_ops, __ATOMIC_ACQUIRE);
  return m ? m->port() : 0;
}

/* gRPC names its threads (pthread_setname_np, cut to 15 bytes): those of
 * gRPC 1.51, Debian 12's. "grpc_shutdown" is the detached thread that runs
 * gRPC's teardown when its last reference is dropped on one of its own
 * threads; the event-engine threads are detached too. A name missing here
 * (another gRPC version) only shortens the wait. */
static const char *const k_grpc_thread_names[] = {"grpc_shutdown",   "event_engine",    "timer_manager",
                                                  "default-executo", "resolver-execut", "grpc_global_tim",
                                                  "grpcpp_sync_ser"};

/* 1 while a thread with one of gRPC's names is in this process. A detached
 * thread leaves /proc/self/task only once it is completely gone. */
static int grpc_threads_alive(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0; /* no /proc: nothing to wait on */
  int alive = 0;
  struct dirent *e;
  while (!alive && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[64], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", e->d_name);
    FILE *f = fopen(path, "re");
    if (!f) continue; /* that thread just ended */
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
    for (size_t i = 0; i < sizeof k_grpc_thread_names / sizeof *k_grpc_thread_names; i++)
      if (!strcmp(comm, k_grpc_thread_names[i])) alive = 1;
  }
  closedir(d);
  return alive;
}

static uint64_t now_ms(void) { return kiln_now_ns() / 1000000u; }

int kiln_profsrv_quiesce(uint32_t max_ms) {
  const kiln_profsrv_ops *m = __atomic_load_n(&g_ops, __ATOMIC_ACQUIRE);
  unsigned used = __atomic_load_n(&g_grpc_used, __ATOMIC_RELAXED);
  if (!m || !used) return 1;
  /* gRPC gives no notice when its asynchronous teardown ends: poll, first
   * the library's state, then its (detached) threads' exit. 2 ms steps:
   * the usual wait is zero or one reconnect backoff (~1 s). */
  uint64_t deadline = now_ms() + max_ms;
  int quiet = 0;
  for (;;) {
    quiet = !m->grpc_running() && !grpc_threads_alive();
    if (quiet || now_ms() >= deadline) break;
    nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
  }
  if (quiet) {
    /* a server or call started meanwhile (another thread) keeps the count */
    __atomic_compare_exchange_n(&g_grpc_used, &used, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  } else {
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
      fprintf(stderr,
              "kiln profiler server: gRPC is still running %u ms after the server stopped (a profile capture in "
              "flight on another thread, or another user of gRPC in this process); not waiting for it\n",
              max_ms);
  }
  return quiet;
}

void kiln_profsrv_stop(void) {
  const kiln_profsrv_ops *m = __atomic_load_n(&g_ops, __ATOMIC_ACQUIRE);
  if (!m) return;
  m->stop();
  kiln_profsrv_quiesce(KILN_PROFSRV_QUIESCE_MS);
}

kiln_status kiln_profsrv_call_profile(const kiln_profsrv_call *call, char *msg, size_t cap) {
  const kiln_profsrv_ops *m = module(msg, cap);
  if (!m) return KILN_ERR_UNSUPPORTED;
  __atomic_add_fetch(&g_grpc_used, 1, __ATOMIC_RELAXED);
  return m->call_profile(call, msg, cap);
}

kiln_status kiln_profsrv_serve(const kiln_profile_request *req, char *msg, size_t cap) {
  kiln_err err = {0};
  kiln_profile_plan plan;
  /* A relative repository_root (TensorBoard's --logdir as typed) resolves
   * against this process's working directory now, like TensorFlow's server. */
  char cwd[PATH_MAX];
  const char *base = getcwd(cwd, sizeof cwd);
  kiln_status s = kiln_profile_request_check(req, base, &plan, &err);
  if (s == KILN_OK) s = kiln_fs_mkdirs_private(plan.session_dir, &err);
  if (s == KILN_OK) s = kiln_prof_timed_capture(plan.duration_ms, plan.session_dir, plan.host, &err);
  if (s != KILN_OK) {
    snprintf(msg, cap, "%s", err.msg[0] ? err.msg : kiln_status_name(s));
    return s;
  }
  /* Where a relative root went is worth a line: a viewer started in another
   * directory looks elsewhere (the peer sees only "OK"). */
  if (plan.root_was_relative)
    fprintf(stderr,
            "kiln profiler server: capture written to %s (the request's repository_root was relative: resolved "
            "against this program's working directory)\n",
            plan.session_dir);
  return KILN_OK;
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
  /* In a distributed job every rank serves: rank R on port + R, so that
   * `kiln profile capture --ranks N` (or TensorBoard given the N addresses)
   * reaches them all. */
  int rank, world;
  kiln_prof_world(&rank, &world);
  if (port != 0 && world > 1) {
    if (port + rank > 65535)
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                        "kiln_profiler_server_start: rank %d of %d would serve on port %d + %d, beyond 65535", rank,
                        world, port, rank);
    port += rank;
  }
  const char *bind = kiln_cfg()->profiler_bind;
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

bool kiln_profiler_client_addr_valid(const char *addr) {
  kiln_err err = {0};
  char host[256];
  int port = 0;
  return kiln_profile_addr_parse(addr, host, sizeof host, &port, &err) == KILN_OK && port != 0;
}

/* One address's capture of a comma-separated list, on its own thread. */
typedef struct client_job {
  char addr[300];
  kiln_profsrv_call call;
  char stem[KILN_PROFILE_NAME_MAX + 1];
  kiln_status s;
  char msg[1024];
} client_job;

static void *client_job_run(void *p) {
  client_job *j = p;
  j->s = kiln_profsrv_call_profile(&j->call, j->msg, sizeof j->msg);
  return NULL;
}

#define KILN_PROFILE_MAX_ADDRS 256

/* Split "a:1,b:2" into jobs (checked); returns how many, or -1 with err. */
static int client_jobs(const char *addrs, client_job *jobs, kiln_err *err) {
  int n = 0;
  for (const char *p = addrs;; n++) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (n == KILN_PROFILE_MAX_ADDRS) {
      kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "more than %d addresses", KILN_PROFILE_MAX_ADDRS);
      return -1;
    }
    if (len >= sizeof jobs[n].addr) {
      kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "address %d of the list is too long", n + 1);
      return -1;
    }
    memcpy(jobs[n].addr, p, len);
    jobs[n].addr[len] = '\0';
    char host[256];
    int port = 0;
    if (kiln_profile_addr_parse(jobs[n].addr, host, sizeof host, &port, err) != KILN_OK) return -1;
    if (port == 0) {
      kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "address \"%s\" needs the server's port", jobs[n].addr);
      return -1;
    }
    /* the file's name: the host; with several addresses the host and the
     * port ("localhost_6010"), unique within the run (a rank of a
     * distributed job appends "-rank<R>" itself) */
    kiln_profile_host_stem(comma || n ? jobs[n].addr : host, jobs[n].stem, sizeof jobs[n].stem);
    for (char *c = jobs[n].stem; *c; c++)
      if (*c == ':' || *c == '[' || *c == ']') *c = '_';
    if (!comma) return n + 1;
    p = comma + 1;
  }
}

/* Run the jobs at once (one thread each): the ranks of a job are captured
 * over the same window. Returns the first failure. */
static kiln_status client_run(client_job *jobs, int n, kiln_err *err) {
  pthread_t th[KILN_PROFILE_MAX_ADDRS];
  int started[KILN_PROFILE_MAX_ADDRS] = {0};
  for (int i = 0; i < n; i++) {
    if (n > 1 && pthread_create(&th[i], NULL, client_job_run, &jobs[i]) == 0)
      started[i] = 1;
    else
      client_job_run(&jobs[i]);
  }
  kiln_status s = KILN_OK;
  for (int i = 0; i < n; i++) {
    if (started[i]) pthread_join(th[i], NULL);
    if (jobs[i].s != KILN_OK && s == KILN_OK) {
      s = jobs[i].s;
      kiln_err_set(err, s, "%s%s%s", n > 1 ? jobs[i].addr : "", n > 1 ? ": " : "", jobs[i].msg);
    }
  }
  return s;
}

kiln_status kiln_profiler_client_capture_at(const char *addr, uint32_t duration_ms, const char *logdir,
                                            char *out_dir, size_t out_cap, kiln_loc loc) {
  kiln_err err = {0};
  if (out_dir && out_cap) out_dir[0] = '\0';
  if (!addr) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "profile capture: the address is NULL");
  client_job *jobs = calloc(KILN_PROFILE_MAX_ADDRS, sizeof *jobs);
  if (!jobs) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "profile capture: out of memory");
  int n = client_jobs(addr, jobs, &err);
  if (n < 0) {
    free(jobs);
    return kiln_error(err.code, loc, "profile capture: %s", err.msg);
  }
  if (duration_ms == 0 || duration_ms > KILN_PROFILER_MAX_DURATION_MS) {
    free(jobs);
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "profile capture: duration %u ms is outside 1..%u", duration_ms,
                      KILN_PROFILER_MAX_DURATION_MS);
  }
  if (!logdir || !*logdir) {
    free(jobs);
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "profile capture: the log directory is empty");
  }
  /* TensorBoard's layout: <logdir>/plugins/profile/<session>/<host>.xplane.pb.
   * Sent absolute: the server would resolve a relative path against its own
   * working directory, and the user of this client means ours. */
  char root[KILN_PROFILE_PATH_MAX], abs_root[PATH_MAX], session[32] = "";
  kiln_status s = KILN_OK;
  size_t existed = 0; /* what of root existed before: a failed capture leaves no empty directories */
  if (snprintf(root, sizeof root, "%s/plugins/profile", logdir) >= (int)sizeof root)
    s = kiln_err_set(&err, KILN_ERR_INVALID_ARGUMENT, "log directory path too long");
  else if ((existed = kiln_fs_existing_prefix(root)), kiln_fs_mkdirs_private(root, &err) != KILN_OK)
    s = err.code;
  else if (!realpath(root, abs_root))
    s = kiln_err_set(&err, KILN_ERR_IO, "cannot resolve %s", root);
  if (s == KILN_OK) {
    kiln_profile_session_id_now(session);
    for (int i = 0; i < n; i++)
      jobs[i].call = (kiln_profsrv_call){.addr = jobs[i].addr, .duration_ms = duration_ms,
                                         .repository_root = abs_root, .session_id = session,
                                         .host_name = jobs[i].stem};
    s = client_run(jobs, n, &err);
  }
  free(jobs);
  if (s != KILN_OK) {
    if (session[0]) { /* the servers' run directory, when one made it and wrote nothing */
      char run[PATH_MAX + 40];
      snprintf(run, sizeof run, "%s/%s", abs_root, session);
      kiln_fs_rmdirs_empty(run, strlen(abs_root));
    }
    kiln_fs_rmdirs_empty(root, existed);
    return kiln_error(s, loc, "profile capture: %s", err.msg);
  }
  if (out_dir && out_cap) snprintf(out_dir, out_cap, "%s/%s", abs_root, session);
  return KILN_OK;
}
