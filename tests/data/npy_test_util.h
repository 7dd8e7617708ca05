// Builders of .npy arrays and .npz archives for the data tests, byte for
// byte as np.save and np.savez write them (a header padded to 64 bytes,
// zip members stored with a zip64 extra field in their local headers).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace mirrored::data {

using Bytes = std::vector<uint8_t>;

// An .npy file: `dict` is the header's text without padding, e.g.
// "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }".
inline Bytes NpyWithHeader(const std::string& dict, const Bytes& payload, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), 0};
  const size_t len = header.size();
  b.push_back(uint8_t(len));
  b.push_back(uint8_t(len >> 8));
  if (major != 1) {
    b.push_back(uint8_t(len >> 16));
    b.push_back(uint8_t(len >> 24));
  }
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

inline std::string ShapeText(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

template <typename T>
Bytes RawBytes(const std::vector<T>& values) {
  Bytes b(values.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), values.data(), b.size());
  return b;
}

template <typename T>
Bytes Npy(const std::string& descr, const std::vector<size_t>& shape, const std::vector<T>& values, int major = 1) {
  return NpyWithHeader("{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + ShapeText(shape) + ", }",
                       RawBytes(values), major);
}

struct ZipMember {
  std::string name;
  Bytes data;
  bool deflate = false;
};

inline void PutLe(Bytes& b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

inline Bytes RawDeflate(const Bytes& in) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&zs, in.size()) + 64);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = uInt(in.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A zip archive as Python's zipfile writes np.savez's: each local header
// with a zip64 extra field (sizes 0xffffffff there), the central directory
// with the 32-bit sizes.
inline Bytes Zip(const std::vector<ZipMember>& members) {
  Bytes out, dir;
  for (const ZipMember& m : members) {
    const Bytes stored = m.deflate ? RawDeflate(m.data) : m.data;
    const uint32_t crc = uint32_t(crc32(0, m.data.data(), uInt(m.data.size())));
    const uint64_t offset = out.size();
    PutLe(out, 0x04034b50, 4);
    PutLe(out, 45, 2);                       // version needed (zip64)
    PutLe(out, 0, 2);                        // flags
    PutLe(out, m.deflate ? 8 : 0, 2);        // method
    PutLe(out, 0, 4);                        // time, date
    PutLe(out, crc, 4);
    PutLe(out, 0xffffffff, 4);               // sizes: in the zip64 extra
    PutLe(out, 0xffffffff, 4);
    PutLe(out, m.name.size(), 2);
    PutLe(out, 20, 2);                       // extra length
    out.insert(out.end(), m.name.begin(), m.name.end());
    PutLe(out, 0x0001, 2);
    PutLe(out, 16, 2);
    PutLe(out, m.data.size(), 8);
    PutLe(out, stored.size(), 8);
    out.insert(out.end(), stored.begin(), stored.end());
    PutLe(dir, 0x02014b50, 4);
    PutLe(dir, 45, 2);
    PutLe(dir, 45, 2);
    PutLe(dir, 0, 2);
    PutLe(dir, m.deflate ? 8 : 0, 2);
    PutLe(dir, 0, 4);
    PutLe(dir, crc, 4);
    PutLe(dir, stored.size(), 4);
    PutLe(dir, m.data.size(), 4);
    PutLe(dir, m.name.size(), 2);
    PutLe(dir, 0, 2);  // extra
    PutLe(dir, 0, 2);  // comment
    PutLe(dir, 0, 2);  // disk
    PutLe(dir, 0, 2);  // internal attributes
    PutLe(dir, 0, 4);  // external attributes
    PutLe(dir, offset, 4);
    dir.insert(dir.end(), m.name.begin(), m.name.end());
  }
  const uint64_t dir_offset = out.size();
  out.insert(out.end(), dir.begin(), dir.end());
  PutLe(out, 0x06054b50, 4);
  PutLe(out, 0, 4);
  PutLe(out, members.size(), 2);
  PutLe(out, members.size(), 2);
  PutLe(out, dir.size(), 4);
  PutLe(out, dir_offset, 4);
  PutLe(out, 0, 2);
  return out;
}

inline void WriteBytes(const std::filesystem::path& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// A synthetic image set: n examples of h x w x c uint8 pixels, labels i % classes.
struct SyntheticSplit {
  Bytes x, y;
};
inline SyntheticSplit Synthetic(size_t n, size_t h, size_t w, size_t c, int classes, int salt = 0) {
  std::vector<uint8_t> pixels(n * h * w * c);
  std::vector<int64_t> labels(n);
  for (size_t i = 0; i < n; ++i) {
    labels[i] = int64_t(i % size_t(classes));
    // Each class has its own brightness: a model can learn it in a few steps.
    for (size_t k = 0; k < h * w * c; ++k) {
      pixels[i * h * w * c + k] = uint8_t((labels[i] * 60 + int(k % 7) * 3 + salt + int(i % 5)) % 256);
    }
  }
  return {Npy<uint8_t>("|u1", {n, h, w, c}, pixels), Npy<int64_t>("<i8", {n}, labels)};
}

// An .npz of a training and a test split, as np.savez writes x_train,
// y_train, x_test and y_test.
inline void WriteSplitsNpz(const std::filesystem::path& path, const SyntheticSplit& train, const SyntheticSplit& test) {
  WriteBytes(path,
             Zip({{"x_train.npy", train.x}, {"y_train.npy", train.y}, {"x_test.npy", test.x}, {"y_test.npy", test.y}}));
}

}  // namespace mirrored::data
