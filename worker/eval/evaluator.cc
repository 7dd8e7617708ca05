#include "worker/eval/evaluator.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/launcher_environment.h"
#include "common/logging.h"
#include "common/run_dir/file_env.h"
#include "common/run_dir/run_dir_lock.h"
#include "worker/checkpoint/evaluator_lease.h"
#include "worker/checkpoint/training_done.h"
#include "worker/data/training_data.h"
#include "worker/eval/checkpoint_follower.h"
#include "worker/eval/checkpoints_dir_wait.h"
#include "worker/eval/evaluation_log.h"
#include "worker/eval/job_end_watch.h"
#include "worker/eval/test_set_evaluator.h"

namespace mirrored {

StatusOr<EvaluationSummary> RunEvaluator(const EvaluatorOptions& options) {
  if (options.run_dir.empty()) return InvalidArgumentError("the evaluator needs --run-dir (the job's run directory)");
  FileEnv* env = FileEnv::Default();
  // The training-done record as this evaluator starts, read before anything
  // slower: the job's chief, started beside it, removes or rewrites it, and
  // a change is what tells this run's record from an earlier run's.
  std::optional<std::string> initial_run;
  if (auto first = TrainingDone::Read(env, options.run_dir); first.ok() && *first) initial_run = (*first)->run;
  MIRRORED_ASSIGN_OR_RETURN(std::optional<EvaluationSummary> ended_before_any, WaitForCheckpointsDir(options));
  if (ended_before_any) return *ended_before_any;
  // One evaluator per run directory: a second would share this one's lease
  // and evaluate every checkpoint again (exit 2). One on a dead machine may
  // hold the lock on a network file system until the server frees it.
  MIRRORED_ASSIGN_OR_RETURN(RunDirLock evaluator_lock,
                            RunDirLock::AcquireForEvaluator(options.run_dir, std::chrono::minutes(2)));
  // First of all, so that the chief keeps what this evaluator has not seen.
  MIRRORED_RETURN_IF_ERROR(EvaluatorLease::Follow(env, options.run_dir));
  // A set-up that fails (data, log files) will not work on a retry either:
  // the chief must not keep a backlog for this evaluator.
  auto setup_failed = [&](const Status& s) {
    (void)EvaluatorLease::Stop(env, options.run_dir);
    return s;
  };
  // The test split is all it evaluates on.
  auto data = data::TrainingData::LoadTest(options.data_dir, options.data_options);
  if (!data.ok()) return setup_failed(data.status());
  auto log = EvaluationLog::Open(options.run_dir);
  if (!log.ok()) return setup_failed(log.status());
  EvaluatorProgress progress;
  if (auto lease = EvaluatorLease::Read(env, options.run_dir); lease.ok() && lease->last_evaluated_step) {
    progress = {*lease->last_evaluated_step, lease->start_run.value_or("")};
    MIRRORED_LOG(INFO) << "resuming after step " << progress.done_step << " (recorded in the evaluator lease)";
  }
  auto evaluator = TestSetEvaluator::Create(options, std::move(data).value());
  if (!evaluator.ok()) return setup_failed(evaluator.status());
  // An evaluator started by mirrored-launch runs beside training tasks,
  // unless the launcher started it again after they all ended well
  // (MIRRORED_TRAINING_ENDED): JobEndWatch trusts a training-done record
  // found at its start only after kQuietGrace then.
  const bool beside_a_job = LauncherGeneration() && !LauncherSaysTrainingEnded();
  CheckpointFollower follower(env, options, std::move(progress), **evaluator, **log,
                              JobEndWatch(env, options.run_dir, beside_a_job, std::move(initial_run)));
  return follower.Run();
}

}  // namespace mirrored
