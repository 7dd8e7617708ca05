#include "worker/coordination/coordination_service.h"

#include <chrono>
#include <utility>

#include "common/logging.h"
#include "worker/coordination/nccl_unique_id.h"
#include "worker/coordination/peer_host.h"

namespace mirrored::coordination {
namespace {

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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
  using std::chrono::milliseconds;
  if (options.heartbeat_timeout <= milliseconds::zero() || options.registration_timeout <= milliseconds::zero() ||
      options.shutdown_timeout <= milliseconds::zero() || options.check_interval <= milliseconds::zero()) {
    return InvalidArgumentError(
        "coordination service: heartbeat_timeout, registration_timeout, "
        "shutdown_timeout and check_interval must be longer than 0 ms");
  }
  if (!options.now_ms) options.now_ms = SteadyNowMs;
  if (!options.make_nccl_unique_id) options.make_nccl_unique_id = GenerateNcclUniqueId;
  return std::unique_ptr<CoordinationService>(new CoordinationService(std::move(options)));
}

CoordinationService::CoordinationService(CoordinationServiceOptions options)
    : options_(std::move(options)),
      registration_deadline_ms_(options_.now_ms() + options_.registration_timeout.count()),
      registration_note_ms_(options_.now_ms()),
      barriers_(options_.tasks.size()),
      exit_barrier_(options_.tasks.size(), options_.shutdown_timeout.count()) {
  tasks_.reserve(options_.tasks.size());
  index_of_.reserve(options_.tasks.size());
  for (const auto& name : options_.tasks) {
    index_of_.emplace(name, static_cast<int>(tasks_.size()));
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
      stop_cv_.wait_for(lock, options_.check_interval);
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
      polls_.AnswerAll(s, &deferred);
      exit_barrier_.FailAll(s, &deferred);
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
  const auto it = index_of_.find(task);
  return it == index_of_.end() ? -1 : it->second;
}

void CoordinationService::SetStateLocked(Task& task, TaskState state) {
  if (task.state == TaskState::kConnected) --connected_;
  if (state == TaskState::kConnected) ++connected_;
  task.state = state;
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
        return polls_.Open(index, incarnation, std::move(done));
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
    std::optional<ErrorPollTable::Poll> poll = polls_.Close(poll_id);
    if (!poll) return;
    done = std::move(poll->done);
    Task& t = tasks_[poll->task_index];
    if (!stopped_ && t.state == TaskState::kConnected && t.incarnation == poll->incarnation) {
      FailTaskLocked(poll->task_index,
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
  SetStateLocked(t, TaskState::kFailed);
  told_cv_.notify_all();
  const Status error = TaskFailure{t.name, std::move(what), std::chrono::system_clock::now()}
                           .ToStatus();
  // The first failure is the job's error: every task says it as it exits
  // (this one's host too), so it is not logged here as well. A later one is
  // news only here.
  if (job_error_) {  // the first failure is the root cause; keep it
    MIRRORED_LOG(WARNING) << "also: " << error.message();
    return;
  }
  job_error_ = error;
  for (auto& [i, done] : pending_registrations_) {
    tasks_[i].told_failure = true;
    deferred->push_back([done = std::move(done), error] { done(error); });
  }
  pending_registrations_.clear();
  barriers_.FailAll(error, deferred);
  polls_.AnswerAll(error, deferred);
  exit_barrier_.FailAll(error, deferred);
  deferred->push_back([this, error] { kv_.AbortWaiters(error); });
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
      SetStateLocked(tasks_[index], TaskState::kShuttingDown);
      if (exit_barrier_.Arrive(index, options_.now_ms(), std::move(done), &deferred)) {
        for (Task& t : tasks_) SetStateLocked(t, TaskState::kShutdown);
        polls_.AnswerAll(OkStatus(), &deferred);
        MIRRORED_LOG(INFO) << "exit barrier passed by all " << tasks_.size() << " tasks";
      }
    }
  }
  Run(deferred);
  if (!immediate.ok()) done(immediate);
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
  refused_calls_.Note(host);
}

int64_t CoordinationService::CheckDeadlinesAfter(int64_t previous_round_ms) {
  const int64_t now = options_.now_ms();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (view_ && !job_error_ &&
        now - previous_round_ms > options_.check_interval.count() + options_.heartbeat_timeout.count() / 2) {
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
    CheckRegistrationDeadlineLocked(now, &deferred);
    if (view_ && !job_error_) {
      for (size_t i = 0; i < tasks_.size(); ++i) {
        const Task& t = tasks_[i];
        const int64_t silent = now - t.last_heartbeat_ms;
        if (t.state == TaskState::kConnected && silent > options_.heartbeat_timeout.count()) {
          FailTaskLocked(static_cast<int>(i),
                         "heartbeat timeout: no heartbeat for " + std::to_string(silent) + " ms (limit " +
                             std::to_string(options_.heartbeat_timeout.count()) +
                             " ms); the process is hung, stopped or overloaded",
                         &deferred);
        }
      }
    }
    barriers_.Expire(
        now, [this](const std::set<int>& arrived) { return TasksNotIn(arrived, false); },
        &deferred);
    exit_barrier_.Expire(
        now, [this](const std::set<int>& arrived) { return TasksNotIn(arrived, true); }, &deferred);
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

Status CoordinationService::ServiceStopped() {
  return UnavailableError("coordination service stopped (the chief is shutting down)");
}

void CoordinationService::Run(Deferred& deferred) {
  for (auto& f : deferred) f();
  deferred.clear();
}

}  // namespace mirrored::coordination
