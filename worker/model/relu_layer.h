// Element-wise max(x, 0). Backward masks dy in place and returns it (or
// returns it as it is where the layer reading y folds the mask in).
//
//   ReluLayer r("stem/relu");
//   r.Build({28, 28, 32}, &store);
//   const float* y = r.Forward(n, x, true);
#pragma once

#include "worker/model/device_array.h"
#include "worker/model/layer.h"

namespace mirrored::model {

class ReluLayer final : public Layer {
 public:
  explicit ReluLayer(std::string name) : Layer(std::move(name)) {}

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
    backend_->Relu(x, y, size_t(n) * shape_.size());
    return y;
  }
  float* Backward(int n, const float*, float* dy, bool need_dx, const GradientReadyFn&) override {
    if (!need_dx) return nullptr;
    if (mask_dy_) backend_->ReluMask(y_.data(), dy, size_t(n) * shape_.size());
    return dy;
  }
  bool EndsWithRelu() const override { return true; }
  void SkipReluMask() override { mask_dy_ = false; }

 private:
  Shape3 shape_;
  Backend* backend_ = nullptr;
  DeviceArray y_;
  bool mask_dy_ = true;  // false: the layer reading y masks dx itself (Layer::SkipReluMask)
};

}  // namespace mirrored::model
