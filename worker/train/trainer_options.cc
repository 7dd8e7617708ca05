#include "worker/train/trainer_options.h"

namespace mirrored {

double TrainerOptions::Optimizer::EffectiveLearningRate() const {
  if (lr > 0) return lr;
  return name == "sgd" ? 1e-2 : 1e-3;
}

data::DataOptions TrainerOptions::data_options() const {
  return {.tfrecord_image_key = data.tfrecord_image_key,
          .tfrecord_label_key = data.tfrecord_label_key,
          .float_targets = model.loss == "mse"};
}

}  // namespace mirrored
