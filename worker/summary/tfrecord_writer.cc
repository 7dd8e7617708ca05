#include "worker/summary/tfrecord_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/crc32c.h"
#include "common/file_system_full.h"

namespace mirrored {
namespace {

void PutLe(char* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t GetLe(const char* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

}  // namespace

StatusOr<std::unique_ptr<TfRecordWriter>> TfRecordWriter::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wbe");
  if (f == nullptr) return InternalError("cannot create event file " + path + ": " + strerror(errno));
  return std::unique_ptr<TfRecordWriter>(new TfRecordWriter(path, f));
}

TfRecordWriter::~TfRecordWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

Status TfRecordWriter::Append(std::string_view record) {
  char header[12];
  PutLe(header, record.size(), 8);
  PutLe(header + 8, MaskCrc32c(Crc32c(header, 8)), 4);
  char footer[4];
  PutLe(footer, MaskCrc32c(Crc32c(record.data(), record.size())), 4);
  if (std::fwrite(header, 1, sizeof(header), file_) != sizeof(header) ||
      std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fwrite(footer, 1, sizeof(footer), file_) != sizeof(footer)) {
    const int err = errno;  // before the message's allocations
    return InternalError("cannot write to " + path_ + ": " + WriteErrorText(path_, err));
  }
  return OkStatus();
}

Status TfRecordWriter::Flush() {
  if (std::fflush(file_) != 0) {
    const int err = errno;  // before the message's allocations
    return InternalError("cannot flush " + path_ + ": " + WriteErrorText(path_, err));
  }
  return OkStatus();
}

StatusOr<std::vector<std::string>> ReadTfRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open " + path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < data.size()) {
    const std::string where = path + ": record " + std::to_string(records.size()) + " at byte " + std::to_string(pos);
    if (data.size() - pos < 12) return OutOfRangeError(where + " has a truncated header");
    uint64_t len = GetLe(&data[pos], 8);
    if (MaskCrc32c(Crc32c(&data[pos], 8)) != GetLe(&data[pos + 8], 4)) {
      return DataLossError(where + " has a corrupt length (CRC mismatch)");
    }
    if (data.size() - pos - 12 < len + 4) return OutOfRangeError(where + " is truncated");
    const char* body = &data[pos + 12];
    if (MaskCrc32c(Crc32c(body, len)) != GetLe(body + len, 4)) {
      return DataLossError(where + " has corrupt data (CRC mismatch)");
    }
    records.emplace_back(body, len);
    pos += 12 + len + 4;
  }
  return records;
}

}  // namespace mirrored
