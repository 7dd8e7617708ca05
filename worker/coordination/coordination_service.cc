#include "worker/coordination/coordination_service.h"

#include <arpa/inet.h>

#include <chrono>
#include <random>
#include <utility>

#include "common/logging.h"
#include "common/seconds_text.h"
#include "worker/coordination/nccl_unique_id.h"
#include "worker/coordination/task_claim.h"

namespace mirrored::coordination {
namespace {

// gRPC's peer "ipv4:10.0.0.2:41234" -> "10.0.0.2", "ipv6:[::1]:41234" ->
// "[::1]"; anything else as it is.
std::string PeerHost(std::string peer) {
  if (peer.rfind("ipv4:", 0) != 0 && peer.rfind("ipv6:", 0) != 0) return peer;
  peer.erase(0, 5);
  const size_t port = peer.rfind(':');
  if (port != std::string::npos && port > 0 && (peer.front() != '[' || peer[port - 1] == ']')) peer.resize(port);
  return peer;
}

// "[::1]" -> "::1"; anything else as it is.
std::string Unbracketed(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

bool IsIpLiteral(const std::string& host) {
  in6_addr v6{};
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A claimant told to wait registers again within a second or so (the
// agent's backoff); one silent this long has gone and is forgotten.
constexpr int64_t kWaitingClaimForgottenAfterMs = 10000;
Status ServiceStopped() {
  return UnavailableError("coordination service stopped (the chief is shutting down)");
}

}  // namespace

StatusOr<std::unique_ptr<CoordinationService>> CoordinationService::Create(
    CoordinationServiceOptions options) {
  if (options.tasks.empty()) return InvalidArgumentError("coordination service: no tasks given");
  std::set<std::string> seen;
  for (const auto& t : options.tasks) {
    if (t.empty() || !seen.insert(t).second) {
      return InvalidArgumentError("coordination service: task name \"" + t +
                                  "\" is empty or appears twice in the task list");
    }
  }
  if (options.heartbeat_timeout_ms <= 0 || options.registration_timeout_ms <= 0 ||
      options.shutdown_timeout_ms <= 0 || options.check_interval_ms <= 0) {
    return InvalidArgumentError(
        "coordination service: heartbeat_timeout_ms, registration_timeout_ms, "
        "shutdown_timeout_ms and check_interval_ms must be > 0");
  }
  if (!options.now_ms) options.now_ms = SteadyNowMs;
  if (!options.make_nccl_unique_id) options.make_nccl_unique_id = GenerateNcclUniqueId;
  return std::unique_ptr<CoordinationService>(new CoordinationService(std::move(options)));
}

CoordinationService::CoordinationService(CoordinationServiceOptions options)
    : options_(std::move(options)),
      registration_deadline_ms_(options_.now_ms() + options_.registration_timeout_ms),
      registration_note_ms_(options_.now_ms()),
      barriers_(options_.tasks.size()) {
  for (const auto& name : options_.tasks) {
    Task t;
    t.name = name;
    tasks_.push_back(std::move(t));
  }
}

CoordinationService::~CoordinationService() { Stop(); }

void CoordinationService::StartDeadlineThread() {
  std::lock_guard<std::mutex> lock(mu_);
  if (deadline_thread_.joinable() || stopped_) return;
  deadline_thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    int64_t last_round = options_.now_ms();
    while (!stopped_) {
      stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.check_interval_ms));
      if (stopped_) break;
      lock.unlock();
      last_round = CheckDeadlinesAfter(last_round);
      lock.lock();
    }
  });
}

void CoordinationService::Stop() {
  Deferred deferred;
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) {
      stopped_ = true;
      const Status s = ServiceStopped();
      for (auto& [i, done] : pending_registrations_) {
        deferred.push_back([done = std::move(done), s] { done(s); });
      }
      pending_registrations_.clear();
      barriers_.FailAll(s, &deferred);
      for (auto& [id, p] : polls_) deferred.push_back([done = std::move(p.done), s] { done(s); });
      polls_.clear();
      for (auto& done : shutdown_waiters_) {
        deferred.push_back([done = std::move(done), s] { done(s); });
      }
      shutdown_waiters_.clear();
    }
    thread = std::move(deadline_thread_);
  }
  stop_cv_.notify_all();
  told_cv_.notify_all();
  if (thread.joinable()) thread.join();
  kv_.AbortWaiters(ServiceStopped());
  Run(deferred);
}

