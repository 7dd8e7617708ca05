#include "worker/model/keras_model_json.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/json_depth.h"

namespace mirrored::model {
namespace {

using nlohmann::json;

std::string ShapeText(Shape3 s) {
  return std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.c);
}

// The names of the layers a Functional entry reads, from its one call:
// Keras 2 [[["conv", 0, 0, {}], ...]]; Keras 3 [{"args": [tensor or
// [tensors]], "kwargs": {}}], each tensor {"config": {"keras_history":
// ["conv", 0, 0]}}.
StatusOr<std::vector<std::string>> InboundNames(const json& entry, const std::string& where) {
  const json nodes = entry.value("inbound_nodes", json::array());
  if (!nodes.is_array() || nodes.size() > 1) {
    return InvalidArgumentError(where + ": \"inbound_nodes\" holds " + std::to_string(nodes.size()) +
                                " calls; mirrored supports each layer called once (no shared layers)");
  }
  std::vector<std::string> names;
  if (nodes.empty()) return names;
  std::vector<const json*> refs;
  const json& call = nodes[0];
  if (call.is_array()) {
    for (const json& r : call) refs.push_back(&r);
  } else if (call.is_object() && call.contains("args") && call["args"].is_array() && !call["args"].empty()) {
    const json& a = call["args"][0];
    if (a.is_array()) {
      for (const json& t : a) refs.push_back(&t);
    } else {
      refs.push_back(&a);
    }
  }
  for (const json* r : refs) {
    const json* history = r;  // Keras 2: ["conv", 0, 0, {}]
    if (r->is_object()) {     // Keras 3: a __keras_tensor__
      auto c = r->find("config");
      history = c != r->end() && c->is_object() && c->contains("keras_history") ? &c->at("keras_history") : nullptr;
    }
    if (history == nullptr || !history->is_array() || history->empty() || !(*history)[0].is_string())
      return InvalidArgumentError(where + ": \"inbound_nodes\" has an input that names no layer");
    names.push_back((*history)[0].get<std::string>());
  }
  if (names.empty()) return InvalidArgumentError(where + ": \"inbound_nodes\" names no input layer");
  return names;
}

// The one layer name of "input_layers" / "output_layers": [["x", 0, 0]]
// (Keras 2, Keras 3 with several) or ["x", 0, 0] (Keras 3, one).
StatusOr<std::string> OnlyEndpoint(const json& config, const std::string& key) {
  const json list = config.value(key, json());
  if (list.is_array() && list.size() == 3 && list[0].is_string()) return list[0].get<std::string>();
  if (list.is_array() && list.size() == 1 && list[0].is_array() && !list[0].empty() && list[0][0].is_string())
    return list[0][0].get<std::string>();
  return InvalidArgumentError("\"" + key + "\" is " + list.dump() +
                              "; mirrored supports models with one input and one output");
}

}  // namespace

Status KerasModelJson::Fail(const std::string& what) const {
  return InvalidArgumentError(source_ + ": " + what);
}

StatusOr<KerasModelJson> KerasModelJson::ReadFile(const std::string& path) {
  // A FIFO would block the open, /dev/zero fill the memory: only a regular
  // file of a size a model's JSON can have (Keras writes well under 1 MB).
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    return InvalidArgumentError("--model-json " + path + ": not a regular file (a directory, FIFO or device)");
  }
  if (const auto bytes = std::filesystem::file_size(path, ec); !ec && bytes > kMaxModelJsonBytes) {
    return InvalidArgumentError("--model-json " + path + ": " + std::to_string(bytes) + " bytes, more than the " +
                                std::to_string(kMaxModelJsonBytes >> 20) +
                                " MiB a model's JSON may have (Keras' model.to_json() writes kilobytes)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("--model-json " + path + ": cannot be read (no such file, or no permission)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return InvalidArgumentError("--model-json " + path + ": reading it failed");
  return Parse(text.str(), path);
}

StatusOr<KerasModelJson> KerasModelJson::Parse(std::string_view text, const std::string& source) {
  if (auto at = JsonNestingPastLimit(text)) return InvalidArgumentError(source + ": " + JsonTooDeepMessage(*at));
  json parsed = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return InvalidArgumentError(source + ": not valid JSON (write it with model.to_json() in Keras)");
  }
  return FromJson(parsed, source);
}

