// Inverted dropout (Keras' Dropout): in training, each value is zeroed with
// probability `rate` and the others scaled by 1 / (1 - rate); in inference
// it passes x through. The mask is drawn on the host from a counter-based
// hash of (seed, layer name, step, example index in the global batch,
// value index): an example gets the same mask on every replica count, and a
// resumed run draws what an uninterrupted one would.
//
//   DropoutLayer d("dropout", /*rate=*/0.25f);
//   d.SetBatchPosition({.seed = 42, .step = 7, .first_example = 64});
//   const float* y = d.Forward(n, x, /*training=*/true);
#pragma once

#include <cstdint>
#include <vector>

#include "worker/model/device_array.h"
#include "worker/model/layer.h"

namespace mirrored::model {

class DropoutLayer final : public Layer {
 public:
  DropoutLayer(std::string name, float rate);

  Shape3 Build(Shape3 input, ParameterStore* store) override;
  void Bind(Backend* backend, ParameterStore* store) override;
  const float* Forward(int n, const float* x, bool training) override;
  float* Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) override;
  void SetBatchPosition(const BatchPosition& position) override { position_ = position; }

  // The mask value (0 or 1 / (1 - rate)) of value `index` of example
  // `example` (in the global batch) at `position`'s seed and step.
  float MaskValue(const BatchPosition& position, int64_t example, size_t index) const;

 private:
  float rate_;
  uint64_t name_hash_;
  Shape3 shape_;
  BatchPosition position_;
  Backend* backend_ = nullptr;
  std::vector<float> host_mask_;
  DeviceArray mask_, y_;
};

}  // namespace mirrored::model
