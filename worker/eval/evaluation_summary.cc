#include "worker/eval/evaluation_summary.h"

#include <cstdio>

#include "common/run_dir/checkpoint_index.h"
#include "common/signal_name.h"

namespace mirrored {
namespace {

std::string Result(double loss, double accuracy, const std::string& metric) {
  char text[96];
  std::snprintf(text, sizeof(text), "loss %.4f %s %.4f", loss, metric.c_str(), accuracy);
  return text;
}

}  // namespace

std::string EvaluationSummary::LastLine() const {
  std::string line = Outcome();
  if (!unsettled.empty()) {
    // Not "skipped": one look may have caught a checkpoint being replaced.
    line += "; ";
    for (size_t i = 0; i < unsettled.size(); ++i) line += (i ? ", ckpt-" : "ckpt-") + std::to_string(unsettled[i]);
    const bool one = unsettled.size() == 1;
    line += std::string(" not evaluated: unreadable on ") + (one ? "its" : "their") + " only look, and " +
            (stopped_by.empty() ? std::string("the evaluator's end") : stopped_by) + " stopped the evaluator before " +
            (one ? "its" : "their") + " second";
  }
  return line;
}

std::string EvaluationSummary::Outcome() const {
  const std::string count = std::to_string(evaluations) + " checkpoint(s)";
  if (stop_signal) return "evaluator stopped by " + SignalName(*stop_signal) + " after " + count;
  // Checkpoints listed but gone (or damaged) before they could be read, and
  // those pruned before they were ever listed.
  std::string more;
  if (skipped > 0) more = std::to_string(skipped) + " more skipped: removed or damaged before they could be evaluated";
  if (!pruned.empty()) {
    more += std::string(more.empty() ? "" : "; ") + std::to_string(pruned.size()) +
            " pruned by the chief before this evaluator saw " + (pruned.size() == 1 ? "it: " : "them: ") +
            CheckpointDirName(pruned.front()) +
            (pruned.size() == 1 ? "" : (pruned.size() == 2 ? " and " : " to ") + CheckpointDirName(pruned.back()));
  }
  if (!more.empty()) more = " (" + more + ")";
  if (saw_final && last_step == final_step) {
    return "evaluator done: " + count + more + "; final checkpoint ckpt-" + std::to_string(last_step) + ": " +
           Result(last_loss, last_accuracy, metric);
  }
  if (saw_final) {
    return "evaluator done: " + count + more + "; the job's last checkpoint, ckpt-" + std::to_string(final_step) +
           ", was evaluated before";
  }
  // Stopped before the job's end was seen (--eval-timeout,
  // --max-evaluations): what is known of the last checkpoint. "final in
  // its state.json" is what its run wrote, not that no chief trains on.
  const std::string stopped = "evaluator stopped after " + count + more;
  if (evaluations > 0 && last_final) {
    return stopped + "; the newest, ckpt-" + std::to_string(last_step) + ", final in its state.json: " +
           Result(last_loss, last_accuracy, metric);
  }
  if (evaluations == 0 && evaluated_before >= 0) {
    if (evaluated_before_final) {
      return stopped + "; ckpt-" + std::to_string(evaluated_before) +
             ", final in its state.json, was evaluated before (recorded in the evaluator lease)";
    }
    // Skipped ones were new: not "nothing new".
    return stopped + (skipped > 0 || !unsettled.empty() || !pruned.empty() ? "; the newest evaluated, ckpt-"
                                                                            : ": nothing new after ckpt-") +
           std::to_string(evaluated_before) + ", evaluated before (recorded in the evaluator lease)";
  }
  return stopped + " without the final one";
}

}  // namespace mirrored