StatusOr<KerasModelJson> KerasModelJson::FromJson(const json& j, const std::string& source,
                                                  const std::map<std::string, std::string>& tensor_prefix) {
  try {
    return Read(j, source, tensor_prefix);
  } catch (const json::exception& e) {  // a field of an unexpected JSON type
    return InvalidArgumentError(source + ": not a Keras model as model.to_json() writes it (" + e.what() + ")");
  }
}

StatusOr<KerasModelJson> KerasModelJson::Read(const json& j, const std::string& source,
                                              const std::map<std::string, std::string>& tensor_prefix) {
  KerasModelJson m;
  m.source_ = source;
  m.json_ = j;
  m.tensor_prefix_ = tensor_prefix;
  const std::string kind = j.is_object() ? j.value("class_name", std::string()) : std::string();
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object() || !j["config"].contains("layers") ||
      !j["config"]["layers"].is_array()) {
    return m.Fail("not a Keras model: expected {\"class_name\": \"Sequential\" or \"Functional\", \"config\": "
                  "{\"layers\": [...]}} as model.to_json() writes it");
  }
  const json& config = j["config"];
  m.name_ = config.value("name", std::string("model"));
  if (kind == "Sequential") {
    if (config.contains("build_input_shape") && !config["build_input_shape"].is_null()) {
      MIRRORED_ASSIGN_OR_RETURN(m.input_, KerasBatchShape(config["build_input_shape"], source + ": \"build_input_shape\""));
      m.has_input_ = true;
    }
    MIRRORED_RETURN_IF_ERROR(m.ReadSequential(config["layers"]));
  } else if (kind == "Functional" || kind == "Model") {
    MIRRORED_RETURN_IF_ERROR(m.ReadFunctional(config));
  } else {
    return m.Fail("model class \"" + kind + "\" is not supported; mirrored reads Sequential and Functional models");
  }
  MIRRORED_RETURN_IF_ERROR(m.InferShapes());
  return m;
}

StatusOr<KerasLayer> KerasModelJson::ReadLayer(const json& entry) const {
  StatusOr<KerasLayer> l = ReadKerasLayer(entry);
  if (!l.ok()) return Fail(l.status().message());
  if (auto prefix = tensor_prefix_.find(l->name); prefix != tensor_prefix_.end()) l->spec.name = prefix->second;
  return l;
}

Status KerasModelJson::ReadSequential(const json& entries) {
  int previous = LayerGraph::kGraphInput;
  std::set<std::string> names;  // Keras names each layer once; tensors are named after them
  for (size_t i = 0; i < entries.size(); ++i) {
    StatusOr<KerasLayer> l = ReadLayer(entries[i]);
    if (!l.ok()) return l.status();
    if (!names.insert(l->name).second)
      return Fail("layer \"" + l->name + "\" (" + l->keras_class + "): a second layer of that name");
    const bool last = i + 1 == entries.size();
    if (l->role == KerasLayer::Role::kInput) {
      if (i != 0) return Fail("layer \"" + l->name + "\" (InputLayer) is not the first layer");
      input_ = l->input;
      has_input_ = true;
      continue;
    }
    if (i == 0 && !has_input_ && entries[i]["config"].contains("batch_input_shape")) {  // Keras 2's input_shape=
      MIRRORED_ASSIGN_OR_RETURN(input_, KerasBatchShape(entries[i]["config"]["batch_input_shape"],
                                                        source_ + ": layer \"" + l->name + "\""));
      has_input_ = true;
    }
    if ((l->role == KerasLayer::Role::kSoftmax || l->softmax_output) && !last)
      return Fail("layer \"" + l->name + "\" (" + l->keras_class + "): \"activation\" is \"softmax\" before the "
                  "last layer; mirrored supports softmax only on the output (the loss applies it)");
    if (l->role != KerasLayer::Role::kLayer) continue;
    if (l->spec.kind == LayerKind::kAdd)
      return Fail("layer \"" + l->name + "\" (Add) in a Sequential model; Add joins branches of a Functional model");
    l->spec.inputs = {previous};
    layers_.push_back(l->spec);
    previous = int(layers_.size()) - 1;
  }
  return OkStatus();
}

