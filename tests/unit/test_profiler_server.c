/* The profiler server and client (include/kiln/profiler_server.h), over
 * loopback only, with bounded loops:
 *   - a real capture from the client while a traced loop runs: the files
 *     land where TensorBoard looks, the xplane.pb is well-formed protobuf
 *     and both files name the annotations;
 *   - hostile requests ("..", huge or zero duration, bad session / host
 *     names) get INVALID_ARGUMENT and touch no file;
 *   - a relative root (TensorBoard sends its --logdir as typed) lands
 *     below the server's working directory;
 *   - a request the server accepts but cannot carry out (a directory it
 *     cannot create, a capture already running) comes back to the client
 *     with the server's reason;
 *   - the pure checks (request fields, addresses) against hand-written
 *     expectations;
 *   - usage errors of the public API (bad port, second server, nothing
 *     listening);
 *   - kiln_shutdown stops the server and leaves no gRPC thread behind. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/fs.h"
#include "kiln/kiln.h"
#include "kiln/profiler.h"
#include "kiln/profiler_server.h"
#include "kt.h"
#include "profiler/server/request.h"
#include "profiler/server/server.h"

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* Walk protobuf wire format: every field of the message (and, for
 * length-delimited fields, whatever they hold) must lie inside the buffer.
 * Returns 1 when the bytes are a well-formed message at the top level. */
static int wire_ok(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint64_t key = 0;
    int shift = 0;
    do {
      if (i >= n || shift > 63) return 0;
      key |= (uint64_t)(p[i] & 0x7f) << shift;
      shift += 7;
    } while (p[i++] & 0x80);
    if ((key >> 3) == 0) return 0;
    switch (key & 7) {
      case 0:
        while (i < n && (p[i] & 0x80)) i++;
        if (i++ >= n) return 0;
        break;
      case 1: i += 8; break;
      case 5: i += 4; break;
      case 2: {
        uint64_t len = 0;
        shift = 0;
        do {
          if (i >= n || shift > 63) return 0;
          len |= (uint64_t)(p[i] & 0x7f) << shift;
          shift += 7;
        } while (p[i++] & 0x80);
        if (len > n - i) return 0;
        i += len;
        break;
      }
      default: return 0;
    }
    if (i > n) return 0;
  }
  return 1;
}

static uint8_t *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  uint8_t *b = malloc(cap);
  size_t r;
  while (b && (r = fread(b + len, 1, cap - len, f)) > 0) {
    len += r;
    if (len == cap) b = realloc(b, cap *= 2);
  }
  fclose(f);
  *n = len;
  return b;
}

static char *gunzip_all(const char *path, size_t *n) {
  gzFile g = gzopen(path, "rb");
  if (!g) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *b = malloc(cap + 1);
  int r;
  while (b && (r = gzread(g, b + len, (unsigned)(cap - len))) > 0) {
    len += (size_t)r;
    if (len == cap) b = realloc(b, (cap *= 2) + 1);
  }
  gzclose(g);
  if (b) b[len] = '\0';
  *n = len;
  return b;
}

static int has_bytes(const uint8_t *hay, size_t n, const char *needle) {
  return memmem(hay, n, needle, strlen(needle)) != NULL;
}

/* A tiny annotated training-like loop on its own thread (the tracing
 * thread), bounded by `stop` and by a step cap. */
static atomic_int g_stop;
static atomic_int g_steps_done; /* steps the loop has finished */
static void *traced_loop(void *arg) {
  (void)arg;
  int64_t shape[2] = {32, 32};
  for (int64_t step = 0; step < 200000 && !atomic_load(&g_stop); step++) {
    kiln_step_trace("Training_Step", step);
    KILN_TRACE("Forward") {
      kiln_tensor a = kiln_rand_uniform(KILN_F32, 2, shape, (uint64_t)step);
      kiln_tensor b = kiln_matmul(a, a);
      kiln_keep(b);
      kiln_mark_step();
      static float out[32 * 32];
      kiln_to_host(b, out, sizeof out);
      kiln_release(b);
    }
    KILN_TRACE("Backward") { usleep(200); }
    usleep(500);
    atomic_fetch_add(&g_steps_done, 1);
  }
  kiln_step_trace_end();
  return NULL;
}

