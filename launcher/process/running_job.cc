#include "launcher/process/running_job.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ratio>

#include "common/launcher_environment.h"
#include "common/backoff.h"
#include "common/seconds_text.h"
#include "common/signal_name.h"
#include "launcher/process/line_tee.h"
#include "launcher/process/process_group_cpu.h"

namespace mirrored {
namespace {

using Clock = std::chrono::steady_clock;

// Stop signals from one sender this close together are one request.
constexpr std::chrono::milliseconds kSameStopRequest{1000};
// The longest poll(2): every deadline below shortens it.
constexpr std::chrono::milliseconds kLongestPoll{1000};
// Without pidfds (old kernels) exits are checked this often instead.
constexpr std::chrono::milliseconds kExitCheckWithoutPidfd{50};
// An evaluator's pause before restart k: 1 s, 2 s, 4 s... up to 30 s, so
// that a transient cause (the file server) does not use up every restart.
constexpr Backoff kEvaluatorRestartBackoff{std::chrono::seconds(1), std::chrono::seconds(30)};
// --hang-timeout samples each task's CPU time this often (a read of /proc).
constexpr std::chrono::milliseconds kHangSampleInterval{1000};

constexpr char kLauncherPrefix[] = "[mirrored-launch] ";

std::chrono::seconds EvaluatorRestartPause(int restarts) {
  return std::chrono::duration_cast<std::chrono::seconds>(kEvaluatorRestartBackoff.Pause(restarts));
}

// `timeout_ms`, shortened to end just after `deadline` (0 once it passed).
int ShortenedTo(Clock::time_point deadline, int timeout_ms) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::clamp<int>(static_cast<int>(left.count()) + 1, 0, timeout_ms);
}

}  // namespace

RunningJob::RunningJob(const std::vector<TaskLaunch>& tasks, const SupervisorOptions& options,
                       ConsoleWriter* console, int wake_fd)
    : tasks_(tasks), options_(options), console_(console), wake_fd_(wake_fd), running_(tasks.size()) {}

RunningJob::~RunningJob() {
  for (auto& t : running_) {
    CloseFd(t.out_fd);
    CloseFd(t.log_fd);
    CloseFd(t.liveness_fd);
  }
}

void RunningJob::Say(const std::string& line) const {
  if (console_ != nullptr) console_->WriteLine(kLauncherPrefix, line);
}

// --- Starting ---------------------------------------------------------------

Status RunningJob::Start() {
  for (size_t i = 0; i < tasks_.size(); ++i) MIRRORED_RETURN_IF_ERROR(StartTask(i));
  return OkStatus();
}

