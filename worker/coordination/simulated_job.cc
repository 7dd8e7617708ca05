#include "worker/coordination/simulated_job.h"

#include <time.h>

#include <atomic>
#include <utility>

namespace mirrored::coordination {
namespace {

// A barrier's own deadline in the simulation: far past anything it takes.
constexpr std::chrono::milliseconds kSimulatedBarrierTimeout{60000};
// The registration timeout of the simulated service: long enough for 16,384
// tasks on a loaded machine.
constexpr std::chrono::milliseconds kSimulatedRegistrationTimeout{300000};

// This thread's CPU time, in ms.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double MsSince(double start_cpu_ms) { return ThreadCpuMs() - start_cpu_ms; }

std::vector<std::string> TaskNames(int tasks) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(tasks));
  for (int i = 0; i < tasks; ++i) names.push_back(i == 0 ? "chief:0" : "worker:" + std::to_string(i - 1));
  return names;
}

// Counts the answers of N asynchronous calls; the first error is kept.
struct Answers {
  std::mutex mu;
  int ok = 0;
  std::optional<Status> first_error;
  void Note(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (s.ok()) {
      ++ok;
    } else if (!first_error) {
      first_error = s;
    }
  }
  Status Check(const std::string& what, int expected) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error) return *first_error;
    if (ok == expected) return OkStatus();
    return InternalError(what + ": " + std::to_string(ok) + " of " + std::to_string(expected) +
                         " simulated tasks answered OK once the last had called");
  }
};

}  // namespace

StatusOr<std::unique_ptr<SimulatedJob>> SimulatedJob::Create(SimulatedJobOptions options) {
  const double start = ThreadCpuMs();
  std::unique_ptr<SimulatedJob> job(new SimulatedJob(options, TaskNames(options.tasks)));
  CoordinationServiceOptions so;
  so.tasks = job->names_;
  so.heartbeat_timeout = options.heartbeat_timeout;
  so.check_interval = options.check_interval;
  so.registration_timeout = kSimulatedRegistrationTimeout;
  MIRRORED_ASSIGN_OR_RETURN(job->service_, CoordinationService::Create(std::move(so)));
  job->times_.create_ms = MsSince(start);
  job->service_->StartDeadlineThread();
  return job;
}

SimulatedJob::SimulatedJob(SimulatedJobOptions options, std::vector<std::string> names)
    : options_(options), names_(std::move(names)), poll_answers_(names_.size()) {}

SimulatedJob::~SimulatedJob() {
  StopHeartbeats();
  if (service_) service_->Stop();
}

Status SimulatedJob::Form() {
  const int n = tasks();
  // Shared with the callbacks: one still pending when this returns (a
  // failed formation) is answered later, by Stop().
  struct Formation {
    std::vector<RegisteredView> views;
    Answers answers;
    double first_answer_ms = -1, last_answer_ms = 0;  // this thread's CPU time: the answers run on it
  };
  auto formation = std::make_shared<Formation>();
  formation->views.resize(static_cast<size_t>(n));
  auto answer = [formation](int i) {
    return [formation, i](const StatusOr<RegisteredView>& v) {
      const double now = ThreadCpuMs();
      if (formation->first_answer_ms < 0) formation->first_answer_ms = now;
      formation->last_answer_ms = now;
      if (v.ok()) formation->views[static_cast<size_t>(i)] = *v;
      formation->answers.Note(v.status());
    };
  };
  const Clock::time_point wall_start = Clock::now();
  double start = ThreadCpuMs();
  for (int i = 0; i + 1 < n; ++i) {
    service_->RegisterTaskAsync({.task = names_[static_cast<size_t>(i)], .incarnation = Incarnation(i)}, answer(i));
  }
  times_.register_ms = MsSince(start);
  start = ThreadCpuMs();
  service_->RegisterTaskAsync({.task = names_.back(), .incarnation = Incarnation(n - 1)}, answer(n - 1));
  times_.last_registration_ms = MsSince(start);
  times_.form_wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - wall_start).count();
  times_.answers_ms = formation->last_answer_ms - formation->first_answer_ms;
  MIRRORED_RETURN_IF_ERROR(formation->answers.Check("registration", n));
  const std::vector<RegisteredView>& views = formation->views;
  for (int i = 0; i < n; ++i) {
    const RegisteredView& v = views[static_cast<size_t>(i)];
    if (v.task_index != i || v.view != views[0].view || v.view->tasks[static_cast<size_t>(i)].rank_offset != i) {
      return InternalError("simulated task " + names_[static_cast<size_t>(i)] + " got index " +
                           std::to_string(v.task_index) + " or a view other than the job's");
    }
  }
  return OkStatus();
}

