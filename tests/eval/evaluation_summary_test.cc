// The evaluator's last line says what is true of how it ended: a run that
// evaluated nothing new names the checkpoint it evaluated before, and
// whether that one is marked final, instead of "without the final one".
#include "worker/eval/evaluation_summary.h"

#include <gtest/gtest.h>

namespace mirrored {
namespace {

TEST(EvaluationSummaryTest, TheJobsEndSeen) {
  EvaluationSummary s;
  s.evaluations = 2, s.last_step = 20, s.last_loss = 0.5, s.last_accuracy = 0.8125, s.last_final = true;
  s.saw_final = true, s.final_step = 20;
  EXPECT_EQ(s.LastLine(), "evaluator done: 2 checkpoint(s); final checkpoint ckpt-20: loss 0.5000 accuracy 0.8125");
  s.evaluations = 0, s.last_step = -1, s.skipped = 1;
  EXPECT_EQ(s.LastLine(),
            "evaluator done: 0 checkpoint(s) (1 more skipped: removed or damaged before they could be evaluated); "
            "the job's last checkpoint, ckpt-20, was evaluated before");
}

// Checkpoints the chief pruned before this evaluator saw them are counted
// apart from the skipped ones, with their range.
TEST(EvaluationSummaryTest, PrunedCheckpointsAreCountedAndNamed) {
  EvaluationSummary s;
  s.evaluations = 2, s.last_step = 60, s.last_loss = 0.5, s.last_accuracy = 0.8125, s.last_final = true;
  s.saw_final = true, s.final_step = 60;
  s.pruned = {10, 20, 30, 40};
  EXPECT_EQ(s.LastLine(),
            "evaluator done: 2 checkpoint(s) (4 pruned by the chief before this evaluator saw them: ckpt-10 to "
            "ckpt-40); final checkpoint ckpt-60: loss 0.5000 accuracy 0.8125");
  s.pruned = {40}, s.skipped = 1;
  EXPECT_EQ(s.LastLine(),
            "evaluator done: 2 checkpoint(s) (1 more skipped: removed or damaged before they could be evaluated; 1 "
            "pruned by the chief before this evaluator saw it: ckpt-40); final checkpoint ckpt-60: loss 0.5000 "
            "accuracy 0.8125");
  s.pruned = {30, 40}, s.skipped = 0;
  EXPECT_NE(s.LastLine().find("(2 pruned by the chief before this evaluator saw them: ckpt-30 and ckpt-40)"),
            std::string::npos)
      << s.LastLine();
  // Nothing evaluated but some pruned: not "nothing new".
  EvaluationSummary none;
  none.evaluated_before = 100, none.pruned = {110};
  EXPECT_EQ(none.LastLine(),
            "evaluator stopped after 0 checkpoint(s) (1 pruned by the chief before this evaluator saw it: ckpt-110); "
            "the newest evaluated, ckpt-100, evaluated before (recorded in the evaluator lease)");
}

// --eval-timeout on a run directory whose only checkpoint ckpt-100 the
// lease records as evaluated: it said "evaluator stopped after 0
// checkpoint(s) without the final one".
TEST(EvaluationSummaryTest, NothingNewAfterACheckpointEvaluatedBeforeNamesIt) {
  EvaluationSummary s;
  s.evaluated_before = 100, s.evaluated_before_final = true;
  EXPECT_EQ(s.LastLine(),
            "evaluator stopped after 0 checkpoint(s); ckpt-100, final in its state.json, was evaluated before "
            "(recorded in the evaluator lease)");
  s.evaluated_before_final = false;
  EXPECT_EQ(s.LastLine(),
            "evaluator stopped after 0 checkpoint(s): nothing new after ckpt-100, evaluated before (recorded in the "
            "evaluator lease)");
  // A newer checkpoint skipped (damaged) was something new.
  s.skipped = 1;
  const std::string line = s.LastLine();
  EXPECT_EQ(line.find("nothing new"), std::string::npos) << line;
  EXPECT_NE(line.find("; the newest evaluated, ckpt-100, evaluated before"), std::string::npos) << line;
  s.skipped = 0;
  s.evaluated_before = -1;
  EXPECT_EQ(s.LastLine(), "evaluator stopped after 0 checkpoint(s) without the final one");
}

// Stopped (--max-evaluations, --eval-timeout) right after a checkpoint
// marked final, before the job's end was confirmed: not "without the final
// one".
TEST(EvaluationSummaryTest, StoppedAfterACheckpointMarkedFinal) {
  EvaluationSummary s;
  s.evaluations = 1, s.last_step = 20, s.last_loss = 0.5, s.last_accuracy = 0.75, s.last_final = true;
  s.evaluated_before = 10, s.evaluated_before_final = false;
  EXPECT_EQ(s.LastLine(),
            "evaluator stopped after 1 checkpoint(s); the newest, ckpt-20, final in its state.json: loss 0.5000 "
            "accuracy 0.7500");
  s.last_final = false;
  EXPECT_EQ(s.LastLine(), "evaluator stopped after 1 checkpoint(s) without the final one");
}

TEST(EvaluationSummaryTest, StoppedBySignal) {
  EvaluationSummary s;
  s.evaluations = 3, s.stop_signal = 15;
  EXPECT_EQ(s.LastLine(), "evaluator stopped by SIGTERM (15) after 3 checkpoint(s)");
}

// Checkpoints skipped on one look when the evaluator stopped (their second
// look was due): named as not evaluated, not counted as skipped (they were,
// though one look may catch a checkpoint being replaced).
TEST(EvaluationSummaryTest, CheckpointsDueForASecondLookAreNamedAsNotEvaluated) {
  EvaluationSummary s;
  s.evaluations = 2, s.last_step = 20, s.skipped = 1, s.unsettled = {30}, s.stopped_by = "--max-evaluations";
  EXPECT_EQ(s.LastLine(),
            "evaluator stopped after 2 checkpoint(s) (1 more skipped: removed or damaged before they could be "
            "evaluated) without the final one; ckpt-30 not evaluated: unreadable on its only look, and "
            "--max-evaluations stopped the evaluator before its second");
  s.unsettled = {30, 40}, s.stopped_by = "SIGTERM (15)", s.stop_signal = 15;
  EXPECT_EQ(s.LastLine(),
            "evaluator stopped by SIGTERM (15) after 2 checkpoint(s); ckpt-30, ckpt-40 not evaluated: unreadable on "
            "their only look, and SIGTERM (15) stopped the evaluator before their second");
  // Nothing evaluated by this run: not "nothing new" either.
  s = EvaluationSummary{};
  s.evaluated_before = 20, s.unsettled = {30}, s.stopped_by = "--eval-timeout";
  EXPECT_EQ(s.LastLine(),
            "evaluator stopped after 0 checkpoint(s); the newest evaluated, ckpt-20, evaluated before (recorded in "
            "the evaluator lease); ckpt-30 not evaluated: unreadable on its only look, and --eval-timeout stopped "
            "the evaluator before its second");
}

}  // namespace
}  // namespace mirrored
