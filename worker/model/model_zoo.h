// The models of the tutorials, as Keras models (keras_zoo_json.h) over
// H x W x C inputs (the data's: 28x28x1 for Fashion-MNIST) with K classes
// (10 for Fashion-MNIST):
//   mlp:    Flatten -> Dense(256, relu) -> Dense(256, relu) -> Dense(K)
//   cnn:    Conv(32, 3x3, valid, relu) -> MaxPool 2 -> Conv(64, 3x3, valid, relu)
//           -> MaxPool 2 -> Flatten -> Dense(128, relu) -> Dense(K)
//           (H and W at least 10: each stage must leave a pixel)
//   resnet: Conv(32, 3x3, same) + BN + ReLU stem -> residual block(32) ->
//           residual block(64, /2, projection) -> residual block(128, /2,
//           projection) -> GlobalAvgPool -> Dense(K), each block
//           conv-BN-ReLU-conv-BN plus its shortcut, joined by Add + ReLU
// Each is built the way a --model-json model is: its Keras JSON read by
// KerasModelJson into a LayerGraph, its tensors named as they always were
// ("dense1/kernel", "block2/shortcut/bn/gamma").
//
//   MIRRORED_RETURN_IF_ERROR(CheckZooInput("cnn", {32, 32, 3}, 7));
//   StatusOr<KerasModelJson> keras = ReadZooModel("cnn", {32, 32, 3}, 7);   // then keras->BuildGraph()
//   const std::vector<std::string>& names = ZooModelNames();   // {"mlp", "cnn", "resnet"}
//   // Model::Create(name, ...) is the usual entry point.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/keras_model_json.h"
#include "worker/model/layer.h"

namespace mirrored::model {

const std::vector<std::string>& ZooModelNames();
// Whether zoo model `name` can be built for `input` images and `classes`
// classes. InvalidArgument naming the model and both shapes: an unknown
// name, images too small for cnn, fewer than 1 class.
Status CheckZooInput(const std::string& name, Shape3 input, int classes);
// Zoo model `name` for `input` images and `classes` classes: its Keras
// JSON as --model-json's reader reads it. The errors of CheckZooInput.
StatusOr<KerasModelJson> ReadZooModel(const std::string& name, Shape3 input, int classes);

}  // namespace mirrored::model
