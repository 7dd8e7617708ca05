// CoordinationAgent, continued: how a task joins the job. Connect() (the
// Register call, the cluster view, the heartbeat and error-poll threads
// started once the service holds this task's poll), and the registration
// loop around it: past a failed generation's service for a restarted task,
// and while the service says the task's previous process on this host
// still runs. The rest of the agent is in coordination_agent.cc.
#include "worker/coordination/coordination_agent.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "common/backoff.h"
#include "common/logging.h"
#include "common/seconds_text.h"
#include "worker/coordination/cluster_view_bytes.h"
#include "worker/coordination/registration_errors.h"
#include "worker/coordination/tls_probe.h"

namespace mirrored::coordination {
namespace {

std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }

// How often a registration waiting for the job looks at a stop request, and
// whether the channel fails its TLS handshake (or speaks none to a TLS chief).
constexpr std::chrono::milliseconds kStopCheckInterval{100};
constexpr std::chrono::milliseconds kTlsHandshakeCheckInterval{1000};
constexpr int kTlsHandshakeChecksToFail = 2;
// One probe of the chief's port with OpenSSL (tls_probe.h): connect, handshake, one answer.
constexpr std::chrono::milliseconds kTlsProbeTimeout{2000};
// The chief's agent keeps registering this much past its service's own
// registration deadline (RegisterPastFailedGeneration).
constexpr std::chrono::milliseconds kChiefRegistrationMargin{1000};
// Registering again: 50 ms, doubled after each try up to 1 s.
constexpr Backoff kRegisterBackoff{std::chrono::milliseconds(50), std::chrono::milliseconds(1000)};

}  // namespace

Status CoordinationAgent::Connect() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kDisconnected) {
      return FailedPreconditionError("agent of task " + options_.task_name + " is " +
                                     std::string(AgentStateName(state_)) +
                                     "; Connect() needs a disconnected agent");
    }
    state_ = State::kRegistering;
  }
  rpc::RegisterRequest req;
  req.set_task(options_.task_name);
  req.set_incarnation(incarnation_);
  req.set_device_count(options_.device_count);
  req.set_cluster(options_.cluster);
  req.set_restarted(options_.restarted);
  req.set_gpu(options_.gpu);
  // Said, since the call lasts until every task came (a late or missing one
  // would otherwise leave this task silent for the registration timeout).
  MIRRORED_LOG(INFO) << "registering with " << ServiceName() << "; waiting for every task of the job (up to "
                     << SecondsText(options_.registration_timeout) << ")";
  StatusOr<rpc::RegisterResponse> resp = RegisterPastFailedGeneration(req);
  Status status = resp.status();
  if (status.ok()) {
    StatusOr<ClusterView> view = ParseClusterView(resp->view());
    status = view.status();
    const int index = resp->task_index();
    if (view.ok() && (index < 0 || index >= static_cast<int>(view->tasks.size()) ||
                      view->tasks[static_cast<size_t>(index)].name != options_.task_name)) {
      status = InternalError("task " + options_.task_name + ": " + ServiceName() + " answered its registration with " +
                             "task index " + std::to_string(index) + ", which is not this task in its view of " +
                             std::to_string(view->tasks.size()) + " tasks");
    } else if (view.ok()) {
      view_ = std::move(*view);
      task_index_ = index;
    }
  } else if (status.code() == StatusCode::kDeadlineExceeded &&
             status.message().find("registration timed out") == std::string::npos &&
             status.message().find("generation that failed") == std::string::npos) {
    status =
        RendezvousTimedOut(options_.task_name, ServiceName(), options_.registration_timeout.count(), status.message());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status.ok()) {
      state_ = State::kError;
      error_ = status;
      return status;
    }
    state_ = State::kConnected;
  }
  heartbeat_round_ns_ = Clock().time_since_epoch().count();  // before the poll can fail
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  poll_thread_ = std::thread([this] { PollLoop(); });
  // Return only once the service holds our error poll: from then on, this
  // process dying is noticed at once (not only by missing heartbeats).
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, options_.rpc_timeout, [this] { return poll_open_ || state_ != State::kConnected; })) {
    lock.unlock();
    SetError(UnavailableError("the error poll of task " + options_.task_name + " to " + ServiceName() +
                              " did not open within " + std::to_string(options_.rpc_timeout.count()) + " ms"));
    lock.lock();
  }
  return state_ == State::kConnected ? OkStatus() : error_;
}

HandshakeVerdict CoordinationAgent::CheckHandshake() {
  const std::string failure = client_.LastConnectionFailure();
  if (failure.empty()) return {};
  return ReadConnectionFailure(failure, options_.tls,
                               [this] { return ProbeTls(options_.service_address, options_.tls, kTlsProbeTimeout); });
}

