#include "launcher/job/job_runner.h"

#include <algorithm>
#include <sstream>

#include "common/backoff.h"
#include "common/seconds_text.h"
#include "common/signal_name.h"

namespace mirrored {

void JobRunner::Report(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) report_out_->WriteLine("[mirrored-launch] ", line);
}

int JobRunner::Run(const TaskFactory& tasks_for_generation) {
  for (int generation = 0;; ++generation) {
    generations_run_ = generation + 1;
    auto outcome = supervisor_->Run(tasks_for_generation(generation));
    if (!outcome.ok()) {
      Report("error: " + outcome.status().message());
      return ExitCodeFor(outcome.status());
    }
    if (outcome->success()) {
      if (generation > 0) {
        Report("job succeeded after " + std::to_string(generation) + " restart" + (generation == 1 ? "" : "s"));
      }
      return 0;
    }
    Report(FormatFailureReport(*outcome));
    if (!MayRestart(*outcome, generation)) return outcome->exit_code;
    if (std::optional<int> sig = PauseBeforeRestart(generation)) {
      Report(SignalName(*sig) + " while waiting to restart: not restarting");
      return 128 + *sig;
    }
  }
}

bool JobRunner::MayRestart(const JobOutcome& outcome, int generation) {
  if (outcome.stop_signal) return false;
  if (outcome.first_failure && !outcome.first_failure->is_training) {
    ReportEvaluatorFailure(outcome);
    return false;
  }
  if (generation < options_.max_restarts) {
    if (std::optional<std::string> why = WhyARestartCannotHelp(outcome)) {
      Report("not restarting: " + *why);
      return false;
    }
    return true;
  }
  if (options_.max_restarts > 0) {
    Report("giving up after " + std::to_string(options_.max_restarts) + " restart" +
           (options_.max_restarts == 1 ? "" : "s") + " (--max-restarts " + std::to_string(options_.max_restarts) +
           ")");
  }
  return false;
}

// Training succeeded (or runs on other hosts); the evaluator alone failed,
// after its own restarts if any were allowed: a new generation would train
// nothing.
void JobRunner::ReportEvaluatorFailure(const JobOutcome& outcome) {
  const TaskResult& failure = *outcome.first_failure;
  const bool trained_here = std::any_of(outcome.tasks.begin(), outcome.tasks.end(),
                                        [](const TaskResult& r) { return r.is_training; });
  const int restarts = failure.restarts;
  // Exit 2 is never retried (JobSupervisor): --max-restarts would not
  // start it again either.
  const bool usage_error = failure.exit.exit_code == kExitUsage;
  Report("not restarting the job: " + std::string(trained_here ? "training succeeded and only " : "") +
         failure.name + " failed" +
         (usage_error    ? " with exit code 2 (bad usage or configuration, which a restart cannot fix)"
          : restarts > 0 ? " (after " + std::to_string(restarts) + " restart" + (restarts == 1 ? "" : "s") +
                               " on its own)"
          : options_.max_restarts == 0 ? "; --max-restarts K starts it again on its own, up to K times"
                                       : "") +
         "; start an evaluator alone on the run directory to evaluate the rest");
}

std::optional<std::string> JobRunner::WhyARestartCannotHelp(const JobOutcome& outcome) {
  const bool config_error = outcome.first_failure && outcome.first_failure->exit.exit_code &&
                            *outcome.first_failure->exit.exit_code == kExitUsage;
  if (config_error) return "exit code 2 means bad usage or configuration, which a restart cannot fix";
  // Another host's task failed with a configuration error (the others
  // here exited 3): it is not started again there, so a restart here
  // would only wait for it until the registration timeout, K times.
  const std::optional<BlamedTask> blamed = outcome.first_failure ? BlamedBy(*outcome.first_failure) : std::nullopt;
  if (blamed && blamed->configuration_error) {
    return blamed->task + " failed with bad usage or configuration (exit code 2 there), which a restart cannot fix";
  }
  // Another host's task was stopped by a Ctrl-C there: it is not started
  // again, and a restart here would wait for it until the registration
  // timeout. The whole job stops, as a Ctrl-C means.
  if (blamed && blamed->interrupted) {
    return blamed->task + " was interrupted on its host (SIGINT: a Ctrl-C), which stops the whole job; run it "
           "again to resume from the latest checkpoint";
  }
  return std::nullopt;
}

std::chrono::milliseconds JobRunner::RestartPause(int generation) const {
  if (generation == 0) return std::chrono::milliseconds(0);
  return Backoff{options_.restart_backoff, options_.max_restart_backoff}.Pause(generation - 1);
}

std::optional<int> JobRunner::PauseBeforeRestart(int generation) {
  const std::chrono::milliseconds pause = RestartPause(generation);
  std::string from = "the latest checkpoint";
  if (options_.program_resumes_itself) {
    from = "the program's own checkpoints (it resumes itself: TORCHELASTIC_RESTART_COUNT=" +
           std::to_string(generation + 1) + ", MIRRORED_GENERATION=" + std::to_string(generation + 1) + ")";
  } else if (options_.resume_point) {
    const std::string point = options_.resume_point();
    from = point.empty() ? "the start (no checkpoint yet)" : point;
  }
  Report("restarting the job from " + from + ": generation " + std::to_string(generation + 1) + ", restart " +
         std::to_string(generation + 1) + " of " + std::to_string(options_.max_restarts) +
         (pause.count() > 0 ? " (in " + SecondsText(pause) + ": it failed again)" : ""));
  if (pause.count() == 0) return std::nullopt;
  return supervisor_->WaitForStopRequest(pause);
}

}  // namespace mirrored
