#include "worker/coordination/coordination_client.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>

#include "worker/coordination/coordination_rpc_handler.h"
#include "worker/coordination/grpc_status.h"
#include "worker/coordination/mutex_deadlock_detection.h"

namespace mirrored::coordination {
namespace {

// A probe of a channel failing to connect returns at once; the bound only
// guards against a channel that connects meanwhile and a slow answer.
constexpr std::chrono::milliseconds kConnectionProbeTimeout{2000};
// How long one connection attempt (TCP, then HTTP/2's settings, or TLS's
// handshake) may take before gRPC gives it up and tries again. gRPC takes
// it from GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, not from the backoff between
// attempts (initial/max below). At 100 ms, a chief busy accepting 1,024
// tasks answered too late: every client dropped its half-made connection
// and made another, ~7 per task, and the chief did all of that work again
// (bench/RESULTS.md, "Coordination service at scale"). A refused connection
// (no chief yet) still fails at once and is retried after the backoff.
constexpr std::chrono::milliseconds kConnectAttemptTimeout{20000};
// The pause after a failed attempt: from 100 ms, growing to 1 s.
constexpr std::chrono::milliseconds kReconnectBackoffFirst{100};
constexpr std::chrono::milliseconds kReconnectBackoffMax{1000};

}  // namespace

std::shared_ptr<grpc::Channel> CoordinationClient::MakeChannel(const std::string& address,
                                                               bool separate_connection, const TlsCredentials& tls,
                                                               const std::string& tls_name) {
  DisableMutexDeadlockDetection();  // its cost grows with the calls in flight
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(kReconnectBackoffFirst.count()));
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // as the server (server_limits.h): no pings per heartbeat
  args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(kConnectAttemptTimeout.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(kReconnectBackoffMax.count()));
  if (separate_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Only a name given explicitly overrides the one gRPC checks (the host of
  // `address`).
  const std::string& name = !tls.server_name().empty() ? tls.server_name() : tls_name;
  if (tls.enabled() && !name.empty()) args.SetSslTargetNameOverride(name);
  return grpc::CreateCustomChannel(address, tls.ChannelCredentials(), args);
}

CoordinationClient::CoordinationClient(std::shared_ptr<grpc::Channel> channel,
                                       std::string job_token, std::string address_for_messages)
    : channel_(channel),
      stub_(rpc::CoordinationService::NewStub(channel)),
      job_token_(std::move(job_token)),
      address_(std::move(address_for_messages)) {}

template <typename Req, typename Resp, typename Method>
Status CoordinationClient::Call(const char* name, Method method, const Req& req, Resp* resp,
                                int64_t timeout_ms, bool wait_for_ready, bool cancellable) {
  grpc::ClientContext ctx;
  if (!job_token_.empty()) ctx.AddMetadata(kJobTokenMetadataKey, job_token_);
  if (timeout_ms >= 0) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  }
  ctx.set_wait_for_ready(wait_for_ready);
  if (cancellable && !Track(&ctx)) {
    return CancelledError(std::string(name) + " not sent: the agent is stopping");
  }
  const grpc::Status g = (stub_.get()->*method)(&ctx, req, resp);
  if (cancellable) Untrack(&ctx);
  if (g.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // A configuration error (the wrong address, mixed versions): exit 2.
    return InvalidArgumentError(Context(name, g, timeout_ms) + ": " + g.error_message());
  }
  return FromGrpcStatus(g, Context(name, g, timeout_ms));
}

bool CoordinationClient::Track(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return false;
  in_flight_.insert(ctx);
  return true;
}

void CoordinationClient::Untrack(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.erase(ctx);
}

std::string CoordinationClient::Context(const char* name, const grpc::Status& g,
                                        int64_t timeout_ms) const {
  std::string context = std::string(name) + " to the coordination service";
  if (!address_.empty()) context += " at " + address_;
  if (g.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    context += " (call deadline " + std::to_string(timeout_ms) + " ms)";
  } else if (g.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // An HTTP server's 404, or a gRPC server without this service.
    context += " (what answers there is not mirrored's coordination service, or another version of it: check the "
               "chief's host:port in the cluster)";
  }
  return context;
}

std::string CoordinationClient::LastConnectionFailure() {
  if (channel_->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_TRANSIENT_FAILURE) return "";
  // Fails at once with the last connection error (no wait_for_ready); were
  // the channel to connect meanwhile, the service refuses it (no token).
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kConnectionProbeTimeout);
  rpc::ProgressRequest req;
  rpc::ProgressResponse resp;
  const grpc::Status g = stub_->Progress(&ctx, req, &resp);
  return g.error_code() == grpc::StatusCode::UNAVAILABLE ? g.error_message() : "";
}

