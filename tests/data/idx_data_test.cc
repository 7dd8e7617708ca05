// IDX files of any image shape (idx_data.h): 32x32x3 uint8 images in 7
// classes, 20x20 float32 ones, gzipped or plain, through TrainingData as
// --data takes them; and the files it refuses, each named.
#include "worker/data/idx_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/data/image_set_test_util.h"
#include "worker/data/idx_file.h"
#include "worker/data/training_data.h"

namespace mirrored::data {
namespace {

class IdxDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-idx-data-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void ExpectError(const Status& s, const std::string& file, const std::string& problem) {
    EXPECT_FALSE(s.ok()) << file << ": " << problem;
    EXPECT_EQ(ExitCodeFor(s), 2) << s;
    EXPECT_NE(s.message().find(file), std::string::npos) << s;
    EXPECT_NE(s.message().find(problem), std::string::npos) << s;
  }
  fs::path dir_;
};

TEST_F(IdxDataTest, LoadsColourImagesInSevenClasses) {
  WriteIdxSplit(dir_, "train", 32, 32, 3, 7, 30);
  WriteIdxSplit(dir_, "t10k", 32, 32, 3, 7, 9, /*float32=*/false, /*gzip=*/false);
  EXPECT_FALSE(IdxData::IsFashionMnistLayout(dir_.string()));
  auto d = TrainingData::Load(dir_.string());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape().ImageString(), "32x32x3");
  EXPECT_EQ(d->shape().classes, 7);
  EXPECT_EQ(d->train().size(), 30u);
  EXPECT_EQ(d->test().size(), 9u);
  EXPECT_FLOAT_EQ(d->train().pixel(5, 100), float(SyntheticPixel(5, 100)) / 255.0f);
  EXPECT_EQ(d->train().label(13), 6);
  auto shape = TrainingData::CheckFiles(dir_.string());
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->ImageString(), "32x32x3");
  auto test_only = TrainingData::LoadTest(dir_.string());
  ASSERT_TRUE(test_only.ok()) << test_only.status();
  EXPECT_EQ(test_only->train().size(), 0u);
  EXPECT_EQ(test_only->shape().classes, 7);
}

TEST_F(IdxDataTest, LoadsFloat32GreyImagesUnderTestNames) {
  WriteIdxSplit(dir_, "train", 20, 20, 1, 3, 12, /*float32=*/true);
  WriteIdxSplit(dir_, "test", 20, 20, 1, 3, 6, /*float32=*/true);
  auto d = TrainingData::Load(dir_.string());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape().ImageString(), "20x20x1");
  EXPECT_EQ(d->shape().classes, 3);
  std::vector<float> images(2 * 400);
  std::vector<int32_t> labels(2);
  const std::vector<uint32_t> idx = {4, 1};
  d->test().Gather(idx, images.data(), labels.data());
  EXPECT_FLOAT_EQ(images[7], float(SyntheticPixel(4, 7)) / 255.0f);
  EXPECT_FLOAT_EQ(images[400 + 399], float(SyntheticPixel(1, 399)) / 255.0f);
  EXPECT_EQ(labels[0], 1);
}

// Plain files are read in place: the workers of a machine share the pages.
TEST_F(IdxDataTest, PlainFilesAreMappedNotCopied) {
  WriteIdxSplit(dir_, "train", 20, 20, 1, 3, 6, /*float32=*/false, /*gzip=*/false);
  auto f = IdxFile::Read((dir_ / "train-images-idx3-ubyte").string());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->region()->mapped());
  EXPECT_EQ(f->dims(), (std::vector<uint32_t>{6, 20, 20}));
  EXPECT_EQ(f->data()[401], SyntheticPixel(1, 1));
}

TEST_F(IdxDataTest, FashionMnistLayoutKeepsItsReader) {
  WriteIdxSplit(dir_, "train", 28, 28, 1, 4, 8);
  EXPECT_TRUE(IdxData::IsFashionMnistLayout(dir_.string()));
  auto d = TrainingData::Load(dir_.string(), /*with_test=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape().classes, 10);  // Fashion-MNIST's, whatever the labels
  EXPECT_TRUE(IdxData::IsFashionMnistLayout((dir_ / "empty").string()));
}

TEST_F(IdxDataTest, RefusesWrongMagicTruncationAndLabelsOutOfRange) {
  WriteIdxSplit(dir_, "train", 32, 32, 3, 7, 10);
  WriteIdxSplit(dir_, "t10k", 32, 32, 3, 7, 4, false, true, /*label_offset=*/6);
  ExpectError(TrainingData::Load(dir_.string()).status(), "t10k-labels-idx1-ubyte.gz",
              "label 7 at index 1 is not a class of the training labels (0 to 6)");
  auto magic = Header(0x0e03, {1, 2, 2});
  magic.resize(magic.size() + 4);
  WriteFileBytes(dir_ / "t10k-images-idx4-ubyte.gz", Gzip(magic));
  ExpectError(TrainingData::Load(dir_.string()).status(), "t10k-images-idx4-ubyte.gz", "wrong magic number 0x00000e03");
  fs::remove(dir_ / "t10k-images-idx4-ubyte.gz");
  auto cut = Header(0x804, {4, 32, 32, 3});
  cut.resize(cut.size() + 100);
  WriteFileBytes(dir_ / "t10k-images-idx4-ubyte", cut);
  ExpectError(TrainingData::CheckFiles(dir_.string()).status(), "t10k-images-idx4-ubyte", "truncated");
  ExpectError(TrainingData::Load(dir_.string()).status(), "t10k-images-idx4-ubyte", "truncated");
}

TEST_F(IdxDataTest, NamesWhatItLooksFor) {
  WriteIdxSplit(dir_, "train", 16, 16, 1, 2, 4);
  ExpectError(TrainingData::Load(dir_.string()).status(), "t10k-images-idx3-ubyte.gz",
              "looked for {train,t10k,test}-images-idx{3,4}-{ubyte,float}[.gz]");
  fs::remove(dir_ / "train-labels-idx1-ubyte.gz");
  ExpectError(TrainingData::Load(dir_.string(), false).status(), "train-labels-idx1-ubyte.gz", "no such file");
  WriteIdxSplit(dir_, "train", 16, 16, 1, 2, 4);
  WriteIdxSplit(dir_, "t10k", 16, 15, 1, 2, 4);
  ExpectError(TrainingData::CheckFiles(dir_.string()).status(), "t10k-images-idx3-ubyte.gz",
              "images are 16x15x1, but the training images are 16x16x1");
}

}  // namespace
}  // namespace mirrored::data
