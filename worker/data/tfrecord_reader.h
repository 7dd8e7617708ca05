// Reads the records of a TFRecord file in place: the file is mapped
// read-only and each record is a view into the mapping (no copy). The
// framing is the one worker/summary/tfrecord_writer.h writes:
//   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// (little-endian); both CRCs are checked. Uncompressed files only (not
// TFRecordOptions' GZIP or ZLIB).
//
//   MIRRORED_ASSIGN_OR_RETURN(TfRecordReader r, TfRecordReader::Open("data/train.tfrecord"));
//   while (true) {
//     MIRRORED_ASSIGN_OR_RETURN(std::optional<std::span<const uint8_t>> rec, r.Next());
//     if (!rec) break;   // r.index(), r.offset(): where the next one starts
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "common/status.h"
#include "worker/data/byte_region.h"

namespace mirrored::data {

class TfRecordReader {
 public:
  // The framing's bytes around a record's data.
  static constexpr size_t kHeaderBytes = 12;
  static constexpr size_t kFooterBytes = 4;

  // Maps `path` (prefaulted when `populate`). Errors: ByteRegion::MapFile's.
  static StatusOr<TfRecordReader> Open(const std::string& path, bool populate = true);

  // The next record's data, nullopt after the last one. Errors, all
  // InvalidArgument naming the file, the record's index and byte offset:
  // a header or record cut short (a truncated file), a length or data CRC
  // that does not match (a damaged file, or not a TFRecord file).
  StatusOr<std::optional<std::span<const uint8_t>>> Next();

  const std::string& path() const { return path_; }
  // Index and byte offset of the record Next returns next (after a
  // record: that record's + 1, and the offset past it).
  size_t index() const { return index_; }
  uint64_t offset() const { return offset_; }
  // "data/train.tfrecord: record 3 at byte 1234", for messages about the
  // record Next returned last.
  std::string LastRecordName() const;
  const std::shared_ptr<const ByteRegion>& region() const { return region_; }

 private:
  std::string path_;
  std::shared_ptr<const ByteRegion> region_;
  size_t index_ = 0;
  uint64_t offset_ = 0;
  uint64_t last_offset_ = 0;
};

}  // namespace mirrored::data