int CoordinationService::IndexOf(const std::string& task) const {
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (tasks_[i].name == task) return static_cast<int>(i);
  }
  return -1;
}

Status CoordinationService::CheckCallerLocked(const std::string& task, uint64_t incarnation,
                                              int* index) const {
  *index = IndexOf(task);
  if (*index < 0) {
    return InvalidArgumentError("task \"" + task + "\" is not a training task of this job (" +
                                std::to_string(tasks_.size()) + " tasks, first \"" +
                                tasks_[0].name + "\")");
  }
  const Task& t = tasks_[*index];
  if (t.state == TaskState::kUnregistered) {
    return FailedPreconditionError("task " + task + " has not registered yet");
  }
  if (t.incarnation != incarnation) {
    return AbortedError("task " + task + " incarnation " + std::to_string(incarnation) +
                        " is stale: the task was registered again as incarnation " +
                        std::to_string(t.incarnation));
  }
  return OkStatus();
}

void CoordinationService::RegisterTaskAsync(const Registration& registration, RegisterCallback done) {
  const auto& [task, incarnation, device_count, cluster, peer, restarted] = registration;
  const std::string host = peer.empty() ? "" : PeerHost(peer);
  Deferred deferred;
  Status immediate;
  std::optional<RegisteredView> answer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int index = IndexOf(task);
    if (stopped_ && index >= 0 && tasks_[index].waiting_claims.count(incarnation) > 0) {
      // It was waiting for the task's process to end: what became of it
      // (failed, as told to every task; or the job is over), not a bare
      // "stopped" that would leave it registering until its deadline.
      immediate = job_error_ ? *job_error_
                             : ClaimOnAnEndedJob(task, "its coordination service stopped (the chief is shutting down)",
                                                 host.empty() ? "?" : host, /*waited=*/true);
    } else if (stopped_) {
      immediate = ServiceStopped();
    } else if (!view_ && !registration_error_ && !cluster.empty() && !options_.cluster.empty() &&
               cluster != options_.cluster) {
      immediate = RefuseOtherClusterLocked(task, cluster, index, &deferred);
    } else if (index < 0) {
      int dummy;
      immediate = CheckCallerLocked(task, incarnation, &dummy);
    } else if (device_count < 1) {
      immediate = InvalidArgumentError("task " + task + " registered with " +
                                       std::to_string(device_count) +
                                       " local devices; it needs at least 1");
    } else if (job_error_) {
      immediate = *job_error_;
      tasks_[index].told_failure = true;
      told_cv_.notify_all();
    } else if (registration_error_) {
      immediate = *registration_error_;
      tasks_[index].told_failure = true;
      told_cv_.notify_all();
    } else {
      Task& t = tasks_[index];
      const int64_t now = options_.now_ms();
      std::erase_if(t.waiting_claims, [&](const auto& claim) {
        return now - claim.second.last_asked_ms > kWaitingClaimForgottenAfterMs;
      });
      const auto waiting = t.waiting_claims.find(incarnation);
      const ClaimVerdict verdict = JudgeTaskClaim(
          ClaimedTaskLocked(index),
          {.incarnation = incarnation,
           .host = host,
           .host_listed = ListedAt(index, host),
           .restarted = restarted,
           .told_to_wait_ms = waiting == t.waiting_claims.end() ? std::nullopt
                                                                : std::optional(waiting->second.first_told_ms)},
          {.job_formed = view_.has_value(), .heartbeat_timeout_ms = options_.heartbeat_timeout_ms}, now);
      switch (verdict.kind) {
        case ClaimVerdict::Kind::kSameProcess:
          answer = *view_;  // a retried Register of the same process
          answer->task_index = index;
          break;
        case ClaimVerdict::Kind::kWait:
          t.waiting_claims[incarnation] = {.first_told_ms = verdict.first_told_to_wait_ms, .last_asked_ms = now};
          immediate = verdict.answer;
          break;
        case ClaimVerdict::Kind::kRefuse:
          t.waiting_claims.erase(incarnation);
          immediate = verdict.answer;
          break;
        case ClaimVerdict::Kind::kRestart:
          FailTaskLocked(index, verdict.failure, &deferred);
          immediate = *job_error_;
          break;
        case ClaimVerdict::Kind::kReplace:
          SupersedeRegistrationLocked(index, host, &deferred);
          [[fallthrough]];
        case ClaimVerdict::Kind::kRegister:
          TakeTaskLocked(index, registration, host, std::move(done), &deferred);
          break;
      }
    }
  }
  Run(deferred);
  if (answer) {
    done(*answer);
  } else if (!immediate.ok()) {
    done(immediate);
  }
}