static void tmpdir(char *out, size_t cap) {
  kiln_err err = {0};
  if (kiln_fs_mkdtemp(NULL, "kiln-profsrv-", out, cap, &err) != KILN_OK) KT_FAIL("mkdtemp: %s", err.msg);
}

KT_TEST(capture_over_loopback) {
  if (!kiln_profsrv_available()) return;
  KT_EQ_INT(kiln_profiler_server_start(0), KILN_OK);
  int port = kiln_profiler_server_port();
  KT_CHECK(port > 0 && port <= 65535);
  atomic_store(&g_stop, 0);
  atomic_store(&g_steps_done, 0);
  pthread_t th;
  pthread_create(&th, NULL, traced_loop, NULL);
  /* Past the first steps' compiles (seconds on a cold cache and a loaded
   * machine): a 300 ms capture must see whole steps, Backward included. */
  for (int i = 0; i < 6000 && atomic_load(&g_steps_done) < 2; i++) usleep(5000); /* at most 30 s */
  KT_CHECK(atomic_load(&g_steps_done) >= 2);

  char dir[512], logdir[600], addr[64], run[4096];
  tmpdir(dir, sizeof dir);
  snprintf(logdir, sizeof logdir, "%s/logs", dir);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  kiln_status s = kiln_profiler_client_capture(addr, 300, logdir, run, sizeof run);
  atomic_store(&g_stop, 1);
  pthread_join(th, NULL);
  KT_CHECK_MSG(s == KILN_OK, "capture: %s", kiln_last_error());
  kiln_clear_error();

  /* <logdir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>, absolute. */
  KT_STR_CONTAINS(run, "/logs/plugins/profile/");
  const char *session = strrchr(run, '/') + 1;
  KT_EQ_INT((int)strlen(session), 19);
  KT_CHECK(session[4] == '_' && session[7] == '_' && session[10] == '_');

  char path[4200];
  snprintf(path, sizeof path, "%s/127.0.0.1.xplane.pb", run);
  size_t n = 0;
  uint8_t *pb = read_all(path, &n);
  KT_CHECK_MSG(pb && n > 0, "no %s", path);
  if (pb) {
    KT_CHECK(wire_ok(pb, n));
    KT_CHECK(has_bytes(pb, n, "Training_Step"));
    KT_CHECK(has_bytes(pb, n, "Forward"));
    KT_CHECK(has_bytes(pb, n, "Backward"));
  }
  free(pb);
  snprintf(path, sizeof path, "%s/127.0.0.1.trace.json.gz", run);
  char *json = gunzip_all(path, &n);
  KT_CHECK_MSG(json && n > 0, "no %s", path);
  if (json) {
    KT_STR_CONTAINS(json, "traceEvents");
    KT_STR_CONTAINS(json, "\"Forward\"");
  }
  free(json);

  /* A second server while one runs: a usage error, sticky. */
  KT_EQ_INT(kiln_profiler_server_start(0), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "already running");
  kiln_clear_error();

  kiln_profiler_server_stop();
  KT_EQ_INT(kiln_profiler_server_port(), 0);
  kiln_fs_remove_tree(dir);
}

/* One hostile request: refused with INVALID_ARGUMENT naming `field`, and
 * nothing created under `dir`. */
static void refused(const char *addr, uint64_t dur, const char *root, const char *session, const char *host,
                    const char *field, const char *dir) {
  kiln_profsrv_call call = {.addr = addr, .duration_ms = dur, .repository_root = root, .session_id = session,
                            .host_name = host, .connect_timeout_ms = 5000};
  char msg[1024] = "";
  kiln_status s = kiln_profsrv_call_profile(&call, msg, sizeof msg);
  KT_CHECK_MSG(s == KILN_ERR_INVALID_ARGUMENT, "root=%s session=%s host=%s: status %s (%s)", root ? root : "(null)",
               session ? session : "(null)", host ? host : "(null)", kiln_status_name(s), msg);
  KT_STR_CONTAINS(msg, field);
  KT_STR_CONTAINS(msg, "refused");
  char probe[700];
  snprintf(probe, sizeof probe, "%s/escaped", dir);
  KT_CHECK(!exists(probe));
}

