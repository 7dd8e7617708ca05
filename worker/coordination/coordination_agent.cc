// CoordinationAgent: its threads (heartbeats, the error poll), how it
// enters kError, and its calls once connected. Connect() and the
// registration loop are in coordination_agent_registration.cc.
#include "worker/coordination/coordination_agent.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <type_traits>
#include <utility>

#include "common/logging.h"
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
                               : CoordinationClient::MakeChannel(options_.service_address, false, options_.tls,
                                                                 options_.tls_server_name),
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
  const int64_t round_limit_ms = options_.heartbeat_interval.count() + options_.heartbeat_timeout.count() + 1000;
  if (idle_ms > round_limit_ms) return idle_ms;
  // A freeze the heartbeat thread saw when it resumed, recently enough that
  // the failures it caused (peers that gave up on this task) still surface.
  const int64_t seen_ns = freeze_seen_ns_.load();
  if (seen_ns != 0 && (now_ns - seen_ns) / 1000000 <= round_limit_ms) return freeze_ms_.load();
  return std::nullopt;
}

Status CoordinationAgent::FrozenError(int64_t ms, const Status& cause) const {
  return UnavailableError(
      "this task (" + options_.task_name + ") did not run for " + std::to_string(ms) +
      " ms (stopped, suspended or starved of CPU), past the heartbeat timeout of " +
      std::to_string(options_.heartbeat_timeout.count()) +
      " ms: the other tasks have most likely given up on it and stopped (then: " + cause.ToString() + ")");
}

void CoordinationAgent::HeartbeatLoop() {
  static_assert(std::is_same_v<std::chrono::steady_clock::duration, std::chrono::nanoseconds>);
  auto last_ok = Now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_ && state_ == State::kConnected) {
    // A round every interval; other news on cv_ (the error poll opening)
    // does not start one early.
    if (cv_.wait_for(lock, options_.heartbeat_interval, [this] { return stopping_ || state_ != State::kConnected; })) {
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
    if (options_.liveness_fd >= 0 && options_.heartbeat_interval.count() <= 10000) {
      (void)!write(options_.liveness_fd, "h", 1);
    }
    rpc::HeartbeatRequest req;
    req.set_task(options_.task_name);
    req.set_incarnation(incarnation_);
    if (options_.collectives_started) req.set_collectives(options_.collectives_started->load());
    const Status s = client_.Heartbeat(req, options_.heartbeat_timeout.count());
    if (s.ok()) {
      last_ok = Now();
    } else if (frozen && !AboutThisTask(s)) {
      // The service gone (its host with it), or a peer's failure that this
      // task's silence caused: either way, the root cause is here.
      SetError(FrozenError(*frozen, s));
    } else if (s.code() == StatusCode::kAborted) {
      SetError(s);  // the service's own word (it names this task when it gave up on it)
    } else if (MsSince(last_ok) > options_.heartbeat_timeout.count()) {
      SetError(AbortedError(ServiceName() + " has not answered heartbeats for " + std::to_string(MsSince(last_ok)) +
                            " ms (limit " + std::to_string(options_.heartbeat_timeout.count()) + " ms) as of " +
                            FormatUtcTime(std::chrono::system_clock::now()) + "; last error: " + s.ToString()));
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
  return Explain(client_.KeyValueSet(req, options_.rpc_timeout.count()));
}

StatusOr<std::string> CoordinationAgent::KeyValueGet(const std::string& key, int64_t timeout_ms) {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  rpc::KeyValueGetRequest req;
  req.set_key(key);
  req.set_timeout_ms(std::max<int64_t>(timeout_ms, 1));
  StatusOr<std::string> v = client_.KeyValueGet(req, timeout_ms + options_.rpc_timeout.count());
  if (!v.ok()) return Explain(v.status());
  return v;
}

StatusOr<rpc::ProgressResponse> CoordinationAgent::Progress() {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  StatusOr<rpc::ProgressResponse> p = client_.Progress(options_.rpc_timeout.count());
  if (!p.ok()) return Explain(p.status());
  return p;
}

StatusOr<std::string> CoordinationAgent::KeyValueTryGet(const std::string& key) {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  rpc::KeyValueGetRequest req;
  req.set_key(key);
  req.set_timeout_ms(0);
  StatusOr<std::string> v = client_.KeyValueGet(req, options_.rpc_timeout.count());
  if (!v.ok()) return Explain(v.status());
  return v;
}

Status CoordinationAgent::WaitForKeys(const std::vector<std::string>& keys, int64_t timeout_ms) {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  rpc::WaitForKeysRequest req;
  for (const auto& k : keys) req.add_keys(k);
  req.set_timeout_ms(timeout_ms);
  return Explain(client_.WaitForKeys(req, timeout_ms + options_.rpc_timeout.count()));
}

Status CoordinationAgent::Barrier(const std::string& name, int64_t timeout_ms) {
  MIRRORED_RETURN_IF_ERROR(CheckConnected());
  rpc::BarrierRequest req;
  req.set_task(options_.task_name);
  req.set_incarnation(incarnation_);
  req.set_name(name);
  req.set_timeout_ms(timeout_ms);
  return Explain(client_.Barrier(req, timeout_ms + options_.rpc_timeout.count()));
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
  return client_.ReportError(req, options_.rpc_timeout.count());
}

Status CoordinationAgent::Shutdown() {
  Status status = CheckConnected();
  if (status.ok()) {
    rpc::ShutdownRequest req;
    req.set_task(options_.task_name);
    req.set_incarnation(incarnation_);
    status = Explain(client_.Shutdown(req, options_.shutdown_timeout.count() + options_.rpc_timeout.count()));
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