Status CoordinationService::RefuseOtherClusterLocked(const std::string& task, const std::string& cluster, int index,
                                                     Deferred* deferred) {
  // Tasks started from different TF_CONFIG clusters would wait for tasks
  // the chief never expects (or meet collectives of another size): a
  // configuration error for every task, at once.
  registration_error_ = InvalidArgumentError(
      "task " + task + " was started with another cluster than the chief's: its TF_CONFIG lists the training "
      "tasks [" + cluster + "], the chief's [" + options_.cluster +
      "]; every task of a job needs the same \"cluster\" (only \"task\" differs)");
  for (auto& [pending_index, pending_done] : pending_registrations_) {
    tasks_[pending_index].told_failure = true;
    deferred->push_back([d = std::move(pending_done), e = *registration_error_] { d(e); });
  }
  pending_registrations_.clear();
  if (index >= 0) tasks_[index].told_failure = true;
  told_cv_.notify_all();
  return *registration_error_;
}

ClaimedTask CoordinationService::ClaimedTaskLocked(int index) const {
  const Task& t = tasks_[index];
  bool polling = false;
  for (const auto& [id, poll] : polls_) {
    polling = polling || (poll.task_index == index && poll.incarnation == t.incarnation);
  }
  return {.name = t.name,
          .state = t.state,
          .incarnation = t.incarnation,
          .host = t.host,
          .host_listed = ListedAt(index, t.host),
          .last_heartbeat_ms = t.last_heartbeat_ms,
          .polling = polling,
          .waiting_claims = t.waiting_claims.size()};
}

void CoordinationService::SupersedeRegistrationLocked(int index, const std::string& host, Deferred* deferred) {
  const std::string task = tasks_[index].name;
  const std::string from = host.empty() ? "" : " from " + host;
  for (auto it = pending_registrations_.begin(); it != pending_registrations_.end();) {
    if (it->first == index) {
      deferred->push_back([d = std::move(it->second), task, from] {
        d(AbortedError("registration of task " + task + " superseded by a newer process claiming it" + from +
                       " (a restart of this task, or another host given the same task in TF_CONFIG)"));
      });
      it = pending_registrations_.erase(it);
    } else {
      ++it;
    }
  }
}

void CoordinationService::TakeTaskLocked(int index, const Registration& registration, const std::string& host,
                                         RegisterCallback done, Deferred* deferred) {
  Task& t = tasks_[index];
  t.state = TaskState::kConnected;
  t.incarnation = registration.incarnation;
  t.device_count = registration.device_count;
  t.host = host;
  pending_registrations_.emplace_back(index, std::move(done));
  bool all = true;
  for (const Task& other : tasks_) all = all && other.state == TaskState::kConnected;
  if (all) CompleteRegistrationLocked(deferred);
}

bool CoordinationService::ListedAt(int index, const std::string& peer_host) const {
  if (static_cast<size_t>(index) >= options_.task_hosts.size()) return false;
  const std::string listed = Unbracketed(options_.task_hosts[static_cast<size_t>(index)]);
  return !peer_host.empty() && IsIpLiteral(listed) && listed == Unbracketed(peer_host);
}

