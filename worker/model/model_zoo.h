// The models of the tutorials, as layer stacks over H x W x C inputs (the
// data's: 28x28x1 for Fashion-MNIST) with K classes (10 for Fashion-MNIST):
//   mlp:    Flatten -> Dense(256, relu) -> Dense(256, relu) -> Dense(K)
//   cnn:    Conv(32, 3x3, valid, relu) -> MaxPool 2 -> Conv(64, 3x3, valid, relu)
//           -> MaxPool 2 -> Flatten -> Dense(128, relu) -> Dense(K)
//           (H and W at least 10: each stage must leave a pixel)
//   resnet: Conv(32, 3x3, same) + BN + ReLU stem -> ResidualBlock(32) ->
//           ResidualBlock(64, /2, projection) -> ResidualBlock(128, /2,
//           projection) -> GlobalAvgPool -> Dense(K)
//
//   MIRRORED_RETURN_IF_ERROR(CheckZooInput("cnn", {32, 32, 3}, 7));
//   StatusOr<std::vector<std::unique_ptr<Layer>>> layers = BuildZooLayers("cnn", 7);
//   const std::vector<std::string>& names = ZooModelNames();   // {"mlp", "cnn", "resnet"}
//   // Model::Create(name, ...) is the usual entry point.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/layer.h"

namespace mirrored::model {

const std::vector<std::string>& ZooModelNames();
// Whether zoo model `name` can be built for `input` images and `classes`
// classes. InvalidArgument naming the model and both shapes: an unknown
// name, images too small for cnn, fewer than 1 class.
Status CheckZooInput(const std::string& name, Shape3 input, int classes);
// The layers of `name` with a `classes`-way last layer (their input shape
// is given when the Model builds them; CheckZooInput says whether it fits).
StatusOr<std::vector<std::unique_ptr<Layer>>> BuildZooLayers(const std::string& name, int classes = 10);

}  // namespace mirrored::model
