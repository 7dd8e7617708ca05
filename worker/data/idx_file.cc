#include "worker/data/idx_file.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace mirrored::data {
namespace {

constexpr uint32_t kIdxUbyte = 0x08;
constexpr uint32_t kIdxFloat32 = 0x0d;

// Upper bound on the decompressed size we accept: the largest Fashion-MNIST
// file is 47 MB; anything past 1 GiB is a corrupt or hostile header.
constexpr size_t kMaxDecompressedBytes = size_t{1} << 30;

bool IsGzip(const std::vector<uint8_t>& raw) {
  return raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b;
}

// Inflates `raw`, which must decompress to exactly `expected` bytes (what
// its IDX header promises): it stops one byte past that, so that a small
// file cannot make it inflate gigabytes (a gzip bomb).
StatusOr<std::vector<uint8_t>> Gunzip(const std::string& path, const std::vector<uint8_t>& raw, size_t expected) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  // 16 + MAX_WBITS: expect a gzip header and trailer (CRC-32 and length).
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return InternalError(path + ": cannot initialise zlib");
  }
  const size_t limit = expected + 1;
  std::vector<uint8_t> out;
  out.resize(std::min(raw.size() * 4 + 1024, limit));
  zs.next_in = const_cast<Bytef*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  int rc = Z_OK;
  while (true) {
    if (zs.total_out == out.size()) {
      if (out.size() >= limit) {
        inflateEnd(&zs);
        return InvalidArgumentError(path + ": decompresses to more than the " + std::to_string(expected) +
                                    " bytes its IDX header promises (a damaged or hostile file)");
      }
      out.resize(std::min(out.size() * 2, limit));
    }
    zs.next_out = out.data() + zs.total_out;
    zs.avail_out = static_cast<uInt>(out.size() - zs.total_out);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in > 0) {
        // A second gzip member, or bytes appended: ReadHeader's length check
        // (the last 4 bytes) could not vouch for such a file.
        const uInt extra = zs.avail_in;
        inflateEnd(&zs);
        return InvalidArgumentError(path + ": " + std::to_string(extra) +
                                    " bytes after the gzip stream (expected a single gzip stream)");
      }
      break;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
      inflateEnd(&zs);
      return InvalidArgumentError(path + ": gzip stream is truncated (ends after " +
                                  std::to_string(raw.size()) + " compressed bytes)");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      std::string why = zs.msg ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      return InvalidArgumentError(path + ": corrupt gzip data (" + why + ")");
    }
  }
  out.resize(zs.total_out);
  inflateEnd(&zs);
  return out;
}

uint32_t ReadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Magic number and dimensions from the first bytes of an IDX image; the
// number of values they promise in *count.
// With `accept_float32`, type 0x0D (big-endian float32) too; *count is
// then in bytes: 4 per value.
StatusOr<std::vector<uint32_t>> ParseHeader(const std::string& name, std::span<const uint8_t> bytes,
                                            size_t* count, bool accept_float32) {
  if (bytes.size() < 4) {
    return InvalidArgumentError(name + ": too short for an IDX header (" + std::to_string(bytes.size()) +
                                " bytes)");
  }
  uint32_t magic = ReadBigEndian32(bytes.data());
  uint32_t type = (magic >> 8) & 0xff;
  uint32_t rank = magic & 0xff;
  const bool is_float = accept_float32 && type == kIdxFloat32;
  if ((magic >> 16) != 0 || (type != kIdxUbyte && !is_float) || rank < 1 || rank > 4) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%08x", magic);
    return InvalidArgumentError(name + ": wrong magic number " + hex +
                                (accept_float32 ? " (expected 0x00000801..0x00000804: unsigned bytes, or "
                                                  "0x00000d01..0x00000d04: float32, 1-4 dimensions)"
                                                : " (expected 0x00000801..0x00000804: unsigned bytes, 1-4 dimensions)"));
  }
  size_t header = 4 + 4 * size_t{rank};
  if (bytes.size() < header) {
    return InvalidArgumentError(name + ": truncated header (" + std::to_string(bytes.size()) + " of " +
                                std::to_string(header) + " bytes)");
  }
  std::vector<uint32_t> dims;
  *count = 1;
  for (uint32_t d = 0; d < rank; ++d) {
    uint32_t dim = ReadBigEndian32(bytes.data() + 4 + 4 * d);
    if (dim == 0) return InvalidArgumentError(name + ": dimension " + std::to_string(d) + " is 0");
    if (*count > kMaxDecompressedBytes / dim) {
      return InvalidArgumentError(name + ": dimension " + std::to_string(d) + " = " + std::to_string(dim) +
                                  " makes the set more than 2^30 values (1 GiB), the most an IDX file may hold "
                                  "here; store a larger set as .npy files (docs/models-and-data.md)");
    }
    *count *= dim;
    dims.push_back(dim);
  }
  if (is_float) {
    if (*count > kMaxDecompressedBytes / 4) {
      return InvalidArgumentError(name + ": " + std::to_string(*count) + " float32 values are more than 1 GiB");
    }
    *count *= 4;
  }
  return dims;
}

