#include "worker/eval/checkpoints_dir_wait.h"

#include <chrono>
#include <filesystem>
#include <string>

#include "common/launcher_environment.h"
#include "common/logging.h"
#include "worker/checkpoint/checkpoint_index.h"
#include "worker/eval/stop_signal.h"

namespace mirrored {

StatusOr<std::optional<EvaluationSummary>> WaitForCheckpointsDir(const WorkerOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto poll = std::chrono::milliseconds(static_cast<int64_t>(options.poll_interval_sec * 1000));
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.eval_timeout_sec * 1000));
  const std::string checkpoints = CheckpointsDir(options.run_dir);
  std::error_code ec;
  if (std::filesystem::exists(options.run_dir, ec) && !std::filesystem::is_directory(options.run_dir, ec)) {
    return InvalidArgumentError("--run-dir " + options.run_dir + " is not a directory");
  }
  const bool checkpoints_there = std::filesystem::exists(checkpoints, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    // Not "not yet": a directory on the way it may not search (exit 2), or
    // an I/O error (exit 1). Waiting would wait for ever.
    const std::string what = "--run-dir " + options.run_dir + ": cannot look for " + checkpoints + ": " + ec.message();
    if (ec == std::errc::permission_denied || ec == std::errc::not_a_directory) return InvalidArgumentError(what);
    return UnavailableError(what);
  }
  if (checkpoints_there) return std::optional<EvaluationSummary>();
  // Normal for an evaluator that mirrored-launch started with its job (an
  // INFO line); for one started alone, a mistyped --run-dir would
  // otherwise wait forever in silence.
  const std::string waiting = checkpoints + " does not exist yet: waiting for the job's chief to write checkpoints";
  if (LauncherGeneration()) {
    MIRRORED_LOG(INFO) << waiting;
  } else {
    MIRRORED_LOG(WARNING) << waiting << " there (check --run-dir if no job is starting)";
  }
  const auto since = Clock::now();
  while (!std::filesystem::exists(checkpoints, ec)) {
    if (timeout.count() > 0 && Clock::now() - since >= timeout) {
      MIRRORED_LOG(WARNING) << "no " << checkpoints << " after " << options.eval_timeout_sec
                            << " s (--eval-timeout): stopping";
      return std::optional<EvaluationSummary>(EvaluationSummary{});
    }
    if (std::optional<int> sig = StopSignal::WaitFor(poll)) {
      MIRRORED_LOG(WARNING) << "stopping on signal " << *sig << " before any checkpoint";
      return std::optional<EvaluationSummary>(EvaluationSummary{.stop_signal = sig});
    }
  }
  return std::optional<EvaluationSummary>();
}

}  // namespace mirrored
