#include "worker/export/keras_weights_layout.h"

#include <cctype>

namespace mirrored {
namespace {

using nlohmann::json;

// The variables of the classes that have weights (the ones mirrored reads),
// in Keras' order; an empty list: a layer without weights.
std::vector<std::string> VariablesOf(const std::string& class_name, const json& config) {
  if (class_name == "Dense") return {"kernel", "bias"};
  if (class_name == "Conv2D") {
    if (config.is_object() && config.value("use_bias", true) == false) return {"kernel"};
    return {"kernel", "bias"};
  }
  if (class_name == "BatchNormalization") return {"gamma", "beta", "moving_mean", "moving_variance"};
  return {};
}

bool IsUpper(char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; }
bool IsLowerOrDigit(char c) { return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)); }

}  // namespace

std::string KerasSnakeCase(const std::string& name) {
  // re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2"): an underscore before each
  // capital that opens a lowercase run (not at the start)...
  std::string step1;
  for (size_t i = 0; i < name.size(); ++i) {
    if (i > 0 && IsUpper(name[i]) && i + 1 < name.size() && IsLowerOrDigit(name[i + 1])) step1 += '_';
    step1 += name[i];
  }
  // ...then re.sub("([a-z])([A-Z])", r"\1_\2") and lower case.
  std::string out;
  for (size_t i = 0; i < step1.size(); ++i) {
    if (i > 0 && std::islower(static_cast<unsigned char>(step1[i - 1])) && IsUpper(step1[i])) out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(step1[i])));
  }
  return !out.empty() && out[0] == '_' ? "private" + out : out;
}

StatusOr<std::vector<KerasLayerWeights>> KerasWeightsLayout(const json& keras_json,
                                                            const std::map<std::string, std::string>& tensor_prefix) {
  const json* layers = nullptr;
  if (keras_json.is_object() && keras_json.contains("config") && keras_json["config"].is_object())
    layers = &keras_json["config"]["layers"];
  if (layers == nullptr || !layers->is_array())
    return InvalidArgumentError("the Keras model has no \"config\": {\"layers\": [...]}");
  const bool sequential = keras_json.value("class_name", std::string()) == "Sequential";
  std::map<std::string, int> seen;  // snake_case class -> layers of it so far
  std::vector<KerasLayerWeights> out;
  for (const json& entry : *layers) {
    const json config = entry.is_object() ? entry.value("config", json::object()) : json();
    const std::string class_name = entry.is_object() ? entry.value("class_name", std::string()) : std::string();
    const std::string name = config.is_object() ? config.value("name", entry.value("name", std::string())) : "";
    if (class_name.empty() || name.empty()) return InvalidArgumentError("a Keras layer without a class or a name");
    // A Sequential model's layers (what Keras walks) leave its InputLayer out.
    if (sequential && class_name == "InputLayer") continue;
    const std::string snake = KerasSnakeCase(class_name);
    const int n = seen[snake]++;
    const std::vector<std::string> variables = VariablesOf(class_name, config);
    if (variables.empty()) continue;
    auto mapped = tensor_prefix.find(name);
    KerasLayerWeights w{"layers/" + snake + (n == 0 ? "" : "_" + std::to_string(n)), name,
                        mapped == tensor_prefix.end() ? name : mapped->second, {}};
    for (const std::string& v : variables) w.tensors.push_back(w.tensor_prefix + "/" + v);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace mirrored
