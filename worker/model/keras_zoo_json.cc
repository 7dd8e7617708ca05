#include "worker/model/keras_zoo_json.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "worker/model/model_zoo.h"

namespace mirrored::model {
namespace {

using nlohmann::json;

json Initializer(const std::string& class_name) {
  json config = class_name == "Zeros" ? json::object() : json{{"seed", nullptr}};
  return {{"module", "keras.initializers"}, {"class_name", class_name}, {"config", config}, {"registered_name", nullptr}};
}

json Dense(int units, bool relu) {
  return {{"units", units},
          {"activation", relu ? "relu" : "linear"},
          {"use_bias", true},
          {"kernel_initializer", Initializer("GlorotUniform")},
          {"bias_initializer", Initializer("Zeros")}};
}

struct ConvShape {
  int filters, kernel, stride;
  bool same;
};

json Conv2D(ConvShape s, bool relu, bool bias, const std::string& init) {
  return {{"filters", s.filters},
          {"kernel_size", {s.kernel, s.kernel}},
          {"strides", {s.stride, s.stride}},
          {"padding", s.same ? "same" : "valid"},
          {"data_format", "channels_last"},
          {"dilation_rate", {1, 1}},
          {"groups", 1},
          {"activation", relu ? "relu" : "linear"},
          {"use_bias", bias},
          {"kernel_initializer", Initializer(init)},
          {"bias_initializer", Initializer("Zeros")}};
}

// mirrored's BatchNormLayer: Keras' defaults.
json BatchNormalization() {
  return {{"axis", -1}, {"momentum", 0.99}, {"epsilon", 0.001}, {"center", true}, {"scale", true}};
}

json Relu() { return {{"max_value", nullptr}, {"negative_slope", 0.0}, {"threshold", 0.0}}; }

json MaxPooling2D(int size) {
  return {{"pool_size", {size, size}}, {"strides", {size, size}}, {"padding", "valid"}, {"data_format", "channels_last"}};
}

// The "layers" list of a Sequential or Functional model's JSON.
class LayerList {
 public:
  LayerList(bool functional, Shape3 input) : functional_(functional) {
    json config{{"batch_input_shape", {nullptr, input.h, input.w, input.c}},
                {"dtype", "float32"},
                {"sparse", false},
                {"ragged", false},
                {"name", "input"}};
    layers_.push_back(Entry("input", "InputLayer", std::move(config), {}));
    last_ = "input";
  }

  // Appends layer `mirrored_name` reading `inputs` (default: the last one
  // added); returns its Keras name.
  std::string Add(const std::string& mirrored_name, const std::string& class_name, json config,
                  std::vector<std::string> inputs = {}) {
    std::string name = mirrored_name;
    std::replace(name.begin(), name.end(), '/', '_');
    prefix_[name] = mirrored_name;
    config["name"] = name;
    config["trainable"] = true;
    config["dtype"] = "float32";
    if (inputs.empty()) inputs = {last_};
    layers_.push_back(Entry(name, class_name, std::move(config), inputs));
    return last_ = name;
  }

  KerasZooModel Model(const std::string& model_name) && {
    json config{{"name", model_name}, {"layers", std::move(layers_)}};
    if (functional_) {
      config["input_layers"] = {{"input", 0, 0}};
      config["output_layers"] = {{last_, 0, 0}};
    }
    // "module" and "registered_name": where Keras 3 finds the class, as its
    // own to_json() writes them (tf_keras ignores both).
    json model{{"module", functional_ ? "keras.src.models.functional" : "keras"},
               {"class_name", functional_ ? "Functional" : "Sequential"},
               {"config", std::move(config)},
               {"registered_name", functional_ ? json("Functional") : json(nullptr)},
               {"backend", "tensorflow"}};
    return KerasZooModel{std::move(model), std::move(prefix_)};
  }

  const std::string& last() const { return last_; }

 private:
  json Entry(const std::string& name, const std::string& class_name, json config,
             const std::vector<std::string>& inputs) const {
    json e{{"module", "keras.layers"}, {"class_name", class_name}, {"config", std::move(config)}, {"registered_name", nullptr}};
    if (!functional_) return e;
    json call = json::array();
    for (const std::string& in : inputs) call.push_back({in, 0, 0, json::object()});
    e["name"] = name;
    e["inbound_nodes"] = inputs.empty() ? json::array() : json::array({call});
    return e;
  }

