// What a data set gives a model, whatever its format: the image shape and
// the class count. The formats (numpy_data.h, idx_data.h,
// tfrecord_data.h) fill it in; checkpoints record it (state.json).
//
//   ImageSetShape s{.height = 32, .width = 32, .channels = 3, .classes = 7};
//   s.ImageString();   // "32x32x3"
#pragma once

#include <cstdint>
#include <string>

namespace mirrored::data {

struct ImageSetShape {
  int height = 0, width = 0, channels = 0;
  int classes = 0;  // 0: not known (a header check does not read the labels)
  // Float targets instead of class labels (mean squared error): `classes`
  // is then the target width, the final Dense layer's units.
  bool regression = false;
  // "32x32x3"
  std::string ImageString() const;
  // "32x32x3 images in 7 classes", "32x32x3 images with 2 float targets"
  std::string String() const;
};

// More classes than this is a label that is not a class index (an id, a
// corrupt value): the last Dense layer alone would not fit in memory.
inline constexpr int64_t kMaxClasses = 65536;

}  // namespace mirrored::data
