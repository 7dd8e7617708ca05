// The bytes of a Keras weights file (`model.weights.h5`), as Keras 3's and
// tf_keras's `model.save_weights("x.weights.h5")` write it and their
// `model.load_weights` reads it: one HDF5 group per layer with weights,
// "layers/<snake_case class>[_<n>]/vars", holding the layer's variables as
// float32 datasets "0", "1", ... in Keras' order, plus an empty root "vars"
// group (the model's own). Made in memory with the HDF5 library's core
// driver, so the caller writes them atomically through a FileEnv.
//
//   KerasWeightsGroup dense{"layers/dense", "dense1", {{{784, 256}, kernel}, {{256}, bias}}};
//   StatusOr<std::string> bytes = EncodeKerasWeightsH5({dense}, "export/model.weights.h5");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace mirrored {

// One variable: its shape and shape-product floats (borrowed).
struct KerasVariable {
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

// One layer's variables, in Keras' order (Dense and Conv2D: kernel, bias;
// BatchNormalization: gamma, beta, moving_mean, moving_variance).
struct KerasWeightsGroup {
  std::string path;        // "layers/conv2d_1": the layer's place in model.layers
  std::string layer_name;  // the Keras layer's name, kept as the "vars" group's "name" attribute (as Keras 3 does)
  std::vector<KerasVariable> variables;
};

// The HDF5 file's bytes. Errors: Internal naming `file_name` and the HDF5
// call that failed (with the group or dataset it made).
StatusOr<std::string> EncodeKerasWeightsH5(const std::vector<KerasWeightsGroup>& groups, const std::string& file_name);

}  // namespace mirrored
