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
  d.encoding_ = PixelEncoding::kFloat32;
  return d;
}

Dataset Dataset::Float32BigEndianIn(int height, int width, int channels, std::shared_ptr<const ByteRegion> region,
                                    std::span<const uint8_t> pixels, std::vector<int32_t> labels) {
  Dataset d = Float32In(height, width, channels, std::move(region), pixels, std::move(labels));
  d.encoding_ = PixelEncoding::kFloat32BigEndian;
  return d;
}

Dataset Dataset::Rows(int height, int width, int channels, PixelEncoding encoding, std::shared_ptr<const void> storage,
                      std::vector<const uint8_t*> rows, std::vector<int32_t> labels) {
  if (rows.size() != labels.size()) {
    throw std::invalid_argument("Dataset: " + std::to_string(rows.size()) + " examples for " +
                                std::to_string(labels.size()) + " labels");
  }
  Dataset d;
  d.height_ = height;
  d.width_ = width;
  d.channels_ = channels;
  d.labels_ = std::move(labels);
  d.storage_ = std::move(storage);
  d.rows_ = std::move(rows);
  d.encoding_ = encoding;
  d.scale_ = encoding == PixelEncoding::kBytes ? 1.0f / 255.0f : 1.0f;
  return d;
}

float Dataset::ValueAt(const uint8_t* base, size_t at) const {
  if (encoding_ == PixelEncoding::kBytes) return float(base[at]) * scale_;
  uint32_t bits;
  std::memcpy(&bits, base + at * sizeof(float), sizeof(float));  // not necessarily aligned
  if (encoding_ == PixelEncoding::kFloat32BigEndian) bits = __builtin_bswap32(bits);
  float v;
  std::memcpy(&v, &bits, sizeof(float));
  return v;
}

void Dataset::CopyExample(size_t i, float* out) const {
  const size_t es = example_size();
  if (floats_ != nullptr) {
    std::memcpy(out, floats_ + i * es, es * sizeof(float));
    return;
  }
  const size_t value_bytes = encoding_ == PixelEncoding::kBytes ? 1 : sizeof(float);
  const uint8_t* in = rows_.empty() ? bytes_ + i * es * value_bytes : rows_[i];
  if (encoding_ == PixelEncoding::kFloat32) {  // a mapped .npy: not necessarily 4-byte aligned
    std::memcpy(out, in, es * sizeof(float));
    return;
  }
  if (encoding_ == PixelEncoding::kFloat32BigEndian) {
    for (size_t k = 0; k < es; ++k) out[k] = ValueAt(in, k);
    return;
  }
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

void Dataset::SetTargets(int width, std::vector<float> targets) {
  if (width <= 0 || targets.size() != labels_.size() * size_t(width)) {
    throw std::invalid_argument("Dataset: " + std::to_string(targets.size()) + " targets for " +
                                std::to_string(labels_.size()) + " examples of width " + std::to_string(width));
  }
  target_width_ = width;
  targets_ = std::make_shared<const std::vector<float>>(std::move(targets));
}

void Dataset::GatherTargets(std::span<const uint32_t> indices, float* out) const {
  const size_t k = size_t(target_width_);
  for (size_t i = 0; i < indices.size(); ++i) {
    std::memcpy(out + i * k, targets_->data() + size_t(indices[i]) * k, k * sizeof(float));
  }
}

Dataset Dataset::Head(size_t n) const {
  n = std::min(n, size());
  Dataset d = *this;
  d.labels_.resize(n);
  if (!d.rows_.empty()) d.rows_.resize(n);
  return d;
}

}  // namespace mirrored::data