StatusOr<rpc::RegisterResponse> CoordinationAgent::RegisterUnlessStopped(const rpc::RegisterRequest& req,
                                                                         int64_t timeout_ms, bool* stopped_out) {
  *stopped_out = false;
  // An agent on a channel it was given (many in one process) dials no
  // address of its own to probe.
  const bool check_handshake = options_.tls.enabled() || !options_.channel;
  if (!options_.stop_waiting && !check_handshake) return client_.Register(req, timeout_ms);
  // The call lasts until every task registered (minutes, if one is late):
  // a stop signal meanwhile (options_.stop_waiting) cancels it, and so does
  // a TLS handshake that fails (it would fail the same way until the
  // deadline: a certificate is wrong, or TLS is on at one end only).
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, stopped = false;
  HandshakeVerdict handshake;
  std::thread watcher([&] {
    std::unique_lock<std::mutex> lock(mu);
    auto next_tls_check = Now() + kTlsHandshakeCheckInterval;
    int failed_checks = 0;  // in a row: one may catch a chief restarting
    while (!done) {
      if (cv.wait_for(lock, kStopCheckInterval, [&] { return done; })) break;
      if (options_.stop_waiting && options_.stop_waiting()) {
        stopped = true;
        client_.CancelAll();
        break;
      }
      if (check_handshake && Now() >= next_tls_check) {
        lock.unlock();
        HandshakeVerdict verdict = CheckHandshake();
        lock.lock();
        next_tls_check = Now() + kTlsHandshakeCheckInterval;
        failed_checks = verdict.kind == HandshakeVerdict::Kind::kNone ? 0 : failed_checks + 1;
        if (failed_checks >= kTlsHandshakeChecksToFail) {
          handshake = std::move(verdict);
          client_.CancelAll();
          break;
        }
      }
    }
  });
  StatusOr<rpc::RegisterResponse> resp = client_.Register(req, timeout_ms);
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  watcher.join();
  if (handshake.kind == HandshakeVerdict::Kind::kHandshakeFailed) {
    return TlsHandshakeFailed(options_.task_name, ServiceName(), handshake.detail);
  }
  if (handshake.kind == HandshakeVerdict::Kind::kServiceSpeaksTls) {
    return ServiceSpeaksTls(options_.task_name, ServiceName(), handshake.detail);
  }
  if (handshake.kind == HandshakeVerdict::Kind::kServiceSpeaksNoTls) {
    return ServiceSpeaksNoTls(options_.task_name, ServiceName(), handshake.detail);
  }
  if (stopped) {
    // Even if the call succeeded meanwhile: the client's calls are
    // cancelled from now on, and the task is stopping.
    *stopped_out = true;
    return CancelledError("task " + options_.task_name + ": stopped by a signal while waiting for the job's tasks to "
                          "register with " + ServiceName());
  }
  return resp;
}

StatusOr<rpc::RegisterResponse> CoordinationAgent::RegisterPastFailedGeneration(const rpc::RegisterRequest& req) {
  // The service's own registration deadline names the tasks that never came;
  // the chief's agent waits a little longer than it, so that this verdict,
  // not a bare RPC timeout, is what the chief reports.
  const auto margin =
      options_.service_task == options_.task_name ? kChiefRegistrationMargin : std::chrono::milliseconds::zero();
  RegisterRetry retry;
  retry.deadline = Now() + options_.registration_timeout + margin;
  retry.pause = kRegisterBackoff.Pause(0);
  while (true) {
    const int64_t left_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(retry.deadline - Now()).count();
    // Once it said "wait", the service answers every registration at once:
    // silent for a heartbeat timeout, it is gone (a call to a server gone
    // would wait for it until the deadline).
    const int64_t call_ms = retry.claim_waiting ? std::min(left_ms, options_.heartbeat_timeout.count()) : left_ms;
    bool stopped = false;
    StatusOr<rpc::RegisterResponse> resp = RegisterUnlessStopped(req, std::max<int64_t>(call_ms, 1), &stopped);
    if (stopped) {
      if (!retry.failed_generation) return resp;
      return AbortedError(retry.failed_generation->message() + " (stopped while waiting for the next generation)");
    }
    // Aborted: the job failed; Unavailable or Cancelled: the service went
    // away under the call (the old chief exiting; the agent's own stop is
    // checked below).
    const StatusCode code = resp.status().code();
    const bool told_to_wait = ToldToWaitForPreviousProcess(resp.status());
    if (retry.claim_waiting && !told_to_wait &&
        (code == StatusCode::kUnavailable || code == StatusCode::kCancelled || code == StatusCode::kDeadlineExceeded)) {
      return ClaimWaitEnded(resp.status(), retry.deadline);
    }
    if (told_to_wait) {
      if (std::optional<Status> stop = WaitForPreviousProcess(resp.status(), retry)) return *stop;
      continue;
    }
    if (resp.ok() || !options_.restarted) return resp;
    if (std::optional<Status> stop = WaitForNextGeneration(resp.status(), retry)) return *stop;
  }
}

