#include "worker/data/tfrecord_reader.h"

#include <cstdio>

#include "common/crc32c.h"

namespace mirrored::data {
namespace {

uint64_t LittleEndian(const uint8_t* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{in[i]} << (8 * i);
  return v;
}

std::string Hex(uint32_t v) {
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%08x", v);
  return hex;
}

}  // namespace

StatusOr<TfRecordReader> TfRecordReader::Open(const std::string& path, bool populate) {
  TfRecordReader r;
  r.path_ = path;
  MIRRORED_ASSIGN_OR_RETURN(r.region_, ByteRegion::MapFile(path, populate));
  return r;
}

std::string TfRecordReader::LastRecordName() const {
  return path_ + ": record " + std::to_string(index_ == 0 ? 0 : index_ - 1) + " at byte " +
         std::to_string(last_offset_);
}

StatusOr<std::optional<std::span<const uint8_t>>> TfRecordReader::Next() {
  const std::span<const uint8_t> file = region_->bytes();
  if (offset_ == file.size()) return std::optional<std::span<const uint8_t>>();
  const std::string where = path_ + ": record " + std::to_string(index_) + " at byte " + std::to_string(offset_);
  const uint64_t left = file.size() - offset_;
  if (left < kHeaderBytes) {
    return InvalidArgumentError(where + ": truncated (" + std::to_string(left) + " bytes left, a record header is " +
                                std::to_string(kHeaderBytes) + ")");
  }
  const uint8_t* header = file.data() + offset_;
  if (offset_ == 0 && header[0] == 0x1f && header[1] == 0x8b) {
    return InvalidArgumentError(where + ": the file is gzip-compressed (TFRecordOptions GZIP): write it "
                                "uncompressed, or decompress it (gunzip)");
  }
  const uint64_t length = LittleEndian(header, 8);
  const uint32_t length_crc = static_cast<uint32_t>(LittleEndian(header + 8, 4));
  if (MaskCrc32c(Crc32c(header, 8)) != length_crc) {
    return InvalidArgumentError(where + ": the length's CRC does not match (stored " + Hex(length_crc) +
                                ", computed " + Hex(MaskCrc32c(Crc32c(header, 8))) +
                                "): a damaged file, a compressed one, or not a TFRecord file");
  }
  if (left - kHeaderBytes < kFooterBytes || length > left - kHeaderBytes - kFooterBytes) {
    return InvalidArgumentError(where + ": truncated (its header promises " + std::to_string(length) +
                                " bytes of data, " + std::to_string(left - kHeaderBytes) +
                                " bytes are left with the CRC)");
  }
  const uint8_t* data = header + kHeaderBytes;
  const uint32_t data_crc = static_cast<uint32_t>(LittleEndian(data + length, 4));
  if (MaskCrc32c(Crc32c(data, length)) != data_crc) {
    return InvalidArgumentError(where + ": the data's CRC does not match (stored " + Hex(data_crc) + ", computed " +
                                Hex(MaskCrc32c(Crc32c(data, length))) + "): the record is damaged");
  }
  last_offset_ = offset_;
  offset_ += kHeaderBytes + length + kFooterBytes;
  ++index_;
  return std::optional<std::span<const uint8_t>>(std::span<const uint8_t>(data, length));
}

}  // namespace mirrored::data
