#include "worker/data/dataset.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace mirrored::data {

Dataset::Dataset(int height, int width, int channels, std::vector<float> pixels, std::vector<int32_t> labels)
    : height_(height), width_(width), channels_(channels), labels_(std::move(labels)) {
  if (pixels.size() != labels_.size() * example_size()) {
    throw std::invalid_argument("Dataset: " + std::to_string(pixels.size()) + " pixels for " +
                                std::to_string(labels_.size()) + " examples of " + std::to_string(example_size()));
  }
  auto owned = std::make_shared<const std::vector<float>>(std::move(pixels));
  floats_ = owned->data();
  storage_ = std::move(owned);
}

Dataset::Dataset(int height, int width, int channels, std::shared_ptr<const ByteRegion> region,
                 std::span<const uint8_t> pixels, float scale, std::vector<int32_t> labels)
    : height_(height), width_(width), channels_(channels), storage_(std::move(region)), bytes_(pixels.data()),
      scale_(scale), labels_(std::move(labels)) {
  if (pixels.size() != labels_.size() * example_size()) {
    throw std::invalid_argument("Dataset: " + std::to_string(pixels.size()) + " pixel bytes for " +
                                std::to_string(labels_.size()) + " examples of " + std::to_string(example_size()));
  }
}

Dataset Dataset::Float32In(int height, int width, int channels, std::shared_ptr<const ByteRegion> region,
                           std::span<const uint8_t> pixels, std::vector<int32_t> labels) {
  Dataset d;
  d.height_ = height;
  d.width_ = width;
  d.channels_ = channels;
  d.labels_ = std::move(labels);
  if (pixels.size() != d.labels_.size() * d.example_size() * sizeof(float)) {
    throw std::invalid_argument("Dataset: " + std::to_string(pixels.size()) + " bytes of float32 pixels for " +
                                std::to_string(d.labels_.size()) + " examples of " +
                                std::to_string(d.example_size()));
  }
  d.storage_ = std::move(region);
  d.bytes_ = pixels.data();
  d.bytes_are_floats_ = true;
  return d;
}

float Dataset::FloatAt(size_t at) const {
  float v;
  std::memcpy(&v, bytes_ + at * sizeof(float), sizeof(float));
  return v;
}

void Dataset::CopyExample(size_t i, float* out) const {
  const size_t es = example_size();
  if (floats_ != nullptr) {
    std::memcpy(out, floats_ + i * es, es * sizeof(float));
    return;
  }
  if (bytes_are_floats_) {  // a mapped .npy: not necessarily 4-byte aligned
    std::memcpy(out, bytes_ + i * es * sizeof(float), es * sizeof(float));
    return;
  }
  const uint8_t* in = bytes_ + i * es;
  const float scale = scale_;
  for (size_t k = 0; k < es; ++k) out[k] = float(in[k]) * scale;
}

void Dataset::Gather(std::span<const uint32_t> indices, float* images, int32_t* labels) const {
  const size_t es = example_size();
  for (size_t i = 0; i < indices.size(); ++i) {
    CopyExample(indices[i], images + i * es);
    labels[i] = labels_[indices[i]];
  }
}

void Dataset::Slice(size_t begin, size_t count, float* images, int32_t* labels) const {
  const size_t es = example_size();
  for (size_t i = 0; i < count; ++i) {
    if (images != nullptr) CopyExample(begin + i, images + i * es);
    if (labels != nullptr) labels[i] = labels_[begin + i];
  }
}

Dataset Dataset::Head(size_t n) const {
  n = std::min(n, size());
  Dataset d = *this;
  d.labels_.resize(n);
  return d;
}

}  // namespace mirrored::data
