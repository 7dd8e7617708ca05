// One replica's side of the built-in training loop (trainer.h): its model
// copy, optimizer, loss scale and gradient buckets, and the steps it takes in
// lockstep with every other replica of the job. A step is the forward and
// backward pass and the update; some steps are also a sync point (metrics
// and SIGTERM summed across replicas), a progress line, a checkpoint, or the
// end of an epoch (validation). Every replica decides each of these alike,
// from the step and the data position only, so the collectives match.
//
//   Status s = strategy.RunReplicas([&](ReplicaContext& replica) {
//     return ReplicaTrainer(trainer, replica).Run();
//   });
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/run_dir/checkpoint_state.h"
#include "worker/data/batch_prefetcher.h"
#include "worker/model/loss_scale.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"
#include "worker/train/gradient_accumulator.h"
#include "worker/train/gradient_bucketer.h"
#include "worker/strategy/mirrored_strategy.h"
#include "worker/train/start_point.h"
#include "worker/train/trainer.h"

namespace mirrored {

// Sums of per-example losses, correct predictions and examples.
struct MetricSums {
  double loss = 0;
  double correct = 0;
  double count = 0;

  void Add(double more_loss, double more_correct, double more_count) {
    loss += more_loss;
    correct += more_correct;
    count += more_count;
  }
};

// A replica's running totals, each cleared where it is read.
struct RunningTotals {
  MetricSums replica;  // this replica's, since the last sync point
  MetricSums window;   // every replica's, since the last progress line
  MetricSums epoch;    // every replica's, this epoch
  std::chrono::steady_clock::time_point window_start;  // the last progress line
  int64_t window_steps = 0;                            // steps since then
};

// What follows a step. All but `preempted` are known from the step and the
// batch's position; `preempted` from the sync point's sums.
struct StepMarks {
  int64_t epoch = 0;                  // the batch's epoch, from 0
  bool epoch_end = false;             // the batch was its epoch's last
  bool last = false;                  // no step follows (--epochs, --max-steps)
  bool scheduled_checkpoint = false;  // --checkpoint-every, else the epoch's end
  bool preempted = false;             // some task had a SIGTERM by this step

  // The weights are checked and saved (given a run directory) after this step.
  bool checkpoint_due() const { return last || preempted || scheduled_checkpoint; }
};

class ReplicaTrainer {
 public:
  // `trainer` has planned the run (and, on the chief task, prepared the run
  // directory); it outlives this object.
  ReplicaTrainer(Trainer& trainer, ReplicaContext& replica);

  // Trains this replica from the agreed start to the last step (or the
  // agreed preemption step), then proves the replicas identical. Errors:
  // the collectives' (Aborted, DeadlineExceeded), DivergedError's, the
  // checkpoint writer's.
  Status Run();

 private:
  // The model on this replica's device, the agreed start, loss scale,
  // gradient buckets and batch prefetcher.
  Status SetUp();
  Status CreateModel();
  // The gradient buckets, and with --accumulate-steps above 1 the sum of
  // the micro-batches' gradients.
  Status CreateBucketer();
  // Validates the checkpoint resumed from, whose validation was lost.
  Status ValidateResumedCheckpoint();
  void SayNothingToTrain();
  bool MoreToTrain() const;

  // One global step and what follows it. Returns false once preempted.
  StatusOr<bool> Step();
  // Forward and backward on each micro-batch, the last one's gradients
  // (summed with the others') all-reduced in buckets, then the update.
  Status TrainOn(const data::Batch& batch);
  // Forward on n examples (targets: regression data, else null), its
  // losses and metric counted.
  void Forward(uint32_t n, const float* images, const int32_t* labels, const float* targets);
  // The optimizer's update at the schedule's learning rate; the step done.
  Status Update(const data::Batch& batch);
  StepMarks MarksAfter(const data::Batch& batch) const;
  bool IsSyncPoint(const StepMarks& at) const;
  // Sums this replica's metrics and SIGTERM across every replica; sets
  // at.preempted. DivergedError for a loss that is not finite.
  Status SyncPoint(StepMarks& at);
  // The chief's progress line; any background checkpoint's failure.
  Status ReportProgress(const StepMarks& at);
  // Before a checkpoint or the end: weights finite, BatchNorm state averaged.
  Status SettleWeights(const StepMarks& at);
  // Global rank 0 writes the checkpoint (the last and a preempted one
  // synchronously).
  Status Checkpoint(const StepMarks& at);
  CheckpointState StateToSave(bool final) const;
  // Validation (with --validate) and the epoch's figures in the summary.
  Status EndEpoch(const StepMarks& at);
  void StopPreempted();
  // Waits for the writer, marks the run done, proves the replicas identical.
  Status Finish();

  Trainer& trainer_;
  const TrainerOptions& options_;
  ReplicaContext& replica_;

  // Destroyed in reverse: the prefetcher's and bucketer's threads stop
  // before the fence and model they use go.
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<model::Optimizer> optimizer_;
  StartPoint start_;
  std::optional<model::DynamicLossScale> loss_scale_;  // fp16 only
  std::unique_ptr<GradientAccumulator> accumulator_;   // --accumulate-steps above 1
  std::unique_ptr<GradientFence> fence_;               // GPU replicas of a job of more than one
  std::unique_ptr<GradientBucketer> bucketer_;
  std::unique_ptr<data::BatchPrefetcher> prefetcher_;
  std::vector<float> weights_;  // each example's loss weight: loss scale / global batch

  RunningTotals totals_;
  int64_t step_ = 0;                // global steps done
  data::SamplerPosition position_;  // the next batch's
  int64_t synced_step_ = 0;         // the last sync point's step
  int64_t last_checkpoint_ = -1;    // the step saved or resumed from; -1: none yet
  bool stopped_early_ = false;      // preempted
  std::string preempted_tasks_;     // which tasks the SIGTERM reached
};

}  // namespace mirrored