Status RunningJob::OpenLog(RunningTask& t) {
  const TaskLaunch& launch = *t.launch;
  if (launch.log_path.empty()) return OkStatus();
  t.log_fd = open(launch.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (t.log_fd < 0) {
    return InternalError("cannot open log file " + launch.log_path + " for task " + launch.name + ": " +
                         strerror(errno));
  }
  // Runs of a job append to the same log: each starts with a dated line
  // (the task's own lines carry the time of day only).
  WriteLogHeader(t.log_fd, launch.name + " started");
  return OkStatus();
}

// A task that cannot start stops the ones before it.
Status RunningJob::StartTask(size_t i) {
  RunningTask& t = running_[i];
  const TaskLaunch& launch = tasks_[i];
  t.launch = &launch;
  if (Status s = OpenLog(t); !s.ok()) {
    SignalLive(SIGKILL);
    return s;
  }
  t.tee = std::make_unique<LineTee>("[" + launch.name + "] ", console_, t.log_fd, options_.keep_last_lines);
  // A training task's signs of life (SupervisorOptions::liveness_timeout).
  int liveness[2] = {-1, -1};
  std::vector<std::string> env = launch.env;
  if (launch.is_training && launch.reports_liveness && pipe2(liveness, O_CLOEXEC | O_NONBLOCK) == 0) {
    env.push_back(std::string(kLivenessFdVariable) + "=3");
  }
  // Last run's error is not this one's.
  if (!launch.error_file.empty()) unlink(launch.error_file.c_str());
  auto child = ChildProcess::Spawn(launch.argv, env, liveness[1]);
  CloseFd(liveness[1]);
  t.liveness_fd = liveness[0];
  if (!child.ok()) {
    SignalLive(SIGKILL);
    for (auto& r : running_)
      if (r.child) r.child->WaitFor(options_.grace_period);
    return child.status().WithContext("task " + launch.name);
  }
  t.out_fd = child->TakeOutputFd();
  t.child.emplace(std::move(child).value());
  return OkStatus();
}

// --- The loop -----------------------------------------------------------------

Status RunningJob::Supervise() {
  while (!AllEnded()) {
    MIRRORED_RETURN_IF_ERROR(PollOnce());
    ReapExits();
    RestartDueEvaluators();
    StopStalledEvaluators();
    StopFrozenTasks();
    StopHungTasks();
    StopAfterPeerExitWait();
    KillAfterGracePeriod();
  }
  return OkStatus();
}

bool RunningJob::AllEnded() const {
  return std::all_of(running_.begin(), running_.end(),
                     [](const RunningTask& t) { return t.result && t.out_fd < 0; });
}

// Waits for output, an exit, a sign of life, a stop request or the next
// deadline, and takes in what came.
Status RunningJob::PollOnce() {
  PollSet set = BuildPollSet();
  const int ready = poll(set.fds.data(), set.fds.size(), PollTimeoutMs());
  if (ready < 0 && errno != EINTR) {
    Status s = InternalError(std::string("poll: ") + strerror(errno));
    SignalLive(SIGKILL);
    return s;
  }
  if (set.fds[0].revents & POLLIN) ReadStopRequests();
  ServiceReadyFds(set);
  return OkStatus();
}

RunningJob::PollSet RunningJob::BuildPollSet() const {
  PollSet set;
  auto add = [&set](int fd, size_t task, FdRole role) {
    set.fds.push_back({fd, POLLIN, 0});
    set.owners.push_back({task, role});
  };
  add(wake_fd_, SIZE_MAX, FdRole::kWakePipe);
  for (size_t i = 0; i < running_.size(); ++i) {
    const RunningTask& t = running_[i];
    if (t.out_fd >= 0) add(t.out_fd, i, FdRole::kOutput);
    if (!t.result && !t.restart_at) add(t.child->pid_fd(), i, FdRole::kExit);
    if (t.liveness_fd >= 0) add(t.liveness_fd, i, FdRole::kLiveness);
  }
  return set;
}

int RunningJob::PollTimeoutMs() const {
  int timeout_ms = static_cast<int>(kLongestPoll.count());
  for (const auto& t : running_) {
    if (!t.result && !t.restart_at && t.child->pid_fd() < 0) {
      timeout_ms = static_cast<int>(kExitCheckWithoutPidfd.count());
    }
    if (!t.result && t.restart_at) timeout_ms = ShortenedTo(*t.restart_at, timeout_ms);
  }
  if (state_.kill_deadline && !state_.killed_all) timeout_ms = ShortenedTo(*state_.kill_deadline, timeout_ms);
  if (state_.stop_at && !state_.kill_deadline) timeout_ms = ShortenedTo(*state_.stop_at, timeout_ms);
  for (const auto& t : running_) {
    if (!t.liveness_armed || t.result) continue;
    timeout_ms = ShortenedTo(t.last_alive + options_.liveness_timeout, timeout_ms);
  }
  if (options_.hang_timeout.count() > 0) timeout_ms = ShortenedTo(state_.last_hang_sample + kHangSampleInterval, timeout_ms);
  return timeout_ms;
}

void RunningJob::ReadStopRequests() {
  unsigned char message[1 + sizeof(pid_t)];  // as RequestStop writes it
  while (read(wake_fd_, message, sizeof(message)) == static_cast<ssize_t>(sizeof(message))) {
    pid_t sender = 0;
    std::memcpy(&sender, message + 1, sizeof(pid_t));
    OnStopRequest(message[0], sender);
  }
}

void RunningJob::OnStopRequest(int sig, pid_t sender) {
  const bool same_request = sender != 0 && sender == state_.stop_requested_by &&
                            Clock::now() - state_.stop_requested_at < kSameStopRequest;
  if (!state_.outcome.stop_signal) {
    state_.outcome.stop_signal = sig;
    state_.stop_requested_at = Clock::now();
    state_.stop_requested_by = sender;
    BeginStop(sig);
    Say(SignalName(sig) + ": stopping every task (SIGKILL after the grace period; a second signal: at once)");
  } else if (!state_.killed_all && !same_request) {
    // A second Ctrl-C: the user will not wait out the grace period.
    // (Not one that came with the first: `timeout` signals the
    // launcher, then its process group; a scheduler may do the same.)
    SignalLive(SIGKILL);
    state_.killed_all = true;
    Say(SignalName(sig) + " again: killing every task");
  }
}

void RunningJob::ServiceReadyFds(const PollSet& set) {
  for (size_t k = 1; k < set.fds.size(); ++k) {
    if (!(set.fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const auto [task, role] = set.owners[k];
    if (role == FdRole::kLiveness) ReadLiveness(running_[task]);
    if (role == FdRole::kOutput) PumpOutput(running_[task]);
  }
}

// Reaps whoever ended (pidfd readable, or the fallback poll).
void RunningJob::ReapExits() {
  for (auto& t : running_) {
    if (t.result || t.restart_at) continue;
    auto exit = t.child->Poll();
    if (!exit) continue;
    // Whatever the leader left behind in its group goes with it.
    t.child->SignalGroup(SIGKILL);
    if (MayRestart(t, *exit)) {
      ScheduleRestart(t, *exit);
      continue;
    }
    Record(t, *exit);
  }
}

// Evaluators due to start again; not once the job is stopping.
void RunningJob::RestartDueEvaluators() {
  for (auto& t : running_) {
    if (t.result || !t.restart_at) continue;
    if (Stopping()) {
      Record(t, *t.failed_exit);
      continue;
    }
    if (Clock::now() < *t.restart_at) continue;
    const ProcessExit failed = *t.failed_exit;
    if (!StartAgain(t, TrainingEnded(), console_)) Record(t, failed);
  }
}

// Once every training task has ended well, only the evaluator may be
// left: it is waited for (it ends on the final checkpoint or its own
// timeout), unless it prints nothing for evaluator_stall_timeout (hung:
// frozen, or blocked on a dead file server). If training failed, the
// evaluator was stopped with the rest.
void RunningJob::StopStalledEvaluators() {
  const bool training_done = std::all_of(running_.begin(), running_.end(), [](const RunningTask& t) {
    return !t.launch->is_training || (t.result && t.result->exit.success());
  });
  if (!training_done || state_.kill_deadline) return;
  for (auto& t : running_) {
    if (t.result || t.launch->is_training || t.restart_at) continue;
    const auto quiet = std::max(t.last_output, state_.last_training_end);
    if (Clock::now() - quiet < options_.evaluator_stall_timeout) continue;
    t.stalled = true;
    Say(t.launch->name + " printed nothing for " + SecondsText(options_.evaluator_stall_timeout) +
        " after training ended: stopping it (hung?)");
    BeginStop(SIGTERM);
  }
}

// A training task that showed signs of life and then none for
// liveness_timeout, still running: frozen. Woken (BeginStop sends SIGCONT)
// and stopped; it fails the job as itself.
void RunningJob::StopFrozenTasks() {
  if (Stopping()) return;
  for (auto& t : running_) {
    if (t.result || t.restart_at || !t.liveness_armed || Clock::now() - t.last_alive < options_.liveness_timeout) {
      continue;
    }
    t.stalled = true;
    t.liveness_armed = false;
    using Tenths = std::chrono::duration<int64_t, std::deci>;
    const auto silent = std::chrono::round<Tenths>(Clock::now() - t.last_alive);
    Say(t.launch->name + " showed no sign of life for " + SecondsText(silent) +
        " (stopped or hung: its heartbeats stopped): waking and stopping it");
    BeginStop(SIGTERM);
  }
}

// --hang-timeout: a training task that printed nothing and used almost no
// CPU time (under kHungCpuShare of a core) for that long is stopped, and
// fails the job as hung.
void RunningJob::StopHungTasks() {
  const Clock::time_point now = Clock::now();
  if (options_.hang_timeout.count() == 0 || Stopping() || now - state_.last_hang_sample < kHangSampleInterval) return;
  const double sampled_seconds = std::chrono::duration<double>(now - state_.last_hang_sample).count();
  state_.last_hang_sample = now;
  const double busy_ticks = kHungCpuShare * sampled_seconds * static_cast<double>(CpuTicksPerSecond());
  for (auto& t : running_) {
    if (!t.launch->is_training || t.result || t.restart_at || !t.child) continue;
    const std::optional<int64_t> ticks = ProcessGroupCpuTicks(t.child->pid());
    if (!ticks) continue;
    if (!t.cpu_ticks || static_cast<double>(*ticks - *t.cpu_ticks) > busy_ticks) t.last_busy = now;
    t.cpu_ticks = ticks;
    if (now - std::max(t.last_busy, t.last_output) < options_.hang_timeout) continue;
    t.stalled = true;
    t.hung = "it printed nothing and used under " + std::to_string(static_cast<int>(kHungCpuShare * 100)) +
             "% of a core for " + SecondsText(options_.hang_timeout) + " (--hang-timeout)";
    Say(t.launch->name + " is hung: " + *t.hung + ": stopping the job");
    BeginStop(SIGTERM);
    return;
  }
}

// Waited for the others to end by themselves after a peer-failed exit
// (or every training task has ended: only an evaluator is left).
void RunningJob::StopAfterPeerExitWait() {
  if (!state_.stop_at || state_.kill_deadline) return;
  const bool training_over = std::all_of(running_.begin(), running_.end(), [](const RunningTask& t) {
    return !t.launch->is_training || t.result.has_value();
  });
  if (training_over || Clock::now() >= *state_.stop_at) BeginStop(SIGTERM);
}

void RunningJob::KillAfterGracePeriod() {
  if (state_.kill_deadline && !state_.killed_all && Clock::now() >= *state_.kill_deadline) {
    SignalLive(SIGKILL);
    state_.killed_all = true;
  }
}

JobOutcome RunningJob::Finish() {
  for (auto& t : running_) {
    t.result->last_lines = t.tee->LastLines();
    state_.outcome.tasks.push_back(*t.result);
  }
  JudgeOutcome(state_.outcome);
  return std::move(state_.outcome);
}

// --- Acting on the tasks ------------------------------------------------------

void RunningJob::SignalLive(int sig) {
  for (auto& t : running_) {
    if (!t.child || t.result || t.restart_at) continue;  // (one waiting to restart has no process)
    if (!t.signal_sent) t.signal_sent = sig;
    if (sig == SIGKILL) t.killed = true;
    t.child->SignalGroup(sig);
  }
}

void RunningJob::BeginStop(int sig) {
  SignalLive(sig);
  // A stopped (SIGSTOP, frozen) task handles the signal only once it runs:
  // wake it, rather than wait out the grace period for nothing.
  for (auto& t : running_)
    if (t.child && !t.result && !t.restart_at) t.child->SignalGroup(SIGCONT);
  if (!state_.kill_deadline) state_.kill_deadline = Clock::now() + options_.grace_period;
}

bool RunningJob::TrainingEnded() const {
  bool any = false, ended = true;
  for (const auto& o : running_) {
    if (!o.launch->is_training) continue;
    any = true;
    ended = ended && o.result && o.result->exit.success();
  }
  return any && ended;
}

// An evaluator that failed by itself, unless the job is stopping, it was
// stopped as hung, it exited 2 (bad usage) or its restarts are used up.
bool RunningJob::MayRestart(const RunningTask& t, const ProcessExit& exit) const {
  return !t.launch->is_training && !exit.success() && !t.signal_sent && !t.stalled && !Stopping() &&
         exit.exit_code != kExitUsage && t.restarts < options_.evaluator_restarts;
}

// The evaluator `t` failed by itself: what its pipe still holds is logged,
// and it is started again after a pause (EvaluatorRestartPause).
void RunningJob::ScheduleRestart(RunningTask& t, const ProcessExit& exit) {
  PumpOutput(t);
  // Done with this process's pipe, even if a survivor of its group still
  // holds it: its late output is not waited for.
  t.tee->Finish();
  CloseFd(t.out_fd);
  const std::chrono::seconds pause = EvaluatorRestartPause(t.restarts);
  t.restart_at = Clock::now() + pause;
  t.failed_exit = exit;
  Say(t.launch->name + " ended with " + exit.ToString() + "; starting it again in " + std::to_string(pause.count()) +
      " s (restart " + std::to_string(t.restarts + 1) + " of " + std::to_string(options_.evaluator_restarts) +
      "): " + (TrainingEnded() ? "" : "training goes on, and ") + "it resumes after the last checkpoint it evaluated");
}

void RunningJob::Record(RunningTask& t, const ProcessExit& exit) {
  TaskResult r;
  r.name = t.launch->name;
  r.is_training = t.launch->is_training;
  r.exit = exit;
  r.ended_at = std::chrono::system_clock::now();
  r.stopped_by_supervisor = EndedBecauseStopped(t, exit) && !t.stalled && !t.failed_exit;
  r.signal_sent = t.signal_sent;
  r.restarts = t.restarts;
  r.hung = t.hung;
  r.error_file = t.launch->error_file;
  if (!r.error_file.empty() && !exit.success() && !r.stopped_by_supervisor) r.error_message = ErrorFileMessage(r.error_file);
  t.result = r;
  if (!r.is_training && !r.exit.success() && !r.stopped_by_supervisor && !Stopping() && !TrainingEnded()) {
    SayEvaluatorNotRestarted(r);
  }
  if (r.is_training) state_.last_training_end = Clock::now();
  if (r.is_training && !r.exit.success() && !r.stopped_by_supervisor && !state_.outcome.stop_signal) {
    OnTrainingFailure(t, r);
  }
}

// Said now, not only in the report at the job's end.
void RunningJob::SayEvaluatorNotRestarted(const TaskResult& r) {
  const std::string why = r.exit.exit_code == kExitUsage ? "exit 2 (bad usage) is not retried"
                          : options_.evaluator_restarts == 0
                              ? "--max-restarts K would start it again"
                              : "its " + std::to_string(options_.evaluator_restarts) + " restart(s) are used up";
  Say(r.name + " ended with " + r.exit.ToString() + " and is not started again (" + why +
      "); training goes on, and the job will exit with its code");
}

// A training task failed by itself: the others are stopped, except after an
// exit 3 (it stopped because another task failed), when the task it blames
// is ending too, with the real cause's code: it (and the others) may end by
// themselves first, for peer_exit_wait.
void RunningJob::OnTrainingFailure(const RunningTask& t, const TaskResult& r) {
  if (r.exit.exit_code != kExitPeerFailed || state_.kill_deadline) {
    BeginStop(SIGTERM);
    return;
  }
  if (state_.stop_at) return;
  state_.stop_at = Clock::now() + options_.peer_exit_wait;
  const bool others_running = std::any_of(running_.begin(), running_.end(), [&](const RunningTask& o) {
    return &o != &t && o.child && !o.result && !o.restart_at;
  });
  if (others_running) {
    Say(r.name + " stopped because another task failed (exit 3); waiting up to " +
        SecondsText(options_.peer_exit_wait) + " for the others to end by themselves");
  }
}

}  // namespace mirrored
