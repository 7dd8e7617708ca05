// CoordinationClient: the thin gRPC client of the coordination service. It
// adds the job token to every call, gives each call its deadline, and can
// cancel all of its in-flight calls at once (an agent that learned of a
// failure unblocks its barrier and key-value waits this way).
//
//   CoordinationClient client(CoordinationClient::MakeChannel("10.0.0.1:2222"), token);
//   rpc::BarrierRequest req; req.set_name("step/10"); ...
//   Status s = client.Barrier(req, /*timeout_ms=*/30000);
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/status.h"
#include "proto/coordination.grpc.pb.h"
#include "worker/coordination/tls_credentials.h"

namespace mirrored::coordination {

class CoordinationClient {
 public:
  // A channel with fast reconnects (100 ms..1 s) so a task started before
  // the chief connects soon after the chief is up. `separate_connection`
  // gives the channel its own TCP connection instead of gRPC's shared one.
  // `tls` enabled: a TLS channel that verifies the chief's certificate for
  // the name tls.server_name(), else `tls_name`, else the host of `address`
  // (a chief dialling itself over loopback names its own host).
  static std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                                    bool separate_connection = false,
                                                    const TlsCredentials& tls = TlsCredentials(),
                                                    const std::string& tls_name = "");

  CoordinationClient(std::shared_ptr<grpc::Channel> channel, std::string job_token,
                     std::string address_for_messages = "");

  // timeout_ms < 0: no deadline. Errors: the service's (see
  // CoordinationService) and gRPC's: Unavailable when the service cannot be
  // reached, DeadlineExceeded when timeout_ms passed, Cancelled after
  // CancelAll(), Unauthenticated for a wrong token.
  // Register waits for the service to come up (wait_for_ready).
  StatusOr<rpc::RegisterResponse> Register(const rpc::RegisterRequest& req, int64_t timeout_ms);
  Status Heartbeat(const rpc::HeartbeatRequest& req, int64_t timeout_ms);
  StatusOr<rpc::ProgressResponse> Progress(int64_t timeout_ms);
  // Blocks for the whole poll; `on_open` runs once the service holds it.
  Status PollForError(const rpc::PollForErrorRequest& req, const std::function<void()>& on_open);
  // wait_for_ready: wait (up to timeout_ms) for a service not up yet.
  Status ReportError(const rpc::ReportErrorRequest& req, int64_t timeout_ms, bool wait_for_ready = false);
  Status KeyValueSet(const rpc::KeyValueSetRequest& req, int64_t timeout_ms);
  StatusOr<std::string> KeyValueGet(const rpc::KeyValueGetRequest& req, int64_t timeout_ms);
  Status WaitForKeys(const rpc::WaitForKeysRequest& req, int64_t timeout_ms);
  Status Barrier(const rpc::BarrierRequest& req, int64_t timeout_ms);
  Status Shutdown(const rpc::ShutdownRequest& req, int64_t timeout_ms);

  // What gRPC says of the channel's last failed connection while the
  // channel fails to connect ("" otherwise: connected, or still trying):
  // read by ReadConnectionFailure (tls_probe.h). Asks with a call that
  // carries no token.
  std::string LastConnectionFailure();

  // Cancels every in-flight call, and every later one at its start — except
  // ReportError, which must reach the service even while the agent stops.
  void CancelAll();

 private:
  // Registers ctx for CancelAll; false when already cancelled.
  bool Track(grpc::ClientContext* ctx);
  void Untrack(grpc::ClientContext* ctx);
  std::string Context(const char* name, const grpc::Status& g, int64_t timeout_ms) const;

  template <typename Req, typename Resp, typename Method>
  Status Call(const char* name, Method method, const Req& req, Resp* resp, int64_t timeout_ms,
              bool wait_for_ready = false, bool cancellable = true);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::CoordinationService::Stub> stub_;
  const std::string job_token_;
  const std::string address_;
  std::mutex mu_;
  std::set<grpc::ClientContext*> in_flight_;
  bool cancelled_ = false;
};

}  // namespace mirrored::coordination
