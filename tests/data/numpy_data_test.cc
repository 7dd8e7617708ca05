// NumPy input: .npy headers (every version, every refusal with its
// message), .npz archives read in place, and the image sets built from them
// (shapes, classes, scaling, every mismatch exit 2 naming file and member).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/data/npy_test_util.h"
#include "worker/data/npy_array.h"
#include "worker/data/npz_archive.h"
#include "worker/data/numpy_data.h"
#include "worker/data/training_data.h"

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

StatusOr<NpyArray> ParseBytes(const Bytes& b) {
  auto region = ByteRegion::Own(b);
  return NpyArray::Parse("a.npy", region, region->bytes());
}

class NumpyDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("numpy_data_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // train: 20 examples, test: 8; 12x10x3, 4 classes.
  std::vector<ZipMember> Members() const {
    SyntheticSplit train = Synthetic(20, 12, 10, 3, 4), test = Synthetic(8, 12, 10, 3, 4, 1);
    return {{"x_train.npy", train.x}, {"y_train.npy", train.y}, {"x_test.npy", test.x}, {"y_test.npy", test.y}};
  }
  std::string WriteNpz(const std::vector<ZipMember>& members, const std::string& name = "d.npz") const {
    WriteBytes(dir_ / name, Zip(members));
    return (dir_ / name).string();
  }
  // Members() with `member` replaced by `bytes`.
  std::string NpzWith(const std::string& member, const Bytes& bytes) const {
    auto m = Members();
    for (auto& z : m) {
      if (z.name == member) z.data = bytes;
    }
    return WriteNpz(m);
  }
  std::string LoadError(const std::string& path) const {
    auto d = TrainingData::Load(path);
    EXPECT_FALSE(d.ok());
    if (!d.ok()) {
      EXPECT_EQ(ExitCodeFor(d.status()), 2) << d.status().message();
    }
    return d.ok() ? "" : d.status().message();
  }

  fs::path dir_;
};

TEST(NpyArrayTest, ReadsEachVersionAndDtype) {
  for (int major : {1, 2, 3}) {
    auto a = ParseBytes(Npy<float>("<f4", {2, 3}, {1, 2, 3, 4, 5, 6.5f}, major));
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(a->dtype(), NpyDtype::kFloat32);
    EXPECT_EQ(a->shape(), (std::vector<size_t>{2, 3}));
    float last;
    std::memcpy(&last, a->data().data() + 20, 4);
    EXPECT_EQ(last, 6.5f);
  }
  auto y = ParseBytes(Npy<int64_t>("<i8", {3, 1}, {4, 0, 9}));
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->Int64At(2), 9);
  auto u = ParseBytes(Npy<uint8_t>("|u1", {4}, {1, 2, 3, 255}));
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->Int64At(3), 255);
  EXPECT_EQ(u->ShapeString(), "(4,)");
  // Python 2's long integers in the shape, double quotes, no trailing comma.
  auto py2 = ParseBytes(NpyWithHeader("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2L,)}",
                                      RawBytes(std::vector<int32_t>{-1, 7})));
  ASSERT_TRUE(py2.ok()) << py2.status().message();
  EXPECT_EQ(py2->Int64At(0), -1);
}

TEST(NpyArrayTest, RefusesMalformedArraysNamingTheProblem) {
  const Bytes good = Npy<float>("<f4", {2}, {1, 2});
  struct Case {
    Bytes bytes;
    std::string message;
  };
  Bytes bad_magic = good;
  bad_magic[1] = 'X';
  Bytes version = good;
  version[6] = 4;
  Bytes truncated_header(good.begin(), good.begin() + 30);
  Bytes truncated_data(good.begin(), good.end() - 1);
  Bytes trailing = good;
  trailing.push_back(0);
  const std::vector<Case> cases = {
      {bad_magic, "a.npy: not a .npy array (no \\x93NUMPY magic)"},
      {version, "a.npy: .npy format version 4.0 is not supported"},
      {truncated_header, "a.npy: truncated .npy header"},
      {truncated_data, "a.npy: truncated: shape (2,) of float32 needs 8 bytes of data, the file holds 7"},
      {trailing, "a.npy: 1 unexpected bytes after the 8 bytes of shape (2,)"},
      {Npy<float>(">f4", {2}, {1, 2}), "a.npy: dtype '>f4' is big-endian"},
      {Npy<float>("<c8", {1}, {1, 2}), "a.npy: dtype '<c8' is not supported"},
      {NpyWithHeader("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", RawBytes(std::vector<float>{1, 2})),
       "a.npy: fortran_order is True; only C-order arrays are supported"},
      {NpyWithHeader("{'descr': '<f4', 'shape': (2,), }", RawBytes(std::vector<float>{1, 2})),
       "a.npy: malformed .npy header: the dict lacks one of 'descr', 'fortran_order', 'shape'"},
      {NpyWithHeader("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", {}),
       "a.npy: malformed .npy header: structured dtype"},
      {NpyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", {}),
       "'shape' is not a tuple of non-negative integers"},
      {NpyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", {}),
       "unexpected key 'x'"},
      {Bytes{0x93, 'N'}, "a.npy: not a .npy array (no \\x93NUMPY magic, only 2 bytes)"},
  };
  for (const Case& c : cases) {
    auto a = ParseBytes(c.bytes);
    ASSERT_FALSE(a.ok()) << c.message;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(a.status().message(), HasSubstr(c.message));
  }
}

