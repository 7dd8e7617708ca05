// One layer of a model described as data: what a Keras model's JSON turns
// into (keras_model_json.h) before any tensor exists. Specs are checked
// against their input shape (OutputShape), then made into Layers
// (MakeLayer) and wired into a LayerGraph, one per replica.
//
//   LayerSpec conv{.kind = LayerKind::kConv2D, .name = "conv", .keras_class = "Conv2D", .units = 32, .kernel = 3};
//   StatusOr<Shape3> out = conv.OutputShape({32, 32, 3});   // {30, 30, 32}
//   std::unique_ptr<Layer> layer = MakeLayer(conv);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/layer.h"
#include "worker/model/parameter_store.h"

namespace mirrored::model {

enum class LayerKind {
  kDense,          // units, relu, init
  kConv2D,         // units (filters), kernel, stride, same_padding, bias, relu, init
  kMaxPool2D,      // kernel (pool size), stride
  kAvgPool2D,      // kernel (pool size), stride
  kBatchNorm,      // momentum, epsilon
  kRelu,
  kFlatten,
  kGlobalAvgPool,
  kDropout,        // rate
  kRescaling,      // scale, offset
  kAdd,            // two or more inputs of one shape
};

struct LayerSpec {
  LayerKind kind = LayerKind::kRelu;
  std::string name;         // tensors are "<name>/kernel", ...
  std::string keras_class;  // for messages: "Conv2D"
  std::vector<int> inputs;  // earlier specs' indices, or LayerGraph::kGraphInput
  int units = 0;
  int kernel = 1;
  int stride = 1;
  bool same_padding = false;
  bool bias = true;
  bool relu = false;
  Init init = Init::kGlorotUniform;
  float rate = 0.f;
  float scale = 1.f, offset = 0.f;
  float momentum = 0.99f, epsilon = 1e-3f;

  // The per-example output shape for `input` (the first input's, for Add),
  // or InvalidArgument saying why the layer cannot take it (the caller
  // names the file and the layer): a window larger than the image, Dense on
  // an H x W x C activation (Keras applies it to the last axis only).
  StatusOr<Shape3> OutputShape(Shape3 input) const;
};

// A fresh layer for `spec` (not kAdd: LayerGraph::AddSum joins branches).
std::unique_ptr<Layer> MakeLayer(const LayerSpec& spec);

}  // namespace mirrored::model
