#include "worker/coordination/coordination_agent.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <type_traits>
#include <utility>

#include "common/logging.h"
#include "common/seconds_text.h"
#include "worker/coordination/task_claim.h"
#include "worker/coordination/task_failure.h"

namespace mirrored::coordination {
namespace {

uint64_t NewIncarnation() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (uint64_t{rd()} << 32) | rd();
  return v;
}

std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }

int64_t MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Now() - t).count();
}

}  // namespace

std::string_view AgentStateName(CoordinationAgent::State state) {
  switch (state) {
    case CoordinationAgent::State::kDisconnected: return "disconnected";
    case CoordinationAgent::State::kRegistering: return "registering";
    case CoordinationAgent::State::kConnected: return "connected";
    case CoordinationAgent::State::kError: return "error";
    case CoordinationAgent::State::kShutdown: return "shut down";
  }
  return "?";
}

CoordinationAgent::CoordinationAgent(CoordinationAgentOptions options)
    : options_(std::move(options)),
      incarnation_(NewIncarnation()),
      client_(options_.channel ? options_.channel
                               : CoordinationClient::MakeChannel(options_.service_address),
              options_.job_token, options_.service_address) {}

CoordinationAgent::~CoordinationAgent() { StopThreads(); }

void CoordinationAgent::SetErrorCallback(ErrorCallback callback) {
  std::lock_guard<std::mutex> lock(mu_);
  error_callback_ = std::move(callback);
}

std::string CoordinationAgent::ServiceName() const {
  std::string name = "the coordination service at " + options_.service_address;
  if (!options_.service_task.empty()) name += " (hosted by task " + options_.service_task + ")";
  return name;
}

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
  // Said, since the call lasts until every task came (a late or missing one
  // would otherwise leave this task silent for the registration timeout).
  MIRRORED_LOG(INFO) << "registering with " << ServiceName() << "; waiting for every task of the job (up to "
                     << SecondsText(std::chrono::milliseconds(options_.registration_timeout_ms)) << ")";
  StatusOr<rpc::RegisterResponse> resp = RegisterPastFailedGeneration(req);
  Status status = resp.status();
  if (status.ok()) {
    const auto& v = resp->view();
    std::vector<std::string> names;
    std::vector<int> counts;
    for (const auto& t : v.tasks()) {
      names.push_back(t.name());
      counts.push_back(t.device_count());
    }
    StatusOr<ClusterView> view =
        BuildClusterView(names, counts, v.nccl_unique_id(), v.generation());
    status = view.status();
    if (view.ok()) {
      view_ = std::move(*view);
      task_index_ = resp->task_index();
    }
  } else if (status.code() == StatusCode::kDeadlineExceeded &&
             status.message().find("registration timed out") == std::string::npos &&
             status.message().find("generation that failed") == std::string::npos) {
    status = DeadlineExceededError("task " + options_.task_name + " could not rendezvous with " +
                                   ServiceName() + " within " +
                                   std::to_string(options_.registration_timeout_ms) +
                                   " ms; check that the chief is running and reachable (" +
                                   status.message() + ")");
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
  if (!cv_.wait_for(lock, std::chrono::milliseconds(options_.rpc_timeout_ms),
                    [this] { return poll_open_ || state_ != State::kConnected; })) {
    lock.unlock();
    SetError(UnavailableError("the error poll of task " + options_.task_name + " to " +
                              ServiceName() + " did not open within " +
                              std::to_string(options_.rpc_timeout_ms) + " ms"));
    lock.lock();
  }
  return state_ == State::kConnected ? OkStatus() : error_;
}

