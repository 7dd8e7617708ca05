// An in-memory labelled image set: row-major examples of `example_size()`
// values (H x W x C, channels last) and int32 labels. Pixels are stored
// either as float or as the raw bytes of the source with a scale (bytes x
// 1/255 for images in [0, 1]): the bytes may live in a shared mapped file
// (ByteRegion), so the workers of one machine hold one copy between them,
// and floats are made per batch in Gather. Immutable once built, so any
// number of replica threads may read it.
//
//   Dataset d(28, 28, 1, std::move(float_pixels), std::move(labels));
//   Dataset e(28, 28, 1, region, pixel_bytes, 1.0f / 255, std::move(labels));
//   Dataset f = Dataset::Float32In(32, 32, 3, region, float_bytes, std::move(labels));
//   d.Gather({3, 1, 4}, images_out, labels_out);   // floats
//   float v = d.pixel(i, k);  int32_t y = d.label(i);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "worker/data/byte_region.h"

namespace mirrored::data {

class Dataset {
 public:
  Dataset() = default;
  // Float pixels, used as they are.
  Dataset(int height, int width, int channels, std::vector<float> pixels, std::vector<int32_t> labels);
  // Byte pixels inside `region` (kept alive by the dataset), value = byte x
  // scale. pixels.size() must be labels.size() x H x W x C.
  Dataset(int height, int width, int channels, std::shared_ptr<const ByteRegion> region,
          std::span<const uint8_t> pixels, float scale, std::vector<int32_t> labels);
  // Little-endian float32 pixels inside `region` (any alignment), used as
  // they are. pixels.size() must be 4 x labels.size() x H x W x C.
  static Dataset Float32In(int height, int width, int channels, std::shared_ptr<const ByteRegion> region,
                           std::span<const uint8_t> pixels, std::vector<int32_t> labels);

  size_t size() const { return labels_.size(); }
  int height() const { return height_; }
  int width() const { return width_; }
  int channels() const { return channels_; }
  size_t example_size() const { return size_t(height_) * width_ * channels_; }
  // Value k of example i (as a float, scaled).
  float pixel(size_t i, size_t k) const {
    const size_t at = i * example_size() + k;
    if (floats_ != nullptr) return floats_[at];
    if (bytes_are_floats_) return FloatAt(at);
    return float(bytes_[at]) * scale_;
  }
  int32_t label(size_t i) const { return labels_[i]; }

  // Copies the examples `indices` (in that order) into `images`
  // (indices.size() * example_size() floats) and `labels`.
  void Gather(std::span<const uint32_t> indices, float* images, int32_t* labels) const;
  // Examples [begin, begin + count) into `images` / `labels` (either may be null).
  void Slice(size_t begin, size_t count, float* images, int32_t* labels) const;

  // The first `n` examples (n <= size()), e.g. a subset for a fast test;
  // shares the pixel storage.
  Dataset Head(size_t n) const;

 private:
  void CopyExample(size_t i, float* out) const;
  float FloatAt(size_t at) const;

  int height_ = 0, width_ = 0, channels_ = 0;
  std::shared_ptr<const void> storage_;  // owns what floats_ / bytes_ point into
  const float* floats_ = nullptr;
  const uint8_t* bytes_ = nullptr;
  float scale_ = 1.0f;
  bool bytes_are_floats_ = false;  // bytes_ holds float32 values (Float32In)
  std::vector<int32_t> labels_;
};

}  // namespace mirrored::data