KT_TEST(hostile_requests_refused) {
  if (!kiln_profsrv_available()) return;
  KT_EQ_INT(kiln_profiler_server_start(0), KILN_OK);
  char addr[64], dir[512], root[700], dotdot[800];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", kiln_profiler_server_port());
  tmpdir(dir, sizeof dir);
  snprintf(root, sizeof root, "%s/plugins/profile", dir);
  snprintf(dotdot, sizeof dotdot, "%s/../../escaped", root);
  refused(addr, 100, "relative/../../escaped", "s1", "h", "\"..\" component", dir);
  refused(addr, 100, dotdot, "s1", "h", "\"..\" component", dir);
  refused(addr, 100, root, "", "h", "session_id is empty", dir);
  refused(addr, 100, root, "../escaped", "h", "session_id", dir);
  refused(addr, 100, root, "a/b", "h", "session_id", dir);
  refused(addr, 100, root, ".hidden", "h", "session_id", dir);
  refused(addr, 100, root, "s1", "../../escaped", "host_name", dir);
  refused(addr, 100000000ull, root, "s1", "h", "duration_ms 100000000 is outside 1..600000", dir);
  refused(addr, 0, root, "s1", "h", "duration_ms 0", dir);
  refused(addr, 100, "", "s1", "h", "repository_root is empty", dir);
  KT_CHECK(!exists(root)); /* nothing was created for any of them */
  /* The serving program's sticky status is untouched by all of that. */
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_profiler_server_stop();
  kiln_fs_remove_tree(dir);
}

static kiln_profsrv_call raw_call(const char *addr, uint64_t ms, const char *root) {
  return (kiln_profsrv_call){.addr = addr, .duration_ms = ms, .repository_root = root,
                             .session_id = "2026_01_02_03_04_05", .host_name = "localhost:6009",
                             .connect_timeout_ms = 5000};
}

static void *long_capture(void *arg) {
  kiln_profsrv_call *call = arg;
  static char msg[1024];
  kiln_status s = kiln_profsrv_call_profile(call, msg, sizeof msg);
  return (void *)(intptr_t)s;
}

/* TensorBoard's request for `tensorboard --logdir logs` has the relative
 * repository_root "logs/plugins/profile": the files land below the serving
 * process's working directory. A request the server accepts but cannot
 * carry out comes back to the client with the server's reason: a
 * directory it cannot create (a regular file in the way: root ignores
 * permissions, a file in the path stops root too), a capture already
 * running. */
KT_TEST(relative_root_and_server_failures_reach_the_client) {
  if (!kiln_profsrv_available()) return;
  KT_EQ_INT(kiln_profiler_server_start(0), KILN_OK);
  char addr[64], dir[512], old[4096], path[1200], msg[1024] = "";
  snprintf(addr, sizeof addr, "127.0.0.1:%d", kiln_profiler_server_port());
  tmpdir(dir, sizeof dir);
  KT_CHECK(getcwd(old, sizeof old) != NULL);
  KT_CHECK(chdir(dir) == 0);
  kiln_profsrv_call call = raw_call(addr, 50, "logs/plugins/profile");
  kiln_status s = kiln_profsrv_call_profile(&call, msg, sizeof msg);
  KT_CHECK(chdir(old) == 0);
  KT_CHECK_MSG(s == KILN_OK, "relative root: %s (%s)", kiln_status_name(s), msg);
  snprintf(path, sizeof path, "%s/logs/plugins/profile/2026_01_02_03_04_05/localhost:6009.xplane.pb", dir);
  size_t n = 0;
  uint8_t *pb = read_all(path, &n);
  KT_CHECK_MSG(pb && n > 0 && wire_ok(pb, n), "no capture at %s", path);
  free(pb);

  /* a regular file where a directory of the root should be */
  char file[600], root[700];
  snprintf(file, sizeof file, "%s/not-a-dir", dir);
  FILE *f = fopen(file, "w");
  KT_CHECK(f != NULL);
  if (f) fclose(f);
  snprintf(root, sizeof root, "%s/plugins/profile", file);
  call = raw_call(addr, 50, root);
  KT_EQ_INT(kiln_profsrv_call_profile(&call, msg, sizeof msg), KILN_ERR_IO);
  KT_STR_CONTAINS(msg, "failed to capture: cannot create directory");
  KT_STR_CONTAINS(msg, root);
  KT_STR_CONTAINS(msg, "Not a directory");

  /* a second request while a capture runs */
  char root2[700];
  snprintf(root2, sizeof root2, "%s/busy", dir);
  kiln_profsrv_call first = raw_call(addr, 1000, root2);
  pthread_t th;
  KT_CHECK(pthread_create(&th, NULL, long_capture, &first) == 0);
  for (int i = 0; i < 2000 && !kiln_profiler_active(); i++) usleep(5000); /* at most 10 s */
  KT_CHECK(kiln_profiler_active());
  call = raw_call(addr, 50, root2);
  KT_EQ_INT(kiln_profsrv_call_profile(&call, msg, sizeof msg), KILN_ERR_IO);
  KT_STR_CONTAINS(msg, "a capture is already running");
  void *ret = NULL;
  pthread_join(th, &ret);
  KT_EQ_INT((int)(intptr_t)ret, KILN_OK);
  KT_EQ_INT(kiln_last_status(), KILN_OK); /* none of it touched the program's status */
  kiln_profiler_server_stop();
  kiln_fs_remove_tree(dir);
}

