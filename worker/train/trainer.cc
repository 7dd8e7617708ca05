#include "worker/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "common/cpu_cores.h"
#include "common/logging.h"
#include "mirrored/config.h"
#include "common/run_dir/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "common/run_dir/run_dir_lock.h"
#include "worker/checkpoint/training_done.h"
#include "worker/checkpoint/training_start.h"
#include "worker/data/batch_prefetcher.h"
#include "worker/data/batch_sampler.h"
#include "worker/data/fashion_mnist.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/loss_scale.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"
#include "worker/model/precision.h"
#include "worker/train/chief_log.h"
#include "worker/train/cuda_event_fence.h"
#include "worker/train/diverged_error.h"
#include "worker/train/gradient_bucketer.h"
#include "worker/train/model_checkpoint.h"
#include "worker/train/preempted_tasks.h"
#include "worker/train/preemption.h"
#include "worker/train/replica_fingerprint.h"
#include "worker/train/start_point.h"
#include "worker/train/test_set_validation.h"
#include "worker/train/training_settings.h"

namespace mirrored {
namespace {

using Clock = std::chrono::steady_clock;

std::optional<LossScaleFigures> LossScaleFiguresOf(const std::optional<model::DynamicLossScale>& loss_scale) {
  if (!loss_scale) return std::nullopt;
  return LossScaleFigures{loss_scale->scale(), loss_scale->skipped_steps()};
}

}  // namespace

StatusOr<TrainSummary> Train(const WorkerOptions& options, MirroredStrategy& strategy) {
  MIRRORED_ASSIGN_OR_RETURN(data::FashionMnist data, data::FashionMnist::Load(options.data_dir, options.validate));
  return Train(options, strategy, data);
}

StatusOr<TrainSummary> Train(const WorkerOptions& options, MirroredStrategy& strategy,
                             const data::FashionMnist& data) {
  // A task started with another model, batch or schedule would send
  // collectives of other sizes at other steps: refuse before the first one.
  MIRRORED_RETURN_IF_ERROR(strategy.CheckTasksAgree(TrainingSettings(options, data.train().size(), data.test().size())));
  // Every task has the same device kind and precision: all refuse alike.
  MIRRORED_ASSIGN_OR_RETURN(const model::Precision precision, model::ParsePrecision(options.precision));
  if (!strategy.on_gpu()) MIRRORED_RETURN_IF_ERROR(model::CheckCpuPrecision(precision));
  const int world = strategy.num_replicas_in_sync();
  const uint64_t global_batch = static_cast<uint64_t>(options.batch_per_replica) * static_cast<uint64_t>(world);
  data::BatchSampler sampler(data.train().size(), global_batch, options.seed, /*drop_remainder=*/true);
  const int64_t steps_per_epoch = static_cast<int64_t>(sampler.steps_per_epoch());
  if (steps_per_epoch == 0) {
    return InvalidArgumentError("global batch " + std::to_string(global_batch) + " (--batch-per-replica " +
                                std::to_string(options.batch_per_replica) + " x " + std::to_string(world) +
                                " replicas) is larger than the training set (" +
                                std::to_string(data.train().size()) + " examples)");
  }
  int64_t total_steps = steps_per_epoch * options.epochs;
  if (options.max_steps > 0) total_steps = std::min(total_steps, options.max_steps);
  const bool checkpoints = !options.run_dir.empty();

  ChiefLog log;
  std::optional<LoadedCheckpoint> resume;
  bool validate_first = false;  // chief: see StartPoint
  std::unique_ptr<CheckpointWriter> writer;
  std::optional<RunDirLock> run_dir_lock;  // held while this chief trains
  if (strategy.is_chief_task()) {
    if (checkpoints) {
      // Before anything is written: a directory another job trains into,
      // or one that cannot be written, is refused now (exit 2), not at
      // the first checkpoint.
      // The other tasks wait for the chief in the first broadcast: give up
      // (exit 2, which they then report) well before their collective timeout.
      const double lock_wait_sec = std::min(options.registration_timeout_sec, options.collective_timeout_sec / 2);
      MIRRORED_ASSIGN_OR_RETURN(
          RunDirLock lock,
          RunDirLock::Acquire(options.run_dir, std::chrono::milliseconds(static_cast<int64_t>(lock_wait_sec * 1000))));
      run_dir_lock.emplace(std::move(lock));
      // This job is training: an earlier run's "done" no longer holds (it is
      // written again when this one ends normally).
      MIRRORED_RETURN_IF_ERROR(TrainingDone::Remove(FileEnv::Default(), options.run_dir));
    }
    MIRRORED_RETURN_IF_ERROR(log.Open(options.run_dir));
    if (checkpoints) {
      CheckpointReader reader(FileEnv::Default(), options.run_dir);
      auto latest = reader.LoadLatest(/*start_over_if_all_damaged=*/options.restart_from_scratch);
      if (latest.ok()) {
        if (latest->info.state.model != options.model) {
          return InvalidArgumentError("--model " + options.model + " does not match the run directory's checkpoint " +
                                      latest->info.dir + " (model " + latest->info.state.model +
                                      "): use another --run-dir");
        }
        const CheckpointState& st = latest->info.state;
        if (!st.optimizer.empty() && st.optimizer != options.optimizer) {
          return InvalidArgumentError("--optimizer " + options.optimizer + " does not match the run directory's checkpoint " +
                                      latest->info.dir + " (optimizer " + st.optimizer + ", whose slots it holds): use --optimizer " +
                                      st.optimizer + " to resume it, or another --run-dir");
        }
        if (st.data_seed != static_cast<int64_t>(options.seed)) {
          MIRRORED_LOG(WARNING) << "--seed " << options.seed << " differs from the checkpoint's (" << st.data_seed
                                << ", " << latest->info.dir << "): the data order from here on is another one"
                                << (st.step_in_epoch > 0 ? ", and the rest of epoch " + std::to_string(st.epoch + 1) +
                                                               " repeats some of its examples and skips others"
                                                         : "");
        }
        // Epochs counted from 1, as in the progress, metrics and evaluator lines.
        MIRRORED_LOG(INFO) << "resuming from " << latest->info.dir << " (step " << latest->info.step << ", "
                           << (st.step_in_epoch == 0 ? "the end of epoch " + std::to_string(st.epoch)
                                                     : "batch " + std::to_string(st.step_in_epoch) + " of epoch " +
                                                           std::to_string(st.epoch + 1))
                           << ")";
        resume = std::move(latest).value();
      } else if (latest.status().code() != StatusCode::kNotFound) {
        return latest.status();
      }
      const int64_t start_step = resume ? resume->info.step : 0;
      MIRRORED_RETURN_IF_ERROR(log.Starting(start_step, resume ? resume->info.dir : ""));
      // Where this run starts, for the evaluator (training_start.h): what an
      // earlier run recorded past it is gone with its checkpoints.
      StatusOr<std::string> start_run = TrainingStart::Write(FileEnv::Default(), options.run_dir, start_step);
      if (!start_run.ok()) return WhileRunning(start_run.status());
      if (resume && options.validate) {
        const CheckpointState& st = resume->info.state;
        if (st.step_in_epoch == 0 || st.final) {  // a step that was validated, if its run lived long enough
          MIRRORED_ASSIGN_OR_RETURN(bool validated, log.HasValidation(st.step));
          validate_first = !validated;
        }
      }
      writer = std::make_unique<CheckpointWriter>(FileEnv::Default(), options.run_dir,
                                                  CheckpointWriterOptions{.keep_checkpoints = options.keep_checkpoints,
                                                                          .start_run = *start_run,
                                                                          .start_step = start_step});
    }
    MIRRORED_LOG(INFO) << "training " << options.model << " on " << strategy.Describe() << "; global batch "
                       << global_batch << ", " << model::PrecisionName(precision) << ", " << steps_per_epoch << " step" << (steps_per_epoch == 1 ? "" : "s")
                       << " per epoch, " << total_steps << " step" << (total_steps == 1 ? "" : "s") << " in all";
    if (options.max_steps > total_steps) {
      MIRRORED_LOG(WARNING) << "--max-steps " << options.max_steps << " is beyond --epochs " << options.epochs << " ("
                            << total_steps << " steps at global batch " << global_batch
                            << "): training stops at step " << total_steps << "; raise --epochs to train longer";
    }
  }

  TrainSummary summary;
  std::mutex summary_mu;
  const std::vector<std::string> tasks = strategy.training_tasks();
  const float task_key = static_cast<float>(
      std::find(tasks.begin(), tasks.end(), strategy.task_name()) - tasks.begin() + 1);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.collective_timeout_sec * 1000));
  // This process's cores (OMP_NUM_THREADS, else those it may run on) are
  // split among its replicas (oneDNN's threads).
  const int budget = CpuThreadBudget();
  const int threads_per_replica = std::max(1, budget / strategy.local_replicas());
  if (!strategy.on_gpu()) {
    const int cores = UsableCpuCores();
    const char* omp = std::getenv("OMP_NUM_THREADS");
    MIRRORED_LOG(INFO) << strategy.local_replicas() << " CPU replica" << (strategy.local_replicas() == 1 ? "" : "s")
                       << " x " << threads_per_replica << " thread" << (threads_per_replica == 1 ? "" : "s")
                       << " (from " << (ParseThreadCount(omp != nullptr ? omp : "") ? "OMP_NUM_THREADS" : "the CPUs")
                       << "; this process may run on " << cores << " CPU" << (cores == 1 ? "" : "s") << ")";
    if (omp != nullptr && *omp != '\0' && !ParseThreadCount(omp)) {
      MIRRORED_LOG(WARNING) << "OMP_NUM_THREADS \"" << omp << "\" is not a thread count: using the " << cores
                            << " CPU(s) this process may run on";
    } else if (budget > cores) {
      MIRRORED_LOG(WARNING) << "OMP_NUM_THREADS " << budget << " is more than the " << cores
                            << " CPU(s) this process may run on: the threads will wait for each other's cores";
    }
  }

  auto train_replica = [&](ReplicaContext& replica) -> Status {
    std::unique_ptr<model::Backend> backend;
    if (replica.on_gpu()) {
      MIRRORED_ASSIGN_OR_RETURN(backend, replica.MakeBackend(precision));
    } else {
      model::SetCpuThreadsForThisThread(threads_per_replica);
      backend = model::MakeCpuBackend();
    }
    MIRRORED_ASSIGN_OR_RETURN(auto model, model::Model::Create(options.model, std::move(backend), options.seed));
    auto& store = model->store();
    MIRRORED_ASSIGN_OR_RETURN(auto optimizer, model::Optimizer::Create(options.optimizer,
                                                                        static_cast<float>(options.EffectiveLearningRate())));
    optimizer->Bind(&store, &model->backend());
    Communicator& comm = replica.communicator();
    StartPoint start;
    MIRRORED_RETURN_IF_ERROR(
        BroadcastStart(resume, validate_first, global_batch, *model, *optimizer, replica, &start));

    // fp16: the loss is scaled up for the backward pass and the gradients
    // down before the update (a checkpoint's scale carries on).
    std::optional<model::DynamicLossScale> loss_scale;
    if (model::NeedsLossScaling(precision)) {
      loss_scale.emplace(static_cast<float>(options.initial_loss_scale));
      if (start.loss_scale > 0) loss_scale->Restore(start.loss_scale, start.loss_scale_good_steps);
    }

    std::vector<BucketSpan> spans;
    for (const auto& t : store.trainable()) spans.push_back({t.offset, t.size});
    const size_t bucket_bytes = static_cast<size_t>(options.bucket_mb * (1 << 20));
    GradientBucketerOptions bucket_options{.bucket_bytes = bucket_bytes,
                                           .first_bucket_bytes = std::min<size_t>(1u << 20, bucket_bytes),
                                           .timeout = timeout};
    // GPU: backward only issues kernels; each bucket's all-reduce waits on
    // the device for the ones that wrote it (cuda_event_fence.h). A lone
    // replica's all-reduce is the identity (SoloReplicaGroup): nothing to order.
    std::unique_ptr<GradientFence> fence;
    if (replica.on_gpu() && comm.world_size() > 1) {
      const size_t buckets = PlanGradientBuckets(spans, bucket_options).size();
      MIRRORED_ASSIGN_OR_RETURN(fence, MakeCudaEventFence(model->backend(), comm, buckets));
      bucket_options.fence = fence.get();
    }
    GradientBucketer bucketer(spans, store.grads_data(), &comm, bucket_options);
    const uint64_t end_epoch = static_cast<uint64_t>(options.epochs);
    data::BatchPrefetcher prefetcher(&data.train(), sampler, static_cast<uint32_t>(replica.global_rank()),
                                     static_cast<uint32_t>(world), start.position, end_epoch);
    std::vector<float> weights(static_cast<size_t>(options.batch_per_replica), 1.0f / static_cast<float>(global_batch));
    double loss_sum = 0, correct = 0, count = 0;          // this replica, since the last sync point
    double window_loss = 0, window_correct = 0, window_count = 0;  // all replicas, since the last report
    const int64_t sync_every = std::min<int64_t>(options.log_every, kPreemptionCheckSteps);
    double epoch_loss = 0, epoch_correct = 0, epoch_count = 0;
    auto window_start = Clock::now();
    int64_t window_steps = 0;
    int64_t step = start.step;
    data::SamplerPosition position = start.position;
    int64_t synced_step = step;                                  // the last sync point's step
    int64_t last_checkpoint = checkpoints && step > 0 ? step : -1;  // resumed from it, or none yet
    bool stopped_early = false;                                  // preempted
    std::string preempted_tasks;                                 // which tasks the SIGTERM reached
    if (start.validate_first) {
      // The epoch (from 0) the checkpoint's last step belongs to.
      const int64_t epoch = std::max<int64_t>(0, static_cast<int64_t>(position.epoch) - (position.step == 0 ? 1 : 0));
      double val_loss = -1, val_acc = -1;
      if (replica.is_chief()) {
        MIRRORED_LOG(INFO) << "validating ckpt-" << step << " first: metrics.jsonl has no validation of it (the run "
                              "that wrote it ended before, or ran with --no-validate)";
      }
      MIRRORED_RETURN_IF_ERROR(ValidateOnTestSet(*model, data.test(), global_batch, replica, &val_loss, &val_acc));
      if (replica.is_chief()) {
        MIRRORED_RETURN_IF_ERROR(WhileRunning(log.Validation(step, epoch, val_loss, val_acc)));
        std::lock_guard<std::mutex> lock(summary_mu);
        summary.val_loss = val_loss;
        summary.val_accuracy = val_acc;
      }
    }
    if (!(step < total_steps && position.epoch < end_epoch)) {
      // A finished job started again (or one given fewer steps): say so
      // rather than report a 0-step run.
      if (replica.is_chief()) {
        // Epochs counted from 1, as in the progress and metrics lines.
        const std::string where =
            position.step == 0 ? "the end of epoch " + std::to_string(position.epoch)
                               : "batch " + std::to_string(position.step) + " of epoch " + std::to_string(position.epoch + 1);
        const std::string why =
            position.epoch >= end_epoch || options.max_steps <= 0
                ? "--epochs " + std::to_string(options.epochs) + " ends there: give a larger --epochs"
                : "--max-steps " + std::to_string(options.max_steps) + " ends " +
                      (step == total_steps ? std::string("there") : "at step " + std::to_string(total_steps)) +
                      ": give a larger --max-steps";
        MIRRORED_LOG(WARNING) << "nothing to train: the run directory's latest checkpoint is at step " << step << ", "
                              << where << ", and " << why << " to train on, or another --run-dir";
      }
      std::lock_guard<std::mutex> lock(summary_mu);
      summary.nothing_to_train = true;
    }

    while (step < total_steps && position.epoch < end_epoch) {
      MIRRORED_ASSIGN_OR_RETURN(data::Batch batch, prefetcher.Next(std::chrono::seconds(120)));
      const int n = static_cast<int>(batch.size);
      model->Forward(n, batch.images.data(), batch.labels.data(), /*training=*/true);
      for (float l : model->losses()) loss_sum += l;
      correct += static_cast<double>(model->CorrectCount());
      count += n;
      const float example_weight = (loss_scale ? loss_scale->scale() : 1.0f) / static_cast<float>(global_batch);
      if (weights.front() != example_weight) std::fill(weights.begin(), weights.end(), example_weight);
      bucketer.BeginStep();
      model->Backward(weights.data(), [&](int i) { bucketer.Ready(i); });
      MIRRORED_RETURN_IF_ERROR(bucketer.Finish());
      if (loss_scale) {
        optimizer->ApplyLossScaled(*loss_scale);  // every replica skips the same steps
      } else {
        optimizer->Apply();
      }
      ++window_steps;
      ++step;
      position = batch.next;
      if (options.verify_replicas) {
        MIRRORED_ASSIGN_OR_RETURN(bool same, ReplicasIdentical(store.DownloadParams(), comm));
        if (!same) {
          return InternalError("replicas diverged at step " + std::to_string(step) +
                               ": their weights' fingerprints differ");
        }
      }

      const bool epoch_end = batch.next.epoch != batch.position.epoch;
      const bool last = step == total_steps || position.epoch >= end_epoch;
      const int64_t epoch = static_cast<int64_t>(batch.position.epoch);
      // The same on every task, whether or not it has a --run-dir: the sync
      // points and the BatchNorm reduce below are collectives.
      const bool scheduled_checkpoint =
          options.checkpoint_every > 0 ? step % options.checkpoint_every == 0 : epoch_end;
      // Sync point: loss and accuracy counts, and whether any task was told
      // to stop (SIGTERM), summed across every replica. Every checkpoint
      // step is one, so no checkpoint follows an unchecked loss.
      // A replica told to stop adds k = its task's ordinal + 1 and k * k as
      // well: when every such replica is of one task, count * sum(k * k)
      // equals sum(k) squared, and sum(k) / count names that task.
      bool preempted = false;
      if (step % sync_every == 0 || epoch_end || last || scheduled_checkpoint) {
        const float told = Preemption::Requested() ? 1.0f : 0.0f;
        std::vector<float> sums = {static_cast<float>(loss_sum), static_cast<float>(correct), static_cast<float>(count),
                                   told, told * task_key, told * task_key * task_key};
        MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(sums));
        // Every replica holds the same sums, so all stop here together.
        if (!std::isfinite(sums[0])) {
          return DivergedError(sums[0] / std::max(1.0f, sums[2]), synced_step + 1, step, epoch, last_checkpoint,
                               strategy.is_chief_task(), options);
        }
        synced_step = step;
        window_loss += sums[0];
        window_correct += sums[1];
        window_count += sums[2];
        epoch_loss += sums[0];
        epoch_correct += sums[1];
        epoch_count += sums[2];
        preempted = sums[3] > 0;
        if (preempted) preempted_tasks = PreemptedTasks(tasks, sums[3], sums[4], sums[5], world);
        loss_sum = correct = count = 0;
      }
      if (step % options.log_every == 0 || epoch_end || last || preempted) {
        const double secs = std::chrono::duration<double>(Clock::now() - window_start).count();
        if (replica.is_chief() && window_count > 0) {
          MIRRORED_RETURN_IF_ERROR(WhileRunning(log.Train(step, total_steps, epoch, window_loss / window_count,
                                                          window_correct / window_count, window_count / secs,
                                                          secs * 1000 / window_steps, optimizer->learning_rate(),
                                                          LossScaleFiguresOf(loss_scale))));
        }
        // A checkpoint written in the background that failed (a full disk)
        // stops the job here, not at the next checkpoint's step, which may
        // be far: the steps in between could never be saved.
        if (writer && replica.global_rank() == 0) MIRRORED_RETURN_IF_ERROR(WhileRunning(writer->TakeFailure()));
        window_loss = window_correct = window_count = 0;
        window_steps = 0;
        window_start = Clock::now();
      }
      const bool checkpoint_now = checkpoints && (last || preempted || scheduled_checkpoint);
      // The loss above was computed before this step's update: before a
      // checkpoint (or the end) every replica checks the weights themselves.
      // Replicas hold identical weights, so all decide alike, no collective.
      if ((last || preempted || scheduled_checkpoint) && !AllFinite(store.DownloadParams())) {
        return DivergedError(std::nullopt, step, step, epoch, last_checkpoint, strategy.is_chief_task(), options);
      }
      if ((epoch_end || last || scheduled_checkpoint || preempted) && store.state_size() > 0) {
        // BatchNorm statistics are per replica (local batches); average them
        // so every replica (and the checkpoint) holds the same state.
        model->backend().Synchronize();  // the forward pass's updates, on a GPU stream
        MIRRORED_RETURN_IF_ERROR(comm.AllReduce(store.state_data(), store.state_size(), ReduceOp::kAvg));
      }
      if (checkpoint_now && replica.global_rank() == 0) {
        CheckpointState st;
        st.step = step;
        st.epoch = static_cast<int64_t>(position.epoch);
        st.step_in_epoch = static_cast<int64_t>(position.step);
        st.seed = st.data_seed = static_cast<int64_t>(options.seed);
        st.world_size = world;
        st.num_workers = strategy.num_tasks();
        st.global_batch_size = static_cast<int64_t>(global_batch);
        st.model = options.model;
        st.optimizer = options.optimizer;
        st.precision = options.precision;
        if (loss_scale) {
          st.loss_scale = loss_scale->scale();
          st.loss_scale_good_steps = loss_scale->good_steps();
        }
        st.final = last;
        st.mirrored_version = kVersion;
        st.wall_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        // The copy of the weights is the only stall; the files are written
        // by the writer's thread (the final one synchronously).
        ModelSnapshot snapshot = ModelSnapshot::Take(*model, *optimizer);
        if (!snapshot.AllFinite()) {
          // The loss was finite but this step's update was not: never
          // replace a good checkpoint with this one.
          return DivergedError(std::nullopt, step, step, epoch, last_checkpoint, true, options);
        }
        MIRRORED_RETURN_IF_ERROR(
            WhileRunning(last || preempted ? writer->Write(snapshot.Contents(st))   // written before saying so
                                           : writer->WriteAsync(snapshot.Contents(st))));
      }
      if (checkpoint_now) last_checkpoint = step;
      if (epoch_end || last) {
        double val_loss = -1, val_acc = -1;
        if (options.validate) {
          MIRRORED_RETURN_IF_ERROR(ValidateOnTestSet(*model, data.test(), global_batch, replica, &val_loss, &val_acc));
          if (replica.is_chief()) MIRRORED_RETURN_IF_ERROR(WhileRunning(log.Validation(step, epoch, val_loss, val_acc)));
        }
        if (replica.is_chief()) {
          std::lock_guard<std::mutex> lock(summary_mu);
          summary.loss = epoch_loss / std::max(1.0, epoch_count);
          summary.accuracy = epoch_correct / std::max(1.0, epoch_count);
          summary.val_loss = val_loss;
          summary.val_accuracy = val_acc;
        }
        epoch_loss = epoch_correct = epoch_count = 0;
      }
      if (preempted) {
        if (replica.is_chief()) {
          MIRRORED_LOG(WARNING) << "preempted (SIGTERM " << preempted_tasks << "): stopped after step " << step
                                << (checkpoints ? ", checkpointed" : " (no --run-dir: nothing saved)");
        }
        std::lock_guard<std::mutex> lock(summary_mu);
        summary.preempted = true;
        summary.preempted_tasks = preempted_tasks;
        stopped_early = true;
        break;
      }
    }
    if (writer && replica.global_rank() == 0) {
      MIRRORED_RETURN_IF_ERROR(WhileRunning(writer->Wait()));
      // Evaluators beside this job: no checkpoint follows this one.
      if (!stopped_early && last_checkpoint >= 0) {
        MIRRORED_RETURN_IF_ERROR(WhileRunning(TrainingDone::Write(FileEnv::Default(), options.run_dir, last_checkpoint)));
      }
    }
    // Prove the replicas ended identical: max and min of a fingerprint agree.
    std::vector<float> params = store.DownloadParams();
    MIRRORED_ASSIGN_OR_RETURN(bool same, ReplicasIdentical(params, comm));
    if (replica.local_replica() == 0) {
      std::lock_guard<std::mutex> lock(summary_mu);
      summary.steps = step;
      summary.weights_fingerprint = static_cast<uint32_t>(WeightsFingerprint(params));
      summary.params = std::move(params);
      summary.replicas_identical = same;
    }
    return OkStatus();
  };
  // GPU replica code throws CudaError from inside the model's kernels:
  // RunReplicas returns it as the replica's error.
  Status status = strategy.RunReplicas(train_replica);
  if (!status.ok()) return status;
  return summary;
}

}  // namespace mirrored
