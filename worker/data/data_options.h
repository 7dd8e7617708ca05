// How --data is read beyond its path: the feature names of a TFRecord set
// (--tfrecord-image-key, --tfrecord-label-key) and whether its labels are
// class indices or float targets (--loss mse).
//
//   DataOptions o{.tfrecord_label_key = "target", .float_targets = true};
//   StatusOr<TrainingData> d = TrainingData::Load("data/", /*with_test=*/true, o);
#pragma once

#include <string>

namespace mirrored::data {

struct DataOptions {
  std::string tfrecord_image_key;            // "": "image", else "image_raw"
  std::string tfrecord_label_key = "label";
  // Targets are numbers to regress (--loss mse: N or N x K, read as
  // floats), not class indices. IDX data has no float targets.
  bool float_targets = false;
};

}  // namespace mirrored::data