StatusOr<rpc::RegisterResponse> CoordinationAgent::RegisterUnlessStopped(const rpc::RegisterRequest& req,
                                                                         int64_t timeout_ms, bool* stopped_out) {
  *stopped_out = false;
  if (!options_.stop_waiting) return client_.Register(req, timeout_ms);
  // The call lasts until every task registered (minutes, if one is late):
  // a stop signal meanwhile (options_.stop_waiting) cancels it.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, stopped = false;
  std::thread watcher([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!done) {
      if (cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return done; })) break;
      if (options_.stop_waiting()) {
        stopped = true;
        client_.CancelAll();
        break;
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
  const int64_t margin_ms = options_.service_task == options_.task_name ? 1000 : 0;
  const auto deadline = Now() + std::chrono::milliseconds(options_.registration_timeout_ms + margin_ms);
  auto pause = std::chrono::milliseconds(50);
  std::optional<Status> failed_generation;  // what the old service last said
  bool claim_waiting = false;                // told to wait for the task's previous process
  auto gave_up = [&] {
    return DeadlineExceededError("task " + options_.task_name + " could not rendezvous within " +
                                 std::to_string(options_.registration_timeout_ms) + " ms: " + ServiceName() +
                                 " only answered for the generation that failed (" +
                                 failed_generation->message() + "); was the chief's task restarted?");
  };
  // Told to wait for the task's previous process, which outlived this
  // process's registration deadline (a registration timeout shorter than
  // the service's wait): refused, as the service would refuse it, and never
  // with the service's "waits up to ..." answer.
  auto claim_wait_ran_out = [&] {
    return InvalidArgumentError(
        "task " + options_.task_name + " is still running: its process on this host did not end within this "
        "second process's registration timeout (" + std::to_string(options_.registration_timeout_ms) +
        " ms), spent waiting for it; this second process claiming it is refused: every process of a job needs its "
        "own task (stop the other process running it, another launcher's or job's, or check TF_CONFIG's \"task\" "
        "here)");
  };
  // Told to wait, then the service went away (the job ended, or its chief
  // did): no service of that job will take this process, nor one its
  // launcher restarts (InvalidArgument: exit 2, not retried).
  auto service_gone_while_claim_waiting = [&](const Status& cause) {
    return InvalidArgumentError("task " + options_.task_name + ": " + ServiceName() + " stopped answering (" +
                                cause.ToString() +
                                ") while this second process waited for the task's process on this host to end: the "
                                "job that ran it has ended, or its chief is gone; this process has no job to join "
                                "(run the job again, every task of it, to go on)");
  };
  while (true) {
    const int64_t left_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Now()).count();
    // Once it said "wait", the service answers every registration at once:
    // silent for a heartbeat timeout, it is gone (a call to a server gone
    // would wait for it until the deadline).
    const int64_t call_ms = claim_waiting ? std::min(left_ms, options_.heartbeat_timeout_ms) : left_ms;
    bool stopped = false;
    StatusOr<rpc::RegisterResponse> resp = RegisterUnlessStopped(req, std::max<int64_t>(call_ms, 1), &stopped);
    if (stopped) {
      if (!failed_generation) return resp;
      return AbortedError(failed_generation->message() + " (stopped while waiting for the next generation)");
    }
    // Aborted: the job failed; Unavailable or Cancelled: the service went
    // away under the call (the old chief exiting; the agent's own stop is
    // checked below).
    const StatusCode code = resp.status().code();
    const bool told_to_wait = code == StatusCode::kUnavailable &&
                              resp.status().message().find(kPreviousProcessStillRunning) != std::string_view::npos;
    if (claim_waiting && !told_to_wait &&
        (code == StatusCode::kUnavailable || code == StatusCode::kCancelled || code == StatusCode::kDeadlineExceeded)) {
      if (code == StatusCode::kDeadlineExceeded && Now() >= deadline) {
        // The last call went unanswered: the service may be gone as well.
        return InvalidArgumentError(
            "task " + options_.task_name + ": this second process claiming it spent its registration timeout (" +
            std::to_string(options_.registration_timeout_ms) + " ms) waiting for the task's process on this host "
            "to end, and " + ServiceName() + " did not answer its last call: either that process still runs (stop "
            "it, or check TF_CONFIG's \"task\" here) or the job's chief is gone (run the job again)");
      }
      if (!WaitBeforeRegisteringAgain(deadline, std::chrono::milliseconds(0))) {
        return CancelledError("task " + options_.task_name + ": stopped while registering");  // its own cancel
      }
      return service_gone_while_claim_waiting(resp.status());
    }
    if (told_to_wait) {
      // The task's earlier process on this host may be stopping: the
      // service answers so until it ends, or refuses this one for good.
      if (!claim_waiting) {
        MIRRORED_LOG(WARNING) << resp.status().message();
        claim_waiting = true;
      }
      if (!WaitBeforeRegisteringAgain(deadline, pause)) {
        return CancelledError("task " + options_.task_name + ": stopped while registering");
      }
      if (Now() >= deadline) return claim_wait_ran_out();
      if (options_.stop_waiting && options_.stop_waiting()) {
        return CancelledError("task " + options_.task_name + ": stopped by a signal while waiting for its previous "
                              "process to end");
      }
      pause = std::min(pause * 2, std::chrono::milliseconds(1000));
      continue;
    }
    if (resp.ok() || !options_.restarted) return resp;
    // The chief failed before this generation could form and serves only
    // that error (MirroredStrategy::ReportFailureBeforeJoining): no next
    // generation comes from it.
    const std::string_view message = resp.status().message();
    if (code == StatusCode::kAborted && message.starts_with("task " + options_.service_task + " failed at ") &&
        message.ends_with("(before it joined the job)")) {
      return resp;
    }
    if (code == StatusCode::kDeadlineExceeded && failed_generation) return gave_up();
    if (code != StatusCode::kAborted && code != StatusCode::kUnavailable && code != StatusCode::kCancelled)
      return resp;
    if (!failed_generation) {
      MIRRORED_LOG(WARNING) << ServiceName() << " belongs to the generation that failed ("
                            << resp.status().message() << "); waiting for its next one";
    }
    failed_generation = resp.status();
    // Until the old chief exits and the new one listens: poll with backoff,
    // within the registration deadline, and stop early if the agent stops.
    if (!WaitBeforeRegisteringAgain(deadline, pause)) {
      return CancelledError("task " + options_.task_name + ": stopped while registering");
    }
    if (Now() >= deadline) return gave_up();
    if (options_.stop_waiting && options_.stop_waiting()) {
      return AbortedError(failed_generation->message() + " (stopped while waiting for the next generation)");
    }
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

bool CoordinationAgent::WaitBeforeRegisteringAgain(std::chrono::steady_clock::time_point deadline,
                                                   std::chrono::milliseconds pause) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto wake = std::min(deadline, Now() + pause);
  cv_.wait_until(lock, wake, [this] { return stopping_ || state_ != State::kRegistering; });
  return !stopping_ && state_ == State::kRegistering;
}

std::chrono::steady_clock::time_point CoordinationAgent::Clock() const {
  if (options_.clock) return options_.clock();
  // CLOCK_BOOTTIME: unlike steady_clock (CLOCK_MONOTONIC), it counts a
  // suspended machine's sleep. Only differences of it are used.
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

std::optional<int64_t> CoordinationAgent::FrozenForMs() const {
  const int64_t round_ns = heartbeat_round_ns_.load();
  if (round_ns == 0) return std::nullopt;  // no round yet
  const int64_t now_ns = Clock().time_since_epoch().count();
  const int64_t idle_ms = (now_ns - round_ns) / 1000000;
  const int64_t round_limit_ms = options_.heartbeat_interval_ms + options_.heartbeat_timeout_ms + 1000;
  if (idle_ms > round_limit_ms) return idle_ms;
  // A freeze the heartbeat thread saw when it resumed, recently enough that
  // the failures it caused (peers that gave up on this task) still surface.
  const int64_t seen_ns = freeze_seen_ns_.load();
  if (seen_ns != 0 && (now_ns - seen_ns) / 1000000 <= round_limit_ms) return freeze_ms_.load();
  return std::nullopt;
}

Status CoordinationAgent::FrozenError(int64_t ms, const Status& cause) const {
  return UnavailableError("this task (" + options_.task_name + ") did not run for " + std::to_string(ms) +
                          " ms (stopped, suspended or starved of CPU), past the heartbeat timeout of " +
                          std::to_string(options_.heartbeat_timeout_ms) +
                          " ms: the other tasks have most likely given up on it and stopped (then: " +
                          cause.ToString() + ")");
}

void CoordinationAgent::HeartbeatLoop() {
  static_assert(std::is_same_v<std::chrono::steady_clock::duration, std::chrono::nanoseconds>);
  auto last_ok = Now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_ && state_ == State::kConnected) {
    // A round every interval; other news on cv_ (the error poll opening)
    // does not start one early.
    if (cv_.wait_for(lock, std::chrono::milliseconds(options_.heartbeat_interval_ms),
                     [this] { return stopping_ || state_ != State::kConnected; })) {
      break;
    }
    lock.unlock();
    // Read before the round begins: a freeze in the last round (in the wait
    // or in the call) shows as a round far longer than any can take.
    const std::optional<int64_t> frozen = FrozenForMs();
    heartbeat_round_ns_ = Clock().time_since_epoch().count();
    if (frozen) {
      freeze_ms_ = *frozen;
      freeze_seen_ns_ = heartbeat_round_ns_.load();
    }
    // A sign of life for the launcher (non-blocking: a full pipe is as good);
    // rounds over 10 s apart are too sparse for its 30 s: none then.
    if (options_.liveness_fd >= 0 && options_.heartbeat_interval_ms <= 10000) {
      (void)!write(options_.liveness_fd, "h", 1);
    }
    rpc::HeartbeatRequest req;
    req.set_task(options_.task_name);
    req.set_incarnation(incarnation_);
    if (options_.collectives_started) req.set_collectives(options_.collectives_started->load());
    const Status s = client_.Heartbeat(req, options_.heartbeat_timeout_ms);
    if (s.ok()) {
      last_ok = Now();
    } else if (frozen && !AboutThisTask(s)) {
      // The service gone (its host with it), or a peer's failure that this
      // task's silence caused: either way, the root cause is here.
      SetError(FrozenError(*frozen, s));
    } else if (s.code() == StatusCode::kAborted) {
      SetError(s);  // the service's own word (it names this task when it gave up on it)
    } else if (MsSince(last_ok) > options_.heartbeat_timeout_ms) {
      SetError(AbortedError(ServiceName() + " has not answered heartbeats for " +
                            std::to_string(MsSince(last_ok)) + " ms (limit " +
                            std::to_string(options_.heartbeat_timeout_ms) + " ms) as of " +
                            FormatUtcTime(std::chrono::system_clock::now()) +
                            "; last error: " + s.ToString()));
    }
    lock.lock();
  }
  // No more rounds (shutdown, error): the launcher must not take the silence
  // for a freeze.
  if (options_.liveness_fd >= 0) (void)!write(options_.liveness_fd, "S", 1);
}

void CoordinationAgent::PollLoop() {
  rpc::PollForErrorRequest req;
  req.set_task(options_.task_name);
  req.set_incarnation(incarnation_);
  const Status s = client_.PollForError(req, [this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      poll_open_ = true;
    }
    cv_.notify_all();
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || s.ok()) return;  // we cancelled it, or the job finished cleanly
  }
  // While this process did not run, the service may have declared this
  // task failed and its chief exited, or (this being the chief) its peers
  // gave up on it and left: the root cause is here either way.
  if (std::optional<int64_t> frozen = FrozenForMs(); frozen && !AboutThisTask(s)) {
    SetError(FrozenError(*frozen, s));
    return;
  }
  SetError(s.code() == StatusCode::kAborted ? s : ServiceLost(s));
}

