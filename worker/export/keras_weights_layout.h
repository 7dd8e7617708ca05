// Where each weight of a Keras model goes in its `.weights.h5` file, from
// the model's JSON: Keras names a layer's group after its class and its
// place among model.layers ("layers/conv2d", "layers/conv2d_1", ...; the
// JSON's "layers" order, which is model.layers' as to_json() writes it),
// and lists its variables in a fixed order. Only layers with weights are
// listed; the tensors are mirrored's ("<tensor prefix>/kernel").
//
//   StatusOr<std::vector<KerasLayerWeights>> l = KerasWeightsLayout(keras_json, {});
//   // (*l)[0]: {"layers/dense", "dense1", {"dense1/kernel", "dense1/bias"}}
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace mirrored {

struct KerasLayerWeights {
  std::string group;       // "layers/batch_normalization_2"
  std::string layer_name;  // the Keras layer's name
  std::string tensor_prefix;
  // Keras' order, by mirrored tensor name: Dense and Conv2D "kernel",
  // "bias" (Conv2D's only with use_bias); BatchNormalization "gamma",
  // "beta", "moving_mean", "moving_variance".
  std::vector<std::string> tensors;
};

// Keras' snake_case of a class name (its generic_utils.to_snake_case):
// "Conv2D" -> "conv2d", "BatchNormalization" -> "batch_normalization".
std::string KerasSnakeCase(const std::string& class_name);

// `tensor_prefix` maps a Keras layer name to its tensors' prefix where the
// two differ (the zoo's, keras_zoo_json.h). InvalidArgument when `keras_json`
// has no "config"."layers" list or a layer without a class or name.
StatusOr<std::vector<KerasLayerWeights>> KerasWeightsLayout(const nlohmann::json& keras_json,
                                                            const std::map<std::string, std::string>& tensor_prefix);

}  // namespace mirrored
