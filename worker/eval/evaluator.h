// The side-car evaluator (TF_CONFIG task type "evaluator"): follows
// RUN_DIR/checkpoints, evaluates every new complete checkpoint once, in step
// order, on the Fashion-MNIST test set, and logs each result (stdout,
// logs/eval/ TensorBoard events, "eval" lines in metrics.jsonl, at the
// checkpoint's step). The one exception to the order: a checkpoint found
// damaged is looked at again a poll later, and if whole then (one being
// replaced can be caught mid-way) evaluated after newer ones, rather than
// lost (TensorBoard draws it at its step all the same). It needs only the
// run directory (no coordination service), so it can run on any machine
// that mounts it.
//
//   MIRRORED_ASSIGN_OR_RETURN(EvaluationSummary s, RunEvaluator(options));
//
// It never reads a partial checkpoint (only complete ckpt-<step>
// directories are listed, each validated on load). Its lease
// (evaluator_lease.h) makes the chief keep every checkpoint it has not
// evaluated yet among the newest 2 x --keep-checkpoints, and the one it
// reads; one that disappears under it anyway is skipped with a warning. It
// stops after the checkpoint marked final, after --max-evaluations, when no
// new checkpoint came for --eval-timeout seconds (each ends its lease: the
// chief keeps no backlog for it any more), or on SIGINT/SIGTERM (between
// checkpoints, when StopSignal is installed), which pauses its lease
// (EvaluatorLease::Pause): the checkpoints it has not evaluated stay
// protected for the evaluator started again, which resumes after the last
// step it recorded there.
//
// The pieces, in the order a run meets them: WaitForCheckpointsDir
// (checkpoints_dir_wait.h), EvaluationLog (stdout, metrics.jsonl,
// logs/eval), TestSetEvaluator (the model and the device), CheckpointFollower (the
// poll loop), which asks JobEndWatch when the job's last checkpoint is
// reached and keeps SkippedCheckpoints.
#pragma once

#include "common/status.h"
#include "worker/eval/evaluation_summary.h"
#include "worker/eval/evaluator_options.h"

namespace mirrored {

// Errors: the data set's (exit 2), InvalidArgument when --run-dir is empty,
// Internal for log files that cannot be written.
StatusOr<EvaluationSummary> RunEvaluator(const EvaluatorOptions& options);

}  // namespace mirrored
