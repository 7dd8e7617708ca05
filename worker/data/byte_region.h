// An immutable run of bytes that stays valid while any holder keeps its
// shared_ptr: either an owned vector or a read-only memory map of a file
// (pages shared through the page cache by every process that maps the same
// file). Datasets keep raw pixel bytes in one, so the workers of a machine
// share one copy of a decompressed dataset instead of holding one each.
//
//   std::shared_ptr<const ByteRegion> r = ByteRegion::Own(std::move(bytes));
//   StatusOr<std::shared_ptr<const ByteRegion>> m = ByteRegion::MapFile("/path/file.idx");
//   std::span<const uint8_t> b = (*m)->bytes();
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace mirrored::data {

class ByteRegion {
 public:
  static std::shared_ptr<const ByteRegion> Own(std::vector<uint8_t> bytes);
  // Maps `path` read-only (MAP_SHARED; prefaulted when `populate`, else
  // only the pages read are: a header check of a large file). Errors:
  // NotFound (no such file), InvalidArgument (not a regular file or cannot
  // be mapped), both naming the path. An empty file maps to an empty region.
  static StatusOr<std::shared_ptr<const ByteRegion>> MapFile(const std::string& path, bool populate = true);

  ~ByteRegion();
  ByteRegion(const ByteRegion&) = delete;
  ByteRegion& operator=(const ByteRegion&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  bool mapped() const { return mapping_ != nullptr; }

 private:
  ByteRegion() = default;

  std::vector<uint8_t> owned_;
  void* mapping_ = nullptr;  // munmap'd by the destructor
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mirrored::data
