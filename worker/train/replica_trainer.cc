#include "worker/train/replica_trainer.h"

#include <algorithm>
#include <cmath>

#include "common/logging.h"
#include "mirrored/config.h"
#include "worker/checkpoint/training_done.h"
#include "worker/export/keras_export.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/precision.h"
#include "worker/train/chief_log.h"
#include "worker/train/cuda_event_fence.h"
#include "worker/train/diverged_error.h"
#include "worker/checkpoint/model_checkpoint.h"
#include "worker/train/preempted_tasks.h"
#include "worker/train/preemption.h"
#include "worker/train/replica_fingerprint.h"
#include "worker/train/test_set_validation.h"

namespace mirrored {
namespace {

using Clock = std::chrono::steady_clock;

// How long a replica waits for the prefetcher's thread to load its next slice.
constexpr std::chrono::seconds kNextBatchTimeout{120};
constexpr size_t kMiB = size_t{1} << 20;

std::optional<LossScaleFigures> LossScaleFiguresOf(const std::optional<model::DynamicLossScale>& loss_scale) {
  if (!loss_scale) return std::nullopt;
  return LossScaleFigures{loss_scale->scale(), loss_scale->skipped_steps()};
}

}  // namespace

ReplicaTrainer::ReplicaTrainer(Trainer& trainer, ReplicaContext& replica)
    : trainer_(trainer), options_(trainer.options_), replica_(replica) {}

Status ReplicaTrainer::Run() {
  MIRRORED_RETURN_IF_ERROR(SetUp());
  if (start_.validate_first) MIRRORED_RETURN_IF_ERROR(ValidateResumedCheckpoint());
  if (!MoreToTrain()) SayNothingToTrain();
  bool go_on = true;
  while (go_on && MoreToTrain()) {
    MIRRORED_ASSIGN_OR_RETURN(go_on, Step());
  }
  return Finish();
}

Status ReplicaTrainer::SetUp() {
  MIRRORED_RETURN_IF_ERROR(CreateModel());
  MIRRORED_RETURN_IF_ERROR(BroadcastStart(trainer_.resume_, trainer_.validate_first_, trainer_.global_batch_,
                                          *model_, *optimizer_, replica_, &start_));
  // fp16: the loss is scaled up for the backward pass and the gradients
  // down before the update (a checkpoint's scale carries on).
  if (model::NeedsLossScaling(trainer_.precision_)) {
    loss_scale_.emplace(static_cast<float>(options_.model.initial_loss_scale));
    if (start_.loss_scale > 0) loss_scale_->Restore(start_.loss_scale, start_.loss_scale_good_steps);
  }
  MIRRORED_RETURN_IF_ERROR(CreateBucketer());
  prefetcher_ = std::make_unique<data::BatchPrefetcher>(
      &trainer_.data_.train(), *trainer_.sampler_, static_cast<uint32_t>(replica_.global_rank()),
      static_cast<uint32_t>(trainer_.world_), start_.position, static_cast<uint64_t>(options_.steps.epochs));
  weights_.assign(static_cast<size_t>(options_.steps.batch_per_replica),
                  1.0f / static_cast<float>(trainer_.global_batch_));
  totals_.window_start = Clock::now();
  step_ = start_.step;
  position_ = start_.position;
  synced_step_ = step_;
  last_checkpoint_ = trainer_.checkpoints_ && step_ > 0 ? step_ : -1;  // resumed from it, or none yet
  return OkStatus();
}

Status ReplicaTrainer::CreateModel() {
  std::unique_ptr<model::Backend> backend;
  if (replica_.on_gpu()) {
    MIRRORED_ASSIGN_OR_RETURN(backend, replica_.MakeBackend(trainer_.precision_));
  } else {
    model::SetCpuThreadsForThisThread(trainer_.threads_per_replica_);
    MIRRORED_ASSIGN_OR_RETURN(backend, model::MakeCpuBackend(trainer_.precision_));
  }
  MIRRORED_ASSIGN_OR_RETURN(model_, trainer_.model_.Create(std::move(backend), options_.seed, trainer_.input_shape(),
                                                            trainer_.data_.shape().classes));
  model_->set_loss(trainer_.loss_);
  MIRRORED_ASSIGN_OR_RETURN(optimizer_,
                            model::Optimizer::Create(options_.optimizer.name,
                                                     static_cast<float>(options_.optimizer.EffectiveLearningRate())));
  optimizer_->Bind(&model_->store(), &model_->backend());
  return OkStatus();
}

Status ReplicaTrainer::CreateBucketer() {
  auto& store = model_->store();
  std::vector<BucketSpan> spans;
  for (const auto& t : store.trainable()) spans.push_back({t.offset, t.size});
  const size_t bucket_bytes = static_cast<size_t>(options_.communication.bucket_mb * kMiB);
  GradientBucketerOptions bucket_options{.bucket_bytes = bucket_bytes,
                                         .first_bucket_bytes = std::min<size_t>(kMiB, bucket_bytes),
                                         .timeout = trainer_.collective_timeout_,
                                         .wire = trainer_.allreduce_dtype_};
  // GPU: backward only issues kernels; each bucket's all-reduce waits on
  // the device for the ones that wrote it (cuda_event_fence.h). A lone
  // replica's all-reduce is the identity (SoloReplicaGroup): nothing to order.
  Communicator& comm = replica_.communicator();
  if (replica_.on_gpu() && comm.world_size() > 1) {
    const size_t buckets = PlanGradientBuckets(spans, bucket_options).size();
    MIRRORED_ASSIGN_OR_RETURN(fence_, MakeCudaEventFence(model_->backend(), comm, buckets));
    bucket_options.fence = fence_.get();
  }
  if (options_.steps.accumulate_steps > 1) {
    accumulator_ =
        std::make_unique<GradientAccumulator>(model_->backend(), store.grads_data(), store.params_size(), spans);
  }
  bucketer_ = std::make_unique<GradientBucketer>(std::move(spans), store.grads_data(), &comm, bucket_options);
  return OkStatus();
}

Status ReplicaTrainer::ValidateResumedCheckpoint() {
  // The epoch (from 0) the checkpoint's last step belongs to.
  const int64_t epoch = std::max<int64_t>(0, static_cast<int64_t>(position_.epoch) - (position_.step == 0 ? 1 : 0));
  double val_loss = -1, val_acc = -1;
  if (replica_.is_chief()) {
    MIRRORED_LOG(INFO) << "validating ckpt-" << step_ << " first: metrics.jsonl has no validation of it (the run "
                          "that wrote it ended before, or ran with --no-validate)";
  }
  MIRRORED_RETURN_IF_ERROR(
      ValidateOnTestSet(*model_, trainer_.data_.test(), trainer_.micro_batch_, replica_, &val_loss, &val_acc));
  if (replica_.is_chief()) {
    MIRRORED_RETURN_IF_ERROR(WhileRunning(trainer_.log_.Validation(step_, epoch, val_loss, val_acc)));
    trainer_.UpdateSummary([&](TrainSummary& summary) {
      summary.val_loss = val_loss;
      summary.val_accuracy = val_acc;
    });
  }
  return OkStatus();
}

void ReplicaTrainer::SayNothingToTrain() {
  // A finished job started again (or one given fewer steps): say so rather
  // than report a 0-step run.
  if (replica_.is_chief()) {
    const int64_t total_steps = trainer_.total_steps_;
    // Epochs counted from 1, as in the progress and metrics lines.
    const std::string where =
        position_.step == 0 ? "the end of epoch " + std::to_string(position_.epoch)
                            : "batch " + std::to_string(position_.step) + " of epoch " + std::to_string(position_.epoch + 1);
    const std::string why =
        position_.epoch >= static_cast<uint64_t>(options_.steps.epochs) || options_.steps.max_steps <= 0
            ? "--epochs " + std::to_string(options_.steps.epochs) + " ends there: give a larger --epochs"
            : "--max-steps " + std::to_string(options_.steps.max_steps) + " ends " +
                  (step_ == total_steps ? std::string("there") : "at step " + std::to_string(total_steps)) +
                  ": give a larger --max-steps";
    MIRRORED_LOG(WARNING) << "nothing to train: the run directory's latest checkpoint is at step " << step_ << ", "
                          << where << ", and " << why << " to train on, or another --run-dir";
  }
  trainer_.UpdateSummary([](TrainSummary& summary) { summary.nothing_to_train = true; });
}

bool ReplicaTrainer::MoreToTrain() const {
  return step_ < trainer_.total_steps_ && position_.epoch < static_cast<uint64_t>(options_.steps.epochs);
}

StatusOr<bool> ReplicaTrainer::Step() {
  MIRRORED_ASSIGN_OR_RETURN(data::Batch batch, prefetcher_->Next(kNextBatchTimeout));
  MIRRORED_RETURN_IF_ERROR(TrainOn(batch));
  StepMarks at = MarksAfter(batch);
  if (IsSyncPoint(at)) MIRRORED_RETURN_IF_ERROR(SyncPoint(at));
  if (step_ % options_.steps.log_every == 0 || at.epoch_end || at.last || at.preempted) {
    MIRRORED_RETURN_IF_ERROR(ReportProgress(at));
  }
  MIRRORED_RETURN_IF_ERROR(SettleWeights(at));
  const bool checkpoint_now = trainer_.checkpoints_ && at.checkpoint_due();
  if (checkpoint_now && replica_.global_rank() == 0) MIRRORED_RETURN_IF_ERROR(Checkpoint(at));
  if (checkpoint_now) last_checkpoint_ = step_;
  if (at.epoch_end || at.last) MIRRORED_RETURN_IF_ERROR(EndEpoch(at));
  if (!at.preempted) return true;
  StopPreempted();
  return false;
}

Status ReplicaTrainer::TrainOn(const data::Batch& batch) {
  // Every micro-batch's per-example loss is scaled by the whole step's
  // global batch (and fp16's loss scale, fixed within the step).
  const float example_weight =
      (loss_scale_ ? loss_scale_->scale() : 1.0f) / static_cast<float>(trainer_.global_batch_);
  if (weights_.front() != example_weight) std::fill(weights_.begin(), weights_.end(), example_weight);
  // This replica's slice holds its K micro-batches one after the other.
  const auto micro_batches = static_cast<uint32_t>(options_.steps.accumulate_steps);
  const uint32_t n = batch.size / micro_batches;
  const size_t example_floats = batch.size == 0 ? 0 : batch.images.size() / batch.size;
  const size_t target_floats = batch.size == 0 ? 0 : batch.targets.size() / batch.size;
  for (uint32_t k = 0; k < micro_batches; ++k) {
    const size_t first = size_t{k} * n;  // the micro-batch's first example in the slice
    // Where it starts in the global batch (rank x slice, batch_sampler.h): Dropout's masks.
    model_->SetBatchPosition(step_, static_cast<int64_t>(replica_.global_rank()) * batch.size + first);
    Forward(n, batch.images.data() + first * example_floats,
            batch.labels.empty() ? nullptr : batch.labels.data() + first,
            batch.targets.empty() ? nullptr : batch.targets.data() + first * target_floats);
    if (k + 1 == micro_batches) break;
    model_->Backward(weights_.data(), {});  // no all-reduce before the last micro-batch
    accumulator_->Keep(static_cast<int>(k));
  }
  bucketer_->BeginStep();
  model_->Backward(weights_.data(), [&](int i) {
    if (accumulator_) accumulator_->AddTo(i);
    bucketer_->Ready(i);
  });
  MIRRORED_RETURN_IF_ERROR(bucketer_->Finish());
  return Update(batch);
}

void ReplicaTrainer::Forward(uint32_t n, const float* images, const int32_t* labels, const float* targets) {
  model_->Forward(static_cast<int>(n), images, labels, targets, /*training=*/true);
  for (float l : model_->losses()) totals_.replica.loss += l;
  totals_.replica.correct += model_->MetricSum();  // mse: squared errors
  totals_.replica.count += n;
}

Status ReplicaTrainer::Update(const data::Batch& batch) {
  // A function of the step alone: a resumed job goes on with the same rates.
  optimizer_->set_learning_rate(static_cast<float>(trainer_.schedule_->At(step_)));
  if (loss_scale_) {
    optimizer_->ApplyLossScaled(*loss_scale_);  // every replica skips the same steps
  } else {
    optimizer_->Apply();
  }
  ++totals_.window_steps;
  ++step_;
  position_ = batch.next;
  if (options_.validation.replicas) {
    MIRRORED_ASSIGN_OR_RETURN(bool same, ReplicasIdentical(model_->store().DownloadParams(), replica_.communicator()));
    if (!same) {
      return InternalError("replicas diverged at step " + std::to_string(step_) + ": their weights' fingerprints differ");
    }
  }
  return OkStatus();
}

StepMarks ReplicaTrainer::MarksAfter(const data::Batch& batch) const {
  StepMarks at;
  at.epoch = static_cast<int64_t>(batch.position.epoch);
  at.epoch_end = batch.next.epoch != batch.position.epoch;
  at.last = step_ == trainer_.total_steps_ || position_.epoch >= static_cast<uint64_t>(options_.steps.epochs);
  // The same on every task, whether or not it has a --run-dir: the sync
  // points and the BatchNorm reduce are collectives.
  at.scheduled_checkpoint = options_.checkpoints.every > 0 ? step_ % options_.checkpoints.every == 0 : at.epoch_end;
  return at;
}

bool ReplicaTrainer::IsSyncPoint(const StepMarks& at) const {
  // Every checkpoint step is one, so no checkpoint follows an unchecked loss.
  const int64_t sync_every = std::min<int64_t>(options_.steps.log_every, kPreemptionCheckSteps);
  return step_ % sync_every == 0 || at.epoch_end || at.last || at.scheduled_checkpoint;
}

Status ReplicaTrainer::SyncPoint(StepMarks& at) {
  // Loss and accuracy counts, and whether any task was told to stop
  // (SIGTERM), summed across every replica.
  // A replica told to stop adds k = its task's ordinal + 1 and k * k as
  // well: when every such replica is of one task, count * sum(k * k)
  // equals sum(k) squared, and sum(k) / count names that task.
  const float told = Preemption::Requested() ? 1.0f : 0.0f;
  const float key = trainer_.task_key_;
  const MetricSums& mine = totals_.replica;
  std::vector<float> sums = {static_cast<float>(mine.loss), static_cast<float>(mine.correct),
                             static_cast<float>(mine.count), told, told * key, told * key * key};
  MIRRORED_RETURN_IF_ERROR(replica_.SumAcrossReplicas(sums));
  // Every replica holds the same sums, so all stop here together.
  if (!std::isfinite(sums[0])) {
    return DivergedError(sums[0] / std::max(1.0f, sums[2]), synced_step_ + 1, step_, at.epoch, last_checkpoint_,
                         trainer_.strategy_.is_chief_task(), options_);
  }
  synced_step_ = step_;
  totals_.window.Add(sums[0], sums[1], sums[2]);
  totals_.epoch.Add(sums[0], sums[1], sums[2]);
  at.preempted = sums[3] > 0;
  if (at.preempted) preempted_tasks_ = PreemptedTasks(trainer_.tasks_, sums[3], sums[4], sums[5], trainer_.world_);
  totals_.replica = MetricSums{};
  return OkStatus();
}

Status ReplicaTrainer::ReportProgress(const StepMarks& at) {
  const double secs = std::chrono::duration<double>(Clock::now() - totals_.window_start).count();
  const MetricSums& window = totals_.window;
  if (replica_.is_chief() && window.count > 0) {
    MIRRORED_RETURN_IF_ERROR(WhileRunning(trainer_.log_.Train(
        step_, trainer_.total_steps_, at.epoch, window.loss / window.count, window.correct / window.count,
        window.count / secs, secs * 1000 / totals_.window_steps, optimizer_->learning_rate(),
        LossScaleFiguresOf(loss_scale_))));
  }
  // A checkpoint written in the background that failed (a full disk) stops
  // the job here, not at the next checkpoint's step, which may be far: the
  // steps in between could never be saved.
  if (trainer_.writer_ && replica_.global_rank() == 0) {
    MIRRORED_RETURN_IF_ERROR(WhileRunning(trainer_.writer_->TakeFailure()));
  }
  totals_.window = MetricSums{};
  totals_.window_steps = 0;
  totals_.window_start = Clock::now();
  return OkStatus();
}

Status ReplicaTrainer::SettleWeights(const StepMarks& at) {
  auto& store = model_->store();
  // The loss was computed before this step's update: before a checkpoint
  // (or the end) every replica checks the weights themselves. Replicas hold
  // identical weights, so all decide alike, no collective.
  if (at.checkpoint_due() && !AllFinite(store.DownloadParams())) {
    return DivergedError(std::nullopt, step_, step_, at.epoch, last_checkpoint_, trainer_.strategy_.is_chief_task(),
                         options_);
  }
  if ((at.epoch_end || at.checkpoint_due()) && store.state_size() > 0) {
    // BatchNorm statistics are per replica (local batches); average them so
    // every replica (and the checkpoint) holds the same state.
    model_->backend().Synchronize();  // the forward pass's updates, on a GPU stream
    MIRRORED_RETURN_IF_ERROR(
        replica_.communicator().AllReduce(store.state_data(), store.state_size(), ReduceOp::kAvg));
  }
  return OkStatus();
}

Status ReplicaTrainer::Checkpoint(const StepMarks& at) {
  const CheckpointState st = StateToSave(at.last);
  // The copy of the weights is the only stall; the files are written by the
  // writer's thread (the final one synchronously).
  ModelSnapshot snapshot = ModelSnapshot::Take(*model_, *optimizer_);
  if (!snapshot.AllFinite()) {
    // The loss was finite but this step's update was not: never replace a
    // good checkpoint with this one.
    return DivergedError(std::nullopt, step_, step_, at.epoch, last_checkpoint_, true, options_);
  }
  CheckpointWriter& writer = *trainer_.writer_;
  return WhileRunning(at.last || at.preempted ? writer.Write(snapshot.Contents(st))  // written before saying so
                                              : writer.WriteAsync(snapshot.Contents(st)));
}

CheckpointState ReplicaTrainer::StateToSave(bool final) const {
  CheckpointState st;
  st.step = step_;
  st.epoch = static_cast<int64_t>(position_.epoch);
  st.step_in_epoch = static_cast<int64_t>(position_.step);
  st.seed = st.data_seed = static_cast<int64_t>(options_.seed);
  st.world_size = trainer_.world_;
  st.num_workers = trainer_.strategy_.num_tasks();
  st.global_batch_size = static_cast<int64_t>(trainer_.global_batch_);
  st.model = trainer_.model_.name();
  st.model_json = trainer_.model_.RecordedJson();
  if (trainer_.loss_ != model::Loss::kSparseCategoricalCrossentropy) st.loss = options_.model.loss;
  const data::ImageSetShape& data = trainer_.data_.shape();
  st.data_shape = {data.height, data.width, data.channels};
  st.classes = data.classes;
  st.optimizer = options_.optimizer.name;
  st.precision = options_.model.precision;
  if (loss_scale_) {
    st.loss_scale = loss_scale_->scale();
    st.loss_scale_good_steps = loss_scale_->good_steps();
  }
  st.final = final;
  st.mirrored_version = kVersion;
  st.wall_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return st;
}

Status ReplicaTrainer::EndEpoch(const StepMarks& at) {
  double val_loss = -1, val_acc = -1;
  if (options_.validation.test_set) {
    MIRRORED_RETURN_IF_ERROR(
        ValidateOnTestSet(*model_, trainer_.data_.test(), trainer_.micro_batch_, replica_, &val_loss, &val_acc));
    if (replica_.is_chief()) {
      MIRRORED_RETURN_IF_ERROR(WhileRunning(trainer_.log_.Validation(step_, at.epoch, val_loss, val_acc)));
    }
  }
  if (replica_.is_chief()) {
    const MetricSums& epoch = totals_.epoch;
    trainer_.UpdateSummary([&](TrainSummary& summary) {
      summary.loss = epoch.loss / std::max(1.0, epoch.count);
      summary.accuracy = epoch.correct / std::max(1.0, epoch.count);
      summary.val_loss = val_loss;
      summary.val_accuracy = val_acc;
    });
  }
  totals_.epoch = MetricSums{};
  return OkStatus();
}

void ReplicaTrainer::StopPreempted() {
  if (replica_.is_chief()) {
    MIRRORED_LOG(WARNING) << "preempted (SIGTERM " << preempted_tasks_ << "): stopped after step " << step_
                          << (trainer_.checkpoints_ ? ", checkpointed" : " (no --run-dir: nothing saved)");
  }
  trainer_.UpdateSummary([&](TrainSummary& summary) {
    summary.preempted = true;
    summary.preempted_tasks = preempted_tasks_;
  });
  stopped_early_ = true;
}

Status ReplicaTrainer::Finish() {
  if (trainer_.writer_ && replica_.global_rank() == 0) {
    MIRRORED_RETURN_IF_ERROR(WhileRunning(trainer_.writer_->Wait()));
    // Evaluators beside this job: no checkpoint follows this one.
    if (!stopped_early_ && last_checkpoint_ >= 0) {
      MIRRORED_RETURN_IF_ERROR(
          WhileRunning(TrainingDone::Write(FileEnv::Default(), options_.checkpoints.run_dir, last_checkpoint_)));
      MIRRORED_RETURN_IF_ERROR(
          WhileRunning(ExportFinalWeights(trainer_.model_, *model_, options_.checkpoints.run_dir)));
    }
  }
  // Prove the replicas ended identical: max and min of a fingerprint agree.
  std::vector<float> params = model_->store().DownloadParams();
  MIRRORED_ASSIGN_OR_RETURN(bool same, ReplicasIdentical(params, replica_.communicator()));
  if (replica_.local_replica() == 0) {
    trainer_.UpdateSummary([&](TrainSummary& summary) {
      summary.steps = step_;
      summary.weights_fingerprint = static_cast<uint32_t>(WeightsFingerprint(params));
      summary.params = std::move(params);
      summary.replicas_identical = same;
    });
  }
  return OkStatus();
}

}  // namespace mirrored
