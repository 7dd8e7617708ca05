#include "worker/eval/checkpoints_dir_wait.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/launcher_environment.h"
#include "common/logging.h"
#include "common/run_dir/checkpoint_index.h"
#include "common/signal_name.h"
#include "worker/eval/stop_signal.h"

namespace mirrored {
namespace {

// The first path on the way to `path` that exists and is no directory (a
// regular file, say), which is what makes stat(2) fail with ENOTDIR; ""
// when none is found (it changed meanwhile).
std::string NotADirectoryOnTheWay(const std::string& path) {
  for (std::filesystem::path p = std::filesystem::path(path).parent_path(); !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? "" : p.string();
    if (p == p.parent_path()) break;  // the root
  }
  return "";
}

// Whether RUN_DIR/checkpoints is there yet. stat(2)'s own errno, not
// std::filesystem::exists, which takes ENOTDIR (a --run-dir under a regular
// file) for "does not exist" and would wait for ever. Errors: InvalidArgument
// for a path that cannot become a run directory (not a directory on the
// way, no permission to search, a symbolic link loop, too long: exit 2),
// Unavailable for an I/O error (exit 1).
StatusOr<bool> CheckpointsDirThere(const std::string& run_dir, const PathErrno& stat_errno) {
  const std::string checkpoints = CheckpointsDir(run_dir);
  const int err = stat_errno(checkpoints);
  if (err == 0) return true;  // not a directory: the lock says so
  if (err == ENOENT) return false;
  if (err == ENOTDIR) {
    const std::string culprit = NotADirectoryOnTheWay(checkpoints);
    if (culprit.empty() || std::filesystem::path(culprit) == std::filesystem::path(run_dir).lexically_normal()) {
      return InvalidArgumentError("--run-dir " + run_dir + " is not a directory");
    }
    return InvalidArgumentError("--run-dir " + run_dir + ": " + culprit + " is not a directory");
  }
  // Not "not yet": waiting would wait for ever.
  const std::string what = "--run-dir " + run_dir + ": cannot look for " + checkpoints + ": " + std::strerror(err);
  if (err == EACCES || err == ELOOP || err == ENAMETOOLONG) return InvalidArgumentError(what);
  return UnavailableError(what);
}

}  // namespace

int StatErrno(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? 0 : errno;
}

StatusOr<std::optional<EvaluationSummary>> WaitForCheckpointsDir(const EvaluatorOptions& options,
                                                                 const PathErrno& stat_errno) {
  using Clock = std::chrono::steady_clock;
  const auto poll = std::chrono::duration_cast<std::chrono::milliseconds>(options.poll_interval);
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.eval_timeout);
  MIRRORED_ASSIGN_OR_RETURN(bool there, CheckpointsDirThere(options.run_dir, stat_errno));
  if (there) return std::optional<EvaluationSummary>();
  const std::string checkpoints = CheckpointsDir(options.run_dir);
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
  bool said_failing = false;
  while (true) {
    if (timeout.count() > 0 && Clock::now() - since >= timeout) {
      MIRRORED_LOG(WARNING) << "no " << checkpoints << " after " << options.eval_timeout.count()
                            << " s (--eval-timeout): stopping";
      return std::optional<EvaluationSummary>(EvaluationSummary{});
    }
    if (std::optional<int> sig = StopSignal::WaitFor(poll)) {
      MIRRORED_LOG(WARNING) << "stopping on " << SignalName(*sig) << " before any checkpoint";
      return std::optional<EvaluationSummary>(EvaluationSummary{.stop_signal = sig});
    }
    // A path that turned into one that cannot work meanwhile fails too
    // (InvalidArgument: exit 2). Any other error may pass on a file system
    // that looked fine at first (an NFS server's ESTALE, EIO, ETIMEDOUT
    // during a long wait): said once, and polled on, as CheckpointFollower
    // does with its listings; --eval-timeout still bounds the wait.
    StatusOr<bool> now = CheckpointsDirThere(options.run_dir, stat_errno);
    if (!now.ok() && now.status().code() == StatusCode::kInvalidArgument) return now.status();
    if (!now.ok()) {
      if (!said_failing) {
        MIRRORED_LOG(WARNING) << now.status().message() << ": looking again every " << options.poll_interval.count()
                              << " s";
        said_failing = true;
      }
      continue;
    }
    if (*now) return std::optional<EvaluationSummary>();
  }
}

}  // namespace mirrored
