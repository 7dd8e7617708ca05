// Average pooling, square window, no padding ("valid"), no tensors: Keras'
// AveragePooling2D.
//
//   AvgPool2DLayer p("pool", /*size=*/2, /*stride=*/2);
//   Shape3 out = p.Build({32, 32, 16}, &store);   // {16, 16, 16}
//   const float* y = p.Forward(n, x, true);
#pragma once

#include <memory>

#include "worker/model/device_array.h"
#include "worker/model/layer.h"

namespace mirrored::model {

class AvgPool2DLayer final : public Layer {
 public:
  AvgPool2DLayer(std::string name, int size, int stride) : Layer(std::move(name)), size_(size), stride_(stride) {}

  Shape3 Build(Shape3 input, ParameterStore* store) override;
  void Bind(Backend* backend, ParameterStore* store) override;
  const float* Forward(int n, const float* x, bool training) override;
  float* Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) override;

 private:
  int size_, stride_;
  PoolSpec spec_;
  std::unique_ptr<PoolKernel> impl_;
  DeviceArray y_, dx_;
};

}  // namespace mirrored::model
