// Average pooling, square window, no padding ("valid"), no tensors: Keras'
// AveragePooling2D (pool2d_layer.h).
//
//   AvgPool2DLayer p("pool", /*size=*/2, /*stride=*/2);
//   Shape3 out = p.Build({32, 32, 16}, &store);   // {16, 16, 16}
#pragma once

#include "worker/model/pool2d_layer.h"

namespace mirrored::model {

class AvgPool2DLayer final : public Pool2DLayer {
 public:
  AvgPool2DLayer(std::string name, int size, int stride) : Pool2DLayer(std::move(name), PoolKind::kAvg, size, stride) {}
};

}  // namespace mirrored::model
