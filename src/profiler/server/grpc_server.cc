// The profiler server and client over gRPC (tensorflow.ProfilerService):
// the only C++ file of kiln, and the only place that uses gRPC. It is built
// as its own shared object, libkiln_grpc.so, loaded by server.c on first
// use (see server.h): it calls back into kiln only through the
// kiln_profsrv_host table it is given. See include/kiln/profiler_server.h
// for the user-facing interface.
//
// Bounds, because the peer may be hostile: requests are at most 64 KiB
// (anything larger is refused by gRPC before it reaches us), at most 4
// streams per connection and a handful of threads serve them, and one
// capture runs at a time. Every field is checked in C
// (kiln_profile_request_check) before any file is touched.
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <atomic>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "profiler_service.grpc.pb.h"

#include "profiler/server/server.h"

namespace {

const kiln_profsrv_host *g_host = nullptr;  // set once by kiln_profsrv_module

constexpr int kMaxRequestBytes = 64 * 1024;
constexpr int kMaxStreamsPerConnection = 4;
constexpr int kMaxServerThreads = 8;
constexpr int kReplyMarginMs = 60000;

grpc::StatusCode grpc_code(kiln_status s) {
  switch (s) {
    case KILN_ERR_INVALID_ARGUMENT: return grpc::StatusCode::INVALID_ARGUMENT;
    case KILN_ERR_UNSUPPORTED: return grpc::StatusCode::FAILED_PRECONDITION;
    case KILN_ERR_OUT_OF_MEMORY: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    default: return grpc::StatusCode::INTERNAL;
  }
}

class ProfilerServiceImpl final : public tensorflow::ProfilerService::Service {
 public:
  // Monitor and Terminate are not overridden: the generated base class
  // answers them UNIMPLEMENTED.
  grpc::Status Profile(grpc::ServerContext *ctx, const tensorflow::ProfileRequest *req,
                       tensorflow::ProfileResponse *resp) override {
    grpc::Status st = Serve(req, resp);
    // The client sees the error, but the person running the program should
    // too: a capture that "finds no trace" is otherwise a mystery.
    if (!st.ok())
      std::fprintf(stderr, "kiln profiler server: Profile request from %s failed: %s\n", ctx->peer().c_str(),
                   st.error_message().c_str());
    return st;
  }

 private:
  grpc::Status Serve(const tensorflow::ProfileRequest *req, tensorflow::ProfileResponse *resp) {
    kiln_profile_request r;
    r.duration_ms = req->duration_ms();
    r.opts_duration_ms = req->has_opts() ? req->opts().duration_ms() : 0;
    r.repository_root = {req->repository_root().data(), req->repository_root().size()};
    r.session_id = {req->session_id().data(), req->session_id().size()};
    r.host_name = {req->host_name().data(), req->host_name().size()};
    char msg[1024] = "";
    bool expected = false;
    if (!busy_.compare_exchange_strong(expected, true))
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "a capture is already running in this process; try again when it ends");
    kiln_status s = g_host->serve(&r, msg, sizeof msg);
    busy_.store(false);
    if (s != KILN_OK) return grpc::Status(grpc_code(s), msg[0] ? msg : g_host->status_name(s));
    resp->set_empty_trace(false);
    return grpc::Status::OK;
  }

  std::atomic<bool> busy_{false};
};

// The process's server: a documented singleton (profiler_server.h). Plain
// pointers, never destroyed at exit: a static destructor would race gRPC's
// own teardown when a program exits without stopping the server.
std::mutex g_mu;
grpc::Server *g_server = nullptr;
ProfilerServiceImpl *g_service = nullptr;
int g_port = 0;

}  // namespace

// (msg, cap) error helper: the C side's kiln_err_set, without kiln_err.
static kiln_status fail(char *msg, size_t cap, kiln_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static kiln_status fail(char *msg, size_t cap, kiln_status s, const char *fmt, ...) {
  if (msg && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
  }
  return s;
}

static kiln_status srv_start(const char *addr, int *port, char *msg, size_t cap) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_server)
    return fail(msg, cap, KILN_ERR_INVALID_ARGUMENT, "the profiler server is already running on port %d",
                        g_port);
  auto *service = new ProfilerServiceImpl();
  grpc::ServerBuilder b;
  int bound = 0;
  b.AddListeningPort(addr, grpc::InsecureServerCredentials(), &bound);
  b.RegisterService(service);
  b.SetMaxReceiveMessageSize(kMaxRequestBytes);
  b.SetMaxSendMessageSize(kMaxRequestBytes);
  b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreamsPerConnection);
  b.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 16 * 1024);
  grpc::ResourceQuota quota("kiln-profiler-server");
  quota.SetMaxThreads(kMaxServerThreads);
  b.SetResourceQuota(quota);
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (!server || bound == 0) {
    if (server) server->Shutdown();
    delete service;
    return fail(msg, cap, KILN_ERR_IO, "cannot listen on %s (port in use, or not a local address?)", addr);
  }
  g_server = server.release();
  g_service = service;
  g_port = bound;
  if (port) *port = bound;
  return KILN_OK;
}

