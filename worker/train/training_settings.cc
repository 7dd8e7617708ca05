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
void AddScheduleParameters(const WorkerOptions& o, std::vector<std::pair<std::string, std::string>>& settings) {
  if (o.lr_schedule == "constant") return;
  settings.emplace_back("--lr-decay-steps", o.lr_decay_steps > 0 ? std::to_string(o.lr_decay_steps) : "auto");
  if (o.lr_schedule == "cosine") {
    settings.emplace_back("--lr-alpha", Float(o.lr_alpha));
  } else {
    settings.emplace_back("--lr-decay-rate", Float(o.EffectiveLrDecayRate()));
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> TrainingSettings(const WorkerOptions& o, size_t training_examples,
                                                                  size_t test_examples) {
  char lr[32];
  std::snprintf(lr, sizeof(lr), "%.9g", o.EffectiveLearningRate());
  std::ostringstream bucket_mb;
  bucket_mb << o.bucket_mb;
  std::vector<std::pair<std::string, std::string>> settings = {{"--model", o.model},
          {"--batch-per-replica", std::to_string(o.batch_per_replica)},
          {"--optimizer", o.optimizer},
          {"--precision", o.precision},
          {"--lr", lr},
          {"--lr-schedule", o.lr_schedule},
          {"--warmup-steps", std::to_string(o.warmup_steps)},
          {"--scale-lr-by-replicas", o.scale_lr_by_replicas ? "on" : "off"},
          {"--accumulate-steps", std::to_string(o.accumulate_steps)},
          {"--seed", std::to_string(o.seed)},
          {"--epochs", std::to_string(o.epochs)},
          {"--max-steps", std::to_string(o.max_steps)},
          {"--bucket-mb", bucket_mb.str()},
          {"--log-every", std::to_string(o.log_every)},
          {"--checkpoint-every", std::to_string(o.checkpoint_every)},
          {"--validate", o.validate ? "on" : "off"},
          {"--verify-replicas", o.verify_replicas ? "on" : "off"},
          {"training examples (--data)", std::to_string(training_examples)},
          {"test examples (--data)", o.validate ? std::to_string(test_examples) : "-"}};
  AddScheduleParameters(o, settings);
  // fp16 only: tasks starting from other scales would sum gradients scaled
  // differently (a resumed job takes the checkpoint's, rank 0's, anyway).
  if (o.precision == "fp16") {
    char scale[32];
    std::snprintf(scale, sizeof(scale), "%.9g", o.initial_loss_scale);
    settings.emplace_back("--initial-loss-scale", scale);
  }
  return settings;
}

}  // namespace mirrored