void CoordinationService::CompleteRegistrationLocked(Deferred* deferred) {
  StatusOr<ClusterView> view = [&]() -> StatusOr<ClusterView> {
    MIRRORED_ASSIGN_OR_RETURN(std::string id, options_.make_nccl_unique_id());
    std::vector<std::string> names;
    std::vector<int> counts;
    for (const Task& t : tasks_) {
      names.push_back(t.name);
      counts.push_back(t.device_count);
    }
    std::random_device rd;
    const uint64_t generation = (uint64_t{rd()} << 32) | rd();
    return BuildClusterView(names, counts, std::move(id), generation);
  }();
  if (!view.ok()) {
    registration_error_ = view.status();
    told_cv_.notify_all();
  } else {
    view_ = RegisteredView{*view, -1};
    const int64_t now = options_.now_ms();
    for (Task& t : tasks_) t.last_heartbeat_ms = now;
    MIRRORED_LOG(INFO) << (tasks_.size() == 1 ? "the task registered; " : "all " + std::to_string(tasks_.size()) + " tasks registered; ")
                       << view_->view.DebugString();
  }
  for (auto& [index, done] : pending_registrations_) {
    if (view.ok()) {
      RegisteredView mine{*view, index};
      deferred->push_back([done = std::move(done), mine = std::move(mine)] { done(mine); });
    } else {
      tasks_[index].told_failure = true;
      deferred->push_back([done = std::move(done), s = view.status()] { done(s); });
    }
  }
  pending_registrations_.clear();
}

Status CoordinationService::Heartbeat(const std::string& task, uint64_t incarnation, uint64_t collectives) {
  std::lock_guard<std::mutex> lock(mu_);
  int index;
  MIRRORED_RETURN_IF_ERROR(CheckCallerLocked(task, incarnation, &index));
  if (job_error_) return *job_error_;
  Task& t = tasks_[index];
  t.last_heartbeat_ms = options_.now_ms();
  if (collectives != t.collectives || t.progress_ms == 0) {
    t.collectives = collectives;
    t.progress_ms = t.last_heartbeat_ms;
  }
  return OkStatus();
}

std::vector<CoordinationService::TaskProgress> CoordinationService::Progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = options_.now_ms();
  std::vector<TaskProgress> out;
  for (const Task& t : tasks_) {
    out.push_back({.task = t.name,
                   .collectives = t.collectives,
                   .ms_since_heartbeat = t.last_heartbeat_ms > 0 ? now - t.last_heartbeat_ms : -1,
                   .ms_since_progress = t.progress_ms > 0 ? now - t.progress_ms : -1});
  }
  return out;
}

uint64_t CoordinationService::PollForErrorAsync(const std::string& task, uint64_t incarnation,
                                                StatusCallback done) {
  Status immediate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int index;
    immediate = CheckCallerLocked(task, incarnation, &index);
    if (immediate.ok()) {
      if (stopped_) {
        immediate = ServiceStopped();
      } else if (job_error_) {
        immediate = *job_error_;
      } else if (tasks_[index].state == TaskState::kShutdown) {
        // OK: the job already finished cleanly.
      } else {
        const uint64_t id = next_poll_id_++;
        polls_.emplace(id, Poll{index, incarnation, std::move(done)});
        return id;
      }
    }
  }
  done(immediate);
  return 0;
}

void CoordinationService::CancelPoll(uint64_t poll_id) {
  Deferred deferred;
  StatusCallback done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = polls_.find(poll_id);
    if (it == polls_.end()) return;
    Poll poll = std::move(it->second);
    polls_.erase(it);
    done = std::move(poll.done);
    Task& t = tasks_[poll.task_index];
    if (!stopped_ && t.state == TaskState::kConnected && t.incarnation == poll.incarnation) {
      FailTaskLocked(poll.task_index,
                     "connection lost (its process died or its network went away)", &deferred);
    }
  }
  Run(deferred);
  done(CancelledError("error poll cancelled by the caller"));
}

