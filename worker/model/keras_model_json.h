// A Keras model as model.to_json() writes it (tf_keras / Keras 2 and
// Keras 3; Sequential and Functional), read into mirrored's layers: each
// entry is checked (keras_layer_config.h), shapes are inferred from the
// input layer's, and the graph is kept as LayerSpecs, made into a fresh
// LayerGraph per replica. The last softmax is dropped: the loss applies it
// (sparse categorical cross-entropy on logits). Errors are InvalidArgument
// naming the file, the layer, its class and the field. The zoo's models
// (model_zoo.h) are their own Keras JSON read the same way.
//
//   StatusOr<KerasModelJson> m = KerasModelJson::ReadFile("model.json");
//   MIRRORED_RETURN_IF_ERROR(m->CheckFits({32, 32, 3}, 10));   // the data's images and classes
//   std::unique_ptr<LayerGraph> graph = m->BuildGraph();
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "worker/model/keras_layer_config.h"
#include "worker/model/layer_graph.h"
#include "worker/model/layer_spec.h"

namespace mirrored::model {

// The largest --model-json file read (Keras writes kilobytes; a hostile
// /dev/zero-like file must not fill the memory).
inline constexpr uintmax_t kMaxModelJsonBytes = uintmax_t{64} << 20;

class KerasModelJson {
 public:
  // `source` names the text in messages (the file, or "state.json of ckpt-40").
  static StatusOr<KerasModelJson> Parse(std::string_view text, const std::string& source);
  // `tensor_prefix` maps a Keras layer name to its tensors' prefix where
  // the two differ (the zoo's, keras_zoo_json.h: "block2_shortcut_bn" ->
  // "block2/shortcut/bn"); other layers' tensors are named after the layer
  // ("conv/kernel").
  static StatusOr<KerasModelJson> FromJson(const nlohmann::json& json, const std::string& source,
                                           const std::map<std::string, std::string>& tensor_prefix = {});
  // NotFound / InvalidArgument naming `path` when it cannot be read.
  static StatusOr<KerasModelJson> ReadFile(const std::string& path);

  const std::string& name() const { return name_; }  // the Keras model's "name"
  const std::string& source() const { return source_; }
  Shape3 input_shape() const { return input_; }
  int outputs() const { return outputs_; }  // logits per example
  // Weights and statistics, counted from the shapes before anything is
  // built (what the 2^28 cap is checked on): Keras' trainable plus
  // non-trainable counts.
  uint64_t parameters() const { return parameters_; }
  const std::vector<LayerSpec>& layers() const { return layers_; }
  // The model as read: what a checkpoint's state.json records.
  const nlohmann::json& keras_json() const { return json_; }

  // InvalidArgument naming the file and both shapes when the data's images
  // (H x W x C) or class count differ from the model's input and outputs
  // (a count of 0: not known yet, not checked).
  Status CheckFits(Shape3 data_images, int data_classes) const;
  std::unique_ptr<LayerGraph> BuildGraph() const;

 private:
  KerasModelJson() = default;
  static StatusOr<KerasModelJson> Read(const nlohmann::json& json, const std::string& source,
                                       const std::map<std::string, std::string>& tensor_prefix);
  // Adds layer `s` (input `in`, output `out`) to the model's parameter and
  // per-example activation counts; InvalidArgument naming it past the caps.
  Status CheckSize(const LayerSpec& s, Shape3 in, Shape3 out, double* parameters, double* values) const;
  // One entry of "layers" (errors naming the file), its tensors named by tensor_prefix_.
  StatusOr<KerasLayer> ReadLayer(const nlohmann::json& entry) const;
  Status ReadSequential(const nlohmann::json& layers);
  Status ReadFunctional(const nlohmann::json& config);
  Status InferShapes();
  Status Fail(const std::string& what) const;

  std::string name_, source_;
  Shape3 input_;
  bool has_input_ = false;
  int outputs_ = 0;
  uint64_t parameters_ = 0;
  std::vector<LayerSpec> layers_;
  nlohmann::json json_;
  std::map<std::string, std::string> tensor_prefix_;
};

}  // namespace mirrored::model
