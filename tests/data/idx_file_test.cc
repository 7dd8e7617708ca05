// Bad and good IDX / Fashion-MNIST files: every problem is a clear error
// naming the file (exit code 2), never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "worker/data/fashion_mnist.h"
#include "worker/data/idx_file.h"
#include "tests/data/idx_test_util.h"

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;

class IdxFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mirrored_idx_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return p;
  }
  // A valid pair: n images 28x28 and n labels.
  void WriteSplit(const std::string& prefix, uint32_t n_images, uint32_t n_labels) {
    auto img = Header(0x803, {n_images, 28, 28});
    for (uint32_t i = 0; i < n_images * 784; ++i) img.push_back(uint8_t(i % 256));
    auto lab = Header(0x801, {n_labels});
    for (uint32_t i = 0; i < n_labels; ++i) lab.push_back(uint8_t(i % 10));
    Write(prefix + "-images-idx3-ubyte.gz", Gzip(img));
    Write(prefix + "-labels-idx1-ubyte.gz", Gzip(lab));
  }
  fs::path dir_;
};

void ExpectUsageError(const Status& s, const std::string& file, const std::string& problem) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(ExitCodeFor(s), 2) << s;
  EXPECT_NE(s.message().find(file), std::string::npos) << s;
  EXPECT_NE(s.message().find(problem), std::string::npos) << s;
}

TEST_F(IdxFileTest, ReadsGzippedAndPlain) {
  auto bytes = Header(0x801, {3});
  bytes.insert(bytes.end(), {7, 8, 9});
  for (const auto& [name, data] : {std::pair{std::string("a.gz"), Gzip(bytes)}, std::pair{std::string("a"), bytes}}) {
    auto f = IdxFile::Read(Write(name, data));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->dims(), std::vector<uint32_t>{3});
    EXPECT_EQ(std::vector<uint8_t>(f->data().begin(), f->data().end()), (std::vector<uint8_t>{7, 8, 9}));
  }
}

TEST_F(IdxFileTest, MissingFileIsNotFound) {
  auto f = IdxFile::Read((dir_ / "nope.gz").string());
  ExpectUsageError(f.status(), "nope.gz", "no such file");
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
}

TEST_F(IdxFileTest, WrongMagic) {
  auto bytes = Header(0x0d03, {1, 1, 1});
  bytes.push_back(0);
  ExpectUsageError(IdxFile::Read(Write("m.gz", Gzip(bytes))).status(), "m.gz", "wrong magic number 0x00000d03");
}

TEST_F(IdxFileTest, TruncatedPayload) {
  auto bytes = Header(0x803, {2, 28, 28});
  bytes.resize(bytes.size() + 784);  // one image of two
  ExpectUsageError(IdxFile::Read(Write("t.gz", Gzip(bytes))).status(), "t.gz", "truncated");
}

TEST_F(IdxFileTest, TruncatedGzipStream) {
  auto bytes = Header(0x803, {2, 28, 28});
  bytes.resize(bytes.size() + 2 * 784, 3);
  auto gz = Gzip(bytes);
  gz.resize(gz.size() / 2);
  ExpectUsageError(IdxFile::Read(Write("tg.gz", gz)).status(), "tg.gz", "truncated");
}

TEST_F(IdxFileTest, CorruptGzipStream) {
  auto bytes = Header(0x801, {4000});
  bytes.resize(bytes.size() + 4000, 1);
  auto gz = Gzip(bytes);
  for (size_t i = 12; i < gz.size() - 8; ++i) gz[i] ^= 0x5a;
  ExpectUsageError(IdxFile::Read(Write("c.gz", gz)).status(), "c.gz", "corrupt gzip");
}

// A gzip bomb: a header promising 16 values, 64 MiB of zeros after them
// (64 KiB compressed), and a trailer forged to the promised length, as a
// stream of 4 GiB + 24 bytes would carry. Read stops one byte past the
// promise instead of inflating the rest into memory.
TEST_F(IdxFileTest, GzipInflatingPastItsHeaderIsRefusedAtThePromisedSize) {
  auto bytes = Header(0x801, {16});
  bytes.resize(bytes.size() + 16 + (size_t{64} << 20), 0);
  auto gz = Gzip(bytes);
  const uint32_t promised = 8 + 16;
  for (int i = 0; i < 4; ++i) gz[gz.size() - 4 + i] = uint8_t(promised >> (8 * i));
  const std::string path = Write("bomb.gz", gz);
  ASSERT_TRUE(IdxFile::ReadHeader(path).ok());  // the header and the trailer agree
  ExpectUsageError(IdxFile::Read(path).status(), "bomb.gz", "decompresses to more than the 24 bytes its IDX header promises");
  auto size = IdxFile::DecompressedSize(path);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, promised);
}

