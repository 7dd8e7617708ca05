// CoordinationRpcHandler: the thin gRPC adapter in front of the pure
// CoordinationService. It checks the job token of every call before anything
// else (a wrong or missing token gets UNAUTHENTICATED and no information),
// converts protos, and finishes each call from the service's callback — so a
// blocked barrier or key-value wait holds no server thread.
//
//   CoordinationRpcHandler handler(&service, token);
//   grpc::ServerBuilder builder;
//   builder.RegisterService(&handler);
//
// An open PollForError whose caller disconnects without having entered the
// exit barrier marks that task as lost (CoordinationService::CancelPoll);
// this is how a killed process is noticed at once.
#pragma once

#include <string>

#include "proto/coordination.grpc.pb.h"
#include "worker/coordination/cluster_view_bytes.h"
#include "worker/coordination/coordination_service.h"

namespace mirrored::coordination {

// gRPC metadata key carrying MIRRORED_JOB_TOKEN (lower case, as gRPC needs).
inline constexpr char kJobTokenMetadataKey[] = "x-mirrored-job-token";

class CoordinationRpcHandler final : public rpc::CoordinationService::CallbackService {
 public:
  // An empty `job_token` serves every caller (the server warns at start).
  CoordinationRpcHandler(coordination::CoordinationService* service,
                         std::string job_token);

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx, const rpc::RegisterRequest* req,
                                     rpc::RegisterResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const rpc::HeartbeatRequest* req,
                                      rpc::HeartbeatResponse* resp) override;
  grpc::ServerWriteReactor<rpc::PollForErrorResponse>* PollForError(
      grpc::CallbackServerContext* ctx, const rpc::PollForErrorRequest* req) override;
  grpc::ServerUnaryReactor* ReportError(grpc::CallbackServerContext* ctx,
                                        const rpc::ReportErrorRequest* req,
                                        rpc::ReportErrorResponse* resp) override;
  grpc::ServerUnaryReactor* KeyValueSet(grpc::CallbackServerContext* ctx,
                                        const rpc::KeyValueSetRequest* req,
                                        rpc::KeyValueSetResponse* resp) override;
  grpc::ServerUnaryReactor* Progress(grpc::CallbackServerContext* ctx, const rpc::ProgressRequest* req,
                                     rpc::ProgressResponse* resp) override;
  grpc::ServerUnaryReactor* KeyValueGet(grpc::CallbackServerContext* ctx,
                                        const rpc::KeyValueGetRequest* req,
                                        rpc::KeyValueGetResponse* resp) override;
  grpc::ServerUnaryReactor* WaitForKeys(grpc::CallbackServerContext* ctx,
                                        const rpc::WaitForKeysRequest* req,
                                        rpc::WaitForKeysResponse* resp) override;
  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* ctx, const rpc::BarrierRequest* req,
                                    rpc::BarrierResponse* resp) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx, const rpc::ShutdownRequest* req,
                                     rpc::ShutdownResponse* resp) override;

 private:
  // True when the call carries the job token; otherwise finishes it with
  // UNAUTHENTICATED.
  bool Authenticate(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor) const;
  grpc::Status CheckToken(grpc::CallbackServerContext* ctx) const;

  coordination::CoordinationService* const service_;
  const std::string job_token_;
  ClusterViewBytesCache view_bytes_;  // the view serialized once for every task's answer
};

}  // namespace mirrored::coordination