Status CoordinationService::ReportError(const std::string& task, uint64_t incarnation,
                                        const Status& error) {
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int unregistered = IndexOf(task);
    if (incarnation == kBeforeJoining && !view_ && unregistered >= 0 &&
        tasks_[unregistered].state == TaskState::kUnregistered) {
      // A task that failed before it could register (a bad flag on its
      // host): the others would wait for it until the registration timeout.
      FailTaskLocked(unregistered, "exited with error: " + error.ToString() + " (before it joined the job)",
                     &deferred);
    } else {
      int index;
      MIRRORED_RETURN_IF_ERROR(CheckCallerLocked(task, incarnation, &index));
      FailTaskLocked(index, "exited with error: " + error.ToString(), &deferred);
    }
  }
  Run(deferred);
  return OkStatus();
}

void CoordinationService::FailTaskLocked(int index, std::string what, Deferred* deferred) {
  Task& t = tasks_[index];
  if (t.state == TaskState::kFailed) return;
  t.state = TaskState::kFailed;
  told_cv_.notify_all();
  const Status error = TaskFailure{t.name, std::move(what), std::chrono::system_clock::now()}
                           .ToStatus();
  MIRRORED_LOG(ERROR) << error.message();
  if (job_error_) return;  // the first failure is the root cause; keep it
  job_error_ = error;
  for (auto& [i, done] : pending_registrations_) {
    tasks_[i].told_failure = true;
    deferred->push_back([done = std::move(done), error] { done(error); });
  }
  pending_registrations_.clear();
  barriers_.FailAll(error, deferred);
  for (auto& [id, p] : polls_) {
    deferred->push_back([done = std::move(p.done), error] { done(error); });
  }
  polls_.clear();
  for (auto& done : shutdown_waiters_) {
    deferred->push_back([done = std::move(done), error] { done(error); });
  }
  shutdown_waiters_.clear();
  deferred->push_back([this, error] { kv_.AbortWaiters(error); });
}

std::vector<std::string> CoordinationService::WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto not_told = [this] {
    std::vector<std::string> names;
    // Once the job formed, every task's error poll tells it; the tasks
    // missing at the registration timeout are its cause, not its audience.
    const bool to_tell = !view_ && (job_error_ || (registration_error_ && !registration_timed_out_));
    if (!to_tell) return names;
    for (const Task& t : tasks_) {
      if (t.state != TaskState::kFailed && !t.told_failure) names.push_back(t.name);
    }
    return names;
  };
  told_cv_.wait_for(lock, timeout, [&] { return stopped_ || not_told().empty(); });
  return not_told();
}

Status CoordinationService::KeyValueSet(const std::string& key, std::string value,
                                        bool allow_overwrite) {
  return kv_.Set(key, std::move(value), allow_overwrite);
}

void CoordinationService::KeyValueGetAsync(const std::string& key, int64_t timeout_ms,
                                           ValueCallback done) {
  if (timeout_ms <= 0) return done(kv_.TryGet(key));
  kv_.GetAsync(key, options_.now_ms() + timeout_ms, std::move(done));
}

void CoordinationService::WaitForKeysAsync(std::vector<std::string> keys, int64_t timeout_ms,
                                           StatusCallback done) {
  kv_.WaitForKeysAsync(std::move(keys), options_.now_ms() + std::max<int64_t>(timeout_ms, 0),
                       std::move(done));
}

void CoordinationService::BarrierAsync(const std::string& name, const std::string& task,
                                       uint64_t incarnation, int64_t timeout_ms,
                                       StatusCallback done) {
  Deferred deferred;
  Status immediate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int index;
    immediate = CheckCallerLocked(task, incarnation, &index);
    if (!immediate.ok()) {
    } else if (name.empty() || timeout_ms <= 0) {
      immediate = InvalidArgumentError("barrier needs a name and a timeout_ms > 0 (got \"" + name +
                                       "\", " + std::to_string(timeout_ms) + ")");
    } else if (stopped_) {
      immediate = ServiceStopped();
    } else if (job_error_) {
      immediate = *job_error_;
    } else {
      barriers_.Arrive(name, index, options_.now_ms(), timeout_ms, std::move(done), &deferred);
    }
  }
  Run(deferred);
  if (!immediate.ok()) done(immediate);
}

