#include "worker/data/npz_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace mirrored::data {
namespace {

// Zip record signatures and sizes (PKWARE APPNOTE.TXT, 4.3).
constexpr uint32_t kEndOfDirectory = 0x06054b50;       // 22 bytes + comment
constexpr uint32_t kZip64EndLocator = 0x07064b50;      // 20 bytes, just before the end record
constexpr uint32_t kZip64EndOfDirectory = 0x06064b50;  // 56 bytes + extensible data
constexpr uint32_t kDirectoryEntry = 0x02014b50;       // 46 bytes + name + extra + comment
constexpr uint32_t kLocalHeader = 0x04034b50;          // 30 bytes + name + extra
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t kMax32 = 0xffffffff;

uint64_t Le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The zip64 extended information of a directory entry: the 64-bit values of
// the fields that read 0xffffffff, in this order.
bool ApplyZip64Extra(const uint8_t* extra, size_t len, uint64_t* size, uint64_t* compressed, uint64_t* offset) {
  size_t at = 0;
  while (at + 4 <= len) {
    const uint16_t id = static_cast<uint16_t>(Le(extra + at, 2));
    const size_t n = static_cast<size_t>(Le(extra + at + 2, 2));
    if (at + 4 + n > len) return false;
    if (id == kZip64ExtraId) {
      size_t f = at + 4;
      for (uint64_t* v : {size, compressed, offset}) {
        if (*v != kMax32) continue;
        if (f + 8 > at + 4 + n) return false;
        *v = Le(extra + f, 8);
        f += 8;
      }
      return true;
    }
    at += 4 + n;
  }
  return *size != kMax32 && *compressed != kMax32 && *offset != kMax32;
}

}  // namespace

StatusOr<NpzArchive> NpzArchive::Open(const std::string& path, bool populate) {
  NpzArchive z;
  z.path_ = path;
  MIRRORED_ASSIGN_OR_RETURN(z.region_, ByteRegion::MapFile(path, populate));
  MIRRORED_RETURN_IF_ERROR(z.ReadDirectory());
  return z;
}

Status NpzArchive::ReadDirectory() {
  const std::span<const uint8_t> b = region_->bytes();
  // The end record is the last 22 bytes, unless a comment (< 64 KiB) follows.
  if (b.size() < 22) return InvalidArgumentError(path_ + ": not an .npz file (" + std::to_string(b.size()) + " bytes)");
  size_t eocd = b.size() - 22;
  const size_t lowest = eocd > 0xffff ? eocd - 0xffff : 0;
  while (Le(b.data() + eocd, 4) != kEndOfDirectory) {
    if (eocd == lowest) {
      return InvalidArgumentError(path_ + ": not an .npz file (no zip end-of-directory record: not a zip archive, "
                                          "or a truncated one)");
    }
    --eocd;
  }
  uint64_t count = Le(b.data() + eocd + 10, 2);
  uint64_t offset = Le(b.data() + eocd + 16, 4);
  if ((count == 0xffff || offset == kMax32) && eocd >= 20 && Le(b.data() + eocd - 20, 4) == kZip64EndLocator) {
    const uint64_t at = Le(b.data() + eocd - 20 + 8, 8);
    if (at + 56 > b.size() || Le(b.data() + at, 4) != kZip64EndOfDirectory) {
      return InvalidArgumentError(path_ + ": damaged zip64 end-of-directory record");
    }
    count = Le(b.data() + at + 32, 8);
    offset = Le(b.data() + at + 48, 8);
  }
  return ReadEntries(offset, count);
}

