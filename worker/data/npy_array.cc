#include "worker/data/npy_array.h"

#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

namespace mirrored::data {
namespace {

constexpr std::string_view kMagic("\x93NUMPY", 6);
// No array mirrored reads is larger; a header promising more is corrupt.
constexpr size_t kMaxHeaderBytes = size_t{1} << 20;

struct DtypeInfo {
  const char* descr;  // without the byte-order character
  NpyDtype dtype;
  const char* name;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {"u1", NpyDtype::kUint8, "uint8", 1},    {"i1", NpyDtype::kInt8, "int8", 1},
    {"u2", NpyDtype::kUint16, "uint16", 2},  {"i2", NpyDtype::kInt16, "int16", 2},
    {"u4", NpyDtype::kUint32, "uint32", 4},  {"i4", NpyDtype::kInt32, "int32", 4},
    {"u8", NpyDtype::kUint64, "uint64", 8},  {"i8", NpyDtype::kInt64, "int64", 8},
    {"f4", NpyDtype::kFloat32, "float32", 4}, {"f8", NpyDtype::kFloat64, "float64", 8},
};

const DtypeInfo& InfoOf(NpyDtype dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d;
  }
  return kDtypes[0];
}

// The header's dict, as np.save writes it:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 28, 28), }
struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<size_t>> shape;
};

// A parser of that Python literal: string keys; string, True/False and
// tuple-of-integers values. Each method returns false at a syntax error.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  // Fills *h; an error message in *why.
  bool Parse(Header* h, std::string* why) {
    if (!Eat('{')) return Fail(why, "expected a dict ({...})");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      if (!String(&key)) return Fail(why, "expected a quoted key");
      if (!Eat(':')) return Fail(why, "expected ':' after '" + key + "'");
      if (!Value(key, h, why)) return false;
      if (!Eat(',')) {
        if (Eat('}')) break;
        return Fail(why, "expected ',' or '}' after '" + key + "'");
      }
    }
    if (!h->descr || !h->fortran_order || !h->shape) {
      return Fail(why, "the dict lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return true;
  }

 private:
  bool Value(const std::string& key, Header* h, std::string* why) {
    SkipSpace();
    if (key == "descr") {
      if (Peek() == '[') return Fail(why, "structured dtype (a list in 'descr'): only plain numbers are supported");
      std::string d;
      if (!String(&d)) return Fail(why, "'descr' is not a string");
      h->descr = d;
    } else if (key == "fortran_order") {
      if (Word("True")) {
        h->fortran_order = true;
      } else if (Word("False")) {
        h->fortran_order = false;
      } else {
        return Fail(why, "'fortran_order' is not True or False");
      }
    } else if (key == "shape") {
      std::vector<size_t> shape;
      if (!Tuple(&shape)) return Fail(why, "'shape' is not a tuple of non-negative integers");
      h->shape = std::move(shape);
    } else {
      return Fail(why, "unexpected key '" + key + "'");
    }
    return true;
  }

  bool Tuple(std::vector<size_t>* out) {
    if (!Eat('(')) return false;
    while (true) {
      SkipSpace();
      if (Eat(')')) return true;
      uint64_t v = 0;
      size_t digits = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (v > (std::numeric_limits<uint64_t>::max() - 9) / 10) return false;
        v = v * 10 + uint64_t(s_[pos_++] - '0');
        ++digits;
      }
      if (digits == 0) return false;
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2's long
      out->push_back(static_cast<size_t>(v));
      if (!Eat(',')) return Eat(')');
    }
  }

  bool String(std::string* out) {
    SkipSpace();
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return false;
    const size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return false;
    *out = std::string(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return true;
  }

  bool Word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  bool Eat(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  static bool Fail(std::string* why, std::string message) {
    *why = std::move(message);
    return false;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

StatusOr<NpyDtype> ParseDescr(const std::string& name, const std::string& descr) {
  // '<' little-endian, '=' native (this host's: little-endian), '|' and
  // '>' for single bytes (byte order does not apply).
  for (const auto& d : kDtypes) {
    if (descr.size() != 3 || descr.compare(1, 2, d.descr) != 0) continue;
    if (descr[0] == '<' || descr[0] == '=' || (d.size == 1 && (descr[0] == '|' || descr[0] == '>'))) return d.dtype;
  }
  if (!descr.empty() && descr[0] == '>') {
    return InvalidArgumentError(name + ": dtype '" + descr +
                                "' is big-endian; only little-endian arrays are supported (save it with "
                                "arr.astype(arr.dtype.newbyteorder('<')))");
  }
  return InvalidArgumentError(name + ": dtype '" + descr +
                              "' is not supported (images: uint8 or float32; labels: an integer dtype)");
}

// The header's text and where the data starts, after the magic and version.
StatusOr<std::string_view> HeaderText(const std::string& name, std::span<const uint8_t> bytes, size_t* data_at) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    return InvalidArgumentError(name + ": not a .npy array (no \\x93NUMPY magic" +
                                (bytes.size() < 10 ? ", only " + std::to_string(bytes.size()) + " bytes" : "") + ")");
  }
  const int major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    return InvalidArgumentError(name + ": .npy format version " + std::to_string(major) + "." +
                                std::to_string(minor) + " is not supported (1.0, 2.0 or 3.0)");
  }
  size_t len = 0, at = 0;
  if (major == 1) {
    len = size_t{bytes[8]} | (size_t{bytes[9]} << 8);
    at = 10;
  } else {
    if (bytes.size() < 12) return InvalidArgumentError(name + ": truncated .npy header");
    len = size_t{bytes[8]} | (size_t{bytes[9]} << 8) | (size_t{bytes[10]} << 16) | (size_t{bytes[11]} << 24);
    at = 12;
  }
  if (len > kMaxHeaderBytes || bytes.size() < at + len) {
    return InvalidArgumentError(name + ": truncated .npy header (" + std::to_string(len) + " bytes promised, " +
                                std::to_string(bytes.size() - at) + " there)");
  }
  *data_at = at + len;
  return std::string_view(reinterpret_cast<const char*>(bytes.data()) + at, len);
}

}  // namespace