TEST_F(NumpyDataTest, ArchiveMembersAreViewsIntoTheMappedFile) {
  const std::string path = WriteNpz(Members());
  auto z = NpzArchive::Open(path);
  ASSERT_TRUE(z.ok()) << z.status().message();
  EXPECT_EQ(z->names(), (std::vector<std::string>{"x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy"}));
  auto x = z->Member("x_train", /*verify_crc=*/true);
  ASSERT_TRUE(x.ok()) << x.status().message();
  EXPECT_TRUE(x->region()->mapped());
  EXPECT_EQ(x->ShapeString(), "(20, 12, 10, 3)");
  EXPECT_GE(x->data().data(), x->region()->bytes().data());
  EXPECT_LE(x->data().data() + x->data().size(), x->region()->bytes().data() + x->region()->bytes().size());
}

TEST_F(NumpyDataTest, RefusesDamagedOrCompressedArchives) {
  auto m = Members();
  m[0].deflate = true;
  EXPECT_THAT(LoadError(WriteNpz(m)),
              HasSubstr("d.npz, member x_train.npy: compressed (np.savez_compressed); mirrored maps .npz members "
                        "in place, so save with np.savez"));
  Bytes whole = Zip(Members());
  WriteBytes(dir_ / "cut.npz", Bytes(whole.begin(), whole.begin() + long(whole.size() / 2)));
  EXPECT_THAT(LoadError((dir_ / "cut.npz").string()), HasSubstr("cut.npz: not an .npz file (no zip end-of-directory"));
  // A byte of x_train's pixels changed: the member's CRC-32 finds it.
  Bytes flipped = whole;
  flipped[200] ^= 0xff;
  WriteBytes(dir_ / "flipped.npz", flipped);
  EXPECT_THAT(LoadError((dir_ / "flipped.npz").string()),
              HasSubstr("flipped.npz, member x_train.npy: CRC-32 mismatch"));
  auto three = Members();
  three.pop_back();
  EXPECT_THAT(LoadError(WriteNpz(three)),
              HasSubstr("d.npz: no member y_test.npy (it holds: x_train.npy, y_train.npy, x_test.npy)"));
  EXPECT_EQ(TrainingData::Load((dir_ / "missing.npz").string()).status().code(), StatusCode::kNotFound);
}

TEST_F(NumpyDataTest, LoadsAnNpzWithShapeClassesAndScaledPixels) {
  auto d = TrainingData::Load(WriteNpz(Members()));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->shape().ImageString(), "12x10x3");
  EXPECT_EQ(d->shape().classes, 4);
  EXPECT_EQ(d->train().size(), 20u);
  EXPECT_EQ(d->test().size(), 8u);
  EXPECT_EQ(d->train().example_size(), 360u);
  EXPECT_EQ(d->train().label(7), 3);
  EXPECT_FLOAT_EQ(d->train().pixel(1, 0), float((60 + 1) % 256) / 255.0f);
  auto test_only = TrainingData::LoadTest(WriteNpz(Members(), "e.npz"));
  ASSERT_TRUE(test_only.ok()) << test_only.status().message();
  EXPECT_EQ(test_only->train().size(), 0u);
  EXPECT_EQ(test_only->shape().classes, 4);
  auto checked = TrainingData::CheckFiles((dir_ / "d.npz").string());
  ASSERT_TRUE(checked.ok());
  EXPECT_EQ(checked->ImageString(), "12x10x3");
}

