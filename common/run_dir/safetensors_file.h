// The safetensors format (huggingface/safetensors), so numpy/PyTorch tools
// read mirrored's checkpoints: an 8-byte little-endian header length N, N
// bytes of JSON {"<name>": {"dtype", "shape", "data_offsets": [begin, end]},
// "__metadata__": {string: string}} padded with spaces to a multiple of 8,
// then the tensors' raw little-endian bytes, sorted by name, back to back.
//
//   auto bytes = SafetensorsFile::Serialize({{"w", DType::kF32, {2, 3}, w}}, {});
//   auto file = SafetensorsFile::Parse(std::move(*bytes), "model.safetensors");
//   MIRRORED_RETURN_IF_ERROR(file->CopyF32("w", dst, 6));
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mirrored {

enum class DType { kF32, kI64 };

std::string_view DTypeName(DType dtype);  // "F32", "I64" as in the format
size_t DTypeSize(DType dtype);

// A tensor to write: borrowed bytes, valid until the write returns.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // {} is a scalar
  const void* data = nullptr;  // element_count(shape) * DTypeSize(dtype) bytes
};

int64_t ElementCount(const std::vector<int64_t>& shape);

// A tensor's description inside a parsed file.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets into the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // What to write: `header` (length prefix, JSON and padding), then the
  // `pieces` in order; their sizes add up to the data section.
  struct Encoded {
    std::string header;
    std::vector<std::string_view> pieces;
    uint64_t total_size = 0;  // header.size() + data bytes
  };

  // Validates names (non-empty, unique, not "__metadata__"), shapes (no
  // negative dimension) and data pointers. Errors: InvalidArgument naming
  // the tensor. The pieces borrow the tensors' data.
  static StatusOr<Encoded> Encode(const std::vector<TensorView>& tensors,
                                  const std::map<std::string, std::string>& metadata);
  // Encode() flattened into one buffer (tests, small files).
  static StatusOr<std::string> Serialize(const std::vector<TensorView>& tensors,
                                         const std::map<std::string, std::string>& metadata);

  // Validates the whole file: header length within the file and below
  // 100 MB, JSON, dtypes, shapes, data_offsets matching shape x dtype size,
  // tensors tiling the data section exactly (in bounds, no overlap, no gap).
  // Errors: DataLoss "<file_name>: <what is wrong>".
  static StatusOr<SafetensorsFile> Parse(std::string bytes, std::string file_name);

  // Validates only the header against the file's total size (no data read):
  // `prefix` holds at least the first 8 + N bytes.
  static Status ValidateHeader(std::string_view prefix, uint64_t file_size,
                               const std::string& file_name);

  const std::string& file_name() const { return file_name_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when absent.
  const TensorInfo* Find(std::string_view name) const;

  // Copies tensor `name` into `dst`, which holds `count` elements. Errors:
  // NotFound (no such tensor), InvalidArgument (dtype or element count differs).
  Status CopyF32(std::string_view name, float* dst, int64_t count) const;
  Status CopyI64(std::string_view name, int64_t* dst, int64_t count) const;
  StatusOr<std::vector<float>> ReadF32(std::string_view name) const;
  StatusOr<std::vector<int64_t>> ReadI64(std::string_view name) const;

 private:
  Status CopyRaw(std::string_view name, DType dtype, void* dst, int64_t count) const;

  std::string file_name_;
  std::string bytes_;
  uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace mirrored