// Opens `path` for reading, a regular file only (an ifstream opens a
// directory too, and gives it a size of INT64_MAX on ext4); its size.
StatusOr<std::streamoff> OpenRegular(const std::string& path, std::ifstream* in) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return NotFoundError(path + ": no such file (install Debian's dataset-fashion-mnist or pass --data DIR)");
    }
    return NotFoundError(path + ": cannot open (" + std::strerror(err) + ")");
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError(path + ": not a regular file");
  in->open(path, std::ios::binary);
  if (!*in) return NotFoundError(path + ": cannot open (" + std::strerror(errno) + ")");
  return static_cast<std::streamoff>(st.st_size);
}

// The size an IDX gzip promises once inflated, from the header in its
// first 20 decompressed bytes; `head` holds the file's first bytes.
StatusOr<uint64_t> PromisedGzipSize(const std::string& path, std::span<const uint8_t> head, bool accept_float32,
                                    std::vector<uint32_t>* dims_out) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return InternalError(path + ": cannot initialise zlib");
  uint8_t first[20];
  zs.next_in = const_cast<Bytef*>(head.data());
  zs.avail_in = static_cast<uInt>(head.size());
  zs.next_out = first;
  zs.avail_out = sizeof(first);
  int rc = Z_OK;
  while (zs.avail_out > 0 && rc == Z_OK) rc = inflate(&zs, Z_NO_FLUSH);
  const size_t got = sizeof(first) - zs.avail_out;
  const std::string why = zs.msg ? zs.msg : "error " + std::to_string(rc);
  inflateEnd(&zs);
  if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
    return InvalidArgumentError(path + ": corrupt gzip data (" + why + ")");
  }
  size_t count = 0;
  MIRRORED_ASSIGN_OR_RETURN(*dims_out,
                            ParseHeader(path, std::span<const uint8_t>(first, got), &count, accept_float32));
  return 4 + 4 * dims_out->size() + count;
}

}  // namespace

StatusOr<std::vector<uint32_t>> IdxFile::ReadHeader(const std::string& path, bool accept_float32) {
  std::vector<uint32_t> dims;
  MIRRORED_RETURN_IF_ERROR(ReadHeaderAndSize(path, accept_float32, &dims).status());
  return dims;
}

StatusOr<uint64_t> IdxFile::DecompressedSize(const std::string& path, bool accept_float32) {
  std::vector<uint32_t> dims;
  return ReadHeaderAndSize(path, accept_float32, &dims);
}

