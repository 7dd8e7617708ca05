// 2-D convolution, kernel [k, k, in_c, filters] (HWIO, as Keras), optional
// bias and fused ReLU, stride, padding "valid" (none) or "same" (Keras' and
// TensorFlow's: output ceil(in / stride), the odd padding pixel at the bottom
// and right; backend.h's SamePadding).
//
//   Conv2DLayer c("conv1", {.filters = 32, .kernel = 3, .relu = true});
//   Shape3 out = c.Build({28, 28, 1}, &store);   // {26, 26, 32}
//   // tensors: conv1/kernel [3, 3, 1, 32], conv1/bias [32]
#pragma once

#include <memory>

#include "worker/model/device_array.h"
#include "worker/model/layer.h"

namespace mirrored::model {

struct Conv2DOptions {
  int filters = 0;
  int kernel = 3;
  int stride = 1;
  bool same_padding = false;  // Keras "same" (SamePadding), else "valid"
  bool bias = true;
  bool relu = false;
  Init init = Init::kGlorotUniform;
};

class Conv2DLayer final : public Layer {
 public:
  Conv2DLayer(std::string name, Conv2DOptions options) : Layer(std::move(name)), o_(options) {}

  Shape3 Build(Shape3 input, ParameterStore* store) override;
  void Bind(Backend* backend, ParameterStore* store) override;
  const float* Forward(int n, const float* x, bool training) override;
  float* Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) override;
  bool EndsWithRelu() const override { return o_.relu; }
  void SkipReluMask() override { mask_dy_ = false; }

 private:
  Conv2DOptions o_;
  bool mask_dy_ = true;  // false: the layer reading y applies the ReLU's backward (Layer::SkipReluMask)
  ConvSpec spec_;
  int kernel_ = -1, bias_ = -1;
  Backend* backend_ = nullptr;
  ParameterStore* store_ = nullptr;
  std::unique_ptr<ConvKernel> impl_;
  DeviceArray y_, dx_;
};

}  // namespace mirrored::model
