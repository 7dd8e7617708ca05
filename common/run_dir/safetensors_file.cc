#include "common/run_dir/safetensors_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "common/json_depth.h"

namespace mirrored {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; mirrored writes host memory as is");

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the Python library's limit
constexpr std::string_view kMetadataKey = "__metadata__";

Status Corrupt(const std::string& file_name, const std::string& what) {
  return DataLossError(file_name + ": " + what);
}

bool ParseDType(std::string_view name, DType* dtype) {
  if (name == "F32")
    *dtype = DType::kF32;
  else if (name == "I64")
    *dtype = DType::kI64;
  else
    return false;
  return true;
}

// Byte size of a tensor, false on overflow.
bool ByteSize(const std::vector<int64_t>& shape, DType dtype, uint64_t* out) {
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *out = n;
  return true;
}

struct ParsedHeader {
  uint64_t data_start = 0;
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

// The header's JSON text, after its 8-byte length, checked against the
// file's size.
StatusOr<std::string_view> HeaderText(std::string_view prefix, uint64_t file_size, const std::string& file_name) {
  if (file_size < 8 || prefix.size() < 8) {
    return Corrupt(file_name, "file is " + std::to_string(file_size) +
                                  " bytes, shorter than the 8-byte header length");
  }
  uint64_t n = 0;
  std::memcpy(&n, prefix.data(), 8);
  if (n > kMaxHeaderBytes) {
    return Corrupt(file_name, "header length " + std::to_string(n) + " exceeds the limit of " +
                                  std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (n > file_size - 8) {
    return Corrupt(file_name, "header length " + std::to_string(n) + " runs past the end of the " +
                                  std::to_string(file_size) + "-byte file (truncated?)");
  }
  if (prefix.size() < 8 + n) return Corrupt(file_name, "header was not fully read");
  return prefix.substr(8, n);
}

// The "__metadata__" entry (null: none) into `metadata`.
Status ParseMetadata(const nlohmann::json& entry, const std::string& file_name,
                     std::map<std::string, std::string>* metadata) {
  if (entry.is_null()) return OkStatus();
  if (!entry.is_object()) return Corrupt(file_name, "__metadata__ is not an object");
  for (auto& [k, v] : entry.items()) {
    if (!v.is_string()) return Corrupt(file_name, "__metadata__." + k + " is not a string");
    (*metadata)[k] = v.get<std::string>();
  }
  return OkStatus();
}

// A tensor's "dtype" and "shape" into `info`.
Status ParseDTypeAndShape(const nlohmann::json& entry, const std::string& where, const std::string& file_name,
                          TensorInfo* info) {
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return Corrupt(file_name, where + "missing or non-string \"dtype\"");
  }
  const std::string dtype_name = dtype_it->get<std::string>();
  if (!ParseDType(dtype_name, &info->dtype)) {
    return Corrupt(file_name, where + "unsupported dtype \"" + dtype_name + "\" (F32, I64 only)");
  }
  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return Corrupt(file_name, where + "missing or non-array \"shape\"");
  }
  for (const auto& d : *shape_it) {
    if (!d.is_number_unsigned()) {
      return Corrupt(file_name,
                     where + "shape has a dimension that is not a non-negative integer");
    }
    info->shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  return OkStatus();
}

// A tensor's "data_offsets" into `info`: [begin, end] spanning its shape
// and dtype, inside the `data_size`-byte data section.
Status ParseDataOffsets(const nlohmann::json& entry, uint64_t data_size, const std::string& where,
                        const std::string& file_name, TensorInfo* info) {
  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    return Corrupt(file_name, where + "\"data_offsets\" is not [begin, end]");
  }
  info->begin = (*offsets_it)[0].get<uint64_t>();
  info->end = (*offsets_it)[1].get<uint64_t>();
  uint64_t bytes = 0;
  if (!ByteSize(info->shape, info->dtype, &bytes)) {
    return Corrupt(file_name, where + "shape overflows 64 bits");
  }
  if (info->end < info->begin || info->end - info->begin != bytes) {
    return Corrupt(file_name, where + "data_offsets [" + std::to_string(info->begin) + ", " +
                                  std::to_string(info->end) + "] do not span shape x " +
                                  std::string(DTypeName(info->dtype)) + " = " + std::to_string(bytes) + " bytes");
  }
  if (info->end > data_size) {
    return Corrupt(file_name, where + "data ends at " + std::to_string(info->end) + " past the " +
                                  std::to_string(data_size) + "-byte data section (truncated?)");
  }
  return OkStatus();
}

// One tensor's entry of the header.
StatusOr<TensorInfo> ParseTensorEntry(const std::string& name, const nlohmann::json& entry, uint64_t data_size,
                                      const std::string& file_name) {
  const std::string where = "tensor \"" + name + "\": ";
  if (!entry.is_object()) return Corrupt(file_name, where + "entry is not an object");
  TensorInfo info;
  info.name = name;
  MIRRORED_RETURN_IF_ERROR(ParseDTypeAndShape(entry, where, file_name, &info));
  MIRRORED_RETURN_IF_ERROR(ParseDataOffsets(entry, data_size, where, file_name, &info));
  return info;
}

// The tensors must tile the data section: no overlap, no gap, no tail.
Status CheckTensorsTileData(const std::vector<TensorInfo>& tensors, uint64_t data_size,
                            const std::string& file_name) {
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  for (const TensorInfo* t : by_offset) {
    if (t->begin != expected) {
      return Corrupt(file_name, "tensor \"" + t->name + "\" starts at " + std::to_string(t->begin) +
                                    ", expected " + std::to_string(expected) +
                                    (t->begin < expected ? " (overlaps the previous tensor)"
                                                         : " (gap before it)"));
    }
    expected = t->end;
  }
  if (expected != data_size) {
    return Corrupt(file_name, "data section is " + std::to_string(data_size) +
                                  " bytes but the tensors cover " + std::to_string(expected));
  }
  return OkStatus();
}

StatusOr<ParsedHeader> ParseHeader(std::string_view prefix, uint64_t file_size,
                                   const std::string& file_name) {
  MIRRORED_ASSIGN_OR_RETURN(std::string_view text, HeaderText(prefix, file_size, file_name));
  if (auto at = JsonNestingPastLimit(text)) return Corrupt(file_name, "header " + JsonTooDeepMessage(*at));
  nlohmann::json header = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    return Corrupt(file_name, "header is not a JSON object");
  }
  ParsedHeader out;
  out.data_start = 8 + text.size();
  const uint64_t data_size = file_size - out.data_start;
  for (auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      MIRRORED_RETURN_IF_ERROR(ParseMetadata(entry, file_name, &out.metadata));
      continue;
    }
    MIRRORED_ASSIGN_OR_RETURN(TensorInfo info, ParseTensorEntry(name, entry, data_size, file_name));
    out.tensors.push_back(std::move(info));
  }
  MIRRORED_RETURN_IF_ERROR(CheckTensorsTileData(out.tensors, data_size, file_name));
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return out;
}

}  // namespace

