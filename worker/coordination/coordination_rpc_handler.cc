#include "worker/coordination/coordination_rpc_handler.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <utility>

#include "worker/coordination/grpc_status.h"

namespace mirrored::coordination {
namespace {

// Constant-time comparison, so the token cannot be guessed byte by byte.
bool TokensEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}


// The long poll. Sends one "open" message once the service holds the poll,
// then finishes with the service's status. Writes and Finish are serialized
// (Finish waits for an outstanding write). Lifetime: deleted once OnDone ran
// and Start returned (the service may finish the call inside
// PollForErrorAsync).
class PollReactor final : public grpc::ServerWriteReactor<rpc::PollForErrorResponse> {
 public:
  explicit PollReactor(coordination::CoordinationService* service) : service_(service) {
    opened_.set_open(true);
  }

  void Start(const rpc::PollForErrorRequest& req) {
    const uint64_t id = service_->PollForErrorAsync(
        req.task(), req.incarnation(), [this](const Status& s) { Done(ToGrpcStatus(s)); });
    bool cancel_now = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id_ = id;
      cancel_now = cancelled_ && id != 0;
      if (id != 0 && !finished_) {
        writing_ = true;
        StartWrite(&opened_);
      }
    }
    if (cancel_now) service_->CancelPoll(id);
    Unref();
  }

  // Finished without reaching the service (bad token).
  void Refuse(const grpc::Status& status) {
    Finish(status);
    Unref();
  }

  void OnWriteDone(bool /*ok*/) override {
    std::optional<grpc::Status> finish;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      finish.swap(pending_finish_);
    }
    // Outside the lock: once Finish is called, OnDone may delete us.
    if (finish) Finish(*finish);
  }

  void OnCancel() override {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      id = id_;
    }
    if (id != 0) service_->CancelPoll(id);
  }

  void OnDone() override { Unref(); }

 private:
  void Done(const grpc::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
      if (writing_) {
        pending_finish_ = status;  // OnWriteDone finishes
        return;
      }
    }
    Finish(status);
  }

  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

  coordination::CoordinationService* const service_;
  rpc::PollForErrorResponse opened_;
  std::atomic<int> refs_{2};
  std::mutex mu_;
  uint64_t id_ = 0;
  bool cancelled_ = false;
  bool writing_ = false;
  bool finished_ = false;
  std::optional<grpc::Status> pending_finish_;
};

}  // namespace

CoordinationRpcHandler::CoordinationRpcHandler(coordination::CoordinationService* service,
                                               std::string job_token)
    : service_(service), job_token_(std::move(job_token)) {}

grpc::Status CoordinationRpcHandler::CheckToken(grpc::CallbackServerContext* ctx) const {
  if (job_token_.empty()) return grpc::Status::OK;
  const auto& md = ctx->client_metadata();
  auto it = md.find(kJobTokenMetadataKey);
  if (it != md.end() &&
      TokensEqual(std::string_view(it->second.data(), it->second.size()), job_token_)) {
    return grpc::Status::OK;
  }
  service_->NoteRefusedCall(ctx->peer());
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "the coordination service refused the call: missing or wrong job token "
                      "(set MIRRORED_JOB_TOKEN to the job's token)");
}

bool CoordinationRpcHandler::Authenticate(grpc::CallbackServerContext* ctx,
                                          grpc::ServerUnaryReactor* reactor) const {
  grpc::Status s = CheckToken(ctx);
  if (!s.ok()) reactor->Finish(s);
  return s.ok();
}

