#include "launcher/process/job_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/launcher_environment.h"
#include "common/seconds_text.h"
#include "common/signal_name.h"
#include "launcher/process/job_outcome.h"
#include "launcher/process/line_tee.h"
#include "launcher/process/running_task.h"

namespace mirrored {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

JobSupervisor::JobSupervisor(ConsoleWriter* console, SupervisorOptions options)
    : console_(console), options_(options) {
  if (pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) wake_pipe_[0] = wake_pipe_[1] = -1;
}

JobSupervisor::~JobSupervisor() {
  CloseFd(wake_pipe_[0]);
  CloseFd(wake_pipe_[1]);
}

void JobSupervisor::RequestStop(int sig, pid_t sender) {
  // One write (atomic on a pipe): the signal, then the sender.
  unsigned char message[1 + sizeof(pid_t)];
  message[0] = static_cast<unsigned char>(sig);
  std::memcpy(message + 1, &sender, sizeof(pid_t));
  if (wake_pipe_[1] >= 0) (void)!write(wake_pipe_[1], message, sizeof(message));
}

std::optional<int> JobSupervisor::WaitForStopRequest(std::chrono::milliseconds timeout) {
  if (wake_pipe_[0] < 0) return std::nullopt;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd fd{wake_pipe_[0], POLLIN, 0};
    const int ready = poll(&fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return std::nullopt;
    if (ready <= 0) continue;
    unsigned char message[1 + sizeof(pid_t)];
    if (read(wake_pipe_[0], message, sizeof(message)) == static_cast<ssize_t>(sizeof(message))) return message[0];
  }
}

namespace {
// Stop signals from one sender this close together are one request.
constexpr std::chrono::milliseconds kSameStopRequest{1000};
}  // namespace

StatusOr<JobOutcome> JobSupervisor::Run(const std::vector<TaskLaunch>& tasks) {
  if (wake_pipe_[0] < 0) return InternalError("cannot create the supervisor's wake-up pipe");
  std::vector<RunningTask> running(tasks.size());
  JobOutcome outcome;
  std::optional<Clock::time_point> kill_deadline;
  std::optional<Clock::time_point> stop_at;  // a peer-failed exit: stop the rest then (peer_exit_wait)
  Clock::time_point stop_requested_at;        // the first stop signal's arrival
  pid_t stop_requested_by = 0;                 // and its sender (0: the kernel)
  bool killed_all = false;
  Clock::time_point last_training_end = Clock::now();

  auto signal_live = [&](int sig) {
    for (auto& t : running) {
      if (!t.child || t.result || t.restart_at) continue;  // (one waiting to restart has no process)
      if (!t.signal_sent) t.signal_sent = sig;
      if (sig == SIGKILL) t.killed = true;
      t.child->SignalGroup(sig);
    }
  };
  auto begin_stop = [&](int sig) {
    signal_live(sig);
    // A stopped (SIGSTOP, frozen) task handles the signal only once it runs:
    // wake it, rather than wait out the grace period for nothing.
    for (auto& t : running)
      if (t.child && !t.result && !t.restart_at) t.child->SignalGroup(SIGCONT);
    if (!kill_deadline) kill_deadline = Clock::now() + options_.grace_period;
  };
  auto cleanup = [&] {
    for (auto& t : running) {
      CloseFd(t.out_fd);
      CloseFd(t.log_fd);
      CloseFd(t.liveness_fd);
    }
  };

  // Whether every training task has ended, and well (false without any).
  auto training_ended = [&] {
    bool any = false, ended = true;
    for (const auto& o : running) {
      if (!o.launch->is_training) continue;
      any = true;
      ended = ended && o.result && o.result->exit.success();
    }
    return any && ended;
  };
  // The evaluator `t` failed by itself: what its pipe still holds is logged,
  // and it is started again after a pause (1 s, 2 s, 4 s... up to 30 s: a
  // transient cause, e.g. the file server, must not use up every restart).
  auto schedule_restart = [&](RunningTask& t, const ProcessExit& exit) {
    PumpOutput(t);
    // Done with this process's pipe, even if a survivor of its group still
    // holds it: its late output is not waited for.
    t.tee->Finish();
    CloseFd(t.out_fd);
    const auto pause = std::chrono::seconds(std::min(30, 1 << std::min(t.restarts, 5)));
    t.restart_at = Clock::now() + pause;
    t.failed_exit = exit;
    if (console_ != nullptr) {
      console_->WriteLine("[mirrored-launch] ",
                          t.launch->name + " ended with " + exit.ToString() + "; starting it again in " +
                              std::to_string(pause.count()) + " s (restart " + std::to_string(t.restarts + 1) + " of " +
                              std::to_string(options_.evaluator_restarts) + "): " +
                              (training_ended() ? "" : "training goes on, and ") +
                              "it resumes after the last checkpoint it evaluated");
    }
  };
  auto record = [&](RunningTask& t, const ProcessExit& exit) {
    TaskResult r;
    r.name = t.launch->name;
    r.is_training = t.launch->is_training;
    r.exit = exit;
    r.ended_at = std::chrono::system_clock::now();
    r.stopped_by_supervisor = EndedBecauseStopped(t, exit) && !t.stalled && !t.failed_exit;
    r.signal_sent = t.signal_sent;
    r.restarts = t.restarts;
    t.result = r;
    if (!r.is_training && !r.exit.success() && !r.stopped_by_supervisor && !outcome.stop_signal && !kill_deadline &&
        !training_ended() && console_ != nullptr) {
      // Said now, not only in the report at the job's end.
      const std::string why = r.exit.exit_code == kExitUsage ? "exit 2 (bad usage) is not retried"
                              : options_.evaluator_restarts == 0
                                  ? "--max-restarts K would start it again"
                                  : "its " + std::to_string(options_.evaluator_restarts) + " restart(s) are used up";
      console_->WriteLine("[mirrored-launch] ", r.name + " ended with " + r.exit.ToString() + " and is not started again (" +
                                                    why + "); training goes on, and the job will exit with its code");
    }
    if (r.is_training) last_training_end = Clock::now();
    if (r.is_training && !r.exit.success() && !r.stopped_by_supervisor && !outcome.stop_signal) {
      if (r.exit.exit_code == kExitPeerFailed && !kill_deadline) {
        // The task it blames is ending too, with the real cause's code: let
        // it (and the others) end by themselves first.
        if (!stop_at) {
          stop_at = Clock::now() + options_.peer_exit_wait;
          const bool others_running = std::any_of(running.begin(), running.end(), [&](const RunningTask& o) {
            return &o != &t && o.child && !o.result && !o.restart_at;
          });
          if (console_ != nullptr && others_running) {
            console_->WriteLine("[mirrored-launch] ", r.name + " stopped because another task failed (exit 3); "
                                                      "waiting up to " + SecondsText(options_.peer_exit_wait) +
                                                      " for the others to end by themselves");
          }
        }
      } else {
        begin_stop(SIGTERM);
      }
    }
  };

  // Start every task; a task that cannot start stops the ones before it.
  for (size_t i = 0; i < tasks.size(); ++i) {
    RunningTask& t = running[i];
    t.launch = &tasks[i];
    if (!tasks[i].log_path.empty()) {
      t.log_fd = open(tasks[i].log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (t.log_fd < 0) {
        Status s = InternalError("cannot open log file " + tasks[i].log_path + " for task " +
                                 tasks[i].name + ": " + strerror(errno));
        signal_live(SIGKILL);
        cleanup();
        return s;
      }
    }
    // Runs of a job append to the same log: each starts with a dated line
    // (the task's own lines carry the time of day only).
    if (t.log_fd >= 0) WriteLogHeader(t.log_fd, tasks[i].name + " started");
    t.tee = std::make_unique<LineTee>("[" + tasks[i].name + "] ", console_, t.log_fd,
                                      options_.keep_last_lines);
    // A training task's signs of life (SupervisorOptions::liveness_timeout).
    int liveness[2] = {-1, -1};
    std::vector<std::string> env = tasks[i].env;
    if (tasks[i].is_training && pipe2(liveness, O_CLOEXEC | O_NONBLOCK) == 0) {
      env.push_back(std::string(kLivenessFdVariable) + "=3");
    }
    auto child = ChildProcess::Spawn(tasks[i].argv, env, liveness[1]);
    CloseFd(liveness[1]);
    t.liveness_fd = liveness[0];
    if (!child.ok()) {
      signal_live(SIGKILL);
      for (auto& r : running)
        if (r.child) r.child->WaitFor(options_.grace_period);
      cleanup();
      return child.status().WithContext("task " + tasks[i].name);
    }
    t.out_fd = child->TakeOutputFd();
    t.child.emplace(std::move(child).value());
  }

  while (true) {
    bool all_done = std::all_of(running.begin(), running.end(),
                                [](const RunningTask& t) { return t.result && t.out_fd < 0; });
    if (all_done) break;

    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owners;  // (task index, is_pidfd); wake pipe has none
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    owners.push_back({SIZE_MAX, false});
    for (size_t i = 0; i < running.size(); ++i) {
      RunningTask& t = running[i];
      if (t.out_fd >= 0) {
        fds.push_back({t.out_fd, POLLIN, 0});
        owners.push_back({i, false});
      }
      if (!t.result && !t.restart_at) {
        fds.push_back({t.child->pid_fd(), POLLIN, 0});
        owners.push_back({i, true});
      }
      if (t.liveness_fd >= 0) {
        fds.push_back({t.liveness_fd, POLLIN, 0});
        owners.push_back({i + running.size(), false});  // past the tasks: a liveness pipe
      }
    }
    // Without pidfds (old kernels) fall back to checking exits every 50 ms.
    int timeout_ms = 1000;
    for (auto& t : running) {
      if (!t.result && !t.restart_at && t.child->pid_fd() < 0) timeout_ms = 50;
      if (!t.result && t.restart_at) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*t.restart_at - Clock::now());
        timeout_ms = std::clamp<int>(static_cast<int>(left.count()) + 1, 0, timeout_ms);
      }
    }
    if (kill_deadline && !killed_all) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*kill_deadline - Clock::now());
      timeout_ms = std::clamp<int>(static_cast<int>(left.count()) + 1, 0, timeout_ms);
    }
    if (stop_at && !kill_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*stop_at - Clock::now());
      timeout_ms = std::clamp<int>(static_cast<int>(left.count()) + 1, 0, timeout_ms);
    }
    for (auto& t : running) {
      if (!t.liveness_armed || t.result) continue;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t.last_alive + options_.liveness_timeout -
                                                                        Clock::now());
      timeout_ms = std::clamp<int>(static_cast<int>(left.count()) + 1, 0, timeout_ms);
    }
    int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      Status s = InternalError(std::string("poll: ") + strerror(errno));
      signal_live(SIGKILL);
      cleanup();
      return s;
    }

    if (fds[0].revents & POLLIN) {
      unsigned char message[1 + sizeof(pid_t)];
      while (read(wake_pipe_[0], message, sizeof(message)) == static_cast<ssize_t>(sizeof(message))) {
        const int sig = message[0];
        pid_t sender = 0;
        std::memcpy(&sender, message + 1, sizeof(pid_t));
        const bool same_request =
            sender != 0 && sender == stop_requested_by && Clock::now() - stop_requested_at < kSameStopRequest;
        if (!outcome.stop_signal) {
          outcome.stop_signal = sig;
          stop_requested_at = Clock::now();
          stop_requested_by = sender;
          begin_stop(sig);
          if (console_ != nullptr) {
            console_->WriteLine("[mirrored-launch] ", SignalName(sig) + ": stopping every task (SIGKILL after the " +
                                                          "grace period; a second signal: at once)");
          }
        } else if (!killed_all && !same_request) {
          // A second Ctrl-C: the user will not wait out the grace period.
          // (Not one that came with the first: `timeout` signals the
          // launcher, then its process group; a scheduler may do the same.)
          signal_live(SIGKILL);
          killed_all = true;
          if (console_ != nullptr) console_->WriteLine("[mirrored-launch] ", SignalName(sig) + " again: killing every task");
        }
      }
    }
    for (size_t k = 1; k < fds.size(); ++k) {
      if (owners[k].first >= running.size()) {  // a liveness pipe
        RunningTask& t = running[owners[k].first - running.size()];
        if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ReadLiveness(t);
        continue;
      }
      RunningTask& t = running[owners[k].first];
      if (!owners[k].second && (fds[k].revents & (POLLIN | POLLHUP | POLLERR))) {
        PumpOutput(t);
      }
    }
    // Reap whoever ended (pidfd readable, or the fallback poll).
    for (auto& t : running) {
      if (t.result || t.restart_at) continue;
      auto exit = t.child->Poll();
      if (!exit) continue;
      // Whatever the leader left behind in its group goes with it.
      t.child->SignalGroup(SIGKILL);
      if (!t.launch->is_training && !exit->success() && !t.signal_sent && !t.stalled && !outcome.stop_signal &&
          !kill_deadline && exit->exit_code != kExitUsage && t.restarts < options_.evaluator_restarts) {
        schedule_restart(t, *exit);
        continue;
      }
      record(t, *exit);
    }
    // Evaluators due to start again; not once the job is stopping.
    for (auto& t : running) {
      if (t.result || !t.restart_at) continue;
      if (outcome.stop_signal || kill_deadline) {
        record(t, *t.failed_exit);
        continue;
      }
      if (Clock::now() < *t.restart_at) continue;
      const ProcessExit failed = *t.failed_exit;
      if (!StartAgain(t, training_ended(), console_)) record(t, failed);
    }
    // Once every training task has ended well, only the evaluator may be
    // left: it is waited for (it ends on the final checkpoint or its own
    // timeout), unless it prints nothing for evaluator_stall_timeout (hung:
    // frozen, or blocked on a dead file server). If training failed, the
    // evaluator was stopped with the rest.
    const bool training_done = std::all_of(running.begin(), running.end(), [](const RunningTask& t) {
      return !t.launch->is_training || (t.result && t.result->exit.success());
    });
    if (training_done && !kill_deadline) {
      for (auto& t : running) {
        if (t.result || t.launch->is_training || t.restart_at) continue;
        const auto quiet = std::max(t.last_output, last_training_end);
        if (Clock::now() - quiet < options_.evaluator_stall_timeout) continue;
        t.stalled = true;
        if (console_ != nullptr) {
          console_->WriteLine("[mirrored-launch] ",
                              t.launch->name + " printed nothing for " +
                                  SecondsText(options_.evaluator_stall_timeout) +
                                  " after training ended: stopping it (hung?)");
        }
        begin_stop(SIGTERM);
      }
    }
    // A training task that showed signs of life and then none for
    // liveness_timeout, still running: frozen. Woken (begin_stop sends
    // SIGCONT) and stopped; it fails the job as itself.
    if (!kill_deadline && !outcome.stop_signal) {
      for (auto& t : running) {
        if (t.result || t.restart_at || !t.liveness_armed || Clock::now() - t.last_alive < options_.liveness_timeout) {
          continue;
        }
        t.stalled = true;
        t.liveness_armed = false;
        if (console_ != nullptr) {
          using Tenths = std::chrono::duration<int64_t, std::deci>;
          const auto silent = std::chrono::round<Tenths>(Clock::now() - t.last_alive);
          console_->WriteLine("[mirrored-launch] ", t.launch->name + " showed no sign of life for " +
                                                        SecondsText(silent) +
                                                        " (stopped or hung: its heartbeats stopped): waking and "
                                                        "stopping it");
        }
        begin_stop(SIGTERM);
      }
    }
    // Waited for the others to end by themselves after a peer-failed exit
    // (or every training task has ended: only an evaluator is left).
    if (stop_at && !kill_deadline) {
      const bool training_over = std::all_of(running.begin(), running.end(), [](const RunningTask& t) {
        return !t.launch->is_training || t.result.has_value();
      });
      if (training_over || Clock::now() >= *stop_at) begin_stop(SIGTERM);
    }
    if (kill_deadline && !killed_all && Clock::now() >= *kill_deadline) {
      signal_live(SIGKILL);
      killed_all = true;
    }
  }

  for (auto& t : running) {
    t.result->last_lines = t.tee->LastLines();
    outcome.tasks.push_back(*t.result);
  }
  cleanup();

  JudgeOutcome(outcome);
  return outcome;
}

}  // namespace mirrored