Status KerasModelJson::ReadFunctional(const json& config) {
  MIRRORED_ASSIGN_OR_RETURN(std::string input_name, OnlyEndpoint(config, "input_layers"));
  MIRRORED_ASSIGN_OR_RETURN(std::string output_name, OnlyEndpoint(config, "output_layers"));
  std::map<std::string, int> node_of;  // layer name -> node (kGraphInput for the input)
  for (const json& entry : config["layers"]) {
    StatusOr<KerasLayer> l = ReadLayer(entry);
    if (!l.ok()) return l.status();
    const std::string where = "layer \"" + l->name + "\" (" + l->keras_class + ")";
    if (node_of.count(l->name)) return Fail(where + ": a second layer of that name");
    if (l->role == KerasLayer::Role::kInput) {
      if (l->name != input_name) return Fail(where + ": a second input; mirrored supports one (\"" + input_name + "\")");
      input_ = l->input;
      has_input_ = true;
      node_of[l->name] = LayerGraph::kGraphInput;
      continue;
    }
    MIRRORED_ASSIGN_OR_RETURN(std::vector<std::string> names, InboundNames(entry, source_ + ": " + where));
    std::vector<int> inputs;
    for (const std::string& n : names) {
      auto it = node_of.find(n);
      if (it == node_of.end()) return Fail(where + ": reads layer \"" + n + "\", which is not defined before it");
      inputs.push_back(it->second);
    }
    if ((l->role == KerasLayer::Role::kSoftmax || l->softmax_output) && l->name != output_name)
      return Fail(where + ": \"activation\" is \"softmax\" on a layer that is not the output; mirrored supports "
                  "softmax only on the output (the loss applies it)");
    const bool join = l->role == KerasLayer::Role::kLayer && l->spec.kind == LayerKind::kAdd;
    if (join ? inputs.size() < 2 : inputs.size() != 1)
      return Fail(where + ": reads " + std::to_string(inputs.size()) + " inputs; it takes " + (join ? "2 or more" : "1"));
    if (l->role != KerasLayer::Role::kLayer) {  // identity or the final softmax
      node_of[l->name] = inputs[0];
      continue;
    }
    l->spec.inputs = inputs;
    layers_.push_back(l->spec);
    node_of[l->name] = int(layers_.size()) - 1;
  }
  auto out = node_of.find(output_name);
  if (out == node_of.end() || out->second == LayerGraph::kGraphInput || out->second + 1 != int(layers_.size()))
    return Fail("the output layer \"" + output_name + "\" is not the last layer the model computes");
  return OkStatus();
}

namespace {

// The largest model mirrored builds, checked before anything is allocated
// (a 3 KB JSON can ask for terabytes): 2^28 parameters, 1 GiB of FP32
// weights, which every replica holds with their gradients and optimizer
// slots; and 2^26 activation values per example over all the layers
// (256 MiB in FP32, times the batch).
constexpr double kMaxModelParameters = double(uint64_t{1} << 28);
constexpr double kMaxActivationValuesPerExample = double(uint64_t{1} << 26);

// A layer's trainable parameters and statistics for an input of shape `in`
// (doubles: a hostile shape must not overflow the count).
double Parameters(const LayerSpec& s, Shape3 in) {
  const double bias = s.bias ? s.units : 0;
  switch (s.kind) {
    case LayerKind::kDense: return double(in.h) * in.w * in.c * s.units + bias;
    case LayerKind::kConv2D: return double(s.kernel) * s.kernel * in.c * s.units + bias;
    case LayerKind::kBatchNorm: return 4.0 * in.c;  // gamma, beta, moving mean and variance
    default: return 0;
  }
}

std::string Count(double n) {
  char text[32];
  std::snprintf(text, sizeof text, n < 1e18 ? "%.0f" : "%.3g", n);
  return text;
}

}  // namespace

Status KerasModelJson::CheckSize(const LayerSpec& s, Shape3 in, Shape3 out, double* parameters,
                                 double* values) const {
  *parameters += Parameters(s, in);
  *values += double(out.h) * out.w * out.c;
  auto where = [&s] { return "layer \"" + s.name + "\" (" + s.keras_class + ")"; };
  if (*parameters > kMaxModelParameters) {
    return Fail(where() + " brings the model to " + Count(*parameters) + " parameters, more than the " +
                Count(kMaxModelParameters) + " (2^28, 1 GiB in FP32) mirrored builds");
  }
  if (*values > kMaxActivationValuesPerExample) {
    return Fail(where() + " brings one example's activations to " + Count(*values) + " values, more than the " +
                Count(kMaxActivationValuesPerExample) + " (2^26) mirrored builds");
  }
  return OkStatus();
}