Status CoordinationAgent::ClaimWaitEnded(const Status& answer, std::chrono::steady_clock::time_point deadline) {
  if (answer.code() == StatusCode::kDeadlineExceeded && Now() >= deadline) {
    // The last call went unanswered: the service may be gone as well.
    return ClaimWaitLastCallUnanswered(options_.task_name, options_.registration_timeout.count(), ServiceName());
  }
  if (!WaitBeforeRegisteringAgain(deadline, std::chrono::milliseconds::zero())) {
    return CancelledError("task " + options_.task_name + ": stopped while registering");  // its own cancel
  }
  // Told to wait, then the service went away (the job ended, or its
  // chief did): no service of that job will take this process, nor one
  // its launcher restarts (InvalidArgument: exit 2, not retried).
  return ServiceGoneWhileClaimWaiting(options_.task_name, ServiceName(), answer);
}

std::optional<Status> CoordinationAgent::WaitForPreviousProcess(const Status& answer, RegisterRetry& retry) {
  // The task's earlier process on this host may be stopping: the service
  // answers so until it ends, or refuses this one for good.
  if (!retry.claim_waiting) {
    MIRRORED_LOG(WARNING) << answer.message();
    retry.claim_waiting = true;
  }
  if (!WaitBeforeRegisteringAgain(retry.deadline, retry.pause)) {
    return CancelledError("task " + options_.task_name + ": stopped while registering");
  }
  // The task's previous process outlived this process's registration
  // deadline (a registration timeout shorter than the service's wait):
  // refused, as the service would refuse it, and never with the service's
  // "waits up to ..." answer.
  if (Now() >= retry.deadline) {
    return PreviousProcessOutlastedRegistration(options_.task_name, options_.registration_timeout.count());
  }
  if (options_.stop_waiting && options_.stop_waiting()) {
    return CancelledError("task " + options_.task_name + ": stopped by a signal while waiting for its previous "
                          "process to end");
  }
  retry.pause = kRegisterBackoff.Pause(++retry.tries);
  return std::nullopt;
}

std::optional<Status> CoordinationAgent::WaitForNextGeneration(const Status& answer, RegisterRetry& retry) {
  auto gave_up = [&] {
    return FailedGenerationOutlastedRegistration(options_.task_name, options_.registration_timeout.count(),
                                                 ServiceName(), retry.failed_generation->message());
  };
  // The chief failed before this generation could form and serves only
  // that error (MirroredStrategy::ReportFailureBeforeJoining): no next
  // generation comes from it.
  if (IsChiefFailureBeforeJoining(answer, options_.service_task)) return answer;
  const StatusCode code = answer.code();
  if (code == StatusCode::kDeadlineExceeded && retry.failed_generation) return gave_up();
  if (code != StatusCode::kAborted && code != StatusCode::kUnavailable && code != StatusCode::kCancelled) {
    return answer;
  }
  if (!retry.failed_generation) {
    MIRRORED_LOG(WARNING) << ServiceName() << " belongs to the generation that failed (" << answer.message()
                          << "); waiting for its next one";
  }
  retry.failed_generation = answer;
  // Until the old chief exits and the new one listens: poll with backoff,
  // within the registration deadline, and stop early if the agent stops.
  if (!WaitBeforeRegisteringAgain(retry.deadline, retry.pause)) {
    return CancelledError("task " + options_.task_name + ": stopped while registering");
  }
  if (Now() >= retry.deadline) return gave_up();
  if (options_.stop_waiting && options_.stop_waiting()) {
    return AbortedError(retry.failed_generation->message() + " (stopped while waiting for the next generation)");
  }
  retry.pause = kRegisterBackoff.Pause(++retry.tries);
  return std::nullopt;
}

bool CoordinationAgent::WaitBeforeRegisteringAgain(std::chrono::steady_clock::time_point deadline,
                                                   std::chrono::milliseconds pause) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto wake = std::min(deadline, Now() + pause);
  cv_.wait_until(lock, wake, [this] { return stopping_ || state_ != State::kRegistering; });
  return !stopping_ && state_ == State::kRegistering;
}

}  // namespace mirrored::coordination