Status CoordinationAgent::ServiceLost(const Status& cause) const {
  return AbortedError(ServiceName() + " was lost at " +
                      FormatUtcTime(std::chrono::system_clock::now()) +
                      " (the task hosting it has probably died): " + cause.ToString());
}

bool CoordinationAgent::AboutThisTask(const Status& s) const {
  return s.code() == StatusCode::kAborted && s.message().rfind("task " + options_.task_name + " failed at ", 0) == 0;
}

void CoordinationAgent::SetError(const Status& reported) {
  // The job error names this very task when the service gave up on it (a
  // heartbeat timeout while this process was stopped or frozen): say so,
  // rather than blame "task <this one>" as if it were a peer.
  // Not an error of the job's: this task's own failure (exit 1, not 3).
  Status error = reported;
  const std::string self = "task " + options_.task_name + " failed at ";
  if (AboutThisTask(reported)) {
    {
      // The echo of this task's own ReportError: the error it reports is set
      // right after, as it is.
      std::lock_guard<std::mutex> lock(mu_);
      if (reporting_) return;
    }
    error = UnavailableError("the coordination service declared this task (" + options_.task_name + ") failed at " +
                             reported.message().substr(self.size()) + "; the other tasks have stopped");
  }
  ErrorCallback callback;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kError || state_ == State::kShutdown) return;
    state_ = State::kError;
    error_ = error;
    callback = error_callback_;
  }
  cv_.notify_all();
  // Not logged: the task returns this error and its exit line says it (a
  // line here repeated it on every task; a full disk was said 6 times).
  client_.CancelAll();
  if (callback) callback(error);
}

