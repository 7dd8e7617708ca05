// y = x * scale + offset, element-wise, no tensors: Keras' Rescaling
// (e.g. scale 1/127.5, offset -1 maps [0, 255] to [-1, 1]).
//
//   RescalingLayer r("rescaling", /*scale=*/2.f, /*offset=*/-1.f);
//   r.Build({32, 32, 3}, &store);
//   const float* y = r.Forward(n, x, true);
#pragma once

#include "worker/model/device_array.h"
#include "worker/model/layer.h"

namespace mirrored::model {

class RescalingLayer final : public Layer {
 public:
  RescalingLayer(std::string name, float scale, float offset)
      : Layer(std::move(name)), scale_(scale), offset_(offset) {}

  Shape3 Build(Shape3 input, ParameterStore*) override {
    shape_ = input;
    return input;
  }
  void Bind(Backend* backend, ParameterStore*) override {
    backend_ = backend;
    y_.set_backend(backend);
  }
  const float* Forward(int n, const float* x, bool) override {
    float* y = y_.Reserve(size_t(n) * shape_.size());
    backend_->ScaleShift(x, scale_, offset_, y, size_t(n) * shape_.size());
    return y;
  }
  // dx = dy * scale, in place.
  float* Backward(int n, const float*, float* dy, bool need_dx, const GradientReadyFn&) override {
    if (!need_dx) return nullptr;
    backend_->ScaleShift(dy, scale_, 0.f, dy, size_t(n) * shape_.size());
    return dy;
  }

 private:
  float scale_, offset_;
  Shape3 shape_;
  Backend* backend_ = nullptr;
  DeviceArray y_;
};

}  // namespace mirrored::model