TEST_F(NumpyDataTest, LoadsADirectoryOfNpyFilesWithFloatImagesAndNx1Labels) {
  const std::vector<float> x = {0.5f, -2.0f, 3.25f, 1.0f, 0, 0, 7, 8};  // 4 x 2 x 1 (3-d: one channel)
  const std::vector<uint8_t> y = {0, 2, 1, 2};
  for (const char* split : {"train", "test"}) {
    WriteBytes(dir_ / ("x_" + std::string(split) + ".npy"), Npy<float>("<f4", {4, 2, 1}, x));
    WriteBytes(dir_ / ("y_" + std::string(split) + ".npy"), Npy<uint8_t>("|u1", {4, 1}, y));
  }
  auto d = TrainingData::Load(dir_.string());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->shape().ImageString(), "2x1x1");
  EXPECT_EQ(d->shape().classes, 3);
  EXPECT_EQ(d->train().pixel(1, 0), 3.25f);  // as they are, not scaled
  std::vector<float> images(4);
  std::vector<int32_t> labels(2);
  std::vector<uint32_t> idx = {3, 0};
  d->test().Gather(idx, images.data(), labels.data());
  EXPECT_EQ(images, (std::vector<float>{7, 8, 0.5f, -2.0f}));
  EXPECT_EQ(labels, (std::vector<int32_t>{2, 0}));
  EXPECT_THAT(LoadError((dir_ / "x_train.npy").string()), HasSubstr("one .npy file; pass the directory"));
  fs::remove(dir_ / "y_test.npy");
  EXPECT_THAT(TrainingData::Load(dir_.string()).status().message(), HasSubstr("y_test.npy: no such file"));
}

TEST_F(NumpyDataTest, RefusesMismatchesNamingFileAndMember) {
  SyntheticSplit other = Synthetic(8, 12, 9, 3, 4);
  const Bytes x_train = Synthetic(20, 12, 10, 3, 4).x;
  struct Case {
    std::string member;
    Bytes bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"y_train.npy", Npy<int64_t>("<i8", {19}, std::vector<int64_t>(19, 1)),
       "d.npz, member x_train.npy holds 20 images but member y_train.npy holds 19 labels"},
      {"y_train.npy", Npy<int32_t>("<i4", {20}, [] { std::vector<int32_t> v(20, 1); v[5] = -3; return v; }()),
       "d.npz, member y_train.npy: label -3 at index 5 is negative"},
      {"y_test.npy", Npy<int64_t>("<i8", {8}, {0, 1, 2, 3, 4, 0, 1, 2}),
       "d.npz, member y_test.npy: label 4 at index 4 is not a class of the training labels (0 to 3)"},
      {"y_train.npy", Npy<float>("<f4", {20}, std::vector<float>(20, 1)),
       "d.npz, member y_train.npy: dtype float32 is not supported for labels"},
      {"y_train.npy", Npy<int64_t>("<i8", {20, 4}, std::vector<int64_t>(80, 0)),
       "d.npz, member y_train.npy: shape (20, 4) is not one label per example"},
      {"x_train.npy", Npy<int64_t>("<i8", {20, 2, 2}, std::vector<int64_t>(80, 0)),
       "d.npz, member x_train.npy: dtype int64 is not supported for images: use uint8"},
      {"x_train.npy", Npy<uint8_t>("|u1", {20, 6}, std::vector<uint8_t>(120, 0)),
       "d.npz, member x_train.npy: shape (20, 6) is not a set of images"},
      {"x_test.npy", other.x, "d.npz, member x_test.npy: images are 12x9x3, but member x_train.npy's are 12x10x3"},
      {"x_test.npy", Npy<float>("<f4", {8, 12, 10, 3}, std::vector<float>(8 * 360, 0)),
       "d.npz, member x_test.npy: dtype float32, but member x_train.npy's is uint8"},
      {"x_train.npy", NpyWithHeader("{'descr': '|u1', 'fortran_order': True, 'shape': (20, 12, 10, 3), }",
                                    Bytes(7200, 0)),
       "d.npz, member x_train.npy: fortran_order is True"},
      {"x_train.npy", Bytes(x_train.begin(), x_train.end() - 10),
       "d.npz, member x_train.npy: truncated: shape (20, 12, 10, 3) of uint8 needs 7200 bytes"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(LoadError(NpzWith(c.member, c.bytes)), HasSubstr(c.message)) << c.message;
  }
  // The header check finds the shape errors without reading the values.
  auto checked = TrainingData::CheckFiles(NpzWith("x_test.npy", other.x));
  ASSERT_FALSE(checked.ok());
  EXPECT_THAT(checked.status().message(), HasSubstr("images are 12x9x3"));
}

}  // namespace
}  // namespace mirrored::data
