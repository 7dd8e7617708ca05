// TFRecord files of tf.train.Example (tfrecord_data.h), written with
// mirrored's own TFRecord writer: raw-byte and float-list images over
// several shards, feature names, and every damage named by file, record
// and byte offset.
#include "worker/data/tfrecord_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/data/image_set_test_util.h"
#include "worker/data/tfrecord_reader.h"
#include "worker/data/training_data.h"

namespace mirrored::data {
namespace {

class TfRecordDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-tfrecord-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void ExpectError(const Status& s, const std::string& where, const std::string& problem) {
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(ExitCodeFor(s), 2) << s;
    EXPECT_NE(s.message().find(where), std::string::npos) << s;
    EXPECT_NE(s.message().find(problem), std::string::npos) << s;
  }
  // train: two shards of 20 (32x32x3, 7 classes); test: one of 8.
  void WriteColourSet() {
    WriteTfRecords(dir_ / "train-00000-of-00002.tfrecord", ImageExamples(20, 32, 32, 3, 7));
    WriteTfRecords(dir_ / "train-00001-of-00002.tfrecord", ImageExamples(20, 32, 32, 3, 7, false, 20));
    WriteTfRecords(dir_ / "test.tfrecord", ImageExamples(8, 32, 32, 3, 7));
  }
  fs::path dir_;
};

TEST_F(TfRecordDataTest, LoadsRawByteImagesFromShards) {
  WriteColourSet();
  EXPECT_TRUE(TfRecordData::IsTfRecordPath(dir_.string()));
  auto d = TrainingData::Load(dir_.string());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape().ImageString(), "32x32x3");
  EXPECT_EQ(d->shape().classes, 7);
  ASSERT_EQ(d->train().size(), 40u);
  EXPECT_EQ(d->test().size(), 8u);
  EXPECT_FLOAT_EQ(d->train().pixel(27, 3071), float(SyntheticPixel(27, 3071)) / 255.0f);
  EXPECT_EQ(d->train().label(27), 6);
  std::vector<float> images(3072);
  int32_t label = -1;
  const uint32_t idx = 33;
  d->train().Gather({&idx, 1}, images.data(), &label);
  EXPECT_FLOAT_EQ(images[1000], float(SyntheticPixel(33, 1000)) / 255.0f);
  EXPECT_EQ(label, 5);
  auto shape = TrainingData::CheckFiles(dir_.string());
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->ImageString(), "32x32x3");
}

TEST_F(TfRecordDataTest, LoadsFloatImagesWithHeightWidthAndOtherKeys) {
  std::vector<tensorflow::Example> train, test;
  for (size_t i = 0; i < 12; ++i) train.push_back(ImageExample(i, 20, 20, 1, 4, true, "pixels", "target"));
  for (size_t i = 0; i < 4; ++i) test.push_back(ImageExample(i, 20, 20, 1, 4, true, "pixels", "target"));
  WriteTfRecords(dir_ / "train.tfrecords", train);
  WriteTfRecords(dir_ / "test.tfrecords", test);
  ExpectError(TrainingData::Load(dir_.string()).status(), "train.tfrecords: record 0 at byte 0",
              "no feature \"image\" (features: \"depth\", \"height\", \"pixels\", \"target\", \"width\"");
  auto d = TrainingData::Load(dir_.string(), true, {.tfrecord_image_key = "pixels", .tfrecord_label_key = "target"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape().ImageString(), "20x20x1");
  EXPECT_EQ(d->shape().classes, 4);
  EXPECT_FLOAT_EQ(d->test().pixel(3, 399), float(SyntheticPixel(3, 399)) / 255.0f);
}

TEST_F(TfRecordDataTest, ImageRawIsTheFallbackName) {
  std::vector<tensorflow::Example> train;
  for (size_t i = 0; i < 6; ++i) train.push_back(ImageExample(i, 8, 8, 1, 2, false, "image_raw"));
  WriteTfRecords(dir_ / "train.tfrecord", train);
  auto d = TrainingData::Load(dir_.string(), /*with_test=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape().classes, 2);
}

TEST_F(TfRecordDataTest, BadCrcNamesTheRecordAndItsOffset) {
  WriteColourSet();
  const fs::path file = dir_ / "test.tfrecord";
  const size_t record = ImageExample(0, 32, 32, 3, 7).SerializeAsString().size();
  const size_t framed = TfRecordReader::kHeaderBytes + record + TfRecordReader::kFooterBytes;
  {  // one byte of record 2's data
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(2 * framed + TfRecordReader::kHeaderBytes + 40));
    f.put('\x5a');
  }
  ExpectError(TrainingData::Load(dir_.string()).status(),
              file.string() + ": record 2 at byte " + std::to_string(2 * framed), "the data's CRC does not match");
  {  // record 0's length
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1);
    f.put('\x7f');
  }
  ExpectError(TrainingData::Load(dir_.string()).status(), file.string() + ": record 0 at byte 0",
              "the length's CRC does not match");
  WriteTfRecords(file, ImageExamples(8, 32, 32, 3, 7));
  fs::resize_file(file, fs::file_size(file) - 10);
  ExpectError(TrainingData::Load(dir_.string()).status(),
              file.string() + ": record 7 at byte " + std::to_string(7 * framed), "truncated");
}

TEST_F(TfRecordDataTest, RefusesLabelsShapesAndKindsThatDoNotFit) {
  WriteColourSet();
  std::vector<tensorflow::Example> test = ImageExamples(3, 32, 32, 3, 7);
  (*test[1].mutable_features()->mutable_feature())["label"].mutable_int64_list()->set_value(0, 7);
  WriteTfRecords(dir_ / "test.tfrecord", test);
  ExpectError(TrainingData::Load(dir_.string()).status(), "test.tfrecord: record 1 at byte",
              "feature \"label\": label 7 is not a class of the training labels (0 to 6)");
  (*test[1].mutable_features()->mutable_feature())["label"].mutable_int64_list()->set_value(0, -1);
  WriteTfRecords(dir_ / "test.tfrecord", test);
  ExpectError(TrainingData::Load(dir_.string()).status(), "test.tfrecord: record 1 at byte", "label -1 is negative");
  test[1] = ImageExample(1, 32, 31, 3, 7);
  WriteTfRecords(dir_ / "test.tfrecord", test);
  ExpectError(TrainingData::Load(dir_.string()).status(), "test.tfrecord: record 1 at byte",
              "image 32x31x3, but " + (dir_ / "test.tfrecord").string() + ": record 0 at byte 0's is 32x32x3");
  (*test[1].mutable_features()->mutable_feature())["shape"].mutable_int64_list()->set_value(1, 32);
  WriteTfRecords(dir_ / "test.tfrecord", test);
  ExpectError(TrainingData::Load(dir_.string()).status(), "test.tfrecord: record 1 at byte",
              "feature \"image\" holds 1 value(s) of 2976 bytes; shape 32x32x3 needs one of 3072 raw uint8 pixels");
  WriteTfRecords(dir_ / "test.tfrecord", ImageExamples(3, 32, 32, 3, 7, /*floats=*/true));
  ExpectError(TrainingData::CheckFiles(dir_.string()).status(), "test.tfrecord: record 0 at byte 0",
              "images are 32x32x3 floats, but");
  WriteFileBytes(dir_ / "test.tfrecord", {1, 2, 3});
  ExpectError(TrainingData::Load(dir_.string()).status(), "test.tfrecord: record 0 at byte 0", "truncated");
}

}  // namespace
}  // namespace mirrored::data