Status CoordinationAgent::CheckConnected() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kConnected) return OkStatus();
  if (state_ == State::kError) return error_;
  return FailedPreconditionError("agent of task " + options_.task_name + " is " +
                                 std::string(AgentStateName(state_)) + ", not connected");
}

Status CoordinationAgent::Explain(const Status& call_status) {
  if (call_status.ok()) return call_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kError) return error_;
    const bool lost = call_status.code() == StatusCode::kUnavailable ||
                      call_status.code() == StatusCode::kCancelled;
    if (!lost || stopping_ || state_ != State::kConnected) return call_status;
  }
  // The call could not reach the service; the error poll may not have
  // noticed yet. Either way the job cannot go on.
  SetError(ServiceLost(call_status));
  return error();
}

Status CoordinationAgent::KeyValueSet(const std::string& key, const std::string& value,
                                      bool allow_overwrite) {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  rpc::KeyValueSetRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_allow_overwrite(allow_overwrite);
  return Explain(client_.KeyValueSet(req, options_.rpc_timeout_ms));
}

StatusOr<std::string> CoordinationAgent::KeyValueGet(const std::string& key, int64_t timeout_ms) {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  rpc::KeyValueGetRequest req;
  req.set_key(key);
  req.set_timeout_ms(std::max<int64_t>(timeout_ms, 1));
  StatusOr<std::string> v = client_.KeyValueGet(req, timeout_ms + options_.rpc_timeout_ms);
  if (!v.ok()) return Explain(v.status());
  return v;
}