TEST_F(IdxFileTest, SetsOverTheValueCapNameTheCap) {
  auto bytes = Header(0x803, {1048577, 32, 32});
  ExpectUsageError(IdxFile::ReadHeader(Write("big", bytes)).status(), "big",
                   "dimension 2 = 32 makes the set more than 2^30 values");
  ExpectUsageError(IdxFile::ReadHeader(Write("zero", Header(0x803, {4, 0, 2}))).status(), "zero", "dimension 1 is 0");
}

TEST_F(IdxFileTest, TrailingBytesAndEmptyFile) {
  auto bytes = Header(0x801, {1});
  bytes.insert(bytes.end(), {1, 2});
  ExpectUsageError(IdxFile::Read(Write("x", bytes)).status(), "x", "unexpected bytes");
  ExpectUsageError(IdxFile::Read(Write("empty", {})).status(), "empty", "too short");
}

TEST_F(IdxFileTest, MismatchedCountsNameBothFiles) {
  WriteSplit("train", 5, 4);
  auto s = FashionMnist::LoadSplit((dir_ / "train-images-idx3-ubyte.gz").string(),
                                   (dir_ / "train-labels-idx1-ubyte.gz").string());
  ExpectUsageError(s.status(), "train-images-idx3-ubyte.gz", "5 images");
  EXPECT_NE(s.status().message().find("train-labels-idx1-ubyte.gz holds 4 labels"), std::string::npos);
}

TEST_F(IdxFileTest, LabelsOutOfRangeAndSwappedFiles) {
  WriteSplit("a", 2, 2);
  auto lab = Header(0x801, {2});
  lab.insert(lab.end(), {1, 12});
  Write("bad-labels.gz", Gzip(lab));
  auto s = FashionMnist::LoadSplit((dir_ / "a-images-idx3-ubyte.gz").string(), (dir_ / "bad-labels.gz").string());
  ExpectUsageError(s.status(), "bad-labels.gz", "label 12 at index 1");
  auto swapped = FashionMnist::LoadSplit((dir_ / "a-labels-idx1-ubyte.gz").string(),
                                         (dir_ / "a-images-idx3-ubyte.gz").string());
  ExpectUsageError(swapped.status(), "a-labels-idx1-ubyte.gz", "expected an image file");
}

TEST_F(IdxFileTest, LoadsDirectoryAndScalesPixels) {
  WriteSplit("train", 6, 6);
  WriteSplit("t10k", 3, 3);
  auto ds = FashionMnist::Load(dir_.string());
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->train().size(), 6u);
  EXPECT_EQ(ds->test().size(), 3u);
  EXPECT_FLOAT_EQ(ds->train().pixel(0, 255), 1.0f);
  EXPECT_FLOAT_EQ(ds->train().pixel(0, 0), 0.0f);
  EXPECT_FLOAT_EQ(ds->train().pixel(1, 1), float((784 + 1) % 256) / 255.0f);
  EXPECT_EQ(ds->test().label(2), 2);
  fs::remove(dir_ / "t10k-labels-idx1-ubyte.gz");
  ExpectUsageError(FashionMnist::Load(dir_.string()).status(), "t10k-labels-idx1-ubyte.gz", "no such file");
}

// The check a task makes before it joins a job: the files Load needs are
// there and readable (not their contents), each missing one named.
TEST_F(IdxFileTest, CheckFilesNamesTheFirstMissingOne) {
  WriteSplit("train", 6, 6);
  EXPECT_TRUE(FashionMnist::CheckFiles(dir_.string(), /*with_test=*/false).ok());
  ExpectUsageError(FashionMnist::CheckFiles(dir_.string()), "t10k-images-idx3-ubyte.gz", "no such file");
  WriteSplit("t10k", 3, 3);
  EXPECT_TRUE(FashionMnist::CheckFiles(dir_.string()).ok());
  ExpectUsageError(FashionMnist::CheckFiles((dir_ / "nope").string()), "nope/train-images-idx3-ubyte.gz",
                   "no such file");
}

// An evaluator reads the test split only: the training files need not be
// there (nor be read: 60,000 images an evaluator never uses).
TEST_F(IdxFileTest, TheTestSplitAloneLoadsWithoutTheTrainingFiles) {
  ExpectUsageError(FashionMnist::CheckTestFiles(dir_.string()), "t10k-images-idx3-ubyte.gz", "no such file");
  WriteSplit("t10k", 3, 3);
  EXPECT_TRUE(FashionMnist::CheckTestFiles(dir_.string()).ok());
  auto ds = FashionMnist::LoadTest(dir_.string());
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->train().size(), 0u);
  EXPECT_EQ(ds->test().size(), 3u);
  EXPECT_EQ(ds->test().label(2), 2);
  ExpectUsageError(FashionMnist::CheckFiles(dir_.string()), "train-images-idx3-ubyte.gz", "no such file");
}

