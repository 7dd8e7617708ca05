// The evaluator's first wait: until the job's chief has made
// RUN_DIR/checkpoints (its lock comes first), nothing is made, so a mistyped
// --run-dir leaves no run directory behind. Bounded by --eval-timeout and
// ended by a stop signal (StopSignal).
//
//   MIRRORED_ASSIGN_OR_RETURN(std::optional<EvaluationSummary> ended, WaitForCheckpointsDir(options));
//   if (ended) return *ended;   // --eval-timeout or a signal before any checkpoint
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "worker/eval/evaluation_summary.h"
#include "worker/eval/evaluator_options.h"

namespace mirrored {

// stat(2)'s errno for `path`, 0 when it is there.
int StatErrno(const std::string& path);
// How the wait looks at a path: StatErrno, or a test's stand-in.
using PathErrno = std::function<int(const std::string& path)>;

// nullopt once options.run_dir's checkpoints/ is there (at once, or after
// waiting); the summary to end with when the wait ended first (after
// --eval-timeout, or on a stop signal). Errors: InvalidArgument when
// --run-dir is not a directory or lies under something that is not one (a
// regular file: named), or cannot be searched (at once, or when it turns so
// while waited for); Unavailable for an I/O error at the first look only
// (one while waiting is warned about once, and the wait goes on: a network
// file system's passing error).
StatusOr<std::optional<EvaluationSummary>> WaitForCheckpointsDir(const EvaluatorOptions& options,
                                                                 const PathErrno& stat_errno = StatErrno);

}  // namespace mirrored
