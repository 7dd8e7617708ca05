// An .npz file (what np.savez writes: a zip archive of .npy members),
// mapped once and read in place: a member stored without compression (zip
// method 0, np.savez) is an NpyArray viewing the mapped file, so the
// workers of a machine share its pages. A compressed member (deflate,
// np.savez_compressed) is refused with what to do instead: inflating it
// would give each worker a private copy of the whole set. Zip64 (members or
// archives past 4 GiB) is read.
//
//   StatusOr<NpzArchive> z = NpzArchive::Open("data.npz");
//   StatusOr<NpyArray> x = z->Member("x_train");   // "x_train.npy" inside
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/data/byte_region.h"
#include "worker/data/npy_array.h"

namespace mirrored::data {

class NpzArchive {
 public:
  // Maps `path` (`populate` as ByteRegion::MapFile) and reads the zip
  // central directory. Errors: NotFound, InvalidArgument (not a zip
  // archive, a truncated one, a malformed directory), naming the path.
  static StatusOr<NpzArchive> Open(const std::string& path, bool populate = true);

  const std::string& path() const { return path_; }
  // The members' names as stored ("x_train.npy", ...).
  std::vector<std::string> names() const;
  bool Has(const std::string& array) const;
  // The array `array` (member "<array>.npy"). `verify_crc` checks the
  // member's CRC-32 (reads every byte). Errors, InvalidArgument naming the
  // archive and the member: no such member (listing those there), a
  // compressed or encrypted one, a member past the end of the file, a CRC
  // mismatch, and NpyArray::Parse's.
  StatusOr<NpyArray> Member(const std::string& array, bool verify_crc = false) const;

 private:
  struct Entry {
    std::string name;
    uint16_t flags = 0;
    uint16_t method = 0;
    uint32_t crc32 = 0;
    uint64_t compressed_size = 0;
    uint64_t size = 0;
    uint64_t local_header_offset = 0;
  };
  Status ReadDirectory();
  Status ReadEntries(uint64_t offset, uint64_t count);
  StatusOr<std::span<const uint8_t>> MemberBytes(const Entry& e) const;

  std::string path_;
  std::shared_ptr<const ByteRegion> region_;
  std::vector<Entry> entries_;
};

}  // namespace mirrored::data
