// How an evaluator run ended, for mirrored-worker's last line and exit code
// (RunEvaluator returns it; the pieces of the evaluator fill it in).
//
//   EvaluationSummary summary;
//   ++summary.evaluations, summary.last_step = 400;
//   std::printf("%s\n", summary.LastLine().c_str());   // "evaluator done: 1 checkpoint(s); ..."
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mirrored {

struct EvaluationSummary {
  int64_t evaluations = 0;
  int64_t skipped = 0;            // listed, but removed or damaged before it could be loaded (two looks)
  // Skipped on one look and due for their second (one can be caught being
  // replaced) when the evaluator stopped: not evaluated, not counted as
  // skipped. `stopped_by` says what stopped it ("--max-evaluations").
  std::vector<int64_t> unsettled{};
  // Pruned by the chief before this evaluator listed them, and not
  // evaluated before (ascending): never evaluated.
  std::vector<int64_t> pruned{};
  std::string stopped_by{};
  // The newest step evaluated by this run (not the last evaluated: a second
  // look can evaluate an older checkpoint after it), its result, and
  // whether it was evaluated as final (marked so in its state.json, no newer
  // one listed).
  int64_t last_step = -1;
  double last_loss = 0;
  double last_accuracy = 0;  // the mse when `metric` says so
  std::string metric = "accuracy";  // or "mse": the checkpoints' --loss mse
  bool last_final = false;
  bool saw_final = false;        // the job's last checkpoint is evaluated (by this run or an earlier one)
  int64_t final_step = -1;        // its step
  // The step the evaluator lease recorded as evaluated when this run began
  // (it resumed after it; -1: none), and whether that checkpoint, the
  // newest listed, is marked final in its state.json: what a run that
  // evaluated nothing new says it stopped after.
  int64_t evaluated_before = -1;
  bool evaluated_before_final = false;
  std::optional<int> stop_signal;  // stopped by SIGINT/SIGTERM (StopSignal)

  // mirrored-worker's last line for an evaluator that ended without error:
  // what it evaluated, and whether it reached the job's last checkpoint
  // (or, stopped before, what it knows of it).
  std::string LastLine() const;

 private:
  // LastLine() but for the unsettled checkpoints.
  std::string Outcome() const;
};

}  // namespace mirrored