const char* NpyDtypeName(NpyDtype dtype) { return InfoOf(dtype).name; }
size_t NpyDtypeSize(NpyDtype dtype) { return InfoOf(dtype).size; }
bool NpyDtypeIsInteger(NpyDtype dtype) { return dtype != NpyDtype::kFloat32 && dtype != NpyDtype::kFloat64; }

StatusOr<NpyArray> NpyArray::Read(const std::string& path, bool populate) {
  MIRRORED_ASSIGN_OR_RETURN(std::shared_ptr<const ByteRegion> region, ByteRegion::MapFile(path, populate));
  const std::span<const uint8_t> bytes = region->bytes();
  return Parse(path, std::move(region), bytes);
}

StatusOr<NpyArray> NpyArray::Parse(const std::string& name, std::shared_ptr<const ByteRegion> region,
                                   std::span<const uint8_t> bytes) {
  size_t data_at = 0;
  MIRRORED_ASSIGN_OR_RETURN(std::string_view text, HeaderText(name, bytes, &data_at));
  Header header;
  std::string why;
  if (!HeaderParser(text).Parse(&header, &why)) {
    return InvalidArgumentError(name + ": malformed .npy header: " + why);
  }
  if (*header.fortran_order) {
    return InvalidArgumentError(name + ": fortran_order is True; only C-order arrays are supported (save "
                                       "np.ascontiguousarray(arr) instead)");
  }
  NpyArray a;
  a.name_ = name;
  MIRRORED_ASSIGN_OR_RETURN(a.dtype_, ParseDescr(name, *header.descr));
  a.shape_ = std::move(*header.shape);
  size_t values = 1;
  for (size_t d : a.shape_) {
    if (d != 0 && values > std::numeric_limits<size_t>::max() / 16 / d) {
      return InvalidArgumentError(name + ": shape " + a.ShapeString() + " is too large");
    }
    values *= d;
  }
  const size_t want = values * NpyDtypeSize(a.dtype_);
  const size_t have = bytes.size() - data_at;
  if (have < want) {
    return InvalidArgumentError(name + ": truncated: shape " + a.ShapeString() + " of " + NpyDtypeName(a.dtype_) +
                                " needs " + std::to_string(want) + " bytes of data, the file holds " +
                                std::to_string(have));
  }
  if (have > want) {
    return InvalidArgumentError(name + ": " + std::to_string(have - want) + " unexpected bytes after the " +
                                std::to_string(want) + " bytes of shape " + a.ShapeString());
  }
  a.data_ = bytes.subspan(data_at, want);
  a.region_ = std::move(region);
  return a;
}

size_t NpyArray::count() const {
  size_t n = 1;
  for (size_t d : shape_) n *= d;
  return n;
}

int64_t NpyArray::Int64At(size_t i) const {
  const uint8_t* p = data_.data() + i * NpyDtypeSize(dtype_);
  auto load = [p]<typename T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  };
  switch (dtype_) {
    case NpyDtype::kUint8: return load(uint8_t{});
    case NpyDtype::kInt8: return load(int8_t{});
    case NpyDtype::kUint16: return load(uint16_t{});
    case NpyDtype::kInt16: return load(int16_t{});
    case NpyDtype::kUint32: return load(uint32_t{});
    case NpyDtype::kInt32: return load(int32_t{});
    case NpyDtype::kInt64: return load(int64_t{});
    case NpyDtype::kUint64: {
      const uint64_t v = load(uint64_t{});
      return v > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max() : int64_t(v);
    }
    default: return 0;
  }
}

std::string NpyArray::ShapeString() const {
  std::string s = "(";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + (shape_.size() == 1 ? ",)" : ")");
}

}  // namespace mirrored::data