StatusOr<rpc::ProgressResponse> CoordinationAgent::Progress() {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  StatusOr<rpc::ProgressResponse> p = client_.Progress(options_.rpc_timeout_ms);
  if (!p.ok()) return Explain(p.status());
  return p;
}

StatusOr<std::string> CoordinationAgent::KeyValueTryGet(const std::string& key) {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  rpc::KeyValueGetRequest req;
  req.set_key(key);
  req.set_timeout_ms(0);
  StatusOr<std::string> v = client_.KeyValueGet(req, options_.rpc_timeout_ms);
  if (!v.ok()) return Explain(v.status());
  return v;
}

Status CoordinationAgent::WaitForKeys(const std::vector<std::string>& keys, int64_t timeout_ms) {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  rpc::WaitForKeysRequest req;
  for (const auto& k : keys) req.add_keys(k);
  req.set_timeout_ms(timeout_ms);
  return Explain(client_.WaitForKeys(req, timeout_ms + options_.rpc_timeout_ms));
}

Status CoordinationAgent::Barrier(const std::string& name, int64_t timeout_ms) {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  rpc::BarrierRequest req;
  req.set_task(options_.task_name);
  req.set_incarnation(incarnation_);
  req.set_name(name);
  req.set_timeout_ms(timeout_ms);
  return Explain(client_.Barrier(req, timeout_ms + options_.rpc_timeout_ms));
}

Status CoordinationAgent::ReportError(const Status& error) {
  const Status sent = TellFailure(error);
  SetError(error);
  return sent;
}

Status CoordinationAgent::TellFailure(const Status& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reporting_ = true;
  }
  rpc::ReportErrorRequest req;
  req.set_task(options_.task_name);
  req.set_incarnation(incarnation_);
  req.set_code(static_cast<int>(error.code()));
  req.set_message(error.message());
  return client_.ReportError(req, options_.rpc_timeout_ms);
}

Status CoordinationAgent::Shutdown() {
  Status status = CheckConnected();
  if (status.ok()) {
    rpc::ShutdownRequest req;
    req.set_task(options_.task_name);
    req.set_incarnation(incarnation_);
    status = Explain(
        client_.Shutdown(req, options_.shutdown_timeout_ms + options_.rpc_timeout_ms));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status.ok()) state_ = State::kShutdown;
  }
  StopThreads();
  return status;
}

void CoordinationAgent::StopThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  client_.CancelAll();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  if (poll_thread_.joinable()) poll_thread_.join();
}

CoordinationAgent::State CoordinationAgent::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

Status CoordinationAgent::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ == State::kError ? error_ : OkStatus();
}

}  // namespace mirrored::coordination