Status NpzArchive::ReadEntries(uint64_t offset, uint64_t count) {
  const std::span<const uint8_t> b = region_->bytes();
  uint64_t at = offset;
  for (uint64_t i = 0; i < count; ++i) {
    if (at + 46 > b.size() || Le(b.data() + at, 4) != kDirectoryEntry) {
      return InvalidArgumentError(path_ + ": truncated or damaged zip directory (entry " + std::to_string(i) +
                                  " of " + std::to_string(count) + ")");
    }
    const uint8_t* p = b.data() + at;
    const size_t name_len = Le(p + 28, 2), extra_len = Le(p + 30, 2), comment_len = Le(p + 32, 2);
    if (at + 46 + name_len + extra_len + comment_len > b.size()) {
      return InvalidArgumentError(path_ + ": truncated zip directory (entry " + std::to_string(i) + ")");
    }
    Entry e;
    e.name.assign(reinterpret_cast<const char*>(p + 46), name_len);
    e.flags = static_cast<uint16_t>(Le(p + 8, 2));
    e.method = static_cast<uint16_t>(Le(p + 10, 2));
    e.crc32 = static_cast<uint32_t>(Le(p + 16, 4));
    e.compressed_size = Le(p + 20, 4);
    e.size = Le(p + 24, 4);
    e.local_header_offset = Le(p + 42, 4);
    if (!ApplyZip64Extra(p + 46 + name_len, extra_len, &e.size, &e.compressed_size, &e.local_header_offset)) {
      return InvalidArgumentError(path_ + ", member " + e.name + ": damaged zip64 extra field");
    }
    entries_.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return OkStatus();
}

std::vector<std::string> NpzArchive::names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.name);
  return out;
}

bool NpzArchive::Has(const std::string& array) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == array + ".npy"; });
}

StatusOr<std::span<const uint8_t>> NpzArchive::MemberBytes(const Entry& e) const {
  const std::string name = path_ + ", member " + e.name;
  if (e.flags & 0x1) return InvalidArgumentError(name + ": encrypted; save the arrays with np.savez");
  if (e.method == 8) {
    return InvalidArgumentError(name + ": compressed (np.savez_compressed); mirrored maps .npz members in place, "
                                       "so save with np.savez (uncompressed) or np.save each array into a directory");
  }
  if (e.method != 0) {
    return InvalidArgumentError(name + ": zip compression method " + std::to_string(e.method) +
                                " (only stored members, as np.savez writes them, are read)");
  }
  const std::span<const uint8_t> b = region_->bytes();
  const uint64_t at = e.local_header_offset;
  if (at + 30 > b.size() || Le(b.data() + at, 4) != kLocalHeader) {
    return InvalidArgumentError(name + ": truncated or damaged (no local header at offset " + std::to_string(at) +
                                ")");
  }
  const uint64_t data_at = at + 30 + Le(b.data() + at + 26, 2) + Le(b.data() + at + 28, 2);
  if (e.compressed_size != e.size || data_at + e.size > b.size()) {
    return InvalidArgumentError(name + ": truncated: its " + std::to_string(e.size) + " bytes at offset " +
                                std::to_string(data_at) + " run past the end of the file (" +
                                std::to_string(b.size()) + " bytes)");
  }
  return b.subspan(data_at, e.size);
}

StatusOr<NpyArray> NpzArchive::Member(const std::string& array, bool verify_crc) const {
  const std::string member = array + ".npy";
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == member; });
  if (it == entries_.end()) {
    std::string there;
    for (const Entry& e : entries_) there += (there.empty() ? "" : ", ") + e.name;
    return InvalidArgumentError(path_ + ": no member " + member + " (it holds: " +
                                (there.empty() ? std::string("nothing") : there) +
                                "); expected x_train, y_train, x_test, y_test as np.savez(path, x_train=..., ...) "
                                "writes them");
  }
  MIRRORED_ASSIGN_OR_RETURN(std::span<const uint8_t> bytes, MemberBytes(*it));
  if (verify_crc) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t done = 0; done < bytes.size();) {  // zlib's length is 32-bit
      const size_t n = std::min<size_t>(bytes.size() - done, size_t{1} << 30);
      crc = crc32(crc, bytes.data() + done, static_cast<uInt>(n));
      done += n;
    }
    if (static_cast<uint32_t>(crc) != it->crc32) {
      return InvalidArgumentError(path_ + ", member " + member + ": CRC-32 mismatch (the file is damaged)");
    }
  }
  return NpyArray::Parse(path_ + ", member " + member, region_, bytes);
}

}  // namespace mirrored::data
