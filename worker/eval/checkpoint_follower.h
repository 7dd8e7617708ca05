// The evaluator's poll loop: every --poll-interval it lists
// RUN_DIR/checkpoints, evaluates each new complete checkpoint once, in step
// order (but for a damaged one found whole on its second look a poll later,
// after newer ones), under the evaluator lease (evaluator_lease.h), and
// stops when JobEndWatch says the job's last checkpoint is reached (after
// one more poll while checkpoints skipped once await their second look), after
// --eval-timeout with no new checkpoint (one more poll too), or after
// --max-evaluations (at once: the last line names the checkpoints that
// awaited their second look as not evaluated) (each ends the lease), or on
// SIGINT/SIGTERM (between checkpoints), which pauses it
// (EvaluatorLease::Pause: the backlog stays protected for a restart). Only
// the steps it evaluated are recorded in the lease as evaluated. Checkpoints
// the chief pruned before this evaluator listed them (it started late, or
// fell more than 2 x --keep-checkpoints behind) are named, from the index's
// "pruned" list, and counted in its last line.
//
//   CheckpointFollower follower(env, options, progress, *evaluator, *log, std::move(watch));
//   MIRRORED_ASSIGN_OR_RETURN(EvaluationSummary summary, follower.Run());
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/run_dir/checkpoint_reader.h"
#include "common/run_dir/file_env.h"
#include "common/status.h"
#include "worker/eval/evaluation_log.h"
#include "worker/eval/evaluation_summary.h"
#include "worker/eval/evaluator_options.h"
#include "worker/eval/job_end_watch.h"
#include "worker/eval/skipped_checkpoints.h"
#include "worker/eval/test_set_evaluator.h"

namespace mirrored {

// Where an evaluator resumes: after the last step its lease records as
// evaluated, under the chief's start (training_start.h) it belongs to.
struct EvaluatorProgress {
  int64_t done_step = -1;
  std::string start_run;
};

class CheckpointFollower {
 public:
  // None is owned; all must outlive the follower.
  CheckpointFollower(FileEnv* env, const EvaluatorOptions& options, EvaluatorProgress progress,
                     TestSetEvaluator& evaluator, EvaluationLog& log, JobEndWatch watch);

  // Follows the run until one of the ends above. Errors: DataLoss when the
  // job's last checkpoint could not be evaluated (its lease ended first);
  // the lease's, the model's and the log files' (the lease is kept, for a
  // restarted evaluator).
  StatusOr<EvaluationSummary> Run();

 private:
  using Clock = std::chrono::steady_clock;

  // A chief that started since from a step behind this evaluator's progress
  // (training_start.h): the checkpoints after that step are new ones.
  void FollowRestart();
  // Whether the checkpoint evaluated before this run (its lease's progress)
  // is the newest listed and marked final, for the summary, while this run
  // has evaluated none.
  void NoteEvaluatedBefore(const StatusOr<std::vector<CheckpointInfo>>& listed);
  // The checkpoints to evaluate now, ascending by step: the complete ones
  // after the progress, skipped ones written again since, and those skipped
  // on the last poll (their second look). Damaged ones are recorded as
  // skipped (said once), gone ones as seen so again.
  std::vector<CheckpointInfo> Pending(const StatusOr<std::vector<CheckpointInfo>>& listed,
                                      const std::vector<CheckpointReader::Skipped>& damaged);
  // Loads, evaluates and records ckpt-<info.step>; one that cannot be
  // loaded is skipped. `last_pending`: no newer one is pending (a "final"
  // mark then makes it the final checkpoint).
  Status EvaluateOne(const CheckpointInfo& info, bool last_pending);
  // Checkpoints the chief pruned (the index's "pruned") that this evaluator
  // never listed and had not evaluated before: said once each, counted in
  // the summary. `listed`: this poll's listing, whole and damaged.
  void NotePruned(const StatusOr<std::vector<CheckpointInfo>>& listed,
                  const std::vector<CheckpointReader::Skipped>& damaged);
  // The summary's skipped checkpoints, as the evaluator stops (`stopped_by`:
  // what stopped it, for the ones due for a second look).
  void NoteSkipped(const std::string& stopped_by);
  // A normal end: the chief need not keep a backlog for this evaluator any
  // more.
  EvaluationSummary Finish(const std::string& stopped_by);
  EvaluationSummary StoppedBySignal(int sig);

  FileEnv* const env_;
  const EvaluatorOptions& options_;
  TestSetEvaluator& evaluator_;
  EvaluationLog& log_;
  JobEndWatch watch_;
  CheckpointReader reader_;
  SkippedCheckpoints skipped_;
  int64_t done_step_;      // the last step evaluated or passed over
  int64_t evaluated_step_;  // the last step evaluated: the lease's progress
  std::string start_run_;  // the chief's start (training_start.h) that done_step_ belongs to
  // NotePruned: steps listed by this evaluator, the step up to which pruned
  // ones were evaluated before (the lease's progress, lowered by a restart),
  // and those found pruned unseen.
  std::set<int64_t> seen_;
  int64_t pruned_floor_;
  std::set<int64_t> pruned_unseen_;
  EvaluationSummary summary_;
  Clock::time_point last_progress_ = Clock::now();
};

}  // namespace mirrored