void CoordinationService::ShutdownTaskAsync(const std::string& task, uint64_t incarnation,
                                            StatusCallback done) {
  Deferred deferred;
  Status immediate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int index;
    immediate = CheckCallerLocked(task, incarnation, &index);
    if (!immediate.ok()) {
    } else if (stopped_) {
      immediate = ServiceStopped();
    } else if (job_error_) {
      immediate = *job_error_;
    } else if (tasks_[index].state == TaskState::kShutdown) {
      deferred.push_back([done = std::move(done)] { done(OkStatus()); });
    } else {
      if (shutdown_arrived_.empty()) {
        shutdown_deadline_ms_ = options_.now_ms() + options_.shutdown_timeout_ms;
      }
      tasks_[index].state = TaskState::kShuttingDown;
      shutdown_arrived_.insert(index);
      shutdown_waiters_.push_back(std::move(done));
      MaybeFinishShutdownLocked(&deferred);
    }
  }
  Run(deferred);
  if (!immediate.ok()) done(immediate);
}

void CoordinationService::MaybeFinishShutdownLocked(Deferred* deferred) {
  if (shutdown_arrived_.size() != tasks_.size()) return;
  for (Task& t : tasks_) t.state = TaskState::kShutdown;
  for (auto& d : shutdown_waiters_) deferred->push_back([d = std::move(d)] { d(OkStatus()); });
  shutdown_waiters_.clear();
  for (auto& [id, p] : polls_) deferred->push_back([d = std::move(p.done)] { d(OkStatus()); });
  polls_.clear();
  MIRRORED_LOG(INFO) << "exit barrier passed by all " << tasks_.size() << " tasks";
}

std::string CoordinationService::TasksNotIn(const std::set<int>& arrived, bool skip_failed) const {
  std::string out;
  int n = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (arrived.count(static_cast<int>(i))) continue;
    if (skip_failed && tasks_[i].state == TaskState::kFailed) continue;
    if (++n <= 16) out += (out.empty() ? "" : ", ") + tasks_[i].name;
  }
  if (n > 16) out += ", ... (" + std::to_string(n) + " in all)";
  return out;
}

void CoordinationService::NoteRefusedCall(const std::string& peer) {
  const std::string host = PeerHost(peer);
  std::lock_guard<std::mutex> lock(mu_);
  if (refused_hosts_.size() >= 16 && !refused_hosts_.count(host)) return;  // enough to name the culprits
  if (refused_hosts_[host]++ == 0) {
    MIRRORED_LOG(WARNING) << "refused a call from " << host
                          << ": missing or wrong job token (every task of the job needs the same MIRRORED_JOB_TOKEN)";
  }
}

std::string CoordinationService::RefusedNoteLocked() const {
  if (refused_hosts_.empty()) return "";
  std::string hosts;
  for (const auto& [host, calls] : refused_hosts_) {
    hosts += (hosts.empty() ? "" : ", ") + host + " (" + std::to_string(calls) + (calls == 1 ? " call)" : " calls)");
  }
  return "; calls refused for a missing or wrong job token came from " + hosts +
         ": every task of the job needs the same MIRRORED_JOB_TOKEN";
}

int64_t CoordinationService::CheckDeadlinesAfter(int64_t previous_round_ms) {
  const int64_t now = options_.now_ms();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (view_ && !job_error_ && now - previous_round_ms > options_.check_interval_ms + options_.heartbeat_timeout_ms / 2) {
      MIRRORED_LOG(WARNING) << "the coordination service did not run for " << now - previous_round_ms
                            << " ms (its process was stopped or starved of CPU): the tasks' heartbeats are counted "
                               "afresh";
      for (Task& t : tasks_) t.last_heartbeat_ms = std::max(t.last_heartbeat_ms, now);
    }
  }
  CheckDeadlines();
  return now;
}