KT_TEST(nothing_listening) {
  if (!kiln_profsrv_available()) return;
  /* A port that was just released: connection refused. */
  KT_EQ_INT(kiln_profiler_server_start(0), KILN_OK);
  int port = kiln_profiler_server_port();
  kiln_profiler_server_stop();
  char addr[64], msg[1024];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  kiln_profsrv_call call = {.addr = addr, .duration_ms = 100, .repository_root = "/tmp", .session_id = "s",
                            .host_name = "h", .connect_timeout_ms = 500};
  KT_EQ_INT(kiln_profsrv_call_profile(&call, msg, sizeof msg), KILN_ERR_IO);
  KT_STR_CONTAINS(msg, "cannot reach a profiler server at 127.0.0.1:");
  /* the public client: the failure leaves none of the directories it made
   * for the run (logdir/plugins/profile), and what existed stays */
  char base[512], logdir[700], run[1024];
  kiln_err err = {0};
  KT_CHECK(kiln_fs_mkdtemp(NULL, "kiln-profsrv-", base, sizeof base, &err) == KILN_OK);
  snprintf(logdir, sizeof logdir, "%s/logs", base);
  KT_EQ_INT(kiln_profiler_client_capture(addr, 50, logdir, run, sizeof run), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "cannot reach a profiler server");
  kiln_clear_error();
  KT_CHECK(access(logdir, F_OK) != 0);
  KT_CHECK(access(base, F_OK) == 0);
  kiln_fs_remove_tree(base);
}

