#include "common/run_dir/safetensors_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace mirrored {
namespace {

const std::vector<float> kA = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
const std::vector<int64_t> kB = {-1, 1LL << 40};

std::string Sample() {
  auto bytes = SafetensorsFile::Serialize(
      {{"z_last", DType::kF32, {2, 3}, kA.data()}, {"a_first", DType::kI64, {2}, kB.data()}},
      {{"format", "mirrored"}});
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

uint64_t HeaderLength(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return n;
}

// Rebuilds a file with `header` JSON and the data section of `bytes`.
std::string WithHeader(const std::string& bytes, const std::string& header) {
  const std::string data = bytes.substr(8 + HeaderLength(bytes));
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

nlohmann::json HeaderJson(const std::string& bytes) {
  return nlohmann::json::parse(bytes.substr(8, HeaderLength(bytes)));
}

TEST(SafetensorsFileTest, LayoutFollowsTheFormat) {
  const std::string bytes = Sample();
  const uint64_t n = HeaderLength(bytes);
  EXPECT_EQ((8 + n) % 8, 0u) << "header padded to a multiple of 8";
  EXPECT_EQ(bytes.size(), 8 + n + 6 * 4 + 2 * 8);
  nlohmann::json h = HeaderJson(bytes);
  // Sorted by name: a_first's data comes first.
  EXPECT_EQ(h["a_first"]["data_offsets"], nlohmann::json({0, 16}));
  EXPECT_EQ(h["z_last"]["data_offsets"], nlohmann::json({16, 40}));
  EXPECT_EQ(h["z_last"]["dtype"], "F32");
  EXPECT_EQ(h["z_last"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(h["__metadata__"]["format"], "mirrored");
  float first;
  std::memcpy(&first, bytes.data() + 8 + n + 16, 4);
  EXPECT_EQ(first, 1.f);
}

TEST(SafetensorsFileTest, RoundTrip) {
  auto file = SafetensorsFile::Parse(Sample(), "x.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].name, "a_first");
  EXPECT_EQ(*file->ReadF32("z_last"), kA);
  EXPECT_EQ(*file->ReadI64("a_first"), kB);
  EXPECT_EQ(file->metadata().at("format"), "mirrored");
  float dst[6];
  EXPECT_EQ(file->CopyF32("z_last", dst, 5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(file->CopyF32("a_first", dst, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(file->CopyF32("nope", dst, 6).code(), StatusCode::kNotFound);
}

TEST(SafetensorsFileTest, EmptyAndScalarTensors) {
  const float scalar = 3.5f;
  auto bytes = SafetensorsFile::Serialize(
      {{"empty", DType::kF32, {0, 4}, nullptr}, {"scalar", DType::kF32, {}, &scalar}}, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto file = SafetensorsFile::Parse(*bytes, "s");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->ReadF32("empty")->empty());
  EXPECT_EQ(*file->ReadF32("scalar"), std::vector<float>{3.5f});
}

TEST(SafetensorsFileTest, EncodeRejectsBadTensors) {
  EXPECT_EQ(SafetensorsFile::Encode(
                {{"a", DType::kF32, {1}, kA.data()}, {"a", DType::kF32, {1}, kA.data()}}, {})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SafetensorsFile::Encode({{"", DType::kF32, {1}, kA.data()}}, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SafetensorsFile::Encode({{"a", DType::kF32, {-1}, kA.data()}}, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SafetensorsFile::Encode({{"a", DType::kF32, {2}, nullptr}}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

void ExpectDataLoss(const std::string& bytes, const std::string& needle) {
  auto file = SafetensorsFile::Parse(bytes, "bad.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kDataLoss) << file.status();
  EXPECT_NE(file.status().message().find("bad.safetensors"), std::string::npos) << file.status();
  EXPECT_NE(file.status().message().find(needle), std::string::npos) << file.status();
}

TEST(SafetensorsFileTest, RejectsTruncation) {
  const std::string bytes = Sample();
  ExpectDataLoss(bytes.substr(0, 5), "shorter than the 8-byte header length");
  ExpectDataLoss(bytes.substr(0, 20), "runs past the end");
  ExpectDataLoss(bytes.substr(0, bytes.size() - 1), "truncated");
  ExpectDataLoss(bytes + "x", "cover");
}

TEST(SafetensorsFileTest, RejectsHugeHeaderLength) {
  std::string bytes = Sample();
  const uint64_t huge = 1ULL << 40;
  std::memcpy(bytes.data(), &huge, 8);
  ExpectDataLoss(bytes, "exceeds the limit");
}

TEST(SafetensorsFileTest, RejectsBadJson) {
  std::string bytes = Sample();
  bytes[8] = '[';  // flipped header byte
  ExpectDataLoss(bytes, "not a JSON object");
  ExpectDataLoss(WithHeader(Sample(), "{\"a_first\": 3}"), "not an object");
}

TEST(SafetensorsFileTest, RejectsInconsistentEntries) {
  const std::string bytes = Sample();
  nlohmann::json h = HeaderJson(bytes);
  auto with = [&](auto edit) {
    nlohmann::json copy = h;
    edit(copy);
    return WithHeader(bytes, copy.dump());
  };
  ExpectDataLoss(with([](nlohmann::json& j) { j["z_last"]["dtype"] = "BF16"; }),
                 "unsupported dtype");
  ExpectDataLoss(with([](nlohmann::json& j) { j["z_last"]["shape"] = {2, 2}; }), "do not span");
  ExpectDataLoss(with([](nlohmann::json& j) { j["z_last"]["shape"] = {-2, 3}; }), "non-negative");
  ExpectDataLoss(with([](nlohmann::json& j) { j["z_last"].erase("dtype"); }), "dtype");
  ExpectDataLoss(with([](nlohmann::json& j) { j["z_last"]["data_offsets"] = {16}; }),
                 "data_offsets");
  ExpectDataLoss(with([](nlohmann::json& j) {
                   j["z_last"]["data_offsets"] = {8, 32};  // overlaps a_first
                 }),
                 "overlaps");
  ExpectDataLoss(with([](nlohmann::json& j) {
                   j["z_last"]["data_offsets"] = {24, 48};
                 }),
                 "past the");
  ExpectDataLoss(with([](nlohmann::json& j) { j["__metadata__"]["format"] = 1; }), "__metadata__");
}

TEST(SafetensorsFileTest, ValidateHeaderChecksAgainstFileSize) {
  const std::string bytes = Sample();
  const std::string prefix = bytes.substr(0, 8 + HeaderLength(bytes));
  EXPECT_TRUE(SafetensorsFile::ValidateHeader(prefix, bytes.size(), "f").ok());
  EXPECT_EQ(SafetensorsFile::ValidateHeader(prefix, bytes.size() - 4, "f").code(),
            StatusCode::kDataLoss);
}

}  // namespace
}  // namespace mirrored