void CoordinationService::CheckDeadlines() {
  const int64_t now = options_.now_ms();
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    if (!view_ && !registration_error_ && now >= registration_deadline_ms_) {
      std::set<int> registered;
      for (size_t i = 0; i < tasks_.size(); ++i) {
        if (tasks_[i].state == TaskState::kConnected) registered.insert(static_cast<int>(i));
      }
      // Calls refused for a wrong token while tasks were missing: most
      // likely those tasks, with another MIRRORED_JOB_TOKEN, which no
      // restart fixes (exit 2, as the refused task's own).
      const std::string message =
          "registration timed out after " + std::to_string(options_.registration_timeout_ms) +
          " ms: tasks never registered: " + TasksNotIn(registered, false) + " (" + std::to_string(registered.size()) +
          " of " + std::to_string(tasks_.size()) + " registered); check that they were started and can reach the chief" +
          RefusedNoteLocked();
      registration_error_ =
          refused_hosts_.empty() ? DeadlineExceededError(message) : InvalidArgumentError(message);
      registration_timed_out_ = true;
      told_cv_.notify_all();  // nothing more to tell: see WaitUntilEveryTaskKnowsFailure
      MIRRORED_LOG(ERROR) << registration_error_->message();
      for (auto& [i, done] : pending_registrations_) {
        tasks_[i].told_failure = true;
        deferred.push_back([done = std::move(done), s = *registration_error_] { done(s); });
      }
      pending_registrations_.clear();
    }
    // A long wait for the job to form is said every 30 s, naming the tasks
    // still missing, rather than in silence until the timeout.
    if (!view_ && !registration_error_ && now - registration_note_ms_ >= 30000) {
      registration_note_ms_ = now;
      std::set<int> registered;
      for (size_t i = 0; i < tasks_.size(); ++i) {
        if (tasks_[i].state == TaskState::kConnected) registered.insert(static_cast<int>(i));
      }
      MIRRORED_LOG(INFO) << "still waiting for tasks to register: " << TasksNotIn(registered, false) << " ("
                         << registered.size() << " of " << tasks_.size() << " registered; "
                         << SecondsText(std::chrono::milliseconds(registration_deadline_ms_ - now))
                         << " left of the registration timeout)" << RefusedNoteLocked();
    }
    if (view_ && !job_error_) {
      for (size_t i = 0; i < tasks_.size(); ++i) {
        const Task& t = tasks_[i];
        const int64_t silent = now - t.last_heartbeat_ms;
        if (t.state == TaskState::kConnected && silent > options_.heartbeat_timeout_ms) {
          FailTaskLocked(static_cast<int>(i),
                         "heartbeat timeout: no heartbeat for " + std::to_string(silent) +
                             " ms (limit " + std::to_string(options_.heartbeat_timeout_ms) +
                             " ms); the process is hung, stopped or overloaded",
                         &deferred);
        }
      }
    }
    barriers_.Expire(
        now, [this](const std::set<int>& arrived) { return TasksNotIn(arrived, false); },
        &deferred);
    if (!shutdown_waiters_.empty() && now >= shutdown_deadline_ms_) {
      const Status s = DeadlineExceededError(
          "exit barrier timed out after " + std::to_string(options_.shutdown_timeout_ms) +
          " ms; tasks still running: " + TasksNotIn(shutdown_arrived_, true));
      for (auto& d : shutdown_waiters_) deferred.push_back([d = std::move(d), s] { d(s); });
      shutdown_waiters_.clear();
    }
  }
  Run(deferred);
  kv_.ExpireWaiters(now);
}

size_t CoordinationService::open_error_polls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return polls_.size();
}

size_t CoordinationService::waiting_claims(const std::string& task) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int index = IndexOf(task);
  return index < 0 ? 0 : tasks_[index].waiting_claims.size();
}

std::optional<Status> CoordinationService::job_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_error_;
}

TaskState CoordinationService::task_state(const std::string& task) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int index = IndexOf(task);
  return index < 0 ? TaskState::kUnregistered : tasks_[index].state;
}

void CoordinationService::Run(Deferred& deferred) {
  for (auto& f : deferred) f();
  deferred.clear();
}

}  // namespace mirrored::coordination