// The header check finds, from the header and the gzip length trailer alone,
// what Read finds in the whole file: a wrong magic number, a truncated file,
// trailing bytes (gzipped or plain). A damaged payload needs Read.
TEST_F(IdxFileTest, ReadHeaderFindsWrongAndTruncatedFilesWithoutReadingThem) {
  auto good = Header(0x803, {2, 28, 28});
  good.resize(good.size() + 2 * 784, 3);
  for (const auto& [name, data] : {std::pair{std::string("g.gz"), Gzip(good)}, std::pair{std::string("g"), good}}) {
    auto dims = IdxFile::ReadHeader(Write(name, data));
    ASSERT_TRUE(dims.ok()) << dims.status();
    EXPECT_EQ(*dims, (std::vector<uint32_t>{2, 28, 28}));
  }
  ExpectUsageError(IdxFile::ReadHeader((dir_ / "nope.gz").string()).status(), "nope.gz", "no such file");
  auto magic = Header(0x0d03, {1, 1, 1});
  magic.push_back(0);
  ExpectUsageError(IdxFile::ReadHeader(Write("m.gz", Gzip(magic))).status(), "m.gz", "wrong magic number 0x00000d03");
  auto one_of_two = Header(0x803, {2, 28, 28});
  one_of_two.resize(one_of_two.size() + 784, 3);
  ExpectUsageError(IdxFile::ReadHeader(Write("t.gz", Gzip(one_of_two))).status(), "t.gz",
                   "truncated or damaged (or not a single gzip stream): the header promises 1568 values (1584 "
                   "bytes), the gzip trailer says 800 bytes");
  ExpectUsageError(IdxFile::ReadHeader(Write("t", one_of_two)).status(), "t",
                   "truncated: header promises 1568 values, file holds 784");
  auto cut = Gzip(good);
  cut.resize(cut.size() / 2);
  ExpectUsageError(IdxFile::ReadHeader(Write("tg.gz", cut)).status(), "tg.gz", "truncated");
  auto trailing = good;
  trailing.push_back(1);
  ExpectUsageError(IdxFile::ReadHeader(Write("x", trailing)).status(), "x", "1 unexpected bytes after the 1568 values");
  ExpectUsageError(IdxFile::ReadHeader(Write("x.gz", Gzip(trailing))).status(), "x.gz", "the gzip trailer says 1585");
  ExpectUsageError(IdxFile::ReadHeader(Write("empty", {})).status(), "empty", "too short");
  // Bytes after the gzip stream (a second member, padding): both refuse the
  // file, so the check before joining and the load agree.
  auto padded = Gzip(good);
  padded.insert(padded.end(), 8, 0);
  ExpectUsageError(IdxFile::ReadHeader(Write("p.gz", padded)).status(), "p.gz", "not a single gzip stream");
  ExpectUsageError(IdxFile::Read((dir_ / "p.gz").string()).status(), "p.gz", "8 bytes after the gzip stream");
  ExpectUsageError(IdxFile::ReadHeader(dir_.string()).status(), dir_.string(), "not a regular file");
  ExpectUsageError(IdxFile::Read(dir_.string()).status(), dir_.string(), "not a regular file");
}

// Before joining, the files' headers are checked as a split: images and
// labels the right way round, the same count.
TEST_F(IdxFileTest, CheckFilesFindsSwappedMismatchedAndTruncatedFiles) {
  WriteSplit("train", 5, 4);
  ExpectUsageError(FashionMnist::CheckFiles(dir_.string(), /*with_test=*/false), "train-images-idx3-ubyte.gz",
                   "holds 5 images but");
  WriteSplit("train", 4, 4);
  ASSERT_TRUE(FashionMnist::CheckFiles(dir_.string(), /*with_test=*/false).ok());
  fs::rename(dir_ / "train-images-idx3-ubyte.gz", dir_ / "tmp");
  fs::rename(dir_ / "train-labels-idx1-ubyte.gz", dir_ / "train-images-idx3-ubyte.gz");
  fs::rename(dir_ / "tmp", dir_ / "train-labels-idx1-ubyte.gz");
  ExpectUsageError(FashionMnist::CheckFiles(dir_.string(), /*with_test=*/false), "train-images-idx3-ubyte.gz",
                   "expected an image file");
  WriteSplit("train", 4, 4);
  WriteSplit("t10k", 3, 3);
  const fs::path labels = dir_ / "t10k-labels-idx1-ubyte.gz";
  fs::resize_file(labels, fs::file_size(labels) - 5);
  ExpectUsageError(FashionMnist::CheckFiles(dir_.string()), "t10k-labels-idx1-ubyte.gz", "truncated or damaged");
}

TEST(FashionMnistInstalled, LoadsDebianPackage) {
  if (!fs::exists(std::string(FashionMnist::kDefaultDir) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  auto ds = FashionMnist::Load(FashionMnist::kDefaultDir);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_TRUE(FashionMnist::CheckFiles(FashionMnist::kDefaultDir).ok());
  EXPECT_EQ(ds->train().size(), 60000u);
  EXPECT_EQ(ds->test().size(), 10000u);
  EXPECT_EQ(ds->train().example_size(), 784u);
}

}  // namespace
}  // namespace mirrored::data
