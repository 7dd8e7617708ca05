// RunningJob: one generation's tasks while JobSupervisor::Run runs them,
// from their start to the end of the last one. It holds the run's state
// (every RunningTask, the stop under way, the outcome so far); each step of
// the supervision loop is one method: read stop requests, pass output on,
// reap exits, restart an evaluator, stop a stalled or frozen task, kill
// after the grace period. Internal to JobSupervisor, whose header states the
// rules these steps keep.
//
//   RunningJob job(tasks, options, console, wake_fd);
//   MIRRORED_RETURN_IF_ERROR(job.Start());      // every task, or none left running
//   MIRRORED_RETURN_IF_ERROR(job.Supervise());  // until every task has ended
//   JobOutcome outcome = job.Finish();
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/process/console_writer.h"
#include "launcher/process/job_outcome.h"
#include "launcher/process/job_supervisor.h"
#include "launcher/process/running_task.h"

namespace mirrored {

class RunningJob {
 public:
  // `tasks` and `console` (null: say nothing) must outlive the job.
  // `wake_fd` is the read end of the supervisor's wake-up pipe, where
  // RequestStop writes (signal, sender) records.
  RunningJob(const std::vector<TaskLaunch>& tasks, const SupervisorOptions& options, ConsoleWriter* console,
             int wake_fd);
  // Closes the pipes still open; each task's process group goes with its
  // ChildProcess (killed and reaped if still running).
  ~RunningJob();
  RunningJob(const RunningJob&) = delete;
  RunningJob& operator=(const RunningJob&) = delete;

  // Starts every task, in order. Errors: a task that cannot be started
  // (its log file: Internal; its binary: NotFound / PermissionDenied naming
  // the task); the tasks started before it are killed first.
  Status Start();
  // Passes output on and judges exits until every task has ended and its
  // output is read. Internal when poll(2) fails; every task is then killed.
  Status Supervise();
  // Every task's result in launch order, with its last lines, and the
  // job's failure chosen from them (JudgeOutcome). Once, after Supervise.
  JobOutcome Finish();

 private:
  using Clock = std::chrono::steady_clock;

  // What the run has decided so far, beyond each task's own state.
  struct JobState {
    JobOutcome outcome;                             // stop_signal once a stop is requested
    std::optional<Clock::time_point> kill_deadline;  // stopping: SIGKILL what is left then
    std::optional<Clock::time_point> stop_at;        // after an exit 3: stop the others then
    Clock::time_point stop_requested_at;             // the first stop request's arrival
    pid_t stop_requested_by = 0;                     // and its sender (0: the kernel)
    bool killed_all = false;                         // SIGKILL sent to every task
    Clock::time_point last_training_end = Clock::now();
    Clock::time_point last_hang_sample = Clock::now();  // --hang-timeout's CPU sample
  };

  // What one polled descriptor is; the wake-up pipe comes first.
  enum class FdRole { kWakePipe, kOutput, kExit, kLiveness };
  struct PollSet {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, FdRole>> owners;  // (task index, role) for each of fds
  };

  // Starting.
  Status StartTask(size_t i);
  Status OpenLog(RunningTask& t);

  // The loop's steps, in the order Supervise runs them.
  bool AllEnded() const;
  Status PollOnce();
  PollSet BuildPollSet() const;
  int PollTimeoutMs() const;
  void ReadStopRequests();
  void OnStopRequest(int sig, pid_t sender);
  void ServiceReadyFds(const PollSet& set);
  void ReapExits();
  void RestartDueEvaluators();
  void StopStalledEvaluators();
  void StopFrozenTasks();
  void StopHungTasks();
  void StopAfterPeerExitWait();
  void KillAfterGracePeriod();

  // Acting on the tasks.
  void SignalLive(int sig);
  void BeginStop(int sig);
  bool MayRestart(const RunningTask& t, const ProcessExit& exit) const;
  void ScheduleRestart(RunningTask& t, const ProcessExit& exit);
  void Record(RunningTask& t, const ProcessExit& exit);
  void OnTrainingFailure(const RunningTask& t, const TaskResult& r);
  void SayEvaluatorNotRestarted(const TaskResult& r);

  // Whether a stop is under way (requested, or a failure's).
  bool Stopping() const { return state_.outcome.stop_signal.has_value() || state_.kill_deadline.has_value(); }
  // Whether every training task has ended, and well (false without any).
  bool TrainingEnded() const;
  // A line of the launcher's own on the console.
  void Say(const std::string& line) const;

  const std::vector<TaskLaunch>& tasks_;
  const SupervisorOptions options_;
  ConsoleWriter* console_;
  int wake_fd_;
  std::vector<RunningTask> running_;
  JobState state_;
};

}  // namespace mirrored