KT_TEST(public_api_usage_errors) {
  KT_EQ_INT(kiln_profiler_server_start(70000), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "port 70000 is outside 0..65535");
  KT_STR_CONTAINS(kiln_last_error(), "test_profiler_server.c");
  kiln_clear_error();
  KT_EQ_INT(kiln_profiler_server_start_addr("nonsense"), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  char run[64];
  KT_EQ_INT(kiln_profiler_client_capture("localhost", 100, "/tmp/x", run, sizeof run), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "expected host:port");
  kiln_clear_error();
  KT_EQ_INT(kiln_profiler_client_capture("127.0.0.1:1", 0, "/tmp/x", run, sizeof run), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "duration 0 ms is outside 1..600000");
  kiln_clear_error();
  KT_EQ_INT(kiln_profiler_server_port(), 0);
  kiln_profiler_server_stop(); /* none running: a no-op */
}

static kiln_status check_in(const char *cwd, uint64_t d, uint64_t od, const char *root, size_t root_len,
                            const char *session, const char *host, kiln_profile_plan *plan, kiln_err *err) {
  kiln_profile_request r = {.duration_ms = d,
                            .opts_duration_ms = od,
                            .repository_root = {root, root_len},
                            .session_id = {session, strlen(session)},
                            .host_name = {host, strlen(host)}};
  memset(err, 0, sizeof *err);
  return kiln_profile_request_check(&r, cwd, plan, err);
}

static kiln_status check(uint64_t d, uint64_t od, const char *root, size_t root_len, const char *session,
                         const char *host, kiln_profile_plan *plan, kiln_err *err) {
  return check_in(NULL, d, od, root, root_len, session, host, plan, err);
}

#define STR_EQ(a, b) KT_CHECK_MSG(!strcmp((a), (b)), "got \"%s\", expected \"%s\"", (a), (b))

/* A relative root is resolved against the server's working directory: the
 * expected paths are written out by hand. */
KT_TEST(request_relative_roots) {
  kiln_profile_plan p;
  kiln_err e;
  const char *tb = "logs/plugins/profile"; /* TensorBoard's, for --logdir logs */
  KT_EQ_INT(check_in("/home/me/run", 250, 0, tb, strlen(tb), "2026_01_02_03_04_05", "localhost:6009", &p, &e),
            KILN_OK);
  STR_EQ(p.session_dir, "/home/me/run/logs/plugins/profile/2026_01_02_03_04_05");
  KT_EQ_INT(p.root_was_relative, 1);
  KT_EQ_INT(check_in("/home/me/run", 250, 0, "/abs/r", 6, "s", "h", &p, &e), KILN_OK);
  STR_EQ(p.session_dir, "/abs/r/s"); /* an absolute root ignores the working directory */
  KT_EQ_INT(p.root_was_relative, 0);
  KT_EQ_INT(check_in("/w", 5, 0, "./logs//", 8, "s", "h", &p, &e), KILN_OK);
  STR_EQ(p.session_dir, "/w/logs/s");
  KT_EQ_INT(check_in("/w", 5, 0, ".", 1, "s", "h", &p, &e), KILN_OK);
  STR_EQ(p.session_dir, "/w/s");
  KT_EQ_INT(check_in("/", 5, 0, "logs", 4, "s", "h", &p, &e), KILN_OK);
  STR_EQ(p.session_dir, "/logs/s");
  /* still no way out of the directory it names */
  KT_EQ_INT(check_in("/w", 5, 0, "logs/../..", 10, "s", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(e.msg, "\"..\" component");
  KT_EQ_INT(check_in("/w", 5, 0, "..", 2, "s", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  /* without a working directory (getcwd failed) a relative root is refused, saying why */
  KT_EQ_INT(check(5, 0, tb, strlen(tb), "s", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(e.msg, "\"logs/plugins/profile\" is not an absolute path");
  KT_STR_CONTAINS(e.msg, "working directory");
  /* the working directory counts towards the path limit */
  static char long_cwd[4050];
  long_cwd[0] = '/';
  memset(long_cwd + 1, 'c', sizeof long_cwd - 2);
  KT_EQ_INT(check_in(long_cwd, 5, 0, "logs", 4, "s", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(e.msg, "below this server's working directory) is too long");
}

KT_TEST(request_check_rules) {
  kiln_profile_plan p;
  kiln_err e;
  KT_EQ_INT(check(250, 0, "/data/logs/plugins/profile/", 27, "2026_01_02_03_04_05", "worker-0", &p, &e), KILN_OK);
  KT_EQ_INT((int)p.duration_ms, 250);
  KT_CHECK(!strcmp(p.session_dir, "/data/logs/plugins/profile/2026_01_02_03_04_05"));
  KT_CHECK(!strcmp(p.host, "worker-0"));
  /* TensorBoard sends the service address as host_name. */
  KT_EQ_INT(check(250, 0, "/l", 2, "s", "localhost:6009", &p, &e), KILN_OK);
  KT_CHECK(!strcmp(p.host, "localhost:6009"));
  KT_EQ_INT(check(250, 0, "/l", 2, "local:host", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT); /* not in a session */
  /* opts.duration_ms is the fallback; an empty host is "localhost". */
  KT_EQ_INT(check(0, 700, "/", 1, "s", "", &p, &e), KILN_OK);
  KT_EQ_INT((int)p.duration_ms, 700);
  KT_CHECK(!strcmp(p.session_dir, "/s"));
  KT_CHECK(!strcmp(p.host, "localhost"));
  KT_EQ_INT(check(600000, 0, "/a/..b/c..", 10, "s", "h", &p, &e), KILN_OK); /* ".." only as a whole component */
  KT_EQ_INT(check(600001, 0, "/a", 2, "s", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(check(5, 0, "/a/..", 5, "s", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(check(5, 0, "/a//../b", 8, "s", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  /* An embedded NUL would cut the path short in open(): refused. */
  KT_EQ_INT(check(5, 0, "/a\0/../../etc", 13, "s", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(e.msg, "control byte (0x00 at offset 2)");
  KT_STR_CONTAINS(e.msg, "\"/a\\x00/../../etc\"");
  KT_EQ_INT(check(5, 0, "/a", 2, "s p", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(check(5, 0, "/a", 2, "s", "h\x1b[2J", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(e.msg, "\\x1b"); /* escapes never reach a terminal */
  char long_name[200];
  memset(long_name, 'x', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  KT_EQ_INT(check(5, 0, "/a", 2, long_name, "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(e.msg, "is 199 bytes long; at most 128 allowed");
  static char long_root[5000];
  long_root[0] = '/';
  memset(long_root + 1, 'r', sizeof long_root - 2);
  KT_EQ_INT(check(5, 0, long_root, sizeof long_root - 1, "s", "h", &p, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(e.msg, "is too long");
}

KT_TEST(addresses) {
  char host[64];
  int port = -1;
  kiln_err e = {0};
  KT_EQ_INT(kiln_profile_addr_parse("localhost:6009", host, sizeof host, &port, &e), KILN_OK);
  KT_CHECK(!strcmp(host, "localhost") && port == 6009);
  KT_EQ_INT(kiln_profile_addr_parse("[::1]:0", host, sizeof host, &port, &e), KILN_OK);
  KT_CHECK(!strcmp(host, "::1") && port == 0);
  KT_EQ_INT(kiln_profile_addr_parse("::1:80", host, sizeof host, &port, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_profile_addr_parse("h:65536", host, sizeof host, &port, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_profile_addr_parse("h:-1", host, sizeof host, &port, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_profile_addr_parse("h:12x", host, sizeof host, &port, &e), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_profile_addr_parse(":80", host, sizeof host, &port, &e), KILN_ERR_INVALID_ARGUMENT);
  char stem[32];
  kiln_profile_host_stem("my host/x", stem, sizeof stem);
  KT_CHECK(!strcmp(stem, "my_host_x"));
  kiln_profile_host_stem("[::1]:6009", stem, sizeof stem);
  KT_CHECK(!strcmp(stem, "[::1]:6009"));
  kiln_profile_host_stem(".hidden", stem, sizeof stem);
  KT_CHECK(!strcmp(stem, "h.hidden"));
}

/* The threads of this process: their number, and their names in `names`. */
static int list_threads(char *names, size_t cap) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  size_t len = 0;
  names[0] = '\0';
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[64], comm[32] = "?";
    snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f) {
      if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = '\0';
      fclose(f);
    }
    n++;
    if (len < cap) len += (size_t)snprintf(names + len, cap - len, "[%s] ", comm);
  }
  closedir(d);
  return n;
}

/* Last: kiln_shutdown alone stops a running server and waits until gRPC's
 * threads are gone, so that the process exits with one thread and the leak
 * check at exit (ASan builds) has no thread to race. A failed connection
 * first leaves gRPC's teardown pending for about a second (the reconnect
 * backoff): before the fix, gRPC's executor, timer and event-engine threads
 * were still running, or ending, when LeakSanitizer stopped the world at
 * exit, and its tracer crashed ("LeakSanitizer has encountered a fatal
 * error") about one run in twenty-five under load. */
KT_TEST(shutdown_leaves_one_thread) {
  if (kiln_profsrv_available()) {
    KT_EQ_INT(kiln_profiler_server_start(0), KILN_OK);
    int port = kiln_profiler_server_port();
    kiln_profiler_server_stop();
    char addr[64], msg[1024];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    kiln_profsrv_call call = {.addr = addr, .duration_ms = 100, .repository_root = "/tmp", .session_id = "s",
                              .host_name = "h", .connect_timeout_ms = 100};
    KT_EQ_INT(kiln_profsrv_call_profile(&call, msg, sizeof msg), KILN_ERR_IO);
    KT_EQ_INT(kiln_profiler_server_start(0), KILN_OK);
  }
  kiln_shutdown();
  KT_EQ_INT(kiln_profiler_server_port(), 0);
  char names[2048];
  int n = list_threads(names, sizeof names);
  KT_CHECK_MSG(n == 1, "%d threads after kiln_shutdown: %s", n, names);
  kiln_shutdown(); /* again: nothing left to stop, returns at once */
  KT_EQ_INT(list_threads(names, sizeof names), 1);
}

KT_MAIN(KT_CASE(request_check_rules), KT_CASE(request_relative_roots), KT_CASE(addresses), KT_CASE(public_api_usage_errors),
        KT_CASE(nothing_listening), KT_CASE(hostile_requests_refused), KT_CASE(capture_over_loopback),
        KT_CASE(relative_root_and_server_failures_reach_the_client),
        KT_CASE(shutdown_leaves_one_thread))
