// One NumPy array in the .npy format (a file, or a member of an .npz
// archive), read in place: the header is parsed (magic, version 1.0/2.0/3.0,
// the dict with descr, fortran_order and shape) and the values stay a view
// into the bytes they came in (a mapped file), never copied. Only what
// mirrored trains on is accepted: little-endian numbers, C order.
//
//   StatusOr<NpyArray> x = NpyArray::Read("data/x_train.npy");   // maps the file
//   if (x->dtype() == NpyDtype::kUint8) { const uint8_t* p = x->data().data(); ... }
//   size_t n = x->shape()[0];
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/data/byte_region.h"

namespace mirrored::data {

enum class NpyDtype { kUint8, kInt8, kUint16, kInt16, kUint32, kInt32, kUint64, kInt64, kFloat32, kFloat64 };

// numpy's name for it: "uint8", "float32"...
const char* NpyDtypeName(NpyDtype dtype);
size_t NpyDtypeSize(NpyDtype dtype);
bool NpyDtypeIsInteger(NpyDtype dtype);

class NpyArray {
 public:
  // Maps `path` (ByteRegion::MapFile; `populate` false touches only the
  // pages read, for a header check) and parses it.
  static StatusOr<NpyArray> Read(const std::string& path, bool populate = true);
  // Parses `bytes` (inside `region`, which the array keeps alive). `name`
  // starts every error message: the file, or "file.npz, member x_train.npy".
  // Errors, all InvalidArgument: not a .npy (magic), an unknown version, a
  // malformed header, a big-endian or unsupported dtype, fortran_order
  // True, a file shorter or longer than its shape promises.
  static StatusOr<NpyArray> Parse(const std::string& name, std::shared_ptr<const ByteRegion> region,
                                  std::span<const uint8_t> bytes);

  const std::string& name() const { return name_; }
  NpyDtype dtype() const { return dtype_; }
  const std::vector<size_t>& shape() const { return shape_; }
  size_t count() const;  // product of shape() (1 for a scalar)
  // The values, little-endian, count() x NpyDtypeSize(dtype()) bytes (not
  // necessarily aligned: read them with memcpy or Int64At).
  std::span<const uint8_t> data() const { return data_; }
  const std::shared_ptr<const ByteRegion>& region() const { return region_; }
  // Value i of an integer array, widened (uint64 past INT64_MAX saturates).
  int64_t Int64At(size_t i) const;
  // "(60000, 28, 28)", as numpy prints shapes.
  std::string ShapeString() const;

 private:
  std::string name_;
  NpyDtype dtype_ = NpyDtype::kUint8;
  std::vector<size_t> shape_;
  std::shared_ptr<const ByteRegion> region_;
  std::span<const uint8_t> data_;
};

}  // namespace mirrored::data
