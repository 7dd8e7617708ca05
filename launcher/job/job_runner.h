// Runs a job generation after generation: when a training task fails, the
// whole job (a new generation) restarts, resuming from the run directory's
// latest checkpoint, while --max-restarts allows.
//
//   JobRunner runner(&supervisor, &report_out, {.max_restarts = 1});
//   int code = runner.Run([&](int gen) { return plan.Tasks(gen, env); });
//
// A failure with exit code 2 (bad usage or configuration) is never retried:
// the same command would fail the same way. A stop requested by a signal is
// never retried either, nor an evaluator's failure after training succeeded
// (the supervisor restarts an evaluator alone, SupervisorOptions::
// evaluator_restarts).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/process/job_supervisor.h"

namespace mirrored {

// JobRunnerOptions' defaults for the pause before a restart.
inline constexpr std::chrono::seconds kDefaultRestartBackoff{1};
inline constexpr std::chrono::seconds kDefaultMaxRestartBackoff{30};

struct JobRunnerOptions {
  int max_restarts = 0;
  // The pause before restart k: none before the first (one failure,
  // recovered at once), then restart_backoff, doubling, up to
  // max_restart_backoff: a job that fails again and again (a port another
  // process holds, a file server away) does not spend its restarts in a
  // second. A stop signal ends the pause.
  std::chrono::milliseconds restart_backoff = kDefaultRestartBackoff;
  std::chrono::milliseconds max_restart_backoff = kDefaultMaxRestartBackoff;
  // Where a restarted job resumes, for the restart line: "ckpt-40", or
  // "" for none yet (the job starts again from step 0). Unset where this
  // host cannot see the chief's checkpoints (another host of a cluster):
  // the line then says "the latest checkpoint".
  std::function<std::string()> resume_point = nullptr;
  // The tasks run the user's own program, which resumes from checkpoints
  // of its own: the restart line says so (and resume_point is not asked).
  bool program_resumes_itself = false;
};

class JobRunner {
 public:
  JobRunner(JobSupervisor* supervisor, ConsoleWriter* report_out, JobRunnerOptions options)
      : supervisor_(supervisor), report_out_(report_out), options_(options) {}

  using TaskFactory = std::function<std::vector<TaskLaunch>(int generation)>;

  // Returns the launcher's exit code: 0, the first failed task's code
  // (128 + signal for a signal), 128 + sig when stopped by a signal, or the
  // code of an error starting a task (ExitCodeFor).
  int Run(const TaskFactory& tasks_for_generation);

  int generations_run() const { return generations_run_; }

 private:
  void Report(const std::string& text);
  // Whether a failed generation is followed by another; says why not.
  bool MayRestart(const JobOutcome& outcome, int generation);
  void ReportEvaluatorFailure(const JobOutcome& outcome);
  // Why a restart would fail the same way (bad usage or configuration, here
  // or on the task an exit 3 blames; a Ctrl-C there), or nullopt.
  static std::optional<std::string> WhyARestartCannotHelp(const JobOutcome& outcome);
  // None before the first restart, then restart_backoff, doubling.
  std::chrono::milliseconds RestartPause(int generation) const;
  // Says where the job restarts from and waits out the pause: the signal
  // of a stop requested meanwhile, or nullopt to restart.
  std::optional<int> PauseBeforeRestart(int generation);

  JobSupervisor* supervisor_;
  ConsoleWriter* report_out_;
  JobRunnerOptions options_;
  int generations_run_ = 0;
};

}  // namespace mirrored