static int srv_port(void) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_port;
}

static void srv_stop(void) {
  grpc::Server *server;
  ProfilerServiceImpl *service;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    server = g_server;
    service = g_service;
    g_server = nullptr;
    g_service = nullptr;
    g_port = 0;
  }
  if (!server) return;
  // Shutdown waits for handlers in flight: a running capture ends after
  // at most its duration.
  server->Shutdown();
  server->Wait();
  delete server;
  delete service;
}

static kiln_status srv_call_profile(const kiln_profsrv_call *call, char *msg, size_t cap) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(4 * 1024 * 1024);
  std::shared_ptr<grpc::Channel> ch = grpc::CreateCustomChannel(call->addr, grpc::InsecureChannelCredentials(), args);
  uint32_t connect_ms = call->connect_timeout_ms ? call->connect_timeout_ms : 5000;
  if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::milliseconds(connect_ms)))
    return fail(msg, cap, KILN_ERR_IO,
                        "cannot reach a profiler server at %s (nothing listening there after %u ms; is the program "
                        "running and did it call kiln_profiler_server_start?)",
                        call->addr, connect_ms);
  auto stub = tensorflow::ProfilerService::NewStub(ch);
  tensorflow::ProfileRequest req;
  req.set_duration_ms(call->duration_ms);
  req.set_max_events(1000000);
  req.add_tools("trace_viewer");
  tensorflow::ProfileOptions *opts = req.mutable_opts();
  opts->set_version(1);
  opts->set_host_tracer_level(2);
  opts->set_device_tracer_level(1);
  opts->set_duration_ms(call->duration_ms);
  if (call->repository_root) req.set_repository_root(call->repository_root);
  if (call->session_id) req.set_session_id(call->session_id);
  if (call->host_name) req.set_host_name(call->host_name);
  if (call->repository_root) opts->set_repository_path(call->repository_root);
  if (call->session_id) opts->set_session_id(call->session_id);

  grpc::ClientContext ctx;
  uint64_t budget = call->duration_ms;
  if (budget > 2ull * 600000) budget = 2ull * 600000;  // a hostile test value must not overflow the deadline
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(budget + kReplyMarginMs));
  tensorflow::ProfileResponse resp;
  grpc::Status st = stub->Profile(&ctx, req, &resp);
  if (!st.ok()) {
    const std::string &m = st.error_message();
    switch (st.error_code()) {
      case grpc::StatusCode::INVALID_ARGUMENT:
        return fail(msg, cap, KILN_ERR_INVALID_ARGUMENT, "the profiler server at %s refused the request: %s",
                            call->addr, m.c_str());
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return fail(msg, cap, KILN_ERR_IO, "the profiler server at %s did not answer: %s", call->addr,
                            m.c_str());
      case grpc::StatusCode::UNIMPLEMENTED:
        return fail(msg, cap, KILN_ERR_UNSUPPORTED, "the server at %s does not serve profiles: %s",
                            call->addr, m.c_str());
      default:
        return fail(msg, cap, KILN_ERR_IO, "the profiler server at %s failed to capture: %s", call->addr,
                            m.c_str());
    }
  }
  if (resp.empty_trace())
    return fail(msg, cap, KILN_ERR_CORRUPT, "the profiler server at %s recorded nothing (empty trace)",
                        call->addr);
  return KILN_OK;
}

// Whether the gRPC library is still initialized: some object (ours, or
// another user's in this process) still holds it. gRPC tears a channel down
// asynchronously and keeps itself initialized until the channel is really
// gone, e.g. ~1 s after a failed connection (the subchannel's reconnect
// backoff timer), and the last teardown then runs on a detached thread of
// its own. server.c waits on this (kiln_profsrv_stop) so that no gRPC thread
// outlives the stop.
static int srv_grpc_running(void) { return grpc_is_initialized(); }

// The module's one exported symbol (server.h).
extern "C" __attribute__((visibility("default"))) const kiln_profsrv_ops *kiln_profsrv_module(
    const kiln_profsrv_host *host) {
  static const kiln_profsrv_ops ops = {KILN_PROFSRV_ABI, srv_start,        srv_port,
                                       srv_stop,         srv_call_profile, srv_grpc_running};
  if (!host || !host->serve || !host->status_name) return nullptr;
  g_host = host;
  return &ops;
}
