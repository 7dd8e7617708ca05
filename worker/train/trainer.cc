#include "worker/train/trainer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/cpu_cores.h"
#include "common/crc32c.h"
#include "common/logging.h"
#include "worker/checkpoint/checkpoint_data_shape.h"
#include "worker/checkpoint/training_done.h"
#include "worker/checkpoint/training_start.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/model.h"
#include "worker/model/model_zoo.h"
#include "worker/train/replica_trainer.h"
#include "worker/train/training_settings.h"

namespace mirrored {
namespace {

// What tells the tasks' --model-json apart: the CRC-32C of the model's
// canonical JSON (the files may lie at other paths on other hosts).
std::string KerasModelDigest(const model::ModelChoice& model) {
  if (!model.is_keras()) return "-";
  const std::string text = model.RecordedJson().dump();
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%08x", Crc32c(text.data(), text.size()));
  return model.name() + " " + hex;
}

}  // namespace

StatusOr<TrainSummary> Train(const TrainerOptions& options, MirroredStrategy& strategy) {
  MIRRORED_ASSIGN_OR_RETURN(
      data::TrainingData data,
      data::TrainingData::Load(options.data.dir, options.validation.test_set, options.data_options()));
  return Train(options, strategy, data);
}

StatusOr<TrainSummary> Train(const TrainerOptions& options, MirroredStrategy& strategy,
                             const data::TrainingData& data) {
  return Trainer(options, strategy, data).Run();
}

Trainer::Trainer(const TrainerOptions& options, MirroredStrategy& strategy, const data::TrainingData& data)
    : options_(options), strategy_(strategy), data_(data) {}

StatusOr<TrainSummary> Trainer::Run() {
  MIRRORED_RETURN_IF_ERROR(Plan());
  if (strategy_.is_chief_task()) MIRRORED_RETURN_IF_ERROR(PrepareRunDir());
  SplitCpuThreads();
  // GPU replica code throws CudaError from inside the model's kernels:
  // RunReplicas returns it as the replica's error.
  Status status = strategy_.RunReplicas(
      [this](ReplicaContext& replica) { return ReplicaTrainer(*this, replica).Run(); });
  if (!status.ok()) return status;
  return std::move(summary_);
}

Status Trainer::Plan() {
  // A task started with another model, batch or schedule would send
  // collectives of other sizes at other steps: refuse before the first one.
  // The data's image shape and classes size the model's tensors.
  MIRRORED_ASSIGN_OR_RETURN(model_, model::ModelChoice::FromFlags(options_.model.name, options_.model.keras_json));
  auto settings = TrainingSettings(options_, data_.train().size(), data_.test().size());
  settings.emplace_back("images (--data)", data_.shape().ImageString());
  settings.emplace_back("classes (--data)", std::to_string(data_.shape().classes));
  settings.emplace_back("loss (--loss)", options_.model.loss);
  settings.emplace_back("--model-json (its model)", KerasModelDigest(model_));
  MIRRORED_RETURN_IF_ERROR(strategy_.CheckTasksAgree(settings));
  MIRRORED_RETURN_IF_ERROR(model_.CheckInput(input_shape(), data_.shape().classes));
  // Every task has the same device kind and precision: all refuse alike.
  MIRRORED_ASSIGN_OR_RETURN(precision_, model::ParsePrecision(options_.model.precision));
  MIRRORED_ASSIGN_OR_RETURN(allreduce_dtype_, ParseWireType(options_.communication.allreduce_dtype));
  MIRRORED_ASSIGN_OR_RETURN(loss_, model::ParseLoss(options_.model.loss));
  if (loss_ == model::Loss::kMeanSquaredError) summary_.metric = "mse";
  if (!strategy_.on_gpu()) MIRRORED_RETURN_IF_ERROR(model::CheckCpuBackendPrecision(precision_));
  MIRRORED_RETURN_IF_ERROR(PlanSteps());
  const RunLength run{.replicas = world_, .steps_per_epoch = steps_per_epoch_, .total_steps = total_steps_};
  MIRRORED_ASSIGN_OR_RETURN(
      LearningRateSchedule schedule,
      LearningRateSchedule::ForRun(options_.schedule, options_.optimizer.EffectiveLearningRate(), run));
  schedule_.emplace(schedule);
  checkpoints_ = !options_.checkpoints.run_dir.empty();
  tasks_ = strategy_.training_tasks();
  task_key_ = static_cast<float>(std::find(tasks_.begin(), tasks_.end(), strategy_.task_name()) - tasks_.begin() + 1);
  collective_timeout_ = options_.communication.collective_timeout;
  return OkStatus();
}

Status Trainer::PlanSteps() {
  world_ = strategy_.num_replicas_in_sync();
  micro_batch_ = static_cast<uint64_t>(options_.steps.batch_per_replica) * static_cast<uint64_t>(world_);
  global_batch_ = micro_batch_ * static_cast<uint64_t>(options_.steps.accumulate_steps);
  sampler_.emplace(data_.train().size(), global_batch_, options_.seed, /*drop_remainder=*/true);
  steps_per_epoch_ = static_cast<int64_t>(sampler_->steps_per_epoch());
  if (steps_per_epoch_ == 0) {
    return InvalidArgumentError(
        "global batch " + std::to_string(global_batch_) + " (--batch-per-replica " +
        std::to_string(options_.steps.batch_per_replica) + " x " + std::to_string(world_) + " replicas" +
        (options_.steps.accumulate_steps > 1
             ? " x --accumulate-steps " + std::to_string(options_.steps.accumulate_steps)
             : "") +
        ") is larger than the training set (" + std::to_string(data_.train().size()) + " examples)");
  }
  total_steps_ = steps_per_epoch_ * options_.steps.epochs;
  if (options_.steps.max_steps > 0) total_steps_ = std::min(total_steps_, options_.steps.max_steps);
  return OkStatus();
}

Status Trainer::PrepareRunDir() {
  if (checkpoints_) MIRRORED_RETURN_IF_ERROR(ClaimRunDir());
  MIRRORED_RETURN_IF_ERROR(log_.Open(options_.checkpoints.run_dir));
  if (loss_ == model::Loss::kMeanSquaredError) log_.set_metric("mse");
  if (checkpoints_) {
    MIRRORED_RETURN_IF_ERROR(FindResumePoint());
    MIRRORED_RETURN_IF_ERROR(RecordStart());
  }
  LogPlan();
  return OkStatus();
}

Status Trainer::ClaimRunDir() {
  // Before anything is written: a directory another job trains into, or
  // one that cannot be written, is refused now (exit 2), not at the first
  // checkpoint.
  // The other tasks wait for the chief in the first broadcast: give up
  // (exit 2, which they then report) well before their collective timeout.
  const TrainerOptions::Communication& c = options_.communication;
  const std::chrono::milliseconds lock_wait = std::min(c.registration_timeout, c.collective_timeout / 2);
  MIRRORED_ASSIGN_OR_RETURN(RunDirLock lock, RunDirLock::Acquire(options_.checkpoints.run_dir, lock_wait));
  run_dir_lock_.emplace(std::move(lock));
  // This job is training: an earlier run's "done" no longer holds (it is
  // written again when this one ends normally).
  return TrainingDone::Remove(FileEnv::Default(), options_.checkpoints.run_dir);
}

Status Trainer::FindResumePoint() {
  CheckpointReader reader(FileEnv::Default(), options_.checkpoints.run_dir);
  auto latest = reader.LoadLatest(options_.checkpoints.restart_from_scratch ? CheckpointReader::IfAllDamaged::kStartOver
                                                                          : CheckpointReader::IfAllDamaged::kRefuse);
  if (!latest.ok()) return latest.status().code() == StatusCode::kNotFound ? OkStatus() : latest.status();
  MIRRORED_RETURN_IF_ERROR(CheckResumable(latest->info));
  MIRRORED_RETURN_IF_ERROR(CheckFitsData(*latest));
  const CheckpointState& st = latest->info.state;
  // Epochs counted from 1, as in the progress, metrics and evaluator lines.
  MIRRORED_LOG(INFO) << "resuming from " << latest->info.dir << " (step " << latest->info.step << ", "
                     << (st.step_in_epoch == 0 ? "the end of epoch " + std::to_string(st.epoch)
                                               : "batch " + std::to_string(st.step_in_epoch) + " of epoch " +
                                                     std::to_string(st.epoch + 1))
                     << ")";
  resume_ = std::move(latest).value();
  return OkStatus();
}

Status Trainer::CheckResumable(const CheckpointInfo& latest) const {
  const CheckpointState& st = latest.state;
  if (st.model != model_.name() || st.model_json != model_.RecordedJson()) {
    const std::string given = model_.is_keras()
                                  ? "--model-json " + options_.model.keras_json + " (" + model_.name() + ")"
                                  : "--model " + model_.name();
    return InvalidArgumentError(given + " does not match the run directory's checkpoint " + latest.dir + " (model " +
                                st.model + (st.model == model_.name() ? ", other layers" : "") +
                                "): use another --run-dir");
  }
  const std::string trained_loss = st.loss.empty() ? "sparse_categorical_crossentropy" : st.loss;
  if (trained_loss != options_.model.loss) {
    return InvalidArgumentError("--loss " + options_.model.loss + " does not match the run directory's checkpoint " +
                                latest.dir + " (loss " + trained_loss + "): use another --run-dir");
  }
  if (!st.optimizer.empty() && st.optimizer != options_.optimizer.name) {
    return InvalidArgumentError("--optimizer " + options_.optimizer.name +
                                " does not match the run directory's checkpoint " + latest.dir + " (optimizer " +
                                st.optimizer + ", whose slots it holds): use --optimizer " + st.optimizer +
                                " to resume it, or another --run-dir");
  }
  if (st.data_seed != static_cast<int64_t>(options_.seed)) {
    MIRRORED_LOG(WARNING) << "--seed " << options_.seed << " differs from the checkpoint's (" << st.data_seed << ", "
                          << latest.dir << "): the data order from here on is another one"
                          << (st.step_in_epoch > 0 ? ", and the rest of epoch " + std::to_string(st.epoch + 1) +
                                                         " repeats some of its examples and skips others"
                                                   : "");
  }
  return OkStatus();
}

Status Trainer::CheckFitsData(const LoadedCheckpoint& latest) const {
  // The state does not record the data's shape; the tensors show it.
  MIRRORED_ASSIGN_OR_RETURN(auto model, model_.Create(model::MakeCpuBackend(), 0, input_shape(), data_.shape().classes));
  auto dims = [](const std::vector<int64_t>& shape) {
    std::string s;
    for (int64_t d : shape) s += (s.empty() ? "" : ",") + std::to_string(d);
    return "[" + s + "]";
  };
  for (const auto& t : model->store().trainable()) {
    const auto* there = latest.model.Find(t.name);
    if (there == nullptr || there->shape == t.shape) continue;  // a missing tensor: the restore names it
    return InvalidArgumentError("--data " + options_.data.dir + " gives " + data_.shape().ImageString() +
                                " images in " + std::to_string(data_.shape().classes) + " classes, but " +
                                latest.info.dir + " was trained on other data (tensor " + t.name + " is " +
                                dims(there->shape) + " there, " + dims(t.shape) +
                                " for this data): use another --run-dir");
  }
  // Shapes the tensors do not show (a model that pools over the image):
  // the state's record of the data.
  const data::ImageSetShape& s = data_.shape();
  return CheckpointFitsData(latest.info, {s.height, s.width, s.channels}, s.classes, "--data " + options_.data.dir);
}

Status Trainer::RecordStart() {
  const int64_t start_step = resume_ ? resume_->info.step : 0;
  MIRRORED_RETURN_IF_ERROR(log_.Starting(start_step, resume_ ? resume_->info.dir : ""));
  // Where this run starts, for the evaluator (training_start.h): what an
  // earlier run recorded past it is gone with its checkpoints.
  StatusOr<std::string> start_run = TrainingStart::Write(FileEnv::Default(), options_.checkpoints.run_dir, start_step);
  if (!start_run.ok()) return WhileRunning(start_run.status());
  if (resume_ && options_.validation.test_set) {
    const CheckpointState& st = resume_->info.state;
    if (st.step_in_epoch == 0 || st.final) {  // a step that was validated, if its run lived long enough
      MIRRORED_ASSIGN_OR_RETURN(bool validated, log_.HasValidation(st.step));
      validate_first_ = !validated;
    }
  }
  writer_ = std::make_unique<CheckpointWriter>(
      FileEnv::Default(), options_.checkpoints.run_dir,
      CheckpointWriterOptions{
          .keep_checkpoints = options_.checkpoints.keep, .start_run = *start_run, .start_step = start_step});
  return OkStatus();
}

void Trainer::LogPlan() const {
  const std::string micro_batches = options_.steps.accumulate_steps > 1
                                        ? " (" + std::to_string(options_.steps.accumulate_steps) +
                                              " micro-batches of " + std::to_string(micro_batch_) + ")"
                                        : "";
  MIRRORED_LOG(INFO) << "training " << model_.name() << " on " << strategy_.Describe() << "; global batch "
                     << global_batch_ << micro_batches << ", " << model::PrecisionName(precision_)
                     << (allreduce_dtype_ == WireType::kFp32
                             ? ""
                             : std::string(" (gradients all-reduced in ") + WireTypeName(allreduce_dtype_) + ")")
                     << ", " << steps_per_epoch_
                     << " step" << (steps_per_epoch_ == 1 ? "" : "s") << " per epoch, " << total_steps_ << " step"
                     << (total_steps_ == 1 ? "" : "s") << " in all";
  LogSchedule();
  if (options_.steps.max_steps > total_steps_) {
    MIRRORED_LOG(WARNING) << "--max-steps " << options_.steps.max_steps << " is beyond --epochs "
                          << options_.steps.epochs << " (" << total_steps_ << " steps at global batch " << global_batch_
                          << "): training stops at step " << total_steps_ << "; raise --epochs to train longer";
  }
}

void Trainer::LogSchedule() const {
  // The default schedule says nothing new; any other is worth a line.
  const LearningRateScheduleParams& p = schedule_->params();
  if (p.decay == LearningRateDecay::kConstant && p.warmup_steps == 0 && !options_.schedule.scale_by_replicas) return;
  std::ostringstream scaled;
  if (options_.schedule.scale_by_replicas) {
    scaled << " (--lr " << options_.optimizer.EffectiveLearningRate() << " x " << world_
           << " replicas, --scale-lr-by-replicas)";
  }
  MIRRORED_LOG(INFO) << "learning rate: " << schedule_->Describe() << scaled.str();
  if (p.warmup_steps > total_steps_) {
    MIRRORED_LOG(WARNING) << "--warmup-steps " << p.warmup_steps << " is beyond the run's " << total_steps_
                          << " steps: the learning rate never reaches its peak";
  }
}

void Trainer::SplitCpuThreads() {
  // This process's cores (OMP_NUM_THREADS, else those it may run on) are
  // split among its replicas (oneDNN's threads).
  const int budget = CpuThreadBudget();
  threads_per_replica_ = std::max(1, budget / strategy_.local_replicas());
  if (!strategy_.on_gpu()) LogCpuThreads(budget);
}

void Trainer::LogCpuThreads(int budget) const {
  const int cores = UsableCpuCores();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int replicas = strategy_.local_replicas();
  MIRRORED_LOG(INFO) << replicas << " CPU replica" << (replicas == 1 ? "" : "s") << " x " << threads_per_replica_
                     << " thread" << (threads_per_replica_ == 1 ? "" : "s") << " (from "
                     << (ParseThreadCount(omp != nullptr ? omp : "") ? "OMP_NUM_THREADS" : "the CPUs")
                     << "; this process may run on " << cores << " CPU" << (cores == 1 ? "" : "s") << ")";
  if (omp != nullptr && *omp != '\0' && !ParseThreadCount(omp)) {
    MIRRORED_LOG(WARNING) << "OMP_NUM_THREADS \"" << omp << "\" is not a thread count: using the " << cores
                          << " CPU(s) this process may run on";
  } else if (budget > cores) {
    MIRRORED_LOG(WARNING) << "OMP_NUM_THREADS " << budget << " is more than the " << cores
                          << " CPU(s) this process may run on: the threads will wait for each other's cores";
  }
}

}  // namespace mirrored