  bool functional_;
  json layers_ = json::array();
  std::map<std::string, std::string> prefix_;
  std::string last_;
};

// A ResNet basic block: conv3x3(stride) -> BN -> ReLU -> conv3x3 -> BN,
// plus a shortcut (identity, or conv1x1(stride) -> BN when the shape
// changes), joined by Add -> ReLU; convolutions without bias (BN follows),
// He-initialised. Listed in the order tf_keras lists a Functional model's
// layers (deepest first; at equal depth, the main path's before the
// shortcut's), which names the weights file's groups.
void AddResidualBlock(LayerList& l, const std::string& block, int filters, int stride, int in_channels) {
  const std::string input = l.last();
  const bool projection = stride != 1 || in_channels != filters;
  l.Add(block + "/conv1", "Conv2D", Conv2D({filters, 3, stride, true}, false, false, "HeNormal"));
  l.Add(block + "/bn1", "BatchNormalization", BatchNormalization());
  l.Add(block + "/relu1", "ReLU", Relu());
  const std::string conv2 = l.Add(block + "/conv2", "Conv2D", Conv2D({filters, 3, 1, true}, false, false, "HeNormal"));
  std::string shortcut = input;
  if (projection) {
    shortcut = l.Add(block + "/shortcut/conv", "Conv2D", Conv2D({filters, 1, stride, false}, false, false, "HeNormal"),
                     {input});
  }
  const std::string bn2 = l.Add(block + "/bn2", "BatchNormalization", BatchNormalization(), {conv2});
  if (projection) shortcut = l.Add(block + "/shortcut/bn", "BatchNormalization", BatchNormalization(), {shortcut});
  l.Add(block + "/add", "Add", json::object(), {bn2, shortcut});
  l.Add(block + "/relu", "ReLU", Relu());
}

KerasZooModel Mlp(Shape3 input, int classes) {
  LayerList l(false, input);
  l.Add("flatten", "Flatten", {{"data_format", "channels_last"}});
  l.Add("dense1", "Dense", Dense(256, true));
  l.Add("dense2", "Dense", Dense(256, true));
  l.Add("dense3", "Dense", Dense(classes, false));
  return std::move(l).Model("mlp");
}

KerasZooModel Cnn(Shape3 input, int classes) {
  LayerList l(false, input);
  l.Add("conv1", "Conv2D", Conv2D({32, 3, 1, false}, true, true, "GlorotUniform"));
  l.Add("pool1", "MaxPooling2D", MaxPooling2D(2));
  l.Add("conv2", "Conv2D", Conv2D({64, 3, 1, false}, true, true, "GlorotUniform"));
  l.Add("pool2", "MaxPooling2D", MaxPooling2D(2));
  l.Add("flatten", "Flatten", {{"data_format", "channels_last"}});
  l.Add("dense1", "Dense", Dense(128, true));
  l.Add("dense2", "Dense", Dense(classes, false));
  return std::move(l).Model("cnn");
}

KerasZooModel Resnet(Shape3 input, int classes) {
  LayerList l(true, input);
  l.Add("stem/conv", "Conv2D", Conv2D({32, 3, 1, true}, false, false, "HeNormal"));
  l.Add("stem/bn", "BatchNormalization", BatchNormalization());
  l.Add("stem/relu", "ReLU", Relu());
  AddResidualBlock(l, "block1", 32, 1, 32);
  AddResidualBlock(l, "block2", 64, 2, 32);
  AddResidualBlock(l, "block3", 128, 2, 64);
  l.Add("gap", "GlobalAveragePooling2D", {{"data_format", "channels_last"}, {"keepdims", false}});
  l.Add("dense", "Dense", Dense(classes, false));
  return std::move(l).Model("resnet");
}

}  // namespace

StatusOr<KerasZooModel> KerasZooModel::Build(const std::string& name, Shape3 input, int classes) {
  MIRRORED_RETURN_IF_ERROR(CheckZooInput(name, input, classes));
  if (name == "mlp") return Mlp(input, classes);
  if (name == "cnn") return Cnn(input, classes);
  return Resnet(input, classes);
}

}  // namespace mirrored::model
