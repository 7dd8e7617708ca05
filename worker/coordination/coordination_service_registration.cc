// CoordinationService, continued: how the job forms. A process's claim to
// a task (judged by JudgeTaskClaim), the rendezvous once every task has
// registered (the cluster view and its NCCL id), the registration timeout,
// and telling every task why the job failed to form. The rest of the
// service is in coordination_service.cc.
#include "worker/coordination/coordination_service.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "common/logging.h"
#include "common/seconds_text.h"
#include "worker/coordination/nccl_unique_id.h"
#include "worker/coordination/peer_host.h"
#include "worker/coordination/task_claim.h"

namespace mirrored::coordination {
namespace {

// A claimant told to wait registers again within a second or so (the
// agent's backoff); one silent this long has gone and is forgotten.
constexpr std::chrono::milliseconds kWaitingClaimForgottenAfter{10000};

}  // namespace

void CoordinationService::RegisterTaskAsync(const Registration& registration, RegisterCallback done) {
  const auto& [task, incarnation, device_count, cluster, peer, restarted, gpu] = registration;
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
      const ClaimVerdict verdict = JudgeClaimLocked(index, registration, host, now);
      switch (verdict.kind) {
        case ClaimVerdict::Kind::kSameProcess:
          answer = RegisteredView{view_, index};  // a retried Register of the same process
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

ClaimVerdict CoordinationService::JudgeClaimLocked(int index, const Registration& registration,
                                                   const std::string& host, int64_t now) {
  Task& t = tasks_[index];
  std::erase_if(t.waiting_claims, [&](const auto& claim) {
    return now - claim.second.last_asked_ms > kWaitingClaimForgottenAfter.count();
  });
  const auto waiting = t.waiting_claims.find(registration.incarnation);
  return JudgeTaskClaim(
      ClaimedTaskLocked(index),
      {.incarnation = registration.incarnation,
       .host = host,
       .host_listed = ListedAt(index, host),
       .restarted = registration.restarted,
       .told_to_wait_ms =
           waiting == t.waiting_claims.end() ? std::nullopt : std::optional(waiting->second.first_told_ms)},
      {.job_formed = view_ != nullptr, .heartbeat_timeout = options_.heartbeat_timeout}, now);
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
  return {.name = t.name,
          .state = t.state,
          .incarnation = t.incarnation,
          .host = t.host,
          .host_listed = ListedAt(index, t.host),
          .last_heartbeat_ms = t.last_heartbeat_ms,
          .polling = polls_.IsOpen(index, t.incarnation),
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
  SetStateLocked(t, TaskState::kConnected);
  t.incarnation = registration.incarnation;
  t.device_count = registration.device_count;
  t.gpu = registration.gpu;
  t.host = host;
  pending_registrations_.emplace_back(index, std::move(done));
  if (connected_ == tasks_.size()) CompleteRegistrationLocked(deferred);
}

bool CoordinationService::ListedAt(int index, const std::string& peer_host) const {
  if (static_cast<size_t>(index) >= options_.task_hosts.size()) return false;
  return ListedIpMatches(options_.task_hosts[static_cast<size_t>(index)], peer_host);
}

void CoordinationService::CompleteRegistrationLocked(Deferred* deferred) {
  StatusOr<ClusterView> view = [&]() -> StatusOr<ClusterView> {
    const bool any_gpu = std::any_of(tasks_.begin(), tasks_.end(), [](const Task& t) { return t.gpu; });
    MIRRORED_ASSIGN_OR_RETURN(std::string id, any_gpu ? options_.make_nccl_unique_id() : RandomUniqueIdBytes());
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
    view_ = std::make_shared<const ClusterView>(std::move(*view));
    const int64_t now = options_.now_ms();
    for (Task& t : tasks_) t.last_heartbeat_ms = now;
    MIRRORED_LOG(INFO) << (tasks_.size() == 1 ? "the task registered; " : "all " + std::to_string(tasks_.size()) + " tasks registered; ")
                       << view_->DebugString();
  }
  for (auto& [index, done] : pending_registrations_) {
    if (view_) {
      deferred->push_back([done = std::move(done), mine = RegisteredView{view_, index}] { done(mine); });
    } else {
      tasks_[index].told_failure = true;
      deferred->push_back([done = std::move(done), s = *registration_error_] { done(s); });
    }
  }
  pending_registrations_.clear();
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

void CoordinationService::CheckRegistrationDeadlineLocked(int64_t now, Deferred* deferred) {
  if (!view_ && !registration_error_ && now >= registration_deadline_ms_) {
    std::set<int> registered;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (tasks_[i].state == TaskState::kConnected) registered.insert(static_cast<int>(i));
    }
    // Calls refused for a wrong token while tasks were missing: most
    // likely those tasks, with another MIRRORED_JOB_TOKEN, which no
    // restart fixes (exit 2, as the refused task's own).
    const std::string message =
        "registration timed out after " + std::to_string(options_.registration_timeout.count()) +
        " ms: tasks never registered: " + TasksNotIn(registered, false) + " (" + std::to_string(registered.size()) +
        " of " + std::to_string(tasks_.size()) + " registered); check that they were started and can reach the chief" +
        refused_calls_.Describe();
    registration_error_ =
        refused_calls_.empty() ? DeadlineExceededError(message) : InvalidArgumentError(message);
    registration_timed_out_ = true;
    told_cv_.notify_all();  // nothing more to tell: see WaitUntilEveryTaskKnowsFailure
    MIRRORED_LOG(ERROR) << registration_error_->message();
    for (auto& [i, done] : pending_registrations_) {
      tasks_[i].told_failure = true;
      deferred->push_back([done = std::move(done), s = *registration_error_] { done(s); });
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
                       << " left of the registration timeout)" << refused_calls_.Describe();
  }
}

}  // namespace mirrored::coordination
