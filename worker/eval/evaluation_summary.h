// How an evaluator run ended, for mirrored-worker's last line and exit code
// (RunEvaluator returns it; the pieces of the evaluator fill it in).
//
//   EvaluationSummary summary;
//   ++summary.evaluations, summary.last_step = 400;
//   if (summary.saw_final) ... "final checkpoint ckpt-<final_step>"
#pragma once

#include <cstdint>
#include <optional>

namespace mirrored {

struct EvaluationSummary {
  int64_t evaluations = 0;
  int64_t skipped = 0;            // listed, but removed or damaged before it could be loaded
  // The newest step evaluated by this run (not the last evaluated: a second
  // look can evaluate an older checkpoint after it) and its result.
  int64_t last_step = -1;
  double last_loss = 0;
  double last_accuracy = 0;
  bool saw_final = false;        // the job's last checkpoint is evaluated (by this run or an earlier one)
  int64_t final_step = -1;        // its step
  std::optional<int> stop_signal;  // stopped by SIGINT/SIGTERM (StopSignal)
};

}  // namespace mirrored
