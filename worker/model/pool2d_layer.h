// Max or average pooling, square window, no padding ("valid"), no tensors:
// Keras' MaxPooling2D and AveragePooling2D (max_pool2d_layer.h,
// avg_pool2d_layer.h name the two).
//
//   MaxPool2DLayer p("pool1", /*size=*/2, /*stride=*/2);
//   Shape3 out = p.Build({26, 26, 32}, &store);   // {13, 13, 32}
#pragma once

#include <memory>

#include "worker/model/device_array.h"
#include "worker/model/layer.h"

namespace mirrored::model {

enum class PoolKind { kMax, kAvg };

class Pool2DLayer : public Layer {
 public:
  Pool2DLayer(std::string name, PoolKind kind, int size, int stride)
      : Layer(std::move(name)), kind_(kind), size_(size), stride_(stride) {}

  Shape3 Build(Shape3 input, ParameterStore* store) override;
  void Bind(Backend* backend, ParameterStore* store) override;
  const float* Forward(int n, const float* x, bool training) override;
  float* Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) override;
  bool FoldInputReluMask() override { return impl_->FoldInputReluMask(); }

 private:
  PoolKind kind_;
  int size_, stride_;
  PoolSpec spec_;
  std::unique_ptr<PoolKernel> impl_;
  DeviceArray y_, dx_;
};

}  // namespace mirrored::model
