// The built-in models (model_zoo.h) as Keras models: the JSON that
// tf_keras's model.to_json() writes for the same layers (mlp and cnn
// Sequential, resnet Functional), plus the "module" Keras 3 needs, so that
// tf_keras's and Keras 3's `model_from_json` build them and mirrored's own
// --model-json reads them back to the same model. Keras
// layer names are mirrored's tensor prefixes with '/' as '_'
// ("block2/shortcut/bn" -> "block2_shortcut_bn"); `tensor_prefix` maps
// them back. The model takes what mirrored's model takes (uint8 pixels
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

namespace mirrored {

struct KerasZooModel {
  nlohmann::json json;
  std::map<std::string, std::string> tensor_prefix;  // Keras layer name -> mirrored tensor prefix

  // InvalidArgument for a name that is not a zoo model's, or an input it
  // cannot take (model_zoo.h's CheckZooInput).
  static StatusOr<KerasZooModel> Build(const std::string& name, model::Shape3 input, int classes);
};

}  // namespace mirrored