Status SimulatedJob::OpenErrorPolls() {
  const double start = ThreadCpuMs();
  for (int i = 0; i < tasks(); ++i) {
    service_->PollForErrorAsync(names_[static_cast<size_t>(i)], Incarnation(i), [this, i](const Status& s) {
      std::lock_guard<std::mutex> lock(mu_);
      poll_answers_[static_cast<size_t>(i)] = s;
      ++polls_answered_;
      last_poll_answer_ = Clock::now();
      cv_.notify_all();
    });
  }
  times_.polls_ms = MsSince(start);
  const size_t open = service_->open_error_polls();
  if (open != names_.size()) {
    return InternalError(std::to_string(open) + " of " + std::to_string(names_.size()) +
                         " simulated error polls are open");
  }
  return OkStatus();
}

Status SimulatedJob::PassBarrier(const std::string& name) {
  auto answers = std::make_shared<Answers>();  // a call left pending is answered by Stop()
  const double start = ThreadCpuMs();
  for (int i = 0; i < tasks(); ++i) {
    service_->BarrierAsync(name, names_[static_cast<size_t>(i)], Incarnation(i), kSimulatedBarrierTimeout.count(),
                           [answers](const Status& s) { answers->Note(s); });
  }
  times_.barrier_ms = MsSince(start);
  return answers->Check("barrier " + name, tasks());
}

Status SimulatedJob::HeartbeatRound(int silent_task) {
  const double start = ThreadCpuMs();
  for (int i = 0; i < tasks(); ++i) {
    if (i == silent_task) continue;
    MIRRORED_RETURN_IF_ERROR(service_->Heartbeat(names_[static_cast<size_t>(i)], Incarnation(i)));
  }
  times_.heartbeat_round_ms = MsSince(start);
  return OkStatus();
}

void SimulatedJob::StartHeartbeats(int silent_task) {
  StopHeartbeats();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_heartbeats_ = false;
  }
  heartbeat_thread_ = std::thread([this, silent_task] { HeartbeatLoop(silent_task); });
}

void SimulatedJob::HeartbeatLoop(int silent_task) {
  const auto interval = options_.heartbeat_interval;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_heartbeats_) {
    lock.unlock();
    // Refused once the job failed: the simulated tasks then stop, as agents do.
    const bool refused = !HeartbeatRound(silent_task).ok();
    lock.lock();
    if (refused) return;
    cv_.wait_for(lock, interval, [this] { return stop_heartbeats_; });
  }
}

void SimulatedJob::StopHeartbeats() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_heartbeats_ = true;
  }
  cv_.notify_all();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
}

StatusOr<SimulatedJob::Clock::time_point> SimulatedJob::WaitForErrorEverywhere(const std::string& failed_task,
                                                                                 std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return polls_answered_ == tasks(); })) {
    return DeadlineExceededError(std::to_string(tasks() - polls_answered_) + " of " + std::to_string(tasks()) +
                                 " simulated tasks had no answer on their error poll after " +
                                 std::to_string(timeout.count()) + " ms");
  }
  for (size_t i = 0; i < poll_answers_.size(); ++i) {
    const Status& s = *poll_answers_[i];
    if (s.code() != StatusCode::kAborted || s.message().find(failed_task) == std::string::npos) {
      return FailedPreconditionError("simulated task " + names_[i] + " was told " + s.ToString() +
                                     ", not that " + failed_task + " failed");
    }
  }
  return last_poll_answer_;
}

Status SimulatedJob::ShutdownAll() {
  auto answers = std::make_shared<Answers>();  // a call left pending is answered by Stop()
  const double start = ThreadCpuMs();
  for (int i = 0; i < tasks(); ++i) {
    service_->ShutdownTaskAsync(names_[static_cast<size_t>(i)], Incarnation(i),
                                [answers](const Status& s) { answers->Note(s); });
  }
  times_.exit_barrier_ms = MsSince(start);
  return answers->Check("exit barrier", tasks());
}

}  // namespace mirrored::coordination