StatusOr<rpc::RegisterResponse> CoordinationClient::Register(const rpc::RegisterRequest& req,
                                                             int64_t timeout_ms) {
  rpc::RegisterResponse resp;
  MIRRORED_RETURN_IF_ERROR(Call("Register", &rpc::CoordinationService::Stub::Register, req, &resp,
                                timeout_ms, /*wait_for_ready=*/true));
  return resp;
}

Status CoordinationClient::Heartbeat(const rpc::HeartbeatRequest& req, int64_t timeout_ms) {
  rpc::HeartbeatResponse resp;
  return Call("Heartbeat", &rpc::CoordinationService::Stub::Heartbeat, req, &resp, timeout_ms);
}

StatusOr<rpc::ProgressResponse> CoordinationClient::Progress(int64_t timeout_ms) {
  rpc::ProgressRequest req;
  rpc::ProgressResponse resp;
  MIRRORED_RETURN_IF_ERROR(Call("Progress", &rpc::CoordinationService::Stub::Progress, req, &resp, timeout_ms));
  return resp;
}

Status CoordinationClient::PollForError(const rpc::PollForErrorRequest& req,
                                        const std::function<void()>& on_open) {
  grpc::ClientContext ctx;
  if (!job_token_.empty()) ctx.AddMetadata(kJobTokenMetadataKey, job_token_);
  if (!Track(&ctx)) return CancelledError("PollForError not sent: the agent is stopping");
  std::unique_ptr<grpc::ClientReader<rpc::PollForErrorResponse>> reader =
      stub_->PollForError(&ctx, req);
  rpc::PollForErrorResponse msg;
  while (reader->Read(&msg)) {
    if (msg.open() && on_open) on_open();
  }
  const grpc::Status g = reader->Finish();
  Untrack(&ctx);
  return FromGrpcStatus(g, Context("PollForError", g, -1));
}

Status CoordinationClient::ReportError(const rpc::ReportErrorRequest& req, int64_t timeout_ms, bool wait_for_ready) {
  rpc::ReportErrorResponse resp;
  return Call("ReportError", &rpc::CoordinationService::Stub::ReportError, req, &resp,
              timeout_ms, wait_for_ready, /*cancellable=*/false);
}

Status CoordinationClient::KeyValueSet(const rpc::KeyValueSetRequest& req, int64_t timeout_ms) {
  rpc::KeyValueSetResponse resp;
  return Call("KeyValueSet", &rpc::CoordinationService::Stub::KeyValueSet, req, &resp,
              timeout_ms);
}

StatusOr<std::string> CoordinationClient::KeyValueGet(const rpc::KeyValueGetRequest& req,
                                                      int64_t timeout_ms) {
  rpc::KeyValueGetResponse resp;
  MIRRORED_RETURN_IF_ERROR(Call("KeyValueGet", &rpc::CoordinationService::Stub::KeyValueGet, req,
                                &resp, timeout_ms));
  return std::move(*resp.mutable_value());
}

Status CoordinationClient::WaitForKeys(const rpc::WaitForKeysRequest& req, int64_t timeout_ms) {
  rpc::WaitForKeysResponse resp;
  return Call("WaitForKeys", &rpc::CoordinationService::Stub::WaitForKeys, req, &resp,
              timeout_ms);
}

Status CoordinationClient::Barrier(const rpc::BarrierRequest& req, int64_t timeout_ms) {
  rpc::BarrierResponse resp;
  return Call("Barrier", &rpc::CoordinationService::Stub::Barrier, req, &resp, timeout_ms);
}

Status CoordinationClient::Shutdown(const rpc::ShutdownRequest& req, int64_t timeout_ms) {
  rpc::ShutdownResponse resp;
  return Call("Shutdown", &rpc::CoordinationService::Stub::Shutdown, req, &resp, timeout_ms);
}

void CoordinationClient::CancelAll() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  for (grpc::ClientContext* ctx : in_flight_) ctx->TryCancel();
}

}  // namespace mirrored::coordination
