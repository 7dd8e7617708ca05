#include "worker/strategy/join_attempt.h"

#include <utility>

#include "common/launcher_environment.h"
#include "common/logging.h"
#include "worker/coordination/coordination_client.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"
#include "worker/strategy/failure_serving.h"

namespace mirrored {

JoinAttempt::JoinAttempt() = default;

JoinAttempt::~JoinAttempt() { Reset(); }

void JoinAttempt::Reset() {
  if (server_) server_->Stop(/*grace_ms=*/500);
  server_.reset();
  service_.reset();
  reached_service_ = false;
  reported_ = false;
}

void JoinAttempt::ReportFailure(const ClusterConfig& config, const StrategyOptions& options, const Status& error,
                                std::chrono::milliseconds wait) {
  namespace co = coordination;
  if (reported_) return;
  reported_ = true;
  // Let go of the kept service on every path; its server first.
  std::unique_ptr<co::CoordinationService> service = std::move(service_);
  std::unique_ptr<co::CoordinationServer> server = std::move(server_);
  if (error.ok() || config.is_single_local_task || config.IsEvaluator()) return;
  if (server) {
    ServeUntilEveryTaskKnows(*service, *server, wait);
    return;
  }
  // The service was reached and holds nothing more to tell: it has answered
  // every task (a registration refused, tasks that disagree), or refused
  // this one alone.
  if (reached_service_) return;
  const auto chief_address = config.cluster.AddressOf(config.cluster.ChiefTask());
  if (!chief_address) return;
  // A token gRPC cannot carry (this task's own error): no call could carry
  // it, and no task could present it to a service.
  if (!CheckJobToken(options.job_token).ok()) return;
  if (config.IsChief()) {
    ServeFailureBeforeJoining(config, options, error, *chief_address, wait);
    return;
  }
  const auto tls = co::TlsCredentials::Load(options.tls);
  if (!tls.ok()) return;  // this task's own error, maybe: the chief cannot be reached without them
  co::CoordinationClient client(co::CoordinationClient::MakeChannel(chief_address->ToString(), false, *tls),
                                options.job_token);
  co::rpc::ReportErrorRequest req;
  req.set_task(config.task.ToString());
  req.set_incarnation(co::CoordinationService::kBeforeJoining);
  req.set_code(static_cast<int>(error.code()));
  req.set_message(error.message());
  const Status sent = client.ReportError(req, wait.count(), /*wait_for_ready=*/true);
  if (sent.ok()) {
    MIRRORED_LOG(INFO) << "told the chief's coordination service at " << chief_address->ToString()
                       << ", so the other tasks stop instead of waiting for this one";
  }
}

}  // namespace mirrored