std::string_view DTypeName(DType dtype) { return dtype == DType::kF32 ? "F32" : "I64"; }
size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 8; }

int64_t ElementCount(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

StatusOr<SafetensorsFile::Encoded> SafetensorsFile::Encode(
    const std::vector<TensorView>& tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorView*> sorted;
  for (const TensorView& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorView* a, const TensorView* b) { return a->name < b->name; });
  nlohmann::json header = nlohmann::json::object();
  Encoded out;
  uint64_t offset = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const TensorView& t = *sorted[i];
    if (t.name.empty() || t.name == kMetadataKey) {
      return InvalidArgumentError("safetensors: invalid tensor name \"" + t.name + "\"");
    }
    if (i > 0 && sorted[i - 1]->name == t.name) {
      return InvalidArgumentError("safetensors: tensor name \"" + t.name + "\" appears twice");
    }
    uint64_t bytes = 0;
    if (!ByteSize(t.shape, t.dtype, &bytes)) {
      return InvalidArgumentError("safetensors: tensor \"" + t.name +
                                  "\" has a negative or overflowing shape");
    }
    if (bytes > 0 && t.data == nullptr) {
      return InvalidArgumentError("safetensors: tensor \"" + t.name + "\" has no data");
    }
    header[t.name] = {{"dtype", std::string(DTypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    out.pieces.emplace_back(static_cast<const char*>(t.data), bytes);
    offset += bytes;
  }
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t n = json.size();
  out.header.resize(8);
  std::memcpy(out.header.data(), &n, 8);
  out.header += json;
  out.total_size = out.header.size() + offset;
  return out;
}

StatusOr<std::string> SafetensorsFile::Serialize(
    const std::vector<TensorView>& tensors, const std::map<std::string, std::string>& metadata) {
  MIRRORED_ASSIGN_OR_RETURN(Encoded enc, Encode(tensors, metadata));
  std::string out = std::move(enc.header);
  out.reserve(enc.total_size);
  for (std::string_view piece : enc.pieces) out.append(piece);
  return out;
}

StatusOr<SafetensorsFile> SafetensorsFile::Parse(std::string bytes, std::string file_name) {
  MIRRORED_ASSIGN_OR_RETURN(ParsedHeader parsed, ParseHeader(bytes, bytes.size(), file_name));
  SafetensorsFile file;
  file.file_name_ = std::move(file_name);
  file.bytes_ = std::move(bytes);
  file.data_start_ = parsed.data_start;
  file.tensors_ = std::move(parsed.tensors);
  file.metadata_ = std::move(parsed.metadata);
  return file;
}

Status SafetensorsFile::ValidateHeader(std::string_view prefix, uint64_t file_size,
                                       const std::string& file_name) {
  return ParseHeader(prefix, file_size, file_name).status();
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Status SafetensorsFile::CopyRaw(std::string_view name, DType dtype, void* dst,
                                int64_t count) const {
  const TensorInfo* t = Find(name);
  if (t == nullptr) {
    return NotFoundError(file_name_ + ": no tensor \"" + std::string(name) + "\"");
  }
  if (t->dtype != dtype) {
    return InvalidArgumentError(file_name_ + ": tensor \"" + t->name + "\" is " +
                                std::string(DTypeName(t->dtype)) + ", expected " +
                                std::string(DTypeName(dtype)));
  }
  if (ElementCount(t->shape) != count) {
    return InvalidArgumentError(file_name_ + ": tensor \"" + t->name + "\" has " +
                                std::to_string(ElementCount(t->shape)) + " elements, expected " +
                                std::to_string(count));
  }
  if (t->end > t->begin) {
    std::memcpy(dst, bytes_.data() + data_start_ + t->begin, t->end - t->begin);
  }
  return OkStatus();
}

Status SafetensorsFile::CopyF32(std::string_view name, float* dst, int64_t count) const {
  return CopyRaw(name, DType::kF32, dst, count);
}

Status SafetensorsFile::CopyI64(std::string_view name, int64_t* dst, int64_t count) const {
  return CopyRaw(name, DType::kI64, dst, count);
}

StatusOr<std::vector<float>> SafetensorsFile::ReadF32(std::string_view name) const {
  const TensorInfo* t = Find(name);
  std::vector<float> out(t != nullptr ? static_cast<size_t>(ElementCount(t->shape)) : 0);
  MIRRORED_RETURN_IF_ERROR(
      CopyRaw(name, DType::kF32, out.data(), static_cast<int64_t>(out.size())));
  return out;
}

StatusOr<std::vector<int64_t>> SafetensorsFile::ReadI64(std::string_view name) const {
  const TensorInfo* t = Find(name);
  std::vector<int64_t> out(t != nullptr ? static_cast<size_t>(ElementCount(t->shape)) : 0);
  MIRRORED_RETURN_IF_ERROR(
      CopyRaw(name, DType::kI64, out.data(), static_cast<int64_t>(out.size())));
  return out;
}

}  // namespace mirrored
