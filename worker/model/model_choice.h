// What a run trains: a model of the zoo (--model mlp|cnn|resnet) or a Keras
// model's JSON (--model-json FILE). A checkpoint records it in state.json
// ("model": the name below; "model_json": the Keras JSON), so the evaluator
// and a resumed run rebuild the same model from the checkpoint alone.
//
//   StatusOr<ModelChoice> c = ModelChoice::FromFlags("cnn", "model.json");   // the JSON wins when given
//   MIRRORED_RETURN_IF_ERROR(c->CheckInput({32, 32, 3}, 10));
//   StatusOr<std::unique_ptr<Model>> m = c->Create(MakeCpuBackend(), /*seed=*/42, {32, 32, 3}, 10);
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "worker/model/keras_model_json.h"
#include "worker/model/model.h"

namespace mirrored::model {

class ModelChoice {
 public:
  // A zoo model; its name is checked by CheckInput and Create.
  static ModelChoice Zoo(std::string name);
  // --model-json `path` when it is not empty (read and checked now: exit-2
  // errors name the file, the layer and the field), else --model `zoo_name`.
  static StatusOr<ModelChoice> FromFlags(const std::string& zoo_name, const std::string& keras_json_path);
  // What a checkpoint's state.json recorded: `name`, and `keras_json` (null
  // for a zoo model). `source` names the state file in messages.
  static StatusOr<ModelChoice> FromRecorded(const std::string& name, const nlohmann::json& keras_json,
                                            const std::string& source);

  // "mlp", "cnn", "resnet", or "keras:<the Keras model's name>".
  const std::string& name() const { return name_; }
  bool is_keras() const { return keras_ != nullptr; }
  // The Keras model (null for a zoo model).
  const KerasModelJson* keras() const { return keras_.get(); }
  // The Keras JSON to record (null for a zoo model).
  nlohmann::json RecordedJson() const { return keras_ ? keras_->keras_json() : nlohmann::json(); }
  // Whether two choices build the same model (the same zoo name, or the same Keras JSON).
  bool SameModel(const ModelChoice& other) const;

  // InvalidArgument naming the model (or the file) and both shapes when it
  // cannot take `input` images in `classes` classes.
  Status CheckInput(Shape3 input, int classes) const;
  StatusOr<std::unique_ptr<Model>> Create(std::unique_ptr<Backend> backend, uint64_t seed, Shape3 input,
                                          int classes) const;

 private:
  std::string name_;
  std::shared_ptr<const KerasModelJson> keras_;
};

}  // namespace mirrored::model
