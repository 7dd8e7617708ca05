// The side-car evaluator (TF_CONFIG task type "evaluator"): follows
// RUN_DIR/checkpoints, evaluates every new complete checkpoint once, in step
// order, on the Fashion-MNIST test set, and logs each result (stdout,
// logs/eval/ TensorBoard events, "eval" lines in metrics.jsonl, at the
// checkpoint's step). It needs only the run directory (no coordination
// service), so it can run on any machine that mounts it.
//
//   MIRRORED_ASSIGN_OR_RETURN(EvaluationSummary s, RunEvaluator(options));
//
// It never reads a partial checkpoint (only complete ckpt-<step>
// directories are listed, each validated on load). Its lease
// (evaluator_lease.h) makes the chief keep every checkpoint it has not
// evaluated yet among the newest 2 x --keep-checkpoints, and the one it
// reads; one that disappears under it anyway is skipped with a warning. It
// stops after the checkpoint marked final, after --max-evaluations, when no
// new checkpoint came for --eval-timeout seconds, or on SIGINT/SIGTERM
// (between checkpoints, when StopSignal is installed): each ends its lease.
// A restarted evaluator resumes after the last step it recorded there.
#pragma once

#include <cstdint>
#include <optional>

#include "common/status.h"
#include "worker/worker_options.h"

namespace mirrored {

struct EvaluationSummary {
  int64_t evaluations = 0;
  int64_t skipped = 0;            // listed, but removed or damaged before it could be loaded
  int64_t last_step = -1;
  double last_loss = 0;
  double last_accuracy = 0;
  bool saw_final = false;        // the job's last checkpoint is evaluated (by this run or an earlier one)
  int64_t final_step = -1;        // its step
  std::optional<int> stop_signal;  // stopped by SIGINT/SIGTERM (StopSignal)
};

// Errors: the data set's (exit 2), InvalidArgument when --run-dir is empty,
// Internal for log files that cannot be written.
StatusOr<EvaluationSummary> RunEvaluator(const WorkerOptions& options);

}  // namespace mirrored
