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
//   Dataset g = Dataset::Rows(20, 20, 1, PixelEncoding::kBytes, files, row_starts, std::move(labels));
//   d.Gather({3, 1, 4}, images_out, labels_out);   // floats
//   d.SetTargets(2, std::move(targets));   // regression: N x 2 float targets
//   d.GatherTargets({3, 1, 4}, targets_out);
//   float v = d.pixel(i, k);  int32_t y = d.label(i);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "worker/data/byte_region.h"

namespace mirrored::data {

// How an example's stored values become floats.
enum class PixelEncoding {
  kBytes,           // uint8, x 1/255
  kFloat32,         // little-endian float32, as they are
  kFloat32BigEndian,  // big-endian float32 (IDX), as they are
};

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

  // Big-endian float32 pixels inside `region` (an IDX file of type 0x0D).
  static Dataset Float32BigEndianIn(int height, int width, int channels, std::shared_ptr<const ByteRegion> region,
                                    std::span<const uint8_t> pixels, std::vector<int32_t> labels);
  // Examples that are not contiguous (records of a TFRecord file): example
  // i's values start at rows[i], inside what `storage` keeps alive (bytes
  // are scaled by 1/255).
  static Dataset Rows(int height, int width, int channels, PixelEncoding encoding,
                      std::shared_ptr<const void> storage, std::vector<const uint8_t*> rows,
                      std::vector<int32_t> labels);

  size_t size() const { return labels_.size(); }
  int height() const { return height_; }
  int width() const { return width_; }
  int channels() const { return channels_; }
  size_t example_size() const { return size_t(height_) * width_ * channels_; }
  // Value k of example i (as a float, scaled).
  float pixel(size_t i, size_t k) const {
    const size_t at = i * example_size() + k;
    if (floats_ != nullptr) return floats_[at];
    if (!rows_.empty()) return ValueAt(rows_[i], k);
    return ValueAt(bytes_, at);
  }
  int32_t label(size_t i) const { return labels_[i]; }

  // Regression data: float targets, `width` per example (N x width
  // values, row-major); the labels are then all 0. A float copy of the
  // targets only: they are small beside the images.
  void SetTargets(int width, std::vector<float> targets);
  bool has_targets() const { return target_width_ > 0; }
  int target_width() const { return target_width_; }
  float target(size_t i, size_t k) const { return (*targets_)[i * size_t(target_width_) + k]; }
  // The targets of examples `indices` into `out` (indices.size() x width).
  void GatherTargets(std::span<const uint32_t> indices, float* out) const;

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
  // Value `at` of the values starting at `base`, in encoding_.
  float ValueAt(const uint8_t* base, size_t at) const;

  int height_ = 0, width_ = 0, channels_ = 0;
  std::shared_ptr<const void> storage_;  // owns what floats_ / bytes_ point into
  const float* floats_ = nullptr;
  const uint8_t* bytes_ = nullptr;
  float scale_ = 1.0f;
  PixelEncoding encoding_ = PixelEncoding::kBytes;  // of bytes_ / rows_
  std::vector<const uint8_t*> rows_;  // when not empty: where each example starts (Rows)
  std::vector<int32_t> labels_;
  int target_width_ = 0;  // 0: no targets (class labels)
  std::shared_ptr<const std::vector<float>> targets_;
};

}  // namespace mirrored::data