Status KerasModelJson::InferShapes() {
  if (!has_input_) return Fail("no input shape: give the model an Input (keras.Input(shape=...)) before saving it");
  if (layers_.empty()) return Fail("the model has no layers mirrored computes");
  std::vector<Shape3> out(layers_.size());
  std::vector<int> consumers(layers_.size(), 0);
  double parameters = 0, values = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& s = layers_[i];
    auto shape_of = [&](int in) { return in == LayerGraph::kGraphInput ? input_ : out[size_t(in)]; };
    for (int in : s.inputs) {
      if (in != LayerGraph::kGraphInput) ++consumers[size_t(in)];
      if (!(shape_of(in) == shape_of(s.inputs[0])))
        return Fail("layer \"" + s.name + "\" (Add): adds " + ShapeText(shape_of(s.inputs[0])) + " and " +
                    ShapeText(shape_of(in)) + " values; its inputs must have one shape");
    }
    StatusOr<Shape3> shape = s.OutputShape(shape_of(s.inputs[0]));
    if (!shape.ok()) return Fail("layer \"" + s.name + "\" (" + s.keras_class + "): " + shape.status().message());
    out[i] = *shape;
    MIRRORED_RETURN_IF_ERROR(CheckSize(s, shape_of(s.inputs[0]), out[i], &parameters, &values));
  }
  for (size_t i = 0; i + 1 < layers_.size(); ++i)
    if (consumers[i] == 0) return Fail("layer \"" + layers_[i].name + "\": its output reaches no output of the model");
  if (out.back().h * out.back().w != 1) {
    return Fail("the output layer \"" + layers_.back().name + "\" gives " + ShapeText(out.back()) +
                " values per example; mirrored trains classifiers: end with Dense(classes)");
  }
  outputs_ = out.back().c;
  parameters_ = static_cast<uint64_t>(parameters);
  return OkStatus();
}

Status KerasModelJson::CheckFits(Shape3 data, int classes) const {
  if (data == input_ && (classes <= 0 || classes == outputs_)) return OkStatus();
  const std::string data_classes =
      classes > 0 ? " in " + std::to_string(classes) + " classes (the largest training label + 1)" : "";
  return InvalidArgumentError(source_ + ": the model takes " + ShapeText(input_) + " inputs and gives " +
                              std::to_string(outputs_) + " class logits, but --data gives " + ShapeText(data) +
                              " images" + data_classes + ": change the model's Input or its last Dense");
}

std::unique_ptr<LayerGraph> KerasModelJson::BuildGraph() const {
  // An Add whose only reader is a ReLU becomes one node: max(sum, 0).
  std::vector<int> readers(layers_.size(), 0);
  for (const LayerSpec& s : layers_)
    for (int in : s.inputs)
      if (in != LayerGraph::kGraphInput) ++readers[size_t(in)];
  auto joins_relu = [&](const LayerSpec& s) {
    const int in = s.inputs[0];
    return s.kind == LayerKind::kRelu && in != LayerGraph::kGraphInput &&
           layers_[size_t(in)].kind == LayerKind::kAdd && readers[size_t(in)] == 1;
  };
  std::vector<bool> sum_relu(layers_.size(), false);
  for (const LayerSpec& s : layers_)
    if (joins_relu(s)) sum_relu[size_t(s.inputs[0])] = true;
  auto graph = std::make_unique<LayerGraph>(name_);
  std::vector<int> node(layers_.size());  // spec -> graph node
  auto node_of = [&](int in) { return in == LayerGraph::kGraphInput ? in : node[size_t(in)]; };
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& s = layers_[i];
    if (joins_relu(s)) {
      node[i] = node_of(s.inputs[0]);
    } else if (s.kind == LayerKind::kAdd) {
      std::vector<int> inputs;
      for (int in : s.inputs) inputs.push_back(node_of(in));
      node[i] = graph->AddSum(s.name, std::move(inputs), sum_relu[i]);
    } else {
      node[i] = graph->AddLayer(MakeLayer(s), node_of(s.inputs[0]));
    }
  }
  return graph;
}

}  // namespace mirrored::model
