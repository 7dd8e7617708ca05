// Reshapes activations to [n, h*w*c] in Keras's (NHWC) order: moves no data
// on an NHWC backend; on an NCHW one (the GPU) reorders them
// (ChannelsLastInput).
//
//   FlattenLayer f("flatten");
//   Shape3 out = f.Build({5, 5, 64}, &store);   // {1, 1, 1600}
//   const float* y = f.Forward(n, x, true);     // == x on the CPU
#pragma once

#include "worker/model/channels_last_input.h"
#include "worker/model/layer.h"

namespace mirrored::model {

class FlattenLayer final : public Layer {
 public:
  explicit FlattenLayer(std::string name) : Layer(std::move(name)) {}

  Shape3 Build(Shape3 input, ParameterStore*) override {
    in_ = input;
    return {1, 1, int(input.size())};
  }
  void Bind(Backend* backend, ParameterStore*) override { order_.Bind(backend, in_); }
  const float* Forward(int n, const float* x, bool) override { return order_.Forward(n, x); }
  float* Backward(int n, const float*, float* dy, bool need_dx, const GradientReadyFn&) override {
    return need_dx ? order_.Backward(n, dy) : nullptr;
  }

 private:
  Shape3 in_;
  ChannelsLastInput order_;
};

}  // namespace mirrored::model