grpc::ServerUnaryReactor* CoordinationRpcHandler::Register(grpc::CallbackServerContext* ctx,
                                                           const rpc::RegisterRequest* req,
                                                           rpc::RegisterResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!Authenticate(ctx, reactor)) return reactor;
  service_->RegisterTaskAsync({.task = req->task(),
                               .incarnation = req->incarnation(),
                               .device_count = req->device_count(),
                               .cluster = req->cluster(),
                               .peer = ctx->peer(),
                               .restarted = req->restarted(),
                               .gpu = req->gpu()},
                              [this, reactor, resp](const StatusOr<RegisteredView>& v) {
                                if (v.ok()) {
                                  resp->set_view(*view_bytes_.Get(v->view));
                                  resp->set_task_index(v->task_index);
                                }
                                reactor->Finish(ToGrpcStatus(v.status()));
                              });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationRpcHandler::Heartbeat(grpc::CallbackServerContext* ctx,
                                                            const rpc::HeartbeatRequest* req,
                                                            rpc::HeartbeatResponse*) {
  auto* reactor = ctx->DefaultReactor();
  if (!Authenticate(ctx, reactor)) return reactor;
  reactor->Finish(ToGrpcStatus(service_->Heartbeat(req->task(), req->incarnation(), req->collectives())));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationRpcHandler::Progress(grpc::CallbackServerContext* ctx,
                                                           const rpc::ProgressRequest*,
                                                           rpc::ProgressResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!Authenticate(ctx, reactor)) return reactor;
  for (const CoordinationService::TaskProgress& p : service_->Progress()) {
    rpc::TaskProgress* t = resp->add_tasks();
    t->set_task(p.task);
    t->set_collectives(p.collectives);
    t->set_ms_since_heartbeat(p.ms_since_heartbeat);
    t->set_ms_since_progress(p.ms_since_progress);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<rpc::PollForErrorResponse>* CoordinationRpcHandler::PollForError(
    grpc::CallbackServerContext* ctx, const rpc::PollForErrorRequest* req) {
  auto* reactor = new PollReactor(service_);
  grpc::Status token = CheckToken(ctx);
  if (!token.ok()) {
    reactor->Refuse(token);
  } else {
    reactor->Start(*req);
  }
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationRpcHandler::ReportError(grpc::CallbackServerContext* ctx,
                                                              const rpc::ReportErrorRequest* req,
                                                              rpc::ReportErrorResponse*) {
  auto* reactor = ctx->DefaultReactor();
  if (!Authenticate(ctx, reactor)) return reactor;
  const Status error(static_cast<StatusCode>(req->code()), req->message());
  reactor->Finish(ToGrpcStatus(service_->ReportError(req->task(), req->incarnation(), error)));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationRpcHandler::KeyValueSet(grpc::CallbackServerContext* ctx,
                                                              const rpc::KeyValueSetRequest* req,
                                                              rpc::KeyValueSetResponse*) {
  auto* reactor = ctx->DefaultReactor();
  if (!Authenticate(ctx, reactor)) return reactor;
  reactor->Finish(
      ToGrpcStatus(service_->KeyValueSet(req->key(), req->value(), req->allow_overwrite())));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationRpcHandler::KeyValueGet(grpc::CallbackServerContext* ctx,
                                                              const rpc::KeyValueGetRequest* req,
                                                              rpc::KeyValueGetResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!Authenticate(ctx, reactor)) return reactor;
  service_->KeyValueGetAsync(req->key(), req->timeout_ms(),
                             [reactor, resp](const StatusOr<std::string>& v) {
                               if (v.ok()) resp->set_value(*v);
                               reactor->Finish(ToGrpcStatus(v.status()));
                             });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationRpcHandler::WaitForKeys(grpc::CallbackServerContext* ctx,
                                                              const rpc::WaitForKeysRequest* req,
                                                              rpc::WaitForKeysResponse*) {
  auto* reactor = ctx->DefaultReactor();
  if (!Authenticate(ctx, reactor)) return reactor;
  service_->WaitForKeysAsync({req->keys().begin(), req->keys().end()}, req->timeout_ms(),
                             [reactor](const Status& s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationRpcHandler::Barrier(grpc::CallbackServerContext* ctx,
                                                          const rpc::BarrierRequest* req,
                                                          rpc::BarrierResponse*) {
  auto* reactor = ctx->DefaultReactor();
  if (!Authenticate(ctx, reactor)) return reactor;
  service_->BarrierAsync(req->name(), req->task(), req->incarnation(), req->timeout_ms(),
                         [reactor](const Status& s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinationRpcHandler::Shutdown(grpc::CallbackServerContext* ctx,
                                                           const rpc::ShutdownRequest* req,
                                                           rpc::ShutdownResponse*) {
  auto* reactor = ctx->DefaultReactor();
  if (!Authenticate(ctx, reactor)) return reactor;
  service_->ShutdownTaskAsync(req->task(), req->incarnation(),
                              [reactor](const Status& s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

}  // namespace mirrored::coordination
