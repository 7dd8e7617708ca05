// Max pooling, square window, no padding ("valid"), no tensors: Keras'
// MaxPooling2D (pool2d_layer.h).
//
//   MaxPool2DLayer p("pool1", /*size=*/2, /*stride=*/2);
//   Shape3 out = p.Build({26, 26, 32}, &store);   // {13, 13, 32}
#pragma once

#include "worker/model/pool2d_layer.h"

namespace mirrored::model {

class MaxPool2DLayer final : public Pool2DLayer {
 public:
  MaxPool2DLayer(std::string name, int size, int stride) : Pool2DLayer(std::move(name), PoolKind::kMax, size, stride) {}
};

}  // namespace mirrored::model
