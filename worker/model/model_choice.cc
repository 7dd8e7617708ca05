#include "worker/model/model_choice.h"

#include "worker/model/model_zoo.h"

namespace mirrored::model {
namespace {

constexpr const char* kKerasPrefix = "keras:";

}  // namespace

ModelChoice ModelChoice::Zoo(std::string name) {
  ModelChoice c;
  c.name_ = std::move(name);
  return c;
}

StatusOr<ModelChoice> ModelChoice::FromFlags(const std::string& zoo_name, const std::string& keras_json_path) {
  if (keras_json_path.empty()) return Zoo(zoo_name);
  MIRRORED_ASSIGN_OR_RETURN(KerasModelJson keras, KerasModelJson::ReadFile(keras_json_path));
  ModelChoice c;
  c.name_ = kKerasPrefix + keras.name();
  c.keras_ = std::make_shared<const KerasModelJson>(std::move(keras));
  return c;
}

StatusOr<ModelChoice> ModelChoice::FromRecorded(const std::string& name, const nlohmann::json& keras_json,
                                                const std::string& source) {
  if (keras_json.is_null()) {
    if (name.starts_with(kKerasPrefix))
      return DataLossError(source + ": model " + name + " without its \"model_json\"");
    return Zoo(name);
  }
  MIRRORED_ASSIGN_OR_RETURN(KerasModelJson keras, KerasModelJson::FromJson(keras_json, source + " \"model_json\""));
  ModelChoice c;
  c.name_ = name;
  c.keras_ = std::make_shared<const KerasModelJson>(std::move(keras));
  return c;
}

bool ModelChoice::SameModel(const ModelChoice& other) const {
  if (is_keras() != other.is_keras()) return false;
  return is_keras() ? keras_->keras_json() == other.keras_->keras_json() : name_ == other.name_;
}

Status ModelChoice::CheckInput(Shape3 input, int classes) const {
  return keras_ ? keras_->CheckFits(input, classes) : CheckZooInput(name_, input, classes);
}

StatusOr<std::unique_ptr<Model>> ModelChoice::Create(std::unique_ptr<Backend> backend, uint64_t seed, Shape3 input,
                                                      int classes) const {
  if (!keras_) return Model::Create(name_, std::move(backend), seed, input, classes);
  MIRRORED_RETURN_IF_ERROR(keras_->CheckFits(input, classes));
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(keras_->BuildGraph());
  return std::make_unique<Model>(name_, std::move(backend), std::move(layers), input, classes, seed);
}

}  // namespace mirrored::model
