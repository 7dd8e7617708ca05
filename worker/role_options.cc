#include "worker/role_options.h"

namespace mirrored {

TrainerOptions TrainerOptionsFrom(const WorkerOptions& f) {
  TrainerOptions o;
  o.model = {.name = f.model,
             .keras_json = f.model_json,
             .loss = f.loss,
             .precision = f.precision,
             .initial_loss_scale = f.initial_loss_scale};
  o.data = {.dir = f.data_dir, .tfrecord_image_key = f.tfrecord_image_key, .tfrecord_label_key = f.tfrecord_label_key};
  o.seed = f.seed;
  o.optimizer = {.name = f.optimizer, .lr = f.lr};
  o.schedule = {.kind = f.lr_schedule,
                .warmup_steps = f.warmup_steps,
                .decay_steps = f.lr_decay_steps,
                .decay_rate = f.lr_decay_rate_given ? std::optional<double>(f.lr_decay_rate) : std::nullopt,
                .alpha = f.lr_alpha,
                .scale_by_replicas = f.scale_lr_by_replicas};
  o.steps = {.epochs = f.epochs,
             .max_steps = f.max_steps,
             .batch_per_replica = f.batch_per_replica,
             .accumulate_steps = f.accumulate_steps,
             .log_every = f.log_every};
  o.checkpoints = {.run_dir = f.run_dir,
                   .restart_from_scratch = f.restart_from_scratch,
                   .every = f.checkpoint_every,
                   .keep = f.keep_checkpoints};
  o.validation = {.test_set = f.validate, .replicas = f.verify_replicas};
  o.communication = {.bucket_mb = f.bucket_mb,
                     .allreduce_dtype = f.allreduce_dtype,
                     .collective_timeout = MillisecondsOf(f.collective_timeout_sec),
                     .registration_timeout = MillisecondsOf(f.registration_timeout_sec)};
  return o;
}

EvaluatorOptions EvaluatorOptionsFrom(const WorkerOptions& f) {
  return {.run_dir = f.run_dir,
          .data_dir = f.data_dir,
          .data_options = f.data_options(),
          .device = f.device,
          .model = f.model_given ? std::optional<std::string>(f.model) : std::nullopt,
          .poll_interval = std::chrono::duration<double>(f.poll_interval_sec),
          .eval_timeout = std::chrono::duration<double>(f.eval_timeout_sec),
          .max_evaluations = f.max_evaluations};
}

void SetStrategyFlags(const WorkerOptions& f, DeviceKind device, StrategyOptions& so) {
  so.device = device;  // auto: every visible GPU, else --cpu-replicas CPU replicas
  so.cpu_replicas = f.cpu_replicas;
  so.collective_timeout = MillisecondsOf(f.collective_timeout_sec);
  so.registration_timeout = MillisecondsOf(f.registration_timeout_sec);
  so.heartbeat_interval = MillisecondsOf(f.heartbeat_interval_sec);
  so.heartbeat_timeout = MillisecondsOf(f.heartbeat_timeout_sec);
}

}  // namespace mirrored
