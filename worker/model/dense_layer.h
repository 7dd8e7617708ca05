// Fully connected layer, kernel [in, units] (Glorot uniform unless told), bias [units]
// (zeros), optional fused ReLU. Flattens its input (in NHWC order, as
// Flatten does).
//
//   auto d = std::make_unique<DenseLayer>("dense1", 256, /*relu=*/true);
//   Shape3 out = d->Build({28, 28, 1}, &store);   // {1, 1, 256}
//   // tensors: dense1/kernel [784, 256], dense1/bias [256]
#pragma once

#include <memory>

#include "worker/model/channels_last_input.h"
#include "worker/model/device_array.h"
#include "worker/model/layer.h"

namespace mirrored::model {

class DenseLayer final : public Layer {
 public:
  DenseLayer(std::string name, int units, bool relu, Init init = Init::kGlorotUniform)
      : Layer(std::move(name)), units_(units), relu_(relu), init_(init) {}

  Shape3 Build(Shape3 input, ParameterStore* store) override;
  void Bind(Backend* backend, ParameterStore* store) override;
  const float* Forward(int n, const float* x, bool training) override;
  float* Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) override;

 private:
  int units_;
  bool relu_;
  Init init_;
  int in_ = 0;
  Shape3 in_shape_;
  ChannelsLastInput order_;
  int kernel_ = -1, bias_ = -1;
  Backend* backend_ = nullptr;
  ParameterStore* store_ = nullptr;
  std::unique_ptr<DenseKernel> kernel_impl_;
  DeviceArray y_, dx_;
};

}  // namespace mirrored::model
