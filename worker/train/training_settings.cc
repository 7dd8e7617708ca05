#include "worker/train/training_settings.h"

#include <cstdio>
#include <sstream>

namespace mirrored {
namespace {

std::string Float(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", x);
  return text;
}

// The parameters --lr-schedule uses, as they take effect ("auto": the
// run's own steps, the same on every task that agrees on the rest).
void AddScheduleParameters(const LearningRateScheduleOptions& o,
                           std::vector<std::pair<std::string, std::string>>& settings) {
  if (o.kind == "constant") return;
  settings.emplace_back("--lr-decay-steps", o.decay_steps > 0 ? std::to_string(o.decay_steps) : "auto");
  if (o.kind == "cosine") {
    settings.emplace_back("--lr-alpha", Float(o.alpha));
  } else {
    settings.emplace_back("--lr-decay-rate", Float(o.EffectiveDecayRate()));
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> TrainingSettings(const TrainerOptions& o, size_t training_examples,
                                                                  size_t test_examples) {
  char lr[32];
  std::snprintf(lr, sizeof(lr), "%.9g", o.optimizer.EffectiveLearningRate());
  std::ostringstream bucket_mb;
  bucket_mb << o.communication.bucket_mb;
  const bool validate = o.validation.test_set;
  std::vector<std::pair<std::string, std::string>> settings = {
      {"--model", o.model.name},
      {"--batch-per-replica", std::to_string(o.steps.batch_per_replica)},
      {"--optimizer", o.optimizer.name},
      {"--precision", o.model.precision},
      {"--lr", lr},
      {"--lr-schedule", o.schedule.kind},
      {"--warmup-steps", std::to_string(o.schedule.warmup_steps)},
      {"--scale-lr-by-replicas", o.schedule.scale_by_replicas ? "on" : "off"},
      {"--accumulate-steps", std::to_string(o.steps.accumulate_steps)},
      {"--seed", std::to_string(o.seed)},
      {"--epochs", std::to_string(o.steps.epochs)},
      {"--max-steps", std::to_string(o.steps.max_steps)},
      {"--bucket-mb", bucket_mb.str()},
      {"--allreduce-dtype", o.communication.allreduce_dtype},
      {"--log-every", std::to_string(o.steps.log_every)},
      {"--checkpoint-every", std::to_string(o.checkpoints.every)},
      {"--validate", validate ? "on" : "off"},
      {"--verify-replicas", o.validation.replicas ? "on" : "off"},
      {"training examples (--data)", std::to_string(training_examples)},
      {"test examples (--data)", validate ? std::to_string(test_examples) : "-"}};
  AddScheduleParameters(o.schedule, settings);
  // fp16 only: tasks starting from other scales would sum gradients scaled
  // differently (a resumed job takes the checkpoint's, rank 0's, anyway).
  if (o.model.precision == "fp16") {
    char scale[32];
    std::snprintf(scale, sizeof(scale), "%.9g", o.model.initial_loss_scale);
    settings.emplace_back("--initial-loss-scale", scale);
  }
  return settings;
}

}  // namespace mirrored
