// The built-in models (model_zoo.h) defined as Keras models: the JSON that
// tf_keras's model.to_json() writes for them (mlp and cnn Sequential,
// resnet Functional), plus the "module" Keras 3 needs. --model NAME builds
// its model by reading this JSON with --model-json's reader
// (keras_model_json.h); the export writes it beside the weights, and
// tf_keras's and Keras 3's `model_from_json` build it. Keras layer names
// are mirrored's tensor prefixes with '/' as '_' ("block2/shortcut/bn" ->
// "block2_shortcut_bn"); `tensor_prefix` maps them back, so checkpoints
// keep the zoo's tensor names. The model takes what mirrored's model takes (uint8 pixels
// already divided by 255) and gives logits (no softmax), as mirrored does.
//
//   StatusOr<KerasZooModel> m = KerasZooModel::Build("cnn", {28, 28, 1}, 10);
//   std::string text = m->json.dump();   // tf_keras.models.model_from_json(text)
//   m->tensor_prefix.at("dense1");       // "dense1"
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "worker/model/layer.h"

namespace mirrored::model {

struct KerasZooModel {
  nlohmann::json json;
  std::map<std::string, std::string> tensor_prefix;  // Keras layer name -> mirrored tensor prefix

  // InvalidArgument for a name that is not a zoo model's, or an input it
  // cannot take (model_zoo.h's CheckZooInput).
  static StatusOr<KerasZooModel> Build(const std::string& name, Shape3 input, int classes);
};

}  // namespace mirrored::model
