#include "worker/model/model_zoo.h"

#include <algorithm>

#include "worker/model/batch_norm_layer.h"
#include "worker/model/conv2d_layer.h"
#include "worker/model/dense_layer.h"
#include "worker/model/flatten_layer.h"
#include "worker/model/global_avg_pool_layer.h"
#include "worker/model/max_pool2d_layer.h"
#include "worker/model/relu_layer.h"
#include "worker/model/residual_block.h"

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

StatusOr<std::vector<std::unique_ptr<Layer>>> BuildZooLayers(const std::string& name, int classes) {
  std::vector<std::unique_ptr<Layer>> l;
  if (name == "mlp") {
    l.push_back(std::make_unique<FlattenLayer>("flatten"));
    l.push_back(std::make_unique<DenseLayer>("dense1", 256, true));
    l.push_back(std::make_unique<DenseLayer>("dense2", 256, true));
    l.push_back(std::make_unique<DenseLayer>("dense3", classes, false));
  } else if (name == "cnn") {
    l.push_back(std::make_unique<Conv2DLayer>("conv1", Conv2DOptions{.filters = 32, .kernel = 3, .relu = true}));
    l.push_back(std::make_unique<MaxPool2DLayer>("pool1", 2, 2));
    l.push_back(std::make_unique<Conv2DLayer>("conv2", Conv2DOptions{.filters = 64, .kernel = 3, .relu = true}));
    l.push_back(std::make_unique<MaxPool2DLayer>("pool2", 2, 2));
    l.push_back(std::make_unique<FlattenLayer>("flatten"));
    l.push_back(std::make_unique<DenseLayer>("dense1", 128, true));
    l.push_back(std::make_unique<DenseLayer>("dense2", classes, false));
  } else if (name == "resnet") {
    l.push_back(std::make_unique<Conv2DLayer>(
        "stem/conv", Conv2DOptions{.filters = 32, .kernel = 3, .same_padding = true, .bias = false,
                                   .init = Init::kHeNormal}));
    l.push_back(std::make_unique<BatchNormLayer>("stem/bn"));
    l.push_back(std::make_unique<ReluLayer>("stem/relu"));
    l.push_back(std::make_unique<ResidualBlock>("block1", 32, 1));
    l.push_back(std::make_unique<ResidualBlock>("block2", 64, 2));
    l.push_back(std::make_unique<ResidualBlock>("block3", 128, 2));
    l.push_back(std::make_unique<GlobalAvgPoolLayer>("gap"));
    l.push_back(std::make_unique<DenseLayer>("dense", classes, false));
  } else {
    return InvalidArgumentError("--model \"" + name + "\" is not one of mlp, cnn, resnet");
  }
  return l;
}

}  // namespace mirrored::model