StatusOr<uint64_t> IdxFile::ReadHeaderAndSize(const std::string& path, bool accept_float32,
                                              std::vector<uint32_t>* dims_out) {
  std::ifstream in;
  MIRRORED_ASSIGN_OR_RETURN(const std::streamoff size, OpenRegular(path, &in));
  std::vector<uint8_t> head(static_cast<size_t>(std::min<std::streamoff>(size, 64 * 1024)));
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  if (in.bad() || in.gcount() != static_cast<std::streamsize>(head.size())) {
    return InvalidArgumentError(path + ": read error");
  }
  if (!IsGzip(head)) {
    size_t count = 0;
    MIRRORED_ASSIGN_OR_RETURN(std::vector<uint32_t> dims, ParseHeader(path, head, &count, accept_float32));
    const size_t have = static_cast<size_t>(size) - (4 + 4 * dims.size());
    if (have < count) {
      return InvalidArgumentError(path + ": truncated: header promises " + std::to_string(count) +
                                  " values, file holds " + std::to_string(have));
    }
    if (have > count) {
      return InvalidArgumentError(path + ": " + std::to_string(have - count) + " unexpected bytes after the " +
                                  std::to_string(count) + " values");
    }
    *dims_out = std::move(dims);
    return static_cast<uint64_t>(size);
  }
  // The gzip trailer's last 4 bytes: the decompressed length mod 2^32
  // (RFC 1952).
  std::vector<uint32_t> dims;
  MIRRORED_ASSIGN_OR_RETURN(const uint64_t expected, PromisedGzipSize(path, head, accept_float32, &dims));
  const size_t count = expected - (4 + 4 * dims.size());
  uint8_t trailer[4] = {0, 0, 0, 0};
  if (size >= 18) {  // the smallest gzip stream: 10 bytes of header, 8 of trailer
    in.clear();
    in.seekg(size - 4, std::ios::beg);
    in.read(reinterpret_cast<char*>(trailer), 4);
  }
  const uint32_t isize = uint32_t{trailer[0]} | (uint32_t{trailer[1]} << 8) | (uint32_t{trailer[2]} << 16) |
                         (uint32_t{trailer[3]} << 24);
  if (size < 18 || !in || isize != static_cast<uint32_t>(expected)) {
    return InvalidArgumentError(path + ": truncated or damaged (or not a single gzip stream): the header promises " +
                                std::to_string(count) + " values (" + std::to_string(expected) +
                                " bytes), the gzip trailer says " + std::to_string(isize) + " bytes");
  }
  *dims_out = std::move(dims);
  return expected;
}

StatusOr<IdxFile> IdxFile::Read(const std::string& path, bool accept_float32) {
  std::ifstream in;
  MIRRORED_ASSIGN_OR_RETURN(const std::streamoff size, OpenRegular(path, &in));
  uint8_t magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  if (size >= 2 && !IsGzip({magic[0], magic[1]})) {
    // A plain file is mapped in place: the workers of a machine share its
    // pages, as they share a cache entry of a gzipped one.
    MIRRORED_ASSIGN_OR_RETURN(std::shared_ptr<const ByteRegion> region, ByteRegion::MapFile(path));
    return Parse(path, std::move(region), accept_float32);
  }
  in.clear();
  in.seekg(0);
  std::vector<uint8_t> raw;
  if (size > 0) {
    raw.resize(static_cast<size_t>(size));
    in.read(reinterpret_cast<char*>(raw.data()), size);
  }
  if (in.bad() || (size > 0 && in.gcount() != size)) return InvalidArgumentError(path + ": read error");
  if (IsGzip(raw)) {
    // The header's promise bounds the inflation; zlib checks the trailer.
    std::vector<uint32_t> dims;
    MIRRORED_ASSIGN_OR_RETURN(const uint64_t expected, PromisedGzipSize(path, raw, accept_float32, &dims));
    MIRRORED_ASSIGN_OR_RETURN(raw, Gunzip(path, raw, static_cast<size_t>(expected)));
  }
  return Parse(path, ByteRegion::Own(std::move(raw)), accept_float32);
}

StatusOr<IdxFile> IdxFile::Parse(const std::string& name, std::vector<uint8_t> bytes) {
  return Parse(name, ByteRegion::Own(std::move(bytes)));
}

StatusOr<IdxFile> IdxFile::Parse(const std::string& name, std::shared_ptr<const ByteRegion> region,
                                 bool accept_float32) {
  const std::span<const uint8_t> bytes = region->bytes();
  IdxFile file;
  file.path_ = name;
  size_t count = 0;
  MIRRORED_ASSIGN_OR_RETURN(file.dims_, ParseHeader(name, bytes, &count, accept_float32));
  file.float32_ = ((ReadBigEndian32(bytes.data()) >> 8) & 0xff) == kIdxFloat32;
  const size_t header = 4 + 4 * file.dims_.size();
  size_t have = bytes.size() - header;
  if (have < count) {
    return InvalidArgumentError(name + ": truncated: header promises " + std::to_string(count) +
                                " values, file holds " + std::to_string(have));
  }
  if (have > count) {
    return InvalidArgumentError(name + ": " + std::to_string(have - count) +
                                " unexpected bytes after the " + std::to_string(count) + " values");
  }
  file.data_ = bytes.subspan(header, count);
  file.region_ = std::move(region);
  return file;
}

}  // namespace mirrored::data
