// The built-in training loop of mirrored-worker: the tutorials' custom
// training loop (../shared/seeds) on a MirroredStrategy. Each replica trains
// its own model copy on its slice of every global batch; per-example losses
// are scaled by 1 / GLOBAL batch size and gradients all-reduced with SUM in
// buckets overlapped with backward, so the update equals the one-device
// update on the global batch. Global rank 0 logs progress, metrics.jsonl and
// TensorBoard scalars.
//
//   MIRRORED_ASSIGN_OR_RETURN(auto strategy, MirroredStrategy::Create(config, so));
//   StatusOr<TrainSummary> r = Train(options, *strategy);
//
// The last partial global batch of an epoch is dropped (every step then has a
// full slice on every replica, so no replica waits on an empty one); the
// validation pass keeps it (short slices, counts reduced exactly).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/run_dir/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/comm/wire_type.h"
#include "common/run_dir/run_dir_lock.h"
#include "worker/data/batch_sampler.h"
#include "worker/data/training_data.h"
#include "worker/model/model_choice.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"
#include "worker/model/precision.h"
#include "worker/train/chief_log.h"
#include "worker/strategy/mirrored_strategy.h"
#include "worker/train/learning_rate_schedule.h"
#include "worker/train/trainer_options.h"

namespace mirrored {

struct TrainSummary {
  int64_t steps = 0;            // global steps completed
  double loss = 0;              // mean training loss over the last epoch
  double accuracy = 0;          // the metric: accuracy, or the mse under --loss mse
  std::string metric = "accuracy";  // its name: "accuracy" or "mse"
  double val_loss = -1;         // last validation (-1: none)
  double val_accuracy = -1;
  double samples_per_sec = 0;
  std::vector<float> params;    // this task's first replica's final parameters (host copy)
  uint32_t weights_fingerprint = 0;  // 24-bit hash of those parameters' bits
  bool replicas_identical = true;  // every replica's weights hash equal at the end
  bool preempted = false;       // stopped early on SIGTERM (checkpointed when there is a run directory)
  std::string preempted_tasks;  // who had the SIGTERM by the agreed step: "first seen by worker:1", "seen by every task"
  bool nothing_to_train = false;  // resumed at or past the last step --epochs / --max-steps allow
};

// Trains on `data` (options.data.dir loaded by the caller, e.g. while the
// strategy was forming, with the test split when options.validation.test_set).
StatusOr<TrainSummary> Train(const TrainerOptions& options, MirroredStrategy& strategy, const data::TrainingData& data);
// Loads options.data.dir, then trains.
StatusOr<TrainSummary> Train(const TrainerOptions& options, MirroredStrategy& strategy);

// One task's part of Train: what every replica agrees on (the plan), the
// chief task's run directory (its lock, the checkpoint it resumes from, the
// log and the checkpoint writer), and the summary its replicas fill in. Each
// local replica trains on its own thread as a ReplicaTrainer
// (replica_trainer.h), which reads all of this. Run it once.
//
//   Trainer trainer(options, strategy, data);
//   StatusOr<TrainSummary> r = trainer.Run();
class Trainer {
 public:
  Trainer(const TrainerOptions& options, MirroredStrategy& strategy, const data::TrainingData& data);

  // Trains every local replica to the last step (or a SIGTERM). Errors:
  // InvalidArgument (tasks that disagree, a batch larger than the data, a
  // model that cannot take the data's images, a run directory of another
  // model), the run directory's, the replicas'.
  StatusOr<TrainSummary> Run();

 private:
  friend class ReplicaTrainer;

  // The same on every task: settings agreed, precision, batch and steps.
  Status Plan();
  // The batch sizes and the steps they give.
  Status PlanSteps();
  // The chief task's run directory, before any replica starts.
  Status PrepareRunDir();
  // Locks the run directory and withdraws an earlier run's "done".
  Status ClaimRunDir();
  // The latest checkpoint, if any, into resume_ (refused when it is another
  // model's or optimizer's).
  Status FindResumePoint();
  Status CheckResumable(const CheckpointInfo& latest) const;
  // Whether the checkpoint's tensors fit the model --data's images and
  // classes need (not so when it was trained on other data).
  Status CheckFitsData(const LoadedCheckpoint& latest) const;
  // Where this run starts (log, training_start, validation owed) and the writer.
  Status RecordStart();
  void LogPlan() const;
  void LogSchedule() const;
  // The data's image shape, as the model takes it.
  model::Shape3 input_shape() const {
    return {data_.shape().height, data_.shape().width, data_.shape().channels};
  }
  // Splits this process's CPU threads among its replicas.
  void SplitCpuThreads();
  void LogCpuThreads(int budget) const;

  template <typename Update>
  void UpdateSummary(Update update) {
    std::lock_guard<std::mutex> lock(summary_mu_);
    update(summary_);
  }

  const TrainerOptions& options_;
  MirroredStrategy& strategy_;
  const data::TrainingData& data_;

  // Plan(): the same on every task.
  model::ModelChoice model_ = model::ModelChoice::Zoo("");  // --model or --model-json
  model::Precision precision_ = model::Precision::kFp32;
  WireType allreduce_dtype_ = WireType::kFp32;  // the gradient buckets'
  model::Loss loss_ = model::Loss::kSparseCategoricalCrossentropy;
  int world_ = 0;  // replicas in sync
  uint64_t global_batch_ = 0;  // examples per optimizer step: batch per replica x replicas x --accumulate-steps
  uint64_t micro_batch_ = 0;   // examples per forward pass across the replicas: batch per replica x replicas
  std::optional<LearningRateSchedule> schedule_;
  std::optional<data::BatchSampler> sampler_;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  bool checkpoints_ = false;            // a --run-dir to checkpoint into
  std::vector<std::string> tasks_;      // every training task, in rank order
  float task_key_ = 0;                  // this task's ordinal + 1 (PreemptedTasks)
  std::chrono::milliseconds collective_timeout_{0};
  int threads_per_replica_ = 1;         // CPU replicas' oneDNN threads

  // The chief task's run directory (unused on the others). The lock is
  // released before the writer is destroyed.
  ChiefLog log_;
  std::optional<LoadedCheckpoint> resume_;
  bool validate_first_ = false;  // see StartPoint
  std::unique_ptr<CheckpointWriter> writer_;
  std::optional<RunDirLock> run_dir_lock_;  // held while this chief trains

  std::mutex summary_mu_;  // replicas' threads fill the summary in
  TrainSummary summary_;
};

}  // namespace mirrored
