// Builders of small image sets in IDX and TFRecord files for the data and
// training tests: synthetic pixels and labels (label = index % classes, so
// every class is there), IDX files of any shape (uint8 or float32), and
// tf.train.Example records written with mirrored's own TFRecord writer.
//
//   WriteIdxSplit(dir, "train", 32, 32, 3, 7, 40);           // train-images-idx4-ubyte.gz, train-labels-...
//   WriteTfRecords(dir / "train.tfrecord", ImageExamples(40, 32, 32, 3, 7));
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "proto/tf_example.pb.h"
#include "tests/data/idx_test_util.h"
#include "worker/summary/tfrecord_writer.h"

namespace mirrored::data {

namespace fs = std::filesystem;

inline uint8_t SyntheticPixel(size_t example, size_t k) { return uint8_t((example * 31 + k * 7) % 256); }
inline int32_t SyntheticLabel(size_t example, int classes) { return int32_t(example % size_t(classes)); }

inline void WriteFileBytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// `split`-images-idx{3,4}-{ubyte,float}[.gz] and `split`-labels-idx1-ubyte[.gz]
// in `dir`: n images of h x w (x c when c > 1) and their labels.
// `label_offset` is added to every label (out-of-range tests).
inline void WriteIdxSplit(const fs::path& dir, const std::string& split, uint32_t h, uint32_t w, uint32_t c,
                          int classes, uint32_t n, bool float32 = false, bool gzip = true, int label_offset = 0) {
  fs::create_directories(dir);
  std::vector<uint32_t> dims = {n, h, w};
  if (c > 1) dims.push_back(c);
  const uint32_t type = float32 ? 0x0d : 0x08;
  std::vector<uint8_t> images = Header((type << 8) | uint32_t(dims.size()), dims);
  const size_t es = size_t(h) * w * c;
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < es; ++k) {
      if (!float32) {
        images.push_back(SyntheticPixel(i, k));
        continue;
      }
      const float v = float(SyntheticPixel(i, k)) / 255.0f;
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      for (int s = 24; s >= 0; s -= 8) images.push_back(uint8_t(bits >> s));  // big-endian
    }
  }
  std::vector<uint8_t> labels = Header(0x801, {n});
  for (size_t i = 0; i < n; ++i) labels.push_back(uint8_t(SyntheticLabel(i, classes) + label_offset));
  const std::string gz = gzip ? ".gz" : "";
  const std::string kind = std::string(dims.size() == 4 ? "idx4" : "idx3") + (float32 ? "-float" : "-ubyte");
  WriteFileBytes(dir / (split + "-images-" + kind + gz), gzip ? Gzip(images) : images);
  WriteFileBytes(dir / (split + "-labels-idx1-ubyte" + gz), gzip ? Gzip(labels) : labels);
}

// One Example: raw uint8 pixels under `image_key` with a "shape" feature,
// or (float_list) floats with "height", "width", "depth" features.
inline tensorflow::Example ImageExample(size_t i, int h, int w, int c, int classes, bool floats = false,
                                        const std::string& image_key = "image",
                                        const std::string& label_key = "label") {
  tensorflow::Example ex;
  auto& f = *ex.mutable_features()->mutable_feature();
  const size_t es = size_t(h) * w * c;
  if (floats) {
    for (size_t k = 0; k < es; ++k) f[image_key].mutable_float_list()->add_value(float(SyntheticPixel(i, k)) / 255.0f);
    f["height"].mutable_int64_list()->add_value(h);
    f["width"].mutable_int64_list()->add_value(w);
    f["depth"].mutable_int64_list()->add_value(c);
  } else {
    std::string pixels(es, '\0');
    for (size_t k = 0; k < es; ++k) pixels[k] = char(SyntheticPixel(i, k));
    f[image_key].mutable_bytes_list()->add_value(pixels);
    for (int d : {h, w, c}) f["shape"].mutable_int64_list()->add_value(d);
  }
  f[label_key].mutable_int64_list()->add_value(SyntheticLabel(i, classes));
  return ex;
}

inline std::vector<tensorflow::Example> ImageExamples(size_t n, int h, int w, int c, int classes, bool floats = false,
                                                      size_t first = 0) {
  std::vector<tensorflow::Example> out;
  for (size_t i = first; i < first + n; ++i) out.push_back(ImageExample(i, h, w, c, classes, floats));
  return out;
}

// Writes `examples` with mirrored's TFRecord writer (worker/summary/).
inline void WriteTfRecords(const fs::path& path, const std::vector<tensorflow::Example>& examples) {
  fs::create_directories(path.parent_path());
  auto w = TfRecordWriter::Open(path.string());
  ASSERT_TRUE(w.ok()) << w.status();
  for (const auto& ex : examples) ASSERT_TRUE((*w)->Append(ex.SerializeAsString()).ok());
  ASSERT_TRUE((*w)->Flush().ok());
}

}  // namespace mirrored::data
