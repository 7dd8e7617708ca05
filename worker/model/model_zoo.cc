#include "worker/model/model_zoo.h"

#include <algorithm>

#include "worker/model/keras_zoo_json.h"

namespace mirrored::model {

const std::vector<std::string>& ZooModelNames() {
  static const std::vector<std::string> names{"mlp", "cnn", "resnet"};
  return names;
}

namespace {

// cnn's smallest image side: 3x3 valid conv (-2), 2x2 pool (/2), again,
// leaves one pixel from 10.
constexpr int kCnnMinSide = 10;

std::string ShapeString(Shape3 s) {
  return std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.c);
}

}  // namespace

Status CheckZooInput(const std::string& name, Shape3 input, int classes) {
  if (std::find(ZooModelNames().begin(), ZooModelNames().end(), name) == ZooModelNames().end()) {
    return InvalidArgumentError("--model \"" + name + "\" is not one of mlp, cnn, resnet");
  }
  if (classes < 1) {
    return InvalidArgumentError("--model " + name + ": the data has " + std::to_string(classes) +
                                " classes (the largest training label + 1); at least 1 is needed");
  }
  if (name == "cnn" && (input.h < kCnnMinSide || input.w < kCnnMinSide)) {
    return InvalidArgumentError("--model cnn needs images of at least " + std::to_string(kCnnMinSide) + "x" +
                                std::to_string(kCnnMinSide) + "xC (two valid 3x3 convolutions, each followed by "
                                "a 2x2 pooling); --data gives " + ShapeString(input) +
                                ": use --model mlp or resnet, or larger images");
  }
  return OkStatus();
}

StatusOr<KerasModelJson> ReadZooModel(const std::string& name, Shape3 input, int classes) {
  MIRRORED_ASSIGN_OR_RETURN(KerasZooModel zoo, KerasZooModel::Build(name, input, classes));
  StatusOr<KerasModelJson> keras = KerasModelJson::FromJson(zoo.json, "--model " + name, zoo.tensor_prefix);
  if (!keras.ok()) return InternalError("--model " + name + "'s Keras JSON does not read back: " + keras.status().message());
  return keras;
}

}  // namespace mirrored::model
