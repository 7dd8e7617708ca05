// What one entry of a Keras model's "layers" list (model.to_json(), Keras 2
// or 3) means to mirrored: the model's input, a layer (LayerSpec), or an
// identity (Activation("linear"), a final softmax, which the loss applies).
// Every option that changes what the layer computes is checked; one that
// mirrored cannot honour (another activation, use_bias=False on Dense, an
// initializer, regularizer or constraint it lacks, dilation, channels_first,
// synchronized batch norm...) is refused naming the field.
//
//   StatusOr<KerasLayer> l = ReadKerasLayer(entry);   // entry: {"class_name": "Conv2D", "config": {...}}
//   // errors read 'layer "conv2d" (Conv2D): "dilation_rate" is [2, 2]; mirrored supports [1, 1]'
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "worker/model/layer_spec.h"

namespace mirrored::model {

struct KerasLayer {
  enum class Role {
    kInput,     // InputLayer: `input` holds its per-example shape
    kLayer,     // `spec`
    kIdentity,  // passes its input on
    kSoftmax,   // an Activation("softmax"): only as the model's output
  };
  Role role = Role::kLayer;
  std::string name;
  std::string keras_class;
  LayerSpec spec;
  Shape3 input;
  bool softmax_output = false;  // Dense / Conv2D with activation="softmax": only as the model's output
};

// The classes ReadKerasLayer takes, for messages.
const char* SupportedKerasLayers();
// InvalidArgument naming the layer, its class and the field (the caller
// adds the file).
StatusOr<KerasLayer> ReadKerasLayer(const nlohmann::json& entry);
// A Keras batch shape ([null, H, W, C], [null, H, W] or [null, N]) as a
// per-example Shape3 (H x W x 1, 1 x 1 x N for the shorter ones).
StatusOr<Shape3> KerasBatchShape(const nlohmann::json& shape, const std::string& what);

}  // namespace mirrored::model
