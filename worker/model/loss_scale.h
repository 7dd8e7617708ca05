// Dynamic loss scaling for fp16 training, with Keras' LossScaleOptimizer
// rules (tf_keras mixed_precision; PyTorch's GradScaler differs only in its
// defaults): the loss is multiplied by scale() before the backward pass so
// that small gradients survive float16; after the all-reduce the gradients
// are divided by it again. A step whose gradients hold an infinity or NaN
// is skipped (no update) and the scale halves (never below 1); after
// `growth_steps` finite steps in a row it doubles.
//
//   DynamicLossScale ls;                        // 2^15, doubling every 2000 good steps
//   backward with example weight w * ls.scale();
//   bool finite = backend.UnscaleAndCheckFinite(grads, n, 1 / ls.scale());
//   if (ls.Update(finite)) optimizer.Apply();   // false: skip this step
#pragma once

#include <cstdint>

namespace mirrored::model {

class DynamicLossScale {
 public:
  static constexpr float kInitialScale = 32768.f;  // 2^15, Keras' default
  static constexpr int64_t kGrowthSteps = 2000;    // Keras' dynamic_growth_steps
  static constexpr float kFactor = 2.f;
  static constexpr float kMinScale = 1.f;

  explicit DynamicLossScale(float initial = kInitialScale, int64_t growth_steps = kGrowthSteps)
      : scale_(initial), growth_steps_(growth_steps) {}

  float scale() const { return scale_; }
  // Finite steps since the last change of the scale (checkpointed with it).
  int64_t good_steps() const { return good_steps_; }
  // Steps skipped for non-finite gradients since this object was made.
  int64_t skipped_steps() const { return skipped_; }

  // Takes one step's verdict; returns whether the optimizer may apply it.
  bool Update(bool grads_finite) {
    if (!grads_finite) {
      scale_ = scale_ / kFactor < kMinScale ? kMinScale : scale_ / kFactor;
      good_steps_ = 0;
      ++skipped_;
      return false;
    }
    if (++good_steps_ >= growth_steps_) {
      const float grown = scale_ * kFactor;
      if (grown <= 3.4e38f) scale_ = grown;  // stays finite
      good_steps_ = 0;
    }
    return true;
  }

  // From a checkpoint (state.json's loss_scale, loss_scale_good_steps).
  void Restore(float scale, int64_t good_steps) {
    scale_ = scale < kMinScale ? kMinScale : scale;
    good_steps_ = good_steps < 0 ? 0 : good_steps;
  }

 private:
  float scale_;
  int64_t growth_steps_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace mirrored::model
