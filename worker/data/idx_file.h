// Reader for IDX files (the MNIST / Fashion-MNIST container), gzipped or
// plain: magic number, dimensions, then unsigned bytes (or, where the
// caller accepts them, big-endian float32 values: type 0x0D). Every failure is a
// Status naming the file and the problem, never a crash.
//
//   StatusOr<IdxFile> f = IdxFile::Read("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
//   if (!f.ok()) return f.status();              // NotFound / InvalidArgument / DataLoss
//   size_t n = f->dims()[0];  const uint8_t* v = f->data().data();
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

class IdxFile {
 public:
  // Reads and validates `path`. The magic number must say unsigned bytes
  // (0x08) and 1..4 dimensions; the payload must hold exactly the product of
  // the dimensions (trailing bytes are an error too). Errors: NotFound (no
  // such file), InvalidArgument (bad magic, bad dimensions, truncated, not a
  // valid gzip stream, trailing data). All messages start with the path.
  // `accept_float32`: type 0x0D (big-endian float32) is valid too. A
  // plain file is mapped (region()->mapped()), a gzipped one inflated.
  static StatusOr<IdxFile> Read(const std::string& path, bool accept_float32 = false);

  // The checks of Read that take microseconds, for a task to fail before it
  // joins a job: the magic number, the dimensions (returned), and the size
  // against them (a gzip file's length trailer, a plain file's size), which
  // finds a truncated file or trailing bytes. A damaged payload is found only
  // by Read. Errors as Read's, starting with the path.
  static StatusOr<std::vector<uint32_t>> ReadHeader(const std::string& path, bool accept_float32 = false);
  // ReadHeader's checks; the size of the IDX image its header promises, in
  // bytes (what a gzipped file inflates to).
  static StatusOr<uint64_t> DecompressedSize(const std::string& path, bool accept_float32 = false);

  // Parses an in-memory, already decompressed IDX image; `name` is used in
  // error messages.
  static StatusOr<IdxFile> Parse(const std::string& name, std::vector<uint8_t> bytes);
  // The same over a shared region (e.g. a mapped cache file); the payload is
  // a view into it, which the IdxFile keeps alive.
  static StatusOr<IdxFile> Parse(const std::string& name, std::shared_ptr<const ByteRegion> bytes,
                                 bool accept_float32 = false);

  const std::string& path() const { return path_; }
  const std::vector<uint32_t>& dims() const { return dims_; }
  // Whether the values are float32 (big-endian, 4 bytes each), not bytes.
  bool float32() const { return float32_; }
  // The payload, row-major, `product(dims)` values (4 bytes each when float32()).
  std::span<const uint8_t> data() const { return data_; }
  // What data() points into.
  const std::shared_ptr<const ByteRegion>& region() const { return region_; }

 private:
  static StatusOr<uint64_t> ReadHeaderAndSize(const std::string& path, bool accept_float32,
                                              std::vector<uint32_t>* dims);

  std::string path_;
  std::vector<uint32_t> dims_;
  std::shared_ptr<const ByteRegion> region_;
  std::span<const uint8_t> data_;
  bool float32_ = false;
};

}  // namespace mirrored::data
