#include "worker/data/image_set_shape.h"

namespace mirrored::data {

std::string ImageSetShape::ImageString() const {
  return std::to_string(height) + "x" + std::to_string(width) + "x" + std::to_string(channels);
}

std::string ImageSetShape::String() const {
  if (regression) {
    return ImageString() + " images with " + std::to_string(classes) + " float target" + (classes == 1 ? "" : "s");
  }
  return ImageString() + " images in " + std::to_string(classes) + " class" + (classes == 1 ? "" : "es");
}

}  // namespace mirrored::data
